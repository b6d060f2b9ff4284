//! The runs themselves: one job per scheme (per tenant for `independent`), spread over
//! worker threads, each an [`Engine`]; then each scheme's jobs merged into one
//! [`SchemeRun`] with its wall and CPU time.
//!
//! Does not own: what a run's numbers mean (`summary`, `judge`).

use crate::engine::{Engine, EngineResult};
use crate::scenario::Scenario;
use crate::stats::{Counters, IntervalRow};
use crate::SimError;
use control::Scheme;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// One scheme's results, its jobs merged.
pub(super) struct SchemeRun {
    pub(super) intervals: Vec<Vec<Counters>>,
    /// Per tenant, how many intervals the run that served it lasted: the scheme's own
    /// length, or for `independent` the tenant's run alone, which ends sooner when a
    /// closed-loop tenant is served faster than it is among the others.
    pub(super) spans: Vec<usize>,
    pub(super) rows: Vec<IntervalRow>,
    pub(super) requests: u64,
    pub(super) seconds: f64,
    pub(super) wall: f64,
    pub(super) cpu: f64,
    pub(super) infeasible: u64,
    /// Per interval, per tenant: whether the plan in force called its SLO infeasible.
    pub(super) infeasible_at: Vec<Vec<bool>>,
}

impl SchemeRun {
    /// Tenant `i`'s warm-up intervals: a share of the length of the run that served it
    /// (an `independent` tenant's run alone may end long before the shared runs do).
    pub(super) fn warm(&self, sc: &Scenario, i: usize) -> usize {
        let n = self.spans[i];
        ((sc.warmup * n as f64).ceil() as usize).min(n.saturating_sub(1))
    }

    /// Seconds of tenant `i`'s counted intervals.
    pub(super) fn counted_secs(&self, sc: &Scenario, i: usize) -> f64 {
        (self.spans[i] - self.warm(sc, i)) as f64 * sc.interval
    }

    /// Tenant `i`'s counters over its counted intervals.
    pub(super) fn counted(&self, sc: &Scenario, i: usize) -> Counters {
        let mut c = Counters::default();
        for iv in self.intervals.iter().skip(self.warm(sc, i)) {
            if let Some(x) = iv.get(i) {
                c.merge(x);
            }
        }
        c
    }
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

/// Runs the schemes in `order` (resolved in `resolved`) on `threads` worker threads (0: one
/// per core); returns one [`SchemeRun`] per scheme, in `order`.
pub(super) fn execute(
    sc: &Scenario,
    order: &[String],
    resolved: &[(Scenario, Scheme)],
    threads: usize,
    progress: &(dyn Fn(usize, &str, f64) + Sync),
) -> Result<Vec<SchemeRun>, SimError> {
    // Jobs: (scheme index, alone tenant).
    let mut jobs: Vec<(usize, Option<usize>)> = Vec::new();
    for (k, name) in order.iter().enumerate() {
        if name == "independent" {
            jobs.extend((0..sc.tenants.len()).map(|i| (k, Some(i))));
        } else {
            jobs.push((k, None));
        }
    }
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
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
    Ok(runs)
}

/// CPU time the calling thread has used, in seconds.
fn thread_cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}
