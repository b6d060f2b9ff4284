//! Trace formats: names, detection, and [`open`], the one entry point that turns a path
//! into a streaming request iterator.
//!
//! | `--format` name | file | detected by |
//! |---|---|---|
//! | `oracle` (`oracleGeneral`, `oracle.zst`) | libCacheSim oracleGeneral binary | a `.bin` or `.oracleGeneral` name (before `.zst`), or binary content |
//! | `cloudphysics` (`vscsi`) | `version,time,op,size,lbn` CSV | that header |
//! | `msr` | MSR Cambridge CSV | a `Timestamp,Hostname` header or a 7-field line with `Read`/`Write` 4th |
//! | `spc` (`umass`) | UMass / SPC CSV | an `ASU,` header or a 5-field line with `r`/`w` 4th |
//! | `blkparse[:ACTION]` | `blkparse` text | a first field `MAJ,MIN` |
//! | `lachesis` | our CSV keeping op, tenant and volume (see [`lachesis`]) | its header line |
//! | `csv:MAPPING` | any CSV (see [`csv`]) | never: give it |
//!
//! Any file may be zstd-compressed: a `.zst` name or the zstd magic number at its start is
//! enough.

pub mod blkparse;
pub mod cloudphysics;
pub mod csv;
pub mod lachesis;
pub mod msr;
pub mod oracle;
mod sink;
pub mod spc;
pub mod text;

use crate::{Request, TraceError};
use std::io::{BufRead, BufReader, Read, Seek};
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
    /// Our own CSV, keeping op, tenant and volume.
    Lachesis,
    /// Generic CSV with a column mapping.
    Csv(csv::CsvMapping),
}

/// The format names `--format` accepts, for help and error texts.
pub const FORMAT_NAMES: &str =
    "oracle (oracleGeneral, .zst detected), cloudphysics, msr, spc, blkparse[:Q|C|D], lachesis, csv:MAPPING";

impl std::str::FromStr for Format {
    type Err = TraceError;
    fn from_str(s: &str) -> Result<Self, TraceError> {
        let (name, rest) = s.split_once(':').unwrap_or((s, ""));
        Ok(match name.trim().to_ascii_lowercase().as_str() {
            "oracle" | "oraclegeneral" | "oracle_general" | "oracle.zst" | "oraclegeneral.zst"
            | "bin" => Format::Oracle,
            "cloudphysics" | "vscsi" => Format::CloudPhysics,
            "msr" => Format::Msr,
            "spc" | "umass" => Format::Spc,
            "blkparse" => {
                let action = if rest.is_empty() { "Q" } else { rest.trim() };
                if action.len() != 1 || !action.chars().all(|c| c.is_ascii_uppercase()) {
                    return Err(TraceError::Usage(format!(
                        "blkparse action `{action}` is not one upper-case letter (Q queue, D dispatch, C complete)"
                    )));
                }
                Format::Blkparse {
                    action: action.to_string(),
                }
            }
            "lachesis" => Format::Lachesis,
            "csv" => Format::Csv(rest.parse()?),
            _ => {
                return Err(TraceError::Usage(format!(
                    "unknown trace format `{s}` (known: {FORMAT_NAMES})"
                )))
            }
        })
    }
}

/// A streaming reader of any supported format. The oracle reader, the one that must be
/// fast, is a variant of its own so its `next` inlines; text readers are boxed.
pub enum TraceReader {
    /// libCacheSim oracleGeneral.
    Oracle(oracle::OracleReader),
    /// Any line-oriented format.
    Text(Box<dyn Iterator<Item = Result<Request, TraceError>> + Send>),
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;
    /// Always inlined: the oracle arm then fuses with the consumer's loop (left to the
    /// inliner's judgement it was a call per request, a fifth of a SHARDS run).
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            TraceReader::Oracle(r) => r.next(),
            TraceReader::Text(r) => r.next(),
        }
    }
}

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Opens `path` for reading, decompressing zstd (by name or magic number).
pub(crate) fn raw_input(path: &Path) -> Result<Box<dyn Read + Send>, TraceError> {
    let io = |source| TraceError::Io {
        file: path.to_path_buf(),
        error: source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match f.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    f.rewind().map_err(io)?;
    Ok(if oracle::is_zstd(path) || magic == ZSTD_MAGIC {
        Box::new(zstd::Decoder::new(f).map_err(io)?)
    } else {
        Box::new(f)
    })
}

/// Guesses the format of `path` from its name, then from its first bytes and line.
pub fn detect(path: &Path) -> Result<Format, TraceError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let stem = name.trim_end_matches(".zst");
    if stem.ends_with(".bin") || stem.ends_with(".oraclegeneral") || stem.contains("oraclegeneral")
    {
        return Ok(Format::Oracle);
    }
    let io = |source| TraceError::Io {
        file: path.to_path_buf(),
        error: source,
    };
    let mut head = Vec::with_capacity(4096);
    raw_input(path)?
        .take(4096)
        .read_to_end(&mut head)
        .map_err(io)?;
    // Text traces have no NUL bytes; oracle records always do (high bytes of obj_id).
    if head.contains(&0) {
        return Ok(Format::Oracle);
    }
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    let fmt = line.and_then(detect_line);
    fmt.ok_or_else(|| {
        TraceError::Usage(format!(
            "{}: cannot tell the trace format from its name or first line; give --format ({FORMAT_NAMES})",
            path.display()
        ))
    })
}

fn detect_line(line: &str) -> Option<Format> {
    let commas: Vec<&str> = line.split(',').map(str::trim).collect();
    let is_rw = |s: &str| matches!(s.to_ascii_lowercase().as_str(), "r" | "w");
    let lower = line.to_ascii_lowercase();
    if lower.starts_with(lachesis::HEADER) {
        Some(Format::Lachesis)
    } else if lower.starts_with("version,time,op,size,lbn") {
        Some(Format::CloudPhysics)
    } else if lower.starts_with("timestamp,hostname")
        || (commas.len() == 7 && matches!(commas[3], "Read" | "Write"))
    {
        Some(Format::Msr)
    } else if lower.starts_with("asu,") || (commas.len() == 5 && is_rw(commas[3])) {
        Some(Format::Spc)
    } else if line.split_whitespace().next().is_some_and(|t| {
        t.split(',').count() == 2 && t.split(',').all(|x| x.parse::<u32>().is_ok())
    }) {
        Some(Format::Blkparse { action: "Q".into() })
    } else {
        None
    }
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
    let text =
        |input| -> Box<dyn BufRead + Send> { Box::new(BufReader::with_capacity(1 << 16, input)) };
    Ok(match format {
        Format::Oracle => TraceReader::Oracle(oracle::OracleReader::new(input, p)),
        Format::CloudPhysics => TraceReader::Text(Box::new(text::TextReader::new(
            text(input),
            p,
            cloudphysics::CloudPhysics,
        ))),
        Format::Msr => TraceReader::Text(Box::new(text::TextReader::new(
            text(input),
            p,
            msr::Msr::default(),
        ))),
        Format::Spc => TraceReader::Text(Box::new(text::TextReader::new(text(input), p, spc::Spc))),
        Format::Blkparse { action } => TraceReader::Text(Box::new(text::TextReader::new(
            text(input),
            p,
            blkparse::Blkparse::new(&action),
        ))),
        Format::Lachesis => TraceReader::Text(Box::new(text::TextReader::new(
            text(input),
            p,
            csv::GenericCsv::new(lachesis::MAPPING.parse().expect("fixed mapping")),
        ))),
        Format::Csv(map) => TraceReader::Text(Box::new(text::TextReader::new(
            text(input),
            p,
            csv::GenericCsv::new(map),
        ))),
    })
}
