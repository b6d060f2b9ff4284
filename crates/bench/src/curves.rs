//! `lachesis bench mrc`: throughput of each curve method on a 10 M-request trace, its mean
//! absolute error against the exact curve, fixed-size SHARDS's memory at two trace
//! lengths, and miniSim's error against full simulation for ARC and LIRS; then
//! ([`accuracy`]) the error and memory of every method side by side on traces of about
//! 100 k distinct objects it generates (Zipf of four skews, Zipf mixed with scans, with a
//! loop, and a change of phase) and on the shared CloudPhysics trace when it is found.

use crate::error::Result;
use crate::workload::ensure_trace;
use mrc::{
    build_curve, build_curve_stream, mean_absolute_error, spread_sizes, CurveReport, Method,
    Weighting,
};
use std::path::Path;
use trace::{KeyMode, Request, RequestStream};

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

/// The generated traces of [`accuracy`]: about 100 k distinct objects each, 2 M requests.
pub const ACCURACY_TRACES: [&str; 7] = [
    "zipf:alpha=0.5,objects=100000,requests=2000000,seed=101",
    "zipf:alpha=0.7,objects=100000,requests=2000000,seed=102",
    "zipf:alpha=0.9,objects=100000,requests=2000000,seed=103",
    "zipf:alpha=1.2,objects=100000,requests=2000000,seed=104",
    "mix(zipf:alpha=0.9,objects=70000,requests=1900000,seed=105@19;scan:requests=30000,start=1000000@1)",
    "mix(zipf:alpha=0.8,objects=80000,requests=1500000,seed=106@3;loop:objects=20000,start=1000000,requests=500000@1)",
    "phases(zipf:alpha=0.9,objects=50000,requests=1000000,seed=107;zipf:alpha=0.6,objects=100000,start=50000,requests=1000000,seed=108)",
];

/// One method's error and memory on one trace.
#[derive(Clone, Debug)]
pub struct Accuracy {
    /// Mean absolute error against the exact curve at 100 sizes up to the footprint.
    pub mae: f64,
    /// Bytes the method's structures held at the end.
    pub memory_bytes: usize,
}

/// The methods [`accuracy`] compares, exact first: fixed-rate SHARDS at 0.01 with its
/// default floor and without one, fixed-size SHARDS with 8,192 keys.
pub fn accuracy_methods() -> Vec<(&'static str, Method)> {
    vec![
        ("exact", Method::Exact),
        ("rate 0.01", Method::shards_rate(0.01)),
        (
            "rate 0.01 no floor",
            Method::ShardsRate {
                rate: 0.01,
                min_keys: 0,
            },
        ),
        ("s_max 8192", Method::ShardsSize(8192)),
    ]
}

/// Error and memory of each of [`accuracy_methods`] on `reqs` in object mode, and the
/// trace's distinct objects.
pub fn accuracy_on(reqs: &[Request]) -> Result<(u64, Vec<Accuracy>)> {
    let mut footprint = std::collections::HashSet::new();
    reqs.iter().for_each(|r| {
        footprint.insert(r.object_key());
    });
    let unique = footprint.len() as u64;
    drop(footprint);
    let sizes = spread_sizes(100, unique);
    let curve = |m: &Method| build_curve(m, KeyMode::Object, &sizes, reqs.iter().copied().map(Ok));
    let exact = curve(&Method::Exact)?;
    let e = exact.curve();
    let mut out = Vec::new();
    for (_, m) in accuracy_methods() {
        let r = if m == Method::Exact {
            exact.clone()
        } else {
            curve(&m)?
        };
        out.push(Accuracy {
            mae: mean_absolute_error(&e, &r.curve(), &sizes),
            memory_bytes: r.memory_bytes,
        });
    }
    Ok((unique, out))
}

/// Prints the error and memory of every method on each of [`ACCURACY_TRACES`] and on
/// `shared` (the CloudPhysics trace) when given.
pub fn accuracy(shared: Option<&Path>) -> Result<()> {
    let methods = accuracy_methods();
    println!("\nerror (MAE against the exact curve, 100 sizes) and state per method, object mode:");
    print!("{:<44} {:>8}", "trace", "objects");
    for (name, _) in &methods {
        print!(" {name:>20}");
    }
    println!();
    let mut traces: Vec<(String, Vec<Request>)> = Vec::new();
    for spec in ACCURACY_TRACES {
        let w = trace::synth::parse(spec)?;
        traces.push((spec.to_string(), w.iter().collect()));
    }
    if let Some(p) = shared {
        let reqs: std::result::Result<Vec<Request>, _> = trace::open(p, None)?.collect();
        traces.push((p.display().to_string(), reqs?));
    }
    for (name, reqs) in &traces {
        let (unique, acc) = accuracy_on(reqs)?;
        let short: String = if name.chars().count() > 44 {
            format!("{}…", name.chars().take(43).collect::<String>())
        } else {
            name.clone()
        };
        print!("{short:<44} {unique:>8}");
        for a in &acc {
            print!(" {:>9.4} {:>6} KiB", a.mae, a.memory_bytes / 1024);
        }
        println!();
    }
    println!(
        "(rate 0.01 holds at least {} sampled keys while a higher rate can, so it samples about {} keys / objects of these traces)",
        mrc::shards::MIN_SAMPLE,
        mrc::shards::MIN_SAMPLE
    );
    Ok(())
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
        ("shards rate 0.01", Method::shards_rate(0.01)),
        (
            "rate 0.01 no floor",
            Method::ShardsRate {
                rate: 0.01,
                min_keys: 0,
            },
        ),
        ("shards rate 0.001", Method::shards_rate(0.001)),
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
    let shared = std::env::current_dir()
        .ok()
        .and_then(|d| trace::find_shared_trace("cloudPhysicsIO.oracleGeneral.bin", &d));
    accuracy(shared.as_deref())
}
