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

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The reserve's file in the data directory.
pub const RESERVE_FILE: &str = "recovery.reserve";

/// Bytes a recovery file needs for `cache_size` bytes of blocks of `block_size` bytes,
/// all dirty (each record's header with an export name of up to 64 bytes, the magic),
/// plus slack for the temporary file's metadata.
pub fn size_for(cache_size: u64, block_size: u64) -> u64 {
    let blocks = cache_size / block_size.max(1);
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

/// The reserve of one node.
#[derive(Clone, Debug)]
pub struct Reserve {
    path: PathBuf,
    size: u64,
}

impl Reserve {
    /// `size` bytes in [`RESERVE_FILE`] in `dir`.
    pub fn new(dir: &Path, size: u64) -> Self {
        Reserve {
            path: dir.join(RESERVE_FILE),
            size,
        }
    }

    /// The reserve's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes held.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Makes the file hold `size` allocated bytes (writing zeros past what it has); a
    /// size of 0 removes it.
    pub fn ensure(&self) -> Result<(), ReserveError> {
        let err = |source| ReserveError {
            path: self.path.clone(),
            size: self.size,
            source,
        };
        if self.size == 0 {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(err(e)),
                _ => Ok(()),
            };
        }
        let have = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if have == self.size {
            return Ok(());
        }
        let res = (|| {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(have > self.size)
                .open(&self.path)?;
            let start = if have > self.size { 0 } else { have };
            f.set_len(start)?;
            let mut left = self.size - start;
            let zeros = vec![0u8; 1 << 20];
            let mut f2 = std::io::BufWriter::new(&mut f);
            std::io::Seek::seek(&mut f2, io::SeekFrom::Start(start))?;
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                f2.write_all(&zeros[..n])?;
                left -= n as u64;
            }
            f2.flush()?;
            drop(f2);
            f.sync_all()
        })();
        if let Err(e) = res {
            // Do not leave a partial reserve eating the space others need.
            let _ = std::fs::remove_file(&self.path);
            return Err(err(e));
        }
        tracing::info!(path = %self.path.display(), bytes = self.size, "recovery space reserved");
        Ok(())
    }

    /// Gives the space back (what is left of it once a recovery file was written into
    /// it); whether there was any.
    pub fn release(&self) -> bool {
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
        assert_eq!(size_for(1 << 20, 4096), 256 * (4096 + 78) + 8 + (64 << 10));
    }
}
