//! The durable write log of a cache (optional, per cache): every write the cache applies is
//! appended to a local file and made durable (`fdatasync`) before the write is
//! acknowledged, so acknowledged write-back data survives a crash of the node even without
//! a FLUSH. **Without a log, dirty data that was not flushed lives in memory only** and a
//! crash (SIGKILL, power loss) loses it; a clean stop writes it back (or keeps it in a
//! recovery file, see [`crate::recovery`]).
//!
//! ## Files
//! A log is a series of *generations* `BASE.1`, `BASE.2`, ... next to each other (`BASE`
//! is the configured path). Appends go to the newest one. Each file starts with the magic
//! `LACHLOG1`, then records, all integers big-endian:
//!
//! ```text
//! u32 payload length | u32 CRC-32 of the payload | payload
//! payload: u8 kind (0 write, 1 trim) | u16 export name length | name | u64 offset
//!          | write: the data (the rest) | trim: u64 length
//! ```
//!
//! ## Group commit
//! [`WriteLog::append_write`] adds the record to a shared buffer and waits until a sync
//! covers it. Whoever finds no sync running writes the whole buffer (every writer's
//! records so far) and syncs once; the others wait for it and, if their record came too
//! late for that batch, one of them runs the next. So concurrent writers share each
//! `fdatasync` and throughput does not collapse to one sync per write. A failed write or
//! sync is sticky: every later append fails too (with the first error), so no write is
//! acknowledged after a hole in the log.
//!
//! ## Checkpoints
//! [`WriteLog::rotate`] starts a new generation and returns the older ones' number and
//! the exports they name; once the cache has written every dirty block back and those
//! exports' backends have flushed, [`WriteLog::retire`] deletes the older files (the
//! `CacheNode` does it: `CacheNode::checkpoint`). A record is appended only after its
//! write was applied to the cache, so everything in a retired file was in the cache (or on
//! the backend) before the rotation, and the write-back after it covers it.
//!
//! ## Replay
//! [`read_log`] loads one file. A record cut short at the end of the file, or the last
//! record with a bad checksum, is a torn tail (a crash during an append that was never
//! acknowledged): it is ignored and reported in [`LogFile::torn_tail`] for a warning. A
//! record with a bad checksum followed by more data, or a well-checksummed record that does
//! not parse, is corruption: an error naming the file and the byte offset. Concurrent
//! overlapping writes are logged in the order their appends ran; a client that issued
//! two overlapping writes at once (NBD leaves their order undefined) may find either
//! after a crash.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

const MAGIC: &[u8; 8] = b"LACHLOG1";
const KIND_WRITE: u8 = 0;
const KIND_TRIM: u8 = 1;
/// Largest payload accepted when reading (a longer length is a torn or corrupt header).
const MAX_PAYLOAD: usize = 1 << 30;

/// One logged operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogRecord {
    /// `data` written at `offset` of `export`.
    Write {
        /// The export's name.
        export: String,
        /// Byte offset.
        offset: u64,
        /// The bytes written.
        data: Vec<u8>,
    },
    /// `len` bytes at `offset` of `export` trimmed.
    Trim {
        /// The export's name.
        export: String,
        /// Byte offset.
        offset: u64,
        /// Bytes trimmed.
        len: u64,
    },
}

/// The records of one log file.
#[derive(Debug, Default)]
pub struct LogFile {
    /// The complete records, in order.
    pub records: Vec<LogRecord>,
    /// A torn last record that was ignored: where it starts and why.
    pub torn_tail: Option<String>,
}

fn encode(buf: &mut Vec<u8>, kind: u8, export: &str, offset: u64, body: &[u8]) -> io::Result<()> {
    let name = export.as_bytes();
    let name_len = u16::try_from(name.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "export name too long"))?;
    let payload_len = 1 + 2 + name.len() + 8 + body.len();
    let len = u32::try_from(payload_len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "record too large"))?;
    let start = buf.len();
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.push(kind);
    buf.extend_from_slice(&name_len.to_be_bytes());
    buf.extend_from_slice(name);
    buf.extend_from_slice(&offset.to_be_bytes());
    buf.extend_from_slice(body);
    let crc = crc32fast::hash(&buf[start + 8..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

fn decode(p: &[u8]) -> Option<LogRecord> {
    let kind = *p.first()?;
    let n = u16::from_be_bytes(p.get(1..3)?.try_into().ok()?) as usize;
    let export = std::str::from_utf8(p.get(3..3 + n)?).ok()?.to_string();
    let offset = u64::from_be_bytes(p.get(3 + n..11 + n)?.try_into().ok()?);
    let body = p.get(11 + n..)?;
    match kind {
        KIND_WRITE => Some(LogRecord::Write {
            export,
            offset,
            data: body.to_vec(),
        }),
        KIND_TRIM if body.len() == 8 => Some(LogRecord::Trim {
            export,
            offset,
            len: u64::from_be_bytes(body.try_into().ok()?),
        }),
        _ => None,
    }
}

/// Loads the records of one log file (see the module docs for torn tails and corruption).
pub fn read_log(path: &Path) -> io::Result<LogFile> {
    let buf = std::fs::read(path)?;
    let bad = |at: usize, what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: byte {at}: {what}", path.display()),
        )
    };
    let mut out = LogFile::default();
    if buf.len() < MAGIC.len() {
        // Created, then the crash came before the header was synced: nothing was logged.
        if MAGIC.starts_with(&buf) {
            if !buf.is_empty() {
                out.torn_tail = Some(format!("{}: byte 0: torn header", path.display()));
            }
            return Ok(out);
        }
        return Err(bad(0, "not a Lachesis write log (magic LACHLOG1)"));
    }
    if &buf[..8] != MAGIC {
        return Err(bad(0, "not a Lachesis write log (magic LACHLOG1)"));
    }
    let mut at = 8;
    while at < buf.len() {
        let torn = |why: &str| Some(format!("{}: byte {at}: {why}", path.display()));
        let Some(head) = buf.get(at..at + 8) else {
            out.torn_tail = torn("record header cut short");
            break;
        };
        let len = u32::from_be_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(head[4..].try_into().expect("4 bytes"));
        let end = at + 8 + len;
        if len > MAX_PAYLOAD || end > buf.len() {
            out.torn_tail = torn("record cut short");
            break;
        }
        let payload = &buf[at + 8..end];
        if crc32fast::hash(payload) != crc {
            if end == buf.len() {
                out.torn_tail = torn("last record's checksum does not match");
                break;
            }
            return Err(bad(
                at,
                &format!(
                    "corrupt record (checksum mismatch) with {} more byte(s) after it",
                    buf.len() - end
                ),
            ));
        }
        let rec = decode(payload).ok_or_else(|| bad(at, "record does not parse"))?;
        out.records.push(rec);
        at = end;
    }
    Ok(out)
}

/// The generations of the log at `base`, oldest first: `(generation, path)`.
pub fn generations(base: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let dir = match base.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(stem) = base.file_name().and_then(|n| n.to_str()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a file path", base.display()),
        ));
    };
    let prefix = format!("{stem}.");
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for e in entries {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(g) = name.strip_prefix(&prefix) {
            if let Ok(g) = g.parse::<u64>() {
                out.push((g, e.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

fn gen_path(base: &Path, gen: u64) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(format!(".{gen}"));
    PathBuf::from(s)
}

fn new_file(base: &Path, gen: u64) -> io::Result<(Arc<File>, PathBuf)> {
    let path = gen_path(base, gen);
    if let Some(d) = path.parent() {
        if !d.as_os_str().is_empty() {
            std::fs::create_dir_all(d)?;
        }
    }
    let mut f = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    f.write_all(MAGIC)?;
    f.sync_all()?;
    sync_dir(&path);
    Ok((Arc::new(f), path))
}

struct State {
    file: Arc<File>,
    path: PathBuf,
    gen: u64,
    /// Records not yet handed to a sync.
    buf: Vec<u8>,
    appended: u64,
    synced: u64,
    syncing: bool,
    failed: Option<String>,
    /// Bytes appended to the current generation.
    bytes: u64,
    /// Exports named by the current generation.
    exports: BTreeSet<String>,
    /// Older generations not retired yet, with the exports they name.
    older: Vec<(u64, PathBuf)>,
    older_exports: BTreeSet<String>,
}

/// A cache's durable write log (see the module docs).
pub struct WriteLog {
    base: PathBuf,
    st: Mutex<State>,
    synced: Condvar,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl WriteLog {
    /// Opens the log at `base`: a new generation after the existing ones, which stay (they
    /// are retired by the next checkpoint; replay them first, [`generations`] and
    /// [`read_log`]). `named` are the exports the existing ones name.
    pub fn create(base: &Path, named: &[String]) -> io::Result<WriteLog> {
        let existing = generations(base)?;
        let gen = existing.last().map_or(1, |(g, _)| g + 1);
        let (file, path) = new_file(base, gen)?;
        Ok(WriteLog {
            base: base.to_path_buf(),
            st: Mutex::new(State {
                file,
                path,
                gen,
                buf: Vec::new(),
                appended: 0,
                synced: 0,
                syncing: false,
                failed: None,
                bytes: 0,
                exports: BTreeSet::new(),
                older: existing,
                older_exports: named.iter().cloned().collect(),
            }),
            synced: Condvar::new(),
        })
    }

    /// The configured path (generations are `BASE.N`).
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Bytes appended since the last rotation, and whether older generations wait to be
    /// retired.
    pub fn pending(&self) -> (u64, bool) {
        let g = lock(&self.st);
        (g.bytes, !g.older.is_empty())
    }

    /// Appends a write of `data` at `offset` of `export`; returns once it is durable.
    pub fn append_write(&self, export: &str, offset: u64, data: &[u8]) -> io::Result<()> {
        self.append(KIND_WRITE, export, offset, data)
    }

    /// Appends a trim of `len` bytes at `offset` of `export`; returns once it is durable.
    pub fn append_trim(&self, export: &str, offset: u64, len: u64) -> io::Result<()> {
        self.append(KIND_TRIM, export, offset, &len.to_be_bytes())
    }

    fn append(&self, kind: u8, export: &str, offset: u64, body: &[u8]) -> io::Result<()> {
        let mut g = lock(&self.st);
        if let Some(e) = &g.failed {
            return Err(io::Error::other(e.clone()));
        }
        let before = g.buf.len();
        encode(&mut g.buf, kind, export, offset, body)?;
        g.bytes += (g.buf.len() - before) as u64;
        if !g.exports.contains(export) {
            g.exports.insert(export.to_string());
        }
        g.appended += 1;
        let mine = g.appended;
        loop {
            if g.synced >= mine {
                return Ok(());
            }
            if let Some(e) = &g.failed {
                return Err(io::Error::other(e.clone()));
            }
            if g.syncing {
                g = self.synced.wait(g).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            g.syncing = true;
            let batch = std::mem::take(&mut g.buf);
            let upto = g.appended;
            let file = g.file.clone();
            let path = g.path.clone();
            drop(g);
            let res = (&*file).write_all(&batch).and_then(|()| file.sync_data());
            g = lock(&self.st);
            g.syncing = false;
            match res {
                Ok(()) => g.synced = g.synced.max(upto),
                Err(e) => {
                    g.failed = Some(format!("write log {}: {e}", path.display()));
                }
            }
            if g.buf.capacity() == 0 {
                let mut batch = batch;
                batch.clear();
                g.buf = batch;
            }
            self.synced.notify_all();
        }
    }

    /// Starts a new generation; returns it. The records before it stay in the older
    /// files until [`WriteLog::retire`].
    pub fn rotate(&self) -> io::Result<u64> {
        let gen = lock(&self.st).gen + 1;
        let (file, path) = new_file(&self.base, gen)?;
        let mut g = lock(&self.st);
        let old = (g.gen, std::mem::replace(&mut g.path, path));
        g.older.push(old);
        g.file = file;
        g.gen = gen;
        g.bytes = 0;
        let names = std::mem::take(&mut g.exports);
        g.older_exports.extend(names);
        Ok(gen)
    }

    /// The exports named by the generations not retired yet but the current one (their
    /// backends must flush before those generations are retired); with `current`, those
    /// of the current generation too.
    pub fn exports(&self, current: bool) -> Vec<String> {
        let g = lock(&self.st);
        let mut all = g.older_exports.clone();
        if current {
            all.extend(g.exports.iter().cloned());
        }
        all.into_iter().collect()
    }

    /// The current generation.
    pub fn generation(&self) -> u64 {
        lock(&self.st).gen
    }

    /// Deletes the generations older than `gen` (their records are on the backends).
    pub fn retire(&self, gen: u64) -> io::Result<()> {
        let gone: Vec<PathBuf> = {
            let mut g = lock(&self.st);
            let (gone, keep): (Vec<_>, Vec<_>) = g.older.drain(..).partition(|(n, _)| *n < gen);
            g.older = keep;
            if g.older.is_empty() {
                g.older_exports.clear();
            }
            gone.into_iter().map(|(_, p)| p).collect()
        };
        for p in &gone {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", p.display()))),
            }
        }
        if let Some(p) = gone.first() {
            sync_dir(p);
        }
        Ok(())
    }

    /// Deletes every generation, the current one included (the cache is gone, or every
    /// record is on the backends and no write can come any more).
    pub fn remove_all(&self) -> io::Result<()> {
        let g = lock(&self.st);
        let mut paths: Vec<PathBuf> = g.older.iter().map(|(_, p)| p.clone()).collect();
        paths.push(g.path.clone());
        drop(g);
        for p in &paths {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", p.display()))),
            }
        }
        if let Some(p) = paths.first() {
            sync_dir(p);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(export: &str, offset: u64, data: &[u8]) -> LogRecord {
        LogRecord::Write {
            export: export.into(),
            offset,
            data: data.to_vec(),
        }
    }

    #[test]
    fn records_round_trip_across_generations_and_retire() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("c.log");
        let log = WriteLog::create(&base, &[]).unwrap();
        log.append_write("demo", 4096, &[7; 4096]).unwrap();
        log.append_trim("demo", 0, 8192).unwrap();
        let gen = log.rotate().unwrap();
        assert_eq!(gen, 2);
        log.append_write("ü", 1, b"abc").unwrap();
        let gens = generations(&base).unwrap();
        assert_eq!(gens.iter().map(|g| g.0).collect::<Vec<_>>(), [1, 2]);
        let first = read_log(&gens[0].1).unwrap();
        assert_eq!(
            first.records,
            [
                w("demo", 4096, &[7; 4096]),
                LogRecord::Trim {
                    export: "demo".into(),
                    offset: 0,
                    len: 8192
                }
            ]
        );
        assert!(first.torn_tail.is_none());
        assert_eq!(log.exports(false), ["demo"]);
        assert_eq!(log.exports(true), ["demo", "ü"]);
        log.retire(gen).unwrap();
        let gens = generations(&base).unwrap();
        assert_eq!(gens.len(), 1);
        assert_eq!(read_log(&gens[0].1).unwrap().records, [w("ü", 1, b"abc")]);
        // A new log after a restart keeps the old generation for replay.
        drop(log);
        let again = WriteLog::create(&base, &[]).unwrap();
        assert_eq!(generations(&base).unwrap().len(), 2);
        again.remove_all().unwrap();
        assert!(generations(&base).unwrap().is_empty());
    }

    #[test]
    fn torn_tail_is_ignored_and_corrupt_middle_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("t.log");
        let log = WriteLog::create(&base, &[]).unwrap();
        for i in 0..3u8 {
            log.append_write("e", u64::from(i) * 512, &[i; 512])
                .unwrap();
        }
        let path = generations(&base).unwrap()[0].1.clone();
        let full = std::fs::read(&path).unwrap();
        let rec = (full.len() - 8) / 3;
        assert_eq!(rec, 8 + 1 + 2 + 1 + 8 + 512);
        // Cut in the middle of the last record: two records and a warning.
        std::fs::write(&path, &full[..full.len() - 100]).unwrap();
        let f = read_log(&path).unwrap();
        assert_eq!(f.records.len(), 2);
        let t = f.torn_tail.unwrap();
        assert!(t.contains(&format!("byte {}", 8 + 2 * rec)), "{t}");
        // The last record's data damaged: ignored as torn.
        let mut bad = full.clone();
        let n = bad.len();
        bad[n - 1] ^= 0xff;
        std::fs::write(&path, &bad).unwrap();
        let f = read_log(&path).unwrap();
        assert_eq!(f.records.len(), 2);
        assert!(f.torn_tail.unwrap().contains("checksum"));
        // The middle record damaged: an error naming the file and the offset.
        let mut bad = full.clone();
        bad[8 + rec + 30] ^= 0xff;
        std::fs::write(&path, &bad).unwrap();
        let e = read_log(&path).unwrap_err().to_string();
        assert!(e.contains("t.log.1"), "{e}");
        assert!(
            e.contains(&format!("byte {}: corrupt record", 8 + rec)),
            "{e}"
        );
        std::fs::write(&path, b"garbage!!").unwrap();
        assert!(read_log(&path).unwrap_err().to_string().contains("magic"));
    }

    #[test]
    fn group_commit_serves_concurrent_writers() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("g.log");
        let log = Arc::new(WriteLog::create(&base, &[]).unwrap());
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for i in 0..50u64 {
                        log.append_write("e", (t * 50 + i) * 4096, &[t as u8; 4096])
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let path = generations(&base).unwrap()[0].1.clone();
        let f = read_log(&path).unwrap();
        assert_eq!(f.records.len(), 400);
        let mut offsets: Vec<u64> = f
            .records
            .iter()
            .map(|r| match r {
                LogRecord::Write { offset, .. } => *offset,
                LogRecord::Trim { .. } => unreachable!(),
            })
            .collect();
        offsets.sort_unstable();
        assert_eq!(offsets, (0..400).map(|i| i * 4096).collect::<Vec<_>>());
    }
}
