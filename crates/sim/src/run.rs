//! Every scheme of a scenario, run in parallel, then judged side by side.
//!
//! Each scheme is an independent [`Engine`] (the `independent` baseline is one engine
//! per tenant, each alone on the whole system). Every scheme replays the same requests, so
//! the intervals line up, and the `fair` scheme is always run: it is the base of fair
//! speedup and of degradation SLOs.
//!
//! After the runs, over the counted intervals (those after the warm-up share):
//! * a tenant's interval meets its SLO when its mean latency is within the target (or
//!   within `1 + degradation` of the fair scheme's mean latency in the same interval), or
//!   its IOPS / bandwidth reaches the target; `slo_met_share` is the share of its
//!   intervals with requests that met it;
//! * `slo_violations` counts the tenants whose SLO fails over the whole counted period
//!   (the same tests on the period's means);
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
    /// Share of its intervals that met its SLO (`null` without one).
    pub slo_met_share: Option<f64>,
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
    /// Tenants whose SLO failed over the counted period.
    pub slo_violations: u32,
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
    /// Per scheme.
    pub schemes: BTreeMap<String, SchemeSummary>,
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
    rows: Vec<IntervalRow>,
    requests: u64,
    seconds: f64,
    wall: f64,
    cpu: f64,
    infeasible: u64,
}

/// Runs the scenario's schemes; `progress(job, label, fraction)` is called from worker
/// threads as jobs advance.
pub fn run(
    sc: &Scenario,
    opts: &RunOptions,
    progress: &(dyn Fn(usize, &str, f64) + Sync),
) -> Result<RunOutput, SimError> {
    let mut order: Vec<String> = opts.schemes.clone().unwrap_or_else(|| sc.schemes.clone());
    for n in &order {
        Scheme::named(n).map_err(|e| SimError::Plan(e.to_string()))?;
    }
    if !order.iter().any(|s| s == "fair") {
        order.push("fair".into());
    }
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
                let r = Scheme::named(&order[k])
                    .map_err(|e| SimError::Plan(e.to_string()))
                    .and_then(|s| Engine::new(sc, s, only))
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
            match (&mut merged, only) {
                (None, _) => {
                    merged = Some(SchemeRun {
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
    let n_iv = runs.iter().map(|r| r.intervals.len()).max().unwrap_or(0);
    let warm = ((sc.warmup * n_iv as f64).ceil() as usize).min(n_iv.saturating_sub(1));
    let counted = |r: &SchemeRun, i: usize| -> Counters {
        let mut c = Counters::default();
        for iv in r.intervals.iter().skip(warm) {
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
        })
    };
    let counted_secs = (n_iv - warm) as f64 * sc.interval;
    let mut schemes = BTreeMap::new();
    let mut all_rows = Vec::new();
    for (k, name) in order.iter().enumerate() {
        let r = &mut runs[k];
        let mut tenants = BTreeMap::new();
        let mut total = Counters::default();
        let mut ratio_sum = 0.0;
        let mut ratio_n = 0usize;
        let mut violations = 0;
        for (i, t) in sc.tenants.iter().enumerate() {
            let c = counted(r, i);
            total.merge(&c);
            if c.requests > 0 && fair_tot[i].requests > 0 {
                ratio_sum += c.mean_ms() / fair_tot[i].mean_ms().max(1e-12);
                ratio_n += 1;
            }
            if let Some(slo) = t.slo {
                if meets(&slo, &c, &fair_tot[i], counted_secs) == Some(false) {
                    violations += 1;
                }
            }
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
                },
            );
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
                slo_violations: violations,
                intervals: r.intervals.len() as u64,
                l1_hit_ratio: total.l1_hit_ratio(),
                l2_hit_ratio: total.l2_hit_ratio(),
                requests: r.requests,
                wall_seconds: r.wall,
                requests_per_second: r.requests as f64 / r.wall.max(1e-9),
                cpu_seconds: r.cpu,
                requests_per_cpu_second: r.requests as f64 / r.cpu.max(1e-9),
                infeasible_intervals: r.infeasible,
                tenants,
            },
        );
    }
    // Per-interval SLO judgement, now that fair's intervals are known.
    let fair_intervals = runs[fair_k].intervals.clone();
    for (k, name) in order.iter().enumerate() {
        let r = &mut runs[k];
        let summary = schemes.get_mut(name).expect("inserted");
        for (i, t) in sc.tenants.iter().enumerate() {
            let Some(slo) = t.slo else { continue };
            let (mut met, mut judged) = (0u32, 0u32);
            for iv in warm..r.intervals.len() {
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
            if let Some(ts) = summary.tenants.get_mut(&t.name) {
                ts.slo_met_share = Some(if judged == 0 {
                    1.0
                } else {
                    met as f64 / judged as f64
                });
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
                if let (Slo::Degradation(x), true) = (slo, f.requests > 0) {
                    row.target_ms = Some((1.0 + x) * f.mean_ms());
                }
            }
        }
        all_rows.append(&mut r.rows);
    }
    let fair = &runs[fair_k];
    Ok(RunOutput {
        summary: Summary {
            scenario: sc.name.clone(),
            requests: fair.requests,
            seconds: fair.seconds,
            schemes,
        },
        rows: all_rows,
        order,
    })
}

/// CPU time the calling thread has used, in seconds.
fn thread_cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}
