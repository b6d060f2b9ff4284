//! `lachesis trace`: summarise, convert and generate traces.

use crate::source::{Source, SourceArgs};
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
        /// Trace format (detected when omitted): oracle, cloudphysics, msr, spc,
        /// blkparse[:Q|C|D], or csv:MAPPING where MAPPING is comma-separated key=value:
        /// columns offset=N (required), len=N, time=N, op=N, volume=N, tenant=N (0-based);
        /// offset_unit=BYTES, len_unit=BYTES, len_default=BYTES, time_unit=s|ms|us|ns,
        /// header=0|1, delim=,|tab|space|semicolon. Example:
        /// csv:time=0,op=1,offset=2,len=3,offset_unit=512,time_unit=s,header=1
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
    /// Convert any readable trace to libCacheSim oracleGeneral (the default) or to our
    /// `lachesis` CSV (`--to lachesis`), which keeps each request's operation, tenant and
    /// volume; `.zst` at the end of the output name compresses. oracleGeneral has no
    /// operation field: every record reads back as a read, so a conversion that drops
    /// writes, trims or flushes says how many on stderr.
    Convert {
        /// The trace file.
        file: PathBuf,
        /// Trace format (detected when omitted): oracle, cloudphysics, msr, spc,
        /// blkparse[:Q|C|D], or csv:MAPPING where MAPPING is comma-separated key=value:
        /// columns offset=N (required), len=N, time=N, op=N, volume=N, tenant=N (0-based);
        /// offset_unit=BYTES, len_unit=BYTES, len_default=BYTES, time_unit=s|ms|us|ns,
        /// header=0|1, delim=,|tab|space|semicolon. Example:
        /// csv:time=0,op=1,offset=2,len=3,offset_unit=512,time_unit=s,header=1
        #[arg(long)]
        format: Option<String>,
        /// Count and skip malformed records.
        #[arg(long)]
        skip_bad: bool,
        /// Fill next_access_vtime as libCacheSim's traceConv does (holds the trace in
        /// memory); without it every record has -1.
        #[arg(long)]
        next_access: bool,
        /// Output format: `oracle` (libCacheSim oracleGeneral: time, object, size; no
        /// operation or tenant) or `lachesis` (CSV `time_us,tenant,volume,op,offset,len`,
        /// read back by every `trace`, `sim` and `mrc` reader).
        #[arg(long, default_value = "oracle")]
        to: String,
        /// Output file (`.zst` at the end compresses).
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Generate a synthetic trace in oracleGeneral format (the default) or as our
    /// `lachesis` CSV (`--to lachesis`, which keeps writes and tenants; oracleGeneral
    /// reads them back as reads of tenant 0, and says so on stderr).
    ///
    /// SPEC examples: `zipf:alpha=0.9,objects=1000000,requests=10000000,seed=42`,
    /// `mix(zipf:objects=50000@0.7;scan:requests=300000@0.3)`,
    /// `phases(zipf:seed=1;loop:objects=20000)`, `tenants(zipf@2;uniform@1)`.
    /// Leaf keys: objects, requests, seed, alpha, block, len, read, start.
    /// Grammar: WORKLOAD := KIND[:key=value,...] | mix(PART;...) | phases(PART;...) |
    /// tenants(PART;...); PART := WORKLOAD[@weight]; KIND := zipf|uniform|scan|loop.
    Gen {
        /// The workload spec.
        spec: String,
        /// Output format: `oracle` (libCacheSim oracleGeneral) or `lachesis` (CSV
        /// `time_us,tenant,volume,op,offset,len`).
        #[arg(long, default_value = "oracle")]
        to: String,
        /// Output file (`.zst` at the end compresses).
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
            println!("time span      {:.3} s", i.time_span_us as f64 / 1e6);
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
            next_access,
            to,
            output,
        } => {
            let lachesis = output_is_lachesis(&to)?;
            anyhow::ensure!(
                !(lachesis && next_access),
                "--next-access is an oracleGeneral field; drop it with --to lachesis"
            );
            let src = Source::from_args(&SourceArgs {
                trace: Some(file.clone()),
                format,
                skip_bad,
                synthetic: None,
            })?;
            let (reqs, skipped) = src.open()?;
            // Operations other than reads that oracleGeneral cannot carry, and tenants.
            let mut dropped = Dropped::default();
            let reqs = reqs.inspect(|r| {
                if let Ok(r) = r {
                    dropped.count(r);
                }
            });
            let n = if next_access {
                trace::oracle::write_with_next_access(&output, reqs)?
            } else if lachesis {
                let mut w = trace::formats::lachesis::LachesisWriter::create(&output)?;
                let bar = spinner();
                for r in reqs {
                    w.push(&r?)?;
                    if w.written() % BATCH == 0 {
                        bar.inc(BATCH);
                    }
                }
                bar.finish_and_clear();
                w.finish()?
            } else {
                let mut w = trace::oracle::OracleWriter::create(&output)?;
                let bar = spinner();
                for r in reqs {
                    w.push(&r?, -1)?;
                    if w.written() % BATCH == 0 {
                        bar.inc(BATCH);
                    }
                }
                bar.finish_and_clear();
                w.finish()?
            };
            println!(
                "wrote {n} records to {} ({} bad records skipped)",
                output.display(),
                skipped.get()
            );
            if !lachesis {
                if let Some(w) = dropped.warning(n) {
                    eprintln!("lachesis: warning: {w}");
                }
            }
            Ok(())
        }
        TraceWhat::Gen { spec, to, output } => {
            let lachesis = output_is_lachesis(&to)?;
            let w = trace::synth::parse(&spec)?;
            let total = w.requests();
            let bar = crate::progress::bar(total, "gen");
            let mut dropped = Dropped::default();
            let n = if lachesis {
                let mut out = trace::formats::lachesis::LachesisWriter::create(&output)?;
                for r in w.iter() {
                    out.push(&r)?;
                    if out.written() % BATCH == 0 {
                        bar.inc(BATCH);
                    }
                }
                out.finish()?
            } else {
                let mut out = trace::oracle::OracleWriter::create(&output)?;
                for r in w.iter() {
                    dropped.count(&r);
                    out.push(&r, -1)?;
                    if out.written() % BATCH == 0 {
                        bar.inc(BATCH);
                    }
                }
                out.finish()?
            };
            bar.finish_and_clear();
            println!("wrote {n} requests to {}", output.display());
            if let Some(w) = dropped.warning(n) {
                eprintln!("lachesis: warning: {w}");
            }
            Ok(())
        }
    }
}

/// Whether `--to` asks for our CSV (`lachesis`) rather than oracleGeneral (`oracle`).
fn output_is_lachesis(to: &str) -> anyhow::Result<bool> {
    match to.to_ascii_lowercase().as_str() {
        "oracle" | "oraclegeneral" => Ok(false),
        "lachesis" => Ok(true),
        other => anyhow::bail!("--to {other}: use oracle or lachesis"),
    }
}

/// What an oracleGeneral conversion loses: requests that were not reads (they read back
/// as reads) and requests of tenants other than 0 (they read back as tenant 0).
#[derive(Default)]
struct Dropped {
    writes: u64,
    trims: u64,
    flushes: u64,
    other_tenants: u64,
}

impl Dropped {
    fn count(&mut self, r: &trace::Request) {
        match r.op {
            trace::Op::Read => {}
            trace::Op::Write => self.writes += 1,
            trace::Op::Trim => self.trims += 1,
            trace::Op::Flush => self.flushes += 1,
        }
        if r.tenant != 0 {
            self.other_tenants += 1;
        }
    }

    /// One line for stderr, or `None` when nothing was lost.
    fn warning(&self, total: u64) -> Option<String> {
        let pct = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
        let mut lost = Vec::new();
        if self.writes > 0 {
            lost.push(format!(
                "{} writes ({:.1} %)",
                self.writes,
                pct(self.writes)
            ));
        }
        if self.trims > 0 {
            lost.push(format!("{} trims", self.trims));
        }
        if self.flushes > 0 {
            lost.push(format!("{} flushes", self.flushes));
        }
        let mut parts = Vec::new();
        if !lost.is_empty() {
            parts.push(format!(
                "oracleGeneral has no operation field: {} now read back as reads",
                lost.join(", ")
            ));
        }
        if self.other_tenants > 0 {
            parts.push(format!(
                "{} requests of tenants other than 0 read back as tenant 0",
                self.other_tenants
            ));
        }
        (!parts.is_empty()).then(|| format!("{}; use --to lachesis to keep them", parts.join("; ")))
    }
}

/// Records between progress-bar updates (an update per record would cost more than the
/// record).
const BATCH: u64 = 1 << 16;

/// A record counter on stderr for conversions (whose length is unknown in advance);
/// hidden when stderr is not a terminal.
fn spinner() -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new_spinner();
    b.set_style(
        indicatif::ProgressStyle::with_template("{spinner} convert {human_pos} records {per_sec}")
            .expect("static template"),
    );
    b
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
