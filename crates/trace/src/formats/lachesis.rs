//! The `lachesis` trace format: CSV that keeps everything a [`Request`] holds, so a
//! conversion loses nothing (oracleGeneral drops the operation and the tenant).
//!
//! ```text
//! time_us,tenant,volume,op,offset,len
//! 0,0,0,read,4096,4096
//! 12,1,0,write,0,8192
//! ```
//!
//! One header line (exactly the one above; it is how the format is detected), then one
//! request per line: time in microseconds, tenant and volume numbers, the operation
//! (`read`, `write`, `trim`, `flush`), byte offset and length in bytes. Reading goes
//! through the generic CSV reader ([`super::csv`]) with the fixed mapping [`MAPPING`];
//! a name ending in `.zst` compresses.

use super::sink::FileSink;
use crate::{Request, TraceError};
use std::io::Write;
use std::path::Path;

/// The header line (without its newline).
pub const HEADER: &str = "time_us,tenant,volume,op,offset,len";

/// The generic CSV mapping that reads the format.
pub const MAPPING: &str = "time=0,tenant=1,volume=2,op=3,offset=4,len=5,time_unit=us,header=1";

/// Streaming writer of a lachesis CSV trace; call [`LachesisWriter::finish`] to flush.
pub struct LachesisWriter {
    sink: FileSink,
    line: Vec<u8>,
    written: u64,
}

impl LachesisWriter {
    /// Creates (truncates) `path` and writes the header.
    pub fn create(path: &Path) -> Result<Self, TraceError> {
        let mut sink = FileSink::create(path, 1 << 18)?;
        sink.write_all(HEADER.as_bytes())?;
        sink.write_all(b"\n")?;
        Ok(LachesisWriter {
            sink,
            line: Vec::with_capacity(64),
            written: 0,
        })
    }

    /// Appends `r`.
    pub fn push(&mut self, r: &Request) -> Result<(), TraceError> {
        self.line.clear();
        writeln!(
            self.line,
            "{},{},{},{},{},{}",
            r.time_us,
            r.tenant,
            r.volume,
            r.op.as_str(),
            r.offset,
            r.len
        )
        .expect("writing to a Vec");
        self.sink.write_all(&self.line)?;
        self.written += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flushes everything and returns the record count.
    pub fn finish(self) -> Result<u64, TraceError> {
        self.sink.finish()?;
        Ok(self.written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    #[test]
    fn round_trip_keeps_every_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let reqs = vec![
            Request {
                time_us: 7,
                tenant: 2,
                volume: 1,
                op: Op::Write,
                offset: 8192,
                len: 512,
            },
            Request {
                time_us: 9,
                tenant: 0,
                volume: 0,
                op: Op::Flush,
                offset: 0,
                len: 0,
            },
        ];
        let mut w = LachesisWriter::create(&path).unwrap();
        for r in &reqs {
            w.push(r).unwrap();
        }
        assert_eq!(w.finish().unwrap(), 2);
        assert_eq!(crate::detect(&path).unwrap(), crate::Format::Lachesis);
        let back: Vec<Request> = crate::open(&path, None)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back, reqs);
    }
}
