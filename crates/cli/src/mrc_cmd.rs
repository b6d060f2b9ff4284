//! `lachesis mrc`: hit-ratio curves of a trace by one or more methods, as a table, JSON,
//! and a PNG chart with every method on one plot.

use crate::plot::{line_chart, Series};
use crate::sizes::{parse_sizes, SizeSpec};
use crate::source::{Source, SourceArgs};
use anyhow::{bail, Context};
use clap::Args;
use mrc::{build_curve_stream, spread_sizes, CurveReport, Method, Weighting};
use rayon::prelude::*;
use std::path::PathBuf;
use trace::KeyMode;

/// Arguments of `lachesis mrc`.
#[derive(Args, Debug)]
pub struct MrcArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Methods, comma-separated: exact (LRU), shards (fixed-size, or fixed-rate with
    /// --rate), shards-rate, shards-size, minisim (any --policy).
    #[arg(long, default_value = "exact,shards")]
    method: String,
    /// Policies for minisim, one curve each: comma-separated, and the flag may be
    /// repeated (as `sim --policy`; exact and SHARDS are LRU by nature).
    #[arg(long, default_value = "lru")]
    policy: Vec<String>,
    /// Sampling rate for SHARDS fixed-rate and miniSim (miniSim defaults to 0.05).
    #[arg(long, allow_negative_numbers = true)]
    rate: Option<f64>,
    /// Floor on fixed-rate SHARDS's sample: while a trace has fewer than this many keys per
    /// `1/rate` distinct ones, it samples at the rate that keeps this many (0: the plain
    /// fixed rate, whatever the sample's size).
    #[arg(long, default_value_t = mrc::shards::MIN_SAMPLE)]
    min_sample: usize,
    /// Most sampled keys for fixed-size SHARDS.
    #[arg(long, default_value_t = 8192)]
    smax: usize,
    /// One integer N: N sizes spread up to the footprint; or a list of sizes (`1000,5%,64MiB`).
    /// `--size` is the same flag.
    #[arg(long, visible_alias = "size", default_value = "50")]
    sizes: String,
    /// Block size in bytes for block mode.
    #[arg(long, default_value_t = 4096)]
    block_size: u32,
    /// Object mode (libCacheSim's `--ignore-obj-size`).
    #[arg(long)]
    ignore_obj_size: bool,
    /// What the miss ratio counts: `requests` (each lookup) or `bytes` (the byte miss ratio).
    #[arg(long, default_value = "requests")]
    weight: String,
    /// Write a PNG chart of all methods' curves here.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print one JSON object per method.
    #[arg(long)]
    json: bool,
}

fn methods(a: &MrcArgs) -> anyhow::Result<Vec<Method>> {
    let mut v = Vec::new();
    for m in a.method.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        v.push(match m {
            "exact" => Method::Exact,
            "shards" => match a.rate {
                Some(rate) => Method::ShardsRate {
                    rate,
                    min_keys: a.min_sample,
                },
                None => Method::ShardsSize(a.smax),
            },
            "shards-rate" => Method::ShardsRate {
                rate: a.rate.unwrap_or(0.01),
                min_keys: a.min_sample,
            },
            "shards-size" => Method::ShardsSize(a.smax),
            "minisim" => {
                for p in crate::policies::policy_specs(&a.policy)? {
                    v.push(Method::MiniSim {
                        policy: p,
                        rate: a.rate.unwrap_or(0.05),
                    });
                }
                continue;
            }
            other => {
                bail!("unknown method `{other}` (exact, shards, shards-rate, shards-size, minisim)")
            }
        });
    }
    for m in &v {
        m.validate()
            .with_context(|| format!("--method {}", m.name()))?;
    }
    if v.is_empty() {
        bail!("no method given");
    }
    Ok(v)
}

/// Runs `lachesis mrc`.
pub fn run(a: MrcArgs) -> anyhow::Result<()> {
    let source = Source::from_args(&a.source)?;
    let mode = if a.ignore_obj_size {
        KeyMode::Object
    } else {
        anyhow::ensure!(a.block_size > 0, "--block-size must be positive");
        KeyMode::Block {
            block_size: a.block_size,
        }
    };
    let methods = methods(&a)?;
    let weighting = match a.weight.as_str() {
        "requests" => Weighting::Requests,
        "bytes" => Weighting::Bytes,
        w => bail!("--weight {w}: use requests or bytes"),
    };
    let summary = source.summary(mode)?;
    if summary.footprint == 0 {
        bail!(
            "{}: the trace has no read or write request: no curve to build",
            source.describe()
        );
    }
    let entry_bytes = mode.block_size().unwrap_or(1) as u64;
    let sizes: Vec<u64> = match a.sizes.trim().parse::<usize>() {
        Ok(0) => bail!("--sizes: ask for at least one size"),
        Ok(n) => spread_sizes(n, summary.footprint),
        Err(_) => {
            let mut v: Vec<u64> = parse_sizes(&a.sizes)?
                .into_iter()
                .map(|s: SizeSpec| s.resolve(summary.footprint, entry_bytes))
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        }
    };
    let reports: Vec<anyhow::Result<CurveReport>> = methods
        .par_iter()
        .map(|m| {
            let (reqs, _) = source.open()?;
            Ok(build_curve_stream(m, mode, weighting, &sizes, reqs)?)
        })
        .collect();
    let reports: Vec<CurveReport> = reports.into_iter().collect::<anyhow::Result<_>>()?;
    if let Some(path) = &a.plot {
        let series: Vec<Series> = reports
            .iter()
            .map(|r| {
                Series::solid(
                    format!("{} ({})", r.method, r.policy),
                    r.points
                        .iter()
                        .map(|p| (p.cache_size as f64, p.miss_ratio))
                        .collect(),
                )
            })
            .collect();
        let unit = if mode == KeyMode::Object {
            "objects"
        } else {
            "blocks"
        };
        line_chart(
            path,
            &format!("Miss ratio curve — {}", source.describe()),
            &format!("cache size ({unit})"),
            "miss ratio",
            &series,
        )?;
    }
    if a.json {
        for r in &reports {
            let mut v = serde_json::to_value(r)?;
            v["block_size"] = mode.block_size().into();
            v["footprint"] = summary.footprint.into();
            println!("{v}");
        }
        return Ok(());
    }
    println!(
        "trace: {} — {} requests, footprint {} {}",
        source.describe(),
        summary.requests,
        summary.footprint,
        if mode == KeyMode::Object {
            "objects"
        } else {
            "blocks"
        }
    );
    print!("{:>12}", "size");
    for r in &reports {
        print!(" {:>14}", r.method);
    }
    println!();
    for (i, &s) in std::iter::once(&0).chain(sizes.iter()).enumerate() {
        print!("{s:>12}");
        for r in &reports {
            print!(
                " {:>14.4}",
                r.points.get(i).map_or(f64::NAN, |p| p.miss_ratio)
            );
        }
        println!();
    }
    for r in &reports {
        println!(
            "{}: {:.3} s, {:.1} M accesses/s, {} KiB of state",
            r.method,
            r.seconds,
            r.accesses as f64 / r.seconds.max(1e-9) / 1e6,
            r.memory_bytes / 1024
        );
    }
    if let Some(p) = &a.plot {
        println!("chart written to {}", p.display());
    }
    Ok(())
}
