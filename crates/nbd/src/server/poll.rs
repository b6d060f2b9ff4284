//! [`BusyPoll`]: a short, adaptive busy-poll of the socket before the threaded path's
//! leader blocks in `read`.
//!
//! At queue depth 1 every request waits for the server thread to wake up. On an idle
//! virtual machine that wake-up is a halted vCPU being restarted by the host, tens of
//! microseconds, and it dominated the round trip (QD1 hits took 90–160 µs where the
//! same machine answers in 11–13 µs when it is busy). Polling the socket for a while
//! after the replies are out keeps the thread running, so the next request is read the
//! moment it lands, as the kernel's own `SO_BUSY_POLL` does for network devices.
//!
//! Polling costs CPU, so it adapts: it starts at the configured limit; each poll that
//! times out halves the next one, and after a few the connection blocks straight away.
//! A request that arrives soon after a blocking read began re-arms it (the client is in
//! a tight request–reply loop again). An idle connection thus burns at most about twice
//! the limit per idle spell, and one that streams requests rarely finds its socket empty.
//! Between polls the thread yields, so a client sharing its CPU is not starved.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{recv, MsgFlags};

/// Polls shorter than this are not worth a system call loop: polling stops.
const MIN_POLL: Duration = Duration::from_micros(4);

/// Busy-poll state of one connection's read side.
#[derive(Debug)]
pub(crate) struct BusyPoll {
    limit: Duration,
    next: Duration,
}

impl BusyPoll {
    /// Polls of at most `limit` (zero: never poll).
    pub(crate) fn new(limit: Duration) -> Self {
        BusyPoll { limit, next: limit }
    }

    /// Reads what is waiting on `fd` into `buf` without blocking, polling for up to the
    /// current poll time. `None`: nothing came in time (the caller blocks).
    pub(crate) fn try_read(&mut self, fd: RawFd, buf: &mut [u8]) -> Option<io::Result<usize>> {
        if self.next < MIN_POLL {
            return None;
        }
        let start = Instant::now();
        loop {
            match recv(fd, buf, MsgFlags::MSG_DONTWAIT) {
                Ok(n) => return Some(Ok(n)),
                Err(Errno::EAGAIN) | Err(Errno::EINTR) => {}
                Err(e) => return Some(Err(io::Error::from(e))),
            }
            if start.elapsed() >= self.next {
                self.next /= 2;
                return None;
            }
            std::thread::yield_now();
        }
    }

    /// A blocking read that waited `waited` has returned.
    pub(crate) fn blocked_for(&mut self, waited: Duration) {
        if waited <= self.limit * 2 {
            self.next = self.limit;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn polls_adapt_to_an_idle_and_a_busy_peer() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut p = BusyPoll::new(Duration::from_micros(200));
        let mut buf = [0u8; 16];
        // Idle peer: polls time out, halve, and stop.
        let mut polls = 0;
        while p.try_read(b.as_raw_fd(), &mut buf).is_none() && polls < 100 {
            polls += 1;
            if p.next < MIN_POLL {
                break;
            }
        }
        assert!((5..=7).contains(&polls), "{polls}");
        assert!(p.try_read(b.as_raw_fd(), &mut buf).is_none());
        // A short blocking wait re-arms it, and waiting bytes are read at once.
        p.blocked_for(Duration::from_micros(100));
        a.write_all(b"hello").unwrap();
        let n = p.try_read(b.as_raw_fd(), &mut buf).unwrap().unwrap();
        assert_eq!(&buf[..n], b"hello");
        // A long one does not.
        p.next = Duration::ZERO;
        p.blocked_for(Duration::from_millis(5));
        assert!(p.try_read(b.as_raw_fd(), &mut buf).is_none());
        // End of stream reads as 0 bytes.
        drop(a);
        p.blocked_for(Duration::ZERO);
        assert_eq!(p.try_read(b.as_raw_fd(), &mut buf).unwrap().unwrap(), 0);
    }
}
