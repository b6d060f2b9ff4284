//! libCacheSim's `oracleGeneral` binary format: little-endian records of 24 bytes,
//! `u32 time, u64 obj_id, u32 obj_size, i64 next_access_vtime` (`-1` when unknown), plain
//! or zstd-compressed (`.zst`).
//!
//! Mapping to [`Request`]: `obj_id` is the starting sector (LBN) in block traces, so
//! `offset = obj_id * 512` and [`Request::object_key`] gives back exactly `obj_id`;
//! `len = obj_size`; every record is a read (the format has no op). `time` carries no unit
//! in the format (libCacheSim's CDN traces use seconds, its block samples microseconds): it
//! is kept as is in `time_us`, and the writer writes `time_us` back (saturating at `u32`).
//! Ids at or above 2^55 cannot be scaled to a byte offset and are an error.
//!
//! The reader decodes records straight out of a 1 MiB buffer: no per-record system call or
//! allocation, since it feeds simulators running at tens of millions of requests a second.

use crate::{Op, Position, Request, TraceError, SECTOR};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Bytes per record.
pub const RECORD: usize = 24;
const CHUNK: usize = 1 << 20;

/// Streaming reader of an oracleGeneral trace.
pub struct OracleReader {
    input: Box<dyn Read + Send>,
    path: PathBuf,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    consumed: u64,
    eof: bool,
    failed: bool,
}

impl OracleReader {
    /// Reads records from `input`, naming `path` in errors.
    pub fn new(input: Box<dyn Read + Send>, path: PathBuf) -> Self {
        OracleReader {
            input,
            path,
            buf: vec![0; CHUNK],
            pos: 0,
            end: 0,
            consumed: 0,
            eof: false,
            failed: false,
        }
    }

    fn refill(&mut self) -> Result<(), TraceError> {
        let left = self.end - self.pos;
        self.buf.copy_within(self.pos..self.end, 0);
        self.consumed += self.pos as u64;
        self.pos = 0;
        self.end = left;
        while self.end < RECORD && !self.eof {
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(TraceError::Io {
                        file: self.path.clone(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }
}

impl Iterator for OracleReader {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.end - self.pos < RECORD {
            if let Err(e) = self.refill() {
                self.failed = true;
                return Some(Err(e));
            }
            if self.end == 0 {
                return None;
            }
            if self.end < RECORD {
                self.failed = true;
                return Some(Err(TraceError::parse(
                    self.path.clone(),
                    Position::Byte(self.consumed),
                    format!("truncated record: {} of {RECORD} bytes", self.end),
                )));
            }
        }
        let r = &self.buf[self.pos..self.pos + RECORD];
        let time = u32::from_le_bytes([r[0], r[1], r[2], r[3]]);
        let id = u64::from_le_bytes([r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11]]);
        let size = u32::from_le_bytes([r[12], r[13], r[14], r[15]]);
        let at = self.consumed + self.pos as u64;
        self.pos += RECORD;
        if id >= 1 << 55 {
            return Some(Err(TraceError::parse(
                self.path.clone(),
                Position::Byte(at),
                format!("field `obj_id`: {id} is too large to be a sector number"),
            )));
        }
        Some(Ok(Request {
            time_us: time as u64,
            tenant: 0,
            volume: 0,
            op: Op::Read,
            offset: id * SECTOR,
            len: size,
        }))
    }
}

/// Whether `path` names a zstd-compressed file.
pub fn is_zstd(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

/// Writes `requests` to `path` in oracleGeneral format (zstd-compressed if the name ends
/// in `.zst`), `next_access_vtime = -1`. Returns the number of records written.
pub fn write<I>(path: &Path, requests: I) -> Result<u64, TraceError>
where
    I: IntoIterator<Item = Request>,
{
    write_results(path, requests.into_iter().map(Ok))
}

/// Like [`write`] for a fallible stream (a reader); stops at the first error.
pub fn write_results<I>(path: &Path, requests: I) -> Result<u64, TraceError>
where
    I: IntoIterator<Item = Result<Request, TraceError>>,
{
    let io = |source| TraceError::Io {
        file: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out: Box<dyn Write> = if is_zstd(path) {
        Box::new(zstd::Encoder::new(file, 3).map_err(io)?.auto_finish())
    } else {
        Box::new(std::io::BufWriter::with_capacity(CHUNK, file))
    };
    let mut n = 0u64;
    let mut rec = [0u8; RECORD];
    for r in requests {
        let r = r?;
        let time = u32::try_from(r.time_us).unwrap_or(u32::MAX);
        rec[0..4].copy_from_slice(&time.to_le_bytes());
        rec[4..12].copy_from_slice(&r.object_key().to_le_bytes());
        rec[12..16].copy_from_slice(&r.len.to_le_bytes());
        rec[16..24].copy_from_slice(&(-1i64).to_le_bytes());
        out.write_all(&rec).map_err(io)?;
        n += 1;
    }
    out.flush().map_err(io)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(path: &Path) -> Vec<Result<Request, TraceError>> {
        crate::open(path, None).unwrap().collect()
    }

    #[test]
    fn round_trips_plain_and_zstd() {
        let dir = tempfile::tempdir().unwrap();
        let reqs: Vec<Request> = (0..100_000u64)
            .map(|i| Request {
                time_us: i * 1_000,
                ..Request::read(i * 7 * 512, 4096)
            })
            .collect();
        for name in ["t.oracleGeneral.bin", "t.oracleGeneral.bin.zst"] {
            let p = dir.path().join(name);
            assert_eq!(write(&p, reqs.iter().copied()).unwrap(), 100_000);
            let back: Vec<Request> = read_all(&p).into_iter().map(Result::unwrap).collect();
            assert_eq!(back, reqs, "{name}");
        }
    }

    #[test]
    fn truncated_record_names_the_byte_offset() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.oracleGeneral.bin");
        write(&p, (0..3).map(|i| Request::read(i * 512, 512))).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.truncate(2 * RECORD + 10);
        std::fs::write(&p, bytes).unwrap();
        let v = read_all(&p);
        assert_eq!(v.len(), 3);
        let msg = v[2].as_ref().unwrap_err().to_string();
        assert!(
            msg.contains("bad.oracleGeneral.bin")
                && msg.contains("byte 48")
                && msg.contains("truncated"),
            "{msg}"
        );
    }
}
