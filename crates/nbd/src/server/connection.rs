//! One client connection: negotiation, then the transmission phase.
//!
//! Structure of the transmission phase:
//!
//! * **Reader (this task).** Frames requests from a `BytesMut` with
//!   [`crate::request::parse_request`]; a write's payload is split off the buffer as
//!   `Bytes` without copying. Each request goes through the admission step shared with
//!   the threaded path (`admission`): a bad one is answered at once with its error value;
//!   a small read is offered once to [`Export::read_now`] and, if the data is in memory,
//!   answered here. Any other request is started *in the reader*: its future is polled once,
//!   and if it is already complete (a memory export, a cache hit) the reply is written
//!   right here, saving a task spawn and two cross-thread wake-ups per request. Only a
//!   future that has to wait is spawned as its own task. Before it starts, a request
//!   takes a slot of the per-connection `max_in_flight` semaphore and its payload's share
//!   of the node-wide byte budget (`limits`, shared fairly between connections); when
//!   either runs out the reader stops reading (backpressure), so clients that flood large
//!   reads and never collect the replies cost bounded memory, together.
//! * **Replies** go out in completion order, not request order, through one
//!   [`ReplyWriter`]: a `BufWriter` behind an async mutex plus a count of replies waiting
//!   for the lock. Whoever writes the last waiting reply flushes, so a burst of replies
//!   costs one system call; the reader flushes its own replies just before it would block
//!   on reading, so a pipelined burst of fast requests is answered with one write too.
//!
//! **Ending.** On `NBD_CMD_DISC`, end of stream, a fatal protocol error or server shutdown
//! the reader stops taking requests, waits until it holds every in-flight permit (every
//! spawned request has written its reply), flushes and closes the write side. So every
//! request that was read gets its reply before the socket closes: shutdown drains, it
//! does not cut.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{watch, Mutex, OwnedSemaphorePermit, Semaphore};

use crate::reply::ReplyHeader;
use crate::request::parse_request;
use crate::server::admission::{admit, payload_kib, read_now, Admission};
use crate::server::command::{execute, frame as framed_reply};
use crate::server::export::{Export, ExportProvider};
use crate::server::limits::Share;
use crate::server::negotiate::{negotiate, Negotiated, Session};
use crate::server::{Phase, ServerConfig};
use crate::wire::{Errno, Parse, ProtocolError, REQUEST_HEADER_LEN};

/// The write half of a connection, shared by the reader and the request tasks.
struct ReplyWriter<W> {
    w: Mutex<BufWriter<W>>,
    /// Replies that are waiting for, or hold, the lock and have not been written yet.
    waiting: AtomicUsize,
}

impl<W: AsyncWrite + Unpin> ReplyWriter<W> {
    /// Write one reply; flush unless another reply is queued behind this one (whoever
    /// writes the last one flushes) or `defer_flush` is set (the caller flushes later).
    async fn send(&self, reply: (ReplyHeader, Bytes), defer_flush: bool) -> io::Result<()> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let mut w = self.w.lock().await;
        let res = write_reply(&mut w, reply).await;
        let last = self.waiting.fetch_sub(1, Ordering::AcqRel) == 1;
        match res {
            Ok(()) if last && !defer_flush => w.flush().await,
            other => other,
        }
    }

    async fn flush(&self) -> io::Result<()> {
        self.w.lock().await.flush().await
    }
}

async fn write_reply<W: AsyncWrite + Unpin>(
    w: &mut BufWriter<W>,
    (head, data): (ReplyHeader, Bytes),
) -> io::Result<()> {
    w.write_all(head.bytes()).await?;
    if !data.is_empty() {
        w.write_all(&data).await?;
    }
    Ok(())
}

/// Run (one stage of) the negotiation of one accepted connection, reading into `buf`
/// (which keeps the bytes read past the handshake); [`Negotiated::Leave`] also when the
/// client timed out or the server is shutting down.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn negotiation<R, W>(
    r: &mut R,
    w: &mut W,
    buf: &mut BytesMut,
    exports: &dyn ExportProvider,
    peer: &str,
    config: &ServerConfig,
    shutdown: &mut watch::Receiver<bool>,
    session: &mut Session,
) -> io::Result<Negotiated>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let negotiation = tokio::time::timeout(
        config.handshake_timeout,
        negotiate(r, w, buf, exports, peer, session),
    );
    tokio::select! {
        res = negotiation => match res {
            Ok(res) => res,
            Err(_) => {
                tracing::debug!("negotiation timed out");
                Ok(Negotiated::Leave)
            }
        },
        _ = stopped(shutdown) => Ok(Negotiated::Leave),
    }
}

/// The transmission phase on the async runtime (see the module docs).
pub(crate) async fn transmission<R, W>(
    mut r: R,
    w: W,
    mut buf: BytesMut,
    export: Arc<dyn Export>,
    phase: Phase,
) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let writer = Arc::new(ReplyWriter {
        w: Mutex::new(BufWriter::with_capacity(64 * 1024, w)),
        waiting: AtomicUsize::new(0),
    });
    let Phase {
        config,
        stop: mut shutdown,
        activity,
        share,
        mode,
    } = phase;
    let max_in_flight = config.max_in_flight.clamp(1, Semaphore::MAX_PERMITS) as u32;
    let in_flight = Arc::new(Semaphore::new(max_in_flight as usize));
    let size = export.size();
    let flags = export.capabilities().transmission_flags();
    // Whether the reader wrote replies it has not flushed yet.
    let mut unflushed = false;
    // Budget (KiB) taken for the write whose payload is being read in (`payload_kib`).
    let mut reserved: u32 = 0;

    let result: io::Result<()> = 'read: loop {
        // Take every complete request already buffered before reading again.
        let parsed = match parse_request(&buf) {
            Ok(p) => p,
            Err(ProtocolError::OversizeWrite { handle, len }) => {
                tracing::debug!(handle, len, "oversize write; closing after EINVAL");
                let refusal = ReplyHeader::error(mode, handle, Errno::Inval);
                break writer.send((refusal, Bytes::new()), false).await;
            }
            Err(e) => {
                tracing::debug!(%e, "protocol error; closing");
                break Ok(());
            }
        };
        match parsed {
            Parse::Done(h, used) => {
                activity.touch();
                let frame = buf.split_to(used).freeze();
                let taken = std::mem::take(&mut reserved);
                let admission = admit(&h, size, flags, mode);
                if !matches!(admission, Admission::Serve { kib, .. } if kib == taken) {
                    share.release(taken);
                }
                let (answer, kib) = match admission {
                    Admission::Disconnect => break Ok(()),
                    Admission::Refuse(e) => (Some(Err(e)), 0),
                    Admission::Serve { now, kib } => {
                        // A small read is offered to the export once; a hit is answered
                        // right here, like the threaded leader does.
                        let answer = now.then(|| {
                            let mut data = vec![0; h.length as usize];
                            read_now(export.as_ref(), &h, &mut data)
                                .map(|r| r.map(|()| Some(Bytes::from(data))))
                        });
                        (answer.flatten(), kib)
                    }
                };
                if let Some(outcome) = answer {
                    if let Err(e) = writer.send(framed_reply(mode, &h, outcome), true).await {
                        break Err(e);
                    }
                    unflushed = true;
                    continue;
                }
                // Admission: a request slot and its share of the byte budget, so a client
                // that never reads its replies cannot make the server buffer without bound.
                let budget = if taken > 0 && taken == kib { 0 } else { kib };
                let admitted = tokio::select! {
                    a = acquire(&in_flight, &share, kib, budget) => a,
                    _ = stopped(&mut shutdown) => {
                        // What was taken before the payload is given back after the loop.
                        reserved = kib - budget;
                        let refusal = framed_reply(mode, &h, Err(Errno::Shutdown));
                        let _ = writer.send(refusal, false).await;
                        break Ok(());
                    }
                };
                let payload = frame.slice(REQUEST_HEADER_LEN..);
                let export = export.clone();
                let mut request =
                    Box::pin(async move { execute(export.as_ref(), h, payload).await });
                // Poll once here; most memory-backed requests finish at once.
                let first = std::future::poll_fn(|cx| Poll::Ready(request.as_mut().poll(cx))).await;
                if let Poll::Ready(outcome) = first {
                    drop(admitted);
                    if let Err(e) = writer.send(framed_reply(mode, &h, outcome), true).await {
                        break Err(e);
                    }
                    unflushed = true;
                    continue;
                }
                let writer = writer.clone();
                tokio::spawn(async move {
                    let outcome = request.await;
                    if let Err(e) = writer.send(framed_reply(mode, &h, outcome), false).await {
                        tracing::debug!(error = %e, "could not send a reply");
                    }
                    drop(admitted);
                });
            }
            Parse::Incomplete { needed } => {
                if unflushed {
                    if let Err(e) = writer.flush().await {
                        break Err(e);
                    }
                    unflushed = false;
                }
                if reserved == 0 {
                    if let Some(kib) = payload_kib(needed) {
                        tokio::select! {
                            _ = share.acquire_async(kib) => reserved = kib,
                            _ = stopped(&mut shutdown) => break 'read Ok(()),
                        }
                        activity.payload_progress();
                    }
                }
                buf.reserve(needed.saturating_sub(buf.len()).max(16 * 1024));
                tokio::select! {
                    n = r.read_buf(&mut buf) => match n {
                        Ok(0) => break 'read Ok(()),
                        Ok(_) => {
                            if reserved > 0 {
                                activity.payload_progress();
                            }
                        }
                        Err(e) => break 'read Err(e),
                    },
                    _ = stopped(&mut shutdown) => break 'read Ok(()),
                }
            }
        }
    };
    share.release(reserved);
    // Drain: every spawned request holds a permit until its reply is written.
    let _all = in_flight
        .acquire_many(max_in_flight)
        .await
        .expect("semaphore never closed");
    let mut w = writer.w.lock().await;
    let closed = async {
        w.flush().await?;
        w.shutdown().await
    }
    .await;
    result.and(closed)
}

/// Wait for a request slot and `budget` KiB of the node-wide payload budget (0 when the
/// request's `kib` was taken before its payload was read in); the slot and `kib` are given
/// back when the returned guard drops.
async fn acquire(slots: &Arc<Semaphore>, share: &Arc<Share>, kib: u32, budget: u32) -> Admitted {
    let slot = slots.clone().acquire_owned().await;
    if budget > 0 {
        share.acquire_async(budget).await;
    }
    Admitted {
        _slot: slot.expect("semaphore never closed"),
        share: share.clone(),
        kib,
    }
}

/// A request's slot and budget, held until its reply is written.
struct Admitted {
    _slot: OwnedSemaphorePermit,
    share: Arc<Share>,
    kib: u32,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.share.release(self.kib);
    }
}

/// Completes once the server asks connections to stop.
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    // An error means the server is gone, which also means stop.
    let _ = shutdown.wait_for(|s| *s).await;
}
