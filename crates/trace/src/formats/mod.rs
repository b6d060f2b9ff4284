//! Trace formats: names, detection, and [`open`], the one entry point that turns a path
//! into a streaming request iterator.

pub mod blkparse;
pub mod cloudphysics;
pub mod csv;
pub mod msr;
pub mod oracle;
pub mod spc;
pub mod text;

use crate::{Request, TraceError};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// A trace format.
#[derive(Clone, Debug, PartialEq)]
pub enum Format {
    /// libCacheSim oracleGeneral binary (plain or `.zst`).
    Oracle,
    /// CloudPhysics vscsi CSV.
    CloudPhysics,
    /// MSR Cambridge CSV.
    Msr,
    /// UMass / SPC CSV.
    Spc,
    /// `blkparse` default text output, reading events of one action (`Q` by default).
    Blkparse {
        /// The action letter to read.
        action: String,
    },
    /// Generic CSV with a column mapping.
    Csv(csv::CsvMapping),
}

impl std::str::FromStr for Format {
    type Err = TraceError;
    fn from_str(s: &str) -> Result<Self, TraceError> {
        let (name, rest) = s.split_once(':').unwrap_or((s, ""));
        Ok(match name.to_ascii_lowercase().as_str() {
            "oracle" | "oraclegeneral" | "oracle_general" | "bin" => Format::Oracle,
            "cloudphysics" | "vscsi" => Format::CloudPhysics,
            "msr" => Format::Msr,
            "spc" | "umass" => Format::Spc,
            "blkparse" => Format::Blkparse {
                action: if rest.is_empty() { "Q".into() } else { rest.to_string() },
            },
            "csv" => Format::Csv(rest.parse()?),
            _ => {
                return Err(TraceError::Usage(format!(
                    "unknown trace format `{s}` (known: oracle, cloudphysics, msr, spc, blkparse[:ACTION], csv:MAPPING)"
                )))
            }
        })
    }
}

/// A streaming reader of any supported format.
pub type TraceReader = Box<dyn Iterator<Item = Result<Request, TraceError>> + Send>;

fn raw_input(path: &Path) -> Result<Box<dyn Read + Send>, TraceError> {
    let io = |source| TraceError::Io {
        file: path.to_path_buf(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    Ok(if oracle::is_zstd(path) {
        Box::new(zstd::Decoder::new(f).map_err(io)?)
    } else {
        Box::new(f)
    })
}

/// Guesses the format of `path` from its name and first line.
pub fn detect(path: &Path) -> Result<Format, TraceError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let stem = name.trim_end_matches(".zst");
    if stem.ends_with(".bin") || stem.contains("oraclegeneral") {
        return Ok(Format::Oracle);
    }
    let mut first = String::new();
    let mut r = BufReader::new(raw_input(path)?);
    while first.trim().is_empty() {
        first.clear();
        match r.read_line(&mut first) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => return Ok(Format::Oracle), // not text
        }
    }
    let line = first.trim();
    let commas: Vec<&str> = line.split(',').collect();
    let is_rw = |s: &str| matches!(s.trim().to_ascii_lowercase().as_str(), "r" | "w");
    let fmt = if line.starts_with("version,time,op,size,lbn") {
        Some(Format::CloudPhysics)
    } else if line.starts_with("Timestamp,Hostname")
        || (commas.len() == 7 && matches!(commas[3].trim(), "Read" | "Write"))
    {
        Some(Format::Msr)
    } else if line.starts_with("ASU,") || (commas.len() == 5 && is_rw(commas[3])) {
        Some(Format::Spc)
    } else if line.split_whitespace().next().is_some_and(|t| {
        t.split(',').count() == 2 && t.split(',').all(|x| x.parse::<u32>().is_ok())
    }) {
        Some(Format::Blkparse { action: "Q".into() })
    } else {
        None
    };
    fmt.ok_or_else(|| {
        TraceError::Usage(format!(
            "{}: cannot tell the trace format from its name or first line; give --format (oracle, cloudphysics, msr, spc, blkparse, csv:MAPPING)",
            path.display()
        ))
    })
}

/// Opens `path` as a streaming request iterator, detecting the format when `format` is
/// `None`.
pub fn open(path: &Path, format: Option<&Format>) -> Result<TraceReader, TraceError> {
    let format = match format {
        Some(f) => f.clone(),
        None => detect(path)?,
    };
    let input = raw_input(path)?;
    let p: PathBuf = path.to_path_buf();
    let text = |i: Box<dyn Read + Send>| -> Box<dyn BufRead + Send> {
        Box::new(BufReader::with_capacity(1 << 16, i))
    };
    Ok(match format {
        Format::Oracle => Box::new(oracle::OracleReader::new(input, p)),
        Format::CloudPhysics => Box::new(text::TextReader::new(
            text(input),
            p,
            cloudphysics::CloudPhysics,
        )),
        Format::Msr => Box::new(text::TextReader::new(text(input), p, msr::Msr::default())),
        Format::Spc => Box::new(text::TextReader::new(text(input), p, spc::Spc)),
        Format::Blkparse { action } => Box::new(text::TextReader::new(
            text(input),
            p,
            blkparse::Blkparse::new(&action),
        )),
        Format::Csv(map) => Box::new(text::TextReader::new(
            text(input),
            p,
            csv::GenericCsv::new(map),
        )),
    })
}
