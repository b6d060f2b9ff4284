//! The client's two tasks: the writer, which owns the socket's write half and batches
//! queued requests into one flush, and the reader, which frames replies and hands each to
//! the request its handle names. See the [`super`] module doc.

use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

use super::{ClientError, Outgoing, Shared};
use crate::reply::parse_simple_reply;
use crate::request::encode_request;
use crate::wire::{Command, Parse, ProtocolError, SIMPLE_REPLY_HEADER_LEN};

pub(super) async fn write_requests<W: AsyncWrite + Unpin>(w: W, mut rx: mpsc::Receiver<Outgoing>) {
    let mut w = BufWriter::with_capacity(64 * 1024, w);
    let mut header = Vec::with_capacity(32);
    'outer: while let Some(mut msg) = rx.recv().await {
        loop {
            header.clear();
            encode_request(&mut header, &msg.header);
            if w.write_all(&header).await.is_err() {
                break 'outer;
            }
            if let Some(p) = msg.payload.take() {
                if w.write_all(&p).await.is_err() {
                    break 'outer;
                }
            }
            if msg.header.command == Command::Disconnect {
                let _ = w.flush().await;
                break 'outer;
            }
            match rx.try_recv() {
                Ok(next) => msg = next,
                Err(_) => break,
            }
        }
        if w.flush().await.is_err() {
            break;
        }
    }
    let _ = w.shutdown().await;
}

pub(super) async fn read_replies<R: AsyncRead + Unpin>(
    mut r: R,
    mut buf: BytesMut,
    shared: Arc<Shared>,
) {
    if let Err(e) = read_loop(&mut r, &mut buf, &shared).await {
        tracing::debug!(error = %e, "NBD client connection ended");
    }
    shared.close();
}

async fn read_loop<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut BytesMut,
    shared: &Shared,
) -> Result<(), ClientError> {
    loop {
        let reply = match parse_simple_reply(buf)? {
            Parse::Done(reply, _) => reply,
            Parse::Incomplete { needed } => {
                fill(r, buf, needed).await?;
                continue;
            }
        };
        let pending =
            shared
                .take(reply.handle)
                .ok_or(ClientError::Protocol(ProtocolError::Malformed(
                    "reply to a handle that is not in flight",
                )))?;
        let data_len = match reply.error {
            None => pending.read_len as usize,
            Some(_) => 0,
        };
        let total = SIMPLE_REPLY_HEADER_LEN + data_len;
        if buf.len() < total {
            if let Err(e) = fill(r, buf, total).await {
                let _ = pending.done.send(Err(ClientError::Disconnected));
                return Err(e);
            }
        }
        buf.advance(SIMPLE_REPLY_HEADER_LEN);
        let result = match reply.error {
            None => Ok(buf.split_to(data_len).freeze()),
            Some(e) => Err(ClientError::Server(e)),
        };
        let _ = pending.done.send(result);
    }
}

/// Read until `buf` holds at least `needed` bytes; end of stream is `Disconnected`.
async fn fill<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut BytesMut,
    needed: usize,
) -> Result<(), ClientError> {
    while buf.len() < needed {
        buf.reserve((needed - buf.len()).max(64 * 1024));
        if r.read_buf(buf).await? == 0 {
            return Err(ClientError::Disconnected);
        }
    }
    Ok(())
}
