//! The leader: the thread that holds the read side. It frames and checks requests,
//! answers reads it can answer at once into its reply batch, and hands off the rest.

use std::io::{self, IoSlice};
use std::sync::Arc;

use bytes::BytesMut;

use super::follower::Job;
use super::replies::{ReplyBatch, BATCH_FLUSH};
use super::socket::{read_some, BlockingStream};
use super::Connection;
use crate::reply::ReplyHeader;
use crate::request::{parse_request, RequestHeader};
use crate::server::admission::{admit, payload_kib, read_now, Admission};
use crate::server::poll::BusyPoll;
use crate::wire::{Errno, Parse, ProtocolError, REQUEST_HEADER_LEN};

/// The read side, held by the leader.
pub(super) struct ReadSide {
    pub(super) stream: BlockingStream,
    pub(super) buf: BytesMut,
    pub(super) scratch: Vec<u8>,
    pub(super) poll: BusyPoll,
    pub(super) batch: ReplyBatch,
    /// No more requests will be read.
    pub(super) ended: bool,
    /// Reading stopped to move the connection to the async path (see `threaded`).
    pub(super) moving: bool,
    /// The first error that ended reading.
    pub(super) result: io::Result<()>,
    /// Budget (KiB) taken for the write whose payload is being read in (`payload_kib`).
    pub(super) reserved_kib: u32,
}

impl Connection {
    /// Send the leader's batch (no budget: its requests were never handed off).
    pub(super) fn send_batch(&self, batch: &mut ReplyBatch) -> io::Result<()> {
        if batch.filled == 0 {
            return Ok(());
        }
        let res = self.out.send(
            &mut [IoSlice::new(&batch.buf[..batch.filled])],
            0,
            &self.budget,
        );
        batch.written();
        res
    }

    /// Serve requests as the leader until one must be handed off (returned) or reading
    /// ends (`None`, with the batch written).
    pub(super) fn lead(self: &Arc<Self>, side: &mut ReadSide) -> Option<Job> {
        let size = self.export.size();
        let flags = self.export.capabilities().transmission_flags();
        loop {
            let parsed = match parse_request(&side.buf) {
                Ok(p) => p,
                Err(ProtocolError::OversizeWrite { handle, len }) => {
                    tracing::debug!(handle, len, "oversize write; closing after EINVAL");
                    side.batch.push_error(handle, Errno::Inval);
                    return self.stop_reading(side, Ok(()));
                }
                Err(e) => {
                    tracing::debug!(%e, "protocol error; closing");
                    return self.stop_reading(side, Ok(()));
                }
            };
            match parsed {
                Parse::Done(h, used) => {
                    self.activity.touch();
                    let frame = side.buf.split_to(used).freeze();
                    let reserved = std::mem::take(&mut side.reserved_kib);
                    let admission = admit(&h, size, flags, self.mode);
                    if !matches!(admission, Admission::Serve { kib, .. } if kib == reserved) {
                        self.budget.release(reserved);
                    }
                    let kib = match admission {
                        Admission::Disconnect => return self.stop_reading(side, Ok(())),
                        Admission::Refuse(e) => {
                            side.batch.push_error(h.handle, e);
                            continue;
                        }
                        Admission::Serve { now, kib } => {
                            if now && self.answer_now(&h, &mut side.batch) {
                                if side.batch.filled >= BATCH_FLUSH {
                                    if let Err(e) = self.send_batch(&mut side.batch) {
                                        return self.stop_reading(side, Err(e));
                                    }
                                }
                                continue;
                            }
                            kib
                        }
                    };
                    if kib == reserved && reserved > 0 {
                        // Taken before its payload was read in.
                    } else if !self.budget.try_acquire(kib) {
                        // About to wait for other requests' replies: send ours first.
                        if let Err(e) = self.send_batch(&mut side.batch) {
                            return self.stop_reading(side, Err(e));
                        }
                        self.budget.acquire(kib);
                    }
                    self.ensure_follower();
                    return Some(Job {
                        h,
                        payload: frame.slice(REQUEST_HEADER_LEN..),
                        kib,
                    });
                }
                Parse::Incomplete { needed } => {
                    if side.reserved_kib == 0 && self.crowded() {
                        side.moving = true;
                        return self.stop_reading(side, Ok(()));
                    }
                    if let Err(e) = self.send_batch(&mut side.batch) {
                        return self.stop_reading(side, Err(e));
                    }
                    if side.reserved_kib == 0 {
                        if let Some(kib) = payload_kib(needed) {
                            self.budget.acquire(kib);
                            side.reserved_kib = kib;
                            self.activity.payload_progress();
                        }
                    }
                    let ReadSide {
                        stream,
                        buf,
                        scratch,
                        poll,
                        ..
                    } = side;
                    match read_some(stream, buf, scratch, poll, needed) {
                        Ok(0) => return self.stop_reading(side, Ok(())),
                        Ok(_) => {
                            if side.reserved_kib > 0 {
                                self.activity.payload_progress();
                            }
                        }
                        Err(e) => return self.stop_reading(side, Err(e)),
                    }
                }
            }
        }
    }

    /// End reading: write the batch, keep the first error.
    pub(super) fn stop_reading(&self, side: &mut ReadSide, res: io::Result<()>) -> Option<Job> {
        self.budget.release(std::mem::take(&mut side.reserved_kib));
        let written = self.send_batch(&mut side.batch);
        side.ended = true;
        side.result = res.and(written);
        None
    }

    /// Answer a read from the export's memory into the batch, if it can be: the export
    /// copies the data straight into the batch (the one residency check of a small read;
    /// one it declines is handed off and read the ordinary way).
    pub(super) fn answer_now(&self, h: &RequestHeader, batch: &mut ReplyBatch) -> bool {
        let len = h.length as usize;
        let ok = ReplyHeader::success(self.mode, h, len);
        let hlen = ok.bytes().len();
        let out = batch.reserve(hlen + len);
        let (head, data) = out.split_at_mut(hlen);
        match read_now(self.export.as_ref(), h, data) {
            None => false,
            Some(Ok(())) => {
                head.copy_from_slice(ok.bytes());
                batch.filled += hlen + len;
                true
            }
            Some(Err(e)) => {
                batch.push_error(h.handle, e);
                true
            }
        }
    }
}
