//! The connection's socket in blocking mode, and the leader's reads from it.

use std::io::{self, IoSlice, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Instant;

use bytes::BytesMut;

use crate::server::poll::BusyPoll;

/// A connected socket in blocking mode.
#[derive(Debug)]
pub(crate) enum BlockingStream {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl BlockingStream {
    pub(super) fn try_clone(&self) -> io::Result<Self> {
        Ok(match self {
            BlockingStream::Tcp(s) => BlockingStream::Tcp(s.try_clone()?),
            BlockingStream::Unix(s) => BlockingStream::Unix(s.try_clone()?),
        })
    }

    pub(super) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            BlockingStream::Tcp(s) => s.shutdown(how),
            BlockingStream::Unix(s) => s.shutdown(how),
        }
    }
}

impl AsFd for BlockingStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            BlockingStream::Tcp(s) => s.as_fd(),
            BlockingStream::Unix(s) => s.as_fd(),
        }
    }
}

impl AsRawFd for BlockingStream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            BlockingStream::Tcp(s) => s.as_raw_fd(),
            BlockingStream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Read for BlockingStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            BlockingStream::Tcp(s) => s.read(buf),
            BlockingStream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for BlockingStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            BlockingStream::Tcp(s) => s.write(buf),
            BlockingStream::Unix(s) => s.write(buf),
        }
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            BlockingStream::Tcp(s) => s.write_vectored(bufs),
            BlockingStream::Unix(s) => s.write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Bytes read per system call when no large payload is expected.
pub(super) const READ_CHUNK: usize = 64 << 10;

/// One blocking read appended to `buf`, at least enough for a frame of `needed` bytes in
/// total when that is large; returns the bytes read (0 at end of stream). A small read
/// busy-polls first (`poll`).
///
/// Safe Rust can only read into initialised memory. Small reads go through `scratch`
/// (initialised once) and are copied, which costs only the bytes that arrived; a large
/// write's payload is read in place into `buf` grown (and zeroed) by exactly what is
/// still missing, so it is neither copied nor zeroed twice.
pub(super) fn read_some(
    r: &mut (impl Read + AsRawFd),
    buf: &mut BytesMut,
    scratch: &mut [u8],
    poll: &mut BusyPoll,
    needed: usize,
) -> io::Result<usize> {
    let missing = needed.saturating_sub(buf.len());
    loop {
        let res = if missing > scratch.len() {
            let start = buf.len();
            buf.resize(start + missing, 0);
            let res = r.read(&mut buf[start..]);
            buf.truncate(start + *res.as_ref().unwrap_or(&0));
            res
        } else {
            let res = match poll.try_read(r.as_raw_fd(), scratch) {
                Some(res) => res,
                None => {
                    let start = Instant::now();
                    let res = r.read(scratch);
                    poll.blocked_for(start.elapsed());
                    res
                }
            };
            if let Ok(n) = res {
                buf.extend_from_slice(&scratch[..n]);
            }
            res
        };
        match res {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}
