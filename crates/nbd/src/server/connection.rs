//! One client connection: negotiation, then the transmission phase.
//!
//! Structure of the transmission phase:
//!
//! * **Reader (this task).** Frames requests from a `BytesMut` with
//!   [`crate::request::parse_request`]; a write's payload is split off the buffer as
//!   `Bytes` without copying. Each request is checked; a bad one is answered at once with
//!   its error value, a good one is spawned as its own task once a permit of the
//!   per-connection in-flight semaphore is held (backpressure: at most
//!   `max_in_flight` requests execute at once, after which the reader stops reading).
//! * **Request tasks.** Run `super::command::execute` and send the reply to the writer
//!   over a channel, so replies go out in completion order, not request order.
//! * **Writer task.** Owns the socket's write half behind a `BufWriter`; writes every reply
//!   that is ready and flushes only when the channel is momentarily empty, so a burst of
//!   small replies costs one system call.
//!
//! **Ending.** On `NBD_CMD_DISC`, end of stream, a fatal protocol error or server shutdown
//! the reader stops taking requests and drops its channel sender; the writer ends once the
//! last in-flight request task has sent its reply and dropped its sender. So every request
//! that was read gets its reply before the socket closes: shutdown drains, it does not cut.

use std::io;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, watch, Semaphore};

use crate::reply::simple_reply_bytes;
use crate::request::{parse_request, RequestHeader};
use crate::server::command::execute;
use crate::server::export::{Export, ExportProvider};
use crate::server::negotiate::negotiate;
use crate::server::ServerConfig;
use crate::wire::{Command, Errno, Parse, ProtocolError, REQUEST_HEADER_LEN};

/// A reply on its way to the writer task.
struct Outgoing {
    handle: u64,
    error: Option<Errno>,
    data: Option<Bytes>,
}

/// Serve one accepted connection until the client leaves or the server shuts down.
pub(crate) async fn handle<R, W>(
    mut r: R,
    mut w: W,
    exports: Arc<dyn ExportProvider>,
    config: ServerConfig,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let export = tokio::select! {
        res = negotiate(&mut r, &mut w, &mut buf, exports.as_ref()) => res?,
        _ = stopped(&mut shutdown) => None,
    };
    let Some(export) = export else {
        return Ok(());
    };
    transmission(r, w, buf, export, config, shutdown).await
}

async fn transmission<R, W>(
    mut r: R,
    w: W,
    mut buf: BytesMut,
    export: Arc<dyn Export>,
    config: ServerConfig,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Outgoing>(config.max_in_flight.max(1) * 2);
    let writer = tokio::spawn(write_replies(w, rx));
    let in_flight = Arc::new(Semaphore::new(config.max_in_flight.max(1)));
    let size = export.size();
    let flags = export.capabilities().transmission_flags();

    let result: io::Result<()> = 'read: loop {
        // Take every complete request already buffered before reading again.
        let parsed = match parse_request(&buf) {
            Ok(p) => p,
            Err(ProtocolError::OversizeWrite { handle, len }) => {
                tracing::debug!(handle, len, "oversize write; closing after EINVAL");
                let _ = tx.send(reply(handle, Err(Errno::Inval))).await;
                break Ok(());
            }
            Err(e) => {
                tracing::debug!(%e, "protocol error; closing");
                break Ok(());
            }
        };
        match parsed {
            Parse::Done(h, used) => {
                let frame = buf.split_to(used).freeze();
                if h.command == Command::Disconnect {
                    break Ok(());
                }
                if let Err(e) = h.check(size, flags) {
                    if tx.send(reply(h.handle, Err(e))).await.is_err() {
                        break Ok(());
                    }
                    continue;
                }
                let permit = tokio::select! {
                    p = in_flight.clone().acquire_owned() => p.expect("semaphore never closed"),
                    _ = stopped(&mut shutdown) => {
                        // Requests already read still get an answer.
                        let _ = tx.send(reply(h.handle, Err(Errno::Shutdown))).await;
                        break Ok(());
                    }
                };
                let payload = frame.slice(REQUEST_HEADER_LEN..);
                let export = export.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let out = run(export.as_ref(), h, payload).await;
                    let _ = tx.send(out).await;
                    drop(permit);
                });
            }
            Parse::Incomplete { needed } => {
                buf.reserve(needed.saturating_sub(buf.len()).max(16 * 1024));
                tokio::select! {
                    n = r.read_buf(&mut buf) => match n {
                        Ok(0) => break 'read Ok(()),
                        Ok(_) => {}
                        Err(e) => break 'read Err(e),
                    },
                    _ = stopped(&mut shutdown) => break 'read Ok(()),
                }
            }
        }
    };
    drop(tx);
    let written = writer.await.map_err(io::Error::other)?;
    result.and(written)
}

/// Completes once the server asks connections to stop.
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    // An error means the server is gone, which also means stop.
    let _ = shutdown.wait_for(|s| *s).await;
}

async fn run(export: &dyn Export, h: RequestHeader, payload: Bytes) -> Outgoing {
    reply(h.handle, execute(export, h, payload).await)
}

fn reply(handle: u64, outcome: Result<Option<Bytes>, Errno>) -> Outgoing {
    match outcome {
        Ok(data) => Outgoing {
            handle,
            error: None,
            data,
        },
        Err(e) => Outgoing {
            handle,
            error: Some(e),
            data: None,
        },
    }
}

async fn write_replies<W: AsyncWrite + Unpin>(
    w: W,
    mut rx: mpsc::Receiver<Outgoing>,
) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(64 * 1024, w);
    while let Some(mut msg) = rx.recv().await {
        loop {
            w.write_all(&simple_reply_bytes(msg.handle, msg.error))
                .await?;
            if let Some(data) = msg.data.take() {
                w.write_all(&data).await?;
            }
            match rx.try_recv() {
                Ok(next) => msg = next,
                Err(_) => break,
            }
        }
        w.flush().await?;
    }
    w.shutdown().await
}
