//! `lachesis bench`: hot-path figures printed beside a real peer's, from the same run.
//!
//! `bench sim` generates (once, cached under the bench directory) a seeded 10 M-request
//! Zipf trace in libCacheSim's oracleGeneral format, then for each policy runs our
//! simulator single-threaded in object mode and libCacheSim's PyPI bindings on the same
//! file, same size, interleaved `--repeat` times, and prints the best throughput of each
//! side and their ratio. It also measures LRU's
//! memory per cached object as the slope of peak RSS between two cache sizes, each run in
//! a fresh child process so the peaks do not mix.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The libCacheSim reference script, embedded so the binary can run it from anywhere.
const LIBCACHESIM_REF: &str = include_str!("../../../tools/libcachesim_ref.py");

/// Arguments of `lachesis bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// Simulator throughput against libCacheSim (PyPI), and LRU memory per object.
    Sim(SimBench),
    /// Curve methods: speed, error against the exact curve, bounded memory.
    Mrc(MrcBench),
    /// Allocation: 5,000 tenants over 1 TB at 1 MB steps against plain water-filling; MLMS with its LP.
    Alloc,
    /// The node's data path against nbdkit and qemu-nbd on loopback (needs fio, nbdkit, qemu-nbd).
    Nbd {
        /// Seconds per fio run.
        #[arg(long, default_value_t = 4)]
        seconds: u32,
        /// Interleaved runs per side of each comparison; the best of each side is compared.
        #[arg(long, default_value_t = 3)]
        repeat: u32,
        /// Only these rows (comma-separated): hit-qd32, hit-qd1, hit-seq, miss, l1.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
}

#[derive(Args, Debug)]
struct MrcBench {
    /// Requests in the generated trace.
    #[arg(long, default_value_t = 10_000_000)]
    requests: u64,
    /// Distinct objects in the generated trace.
    #[arg(long, default_value_t = 1_000_000)]
    objects: u64,
    /// Where the generated trace is kept between runs.
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// Skip the miniSim comparison against full simulation (the slow part).
    #[arg(long)]
    no_minisim: bool,
}

#[derive(Args, Debug)]
struct SimBench {
    /// Requests in the generated trace.
    #[arg(long, default_value_t = 10_000_000)]
    requests: u64,
    /// Distinct objects in the generated trace.
    #[arg(long, default_value_t = 1_000_000)]
    objects: u64,
    /// Zipf skew of the generated trace.
    #[arg(long, default_value_t = 0.9)]
    alpha: f64,
    /// Cache size in objects.
    #[arg(long, default_value_t = 100_000)]
    size: u64,
    /// Policies to compare.
    #[arg(long, default_value = "lru,fifo,clock,arc,lirs,2q")]
    policy: String,
    /// Where the generated trace is kept between runs.
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// Python interpreter with `libcachesim` installed.
    #[arg(long, default_value = "python3")]
    python: String,
    /// Skip the memory measurement.
    #[arg(long)]
    no_memory: bool,
    /// Runs of each side per policy, interleaved (ours, peer, ours, ...); the best of each
    /// side is compared, so a burst of load from a neighbour on a shared machine does not
    /// decide the ratio.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
}

#[derive(Deserialize)]
struct Line {
    policy: String,
    miss_ratio: f64,
    requests_per_sec: Option<f64>,
    #[serde(default)]
    peak_rss_bytes: Option<u64>,
}

/// Runs `lachesis bench`.
pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    match a.what {
        BenchWhat::Sim(b) => bench_sim(b),
        BenchWhat::Alloc => {
            let a = lachesis_alloc::bench::bench_alloc();
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
            let m = lachesis_alloc::bench::bench_mlms();
            println!(
                "MLMS, {} tenants x {} servers: {:.1} ms (candidates {}, fair speedup {:.3}, LP max deviation {:.0} blocks)",
                m.tenants,
                m.servers,
                1e3 * m.seconds,
                m.candidates,
                m.fair_speedup,
                m.max_deviation
            );
            Ok(())
        }
        BenchWhat::Nbd {
            seconds,
            repeat,
            only,
        } => crate::bench_nbd::run(seconds, repeat, &only),
        BenchWhat::Mrc(b) => crate::bench_mrc::run(b.requests, b.objects, &b.dir, !b.no_minisim),
    }
}

fn json_lines(cmd: &mut Command) -> anyhow::Result<Vec<Line>> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("bad JSON line `{l}`")))
        .collect()
}

fn ours(trace: &Path, policy: &str, size: u64) -> anyhow::Result<Line> {
    let exe = std::env::current_exe()?;
    let mut v = json_lines(
        Command::new(exe)
            .args([
                "sim",
                "--ignore-obj-size",
                "--json",
                "--threads",
                "1",
                "--trace",
            ])
            .arg(trace)
            .args(["--policy", policy, "--size", &size.to_string()]),
    )?;
    v.pop().context("no output from lachesis sim")
}

fn peer(python: &str, trace: &Path, policy: &str, size: u64) -> anyhow::Result<Line> {
    let mut v = json_lines(
        Command::new(python)
            .args(["-c", LIBCACHESIM_REF, "--trace"])
            .arg(trace)
            .args(["--policy", policy, "--size", &size.to_string()]),
    )
    .context("the libCacheSim peer (pip install libcachesim)")?;
    v.pop().context("no output from the libCacheSim peer")
}

fn bench_sim(b: SimBench) -> anyhow::Result<()> {
    std::fs::create_dir_all(&b.dir).with_context(|| format!("creating {}", b.dir.display()))?;
    let spec = format!(
        "zipf:alpha={},objects={},requests={},seed=42",
        b.alpha, b.objects, b.requests
    );
    let trace = b.dir.join(format!(
        "zipf-a{}-n{}-r{}.oracleGeneral.bin",
        b.alpha, b.objects, b.requests
    ));
    ensure_trace(&trace, &spec)?;
    println!(
        "trace: {} — {} requests, Zipf({}) over {} objects; cache {} objects, object mode, 1 thread",
        trace.display(),
        b.requests,
        b.alpha,
        b.objects,
        b.size
    );
    println!(
        "{:<8} {:>12} {:>12} {:>8} {:>10} {:>10}",
        "policy", "lachesis", "libCacheSim", "ratio", "miss", "peer miss"
    );
    println!(
        "{:<8} {:>12} {:>12}   (best of {} interleaved runs each)",
        "",
        "M req/s",
        "M req/s",
        b.repeat.max(1)
    );
    for p in b.policy.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (mut o, mut t) = (None::<Line>, None::<Line>);
        for _ in 0..b.repeat.max(1) {
            let best = |old: Option<Line>, new: Line| match old {
                Some(x) if x.requests_per_sec >= new.requests_per_sec => Some(x),
                _ => Some(new),
            };
            o = best(o, ours(&trace, p, b.size)?);
            t = best(t, peer(&b.python, &trace, p, b.size)?);
        }
        let (o, t) = (o.context("no run")?, t.context("no run")?);
        let (ro, rt) = (
            o.requests_per_sec.unwrap_or(0.0),
            t.requests_per_sec.unwrap_or(0.0),
        );
        println!(
            "{:<8} {:>12.2} {:>12.2} {:>7.2}x {:>10.4} {:>10.4}",
            o.policy,
            ro / 1e6,
            rt / 1e6,
            if rt > 0.0 { ro / rt } else { f64::NAN },
            o.miss_ratio,
            t.miss_ratio
        );
    }
    if !b.no_memory {
        memory_slope(&b.dir)?;
    }
    Ok(())
}

/// LRU's bytes per cached object: peak RSS at 2 M and 1 M objects, on a trace of 3 M
/// distinct objects touched in turn (so both caches fill), divided by the difference.
fn memory_slope(dir: &Path) -> anyhow::Result<()> {
    let trace = dir.join("loop-3m.oracleGeneral.bin");
    if !trace.exists() {
        crate::source::write_synthetic("loop:objects=3000000,requests=6000000", &trace)?;
    }
    let exe = std::env::current_exe()?;
    let mut peak = Vec::new();
    for size in [1_000_000u64, 2_000_000] {
        let v = json_lines(
            Command::new(&exe)
                .args([
                    "sim",
                    "--ignore-obj-size",
                    "--json",
                    "--threads",
                    "1",
                    "--report-memory",
                    "--policy",
                    "lru",
                    "--size",
                    &size.to_string(),
                    "--trace",
                ])
                .arg(&trace),
        )?;
        let rss = v
            .last()
            .and_then(|l| l.peak_rss_bytes)
            .context("peak RSS not reported (needs Linux /proc)")?;
        peak.push((size, rss));
    }
    let slope = (peak[1].1 as f64 - peak[0].1 as f64) / (peak[1].0 - peak[0].0) as f64;
    println!(
        "lru memory: peak RSS {:.1} MiB at {} objects, {:.1} MiB at {} objects: {:.1} bytes per cached object (target <= 64)",
        peak[0].1 as f64 / 1048576.0,
        peak[0].0,
        peak[1].1 as f64 / 1048576.0,
        peak[1].0,
        slope
    );
    Ok(())
}

/// Generates `path` from the workload `spec` unless it exists.
pub fn ensure_trace(path: &Path, spec: &str) -> anyhow::Result<()> {
    if !path.exists() {
        eprintln!("generating {} ({spec})", path.display());
        crate::source::write_synthetic(spec, path)?;
    }
    Ok(())
}
