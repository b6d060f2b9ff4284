//! Errors of trace reading and writing. Every error names the file and where in it
//! (line for text formats, byte offset for binary ones) the problem is.

use std::path::PathBuf;

/// Where in a trace file a problem was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    /// 1-based line number of a text trace.
    Line(u64),
    /// Byte offset of the record in a binary trace.
    Byte(u64),
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Position::Line(n) => write!(f, "line {n}"),
            Position::Byte(n) => write!(f, "byte {n}"),
        }
    }
}

/// An error reading, parsing or writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened, read or written. The I/O error is part of the message
    /// (not a `source()`), so a report printing the error chain shows it once.
    #[error("{file}: {error}")]
    Io {
        /// The trace file.
        file: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A record could not be parsed.
    #[error("{file}: {position}: {message}")]
    Parse {
        /// The trace file.
        file: PathBuf,
        /// Where the bad record is.
        position: Position,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The format name or option is not known or not valid.
    #[error("{0}")]
    Usage(String),
    /// A synthetic workload's leaf has a parameter out of range.
    #[error(transparent)]
    Workload(#[from] crate::synth::LeafError),
}

impl TraceError {
    /// A parse error at `position` of `file`.
    pub fn parse(file: impl Into<PathBuf>, position: Position, message: impl Into<String>) -> Self {
        TraceError::Parse {
            file: file.into(),
            position,
            message: message.into(),
        }
    }

    /// Whether this error is about one bad record (and so may be skipped with `--skip-bad`).
    pub fn is_record_error(&self) -> bool {
        matches!(self, TraceError::Parse { .. })
    }
}
