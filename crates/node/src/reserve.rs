//! The recovery reserve: disk space held in the data directory for the recovery file, so
//! that a disk filled by others (the data directory often shares the images' disk) cannot
//! take away the room a graceful stop needs to keep dirty blocks it cannot write back.
//!
//! At start, once the last recovery file has been replayed, the node makes sure
//! [`RESERVE_FILE`] holds `[node] recovery_reserve` bytes (by default [`size_for`] the
//! node's whole cache: dirty data of write-back caches is bounded by their capacities,
//! whose sum never exceeds `cache_size`). The file is written with zeros, not made
//! sparse, so its blocks are really allocated; a start that cannot reserve the space
//! fails, naming the file and the size. At a stop that must write a recovery file, the
//! reserve becomes it: renamed to the recovery file's temporary name and overwritten in
//! place (`cache::recovery::write_into`), so no other writer can take the space between
//! a release and the write; the next start takes the space again.
//!
//! While the node runs, the reserve may grow beyond `recovery_reserve` ([`Reserve::grow`])
//! when dirty blocks its backends refuse need more room than it holds (see
//! [`crate::risk`]); a growth the disk has no room for leaves the reserve as it was.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The reserve's file in the data directory.
pub const RESERVE_FILE: &str = "recovery.reserve";

/// Bytes a recovery file needs for `cache_size` bytes of blocks of `block_size` bytes,
/// all dirty (each record's header with an export name of up to 64 bytes, the magic),
/// plus slack for the temporary file's metadata.
pub fn size_for(cache_size: u64, block_size: u64) -> u64 {
    size_for_blocks(cache_size / block_size.max(1), block_size)
}

/// Bytes a recovery file needs for `blocks` dirty blocks of `block_size` bytes (see
/// [`size_for`]).
pub fn size_for_blocks(blocks: u64, block_size: u64) -> u64 {
    blocks * (block_size + 2 + 64 + 8 + 4) + 8 + (64 << 10)
}

/// Why the reserve could not be taken.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path}: cannot reserve {size} bytes for the recovery file (node.recovery_reserve): {source}; \
     free space in the data directory, or lower node.cache_size or node.recovery_reserve"
)]
pub struct ReserveError {
    /// The reserve file.
    pub path: PathBuf,
    /// The bytes asked for.
    pub size: u64,
    /// The file system's answer.
    pub source: io::Error,
}

/// The reserve of one node. Its size changes only under its lock, which also covers the
/// recovery file written into it ([`Reserve::use_for`]).
#[derive(Debug)]
pub struct Reserve {
    path: PathBuf,
    size: std::sync::Mutex<u64>,
}

impl Reserve {
    /// `size` bytes in [`RESERVE_FILE`] in `dir`.
    pub fn new(dir: &Path, size: u64) -> Self {
        Reserve {
            path: dir.join(RESERVE_FILE),
            size: std::sync::Mutex::new(size),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        self.size.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The reserve's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes held.
    pub fn size(&self) -> u64 {
        *self.lock()
    }

    /// Whether the reserve holds at least `bytes` (its file is there with that length).
    pub fn holds(&self, bytes: u64) -> bool {
        let size = self.lock();
        *size >= bytes && std::fs::metadata(&self.path).is_ok_and(|m| m.len() >= bytes)
    }

    /// Grows the reserve to `bytes` (nothing if it holds that much already), writing zeros
    /// past its end; when the disk has no room for them, it is left as it was and the
    /// file system's answer returned.
    pub fn grow(&self, bytes: u64) -> Result<(), ReserveError> {
        let mut size = self.lock();
        let existed = self.path.exists();
        let have = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if have >= bytes {
            *size = (*size).max(bytes);
            return Ok(());
        }
        let res = (|| {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(false)
                .open(&self.path)?;
            let grown = write_zeros(&mut f, have, bytes);
            if grown.is_err() {
                if existed {
                    let _ = f.set_len(have);
                    let _ = f.sync_all();
                } else {
                    let _ = std::fs::remove_file(&self.path);
                }
            }
            grown
        })();
        res.map_err(|source| ReserveError {
            path: self.path.clone(),
            size: bytes,
            source,
        })?;
        *size = bytes;
        tracing::info!(path = %self.path.display(), bytes, "recovery space grown");
        Ok(())
    }

    /// Runs `f` with the reserve's file (which `f` may turn into the recovery file), then
    /// gives back whatever is left of the reserve; its size cannot change meanwhile.
    pub fn use_for<R>(&self, f: impl FnOnce(&Path) -> R) -> R {
        let mut size = self.lock();
        let out = f(&self.path);
        self.release_locked();
        *size = 0;
        out
    }

    /// Makes the file hold `size` allocated bytes (writing zeros past what it has); a
    /// size of 0 removes it.
    pub fn ensure(&self) -> Result<(), ReserveError> {
        let size = *self.lock();
        let err = |source| ReserveError {
            path: self.path.clone(),
            size,
            source,
        };
        if size == 0 {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(err(e)),
                _ => Ok(()),
            };
        }
        let have = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if have == size {
            return Ok(());
        }
        let res = (|| {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(have > size)
                .open(&self.path)?;
            let start = if have > size { 0 } else { have };
            f.set_len(start)?;
            write_zeros(&mut f, start, size)
        })();
        if let Err(e) = res {
            // Do not leave a partial reserve eating the space others need.
            let _ = std::fs::remove_file(&self.path);
            return Err(err(e));
        }
        tracing::info!(path = %self.path.display(), bytes = size, "recovery space reserved");
        Ok(())
    }

    /// Gives the space back (what is left of it once a recovery file was written into
    /// it); whether there was any.
    pub fn release(&self) -> bool {
        let _size = self.lock();
        self.release_locked()
    }

    fn release_locked(&self) -> bool {
        match std::fs::remove_file(&self.path) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the recovery reserve");
                false
            }
        }
    }
}

/// Writes zeros into `f` from `start` up to `end` (allocated blocks, not a hole) and syncs.
fn write_zeros(f: &mut std::fs::File, start: u64, end: u64) -> io::Result<()> {
    let mut left = end.saturating_sub(start);
    let zeros = vec![0u8; 1 << 20];
    let mut w = std::io::BufWriter::new(&mut *f);
    std::io::Seek::seek(&mut w, io::SeekFrom::Start(start))?;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        w.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    w.flush()?;
    drop(w);
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_allocated_resized_and_released() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let r = Reserve::new(dir.path(), 3 << 20);
        r.ensure().unwrap();
        let m = std::fs::metadata(dir.path().join(RESERVE_FILE)).unwrap();
        assert_eq!(m.len(), 3 << 20);
        assert!(
            m.blocks() * 512 >= 3 << 20,
            "not allocated: {} blocks",
            m.blocks()
        );
        Reserve::new(dir.path(), 1 << 20).ensure().unwrap();
        assert_eq!(
            std::fs::metadata(dir.path().join(RESERVE_FILE))
                .unwrap()
                .len(),
            1 << 20
        );
        assert!(r.release());
        assert!(!r.release());
        // Grown while running (a full disk's refusal is in the node's hostile tests).
        let g = Reserve::new(dir.path(), 1 << 20);
        g.ensure().unwrap();
        assert!(g.holds(1 << 20) && !g.holds(2 << 20));
        g.grow(2 << 20).unwrap();
        assert!(g.holds(2 << 20));
        assert_eq!(g.size(), 2 << 20);
        g.grow(1 << 20).unwrap();
        assert_eq!(g.size(), 2 << 20, "a growth never shrinks it");
        let used = g.use_for(|p| std::fs::metadata(p).unwrap().len());
        assert_eq!(used, 2 << 20);
        assert!(!dir.path().join(RESERVE_FILE).exists() && g.size() == 0);
        assert_eq!(size_for(1 << 20, 4096), 256 * (4096 + 78) + 8 + (64 << 10));
    }
}
