//! The shared machinery of line-oriented trace formats: a buffered line reader that counts
//! lines, and [`TextReader`], which turns a [`LineParser`] into a request iterator whose
//! errors name the file and line.

use crate::{Position, Request, TraceError};
use std::io::BufRead;
use std::path::PathBuf;

/// Parses one line of a text trace.
pub trait LineParser: Send {
    /// `Ok(None)` skips the line (header, comment, a line of another kind); `Err` is a
    /// message naming the bad field.
    fn parse(&mut self, line: &str) -> Result<Option<Request>, String>;
}

/// A streaming reader of a text trace.
pub struct TextReader<P> {
    input: Box<dyn BufRead + Send>,
    path: PathBuf,
    line_no: u64,
    buf: String,
    parser: P,
    done: bool,
}

impl<P: LineParser> TextReader<P> {
    /// Reads `input` (named `path` in errors) with `parser`.
    pub fn new(input: Box<dyn BufRead + Send>, path: PathBuf, parser: P) -> Self {
        TextReader {
            input,
            path,
            line_no: 0,
            buf: String::with_capacity(256),
            parser,
            done: false,
        }
    }
}

impl<P: LineParser> Iterator for TextReader<P> {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            self.buf.clear();
            match self.input.read_line(&mut self.buf) {
                Ok(0) => self.done = true,
                Ok(_) => {
                    self.line_no += 1;
                    let line = self.buf.trim_end_matches(['\n', '\r']);
                    if line.trim().is_empty() {
                        continue;
                    }
                    match self.parser.parse(line) {
                        Ok(Some(r)) => return Some(Ok(r)),
                        Ok(None) => continue,
                        Err(message) => {
                            return Some(Err(TraceError::parse(
                                self.path.clone(),
                                Position::Line(self.line_no),
                                message,
                            )))
                        }
                    }
                }
                Err(e) => {
                    self.done = true;
                    let source = if e.kind() == std::io::ErrorKind::InvalidData {
                        return Some(Err(TraceError::parse(
                            self.path.clone(),
                            Position::Line(self.line_no + 1),
                            "not valid UTF-8 text",
                        )));
                    } else {
                        e
                    };
                    return Some(Err(TraceError::Io {
                        file: self.path.clone(),
                        error: source,
                    }));
                }
            }
        }
        None
    }
}

/// A field of a trace line that does not parse; names the field and quotes its text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// Not a non-negative integer ([`uint`]).
    #[error("field `{name}`: `{text}` is not a non-negative integer")]
    NotUint {
        /// The field.
        name: String,
        /// Its text, trimmed.
        text: String,
    },
    /// Not a finite non-negative number ([`float`]).
    #[error("field `{name}`: `{text}` is not a non-negative number")]
    NotFloat {
        /// The field.
        name: String,
        /// Its text, trimmed.
        text: String,
    },
    /// A length past `u32` ([`len32`]).
    #[error("field `{name}`: {bytes} bytes is too large for one request")]
    TooLong {
        /// The field.
        name: String,
        /// The length.
        bytes: u64,
    },
    /// Not a hex SCSI opcode ([`super::cloudphysics::scsi_op`]).
    #[error("field `op`: `{0}` is not a hex SCSI opcode")]
    NotHexOpcode(String),
    /// A SCSI opcode that is not a read, write, trim or flush.
    #[error("field `op`: unknown SCSI opcode `{0}`")]
    UnknownOpcode(String),
}

/// A [`LineParser`] reports a bad line as its message.
impl From<FieldError> for String {
    fn from(e: FieldError) -> String {
        e.to_string()
    }
}

/// Parses a field as an unsigned integer, naming it on failure.
pub fn uint(field: &str, name: &str) -> Result<u64, FieldError> {
    field.trim().parse().map_err(|_| FieldError::NotUint {
        name: name.to_string(),
        text: field.trim().to_string(),
    })
}

/// Parses a field as a finite non-negative float, naming it on failure.
pub fn float(field: &str, name: &str) -> Result<f64, FieldError> {
    match field.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(FieldError::NotFloat {
            name: name.to_string(),
            text: field.trim().to_string(),
        }),
    }
}

/// Converts a byte length to the `u32` of [`Request::len`], naming the field on overflow.
pub fn len32(bytes: u64, name: &str) -> Result<u32, FieldError> {
    u32::try_from(bytes).map_err(|_| FieldError::TooLong {
        name: name.to_string(),
        bytes,
    })
}

/// Splits a CSV line on `delim` (no quoting: block traces have none).
pub fn fields(line: &str, delim: char) -> impl Iterator<Item = &str> {
    line.split(delim)
}

/// Gives small stable ids to names in first-seen order (MSR host names, blkparse devices).
#[derive(Default)]
pub struct NameIds {
    names: Vec<String>,
}

impl NameIds {
    /// The id of `name`, allocating the next one on first sight.
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            return i as u32;
        }
        self.names.push(name.to_string());
        (self.names.len() - 1) as u32
    }
}
