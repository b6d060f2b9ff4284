//! Every scheme of a scenario, run in parallel, then judged side by side.
//!
//! Each scheme is an independent [`Engine`] (the `independent` baseline is one engine
//! per tenant, each alone on the whole system). Every scheme replays the same requests, so
//! the intervals line up, and the `fair` scheme is always run: it is the base of fair
//! speedup and of degradation SLOs.
//!
//! After the runs, over the counted intervals (those after the warm-up share of the run
//! that served the tenant: a closed-loop tenant alone is served faster and its stream ends
//! sooner, so its `independent` run is shorter than the shared ones):
//! * a tenant's interval meets its SLO when its mean latency is within the target (or
//!   within `1 + degradation` of the fair scheme's mean latency in the same interval), or
//!   its IOPS / bandwidth reaches the target; `slo_met_share` is the share of its counted
//!   intervals with requests that met it (`null`, and the tenant *unjudged*, when none
//!   was counted: never reported as met). Intervals whose plan called the tenant's SLO
//!   infeasible are counted like any other, and their number is shown beside;
//! * `slo_violations` counts the tenants with an SLO that met it in fewer than
//!   [`SLO_COMPLIANCE`] of their counted intervals, or were never judged;
//! * `fair_speedup` is `T / Σ mean_latency(scheme) / mean_latency(fair)` over the tenants.

use crate::engine::{Engine, EngineResult};
use crate::scenario::Scenario;
use crate::stats::{Counters, IntervalRow};
use crate::SimError;
use control::{Scheme, Slo};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Share of its counted intervals a tenant must meet its SLO in for the scheme not to
/// count it as a violation.
pub const SLO_COMPLIANCE: f64 = 0.95;

/// How to run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Schemes to run (default: the scenario's).
    pub schemes: Option<Vec<String>>,
    /// Worker threads (0: one per core).
    pub threads: usize,
}

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

/// Deviance from target of one tenant's interval, signed so that below 0 is short of the
/// target: `(observed − target) / target` for IOPS and bandwidth, `(target − observed) /
/// target` for latency (`fair_ms`: the fair scheme's latency, for degradation SLOs).
pub fn deviance(slo: &Slo, c: &Counters, secs: f64, fair_ms: Option<f64>) -> Option<f64> {
    if c.requests == 0 && !matches!(slo, Slo::Iops(_) | Slo::Mbps(_)) {
        return None;
    }
    Some(match *slo {
        Slo::LatencyMs(t) => (t - c.mean_ms()) / t,
        Slo::Degradation(x) => {
            let t = (1.0 + x) * fair_ms.filter(|f| *f > 0.0)?;
            (t - c.mean_ms()) / t
        }
        Slo::Iops(v) => (c.requests as f64 / secs - v) / v,
        Slo::Mbps(m) => (c.bytes as f64 / secs / 1e6 - m) / m,
        Slo::P95Ms(_) | Slo::P99Ms(_) | Slo::P999Ms(_) => {
            let (q, t) = slo.tail()?;
            (t - c.quantile_ms(q)) / t
        }
    })
}

/// Everything a run produced.
pub struct RunOutput {
    /// The summary.
    pub summary: Summary,
    /// Every tenant's row per interval per scheme.
    pub rows: Vec<IntervalRow>,
    /// Schemes in the order they were asked for (plus `fair` if it was not).
    pub order: Vec<String>,
}

struct SchemeRun {
    intervals: Vec<Vec<Counters>>,
    /// Per tenant, how many intervals the run that served it lasted: the scheme's own
    /// length, or for `independent` the tenant's run alone, which ends sooner when a
    /// closed-loop tenant is served faster than it is among the others.
    spans: Vec<usize>,
    rows: Vec<IntervalRow>,
    requests: u64,
    seconds: f64,
    wall: f64,
    cpu: f64,
    infeasible: u64,
    /// Per interval, per tenant: whether the plan in force called its SLO infeasible.
    infeasible_at: Vec<Vec<bool>>,
}

/// Per interval, per tenant, whether the plan in force then (the one made at the end of
/// the interval before) reported the tenant's SLO as one it could not meet.
fn infeasible_at(sc: &Scenario, r: &EngineResult) -> Vec<Vec<bool>> {
    let mut at = vec![vec![false; sc.tenants.len()]; r.intervals.len()];
    for (k, plan) in r.plans.iter().enumerate() {
        let Some(row) = at.get_mut(k + 1) else { break };
        for sf in &plan.infeasible {
            if let Some(i) = sc.tenants.iter().position(|t| t.name == sf.tenant) {
                row[i] = true;
            }
        }
    }
    at
}

/// Runs the scenario's schemes; `progress(job, label, fraction)` is called from worker
/// threads as jobs advance.
pub fn run(
    sc: &Scenario,
    opts: &RunOptions,
    progress: &(dyn Fn(usize, &str, f64) + Sync),
) -> Result<RunOutput, SimError> {
    let mut order: Vec<String> = opts.schemes.clone().unwrap_or_else(|| sc.schemes.clone());
    if !order.iter().any(|s| s == "fair") {
        order.push("fair".into());
    }
    let resolved: Vec<(Scenario, Scheme)> = order
        .iter()
        .map(|n| sc.resolve(n))
        .collect::<Result<_, _>>()?;
    // Jobs: (scheme index, alone tenant).
    let mut jobs: Vec<(usize, Option<usize>)> = Vec::new();
    for (k, name) in order.iter().enumerate() {
        if name == "independent" {
            jobs.extend((0..sc.tenants.len()).map(|i| (k, Some(i))));
        } else {
            jobs.push((k, None));
        }
    }
    let threads = if opts.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        opts.threads
    };
    let next = AtomicUsize::new(0);
    type JobResult = Result<(EngineResult, f64, f64), SimError>;
    let results: Mutex<Vec<Option<JobResult>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.min(jobs.len()).max(1) {
            scope.spawn(|| loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                if j >= jobs.len() {
                    break;
                }
                let (k, only) = jobs[j];
                let label = match only {
                    Some(i) => format!("{} ({})", order[k], sc.tenants[i].name),
                    None => order[k].clone(),
                };
                let start = Instant::now();
                let cpu_start = thread_cpu_seconds();
                let (vsc, scheme) = &resolved[k];
                let r = Engine::new(vsc, scheme.clone(), only)
                    .and_then(|e| e.run(&mut |f| progress(j, &label, f)))
                    .map(|r| {
                        let cpu = thread_cpu_seconds() - cpu_start;
                        (r, start.elapsed().as_secs_f64(), cpu)
                    });
                results.lock().expect("no panics hold it")[j] = Some(r);
            });
        }
    });
    let mut results = results.into_inner().expect("no panics hold it");
    let mut runs: Vec<SchemeRun> = Vec::new();
    for (k, _) in order.iter().enumerate() {
        let mut merged: Option<SchemeRun> = None;
        for (j, &(jk, only)) in jobs.iter().enumerate() {
            if jk != k {
                continue;
            }
            let (r, wall, cpu) = results[j].take().expect("every job ran")?;
            let infeasible = r.plans.iter().filter(|p| !p.infeasible.is_empty()).count() as u64;
            let infeasible_at = infeasible_at(sc, &r);
            match (&mut merged, only) {
                (None, _) => {
                    merged = Some(SchemeRun {
                        infeasible_at,
                        spans: vec![r.intervals.len(); sc.tenants.len()],
                        intervals: r.intervals,
                        rows: r.rows,
                        requests: r.requests,
                        seconds: r.seconds,
                        wall,
                        cpu,
                        infeasible,
                    })
                }
                (Some(m), Some(i)) => {
                    // An alone run: take tenant i's counters into the merged intervals.
                    if m.intervals.len() < r.intervals.len() {
                        m.intervals.resize_with(r.intervals.len(), || {
                            vec![Counters::default(); sc.tenants.len()]
                        });
                    }
                    m.spans[i] = r.intervals.len();
                    if m.infeasible_at.len() < infeasible_at.len() {
                        m.infeasible_at
                            .resize_with(infeasible_at.len(), || vec![false; sc.tenants.len()]);
                    }
                    for (iv, row) in infeasible_at.into_iter().enumerate() {
                        m.infeasible_at[iv][i] = row[i];
                    }
                    for (iv, row) in r.intervals.into_iter().enumerate() {
                        if let Some(c) = row.into_iter().nth(i) {
                            m.intervals[iv][i] = c;
                        }
                    }
                    m.rows.extend(r.rows);
                    m.requests += r.requests;
                    m.seconds = m.seconds.max(r.seconds);
                    m.wall += wall;
                    m.cpu += cpu;
                    m.infeasible += infeasible;
                }
                (Some(_), None) => unreachable!("one job per partitioned scheme"),
            }
        }
        runs.push(merged.expect("each scheme has a job"));
    }
    let fair_k = order
        .iter()
        .position(|s| s == "fair")
        .expect("fair is always run");
    // The warm-up is a share of each run's own length: an `independent` tenant's run
    // alone may end long before the shared runs do.
    let warm_of = |r: &SchemeRun, i: usize| -> usize {
        let n = r.spans[i];
        ((sc.warmup * n as f64).ceil() as usize).min(n.saturating_sub(1))
    };
    let counted_secs_of =
        |r: &SchemeRun, i: usize| -> f64 { (r.spans[i] - warm_of(r, i)) as f64 * sc.interval };
    let counted = |r: &SchemeRun, i: usize| -> Counters {
        let mut c = Counters::default();
        for iv in r.intervals.iter().skip(warm_of(r, i)) {
            if let Some(x) = iv.get(i) {
                c.merge(x);
            }
        }
        c
    };
    let fair_tot: Vec<Counters> = (0..sc.tenants.len())
        .map(|i| counted(&runs[fair_k], i))
        .collect();
    let meets = |slo: &Slo, c: &Counters, fair: &Counters, secs: f64| -> Option<bool> {
        if c.requests == 0 {
            return None;
        }
        Some(match *slo {
            Slo::LatencyMs(t) => c.mean_ms() <= t,
            Slo::Degradation(x) => {
                if fair.requests == 0 {
                    return None;
                }
                c.mean_ms() <= (1.0 + x) * fair.mean_ms() * (1.0 + 1e-9)
            }
            Slo::Iops(v) => c.requests as f64 / secs >= v,
            Slo::Mbps(m) => c.bytes as f64 / secs >= m * 1e6,
            Slo::P95Ms(_) | Slo::P99Ms(_) | Slo::P999Ms(_) => {
                let (q, t) = slo.tail()?;
                c.quantile_ms(q) <= t
            }
        })
    };
    let fair_run_intervals = runs[fair_k].intervals.clone();
    let fair_of = |iv: usize, i: usize| -> Option<f64> {
        fair_run_intervals
            .get(iv)
            .and_then(|v| v.get(i))
            .filter(|c| c.requests > 0)
            .map(|c| c.mean_ms())
    };
    let chunk_bytes = sc
        .servers
        .iter()
        .find_map(|s| s.hot_tier.as_ref().map(|t| t.chunk_blocks * sc.block_size))
        .unwrap_or(0);
    let mut schemes = BTreeMap::new();
    let mut all_rows = Vec::new();
    for (k, name) in order.iter().enumerate() {
        let r = &mut runs[k];
        let mut tenants = BTreeMap::new();
        let mut total = Counters::default();
        let mut ratio_sum = 0.0;
        let mut ratio_n = 0usize;
        let mut iops = 0.0;
        for (i, t) in sc.tenants.iter().enumerate() {
            let c = counted(r, i);
            let (warm, counted_secs) = (warm_of(r, i), counted_secs_of(r, i));
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
                        let f = fair_of(iv, i);
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
                if let Some(d) = deviance(&slo, c, sc.interval, fair_of(iv, i)) {
                    e += d * d;
                    judged += 1;
                    met += (d >= -0.05) as usize;
                }
            }
            err_sum += e;
            err_n += 1;
        }
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
                    if iv >= warm_of(r, i) {
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
    // Per-interval SLO judgement, now that fair's intervals are known.
    let fair_intervals = runs[fair_k].intervals.clone();
    for (k, name) in order.iter().enumerate() {
        let r = &mut runs[k];
        let summary = schemes.get_mut(name).expect("inserted");
        let (mut pairs_met, mut pairs) = (0u64, 0u64);
        let (mut violations, mut unjudged) = (0u32, 0u32);
        for (i, t) in sc.tenants.iter().enumerate() {
            let Some(slo) = t.slo else { continue };
            let (mut met, mut judged, mut infeasible) = (0u32, 0u32, 0u32);
            for iv in warm_of(r, i)..r.intervals.len() {
                infeasible += r.infeasible_at.get(iv).is_some_and(|v| v[i]) as u32;
                let c = &r.intervals[iv][i];
                let f = fair_intervals
                    .get(iv)
                    .and_then(|v| v.get(i))
                    .cloned()
                    .unwrap_or_default();
                if let Some(ok) = meets(&slo, c, &f, sc.interval) {
                    judged += 1;
                    met += ok as u32;
                }
            }
            pairs_met += met as u64;
            pairs += judged as u64;
            let share = (judged > 0).then(|| met as f64 / judged as f64);
            match share {
                None => {
                    unjudged += 1;
                    violations += 1;
                }
                Some(s) if s < SLO_COMPLIANCE => violations += 1,
                Some(_) => {}
            }
            if let Some(ts) = summary.tenants.get_mut(&t.name) {
                ts.slo_met_share = share;
                ts.slo_judged_intervals = judged;
                ts.slo_unjudged = judged == 0;
                ts.infeasible_intervals = infeasible;
            }
            for row in r.rows.iter_mut().filter(|row| row.tenant == t.name) {
                let iv = row.interval as usize;
                let c = &r
                    .intervals
                    .get(iv)
                    .map(|v| v[i].clone())
                    .unwrap_or_default();
                let f = fair_intervals
                    .get(iv)
                    .and_then(|v| v.get(i))
                    .cloned()
                    .unwrap_or_default();
                row.slo_met = meets(&slo, c, &f, sc.interval);
                let len = if iv + 1 == r.intervals.len() {
                    // The last interval may be partial.
                    (row.time_s - iv as f64 * sc.interval).max(1e-9)
                } else {
                    sc.interval
                };
                row.deviance = deviance(&slo, c, len, (f.requests > 0).then(|| f.mean_ms()));
                if let (Slo::Degradation(x), true) = (slo, f.requests > 0) {
                    row.target_ms = Some((1.0 + x) * f.mean_ms());
                }
            }
        }
        summary.slo_violations = violations;
        summary.slo_unjudged = unjudged;
        summary.slo_met_share = if pairs == 0 {
            1.0
        } else {
            pairs_met as f64 / pairs as f64
        };
        all_rows.append(&mut r.rows);
    }
    let fair = &runs[fair_k];
    let mut out = RunOutput {
        summary: Summary {
            scenario: sc.name.clone(),
            requests: fair.requests,
            seconds: fair.seconds,
            quick: sc.is_quick,
            schemes,
            claims: Vec::new(),
        },
        rows: all_rows,
        order,
    };
    check_claims(sc, &mut out)?;
    Ok(out)
}

/// Block hits at either level per level-1 lookup.
fn both_levels(c: &Counters) -> f64 {
    if c.l1_lookups == 0 {
        0.0
    } else {
        (c.l1_hits + c.l2_hits) as f64 / c.l1_lookups as f64
    }
}

/// Checks the scenario's claims against the run's summary and stores them in it; an
/// error names the scenario file's claim and rule.
pub fn check_claims(sc: &Scenario, out: &mut RunOutput) -> Result<(), SimError> {
    if sc.claims.is_empty() {
        return Ok(());
    }
    let value = serde_json::to_value(&out.summary).map_err(SimError::Summary)?;
    let tenants: Vec<String> = sc.tenants.iter().map(|t| t.name.clone()).collect();
    out.summary.claims =
        crate::claims::check(&sc.claims, &value, &tenants).map_err(|error| SimError::Claim {
            file: format!("{}.toml", sc.name),
            error,
        })?;
    Ok(())
}

/// CPU time the calling thread has used, in seconds.
fn thread_cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}
