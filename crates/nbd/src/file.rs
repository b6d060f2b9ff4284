//! [`FileExport`]: a regular file (or block device node) served as an export.
//!
//! Each request runs positional I/O (`FileExt::read_exact_at` / `write_all_at`) on
//! tokio's blocking thread pool, so many requests proceed in parallel without a shared
//! file cursor and without blocking the async workers. Flush is `sync_data`; a FUA write
//! is the write followed by `sync_data`. Write-zeroes writes zero blocks of up to 1 MiB
//! (portable, no `fallocate`). Trim is not advertised: without punching holes it would
//! save nothing, and NBD lets a server simply not offer it.
//!
//! The export size is the file length when opened and does not change.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::server::{BoxFuture, Capabilities, Export};

const ZERO_CHUNK: usize = 1 << 20;

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
}
