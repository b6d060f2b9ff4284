//! One enforcement interval, its steps in order ([`Service::tick`]), and the loop that
//! runs one every interval ([`Service::run`]), taking over from the store when a replica
//! starts leading. Nodes are called outside the service's lock: the poll and the
//! reconcile hold it only to read what to call and to write what came back.

use super::{to_json, unix_now, Inner, Service};
use crate::error::ServiceError;
use crate::observe::build;
use crate::placement::{topology, PlacedVolume};
use crate::poll::{self, client_for};
use crate::reconcile::{self, Desired, NodeOutcome, Work};
use crate::registry::NodeEntry;
use crate::store;
use crate::views::{self, Interval, IntervalReport};
use control::{Controller, Observations, Plan, Topology};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// Intervals kept in memory for the console and the demo.
const SERIES: usize = 240;

impl Service {
    /// The node's client: the one kept from earlier intervals (its connections reused)
    /// while the node's address and token stay the same.
    fn client_for(&self, e: &NodeEntry) -> Option<api::client::NodeClient> {
        let (api, token) = poll::address(e, &self.config_tokens)?;
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(&e.name) {
            if c.api == api && c.token == token {
                return Some(c.client.clone());
            }
        }
        let client = client_for(e, &self.config_tokens, self.cfg.interval)?;
        clients.insert(
            e.name.clone(),
            super::CachedClient {
                api: api.to_string(),
                token: token.to_string(),
                client: client.clone(),
            },
        );
        Some(client)
    }

    /// One enforcement interval (blocking: polls and programs the nodes).
    pub fn tick(&self) -> Result<IntervalReport, ServiceError> {
        self.must_lead()?;
        // 1. Poll (outside the lock).
        let began = Instant::now();
        let targets: Vec<_> = {
            let g = self.lock();
            self.clients
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|name, _| g.nodes.contains_key(name));
            g.nodes
                .values()
                .map(|e| (e.name.clone(), self.client_for(e)))
                .collect()
        };
        let polled = poll::poll(&targets);
        let polled_at = Instant::now();
        let now = unix_now();
        let mut g = self.lock();
        let seconds = g
            .last_poll
            .map(|t| t.elapsed().as_secs_f64())
            .unwrap_or(self.cfg.interval.as_secs_f64())
            .max(1e-3);
        g.last_poll = Some(Instant::now());
        let bs = self.cfg.block_size.0;
        let (by_node, tier_periods) = {
            let inner = &mut *g;
            poll::absorb(
                polled,
                &mut inner.nodes,
                &mut inner.judge,
                &mut inner.deltas,
                bs,
                self.cfg.down_after,
                now,
            )
        };
        // 2. Observations and 3. the step.
        let absorbed_at = Instant::now();
        let (topo, vols) = topology(&self.cfg, &g.tenants, &g.nodes, false);
        let placed_at = Instant::now();
        let (mut obs, measured) = build(&vols, &by_node, bs, seconds);
        let built_at = Instant::now();
        // Each storage server's hot-tier period, in the topology's order.
        obs.tiers = topo
            .servers
            .iter()
            .map(|s| tier_periods.get(&s.name).copied().unwrap_or_default())
            .collect();
        let images = crate::consolidate::observed(&self.config.images, &by_node, bs);
        let plan = self.step(&mut g, &topo, &vols, &obs, &images)?;
        let stepped_at = Instant::now();
        // 4. Reconcile (outside the lock).
        let (work, left_alone, epochs) = self.work(&g, &topo, plan.as_ref(), &vols, &by_node);
        drop(g);
        let mut outcomes = reconcile::apply_all(&work);
        let reconciled_at = Instant::now();
        // 5. Persist and record.
        let mut g = self.lock();
        remember_reconciled(&mut g.reconciled, &work, &outcomes, &epochs);
        outcomes.extend(left_alone);
        note_programmed(&mut g.nodes, &outcomes, &epochs);
        let interval = Interval {
            plan: plan.as_ref(),
            topo: &topo,
            vols: &vols,
            measured: &measured,
            images: &images,
            time: now,
            seconds,
        };
        let report = views::report(&g.tenants, &g.nodes, &interval, bs, &outcomes);
        self.record(&g, &report, plan.as_ref(), now)?;
        g.plan = plan;
        g.last_obs = Some((vols.iter().map(|v| v.name.clone()).collect(), obs));
        g.series.push_back(report.clone());
        while g.series.len() > SERIES {
            g.series.pop_front();
        }
        let secs = |a: Instant, b: Instant| b.duration_since(a).as_secs_f64();
        tracing::debug!(
            target: "controller::timing",
            poll_s = secs(began, polled_at),
            step_s = secs(polled_at, stepped_at),
            absorb_s = secs(polled_at, absorbed_at),
            topology_s = secs(absorbed_at, placed_at),
            observations_s = secs(placed_at, built_at),
            reconcile_s = secs(stepped_at, reconciled_at),
            record_s = secs(reconciled_at, Instant::now()),
            "interval phases"
        );
        Ok(report)
    }

    /// Step 3: the `control` step on the interval's observations, resumed from and
    /// leaving the carried state, with the static bandwidth shares, the scale-out splits
    /// and the images' consolidated caches ([`crate::consolidate`]) filled in; `None`
    /// without a tenant.
    fn step(
        &self,
        g: &mut Inner,
        topo: &Topology,
        vols: &[PlacedVolume],
        obs: &Observations,
        images: &[crate::consolidate::ImageSeen],
    ) -> Result<Option<Plan>, ServiceError> {
        if topo.tenants.is_empty() {
            return Ok(None);
        }
        let t = self.started.elapsed().as_secs_f64();
        // The controller is resumed (the topology checked, the state fitted to it) only
        // when the topology differs from the last interval's.
        if g.control.as_ref().map(Controller::topology) != Some(topo) {
            g.control = Some(
                Controller::resume(topo.clone(), self.scheme.clone(), g.state.clone())
                    .map_err(|e| ServiceError::Control(e.to_string()))?,
            );
        }
        let ctl = g.control.as_mut().expect("resumed above");
        let stepped = ctl.step(t, obs);
        let mut plan = match stepped {
            Ok(p) => p,
            Err(e) => {
                // Its state may be half-stepped: the next interval resumes from `state`.
                g.control = None;
                return Err(ServiceError::Control(e.to_string()));
            }
        };
        g.state = ctl.state().clone();
        self.cfg.bandwidth.fill(topo, vols, &mut plan);
        crate::scaleout::fill(topo, vols, obs, &mut plan);
        crate::consolidate::fill(&self.config.images, topo, vols, images, &mut plan);
        for (i, o) in obs.tenants.iter().enumerate() {
            let tp = &plan.tenants[i];
            tracing::debug!(
                tenant = %vols[i].name,
                requests = o.requests,
                writes = o.writes,
                mean_ms = o.mean_latency_ms,
                read_ms = ?o.read_latency_ms,
                write_ms = ?o.write_latency_ms,
                l1_hit_ms = ?o.service.l1_hit_ms,
                l2_hit_ms = ?o.service.l2_hit_ms,
                miss_ms = ?o.service.miss_ms,
                predicted_ms = tp.predicted_latency_ms,
                target_ms = ?tp.target_latency_ms,
                "observed and planned"
            );
        }
        Ok(Some(plan))
    }

    /// Step 4's work: every node that is up, with what the plan wants on it (with no
    /// tenant at all there is no plan, and no cache is wanted anywhere); the outcomes of
    /// the nodes left alone, which still hold what their last reconcile applied for the
    /// same part of the plan ([`reconcile::Reconciled::holds`]), except on their turn to
    /// be checked (one interval in [`reconcile::CHECK_EVERY`]); and each node's epoch as
    /// it is now.
    fn work(
        &self,
        g: &Inner,
        topo: &Topology,
        plan: Option<&Plan>,
        vols: &[PlacedVolume],
        by_node: &poll::ByNode,
    ) -> (Vec<Work>, Vec<NodeOutcome>, HashMap<String, String>) {
        let members = plan.map(|p| reconcile::Members::of(topo, p));
        let turn = g.state.interval as usize % reconcile::CHECK_EVERY;
        let (mut work, mut left_alone) = (Vec::new(), Vec::new());
        for (k, e) in g.nodes.values().enumerate().filter(|(_, e)| e.up) {
            let Some(client) = self.client_for(e) else {
                continue;
            };
            let want = match (plan, &members) {
                (Some(p), Some(m)) => reconcile::desired(
                    topo,
                    p,
                    vols,
                    &self.config.images,
                    e,
                    self.cfg.block_size.0,
                    m,
                ),
                _ => Desired::default(),
            };
            let fresh = e.programmed.as_deref() != Some(e.epoch.as_str());
            let checked = k % reconcile::CHECK_EVERY == turn;
            match g.reconciled.get(&e.name) {
                Some(r)
                    if !fresh
                        && !checked
                        && r.holds(&e.epoch, &want, by_node.get(&e.name).map(|m| &**m)) =>
                {
                    left_alone.push(r.unchanged());
                }
                _ => work.push(Work {
                    node: e.name.clone(),
                    client,
                    want,
                    fresh,
                }),
            }
        }
        let epochs = g
            .nodes
            .values()
            .map(|e| (e.name.clone(), e.epoch.clone()))
            .collect();
        (work, left_alone, epochs)
    }

    /// Step 5: the carried state, the registry and the plan in one store batch, and the
    /// interval's decisions handed to the history writer (a row per volume and one `*`
    /// row, written behind: [`crate::history`]).
    fn record(
        &self,
        g: &Inner,
        report: &IntervalReport,
        plan: Option<&Plan>,
        now: f64,
    ) -> Result<(), ServiceError> {
        let began = Instant::now();
        let nodes: Vec<&NodeEntry> = g.nodes.values().collect();
        let mut batch = vec![
            (store::STATE, Some(to_json(&g.state))),
            (store::NODES, Some(to_json(&nodes))),
        ];
        if let Some(p) = plan {
            batch.push(("plan", Some(to_json(p))));
        }
        let serialized = Instant::now();
        self.store.put(&batch)?;
        let put = Instant::now();
        self.history.append(crate::history::Batch {
            interval: report.interval,
            time: now,
            rows: report.rows.clone(),
            summary: serde_json::json!({"scheme": self.scheme.name,
                "infeasible": report.infeasible, "actions": report.actions,
                "allocations": report.allocations,
                "predicted_fair_speedup": plan.map(|p| p.predicted_fair_speedup)}),
        })?;
        let secs = |a: Instant, b: Instant| b.duration_since(a).as_secs_f64();
        tracing::debug!(
            target: "controller::timing",
            serialize_s = secs(began, serialized),
            put_s = secs(serialized, put),
            history_queued_s = secs(put, Instant::now()),
            "record phases"
        );
        Ok(())
    }

    /// One round of the loop: a leader (or a sole controller) runs [`Service::tick`],
    /// first reloading the store's state if it has just started leading; a standby
    /// reloads the state so its read API follows the leader's.
    fn round(&self) -> Result<IntervalReport, ServiceError> {
        let leading = self.leading();
        let was = std::mem::replace(&mut self.lock().was_leading, leading);
        if self.election.is_some() && (!leading || !was) {
            self.reload()?;
            if !leading {
                return Err(ServiceError::Conflict("standby".into()));
            }
            tracing::info!("took over: state loaded from the store");
            self.persist_config()?;
        }
        self.tick()
    }

    /// Runs [`Service::round`] every interval until `stop` says so (on the blocking pool).
    pub async fn run(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut every = tokio::time::interval(self.interval());
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = stop.changed() => return,
            }
            if *stop.borrow() {
                return;
            }
            let s = self.clone();
            match tokio::task::spawn_blocking(move || s.round()).await {
                Ok(Ok(r)) => tracing::debug!(interval = r.interval, "interval done"),
                Ok(Err(_)) if !self.leading() => {}
                Ok(Err(e)) => tracing::error!(%e, "interval failed"),
                Err(e) => tracing::error!(%e, "interval panicked"),
            }
        }
    }
}

/// Keeps what each node reconciled this interval now holds, where it took its whole part
/// of the plan (else it is called again next interval), and forgets nodes no longer
/// registered.
fn remember_reconciled(
    reconciled: &mut HashMap<String, reconcile::Reconciled>,
    work: &[Work],
    outcomes: &[NodeOutcome],
    epochs: &HashMap<String, String>,
) {
    for (w, o) in work.iter().zip(outcomes) {
        match epochs.get(&w.node) {
            Some(epoch) if o.complete() && o.applied.is_some() => {
                let outcome = NodeOutcome {
                    node: o.node.clone(),
                    applied: o.applied.clone(),
                    tiers: o.tiers.clone(),
                    ..Default::default()
                };
                reconciled.insert(
                    w.node.clone(),
                    reconcile::Reconciled {
                        epoch: epoch.clone(),
                        want: w.want.clone(),
                        outcome,
                    },
                );
            }
            _ => {
                reconciled.remove(&w.node);
            }
        }
    }
    reconciled.retain(|name, _| epochs.contains_key(name));
}

/// Keeps each reconciled node's outcome: programmed at its epoch when it holds the whole
/// plan, else the first refusal or error (each logged; retried at the next interval).
fn note_programmed(
    nodes: &mut BTreeMap<String, NodeEntry>,
    outcomes: &[NodeOutcome],
    epochs: &HashMap<String, String>,
) {
    for o in outcomes {
        let Some(e) = nodes.get_mut(&o.node) else {
            continue;
        };
        for r in &o.refused {
            tracing::warn!(node = %o.node, field = %r.field, wanted = %r.wanted,
                reason = %r.reason, unsupported = r.unsupported,
                "node did not take a field of the plan; the rest was applied");
        }
        match o.first_error() {
            None => e.programmed = epochs.get(&o.node).cloned(),
            Some(err) => {
                if let Some(u) = &o.unreachable {
                    tracing::warn!(node = %o.node, err = %u, "reconcile failed; retried next interval");
                }
                e.last_error = Some(err);
            }
        }
    }
}
