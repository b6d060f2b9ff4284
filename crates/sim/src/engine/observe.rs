//! What an interval's end reports: per tenant the counters and the observation the
//! control step gets (as the live controller gets it from a node: requests, hits per
//! level, latencies, service times, dirty share, hit-ratio curves), the hot tiers' counts,
//! each disk's busy share,
//! the interval's rows for `intervals.csv`, and the new plan applied.
//!
//! Does not own: the decision (`control`), how a plan is applied (`hierarchy`), the
//! counters' arithmetic (`crate::stats`).

use super::hierarchy::running_policy;
use super::Engine;
use crate::scenario::WritePolicy;
use crate::stats::{Counters, IntervalRow, Served};
use crate::SimError;
use control::{
    Observations, Plan, PolicyCurve, ServerObservation, TenantObservation, TierObservation,
};

impl Engine<'_> {
    /// Ends the interval at `boundary` (of length `len`): its counters and rows are
    /// recorded, the control step runs on what was observed, and its plan is applied.
    pub(super) fn close_interval(
        &mut self,
        boundary: f64,
        len: f64,
        intervals: &mut Vec<Vec<Counters>>,
        rows: &mut Vec<IntervalRow>,
        plans: &mut Vec<Plan>,
    ) -> Result<(), SimError> {
        let sc = self.sc;
        let mut obs = Observations {
            seconds: len,
            tenants: Vec::new(),
            tiers: Vec::new(),
            servers: Vec::new(),
        };
        let mut counters = Vec::new();
        for i in 0..sc.tenants.len() {
            let Some(rt) = self.tenants[i].as_mut() else {
                obs.tenants.push(TenantObservation::default());
                counters.push(Counters::default());
                continue;
            };
            let c = std::mem::take(&mut rt.counters);
            let mut curves = Vec::new();
            if let Some(p) = rt.profiler.as_mut() {
                if p.accesses() > 0 {
                    curves.push(PolicyCurve {
                        policy: "lru".into(),
                        curve: p.windowed_curve(&rt.curve_sizes),
                    });
                }
            }
            for (name, ph) in &mut rt.phantoms {
                if ph.sampled() > 0 {
                    curves.push(PolicyCurve {
                        policy: name.clone(),
                        curve: ph.curve(),
                    });
                }
            }
            let split = c.read_write_ms();
            // The share of its resident blocks (both levels) that are dirty, as a node's
            // cache statistics count them.
            let (mut resident, mut dirty) = (0u64, 0u64);
            let spec = &sc.tenants[i];
            let levels = std::iter::once(&self.hosts[spec.host].level)
                .chain(spec.servers.iter().map(|&s| &self.servers[s].level));
            for level in levels {
                if let Some(p) = level.of_tenant[i] {
                    let (r, d) = level.parts[p].dirty_count();
                    resident += r;
                    dirty += d;
                }
            }
            obs.tenants.push(TenantObservation {
                dirty_share: (resident > 0).then(|| dirty as f64 / resident as f64),
                requests: c.requests,
                bytes: c.bytes,
                l1: control::LevelCount {
                    lookups: c.l1_lookups,
                    hits: c.l1_hits,
                },
                l2: control::LevelCount {
                    lookups: c.l2_lookups,
                    hits: c.l2_hits,
                },
                mean_latency_ms: c.mean_ms(),
                p99_latency_ms: c.p99_ms(),
                service: control::ObservedService {
                    l1_hit_ms: c.kind_ms(Served::Level1),
                    l2_hit_ms: c.kind_ms(Served::Level2),
                    miss_ms: c.kind_ms(Served::Disk),
                },
                curves,
                writes: c.writes,
                read_latency_ms: split.map(|(r, _)| r),
                write_latency_ms: split.map(|(_, w)| w),
                write_back: sc.l1_write == WritePolicy::WriteBack,
                latency_quantiles: c.quantiles(),
                miss_quantiles: c.miss_quantiles(),
            });
            counters.push(c);
        }
        for s in &mut self.servers {
            let (hits, migrations) = s.tier.as_mut().map_or((0, 0), |t| {
                let r = (t.hits, t.migrations);
                t.hits = 0;
                t.migrations = 0;
                r
            });
            obs.tiers.push(TierObservation { hits, migrations });
        }
        // Each disk's busy share of the interval (its reserved service time; what is
        // booked past the boundary counts in the interval it was booked in).
        for (s, server) in self.servers.iter().enumerate() {
            let busy = server.disk.busy();
            let share = ((busy - self.disk_busy[s]) / len.max(1e-9)).clamp(0.0, 1.0);
            self.disk_busy[s] = busy;
            obs.servers.push(ServerObservation {
                backend_busy: Some(share),
            });
        }
        self.rows_for(intervals.len() as u64, boundary, len, &counters, rows);
        counters.iter_mut().for_each(Counters::seal);
        intervals.push(counters);
        let plan = self
            .controller
            .step(boundary, &obs)
            .map_err(SimError::Control)?;
        self.apply(&plan, boundary)?;
        self.plan = plan.clone();
        plans.push(plan);
        Ok(())
    }

    /// The rows of interval `k` (ending at `end`, `len` seconds long) for the tenants that
    /// ran, with the plan in force.
    pub(super) fn rows_for(
        &self,
        k: u64,
        end: f64,
        len: f64,
        counters: &[Counters],
        rows: &mut Vec<IntervalRow>,
    ) {
        for (i, c) in counters.iter().enumerate() {
            if self.tenants[i].is_none() {
                continue;
            }
            let tp = &self.plan.tenants[i];
            let split = c.read_write_ms();
            rows.push(IntervalRow {
                scheme: self.scheme.name.clone(),
                interval: k,
                time_s: end,
                tenant: self.sc.tenants[i].name.clone(),
                requests: c.requests,
                iops: c.requests as f64 / len,
                mean_latency_ms: c.mean_ms(),
                p99_latency_ms: c.p99_ms(),
                l1_hit_ratio: c.l1_hit_ratio(),
                l2_hit_ratio: c.l2_hit_ratio(),
                l1_size: tp.l1.size,
                l2_size: tp.l2_total(),
                target_ms: tp.target_latency_ms,
                slo_met: None,
                eviction: running_policy(self.sc, self.scheme.policy_choice.is_some(), tp, 1)
                    .to_string(),
                l1_reason: tp.l1.reason.to_string(),
                l2_reason: tp
                    .l2
                    .first()
                    .map_or(String::new(), |p| p.reason.to_string()),
                deviance: None,
                migrations: c.migrations,
                disk_blocks: c.disk_blocks,
                writes: c.writes,
                read_latency_ms: split.map(|(r, _)| r),
                write_latency_ms: split.map(|(_, w)| w),
                host_share: share_of(&self.plan, "host", self.sc.tenants[i].host, i),
                disk_share: share_of(&self.plan, "server", self.sc.tenants[i].servers[0], i),
            });
        }
    }
}

/// Tenant `i`'s proportion of node `node` at `level` in `plan`, if the plan sets one.
fn share_of(plan: &control::Plan, level: &str, node: usize, i: usize) -> Option<f64> {
    plan.bandwidth
        .iter()
        .find(|r| r.level == level && r.node == node)
        .and_then(|r| r.shares.iter().find(|s| s.0 == i))
        .map(|s| s.1)
}
