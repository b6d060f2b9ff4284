//! Timings for `lachesis bench alloc`: the allocation library's fast utility method
//! against plain water-filling, and MLMS with its server LP.
//!
//! * [`bench_alloc`]: 5,000 tenants with 1,000-point curves sharing 1 TB in 1 MB blocks
//!   (capacity 1,000,000 blocks, step 1 block), half concave-ish (exponential decay to a
//!   floor), half non-concave (a loop: flat until a cliff, then a decay). Times the fast
//!   method against plain Algorithm 3.1. The fast method is run [`FAST_RUNS`] times (each
//!   run from scratch: hulls, greedy, fix-up, nothing kept between runs) and its median
//!   and best wall times are reported, so one run slowed by a busy machine does not
//!   decide the figure; the heap variant likewise. The plain method scans all 5,000
//!   tenants for each of up to 1,000,000 steps (5·10⁹ gain comparisons), far too slow to
//!   run in full: it is run once for its first `plain_steps` steps and its time is
//!   extrapolated linearly to the whole capacity (each step costs the same O(T) scan, so
//!   linear extrapolation is fair). The ratio printed is plain over the fast median.
//!   [`standard_curves`] and [`utility_problem`] build the instance, for the
//!   `bench_alloc` example (a profiling harness) as for the bench.
//! * [`bench_mlms`]: MLMS for 64 tenants and 64 storage servers, each tenant connected to
//!   16 servers, server capacities uneven enough that the level-2 LP has work to do.

use lachesis_alloc::mlms::model::{LevelLatencies, TenantModel};
use lachesis_alloc::mlms::{plan, MlmsProblem, MlmsTenant, Scheme};
pub use lachesis_alloc::synthetic::{bench_curves, synthetic_curve};
use lachesis_alloc::utility::{
    fast, fast_with, water_fill_capped, FixUp, Greedy, UtilityProblem, UtilityTenant,
};
use mrc::HitRatioCurve;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

/// How many times [`bench_alloc`] runs the fast method (median and best reported).
pub const FAST_RUNS: usize = 5;

/// Result of [`bench_alloc`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AllocBench {
    /// Tenants.
    pub tenants: usize,
    /// Capacity in steps.
    pub capacity_steps: u64,
    /// Runs of the fast method (and of its heap variant).
    pub fast_runs: usize,
    /// Median seconds of the fast method (hulls, greedy, fix-up) over `fast_runs` runs.
    pub fast_median_seconds: f64,
    /// Best seconds of the fast method over `fast_runs` runs.
    pub fast_best_seconds: f64,
    /// Median seconds of the fast method with the heap greedy instead of the threshold
    /// search, over `fast_runs` runs.
    pub fast_heap_median_seconds: f64,
    /// Objective the fast method reached.
    pub fast_value: f64,
    /// Hull optimum (upper bound on any allocation).
    pub hull_value: f64,
    /// Steps the plain method actually ran.
    pub plain_steps: u64,
    /// Seconds it took for them.
    pub plain_measured_seconds: f64,
    /// Extrapolated seconds for the whole capacity.
    pub plain_seconds: f64,
}

/// The curves of the standard instance: 5,000 tenants × 1,000 points, seed 42.
pub fn standard_curves() -> Vec<HitRatioCurve> {
    bench_curves(5000, 1000, 42)
}

/// Capacity of the standard instance: 1 TB in 1 MB blocks, step 1 block.
pub const STANDARD_CAPACITY: u64 = 1_000_000;

/// A utility problem over `curves`, weight 1 each, no minimums or maximums, step 1 block.
pub fn utility_problem(curves: &[HitRatioCurve], capacity: u64) -> UtilityProblem<'_> {
    UtilityProblem {
        tenants: curves
            .iter()
            .map(|c| UtilityTenant {
                curve: c,
                weight: 1.0,
                min_steps: 0,
                max_steps: u64::MAX,
            })
            .collect(),
        step: 1,
        capacity_steps: capacity,
    }
}

/// Median and best of `runs` timings of `f`, with its last result.
fn time_runs<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, f64, T) {
    let mut secs = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let r = f();
        secs.push(t.elapsed().as_secs_f64());
        last = Some(r);
    }
    secs.sort_by(f64::total_cmp);
    (
        secs[secs.len() / 2],
        secs[0],
        last.expect("at least one run"),
    )
}

/// Times the fast method ([`FAST_RUNS`] runs) and plain Algorithm 3.1 (once, first
/// `plain_steps` steps, extrapolated) on `tenants` synthetic tenants sharing `capacity`
/// blocks, seeded by `seed`.
pub fn bench_alloc_with(tenants: usize, capacity: u64, plain_steps: u64, seed: u64) -> AllocBench {
    let curves = bench_curves(tenants, 1000, seed);
    let p = utility_problem(&curves, capacity);
    let (fast_median_seconds, fast_best_seconds, f) = time_runs(FAST_RUNS, || {
        fast(&p, FixUp::Round).expect("valid instance")
    });
    let (fast_heap_median_seconds, _, h) = time_runs(FAST_RUNS, || {
        fast_with(&p, FixUp::Round, Greedy::Heap).expect("valid instance")
    });
    assert_eq!(h.steps, f.steps, "heap and threshold greedy agree");
    let t = Instant::now();
    let (_, ran) = water_fill_capped(&p, plain_steps).expect("valid instance");
    let plain_measured_seconds = t.elapsed().as_secs_f64();
    AllocBench {
        tenants,
        capacity_steps: capacity,
        fast_runs: FAST_RUNS,
        fast_median_seconds,
        fast_best_seconds,
        fast_heap_median_seconds,
        fast_value: f.value,
        hull_value: f.hull_value,
        plain_steps: ran,
        plain_measured_seconds,
        plain_seconds: plain_measured_seconds * capacity as f64 / ran.max(1) as f64,
    }
}

/// The standard instance: 5,000 tenants, 1 TB in 1 MB blocks, plain method for 2,000 steps.
pub fn bench_alloc() -> AllocBench {
    bench_alloc_with(5000, STANDARD_CAPACITY, 2000, 42)
}

/// Result of [`bench_mlms`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MlmsBench {
    /// Tenants.
    pub tenants: usize,
    /// Storage servers.
    pub servers: usize,
    /// Seconds of one MLMS interval (candidates, spare, LP).
    pub seconds: f64,
    /// Fair speedup reached.
    pub fair_speedup: f64,
    /// The LP's largest deviation from even shares (0: the even split fitted, no LP).
    pub max_deviation: f64,
    /// Candidates that passed the infeasible-partition filter.
    pub candidates: usize,
}

/// Times one MLMS interval for 64 tenants over 64 servers.
pub fn bench_mlms() -> MlmsBench {
    let mut rng = StdRng::seed_from_u64(7);
    let (n, m) = (64usize, 64usize);
    let lat = LevelLatencies {
        lat1: 0.05,
        lat2: 0.5,
        lat_disk: 8.0,
    };
    let tenants = (0..n)
        .map(|i| MlmsTenant {
            name: format!("t{i}"),
            model: TenantModel::Curve {
                curve: synthetic_curve(&mut rng, 200, i % 3 != 0),
                lat,
            },
            slo: 1.0,
            latency_target: None,
            // A band of 16 consecutive servers, so loads overlap unevenly.
            host: 0,
            servers: (0..16).map(|k| (i / 2 + k) % m).collect(),
            rate: 1.0,
        })
        .collect();
    // Uneven servers: a few small ones that the even split overflows.
    let servers: Vec<u64> = (0..m)
        .map(|s| {
            if s % 8 == 0 {
                200
            } else {
                rng.gen_range(800..2400)
            }
        })
        .collect();
    let p = MlmsProblem {
        tenants,
        hosts: vec![20_000],
        servers,
        grid: 32,
    };
    let t = Instant::now();
    let r = plan(&p, Scheme::Mlms).expect("feasible instance");
    MlmsBench {
        tenants: n,
        servers: m,
        seconds: t.elapsed().as_secs_f64(),
        fair_speedup: r.fair_speedup,
        max_deviation: r.placement.max_deviation,
        candidates: r.candidates,
    }
}

/// Runs `bench alloc` and prints its report.
pub fn run() {
    let a = bench_alloc();
    println!(
        "utility, {} tenants x 1,000-point curves, {} steps (1 TB at 1 MB):",
        a.tenants, a.capacity_steps
    );
    println!(
        "  fast (hulls + threshold greedy + fix-up), {} runs: median {:.1} ms, best {:.1} ms",
        a.fast_runs,
        1e3 * a.fast_median_seconds,
        1e3 * a.fast_best_seconds
    );
    println!(
        "  plain Algorithm 3.1 {:.0} ms ({} steps timed once, extrapolated)   ratio to the fast median {:.0}x",
        1e3 * a.plain_seconds,
        a.plain_steps,
        a.plain_seconds / a.fast_median_seconds
    );
    println!(
        "  fast with a heap greedy: median {:.1} ms; objective {:.5} of the hull bound {:.5}",
        1e3 * a.fast_heap_median_seconds,
        a.fast_value,
        a.hull_value
    );
    let m = bench_mlms();
    println!(
        "MLMS, {} tenants x {} servers: {:.1} ms (candidates {}, fair speedup {:.3}, LP max deviation {:.0} blocks)",
        m.tenants,
        m.servers,
        1e3 * m.seconds,
        m.candidates,
        m.fair_speedup,
        m.max_deviation
    );
}
