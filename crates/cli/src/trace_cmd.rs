//! `lachesis trace`: summarise, convert and generate traces.

use crate::source::{write_synthetic, Source, SourceArgs};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Arguments of `lachesis trace`.
#[derive(Args, Debug)]
pub struct TraceArgs {
    #[command(subcommand)]
    what: TraceWhat,
}

#[derive(Subcommand, Debug)]
enum TraceWhat {
    /// Requests, unique objects and blocks, read/write mix, footprint, time span, sequentiality.
    Info {
        /// The trace file.
        file: PathBuf,
        /// Trace format (detected when omitted).
        #[arg(long)]
        format: Option<String>,
        /// Block size for block counts and footprint.
        #[arg(long, default_value_t = 4096)]
        block_size: u32,
        /// Count and skip malformed records.
        #[arg(long)]
        skip_bad: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Convert any readable trace to libCacheSim oracleGeneral (`.zst` to compress).
    Convert {
        /// The trace file.
        file: PathBuf,
        /// Trace format (detected when omitted).
        #[arg(long)]
        format: Option<String>,
        /// Count and skip malformed records.
        #[arg(long)]
        skip_bad: bool,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Generate a synthetic trace in oracleGeneral format.
    ///
    /// SPEC examples: `zipf:alpha=0.9,objects=1000000,requests=10000000,seed=42`,
    /// `mix(zipf:objects=50000@0.7;scan:requests=300000@0.3)`,
    /// `phases(zipf:seed=1;loop:objects=20000)`, `tenants(zipf@2;uniform@1)`.
    /// Leaf keys: objects, requests, seed, alpha, block, len, read, start.
    Gen {
        /// The workload spec.
        spec: String,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
    },
}

/// Runs `lachesis trace`.
pub fn run(a: TraceArgs) -> anyhow::Result<()> {
    match a.what {
        TraceWhat::Info {
            file,
            format,
            block_size,
            skip_bad,
            json,
        } => {
            anyhow::ensure!(block_size > 0, "--block-size must be positive");
            let src = Source::from_args(&SourceArgs {
                trace: Some(file.clone()),
                format,
                skip_bad,
                synthetic: None,
            })?;
            let (reqs, skipped) = src.open()?;
            let i = trace::TraceInfo::compute(reqs, block_size)?;
            if json {
                let mut v = serde_json::to_value(&i)?;
                v["skipped"] = skipped.get().into();
                v["file"] = file.display().to_string().into();
                println!("{v}");
                return Ok(());
            }
            let pct = |n: u64| 100.0 * n as f64 / i.requests.max(1) as f64;
            println!("trace          {}", file.display());
            println!("requests       {}", i.requests);
            println!(
                "ops            {} reads ({:.1}%), {} writes ({:.1}%), {} trims, {} flushes",
                i.reads,
                pct(i.reads),
                i.writes,
                pct(i.writes),
                i.trims,
                i.flushes
            );
            println!("unique objects {}", i.unique_objects);
            println!(
                "unique blocks  {} of {} bytes",
                i.unique_blocks, i.block_size
            );
            println!("footprint      {}", human_bytes(i.footprint_bytes));
            println!(
                "data moved     {} (mean request {:.0} bytes)",
                human_bytes(i.data_bytes),
                i.mean_request_bytes
            );
            println!(
                "time span      {:.3} s (in the trace's time unit, taken as microseconds)",
                i.time_span_us as f64 / 1e6
            );
            println!(
                "sequentiality  {:.1}% of requests continue the previous one",
                100.0 * i.sequentiality
            );
            println!("tenants        {} ({} volumes)", i.tenants, i.volumes);
            if skipped.get() > 0 {
                println!("skipped        {} bad records", skipped.get());
            }
            Ok(())
        }
        TraceWhat::Convert {
            file,
            format,
            skip_bad,
            output,
        } => {
            let src = Source::from_args(&SourceArgs {
                trace: Some(file),
                format,
                skip_bad,
                synthetic: None,
            })?;
            let (reqs, skipped) = src.open()?;
            let n = trace::oracle::write_results(&output, reqs)?;
            println!(
                "wrote {n} records to {} ({} skipped)",
                output.display(),
                skipped.get()
            );
            Ok(())
        }
        TraceWhat::Gen { spec, output } => {
            write_synthetic(&spec, &output)
                .with_context(|| format!("writing {}", output.display()))?;
            println!(
                "wrote {} requests to {}",
                trace::synth::parse(&spec)?.requests(),
                output.display()
            );
            Ok(())
        }
    }
}

/// Bytes with a binary unit.
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    format!("{x:.1} {}", units[u])
}
