//! Reading whole protocol messages off an async stream with a pure parser.
//!
//! Owns the one loop both ends use during negotiation: try the parser on the buffered
//! bytes; on [`Parse::Incomplete`] read more (reserving what the parser said it needs);
//! on `Done` hand back the value and the number of bytes it used. The parsers never see a
//! socket, the socket never sees a parser's internals (mini-redis's `Connection::read_frame`
//! is the model). Protocol errors become `io::ErrorKind::InvalidData`.

use std::io;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::wire::{Parse, ProtocolError};

/// Read until `parse` completes. `Ok(None)` means the peer closed cleanly with no partial
/// message buffered; a close in the middle of a message is `UnexpectedEof`. The caller
/// removes the returned number of bytes from `buf`.
pub(crate) async fn read_parsed<R, T>(
    r: &mut R,
    buf: &mut BytesMut,
    parse: impl Fn(&[u8]) -> Result<Parse<T>, ProtocolError>,
) -> io::Result<Option<(T, usize)>>
where
    R: AsyncRead + Unpin,
{
    loop {
        match parse(buf).map_err(protocol_io)? {
            Parse::Done(v, used) => return Ok(Some((v, used))),
            Parse::Incomplete { needed } => {
                buf.reserve(needed.saturating_sub(buf.len()).max(4096));
                if r.read_buf(buf).await? == 0 {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "peer closed the connection in the middle of a message",
                    ));
                }
            }
        }
    }
}

/// Wrap a protocol error as an I/O error of kind `InvalidData`.
pub(crate) fn protocol_io(e: ProtocolError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}
