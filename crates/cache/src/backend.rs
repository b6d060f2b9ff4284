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
//! `std::os::unix::fs::FileExt`; trim punches holes with `fallocate(PUNCH_HOLE |
//! KEEP_SIZE)`, so a sparse image stays sparse, falling back to writing zeros where the
//! file system cannot punch; [`Backend::allocation`] reports the file's holes with
//! `lseek(SEEK_DATA / SEEK_HOLE)`) and [`MemBackend`] (a byte vector for tests, which also
//! counts the calls it gets).
//!
//! **The image is the data.** A [`FileBackend`] remembers the device and inode of the
//! file it opened. If the path is deleted or replaced under a running node (another file
//! now has the name), every flush and every write (checked at most every
//! [`IDENTITY_CHECK`]) fails with an error naming the file, instead of writing into an
//! unlinked inode that nobody will ever read again. Besides, every write and trim asks
//! the open file (`fstat`) afterwards whether it still has a name: a write that landed in
//! a deleted (or replaced) image fails, so the cache keeps the block dirty and a stop
//! keeps it in the recovery file, even inside the [`IDENTITY_CHECK`] window. And every
//! write and trim asks the file's current length first: a request past the end of an
//! image that was shrunk under the node fails, naming the image and both sizes, instead
//! of growing the file back with zeros up to it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

/// Writes to a [`FileBackend`] check that its path still names the file it opened at most
/// this often (flushes always check).
pub const IDENTITY_CHECK: Duration = Duration::from_millis(100);

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

    /// Which parts of `len` bytes at `offset` are allocated: consecutive runs from
    /// `offset`, each `(length, hole)`, where a hole is unallocated and reads as zeros.
    /// The runs may stop short of `len` but cover at least one byte. The default calls
    /// the whole range allocated, which is always true.
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
        let _ = offset;
        Ok(vec![(len, false)])
    }
}

/// Most runs [`FileBackend::allocation`] reports per call.
const MAX_RUNS: usize = 8192;

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
    path: PathBuf,
    /// (device, inode) of the file opened.
    identity: (u64, u64),
    /// When the path was last found to name the file opened.
    checked: Mutex<Instant>,
}

impl FileBackend {
    /// Opens `path` read-write; its current length is the size.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let file = File::options().read(true).write(true).open(path.as_ref())?;
        Self::with_file(file, path.as_ref())
    }

    /// Creates (or truncates) `path` with `size` bytes of zeros.
    pub fn create(path: impl AsRef<Path>, size: u64) -> io::Result<Self> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path.as_ref())?;
        file.set_len(size)?;
        Self::with_file(file, path.as_ref())
    }

    fn with_file(file: File, path: &Path) -> io::Result<Self> {
        let m = file.metadata()?;
        Ok(FileBackend {
            size: m.len(),
            identity: (m.dev(), m.ino()),
            path: path.to_path_buf(),
            file,
            checked: Mutex::new(Instant::now()),
        })
    }

    /// Fails, naming the file, if its path no longer names the file opened (deleted, or
    /// replaced by another file).
    pub fn check_identity(&self) -> io::Result<()> {
        let gone = |what: &str| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "image {} was {what} while in use; refusing to write to a file nobody can read",
                    self.path.display()
                ),
            )
        };
        match std::fs::metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == self.identity => {
                *self.checked.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
                Ok(())
            }
            Ok(_) => Err(gone("replaced by another file")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(gone("deleted")),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("image {}: {e}", self.path.display()),
            )),
        }
    }

    /// Before a write or trim reaching `end`: fails if the file was shrunk below `end`
    /// (writing would grow it back with zeros) or has no name any more.
    fn check_before(&self, end: u64) -> io::Result<()> {
        let m = self.file.metadata()?;
        if m.nlink() == 0 {
            return Err(self.unlinked());
        }
        // (A block device's length is not its size; only files are checked.)
        if m.file_type().is_file() && m.len() < end {
            return Err(io::Error::other(format!(
                "image {} was shrunk to {} bytes while in use (it had {} bytes when opened); \
                 refusing to write at byte {} and grow it back with zeros",
                self.path.display(),
                m.len(),
                self.size,
                end
            )));
        }
        Ok(())
    }

    /// After a write or trim: fails if the file has no name any more (the bytes went to a
    /// file nobody can read).
    fn check_after(&self) -> io::Result<()> {
        if self.file.metadata()?.nlink() == 0 {
            return Err(self.unlinked());
        }
        Ok(())
    }

    fn unlinked(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "image {} was deleted (or replaced) while in use; refusing to write to a file nobody can read",
                self.path.display()
            ),
        )
    }

    /// [`FileBackend::check_identity`] unless it passed within [`IDENTITY_CHECK`].
    fn check_identity_lazily(&self) -> io::Result<()> {
        let last = *self.checked.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() < IDENTITY_CHECK {
            return Ok(());
        }
        self.check_identity()
    }

    fn write_zeros(&self, offset: u64, len: usize) -> io::Result<()> {
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

impl FileBackend {
    /// The file's holes and data in `[offset, offset + len)`, from `lseek(SEEK_DATA)` and
    /// `lseek(SEEK_HOLE)`; a file system that cannot tell gets "all allocated".
    fn seek_runs(&self, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
        use nix::errno::Errno;
        use nix::unistd::{lseek, Whence};
        let end = offset + len;
        let seek = |pos: u64, whence| match lseek(&self.file, pos as i64, whence) {
            Ok(p) => Ok(Some(p as u64)),
            // No data past `pos` (SEEK_DATA), or `pos` at the end of the file.
            Err(Errno::ENXIO) => Ok(None),
            Err(e) => Err(e),
        };
        let mut out = Vec::new();
        let mut pos = offset;
        while pos < end && out.len() < MAX_RUNS {
            let data = match seek(pos, Whence::SeekData) {
                Ok(d) => d.unwrap_or(end).min(end),
                Err(Errno::EINVAL | Errno::EOPNOTSUPP) if out.is_empty() => {
                    return Ok(vec![(len, false)])
                }
                Err(e) => return Err(e.into()),
            };
            if data > pos {
                out.push((data - pos, true));
                pos = data;
                continue;
            }
            let hole = seek(pos, Whence::SeekHole)?.unwrap_or(end).min(end);
            if hole <= pos {
                // The file changed between the two calls: call the rest allocated.
                out.push((end - pos, false));
                break;
            }
            out.push((hole - pos, false));
            pos = hole;
        }
        Ok(out)
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
        self.check_identity_lazily()?;
        self.check_before(offset + data.len() as u64)?;
        self.file.write_all_at(data, offset)?;
        self.check_after()
    }
    fn flush(&self) -> io::Result<()> {
        self.check_identity()?;
        self.file.sync_data()
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        let n = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        check_range(offset, n, self.size)?;
        self.check_identity_lazily()?;
        if len == 0 {
            return Ok(());
        }
        self.check_before(offset + len)?;
        self.trim_unchecked(offset, len, n)?;
        self.check_after()
    }
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
        check_range(
            offset,
            usize::try_from(len).unwrap_or(usize::MAX),
            self.size,
        )?;
        if len == 0 {
            return Ok(Vec::new());
        }
        self.seek_runs(offset, len)
    }
}

impl FileBackend {
    /// Punches `[offset, offset + len)` (`n` = `len`), or writes zeros where the file
    /// system cannot punch.
    fn trim_unchecked(&self, offset: u64, len: u64, n: usize) -> io::Result<()> {
        use nix::fcntl::{fallocate, FallocateFlags};
        let (Ok(o), Ok(l)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Err(io::ErrorKind::InvalidInput.into());
        };
        let punch = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
        match fallocate(&self.file, punch, o, l) {
            Ok(()) => Ok(()),
            // A file system (or block device) that cannot punch holes: zeros instead.
            Err(nix::errno::Errno::EOPNOTSUPP) | Err(nix::errno::Errno::ENODEV) => {
                self.write_zeros(offset, n)
            }
            Err(e) => Err(e.into()),
        }
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

    fn allocated(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    #[test]
    fn trim_punches_holes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sparse");
        let b = FileBackend::create(&p, 64 << 20).unwrap();
        assert!(allocated(&p) < 1 << 20, "created sparse");
        for i in 0..16u64 {
            b.write_at(i << 20, &[9u8; 1 << 20]).unwrap();
        }
        b.flush().unwrap();
        let full = allocated(&p);
        assert!(full >= 16 << 20, "{full} bytes allocated");
        b.trim(0, 64 << 20).unwrap();
        b.flush().unwrap();
        let after = allocated(&p);
        println!("16 MiB written: {full} bytes allocated; after trimming all: {after}");
        assert!(
            after < 1 << 20,
            "{after} bytes still allocated after the trim"
        );
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 64 << 20, "size kept");
        let mut buf = vec![1u8; 4096];
        b.read_at(5 << 20, &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 0));
    }

    #[test]
    fn allocation_reports_holes_and_data() {
        let dir = tempfile::tempdir().unwrap();
        let b = FileBackend::create(dir.path().join("sparse"), 16 << 20).unwrap();
        b.write_at(4 << 20, &[3u8; 1 << 20]).unwrap();
        let runs = b.allocation(0, 16 << 20).unwrap();
        assert_eq!(runs.iter().map(|r| r.0).sum::<u64>(), 16 << 20, "{runs:?}");
        assert_eq!(runs[0], (4 << 20, true), "{runs:?}");
        assert_eq!(runs[1], (1 << 20, false), "{runs:?}");
        assert_eq!(runs[2], (11 << 20, true), "{runs:?}");
        // After a trim the data is a hole again.
        b.trim(4 << 20, 1 << 20).unwrap();
        assert_eq!(b.allocation(0, 16 << 20).unwrap(), vec![(16 << 20, true)]);
        assert!(b.allocation(16 << 20, 1).is_err(), "past the end");
        // Other backends call everything allocated.
        let m = MemBackend::new(4096);
        assert_eq!(m.allocation(0, 4096).unwrap(), vec![(4096, false)]);
    }

    #[test]
    fn a_deleted_or_replaced_image_fails_loudly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        let b = FileBackend::create(&p, 1 << 20).unwrap();
        b.write_at(0, b"data").unwrap();
        b.flush().unwrap();
        std::fs::remove_file(&p).unwrap();
        let e = b.flush().unwrap_err().to_string();
        assert!(e.contains("img was deleted"), "{e}");
        std::thread::sleep(IDENTITY_CHECK);
        let e = b.write_at(0, b"more").unwrap_err().to_string();
        assert!(e.contains("was deleted"), "{e}");
        // Another file under the same name is not the image either.
        std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
        let e = b.flush().unwrap_err().to_string();
        assert!(e.contains("replaced by another file"), "{e}");
    }

    /// Issue 35: a write right after the deletion (inside the identity-check window)
    /// fails too, and a write past the end of a shrunk image does not grow it back.
    #[test]
    fn writes_to_a_deleted_or_shrunk_image_fail_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        let b = FileBackend::create(&p, 1 << 20).unwrap();
        b.write_at(0, b"data").unwrap();
        std::fs::remove_file(&p).unwrap();
        let e = b.write_at(4096, b"more").unwrap_err().to_string();
        assert!(e.contains("img was deleted"), "{e}");
        assert!(b.trim(0, 4096).is_err());

        let p = dir.path().join("shrunk");
        let b = FileBackend::create(&p, 1 << 20).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(64 << 10)
            .unwrap();
        b.write_at(0, b"inside").unwrap();
        let e = b.write_at(512 << 10, b"past").unwrap_err().to_string();
        assert!(
            e.contains("shrunk to 65536 bytes") && e.contains("1048576 bytes when opened"),
            "{e}"
        );
        assert!(b.trim(512 << 10, 4096).is_err());
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            64 << 10,
            "not regrown"
        );
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
