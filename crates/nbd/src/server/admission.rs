//! Request admission: what a connection does with a request it has framed, decided once
//! for both transmission paths (`connection`, async, and `threaded`, blocking).
//!
//! Every framed request goes through [`admit`]: `NBD_CMD_DISC` ends reading, an invalid
//! request is refused with its error value, and a valid one is served. A valid read of at
//! most [`INLINE_READ_MAX`] bytes is first offered to [`Export::read_now`] ([`read_now`]),
//! once, on the reading thread or task: if the export has the data in memory it is
//! answered there and then, with no hand-off and no budget. Anything else runs as a
//! request of its own, holding its payload's share ([`Admission::Serve::kib`]) of the
//! node-wide budget (`limits`; at most [`IN_FLIGHT_KIB`] per connection) until its reply
//! is written, so clients that never collect their replies cost bounded memory. A write
//! takes its share earlier, as soon as its header is framed and before its payload is read
//! in ([`payload_kib`]), so payloads on their way in count as well. An export's [`Export::read`] is
//! therefore never given a small read its `read_now` could have answered, and need not
//! look in memory again.

use crate::reply::{ReplyMode, MAX_EXTENTS};
use crate::request::RequestHeader;
use crate::server::export::Export;
use crate::wire::{Command, Errno, TransmissionFlags, REQUEST_HEADER_LEN};

/// Largest read offered to [`Export::read_now`] before it runs as a request of its own.
/// Larger reads are handed off (on the threaded path, several large reads of one
/// connection are then copied and sent on several cores at once) and may be lent
/// ([`Export::read_now_borrowed`]) instead.
pub const INLINE_READ_MAX: u32 = 128 << 10;

/// Most request and reply payload one connection's requests may hold, in KiB (64 MiB:
/// two maximum-size requests, or 16384 requests of 4 KiB), within the node-wide budget.
pub(crate) const IN_FLIGHT_KIB: u32 = 64 * 1024;

/// Largest block status reply payload: the context id and [`MAX_EXTENTS`] descriptors.
const BLOCK_STATUS_REPLY_MAX: usize = 4 + 8 * MAX_EXTENTS;

/// What to do with a framed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// `NBD_CMD_DISC`: stop reading (requests already read are still answered).
    Disconnect,
    /// Invalid for this export: reply with this error and read on.
    Refuse(Errno),
    /// Valid: serve it.
    Serve {
        /// A read small enough to be offered to [`Export::read_now`] first.
        now: bool,
        /// Its share of the payload budget, in KiB, taken if it runs as a request of its
        /// own (at most the whole budget).
        kib: u32,
    },
}

/// Decide what to do with request `h` on an export of `size` bytes with transmission
/// `flags`, on a connection whose replies are framed as `mode` says (block status is
/// refused with `EINVAL` unless the client selected `base:allocation` for this export).
pub(crate) fn admit(
    h: &RequestHeader,
    size: u64,
    flags: TransmissionFlags,
    mode: ReplyMode,
) -> Admission {
    if h.command == Command::Disconnect {
        return Admission::Disconnect;
    }
    if let Err(e) = h.check(size, flags) {
        return Admission::Refuse(e);
    }
    if h.command == Command::BlockStatus && !mode.block_status {
        return Admission::Refuse(Errno::Inval);
    }
    let reply = if h.command == Command::BlockStatus {
        BLOCK_STATUS_REPLY_MAX
    } else {
        h.read_len()
    };
    let kib = (h.payload_len().max(reply) as u32)
        .div_ceil(1024)
        .min(IN_FLIGHT_KIB);
    Admission::Serve {
        now: h.command == Command::Read && h.length <= INLINE_READ_MAX,
        kib,
    }
}

/// The budget, in KiB, a write whose frame needs `needed` bytes in all takes before its
/// payload is read in (`None`: the frame `needed` is no write still arriving). Both paths
/// take it when [`parse_request`](crate::request::parse_request) reports a write's
/// payload incomplete, so payload bytes sitting in a connection's buffer are counted in
/// the node-wide budget, not only those of requests already running; a reader with no
/// room stops reading until there is.
pub(crate) fn payload_kib(needed: usize) -> Option<u32> {
    let payload = needed.checked_sub(REQUEST_HEADER_LEN).filter(|&p| p > 0)?;
    Some(
        (payload.min(u32::MAX as usize) as u32)
            .div_ceil(1024)
            .min(IN_FLIGHT_KIB),
    )
}

/// Offer read `h` to [`Export::read_now`], filling `buf` (of the read's length): `None`
/// if the export cannot answer at once, else the outcome (a zero-length read succeeds
/// without asking the export).
pub(crate) fn read_now(
    export: &dyn Export,
    h: &RequestHeader,
    buf: &mut [u8],
) -> Option<Result<(), Errno>> {
    if buf.is_empty() {
        return Some(Ok(()));
    }
    let outcome = export.read_now(h.offset, buf)?;
    Some(outcome.map_err(|e| {
        tracing::debug!(error = %e, handle = h.handle, "export failed");
        Errno::from_io(&e)
    }))
}
