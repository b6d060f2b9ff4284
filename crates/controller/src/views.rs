//! What the API and the console show: one interval's report ([`report`]: per volume its
//! row, the planned sizes per node, the SLOs out of reach and what reconciling changed,
//! and per consolidated image cache its planned and applied bytes, resident blocks and
//! the interval's hits),
//! the tenants with their volumes' last rows, why a tenant has the sizes it has
//! ([`View::explain`]), its curves, and its decisions kept in the store ([`history`]).
//! Views read a [`View`] of the service's state, taken under its lock, and change nothing.
//! Views that name a volume find it by name in the last observations.

use crate::config::TenantConfig;
use crate::error::ServiceError;
use crate::observe::Measured;
use crate::placement::PlacedVolume;
use crate::reconcile::NodeOutcome;
use crate::registry::NodeEntry;
use crate::store::{HistoryEntry, Store};
use api::controller::{CurveView, Explanation, VolumeCurves, VolumeExplanation};
use control::{Observations, Plan, Topology};
use std::collections::{BTreeMap, HashMap};

/// One volume's row of an interval: the contract's type.
pub use api::controller::Row;

/// One interval as the console and the demo show it: the contract's type.
pub use api::controller::IntervalReport;

/// A tenant as the API shows it: its configuration and its volumes' last rows.
pub type TenantView = api::controller::TenantView<TenantConfig>;

/// The service's state as the views read it.
pub struct View<'a> {
    /// The tenants.
    pub tenants: &'a [TenantConfig],
    /// The last plan.
    pub plan: Option<&'a Plan>,
    /// The last interval.
    pub last: Option<&'a IntervalReport>,
    /// The last interval's observations, with the volume each one is of.
    pub last_obs: Option<&'a (Vec<String>, Observations)>,
    /// The scheme's name.
    pub scheme: &'a str,
    /// Bytes per block.
    pub block_size: u64,
}

impl View<'_> {
    /// The tenants with their volumes' last rows.
    pub fn tenants(&self) -> Vec<TenantView> {
        self.tenants
            .iter()
            .map(|t| TenantView {
                spec: t.clone(),
                status: self
                    .last
                    .map(|r| {
                        r.rows
                            .iter()
                            .filter(|row| row.owner == t.name)
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// Why a tenant's volumes have the sizes they have: the plan's numbers and reasons
    /// (by name, on `topo`), what was measured, its curve and its shortfall.
    pub fn explain(
        &self,
        name: &str,
        topo: &Topology,
    ) -> Result<Explanation<control::Slo>, ServiceError> {
        let t = self
            .tenants
            .iter()
            .find(|t| t.name == name || t.volumes.iter().any(|v| v.name == name))
            .ok_or_else(|| ServiceError::NotFound(format!("unknown tenant `{name}`")))?;
        let volumes = t
            .volumes
            .iter()
            .map(|v| VolumeExplanation {
                volume: v.name.clone(),
                host: v.host.clone(),
                hosts: v.hosts.clone(),
                servers: v.servers.clone(),
                plan: self
                    .plan
                    .and_then(|p| p.tenants.iter().find(|tp| tp.tenant == v.name))
                    .map(|tp| crate::wire::tenant_plan_view(topo, tp)),
                measured: self
                    .last
                    .and_then(|r| r.rows.iter().find(|r| r.tenant == v.name))
                    .cloned(),
                shortfall: self
                    .plan
                    .and_then(|p| p.infeasible.iter().find(|s| s.tenant == v.name))
                    .map(crate::wire::shortfall),
                curves: self.curves_of(&v.name),
            })
            .collect();
        Ok(Explanation {
            tenant: t.name.clone(),
            slo: t.slo,
            class: t.class.clone(),
            scheme: self.scheme.to_string(),
            volumes,
        })
    }

    fn curves_of(&self, volume: &str) -> Option<Vec<CurveView>> {
        let (names, obs) = self.last_obs?;
        let i = names.iter().position(|n| n == volume)?;
        let bs = self.block_size;
        obs.tenants.get(i).map(|o| {
            o.curves
                .iter()
                .map(|c| CurveView {
                    policy: c.policy.clone(),
                    points: c
                        .curve
                        .points()
                        .iter()
                        .map(|p| (p.cache_size * bs, p.miss_ratio))
                        .collect(),
                })
                .collect()
        })
    }

    /// Per volume, its curves (bytes, miss ratio) and the planned total size, for the
    /// console.
    pub fn curves(&self) -> BTreeMap<String, VolumeCurves> {
        let mut out = BTreeMap::new();
        for t in self.tenants {
            for v in &t.volumes {
                let planned = self
                    .plan
                    .and_then(|p| p.tenants.iter().find(|tp| tp.tenant == v.name))
                    .map(|tp| (tp.l1.size + tp.l2_total()) * self.block_size);
                out.insert(
                    v.name.clone(),
                    VolumeCurves {
                        curves: self.curves_of(&v.name),
                        chosen_bytes: planned,
                    },
                );
            }
        }
        out
    }
}

/// Decisions kept in the store: of a volume, of every volume of a tenant (merged in
/// interval order, the last `limit`), or of all (`tenant` `None`).
pub fn history(
    store: &dyn Store,
    tenants: &[TenantConfig],
    tenant: Option<&str>,
    limit: usize,
) -> Result<Vec<HistoryEntry>, ServiceError> {
    if let Some(t) = tenant {
        let known = tenants
            .iter()
            .any(|s| s.name == t || s.volumes.iter().any(|v| v.name == t));
        if !known {
            return Err(ServiceError::NotFound(format!("unknown tenant `{t}`")));
        }
        let vols: Vec<String> = tenants
            .iter()
            .filter(|s| s.name == t)
            .flat_map(|s| s.volumes.iter().map(|v| v.name.clone()))
            .collect();
        if !vols.is_empty() && !vols.iter().any(|v| v == t) {
            let mut all = Vec::new();
            for v in vols {
                all.extend(store.history(Some(&v), limit)?);
            }
            all.sort_by_key(|h| h.interval);
            let skip = all.len().saturating_sub(limit);
            return Ok(all.split_off(skip));
        }
    }
    Ok(store.history(tenant, limit)?)
}

/// What one interval planned and measured, for [`report`].
pub struct Interval<'a> {
    /// The plan (`None`: no tenant).
    pub plan: Option<&'a Plan>,
    /// The topology it was planned on.
    pub topo: &'a Topology,
    /// Its volumes, in the plan's order.
    pub vols: &'a [PlacedVolume],
    /// What was measured of each volume.
    pub measured: &'a [Measured],
    /// What the servers observed of each image ([`crate::consolidate`]).
    pub images: &'a [crate::consolidate::ImageSeen],
    /// Unix seconds.
    pub time: f64,
    /// Length (s).
    pub seconds: f64,
}

/// The size of cache `cache` on `node` as the reconcile read it back, if it did.
fn applied_size(outcomes: &HashMap<&str, &NodeOutcome>, node: &str, cache: &str) -> Option<u64> {
    let o = outcomes.get(node)?;
    let caches = o.applied.as_ref()?;
    Some(
        caches
            .iter()
            .find(|c| c.name == cache)
            .or_else(|| caches.iter().find(|c| c.name == api::node::SHARED_CACHE))
            .map_or(0, |c| c.size_bytes),
    )
}

/// The interval's report: a row per volume (its SLO judged on the interval's own
/// terms, its sizes as planned and as its nodes hold them after the reconcile), the
/// planned sizes per node, and the reconcile's actions and refusals.
pub fn report(
    tenants: &[TenantConfig],
    nodes: &BTreeMap<String, NodeEntry>,
    i: &Interval<'_>,
    bs: u64,
    outcomes: &[NodeOutcome],
) -> IntervalReport {
    let (plan, topo) = (i.plan, i.topo);
    let mut rows = Vec::new();
    let mut allocations: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    // Looked up once per volume: by name, not by a scan (10,000 volumes).
    let owners: HashMap<&str, &TenantConfig> =
        tenants.iter().map(|t| (t.name.as_str(), t)).collect();
    let by_node: HashMap<&str, &NodeOutcome> =
        outcomes.iter().map(|o| (o.node.as_str(), o)).collect();
    for (k, v) in i.vols.iter().enumerate() {
        let owner = owners.get(v.owner.as_str()).copied();
        let tp = plan.and_then(|p| p.tenants.get(k));
        let m = &i.measured[k];
        // The measured mean is held against the target in the interval's own terms
        // (`TenantPlan::interval_target_ms`: for a degradation SLO, scaled by what the
        // interval's workload would have cost at fair share).
        let target = tp.and_then(|t| t.interval_target_ms.or(t.target_latency_ms));
        // A tail SLO is judged on the interval's measured quantile against its bound.
        let tail = owner.and_then(|o| o.slo.as_ref()?.tail());
        let tail_ms = tail.and_then(|(q, _)| m.quantiles?.at(q));
        // Requests answered with an error miss any SLO, whatever the others measured.
        let met = match (tail, target, m.latency_ms) {
            (Some(_), _, _) | (_, Some(_), _) if m.failed > 0 => Some(false),
            (Some((_, bound)), _, Some(_)) => tail_ms.map(|v| v <= bound),
            (None, Some(t), Some(l)) => Some(l <= t),
            _ => None,
        };
        if let Some(tp) = tp {
            allocations
                .entry(topo.hosts[tp.l1.node].name.clone())
                .or_default()
                .insert(v.cache.clone(), tp.l1.size * bs);
            for p in &tp.l2 {
                *allocations
                    .entry(topo.servers[p.node].name.clone())
                    .or_default()
                    .entry(v.cache.clone())
                    .or_default() += p.size * bs;
            }
        }
        rows.push(Row {
            tenant: v.name.clone(),
            owner: v.owner.clone(),
            slo: owner.and_then(|o| o.slo).map(|s| s.to_string()),
            target_ms: target,
            latency_ms: m.latency_ms,
            p99_ms: m.p99_ms,
            tail_ms,
            l1_hit_ratio: m.l1_hit_ratio,
            l2_hit_ratio: m.l2_hit_ratio,
            l1_size: tp.map_or(0, |t| t.l1.size * bs),
            l2_size: tp.map_or(0, |t| t.l2_total() * bs),
            // As the node holds it after this interval's reconcile; a node not reconciled
            // (down, or unreachable) as it reported it at the poll.
            l1_applied: applied_size(&by_node, &v.host, &v.cache).unwrap_or(m.l1_size),
            l2_applied: {
                let each: Option<Vec<u64>> = v
                    .servers
                    .iter()
                    .map(|s| applied_size(&by_node, s, &v.cache))
                    .collect();
                each.map_or(m.l2_size, |e| e.iter().sum())
            },
            slo_met: met,
            failed_requests: m.failed,
            predicted_ms: tp.map_or(0.0, |t| t.predicted_latency_ms),
            l1_reason: tp.map_or(String::new(), |t| t.l1.reason.to_string()),
            l2_reason: tp
                .and_then(|t| t.l2.first())
                .map_or(String::new(), |p| p.reason.to_string()),
            eviction: tp.map_or(String::new(), |t| {
                format!("{} ({})", t.eviction, t.eviction_reason)
            }),
            failing: failing(v, nodes),
            requests: m.requests,
            iops: m.iops,
            mbps: m.mbps,
        });
    }
    let mut consolidated = Vec::new();
    for c in plan.map_or(&[][..], |p| &p.consolidated) {
        let server = topo.servers[c.server].name.clone();
        allocations
            .entry(server.clone())
            .or_default()
            .insert(c.image.clone(), c.size * bs);
        let held = outcomes
            .iter()
            .find(|o| o.node == server)
            .and_then(|o| o.applied.as_ref())
            .and_then(|a| a.iter().find(|x| x.name == c.image));
        let seen = i
            .images
            .iter()
            .find(|x| x.image == c.image && x.server == server);
        consolidated.push(api::controller::ConsolidatedRow {
            image: c.image.clone(),
            server,
            readers: c
                .readers
                .iter()
                .filter_map(|&k| i.vols.get(k).map(|v| v.name.clone()))
                .collect(),
            planned: c.size * bs,
            applied: held.map_or(0, |x| x.size_bytes),
            resident: held.map_or(0, |x| x.stats.resident),
            lookups: seen.map_or(0, |x| x.lookups),
            hits: seen.map_or(0, |x| x.hits),
        });
    }
    IntervalReport {
        interval: plan.map_or(0, |p| p.interval),
        time: i.time,
        seconds: i.seconds,
        rows,
        allocations,
        infeasible: plan
            .map(|p| p.infeasible.iter().map(crate::wire::shortfall).collect())
            .unwrap_or_default(),
        actions: outcomes.iter().flat_map(|o| o.actions.clone()).collect(),
        refused: outcomes.iter().flat_map(|o| o.refused.clone()).collect(),
        tiers: outcomes
            .iter()
            .filter(|o| !o.tiers.is_empty())
            .map(|o| (o.node.clone(), o.tiers.clone()))
            .collect(),
        consolidated,
    }
}

/// Why volume `v` is failing: its host or a server is down, or reports the link under
/// the volume's export down; `None` if none is.
fn failing(v: &PlacedVolume, nodes: &BTreeMap<String, NodeEntry>) -> Option<String> {
    let mut why = Vec::new();
    for n in std::iter::once(&v.host).chain(&v.servers) {
        let Some(e) = nodes.get(n) else { continue };
        if !e.up {
            why.push(format!("node `{n}` is down"));
            continue;
        }
        for u in e.degraded.iter().filter(|u| u.export == v.cache) {
            why.push(format!(
                "node `{n}`: upstream {} of export `{}` away for {:.1} s{}",
                u.upstream,
                u.export,
                u.down_secs,
                u.error
                    .as_deref()
                    .map(|x| format!(" ({x})"))
                    .unwrap_or_default()
            ));
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}
