//! `lachesis bench mrc`: throughput of each curve method on a 10 M-request trace, its mean
//! absolute error against the exact curve, fixed-size SHARDS's memory at two trace
//! lengths, and miniSim's error against full simulation for ARC and LIRS.

use crate::error::Result;
use crate::workload::ensure_trace;
use mrc::{build_curve_stream, mean_absolute_error, spread_sizes, CurveReport, Method, Weighting};
use std::path::Path;
use trace::{KeyMode, RequestStream};

/// The curve of the first `limit` requests, read in batches as `lachesis mrc` reads.
fn curve_of(path: &Path, m: &Method, sizes: &[u64], limit: u64) -> Result<CurveReport> {
    let reqs = trace::open(path, None)?.limit(limit);
    Ok(build_curve_stream(
        m,
        KeyMode::Object,
        Weighting::Requests,
        sizes,
        reqs,
    )?)
}

/// Runs the benchmark.
pub fn run(requests: u64, objects: u64, dir: &Path, minisim: bool) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let spec = format!("zipf:alpha=0.9,objects={objects},requests={requests},seed=42");
    let path = dir.join(format!(
        "zipf-a0.9-n{objects}-r{requests}.oracleGeneral.bin"
    ));
    ensure_trace(&path, &spec)?;
    let sizes = spread_sizes(100, objects);
    println!(
        "trace: {} — {requests} requests, Zipf(0.9) over {objects} objects, object mode, 1 thread",
        path.display()
    );
    let exact = curve_of(&path, &Method::Exact, &sizes, requests)?;
    let e = exact.curve();
    println!(
        "{:<22} {:>12} {:>12} {:>14}",
        "method", "M req/s", "MAE", "state"
    );
    let line = |name: &str, r: &CurveReport, mae: f64| {
        println!(
            "{name:<22} {:>12.1} {:>12.4} {:>11} KiB",
            r.requests as f64 / r.seconds / 1e6,
            mae,
            r.memory_bytes / 1024
        )
    };
    line("exact", &exact, 0.0);
    for (name, m) in [
        ("shards rate 0.01", Method::ShardsRate(0.01)),
        ("shards rate 0.001", Method::ShardsRate(0.001)),
        ("shards s_max 8192", Method::ShardsSize(8192)),
    ] {
        let r = curve_of(&path, &m, &sizes, requests)?;
        line(name, &r, mean_absolute_error(&e, &r.curve(), &sizes));
    }
    let short = curve_of(&path, &Method::ShardsSize(8192), &sizes, requests / 4)?;
    let long = curve_of(&path, &Method::ShardsSize(8192), &sizes, requests)?;
    println!(
        "fixed-size SHARDS memory: {} KiB after {} requests, {} KiB after {} (bounded by s_max)",
        short.memory_bytes / 1024,
        short.requests,
        long.memory_bytes / 1024,
        long.requests
    );
    if minisim {
        let ten = spread_sizes(10, objects / 2);
        for policy in ["arc", "lirs"] {
            let m = Method::MiniSim {
                policy: policy.into(),
                rate: 0.01,
            };
            let r = curve_of(&path, &m, &ten, requests)?;
            let c = r.curve();
            let mut err = 0.0;
            for &s in &ten {
                let full = policy::sim::simulate_stream(
                    policy,
                    s as usize,
                    KeyMode::Object,
                    trace::open(&path, None)?,
                    &|_| {},
                )?;
                err += (c.miss_ratio(s as f64) - full.miss_ratio()).abs();
            }
            println!(
                "miniSim {policy} (rate 0.01): {:.1} M req/s, MAE {:.4} against full simulation at 10 sizes",
                r.requests as f64 / r.seconds / 1e6,
                err / ten.len() as f64
            );
        }
    }
    Ok(())
}
