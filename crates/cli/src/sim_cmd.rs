//! `lachesis sim`: replays a trace (or the built-in synthetic workload) through one cache
//! per (policy, size) and prints miss ratio, byte miss ratio and throughput, as a table or
//! as JSON Lines. Combinations run in parallel over a rayon pool (`--threads 1` for timing).

use crate::sizes::{parse_sizes, SizeSpec};
use crate::source::{Source, SourceArgs};
use anyhow::Context;
use clap::Args;
use rayon::prelude::*;
use serde::Serialize;
use trace::KeyMode;

/// Arguments of `lachesis sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Eviction policies, comma-separated, and the flag may be repeated; each `name` or
    /// `name:key=value,...` (e.g. `lru,arc,2q:kin=0.3,kout=0.6`: a bare `key=value`
    /// continues the policy before it).
    #[arg(long, default_value = "lru,fifo,clock,arc,lirs,2q,s3fifo,sieve")]
    policy: Vec<String>,
    /// Cache sizes, comma-separated: a share of the footprint (`5%`), a number of
    /// objects/blocks (`1000`), or bytes with a unit (`64MiB`, block mode). `--sizes` is
    /// the same flag.
    #[arg(long, visible_alias = "sizes", default_value = "1%,5%,10%,20%")]
    size: String,
    /// Block size in bytes for block mode.
    #[arg(long, default_value_t = 4096)]
    block_size: u32,
    /// Object mode: every request is one object of size 1 (libCacheSim's `--ignore-obj-size`).
    #[arg(long)]
    ignore_obj_size: bool,
    /// Worker threads (default: all cores; 1 for timing).
    #[arg(long)]
    threads: Option<usize>,
    /// Print JSON Lines, one object per (policy, size).
    #[arg(long)]
    json: bool,
    /// Add the process's peak resident memory (`peak_rss_bytes`) to each record.
    #[arg(long)]
    report_memory: bool,
}

/// One line of `lachesis sim --json`.
#[derive(Serialize, Debug)]
pub struct SimRecord {
    /// The policy spec as given.
    pub policy: String,
    /// The policy's canonical name with parameters.
    pub policy_name: String,
    /// `object` or `block`.
    pub mode: &'static str,
    /// Cache size in objects (object mode) or blocks (block mode).
    pub cache_size: u64,
    /// Requests in the trace.
    pub requests: u64,
    /// Cache lookups (requests in object mode, blocks in block mode).
    pub accesses: u64,
    /// Lookups that missed.
    pub misses: u64,
    /// `misses / accesses`.
    pub miss_ratio: f64,
    /// Missed bytes over requested bytes.
    pub byte_miss_ratio: f64,
    /// Wall-clock seconds of this (policy, size) run.
    pub seconds: f64,
    /// Requests per second of this run.
    pub requests_per_sec: f64,
    /// Records skipped as bad (`--skip-bad`).
    pub skipped: u64,
    /// Peak resident memory of the whole process, with `--report-memory`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
}

/// Runs `lachesis sim`.
pub fn run(a: SimArgs) -> anyhow::Result<()> {
    let source = Source::from_args(&a.source)?;
    let mode = if a.ignore_obj_size {
        KeyMode::Object
    } else {
        if a.block_size == 0 {
            anyhow::bail!("--block-size must be positive");
        }
        KeyMode::Block {
            block_size: a.block_size,
        }
    };
    let sizes = parse_sizes(&a.size)?;
    let specs = crate::policies::policy_specs(&a.policy)?;
    let summary = if sizes.iter().any(|s| s.needs_footprint()) || !a.json {
        Some(source.summary(mode)?)
    } else {
        None
    };
    let footprint = summary.as_ref().map_or(0, |s| s.footprint);
    let entry_bytes = mode.block_size().unwrap_or(1) as u64;
    let mut jobs = Vec::new();
    for spec in &specs {
        for s in &sizes {
            let n = s.resolve(footprint, entry_bytes);
            if matches!(s, SizeSpec::Bytes(_)) && mode == KeyMode::Object {
                anyhow::bail!("sizes in bytes need block mode (drop --ignore-obj-size)");
            }
            jobs.push((spec.clone(), n));
        }
    }
    let total = summary.as_ref().map_or(0, |s| s.requests) * jobs.len() as u64;
    let bar = crate::progress::bar(total, "sim");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(a.threads.unwrap_or(0))
        .build()?;
    let results: Vec<anyhow::Result<SimRecord>> = pool.install(|| {
        jobs.par_iter()
            .map(|(spec, size)| {
                let (reqs, skipped) = source.open()?;
                let st =
                    policy::sim::simulate_stream(spec, *size as usize, mode, reqs, &|n| bar.inc(n))
                        .with_context(|| format!("{spec} at {size}"))?;
                Ok(SimRecord {
                    policy: spec.clone(),
                    policy_name: policy::build(spec)?.name(),
                    mode: if mode == KeyMode::Object {
                        "object"
                    } else {
                        "block"
                    },
                    cache_size: *size,
                    requests: st.requests,
                    accesses: st.accesses,
                    misses: st.misses,
                    miss_ratio: st.miss_ratio(),
                    byte_miss_ratio: st.byte_miss_ratio(),
                    seconds: st.seconds,
                    requests_per_sec: st.requests_per_sec(),
                    skipped: skipped.get(),
                    peak_rss_bytes: None,
                })
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut records: Vec<SimRecord> = results.into_iter().collect::<anyhow::Result<_>>()?;
    if a.report_memory {
        let peak = peak_rss_bytes();
        for r in &mut records {
            r.peak_rss_bytes = peak;
        }
    }
    if a.json {
        for r in &records {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    if let Some(s) = &summary {
        println!(
            "trace: {} — {} requests, footprint {} {}",
            source.describe(),
            s.requests,
            s.footprint,
            if mode == KeyMode::Object {
                "objects"
            } else {
                "blocks"
            }
        );
    }
    println!(
        "{:<22} {:>10} {:>7} {:>10} {:>10} {:>10}",
        "policy", "size", "%fp", "miss", "byte-miss", "Mreq/s"
    );
    for r in &records {
        let share = if footprint > 0 {
            format!("{:.1}", 100.0 * r.cache_size as f64 / footprint as f64)
        } else {
            "-".into()
        };
        println!(
            "{:<22} {:>10} {:>7} {:>10.4} {:>10.4} {:>10.2}",
            r.policy,
            r.cache_size,
            share,
            r.miss_ratio,
            r.byte_miss_ratio,
            r.requests_per_sec / 1e6
        );
    }
    if let Some(skipped) = records.first().map(|r| r.skipped).filter(|&n| n > 0) {
        println!("skipped {skipped} bad records");
    }
    Ok(())
}

/// The process's peak resident set size (`VmHWM` in `/proc/self/status`), if known.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
