//! Recovery files: dirty blocks a node could not write back, kept on local disk so that
//! nothing acknowledged is dropped silently when it stops ([`CacheNode::dirty_data`]
//! collects them, [`write()`] saves them, [`read()`] loads them for the next start to replay
//! through the cache).
//!
//! Format (all integers big-endian): the magic `LACHREC1`, then one record per block: the
//! export name's length (u16) and bytes, the offset (u64), the data's length (u32) and
//! bytes. A file is written to a temporary name, synced and renamed, so a crash leaves
//! either the old file or the new one; [`remove()`] unlinks it and syncs the directory. A
//! file that does not parse is an error naming the file and the byte where it stopped
//! making sense.
//!
//! ## Consumed exactly once
//! A recovery file is a promise about the *past*: "these bytes are the newest the node
//! had". The moment a newer write to one of its blocks becomes durable, replaying the file
//! would revert it, so the file must be gone (or no longer hold that block) by then. The
//! rules, and why they hold at every crash point (SIGKILL at any instant):
//!
//! 1. **At start** (`node::replay_recovery`) the file's blocks are written through the
//!    caches before the NBD server or the API accepts anything, so nothing newer exists
//!    yet. Blocks that went to a cache with a durable write log are *folded* into the log
//!    (appended and synced before the write returned); the file is rewritten without them.
//!    The rest is handed to the cache node ([`CacheNode::adopt_recovery`]), which keeps the
//!    file's blocks pending, and every export the file names is flushed. A crash anywhere
//!    in here leaves the old file (or the rewritten one, after its rename), whose blocks
//!    are still the newest: replaying it again writes the same bytes.
//! 2. **While running**, the file is *settled per export*: a successful
//!    [`CacheNode::flush`] of an export (every dirty block of it written back, then the
//!    backend flushed) means each of the file's blocks of that export is durable on the
//!    backend, or was replaced by a newer write that is; the file is then rewritten
//!    without that export's blocks, or removed when none is left, **before the flush
//!    returns**. A FUA write to an export the file still names flushes the whole export
//!    the same way before it is acknowledged. If the rewrite fails, the flush fails. So a
//!    flush or FUA a client saw succeed is never older than the file: a crash after the
//!    acknowledgement finds a file without those blocks; a crash before it finds the old
//!    file, and the write it replays over was never acknowledged as durable (a write
//!    without FLUSH or FUA may be lost by a crash anyway, like a disk's volatile cache).
//! 3. **At a graceful stop** (`node::write_back_or_keep`) every export is flushed
//!    (settling the file as above). If nothing stays dirty and every export flushed, the
//!    file is removed. Otherwise the file is rewritten with the newest bytes of every
//!    block still at risk: the dirty blocks, and the old file's blocks of exports that
//!    did not flush, as the cache reads them now (so a newer write always wins). A stop
//!    that reaches its deadline (`[node] stop_timeout`) leaves its write-back running
//!    and writes the file from memory; [`CacheNode::keep_recovery`] writes it under the
//!    lock settling takes and forgets the adopted file, so a flush finishing later
//!    cannot rewrite it. Whatever such a late flush writes back is what the file holds.
//!
//! Writes acknowledged without FLUSH or FUA into a cache *without* a write log live in
//! memory only; a crash may lose them and bring back the file's older bytes, which is what
//! a crash does to any unflushed write.
//!
//! [`CacheNode::dirty_data`]: crate::CacheNode::dirty_data
//! [`CacheNode::adopt_recovery`]: crate::CacheNode::adopt_recovery
//! [`CacheNode::keep_recovery`]: crate::CacheNode::keep_recovery
//! [`CacheNode::flush`]: crate::CacheNode::flush

use std::io::{self, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"LACHREC1";

/// One dirty block: which export, where, and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirtyBlock {
    /// The export's name.
    pub export: String,
    /// Byte offset in the export.
    pub offset: u64,
    /// The block's bytes (shorter than a block only at the export's end).
    pub data: Vec<u8>,
}

/// Save `blocks` to `path` (atomically: temporary file, sync, rename).
pub fn write(path: &Path, blocks: &[DirtyBlock]) -> io::Result<()> {
    write_into(path, blocks, None)
}

/// [`write`], the temporary file being `space` if it exists: a file whose blocks are
/// allocated already (a reserve), renamed and overwritten in place, so that the recovery
/// file needs no free space up to `space`'s size, even on a disk that something else
/// fills meanwhile.
pub fn write_into(path: &Path, blocks: &[DirtyBlock], space: Option<&Path>) -> io::Result<()> {
    let mut buf = MAGIC.to_vec();
    for b in blocks {
        let name = b.export.as_bytes();
        let name_len = u16::try_from(name.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "export name too long"))?;
        let data_len = u32::try_from(b.data.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "block too large"))?;
        buf.extend_from_slice(&name_len.to_be_bytes());
        buf.extend_from_slice(name);
        buf.extend_from_slice(&b.offset.to_be_bytes());
        buf.extend_from_slice(&data_len.to_be_bytes());
        buf.extend_from_slice(&b.data);
    }
    let tmp = path.with_extension("tmp");
    let reused = match space {
        Some(s) => match std::fs::rename(s, &tmp) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(e),
        },
        None => false,
    };
    {
        let mut f = if reused {
            std::fs::OpenOptions::new().write(true).open(&tmp)?
        } else {
            std::fs::File::create(&tmp)?
        };
        f.write_all(&buf)?;
        if reused {
            f.set_len(buf.len() as u64)?;
        }
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    sync_dir(path);
    Ok(())
}

/// Removes the file at `path` (a missing one is fine) and syncs its directory, so the
/// removal is durable before this returns.
pub fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
    sync_dir(path);
    Ok(())
}

fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

/// A recovery file replayed at start whose blocks are not known to be durable yet: the
/// cache node settles it per export (see the module docs).
#[derive(Debug)]
pub struct Pending {
    path: PathBuf,
    blocks: Vec<DirtyBlock>,
}

impl Pending {
    /// The file at `path` holding `blocks`.
    pub fn new(path: PathBuf, blocks: Vec<DirtyBlock>) -> Self {
        Pending { path, blocks }
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The blocks not settled yet.
    pub fn blocks(&self) -> &[DirtyBlock] {
        &self.blocks
    }

    /// Whether a block of `export` is still pending.
    pub fn names(&self, export: &str) -> bool {
        self.blocks.iter().any(|b| b.export == export)
    }

    /// Drops `export`'s blocks: rewrites the file without them, or removes it when none
    /// is left. On error nothing changed (the old file and the blocks stay).
    pub fn settle(&mut self, export: &str) -> io::Result<()> {
        if !self.names(export) {
            return Ok(());
        }
        let rest: Vec<DirtyBlock> = self
            .blocks
            .iter()
            .filter(|b| b.export != export)
            .cloned()
            .collect();
        if rest.is_empty() {
            remove(&self.path)?;
        } else {
            write(&self.path, &rest)?;
        }
        self.blocks = rest;
        Ok(())
    }
}

/// Load the blocks saved in `path`.
pub fn read(path: &Path) -> io::Result<Vec<DirtyBlock>> {
    let buf = std::fs::read(path)?;
    let bad = |at: usize, what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: byte {at}: {what}", path.display()),
        )
    };
    if buf.get(..8) != Some(&MAGIC[..]) {
        return Err(bad(0, "not a Lachesis recovery file (magic LACHREC1)"));
    }
    let mut at = 8;
    let mut out = Vec::new();
    while at < buf.len() {
        let n = u16::from_be_bytes(take(&buf, &mut at, "name length", bad)?) as usize;
        let p = at;
        let name = take_n(&buf, &mut at, n, "export name", bad)?;
        let export = std::str::from_utf8(name)
            .map_err(|_| bad(p, "export name is not UTF-8"))?
            .to_string();
        let offset = u64::from_be_bytes(take(&buf, &mut at, "offset", bad)?);
        let len = u32::from_be_bytes(take(&buf, &mut at, "data length", bad)?) as usize;
        let data = take_n(&buf, &mut at, len, "data", bad)?.to_vec();
        out.push(DirtyBlock {
            export,
            offset,
            data,
        });
    }
    Ok(out)
}

fn take_n<'a>(
    buf: &'a [u8],
    at: &mut usize,
    n: usize,
    what: &str,
    bad: impl Fn(usize, &str) -> io::Error,
) -> io::Result<&'a [u8]> {
    let s = buf
        .get(*at..*at + n)
        .ok_or_else(|| bad(*at, &format!("truncated {what}")))?;
    *at += n;
    Ok(s)
}

fn take<const N: usize>(
    buf: &[u8],
    at: &mut usize,
    what: &str,
    bad: impl Fn(usize, &str) -> io::Error,
) -> io::Result<[u8; N]> {
    let s = take_n(buf, at, N, what, bad)?;
    Ok(s.try_into().expect("N bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("recovery.bin");
        let blocks = vec![
            DirtyBlock {
                export: "demo".into(),
                offset: 8192,
                data: vec![7; 4096],
            },
            DirtyBlock {
                export: "ü".into(),
                offset: 0,
                data: vec![1, 2, 3],
            },
        ];
        write(&p, &blocks).unwrap();
        assert_eq!(read(&p).unwrap(), blocks);
        write(&p, &[]).unwrap();
        assert!(read(&p).unwrap().is_empty());
        std::fs::write(&p, b"LACHREC1\x00\x04dem").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("byte 10: truncated export name"), "{e}");
        std::fs::write(&p, b"nonsense").unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("magic"));
    }

    #[test]
    fn pending_settles_per_export_and_removes_the_file_last() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("recovery.bin");
        let b = |export: &str, offset| DirtyBlock {
            export: export.into(),
            offset,
            data: vec![offset as u8; 16],
        };
        let blocks = vec![b("a", 0), b("b", 4096), b("a", 8192)];
        write(&p, &blocks).unwrap();
        let mut pending = Pending::new(p.clone(), blocks);
        assert!(pending.names("a") && !pending.names("c"));
        pending.settle("c").unwrap();
        assert_eq!(read(&p).unwrap().len(), 3);
        pending.settle("a").unwrap();
        assert_eq!(read(&p).unwrap(), [b("b", 4096)]);
        assert_eq!(pending.blocks(), [b("b", 4096)]);
        pending.settle("b").unwrap();
        assert!(!p.exists() && pending.blocks().is_empty());
        remove(&p).unwrap();
    }
}
