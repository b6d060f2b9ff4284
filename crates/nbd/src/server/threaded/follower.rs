//! A follower at work: a request the leader handed off runs on this thread,
//! synchronously, and its reply goes out through the combining writer.

use std::io::IoSlice;

use bytes::Bytes;

use super::replies::BATCH_KEEP;
use super::Connection;
use crate::reply::ReplyHeader;
use crate::request::RequestHeader;
use crate::server::admission::INLINE_READ_MAX;
use crate::server::command::{execute, frame};
use crate::wire::{Command, Errno};

/// A request the leader hands off to run on its own thread.
pub(super) struct Job {
    pub(super) h: RequestHeader,
    pub(super) payload: Bytes,
    pub(super) kib: u32,
}

/// Alignment of a handed-off read's data in its thread's reply buffer.
const PAGE: usize = 4096;

impl Connection {
    /// Run a handed-off request on this thread and write its reply; a read the export can
    /// answer from memory is copied into `reply` and sent from there.
    pub(super) fn run_job(&self, job: Job, reply: &mut Vec<u8>) {
        let Job { h, payload, kib } = job;
        // Reads up to INLINE_READ_MAX were already offered to `read_now` by the leader.
        if h.command == Command::Read && h.length > INLINE_READ_MAX {
            if self.send_borrowed(&h, kib, reply) {
                return;
            }
            // The data goes to a page-aligned place in `reply` (as a plain server's read
            // buffer would be), the header beside it in a second slice of one `writev`.
            let len = h.length as usize;
            if reply.len() < len + PAGE {
                reply.resize(len + PAGE, 0);
            }
            let at = reply.as_ptr().align_offset(PAGE).min(PAGE);
            let data = &mut reply[at..at + len];
            if let Some(res) = self.export.read_now(h.offset, data) {
                let error = res.err().map(|e| {
                    tracing::debug!(error = %e, handle = h.handle, "export failed");
                    Errno::from_io(&e)
                });
                let header = match error {
                    Some(e) => ReplyHeader::error(self.mode, h.handle, e),
                    None => ReplyHeader::success(self.mode, &h, len),
                };
                let header = header.bytes();
                let data = if error.is_some() {
                    &[][..]
                } else {
                    &reply[at..at + len]
                };
                let sent = self.out.send(
                    &mut [IoSlice::new(header), IoSlice::new(data)],
                    kib,
                    &self.budget,
                );
                if let Err(e) = sent {
                    tracing::debug!(error = %e, "could not send a reply");
                }
                if reply.len() > BATCH_KEEP {
                    reply.truncate(BATCH_KEEP);
                    reply.shrink_to_fit();
                }
                return;
            }
        }
        let outcome = self
            .handle
            .block_on(execute(self.export.as_ref(), h, payload));
        let (header, data) = frame(self.mode, &h, outcome);
        let mut slices = [IoSlice::new(header.bytes()), IoSlice::new(&data)];
        if let Err(e) = self.out.send(&mut slices, kib, &self.budget) {
            tracing::debug!(error = %e, "could not send a reply");
        }
    }
}
