//! libCacheSim's `oracleGeneral` binary format: little-endian records of 24 bytes,
//! `u32 time, u64 obj_id, u32 obj_size, i64 next_access_vtime` (`-1` when unknown), plain
//! or zstd-compressed (recognised by a `.zst` name or by the zstd magic number).
//!
//! Mapping to [`Request`]:
//! * `obj_id` is the starting sector (LBN) in block traces, so `offset = obj_id * 512` and
//!   [`Request::object_key`] gives back exactly `obj_id` (tenant 0, volume 0).
//! * Ids at or above 2^52 are what our own writer produces for requests of other volumes or
//!   tenants (the volume salt lives in the top 12 bits of a key). Such an id is split: its
//!   low 52 bits are the sector, and its top 12 bits select the volume whose salt they are,
//!   so `object_key()` still returns exactly `obj_id` and all requests of one original
//!   volume land in one volume again (block mode keeps working). The tenant is not
//!   recoverable; every record reads back as tenant 0.
//! * `len = obj_size`; every record is a read (the format has no op).
//! * `time` is in seconds in libCacheSim's traces (its vscsi reader divides the
//!   microsecond timestamps by 10^6 before conversion; the shared CloudPhysics sample spans
//!   7,200 units, two hours), so `time_us = time * 10^6`; the writer writes
//!   `time_us / 10^6`, saturating at `u32::MAX`.
//!
//! The reader decodes records straight out of a 256 KiB buffer (each field one
//! little-endian load): no per-record system call or allocation, since it feeds curve
//! builders and simulators running at tens to a hundred million requests a second. Two
//! ways out of it:
//! * `Iterator::next`, small and always inlined; its refill is a separate, never-inlined
//!   function that returns a two-word `Step`, not an item, so it costs nothing per record;
//! * [`OracleReader::next_batch`] ([`crate::RequestStream`]), which decodes every whole
//!   record of the buffer, up to the batch size, in one loop over fixed-size chunks. This
//!   is what `mrc` and `policy::sim` use: one by one, the large
//!   `Option<Result<Request, TraceError>>` item went through memory on every call.
//!
//! Why 256 KiB and not more: the kernel's copy into the buffer is a fifth of a SHARDS run;
//! a buffer that stays in the core's L2 cache lets decoding read what the copy just wrote
//! from cache. Measured (fixed-size SHARDS, 10 M records): 128–256 KiB ran ~5 % faster than
//! 1 MiB, 64 KiB no better. A record split between two reads stays in the buffer's tail
//! and is completed by the next refill.
//!
//! Why not a memory map: measured on the 2-core dev machine (10 M records, 240 MB, in the
//! page cache; best CPU time, user + system, of 15 interleaved runs of
//! `examples/read_speed`), reading costs 47–49 ms this way, 50–53 ms mapped with
//! `memmap2` and `MAP_POPULATE`, 55 ms mapped with faults on first touch: setting up the
//! page tables of a map costs what the copy costs. So the reader keeps its buffer and
//! needs no `unsafe` (a map's would be that of a file another process may truncate).
//!
//! The writer fills `next_access_vtime` with `-1` ([`write`], streaming) or, with
//! [`write_with_next_access`], with libCacheSim's value: the 1-based position of the next
//! request for the same `obj_id` (what `traceConv` computes). That needs the future, so it
//! holds the whole trace in memory (24 bytes a request plus a hash map of objects).

pub use super::sink::is_zstd;
use super::sink::FileSink;
use crate::{Op, Position, Request, TraceError, SECTOR};
use rustc_hash::FxHashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Bytes per record.
pub const RECORD: usize = 24;
/// Size of the read buffer (see the module doc for why not larger).
const CHUNK: usize = 1 << 18;
/// Ids below this are plain sector numbers of volume 0.
const LOW_BITS: u32 = 52;
const LOW_MASK: u64 = (1 << LOW_BITS) - 1;
/// Microseconds per `time` unit (a second).
const TIME_UNIT_US: u64 = 1_000_000;

/// Streaming reader of an oracleGeneral trace.
pub struct OracleReader {
    input: Box<dyn Read + Send>,
    path: PathBuf,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    consumed: u64,
    eof: bool,
    failed: bool,
}

impl OracleReader {
    /// Reads records from `input` (already decompressed), naming `path` in errors.
    pub fn new(input: Box<dyn Read + Send>, path: PathBuf) -> Self {
        OracleReader {
            input,
            path,
            buf: vec![0; CHUNK].into_boxed_slice(),
            pos: 0,
            end: 0,
            consumed: 0,
            eof: false,
            failed: false,
        }
    }

    /// Opens `path`, decompressing it when it is zstd.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        Ok(OracleReader::new(
            super::raw_input(path)?,
            path.to_path_buf(),
        ))
    }

    /// Moves the unread tail to the front and reads until a whole record is buffered or
    /// the input ends.
    #[cold]
    fn refill(&mut self) -> Result<(), TraceError> {
        let left = self.end - self.pos;
        self.buf.copy_within(self.pos..self.end, 0);
        self.consumed += self.pos as u64;
        self.pos = 0;
        self.end = left;
        // Fill at least half the buffer so refills stay rare.
        while self.end < CHUNK / 2 && !self.eof {
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(TraceError::Io {
                        file: self.path.clone(),
                        error: source,
                    })
                }
            }
        }
        Ok(())
    }

    /// The slow half of `next`: refills the buffer when fewer than [`RECORD`] bytes are
    /// left, and says whether a record is now buffered, the input ended, or an error (an
    /// I/O error or a truncated last record, naming the file and byte offset) ends it.
    #[cold]
    #[inline(never)]
    fn refill_step(&mut self) -> Step {
        if self.failed {
            return Step::End;
        }
        if let Err(e) = self.refill() {
            self.failed = true;
            self.end = self.pos;
            return Step::Fail(Box::new(e));
        }
        if self.end == 0 {
            return Step::End;
        }
        if self.end < RECORD {
            self.failed = true;
            return Step::Fail(Box::new(TraceError::parse(
                self.path.clone(),
                Position::Byte(self.consumed),
                format!(
                    "truncated record: {} of {RECORD} bytes at the end of the file",
                    self.end
                ),
            )));
        }
        Step::Ready
    }
}

impl OracleReader {
    /// Appends up to `max` requests to `out`, decoded straight out of the buffer in one
    /// tight loop per buffer (see [`crate::RequestStream`]). Nothing appended and `Ok`: the
    /// input has ended. An error comes after the requests before it.
    pub fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        let mut left = max;
        while left > 0 {
            let whole = (self.end - self.pos) / RECORD;
            if whole == 0 {
                match self.refill_step() {
                    Step::Ready => continue,
                    Step::End => break,
                    Step::Fail(e) => return Err(*e),
                }
            }
            let n = whole.min(left);
            let (records, _) = self.buf[self.pos..self.pos + n * RECORD].as_chunks::<RECORD>();
            out.extend(records.iter().map(decode));
            self.pos += n * RECORD;
            left -= n;
        }
        Ok(())
    }
}

/// What [`OracleReader::refill_step`] found. The error is boxed so the enum stays two
/// words: `next` returns it through registers, not memory.
enum Step {
    Ready,
    End,
    Fail(Box<TraceError>),
}

/// The volume whose salt is `top << 52` (see the module doc), found once by search.
#[cold]
fn volume_of_salt(top: u64) -> u32 {
    static TABLE: OnceLock<Vec<u32>> = OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = vec![0u32; 1 << (64 - LOW_BITS)];
        let mut missing = t.len() - 1;
        let mut v = 1u32;
        while missing > 0 && v < 1 << 24 {
            let salt = Request {
                volume: v,
                ..Request::read(0, 0)
            }
            .object_key()
                >> LOW_BITS;
            if salt != 0 && t[salt as usize] == 0 {
                t[salt as usize] = v;
                missing -= 1;
            }
            v += 1;
        }
        t
    });
    t[top as usize]
}

/// Decodes one record (exactly [`RECORD`] bytes).
#[inline(always)]
pub fn decode(r: &[u8; RECORD]) -> Request {
    // Fixed sub-slices of a fixed-size array: each field is one unaligned load, no
    // bounds check.
    let time = u32::from_le_bytes(*r[0..].first_chunk::<4>().expect("4 of 24 bytes"));
    let id = u64::from_le_bytes(*r[4..].first_chunk::<8>().expect("8 of 20 bytes"));
    let len = u32::from_le_bytes(*r[12..].first_chunk::<4>().expect("4 of 12 bytes"));
    let (volume, sector) = if id >> LOW_BITS == 0 {
        (0, id)
    } else {
        (volume_of_salt(id >> LOW_BITS), id & LOW_MASK)
    };
    Request {
        time_us: time as u64 * TIME_UNIT_US,
        tenant: 0,
        volume,
        op: Op::Read,
        offset: sector * SECTOR,
        len,
    }
}

impl Iterator for OracleReader {
    type Item = Result<Request, TraceError>;

    /// Small enough to inline into the consumer's loop: one length test, the decode, and
    /// a never-inlined refill every [`CHUNK`] bytes. The slow path hands back a small
    /// [`Step`] rather than an item, so the common path's `Some(Ok(request))` is built
    /// right here and the consumer's match on it folds away.
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.buf[self.pos..self.end].first_chunk::<RECORD>() {
                self.pos += RECORD;
                return Some(Ok(decode(r)));
            }
            match self.refill_step() {
                Step::Ready => {}
                Step::End => return None,
                Step::Fail(e) => return Some(Err(*e)),
            }
        }
    }
}

/// Streaming writer of an oracleGeneral file (zstd-compressed if the name ends in `.zst`).
/// Call [`OracleWriter::finish`] to flush; errors name the file.
pub struct OracleWriter {
    sink: FileSink,
    written: u64,
}

impl OracleWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> Result<Self, TraceError> {
        Ok(OracleWriter {
            sink: FileSink::create(path, CHUNK)?,
            written: 0,
        })
    }

    /// Appends `r` with the given `next_access_vtime` (`-1` when unknown).
    #[inline]
    pub fn push(&mut self, r: &Request, next_access_vtime: i64) -> Result<(), TraceError> {
        let mut rec = [0u8; RECORD];
        let time = u32::try_from(r.time_us / TIME_UNIT_US).unwrap_or(u32::MAX);
        rec[0..4].copy_from_slice(&time.to_le_bytes());
        rec[4..12].copy_from_slice(&r.object_key().to_le_bytes());
        rec[12..16].copy_from_slice(&r.len.to_le_bytes());
        rec[16..24].copy_from_slice(&next_access_vtime.to_le_bytes());
        self.sink.write_all(&rec)?;
        self.written += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flushes everything (ending the zstd frame) and returns the record count.
    pub fn finish(self) -> Result<u64, TraceError> {
        self.sink.finish()?;
        Ok(self.written)
    }
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
    let mut w = OracleWriter::create(path)?;
    for r in requests {
        w.push(&r?, -1)?;
    }
    w.finish()
}

/// Like [`write_results`], but fills `next_access_vtime` as libCacheSim's `traceConv`
/// does: the 1-based position of the next request with the same `obj_id`, `-1` if there
/// is none. Holds the whole trace in memory (two passes).
pub fn write_with_next_access<I>(path: &Path, requests: I) -> Result<u64, TraceError>
where
    I: IntoIterator<Item = Result<Request, TraceError>>,
{
    let all: Vec<Request> = requests.into_iter().collect::<Result<_, _>>()?;
    let next = next_access_vtimes(&all);
    let mut w = OracleWriter::create(path)?;
    for (r, n) in all.iter().zip(next) {
        w.push(r, n)?;
    }
    w.finish()
}

/// For each request, the 1-based position of the next request with the same object key,
/// or `-1`.
pub fn next_access_vtimes(requests: &[Request]) -> Vec<i64> {
    let mut next = vec![-1i64; requests.len()];
    let mut seen: FxHashMap<u64, i64> = FxHashMap::default();
    for (i, r) in requests.iter().enumerate().rev() {
        if let Some(n) = seen.insert(r.object_key(), i as i64 + 1) {
            next[i] = n;
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RequestStream, SkipBad};

    fn read_all(path: &Path) -> Vec<Result<Request, TraceError>> {
        crate::open(path, None).unwrap().collect()
    }

    #[test]
    fn round_trips_plain_and_zstd() {
        let dir = tempfile::tempdir().unwrap();
        let reqs: Vec<Request> = (0..100_000u64)
            .map(|i| Request {
                time_us: i / 1000 * 1_000_000,
                ..Request::read(i * 7 * 512, 4096)
            })
            .collect();
        for name in ["t.oracleGeneral.bin", "t.oracleGeneral.bin.zst"] {
            let p = dir.path().join(name);
            assert_eq!(write(&p, reqs.iter().copied()).unwrap(), 100_000);
            let back: Vec<Request> = read_all(&p).into_iter().map(Result::unwrap).collect();
            assert_eq!(back, reqs, "{name}");
        }
        // A compressed file under a plain name is recognised by its magic number.
        let z = dir.path().join("t.oracleGeneral.bin.zst");
        let hidden = dir.path().join("hidden.oracleGeneral.bin");
        std::fs::copy(&z, &hidden).unwrap();
        assert_eq!(read_all(&hidden).len(), 100_000);
        assert!(std::fs::metadata(&z).unwrap().len() < 100_000 * RECORD as u64 / 4);
    }

    #[test]
    fn time_is_seconds_and_sub_second_is_dropped_on_write() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        let r = Request {
            time_us: 7_999_999,
            ..Request::read(512, 512)
        };
        write(&p, [r]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[0..4], &7u32.to_le_bytes());
        assert_eq!(read_all(&p)[0].as_ref().unwrap().time_us, 7_000_000);
    }

    #[test]
    fn other_volumes_keep_their_keys() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v.bin");
        let reqs: Vec<Request> = (0..3000u32)
            .map(|i| Request {
                tenant: i % 3,
                volume: i % 5,
                ..Request::read(i as u64 * 4096, 4096)
            })
            .collect();
        write(&p, reqs.iter().copied()).unwrap();
        let back: Vec<Request> = read_all(&p).into_iter().map(Result::unwrap).collect();
        for (a, b) in reqs.iter().zip(&back) {
            assert_eq!(a.object_key(), b.object_key());
            assert_eq!(a.offset, b.offset);
            let (mut ka, mut kb) = (vec![], vec![]);
            let m = crate::KeyMode::Block { block_size: 4096 };
            a.for_each_key(m, |k| ka.push(k));
            b.for_each_key(m, |k| kb.push(k));
            assert_eq!(ka, kb);
        }
        // Every one of the 4095 non-zero salts has a volume.
        assert!((1..4096).all(|t| volume_of_salt(t) != 0));
    }

    #[test]
    fn next_access_is_libcachesim_vtime() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.bin");
        let ids = [5u64, 6, 5, 7, 6, 5];
        let reqs = ids.iter().map(|&i| Ok(Request::read(i * 512, 512)));
        assert_eq!(write_with_next_access(&p, reqs).unwrap(), 6);
        let bytes = std::fs::read(&p).unwrap();
        let next: Vec<i64> = bytes
            .chunks(RECORD)
            .map(|r| i64::from_le_bytes(r[16..24].try_into().unwrap()))
            .collect();
        assert_eq!(next, vec![3, 5, 6, -1, -1, -1]);
    }

    #[test]
    fn truncated_record_names_the_byte_offset_and_can_be_skipped() {
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
        let mut s = SkipBad::new(crate::open(&p, None).unwrap());
        assert_eq!(s.by_ref().filter(Result::is_ok).count(), 2);
        assert_eq!(s.skipped(), 1);
    }

    /// Hands out its bytes a few at a time, so records split across reads.
    struct Dribble(std::io::Cursor<Vec<u8>>, usize);

    impl Read for Dribble {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.1);
            self.0.read(&mut buf[..n])
        }
    }

    fn encoded(reqs: &[Request]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.bin");
        write(&p, reqs.iter().copied()).unwrap();
        std::fs::read(&p).unwrap()
    }

    #[test]
    fn records_split_across_reads_decode_one_by_one_and_in_batches() {
        let reqs: Vec<Request> = (0..5000u64)
            .map(|i| Request {
                time_us: i * 1_000_000,
                volume: (i % 3) as u32,
                ..Request::read(i * 7 * 512, 512 + i as u32)
            })
            .collect();
        let bytes = encoded(&reqs);
        // 7-byte reads: no record arrives whole; the buffer's tail carries the pieces.
        let reader = || {
            OracleReader::new(
                Box::new(Dribble(std::io::Cursor::new(bytes.clone()), 7)),
                "dribble.bin".into(),
            )
        };
        let keys = |v: &[Request]| v.iter().map(Request::object_key).collect::<Vec<_>>();
        let one: Vec<Request> = reader().map(Result::unwrap).collect();
        assert_eq!(keys(&one), keys(&reqs));
        assert_eq!(one[4999].len, 512 + 4999);
        assert_eq!(one[4999].time_us, 4999 * 1_000_000);
        let mut r = reader();
        let mut batched = Vec::new();
        // Odd batch sizes so batches end mid-buffer as well.
        loop {
            let before = batched.len();
            r.next_batch(&mut batched, 333).unwrap();
            if batched.len() == before {
                break;
            }
        }
        assert_eq!(batched, one);
    }

    #[test]
    fn batches_stop_at_a_truncated_record_naming_its_offset() {
        let reqs: Vec<Request> = (0..10u64).map(|i| Request::read(i * 512, 512)).collect();
        let mut bytes = encoded(&reqs);
        bytes.truncate(9 * RECORD + 5);
        let mut r = OracleReader::new(
            Box::new(Dribble(std::io::Cursor::new(bytes.clone()), 10)),
            "cut.bin".into(),
        );
        let mut out = Vec::new();
        let e = r.next_batch(&mut out, 100).unwrap_err().to_string();
        assert_eq!(out.len(), 9);
        assert!(e.contains("cut.bin") && e.contains("byte 216"), "{e}");
        // The reader stays ended after its error.
        r.next_batch(&mut out, 100).unwrap();
        assert_eq!(out.len(), 9);
        // Through `--skip-bad` and a limit, as the CLI reads.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cut.bin");
        std::fs::write(&p, &bytes).unwrap();
        let mut s = SkipBad::new(crate::open(&p, None).unwrap());
        let mut all = Vec::new();
        s.next_batch(&mut all, 100).unwrap();
        assert_eq!((all.len(), s.skipped()), (9, 1));
        let mut l = crate::open(&p, None).unwrap().limit(4);
        let mut four = Vec::new();
        l.next_batch(&mut four, 100).unwrap();
        l.next_batch(&mut four, 100).unwrap();
        assert_eq!(four, reqs[..4]);
    }

    #[test]
    fn records_straddling_chunks_decode() {
        // More than one buffer of records, so refills move partial records.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.bin");
        let n = 3 * CHUNK as u64 / RECORD as u64 + 7;
        write(&p, (0..n).map(|i| Request::read(i * 512, 512))).unwrap();
        let mut count = 0;
        for (i, r) in OracleReader::open(&p).unwrap().enumerate() {
            assert_eq!(r.unwrap().offset, i as u64 * 512);
            count += 1;
        }
        assert_eq!(count, n);
    }
}
