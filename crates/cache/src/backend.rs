//! Backends: the storage a cache sits in front of.
//!
//! The [`Backend`] trait is blocking and positional (`pread`/`pwrite` style), so it is
//! usable from any thread without an async runtime and needs no shared cursor. The cache's
//! whole data path is synchronous; the node calls it from `tokio::task::spawn_blocking` (or
//! its own worker threads) and an upstream-NBD backend in the node crate implements this
//! trait by blocking on its connection. Backends are shared as `Arc<dyn Backend>`.
//!
//! Contract: `read_at` fills the whole buffer or fails; `write_at` writes all bytes or
//! fails; after `flush` returns, every completed write is durable; after `trim(offset, len)`
//! returns the range reads back as zeros (a discard that is also a write of zeros, so the
//! cache's model of the data stays exact). Requests never reach past `size()` (the cache
//! checks).
//!
//! Implementations: [`FileBackend`] (a file or block device, positional I/O through
//! `std::os::unix::fs::FileExt`; trim writes zeros because punching holes needs `libc`)
//! and [`MemBackend`] (a byte vector for tests, which also counts the calls it gets).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// Blocking, positional storage behind a cache.
pub trait Backend: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes all of `data` at `offset`.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes every completed write durable.
    fn flush(&self) -> io::Result<()>;
    /// Discards `len` bytes at `offset`; they read back as zeros afterwards.
    fn trim(&self, offset: u64, len: u64) -> io::Result<()>;
}

fn check_range(offset: u64, len: usize, size: u64) -> io::Result<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("range {offset}+{len} beyond backend size {size}"),
        )),
    }
}

/// A file (or block device) used with positional I/O.
pub struct FileBackend {
    file: File,
    size: u64,
}

impl FileBackend {
    /// Opens `path` read-write; its current length is the size.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let file = File::options().read(true).write(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(FileBackend { file, size })
    }

    /// Creates (or truncates) `path` with `size` bytes of zeros.
    pub fn create(path: impl AsRef<Path>, size: u64) -> io::Result<Self> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        file.set_len(size)?;
        Ok(FileBackend { file, size })
    }
}

impl Backend for FileBackend {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(offset, buf.len(), self.size)?;
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(offset, data.len(), self.size)?;
        self.file.write_all_at(data, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        check_range(offset, len, self.size)?;
        const CHUNK: usize = 1 << 20;
        let zeros = vec![0u8; CHUNK.min(len)];
        let mut done = 0usize;
        while done < len {
            let n = CHUNK.min(len - done);
            self.file.write_all_at(&zeros[..n], offset + done as u64)?;
            done += n;
        }
        Ok(())
    }
}

/// An in-memory backend for tests; counts reads, writes and flushes.
#[derive(Default)]
pub struct MemBackend {
    data: RwLock<Vec<u8>>,
    reads: AtomicU64,
    writes: AtomicU64,
    flushes: AtomicU64,
}

impl MemBackend {
    /// `size` bytes of zeros.
    pub fn new(size: u64) -> Self {
        MemBackend {
            data: RwLock::new(vec![0; size as usize]),
            ..Default::default()
        }
    }

    /// A copy of the whole content.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `(read_at calls, write_at calls, flush calls)` so far.
    pub fn calls(&self) -> (u64, u64, u64) {
        (
            self.reads.load(Ordering::Relaxed),
            self.writes.load(Ordering::Relaxed),
            self.flushes.load(Ordering::Relaxed),
        )
    }
}

impl Backend for MemBackend {
    fn size(&self) -> u64 {
        self.data.read().unwrap_or_else(|e| e.into_inner()).len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let d = self.data.read().unwrap_or_else(|e| e.into_inner());
        check_range(offset, buf.len(), d.len() as u64)?;
        let o = offset as usize;
        buf.copy_from_slice(&d[o..o + buf.len()]);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let mut d = self.data.write().unwrap_or_else(|e| e.into_inner());
        check_range(offset, data.len(), d.len() as u64)?;
        let o = offset as usize;
        d[o..o + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut d = self.data.write().unwrap_or_else(|e| e.into_inner());
        check_range(offset, len as usize, d.len() as u64)?;
        let o = offset as usize;
        d[o..o + len as usize].fill(0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_backend_round_trip_and_trim() {
        let dir = tempfile::tempdir().unwrap();
        let b = FileBackend::create(dir.path().join("disk"), 10_000).unwrap();
        assert_eq!(b.size(), 10_000);
        b.write_at(4000, &[7u8; 300]).unwrap();
        let mut buf = [0u8; 302];
        b.read_at(3999, &mut buf).unwrap();
        assert_eq!(buf[0], 0);
        assert!(buf[1..301].iter().all(|&x| x == 7));
        assert_eq!(buf[301], 0);
        b.trim(4100, 50).unwrap();
        b.read_at(3999, &mut buf).unwrap();
        assert_eq!(buf[100..102], [7, 0]);
        assert_eq!(buf[150..152], [0, 7]);
        assert!(b.write_at(9_999, &[1, 2]).is_err());
        b.flush().unwrap();
        let reopened = FileBackend::open(dir.path().join("disk")).unwrap();
        assert_eq!(reopened.size(), 10_000);
    }

    #[test]
    fn mem_backend_counts_calls() {
        let b = MemBackend::new(100);
        b.write_at(10, &[1, 2, 3]).unwrap();
        let mut buf = [0u8; 4];
        b.read_at(9, &mut buf).unwrap();
        assert_eq!(buf, [0, 1, 2, 3]);
        b.flush().unwrap();
        assert_eq!(b.calls(), (1, 1, 1));
        assert!(b.read_at(98, &mut buf).is_err());
    }
}
