//! Where requests come from: a trace file (any format `trace` reads, detected when
//! `--format` is omitted) or a seeded synthetic workload. Every consumer opens its own
//! stream, so parallel simulations never share a reader.

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;
use trace::{KeyMode, Plain, RequestStream};

/// The built-in workload used when no `--trace` is given: two tenants, one with a Zipf hot
/// set and one that mixes a hot set with scans, so policies rank differently.
pub const DEFAULT_WORKLOAD: &str = "tenants(zipf:alpha=0.9,objects=100000,requests=600000,seed=1@0.6;mix(zipf:alpha=1.1,objects=30000,requests=300000,seed=2@0.7;scan:objects=200000,requests=200000,seed=3@0.3)@0.4)";

/// Command-line arguments that pick a request source.
#[derive(Args, Debug, Clone)]
pub struct SourceArgs {
    /// Trace file; without it the built-in synthetic workload is used.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Trace format: oracle, cloudphysics, msr, spc, blkparse, or csv:<mapping>
    /// (detected from the file when omitted).
    #[arg(long)]
    pub format: Option<String>,
    /// Count and skip malformed records instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// A synthetic workload spec to use instead of a trace (see `lachesis trace gen --help`).
    #[arg(long, conflicts_with = "trace")]
    pub synthetic: Option<String>,
}

/// A boxed request stream (read in batches by curve building and simulation).
pub type Requests = Box<dyn RequestStream + Send>;

/// A counter of skipped bad records, readable after the stream is consumed.
#[derive(Clone, Default)]
pub struct Skipped(Arc<AtomicU64>);

impl Skipped {
    /// Records skipped so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A resolved request source.
pub enum Source {
    /// A trace file.
    File {
        /// Path.
        path: PathBuf,
        /// Format, if given.
        format: Option<trace::Format>,
        /// Skip bad records.
        skip_bad: bool,
    },
    /// A synthetic workload spec.
    Synthetic(String),
}

/// Footprint and length of a source under one key mode.
pub struct SourceSummary {
    /// Requests.
    pub requests: u64,
    /// Unique keys (objects or blocks).
    pub footprint: u64,
}

impl Source {
    /// Resolves arguments, checking the format and spec.
    pub fn from_args(a: &SourceArgs) -> anyhow::Result<Self> {
        if let Some(path) = &a.trace {
            let format = match &a.format {
                Some(f) => Some(
                    f.parse::<trace::Format>()
                        .with_context(|| format!("--format {f}"))?,
                ),
                None => None,
            };
            Ok(Source::File {
                path: path.clone(),
                format,
                skip_bad: a.skip_bad,
            })
        } else {
            let spec = a
                .synthetic
                .clone()
                .unwrap_or_else(|| DEFAULT_WORKLOAD.to_string());
            trace::synth::parse(&spec).with_context(|| format!("synthetic workload `{spec}`"))?;
            Ok(Source::Synthetic(spec))
        }
    }

    /// A short description for report headers.
    pub fn describe(&self) -> String {
        match self {
            Source::File { path, .. } => path.display().to_string(),
            Source::Synthetic(s) if s == DEFAULT_WORKLOAD => "built-in synthetic workload".into(),
            Source::Synthetic(s) => format!("synthetic `{s}`"),
        }
    }

    /// Opens a fresh stream and the counter of records it skips.
    pub fn open(&self) -> anyhow::Result<(Requests, Skipped)> {
        let mut skipped = Skipped::default();
        let stream: Requests = match self {
            Source::File {
                path,
                format,
                skip_bad,
            } => {
                let r = trace::open(path, format.as_ref())?;
                if *skip_bad {
                    let s = trace::SkipBad::new(r);
                    skipped = Skipped(s.counter());
                    Box::new(s)
                } else {
                    Box::new(r)
                }
            }
            Source::Synthetic(spec) => {
                Box::new(Plain(trace::synth::parse(spec)?.into_iter().map(Ok)))
            }
        };
        Ok((stream, skipped))
    }

    /// One pass counting requests and unique keys.
    pub fn summary(&self, mode: KeyMode) -> anyhow::Result<SourceSummary> {
        let (stream, _) = self.open()?;
        let mut keys = rustc_hash::FxHashSet::default();
        let mut requests = 0u64;
        for r in stream {
            let r = r?;
            requests += 1;
            if r.op.is_data() {
                r.for_each_key(mode, |k| {
                    keys.insert(k);
                });
            }
        }
        Ok(SourceSummary {
            requests,
            footprint: keys.len() as u64,
        })
    }
}
