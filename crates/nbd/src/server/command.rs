//! Command execution: one validated request against one export.
//!
//! Owns the mapping from a transmission-phase command to an [`Export`] call and from its
//! outcome to a reply: data for a successful read, nothing for the rest, an NBD error
//! value for failures. Validation against the export's size and flags has already been
//! done by [`crate::request::RequestHeader::check`]; a zero-length request succeeds
//! without touching the export (the protocol leaves it unspecified, and a no-op is the
//! least surprising answer).

use bytes::Bytes;

use crate::request::RequestHeader;
use crate::server::export::Export;
use crate::wire::{Command, Errno};

/// Execute a validated request; `Ok(Some(data))` only for reads.
pub(crate) async fn execute(
    export: &dyn Export,
    h: RequestHeader,
    payload: Bytes,
) -> Result<Option<Bytes>, Errno> {
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
        Command::Disconnect | Command::Unknown(_) => Err(Errno::Inval),
    }
}
