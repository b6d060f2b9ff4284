//! Command execution: one validated request against one export.
//!
//! Owns the mapping from a transmission-phase command to an [`Export`] call and from its
//! outcome to a reply: data for a successful read, the `base:allocation` payload for
//! block status ([`crate::reply::encode_block_status`]), nothing for the rest, an NBD
//! error value for failures; and ([`frame`]) the reply header that goes before it. Validation against the export's size and flags has already been
//! done by [`crate::request::RequestHeader::check`]; a zero-length request succeeds
//! without touching the export (the protocol leaves it unspecified, and a no-op is the
//! least surprising answer).

use bytes::Bytes;

use crate::reply::{encode_block_status, ReplyHeader, ReplyMode};
use crate::request::RequestHeader;
use crate::server::export::Export;
use crate::wire::{Command, Errno, BASE_ALLOCATION_ID, CMD_FLAG_REQ_ONE};

/// What executing a request gives: its reply's data (a read's bytes, a block status
/// payload), nothing, or an error value.
pub(crate) type Outcome = Result<Option<Bytes>, Errno>;

/// The reply header for `outcome` of request `h`, and the data that follows it.
pub(crate) fn frame(mode: ReplyMode, h: &RequestHeader, outcome: Outcome) -> (ReplyHeader, Bytes) {
    match outcome {
        Ok(data) => {
            let data = data.unwrap_or_default();
            (ReplyHeader::success(mode, h, data.len()), data)
        }
        Err(e) => (ReplyHeader::error(mode, h.handle, e), Bytes::new()),
    }
}

/// Execute a validated request; `Ok(Some(data))` only for reads.
pub(crate) async fn execute(export: &dyn Export, h: RequestHeader, payload: Bytes) -> Outcome {
    let io = |e: std::io::Error| {
        tracing::debug!(error = %e, handle = h.handle, "export failed");
        Errno::from_io(&e)
    };
    if h.length == 0 && h.command != Command::Flush {
        return Ok((h.command == Command::Read).then(Bytes::new));
    }
    match h.command {
        Command::Read => {
            let data = export.read(h.offset, h.length).await.map_err(io)?;
            if data.len() != h.length as usize {
                tracing::warn!(
                    got = data.len(),
                    want = h.length,
                    "export returned a short read"
                );
                return Err(Errno::Io);
            }
            Ok(Some(data))
        }
        Command::Write => {
            export.write(h.offset, payload, h.fua()).await.map_err(io)?;
            Ok(None)
        }
        Command::Flush => {
            export.flush().await.map_err(io)?;
            Ok(None)
        }
        Command::Trim => {
            export.trim(h.offset, h.length).await.map_err(io)?;
            if h.fua() {
                export.flush().await.map_err(io)?;
            }
            Ok(None)
        }
        Command::WriteZeroes => {
            export
                .write_zeroes(h.offset, h.length, h.fua())
                .await
                .map_err(io)?;
            Ok(None)
        }
        Command::BlockStatus => {
            let extents = export.block_status(h.offset, h.length).await.map_err(io)?;
            let req_one = h.flags & CMD_FLAG_REQ_ONE != 0;
            match encode_block_status(BASE_ALLOCATION_ID, &extents, h.length, req_one) {
                Some(payload) => Ok(Some(Bytes::from(payload))),
                None => {
                    tracing::warn!(
                        offset = h.offset,
                        len = h.length,
                        "export described no extent"
                    );
                    Err(Errno::Io)
                }
            }
        }
        Command::Disconnect | Command::Unknown(_) => Err(Errno::Inval),
    }
}
