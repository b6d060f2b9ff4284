//! What a run's numbers add up to: the summary types (`summary.json`) and each scheme's
//! summary over its counted intervals (latency, hit ratios, fair speedup, allocations,
//! the learners' error, policy switches, per-phase hit ratios).
//!
//! Does not own: SLO judgement (`judge`, which fills in the summary's SLO fields), running
//! (`jobs`).

use super::jobs::SchemeRun;
use crate::scenario::Scenario;
use crate::stats::deviance;
use crate::stats::Counters;
use serde::Serialize;
use std::collections::BTreeMap;

/// One tenant's results under one scheme.
#[derive(Clone, Debug, Serialize)]
pub struct TenantSummary {
    /// Requests counted.
    pub requests: u64,
    /// Level-1 hit ratio.
    pub l1_hit_ratio: f64,
    /// Level-2 hit ratio (of the lookups that reached level 2).
    pub l2_hit_ratio: f64,
    /// Level-1 block lookups and hits, level-2 block lookups and hits (counted period).
    pub blocks: [u64; 4],
    /// Mean latency (ms).
    pub mean_latency_ms: f64,
    /// 99th percentile (ms).
    pub p99_latency_ms: f64,
    /// Share of its counted intervals that met its SLO (`null` without one, or when no
    /// interval was judged).
    pub slo_met_share: Option<f64>,
    /// Counted intervals its SLO was judged in (0 without an SLO).
    pub slo_judged_intervals: u32,
    /// It has an SLO and no counted interval to judge it in.
    pub slo_unjudged: bool,
    /// Counted intervals whose plan called its SLO infeasible (shown beside, never left
    /// out of `slo_met_share`).
    pub infeasible_intervals: u32,
    /// Requests per second over the counted period.
    pub iops: f64,
    /// Block hits at either level per level-1 lookup.
    pub hit_ratio: f64,
    /// Blocks read from a hot tier.
    pub tier_hits: u64,
    /// Chunks placed in a hot tier.
    pub migrations: u64,
    /// Blocks requests read from a disk.
    pub disk_blocks: u64,
    /// Smallest, largest and last allocation (level-1 plus level-2 blocks) over the
    /// counted intervals.
    pub alloc_min: u64,
    /// See `alloc_min`.
    pub alloc_max: u64,
    /// See `alloc_min`.
    pub alloc_last: u64,
    /// Mean deviance from target over the last quarter of the run (`null` without an
    /// SLO; see [`deviance`]).
    pub deviance_final: Option<f64>,
}

/// One scheme's results.
#[derive(Clone, Debug, Serialize)]
pub struct SchemeSummary {
    /// Harmonic mean of fair-share latency over this scheme's latency.
    pub fair_speedup: f64,
    /// Mean latency over all counted requests (ms).
    pub mean_latency_ms: f64,
    /// 99th percentile over all counted requests (ms).
    pub p99_latency_ms: f64,
    /// Tenants with an SLO met in fewer than [`SLO_COMPLIANCE`] of their counted
    /// intervals, or never judged.
    pub slo_violations: u32,
    /// Share of the (tenant, counted interval) pairs with an SLO that met it (1 without
    /// SLOs).
    pub slo_met_share: f64,
    /// Tenants with an SLO and no counted interval to judge it in.
    pub slo_unjudged: u32,
    /// Intervals simulated.
    pub intervals: u64,
    /// Level-1 hit ratio over all tenants.
    pub l1_hit_ratio: f64,
    /// Level-2 hit ratio over all tenants.
    pub l2_hit_ratio: f64,
    /// Requests simulated (all intervals).
    pub requests: u64,
    /// Wall-clock seconds the simulation took.
    pub wall_seconds: f64,
    /// Simulated requests per wall-clock second.
    pub requests_per_second: f64,
    /// CPU seconds the simulating thread(s) spent (thread CPU clock: unlike the wall clock,
    /// it does not count time the thread waited for a core on a busy machine).
    pub cpu_seconds: f64,
    /// Simulated requests per CPU second: the speed on one core.
    pub requests_per_cpu_second: f64,
    /// Intervals whose plan reported an SLO it could not meet.
    pub infeasible_intervals: u64,
    /// The tenants' IOPS summed (each over its own counted period).
    pub iops: f64,
    /// Block hits at either level per level-1 lookup (all tenants).
    pub hit_ratio: f64,
    /// Blocks read from hot tiers.
    pub tier_hits: u64,
    /// Chunks placed in hot tiers (counted period).
    pub migrations: u64,
    /// Bytes those placements copied.
    pub migrated_bytes: u64,
    /// Blocks requests read from disks.
    pub disk_blocks: u64,
    /// Σ dft² over the tenants with an SLO, averaged over the last quarter of the
    /// intervals (the coordinated learners' error; 0 when every target is met exactly).
    pub error_final: f64,
    /// Share of (tenant, interval) pairs in the last quarter within 5 % of the target or
    /// better (1 without SLOs).
    pub targets_met_final: f64,
    /// Whether the tenants with an SLO settled on their targets within the run (see
    /// [`convergence`]).
    pub converged: bool,
    /// When they did, in simulated seconds from the start (the run's length when they
    /// never did).
    pub converged_s: f64,
    /// Eviction-policy switches over the run (all tenants).
    pub policy_switches: u64,
    /// Hit ratio (either level) per phase of `sim.phases` (counted intervals).
    pub phase_hit_ratio: Vec<f64>,
    /// Per tenant.
    pub tenants: BTreeMap<String, TenantSummary>,
}

/// A scenario's results (`summary.json`).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Requests replayed per scheme.
    pub requests: u64,
    /// Simulated seconds.
    pub seconds: f64,
    /// Whether this is the quick form of the scenario.
    pub quick: bool,
    /// Per scheme.
    pub schemes: BTreeMap<String, SchemeSummary>,
    /// The scenario's claims checked against this run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<crate::claims::Claim>,
}

/// The fair scheme's mean latency of tenant `i` in interval `iv`, when it had requests.
pub(super) fn fair_mean_ms(fair: &[Vec<Counters>], iv: usize, i: usize) -> Option<f64> {
    fair.get(iv)
        .and_then(|v| v.get(i))
        .filter(|c| c.requests > 0)
        .map(|c| c.mean_ms())
}

/// Each scheme's summary, in `order`; `fair_k` is the fair scheme's index. The SLO fields
/// are left for [`super::judge::judge_slos`].
pub(super) fn summarize(
    sc: &Scenario,
    order: &[String],
    runs: &[SchemeRun],
    fair_k: usize,
) -> BTreeMap<String, SchemeSummary> {
    let fair_tot: Vec<Counters> = (0..sc.tenants.len())
        .map(|i| runs[fair_k].counted(sc, i))
        .collect();
    let fair_run_intervals = &runs[fair_k].intervals;
    let chunk_bytes = sc
        .servers
        .iter()
        .find_map(|s| s.hot_tier.as_ref().map(|t| t.chunk_blocks * sc.block_size))
        .unwrap_or(0);
    let mut schemes = BTreeMap::new();
    for (k, name) in order.iter().enumerate() {
        let r = &runs[k];
        let mut tenants = BTreeMap::new();
        let mut total = Counters::default();
        let mut ratio_sum = 0.0;
        let mut ratio_n = 0usize;
        let mut iops = 0.0;
        for (i, t) in sc.tenants.iter().enumerate() {
            let c = r.counted(sc, i);
            let (warm, counted_secs) = (r.warm(sc, i), r.counted_secs(sc, i));
            iops += c.requests as f64 / counted_secs.max(1e-9);
            total.merge(&c);
            if c.requests > 0 && fair_tot[i].requests > 0 {
                ratio_sum += c.mean_ms() / fair_tot[i].mean_ms().max(1e-12);
                ratio_n += 1;
            }
            let sizes: Vec<u64> = r
                .rows
                .iter()
                .filter(|row| row.tenant == t.name && row.interval as usize >= warm)
                .map(|row| row.l1_size + row.l2_size)
                .collect();
            let last_q = r.spans[i].saturating_sub(1).max(1) * 3 / 4;
            let devs: Vec<f64> = match t.slo {
                None => Vec::new(),
                Some(slo) => (last_q..r.spans[i].saturating_sub(1).max(last_q + 1))
                    .filter_map(|iv| {
                        let c = r.intervals.get(iv)?.get(i)?;
                        let f = fair_mean_ms(fair_run_intervals, iv, i);
                        deviance(&slo, c, sc.interval, f)
                    })
                    .collect(),
            };
            tenants.insert(
                t.name.clone(),
                TenantSummary {
                    requests: c.requests,
                    l1_hit_ratio: c.l1_hit_ratio(),
                    l2_hit_ratio: c.l2_hit_ratio(),
                    blocks: [c.l1_lookups, c.l1_hits, c.l2_lookups, c.l2_hits],
                    mean_latency_ms: c.mean_ms(),
                    p99_latency_ms: c.p99_ms(),
                    slo_met_share: None,
                    slo_judged_intervals: 0,
                    slo_unjudged: false,
                    infeasible_intervals: 0,
                    iops: c.requests as f64 / counted_secs.max(1e-9),
                    hit_ratio: both_levels(&c),
                    tier_hits: c.tier_hits,
                    migrations: c.migrations,
                    disk_blocks: c.disk_blocks,
                    alloc_min: sizes.iter().copied().min().unwrap_or(0),
                    alloc_max: sizes.iter().copied().max().unwrap_or(0),
                    alloc_last: sizes.last().copied().unwrap_or(0),
                    deviance_final: (!devs.is_empty())
                        .then(|| devs.iter().sum::<f64>() / devs.len() as f64),
                },
            );
        }
        // The learners' error and targets met, over the last quarter of full intervals.
        let full = r.intervals.len().saturating_sub(1).max(1);
        let (mut err_sum, mut err_n, mut met, mut judged) = (0.0, 0usize, 0usize, 0usize);
        for iv in (full * 3 / 4)..full {
            let mut e = 0.0;
            for (i, t) in sc.tenants.iter().enumerate() {
                let Some(slo) = t.slo else { continue };
                let Some(c) = r.intervals.get(iv).and_then(|v| v.get(i)) else {
                    continue;
                };
                if let Some(d) = deviance(
                    &slo,
                    c,
                    sc.interval,
                    fair_mean_ms(fair_run_intervals, iv, i),
                ) {
                    e += d * d;
                    judged += 1;
                    met += (d >= -0.05) as usize;
                }
            }
            err_sum += e;
            err_n += 1;
        }
        let (converged, converged_s) = match convergence(sc, r, fair_run_intervals) {
            Some(k) => (true, k as f64 * sc.interval),
            None => (false, r.intervals.len() as f64 * sc.interval),
        };
        let mut switches = 0u64;
        for t in &sc.tenants {
            let mut last: Option<&str> = None;
            for row in r.rows.iter().filter(|row| row.tenant == t.name) {
                if last.is_some_and(|l| l != row.eviction) {
                    switches += 1;
                }
                last = Some(&row.eviction);
            }
        }
        let phase_of = |iv: usize| -> usize {
            let start = iv as f64 * sc.interval;
            sc.phases.iter().filter(|&&p| p <= start + 1e-9).count()
        };
        let mut phase = vec![Counters::default(); sc.phases.len() + 1];
        if !sc.phases.is_empty() {
            for (iv, row) in r.intervals.iter().enumerate() {
                for (i, c) in row.iter().enumerate() {
                    if iv >= r.warm(sc, i) {
                        phase[phase_of(iv)].merge(c);
                    }
                }
            }
        }
        schemes.insert(
            name.clone(),
            SchemeSummary {
                fair_speedup: if ratio_sum > 0.0 {
                    ratio_n as f64 / ratio_sum
                } else {
                    1.0
                },
                mean_latency_ms: total.mean_ms(),
                p99_latency_ms: total.p99_ms(),
                slo_violations: 0,
                slo_met_share: 1.0,
                slo_unjudged: 0,
                intervals: r.intervals.len() as u64,
                l1_hit_ratio: total.l1_hit_ratio(),
                l2_hit_ratio: total.l2_hit_ratio(),
                requests: r.requests,
                wall_seconds: r.wall,
                requests_per_second: r.requests as f64 / r.wall.max(1e-9),
                cpu_seconds: r.cpu,
                requests_per_cpu_second: r.requests as f64 / r.cpu.max(1e-9),
                infeasible_intervals: r.infeasible,
                iops,
                hit_ratio: both_levels(&total),
                tier_hits: total.tier_hits,
                migrations: total.migrations,
                migrated_bytes: total.migrations * chunk_bytes,
                disk_blocks: total.disk_blocks,
                error_final: if err_n == 0 {
                    0.0
                } else {
                    err_sum / err_n as f64
                },
                targets_met_final: if judged == 0 {
                    1.0
                } else {
                    met as f64 / judged as f64
                },
                converged,
                converged_s,
                policy_switches: switches,
                phase_hit_ratio: if sc.phases.is_empty() {
                    Vec::new()
                } else {
                    phase.iter().map(both_levels).collect()
                },
                tenants,
            },
        );
    }
    schemes
}

/// How far from its target a tenant may be in an interval and count as on target (the
/// relative deviance, either way: doing much better than a target counts as off it, as
/// it does in the learners' error).
pub const ON_TARGET: f64 = 0.1;
/// The share of a window's (tenant, interval) pairs that must be on target: half, so
/// that the typical interval is on target, and a learner's exploring moves now and then
/// (each takes its tenants off target for an interval) do not count against it.
pub const SETTLED_SHARE: f64 = 0.5;
/// The window, in simulated seconds (at least three intervals).
pub const SETTLED_WINDOW_S: f64 = 300.0;

/// The first interval from which the tenants with an SLO stay settled on their targets:
/// every window of [`SETTLED_WINDOW_S`] from there to the end of the run has at least
/// [`SETTLED_SHARE`] of its (tenant, interval) pairs within [`ON_TARGET`] of the target.
/// `None` when no full window at the end qualifies, or nothing has an SLO. Counted from
/// the start of the run (warm-up included: a learner's convergence time is from its
/// start); the last, partial interval is left out.
pub(super) fn convergence(sc: &Scenario, r: &SchemeRun, fair: &[Vec<Counters>]) -> Option<usize> {
    let full = r.intervals.len().saturating_sub(1);
    let window = ((SETTLED_WINDOW_S / sc.interval).ceil() as usize).max(3);
    let mut on = Vec::with_capacity(full);
    for iv in 0..full {
        let (mut good, mut judged) = (0usize, 0usize);
        for (i, t) in sc.tenants.iter().enumerate() {
            let (Some(slo), Some(c)) = (t.slo, r.intervals[iv].get(i)) else {
                continue;
            };
            if let Some(d) = deviance(&slo, c, sc.interval, fair_mean_ms(fair, iv, i)) {
                judged += 1;
                good += (d.abs() <= ON_TARGET) as usize;
            }
        }
        on.push((good, judged));
    }
    if full < window || on.iter().all(|&(_, j)| j == 0) {
        return None;
    }
    let settled = |k: usize| {
        let (g, j) = on[k..k + window]
            .iter()
            .fold((0, 0), |(g, j), &(a, b)| (g + a, j + b));
        j > 0 && g as f64 >= SETTLED_SHARE * j as f64
    };
    let last_unsettled = (0..=full - window).rev().find(|&k| !settled(k));
    match last_unsettled {
        None => Some(0),
        Some(k) if k < full - window => Some(k + 1),
        Some(_) => None,
    }
}

/// Block hits at either level per level-1 lookup.
fn both_levels(c: &Counters) -> f64 {
    if c.l1_lookups == 0 {
        0.0
    } else {
        (c.l1_hits + c.l2_hits) as f64 / c.l1_lookups as f64
    }
}
