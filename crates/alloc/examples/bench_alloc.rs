//! Runs the allocation benchmarks once and prints them (what `lachesis bench alloc` shows),
//! plus, on Linux, the fast method's CPU time (wall time is inflated on a loaded machine).

use lachesis_alloc::bench::{bench_alloc, bench_mlms, synthetic_curve};
use lachesis_alloc::utility::{fast, FixUp, UtilityProblem, UtilityTenant};
use rand::SeedableRng;

fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn main() {
    let a = bench_alloc();
    println!(
        "{}",
        serde_json::to_string_pretty(&a).expect("serialisable")
    );
    let m = bench_mlms();
    println!(
        "{}",
        serde_json::to_string_pretty(&m).expect("serialisable")
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let curves: Vec<_> = (0..5000)
        .map(|i| synthetic_curve(&mut rng, 1000, i % 2 == 0))
        .collect();
    let p = UtilityProblem {
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
        capacity_steps: 1_000_000,
    };
    for _ in 0..3 {
        let c0 = cpu_ns();
        let f = fast(&p, FixUp::Round).expect("valid");
        if let (Some(a), Some(b)) = (c0, cpu_ns()) {
            println!(
                "fast: cpu {:.1} ms, value {:.3}",
                (b - a) as f64 / 1e6,
                f.value
            );
        }
    }
}
