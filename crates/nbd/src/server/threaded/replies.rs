//! Replies: the combining writer every thread sends through, and the leader's batch of
//! replies answered at once.

use std::io::{self, IoSlice, Write};
use std::sync::Mutex;

use super::lock;
use super::socket::BlockingStream;
use crate::reply::{ReplyHeader, ReplyMode};
use crate::server::limits::Share;
use crate::wire::Errno;

/// The write side of a connection, shared by all its threads.
///
/// Replies are *combined*: a thread with a reply to send writes it straight from its own
/// buffers if nobody is writing; if another thread is, it appends its reply to the queue
/// and goes on, and the writing thread sends everything queued in one `write` before it
/// stops. Under load many replies share one system call and one wake-up of the client,
/// instead of one each; alone, a reply is written at once with no copy. Replies over
/// [`COMBINE_MAX`] are never queued (the copy would cost more than the call). A reply's
/// payload budget is released only once it is on the socket, so a client that stops
/// reading stops the connection (the queue is bounded by the budget).
pub(super) struct ReplyOut {
    pub(super) sock: Mutex<BlockingStream>,
    pub(super) queue: Mutex<ReplyQueue>,
}

/// Replies waiting for the writing thread.
#[derive(Default)]
pub(super) struct ReplyQueue {
    bytes: Vec<u8>,
    /// Budget of the queued replies, released once they are written.
    kib: u32,
    /// A thread is writing (and will send everything queued before it stops).
    writing: bool,
    /// An empty buffer kept for the next swap.
    spare: Vec<u8>,
}

impl ReplyOut {
    /// Send one reply made of `parts`, releasing `kib` of `budget` once it is written.
    /// Errors are the socket's, for the caller to log; a failed socket fails every later
    /// reply too.
    pub(super) fn send(
        &self,
        parts: &mut [IoSlice<'_>],
        kib: u32,
        budget: &Share,
    ) -> io::Result<()> {
        // A large reply gains nothing from sharing a system call and would cost a copy
        // into the queue (a 1 MiB read's data twice): it waits for the socket instead.
        // Replies may go out in any order, and each write holds the socket for whole
        // replies, so it can slip between the combining writer's writes.
        if parts.iter().map(|p| p.len()).sum::<usize>() > COMBINE_MAX {
            let result = write_all_vectored(&mut *lock(&self.sock), parts);
            budget.release(kib);
            return result;
        }
        {
            let mut q = lock(&self.queue);
            if q.writing {
                for p in parts.iter() {
                    q.bytes.extend_from_slice(p);
                }
                q.kib += kib;
                return Ok(());
            }
            q.writing = true;
        }
        // Nobody was writing, so nothing is queued: ours goes first, straight from the
        // caller's buffers.
        let mut result = write_all_vectored(&mut *lock(&self.sock), parts);
        budget.release(kib);
        loop {
            let (mut bytes, kib) = {
                let mut q = lock(&self.queue);
                if q.bytes.is_empty() {
                    q.writing = false;
                    return result;
                }
                let spare = std::mem::take(&mut q.spare);
                (
                    std::mem::replace(&mut q.bytes, spare),
                    std::mem::take(&mut q.kib),
                )
            };
            let written = lock(&self.sock).write_all(&bytes);
            budget.release(kib);
            result = result.and(written);
            bytes.clear();
            if bytes.capacity() <= BATCH_KEEP {
                lock(&self.queue).spare = bytes;
            }
        }
    }
}

/// Write all of `slices` with as few system calls as the socket allows.
fn write_all_vectored(w: &mut impl Write, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !slices.is_empty() {
        match w.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Replies answered by the connection thread itself, batched until it would block.
///
/// The buffer keeps its length between batches (`filled` marks the used part), so a
/// read's data is copied by the export straight into it without zeroing it first.
pub(super) struct ReplyBatch {
    pub(super) buf: Vec<u8>,
    pub(super) filled: usize,
    /// How the connection frames its replies.
    pub(super) mode: ReplyMode,
}

/// Replies larger than this are written by their own thread, never copied into the queue.
const COMBINE_MAX: usize = 64 << 10;
/// Batches larger than this are written at once rather than at the next blocking point.
pub(super) const BATCH_FLUSH: usize = 256 << 10;
/// A batch buffer that grew past this is shrunk back after it is written.
pub(super) const BATCH_KEEP: usize = 4 << 20;

impl ReplyBatch {
    /// Room for `len` bytes (a reply header and its data) at the end of the batch.
    pub(super) fn reserve(&mut self, len: usize) -> &mut [u8] {
        let need = self.filled + len;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        &mut self.buf[self.filled..need]
    }

    pub(super) fn push_error(&mut self, handle: u64, e: Errno) {
        let r = ReplyHeader::error(self.mode, handle, e);
        let n = r.bytes().len();
        let need = self.filled + n;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        self.buf[self.filled..need].copy_from_slice(r.bytes());
        self.filled = need;
    }

    /// Empty the batch after it was sent.
    pub(super) fn written(&mut self) {
        self.filled = 0;
        if self.buf.len() > BATCH_KEEP {
            self.buf.truncate(BATCH_KEEP);
            self.buf.shrink_to_fit();
        }
    }
}
