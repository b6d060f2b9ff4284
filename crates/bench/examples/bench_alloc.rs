//! A profiling harness for the fast utility method on `lachesis bench alloc`'s instance
//! (built by the same helpers), without building the CLI: runs it N times (first
//! argument, default 10) and prints the median and best wall and, on Linux, CPU times
//! (wall time is inflated on a loaded machine). `perf record -g` on this binary profiles
//! the fast method and little else. `lachesis bench alloc` prints the comparison with
//! plain Algorithm 3.1.

use bench::allocation::{standard_curves, utility_problem, STANDARD_CAPACITY};
use lachesis_alloc::utility::{fast, FixUp};
use std::time::Instant;

/// CPU nanoseconds of this thread so far (Linux).
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Median and best of some milliseconds.
fn median_best(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0])
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("runs: a number"))
        .unwrap_or(10)
        .max(1);
    let curves = standard_curves();
    let p = utility_problem(&curves, STANDARD_CAPACITY);
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut value = 0.0;
    for _ in 0..runs {
        let (c0, t) = (cpu_ns(), Instant::now());
        value = fast(&p, FixUp::Round).expect("valid").value;
        wall.push(1e3 * t.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (c0, cpu_ns()) {
            cpu.push((b - a) as f64 / 1e6);
        }
    }
    let (wm, wb) = median_best(wall);
    println!("fast, {runs} runs: wall median {wm:.1} ms, best {wb:.1} ms; value {value:.6}");
    if !cpu.is_empty() {
        let (cm, cb) = median_best(cpu);
        println!("  cpu median {cm:.1} ms, best {cb:.1} ms");
    }
}
