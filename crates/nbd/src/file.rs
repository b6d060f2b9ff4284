//! [`FileExport`]: a regular file (or block device node) served as an export.
//!
//! Each request runs positional I/O (`FileExt::read_exact_at` / `write_all_at`) on
//! tokio's blocking thread pool, so many requests proceed in parallel without a shared
//! file cursor and without blocking the async workers. Flush is `sync_data`; a FUA write
//! is the write followed by `sync_data`. Write-zeroes writes zero blocks of up to 1 MiB
//! (portable, no `fallocate`). Trim is not advertised: without punching holes it would
//! save nothing, and NBD lets a server simply not offer it. Block status reports the
//! file's own holes ([`file_extents`]: `lseek` with `SEEK_DATA` / `SEEK_HOLE`).
//!
//! The export size is the file length when opened and does not change.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::reply::{Extent, MAX_EXTENTS};
use crate::server::{BoxFuture, Capabilities, Export};
use crate::wire::{STATE_HOLE, STATE_ZERO};

const ZERO_CHUNK: usize = 1 << 20;

/// The `base:allocation` status of `len` bytes of `file` at `offset`, from the file
/// system's own record of its holes (`lseek` with `SEEK_DATA` and `SEEK_HOLE`): holes
/// are `HOLE | ZERO`, the rest data (flags 0). A file system that cannot tell reports
/// everything as data, and so does this. At most [`MAX_EXTENTS`] extents, from `offset`.
pub fn file_extents(file: &File, offset: u64, len: u32) -> io::Result<Vec<Extent>> {
    use nix::errno::Errno;
    use nix::unistd::{lseek, Whence};
    let end = offset + len as u64;
    let all_data = || {
        vec![Extent {
            length: len,
            flags: 0,
        }]
    };
    let seek = |pos: u64, whence| match lseek(file, pos as i64, whence) {
        Ok(p) => Ok(Some(p as u64)),
        // Past the last data (SEEK_DATA) or at the end of the file.
        Err(Errno::ENXIO) => Ok(None),
        Err(e) => Err(e),
    };
    let mut out = Vec::new();
    let mut pos = offset;
    while pos < end && out.len() < MAX_EXTENTS {
        let data = match seek(pos, Whence::SeekData) {
            Ok(d) => d.unwrap_or(end).min(end),
            Err(Errno::EINVAL | Errno::EOPNOTSUPP) if out.is_empty() => return Ok(all_data()),
            Err(e) => return Err(e.into()),
        };
        if data > pos {
            out.push(Extent {
                length: (data - pos) as u32,
                flags: STATE_HOLE | STATE_ZERO,
            });
            pos = data;
            continue;
        }
        let hole = seek(pos, Whence::SeekHole)?.unwrap_or(end).min(end);
        if hole <= pos {
            // The file changed between the two calls; say data and move on.
            out.push(Extent {
                length: (end - pos) as u32,
                flags: 0,
            });
            break;
        }
        out.push(Extent {
            length: (hole - pos) as u32,
            flags: 0,
        });
        pos = hole;
    }
    Ok(out)
}

/// A file served as an export.
pub struct FileExport {
    file: Arc<File>,
    size: u64,
    caps: Capabilities,
}

impl FileExport {
    /// Open an existing file; `read_only` opens it without write access and advertises
    /// `NBD_FLAG_READ_ONLY`.
    pub fn open(path: impl AsRef<Path>, read_only: bool) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(!read_only).open(path)?;
        let size = file.metadata()?.len();
        Ok(FileExport {
            file: Arc::new(file),
            size,
            caps: Capabilities {
                read_only,
                flush: true,
                trim: false,
                write_zeroes: true,
                multi_conn: true,
            },
        })
    }

    /// Create (or truncate) a file of `size` bytes and open it read-write.
    pub fn create(path: impl AsRef<Path>, size: u64) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path.as_ref())?;
        file.set_len(size)?;
        drop(file);
        Self::open(path, false)
    }

    async fn blocking<T, F>(&self, f: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&File) -> io::Result<T> + Send + 'static,
    {
        let file = self.file.clone();
        tokio::task::spawn_blocking(move || f(&file))
            .await
            .map_err(io::Error::other)?
    }
}

impl Export for FileExport {
    fn size(&self) -> u64 {
        self.size
    }

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn read(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<Bytes>> {
        Box::pin(self.blocking(move |f| {
            let mut buf = BytesMut::zeroed(len as usize);
            f.read_exact_at(&mut buf, offset)?;
            Ok(buf.freeze())
        }))
    }

    fn write(&self, offset: u64, data: Bytes, fua: bool) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(self.blocking(move |f| {
            f.write_all_at(&data, offset)?;
            if fua {
                f.sync_data()?;
            }
            Ok(())
        }))
    }

    fn flush(&self) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(self.blocking(|f| f.sync_data()))
    }

    fn trim(&self, _offset: u64, _len: u32) -> BoxFuture<'_, io::Result<()>> {
        // Never called: trim is not advertised (the connection answers EINVAL first).
        Box::pin(async { Err(io::Error::from(io::ErrorKind::Unsupported)) })
    }

    fn block_status(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<Vec<Extent>>> {
        Box::pin(self.blocking(move |f| file_extents(f, offset, len)))
    }

    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(self.blocking(move |f| {
            let zeroes = vec![0u8; ZERO_CHUNK.min(len as usize)];
            let mut done = 0usize;
            while done < len as usize {
                let n = zeroes.len().min(len as usize - done);
                f.write_all_at(&zeroes[..n], offset + done as u64)?;
                done += n;
            }
            if fua {
                f.sync_data()?;
            }
            Ok(())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn positional_io_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        let e = FileExport::create(&path, 1 << 20).unwrap();
        assert_eq!(e.size(), 1 << 20);
        e.write(8192, Bytes::from_static(b"lachesis"), true)
            .await
            .unwrap();
        assert_eq!(&e.read(8190, 12).await.unwrap()[..], b"\0\0lachesis\0\0");
        e.write_zeroes(8192, 4, false).await.unwrap();
        e.flush().await.unwrap();
        assert_eq!(&e.read(8192, 8).await.unwrap()[..], b"\0\0\0\0esis");
        let ro = FileExport::open(&path, true).unwrap();
        assert!(ro.capabilities().read_only);
        assert_eq!(&ro.read(8196, 4).await.unwrap()[..], b"esis");
    }

    #[tokio::test]
    async fn block_status_finds_the_files_holes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse.img");
        let e = FileExport::create(&path, 4 << 20).unwrap();
        // One MiB of data at 1 MiB; the rest was never written.
        e.write(1 << 20, Bytes::from(vec![5u8; 1 << 20]), true)
            .await
            .unwrap();
        let ext = e.block_status(0, 4 << 20).await.unwrap();
        let total: u64 = ext.iter().map(|x| x.length as u64).sum();
        assert_eq!(total, 4 << 20);
        // Whatever the file system's granularity, the written MiB is data and the first
        // and last bytes of the file are holes that read as zeroes.
        let mut at = 0u64;
        for x in &ext {
            let range = at..at + x.length as u64;
            if range.start < 2 << 20 && range.end > 1 << 20 {
                assert_eq!(x.flags, 0, "data reported as a hole: {ext:?}");
            }
            at = range.end;
        }
        assert_eq!(ext[0].flags, STATE_HOLE | STATE_ZERO, "{ext:?}");
        assert_eq!(
            ext.last().unwrap().flags,
            STATE_HOLE | STATE_ZERO,
            "{ext:?}"
        );
        // A range inside the data is one data extent.
        let inner = e.block_status((1 << 20) + 4096, 8192).await.unwrap();
        assert_eq!(
            inner,
            vec![Extent {
                length: 8192,
                flags: 0
            }]
        );
    }
}
