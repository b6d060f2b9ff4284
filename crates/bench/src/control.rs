//! `lachesis bench control`: the live controller's two figures.
//!
//! 1. Speed of one `control` step at provider scale: by default 100,000 tenants over
//!    10,000 nodes (5,000 level-1 hosts, 5,000 level-2 servers; each tenant on one host,
//!    striped over two servers), every tenant with a 33-point curve of each candidate
//!    policy and a third of them with latency SLOs, scheme `lachesis`. Steps are timed on
//!    one thread; the median of the runs after the first (which fills the state) is
//!    printed against the 1 s goal, in CPU time of the stepping thread (the goal is one
//!    core's work; on a machine shared with other jobs the wall-clock time, printed beside
//!    it, also counts waiting for a core). Beside it, the step of an interval whose
//!    topology changed: the controller resumed from the carried state on the new topology
//!    (checked and fitted, `Controller::resume`) and then stepped, which the live
//!    controller does only when tenants or nodes change.
//! 2. The demo's workload (`loadgen::demo`, real NBD I/O on loopback): the scheme's
//!    arm and a static fair-share arm on fresh nodes, both printed: the share of
//!    tenant-intervals after the first three in which each feasible SLO held (goal
//!    ≥ 95 %), and aggregate level-1 throughput of each arm and their ratio (goal ≥ 1).

use control::{
    Class, Controller, LevelCount, Node, Observations, ObservedService, PolicyCurve, Scheme,
    ServiceTimes, Slo, Tenant, TenantObservation, Topology,
};
use std::time::{Duration, Instant};

/// The figure of one step at scale.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StepFigure {
    /// Tenants.
    pub tenants: usize,
    /// Nodes of both levels.
    pub nodes: usize,
    /// Median wall-clock seconds of one step (after the first).
    pub median_seconds: f64,
    /// Wall-clock seconds of the first step.
    pub first_seconds: f64,
    /// Median CPU seconds of the stepping thread for one step (after the first).
    pub median_cpu_seconds: f64,
    /// CPU seconds of the stepping thread for resuming the controller on the topology
    /// (check and fit of the carried state) and stepping it once: an interval whose
    /// topology changed.
    pub rebuild_cpu_seconds: f64,
    /// The same in wall-clock seconds.
    pub rebuild_seconds: f64,
}

/// CPU time the calling thread has used, in seconds.
fn thread_cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn curve(i: usize, shift: f64) -> mrc::HitRatioCurve {
    // A concave-ish falling curve over 0..=4096 blocks with a per-tenant knee.
    let knee = 200.0 + (i % 37) as f64 * 50.0;
    let pairs: Vec<(u64, f64)> = (0..=32)
        .map(|k| {
            let x = k as f64 * 128.0;
            (
                x as u64,
                (0.05 + 0.95 * (-x / knee).exp() + shift).clamp(0.0, 1.0),
            )
        })
        .collect();
    mrc::HitRatioCurve::from_pairs(pairs).expect("valid curve")
}

/// Times `runs` steps of `tenants` tenants over `hosts` + `servers` nodes.
pub fn step_at_scale(tenants: usize, hosts: usize, servers: usize, runs: usize) -> StepFigure {
    let topo = Topology {
        block_size: 4096,
        hosts: (0..hosts)
            .map(|h| Node {
                name: format!("h{h}"),
                capacity: 65_536,
                hot_tier: false,
            })
            .collect(),
        servers: (0..servers)
            .map(|s| Node {
                name: format!("s{s}"),
                capacity: 131_072,
                hot_tier: false,
            })
            .collect(),
        levels: Default::default(),
        service: ServiceTimes {
            l1_hit_ms: 0.05,
            l2_hit_ms: 0.5,
            miss_ms: 5.0,
        },
        tenants: (0..tenants)
            .map(|i| Tenant {
                name: format!("t{i}"),
                host: i % hosts,
                servers: vec![i % servers, (i + 1) % servers],
                stripe_unit: 16,
                slo: (i % 3 == 0).then_some(Slo::LatencyMs(2.0 + (i % 5) as f64)),
                class: if i % 10 == 0 {
                    Class::Gold
                } else {
                    Class::BestEffort
                },
                depth: Some(4.0),
                ..Default::default()
            })
            .collect(),
    };
    let obs = Observations {
        seconds: 10.0,
        tenants: (0..tenants)
            .map(|i| TenantObservation {
                requests: 10_000,
                bytes: 10_000 * 4096,
                l1: LevelCount {
                    lookups: 10_000,
                    hits: 4_000,
                },
                l2: LevelCount {
                    lookups: 6_000,
                    hits: 2_000,
                },
                mean_latency_ms: 2.5,
                p99_latency_ms: 9.0,
                service: ObservedService {
                    l1_hit_ms: Some(0.05),
                    l2_hit_ms: Some(0.6),
                    miss_ms: Some(5.5),
                },
                curves: ["lru", "arc", "lirs", "s3fifo"]
                    .iter()
                    .enumerate()
                    .map(|(k, p)| PolicyCurve {
                        policy: p.to_string(),
                        curve: curve(i, k as f64 * 0.01),
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        tiers: Vec::new(),
        servers: Vec::new(),
    };
    let scheme = Scheme::named("lachesis").expect("known scheme");
    let mut c = Controller::new(topo.clone(), scheme.clone()).expect("valid topology");
    let mut times = Vec::new();
    let mut cpu = Vec::new();
    for r in 0..runs.max(2) {
        let t = Instant::now();
        let c0 = thread_cpu_seconds();
        let plan = c.step(10.0 * (r + 1) as f64, &obs).expect("step");
        cpu.push(thread_cpu_seconds() - c0);
        times.push(t.elapsed().as_secs_f64());
        assert_eq!(plan.tenants.len(), tenants);
    }
    // An interval whose topology changed: resumed from the carried state, then stepped.
    let state = c.state().clone();
    let t = Instant::now();
    let c0 = thread_cpu_seconds();
    let mut resumed = Controller::resume(topo, scheme, state).expect("valid topology");
    let plan = resumed
        .step(10.0 * (runs.max(2) + 1) as f64, &obs)
        .expect("step");
    let rebuild_cpu_seconds = thread_cpu_seconds() - c0;
    let rebuild_seconds = t.elapsed().as_secs_f64();
    assert_eq!(plan.tenants.len(), tenants);
    let first = times[0];
    let median = |v: &[f64]| {
        let mut rest = v[1..].to_vec();
        rest.sort_by(f64::total_cmp);
        rest[rest.len() / 2]
    };
    StepFigure {
        tenants,
        nodes: hosts + servers,
        median_seconds: median(&times),
        first_seconds: first,
        median_cpu_seconds: median(&cpu),
        rebuild_cpu_seconds,
        rebuild_seconds,
    }
}

/// The scale of the step's figure: tenants, level-1 hosts, level-2 servers.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// Tenants.
    pub tenants: usize,
    /// Level-1 hosts.
    pub hosts: usize,
    /// Level-2 servers.
    pub servers: usize,
}

impl Default for Scale {
    /// 100,000 tenants over 10,000 nodes (issue 37's figure).
    fn default() -> Self {
        Scale {
            tenants: 100_000,
            hosts: 5_000,
            servers: 5_000,
        }
    }
}

/// Runs the benchmark: the step at scale, then (unless `demo` is `None`) the demo's arms
/// of `demo` length each.
pub fn run(
    scale: Scale,
    demo: Option<Duration>,
    trace: Option<std::path::PathBuf>,
) -> crate::Result<()> {
    let f = step_at_scale(scale.tenants, scale.hosts, scale.servers, 5);
    let verdict = |s: f64| if s < 1.0 { "met" } else { "NOT met" };
    println!(
        "control step, {} tenants over {} nodes (scheme lachesis, one thread): median {:.3} CPU-s \
         ({:.3} s wall-clock; first step {:.3} s) against the goal of 1 s: {}",
        f.tenants,
        f.nodes,
        f.median_cpu_seconds,
        f.median_seconds,
        f.first_seconds,
        verdict(f.median_cpu_seconds)
    );
    println!(
        "  with the topology rebuilt (resume: check and fit, then the step): {:.3} CPU-s \
         ({:.3} s wall-clock) against the goal of 1 s: {}",
        f.rebuild_cpu_seconds,
        f.rebuild_seconds,
        verdict(f.rebuild_cpu_seconds)
    );
    let Some(duration) = demo else {
        return Ok(());
    };
    let opts = loadgen::demo::DemoOptions {
        duration,
        trace,
        ..Default::default()
    };
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // Fair share and the scheme at once, the scheme's degradation SLOs judged against
    // fair share's measurements; both run half as long again, uncounted, so that fair
    // share's clients reach the requests the scheme's completed (`DemoOptions::extend`).
    let opts = loadgen::demo::DemoOptions {
        extend: duration / 2,
        ..opts
    };
    let mut arms = rt
        .block_on(loadgen::demo::run_arms(
            &opts,
            &["fair", "lachesis"],
            dir.path(),
            |_, _| {},
            |_, _| {},
            Duration::ZERO,
        ))
        .map_err(|e| crate::BenchError::Failed(e.to_string()))?;
    loadgen::demo::judge(&mut arms, &opts);
    let ours = arms.pop().expect("two arms");
    let fair = arms.pop().expect("two arms");
    let s = loadgen::demo::ArmComparison::of(&ours, Some(&fair));
    let sf = loadgen::demo::ArmComparison::of(&fair, None);
    println!(
        "demo workload, {:.0} s per arm, {} s intervals, the first three not counted:",
        duration.as_secs_f64(),
        opts.interval.as_secs_f64()
    );
    println!(
        "  SLOs met: lachesis {:.1} % of {} judged tenant-intervals ({} the plan called infeasible; goal ≥ 95 %) · fair share {:.1} % of {}",
        100.0 * s.slo_met_share.unwrap_or(0.0),
        s.slo_checks,
        s.infeasible_checks,
        100.0 * sf.slo_met_share.unwrap_or(0.0),
        sf.slo_checks
    );
    for (t, v) in &s.per_tenant {
        println!(
            "    {t}: lachesis {:.1} % · fair {}{}",
            100.0 * v,
            sf.per_tenant
                .get(t)
                .map_or("-".into(), |x| format!("{:.1} %", 100.0 * x)),
            s.latency_vs_fair.get(t).map_or(String::new(), |r| format!(
                " · mean latency {r:.2}× fair share's"
            ))
        );
    }
    println!(
        "  throughput: lachesis {:.0} req/s · fair share {:.0} req/s · ratio {:.3} (goal ≥ 1)",
        s.throughput,
        s.fair_throughput.unwrap_or(0.0),
        s.throughput_vs_fair.unwrap_or(0.0)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_at_small_scale_plans_every_tenant() {
        let f = step_at_scale(200, 10, 10, 2);
        assert_eq!(f.tenants, 200);
        assert!(f.median_seconds > 0.0);
    }

    /// The figure at full scale (`cargo test -p bench --lib full_scale -- --ignored
    /// --nocapture`; `lachesis bench control --seconds 0` prints the same).
    #[test]
    #[ignore]
    fn full_scale_step() {
        let f = step_at_scale(10_000, 500, 500, 3);
        println!("{f:?}");
        assert_eq!(f.tenants, 10_000);
    }
}
