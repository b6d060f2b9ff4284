//! [`FileSink`]: the output file of a trace writer, plain or zstd-compressed (a name
//! ending in `.zst`), buffered, with errors that name the file. Shared by the
//! oracleGeneral and lachesis CSV writers.

use crate::TraceError;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Whether `path` names a zstd-compressed file (by its extension; [`crate::open`] also
/// checks the magic number).
pub fn is_zstd(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

enum Sink {
    Plain(BufWriter<std::fs::File>),
    Zstd(BufWriter<zstd::Encoder<'static, std::fs::File>>),
}

/// A buffered output file, zstd-compressed if its name ends in `.zst`.
pub(crate) struct FileSink {
    sink: Sink,
    path: PathBuf,
}

impl FileSink {
    /// Creates (truncates) `path` with a buffer of `buffer` bytes.
    pub(crate) fn create(path: &Path, buffer: usize) -> Result<Self, TraceError> {
        let io = |source| TraceError::Io {
            file: path.to_path_buf(),
            error: source,
        };
        let file = std::fs::File::create(path).map_err(io)?;
        let sink = if is_zstd(path) {
            let enc = zstd::Encoder::new(file, 3).map_err(io)?;
            Sink::Zstd(BufWriter::with_capacity(buffer, enc))
        } else {
            Sink::Plain(BufWriter::with_capacity(buffer, file))
        };
        Ok(FileSink {
            sink,
            path: path.to_path_buf(),
        })
    }

    fn io(&self, source: std::io::Error) -> TraceError {
        TraceError::Io {
            file: self.path.clone(),
            error: source,
        }
    }

    /// Appends `bytes`.
    #[inline]
    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        let res = match &mut self.sink {
            Sink::Plain(w) => w.write_all(bytes),
            Sink::Zstd(w) => w.write_all(bytes),
        };
        res.map_err(|e| self.io(e))
    }

    /// Flushes everything, ending the zstd frame.
    pub(crate) fn finish(self) -> Result<(), TraceError> {
        let io = |source| TraceError::Io {
            file: self.path.clone(),
            error: source,
        };
        match self.sink {
            Sink::Plain(w) => {
                w.into_inner()
                    .map_err(|e| io(e.into_error()))?
                    .sync_data()
                    .ok();
            }
            Sink::Zstd(w) => {
                let enc = w.into_inner().map_err(|e| io(e.into_error()))?;
                enc.finish().map_err(io)?;
            }
        }
        Ok(())
    }
}
