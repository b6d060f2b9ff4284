//! The transmission phase on a thread of its own, with blocking socket I/O.
//!
//! **Why.** At queue depth 1 a request's latency is dominated by wake-ups, not by work:
//! on the async path ([`super::connection`]) a request arrives through the epoll
//! reactor, which wakes a worker, which polls the connection task. Measured on a 2-core
//! VM, that path costs ~44 µs of CPU per 4 KiB hit against ~30 µs for nbdkit, which
//! blocks a thread per connection in `recv`. A thread blocked in `recv` is woken by the
//! network stack directly. So, after the (async) negotiation, a connection on a
//! multi-threaded runtime is handed to its own OS thread — what nbdkit and qemu-nbd do.
//!
//! **Structure: leader and followers** (nbdkit's parallel thread model, without its
//! hand-offs). A connection owns a small pool of threads. At any moment one of them, the
//! *leader*, holds the read side: it reads requests with blocking `read`s, frames them
//! with [`parse_request`](crate::request::parse_request) and admits each one (the
//! `admission` step it shares with the async path).
//! * A read of at most [`INLINE_READ_MAX`](crate::server::INLINE_READ_MAX) bytes is offered
//!   to the export once ([`Export::read_now`]); if it can answer at once from memory (a
//!   memory export, a cache hit) the leader answers it itself, the export copying the data
//!   straight into the leader's reply batch: no hand-off, no intermediate buffer. A
//!   burst's replies go out in one `write`, just before the leader would block on
//!   reading again.
//! * A larger read is handed off; if the export can lend its data
//!   ([`Export::read_now_borrowed`]: a cache hit), the thread sends it from the export's
//!   memory without copying it first ([`zero_copy::DirectSend`]); 1 MiB sequential hits
//!   went from ~0.9× nbdkit's memory plugin to ~1.2× with that one copy fewer.
//! * A request that may wait (a miss, a write, a flush) makes the leader hand the read
//!   side to an idle follower (starting one if none is idle, up to `max_in_flight`
//!   threads) and run the request itself, synchronously, with
//!   [`tokio::runtime::Handle::block_on`] (exports stay async and may use the runtime's
//!   timers and sockets), then send its reply and rejoin the followers. So a miss costs
//!   one wake-up of a follower, off its own path, and replies go out in completion
//!   order. Small replies of all threads are combined ([`ReplyOut`]): whoever finds
//!   another thread writing queues its reply for that thread to send with the rest; a
//!   large one waits for the socket rather than be copied.
//! * Socket writes block when a client stops reading; they happen only on the
//!   connection's own threads, never on a runtime worker, so a stalled client cannot
//!   stall the runtime. Admission: before it starts, a request that is handed off takes
//!   its payload's share of the node-wide byte budget (`limits`: shared fairly between
//!   connections), so clients that flood large requests and never collect the replies
//!   cost bounded memory together. Threads: one per request in progress, at most
//!   `max_in_flight` per connection; every thread beyond a connection's first holds a
//!   worker of the node-wide pool (`limits`), and a thread that finishes its request
//!   while [`SPARE_FOLLOWERS`] others already wait to lead gives its worker back and
//!   exits, so a quiet connection keeps at most `SPARE_FOLLOWERS + 1` threads and a busy
//!   one finds a thread waiting for each hand-off instead of starting one.
//!
//! **Moving to the async path.** While the node has more connections in transmission than
//! [`ServerConfig::threaded_connections`](crate::server::ServerConfig::threaded_connections)
//! (see the server's module docs for why), the leader, whenever it has parsed every
//! request it holds and is about to read more, stops reading instead: its batch is
//! written, the handed-off requests finish and send their replies, the threads exit as
//! they do at the end, but the last one leaves the socket open, and [`serve`] gives it
//! back with any bytes of a request read in part ([`Leaving::ToAsync`]), for the server
//! to serve the rest of the connection as an async task. Replies keep their meaning
//! because NBD replies carry their request's handle, and nothing is lost between the
//! paths: every request read was answered, every unread byte is in the socket or the
//! buffer handed over.
//!
//! **Ending.** On `NBD_CMD_DISC`, end of stream or a fatal protocol error the leader marks
//! the connection ended and writes its batch; each thread exits when it next looks for
//! work, after writing the reply it was working on, and the last one out shuts the
//! socket's write side. Server shutdown shuts the socket's *read* side from the async side
//! ([`serve`]), which ends the leader's blocked `read` with end of stream: the same drain
//! follows, so every request that was read is answered, unless the client has stopped
//! reading its replies: after `DRAIN_LIMIT` the socket is cut both ways.
//!
//! **Layout.** This module holds the connection's shared state, its threads' life cycle
//! and [`serve`]; `socket` the blocking socket and its reads (the node-wide budget and
//! workers are `limits`'s); `leader` the read side and the requests answered at once; `follower` the handed-off
//! requests; `replies` reply combining and the leader's batch; `zero_copy` large hits
//! sent from the export's memory.
//!
//! Written by hand: the pieces (blocking sockets, mutexes, a condition variable) are
//! standard; what is particular is the leader hand-off and the drain discipline.

mod follower;
mod leader;
mod replies;
mod socket;
mod zero_copy;

use std::io;
use std::net::Shutdown;
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use tokio::runtime::Handle;

use crate::reply::ReplyMode;
use crate::server::export::Export;
use crate::server::limits::Share;
use crate::server::poll::BusyPoll;
use crate::server::roster::Activity;
use crate::server::Phase;

use leader::ReadSide;
use replies::{ReplyBatch, ReplyOut, ReplyQueue};
pub(crate) use socket::BlockingStream;
use socket::READ_CHUNK;

/// Threads of a connection that may wait to lead at once; a thread that finishes its
/// request while this many wait exits. With one (as before), nearly every miss at queue
/// depth 32 started a thread, because the threads that had just finished had exited: a
/// thread creation per miss was most of a miss's CPU. Eight covers the requests that
/// two cores finish between two hand-offs (`lachesis bench nbd`, miss row).
pub(crate) const SPARE_FOLLOWERS: usize = 8;

/// How a connection left the threaded path.
pub(crate) enum Leaving {
    /// It ended; the socket's write side is shut.
    Closed,
    /// The node became crowded: the socket, open, the bytes read past the last request
    /// answered, and the connection's share of the limits (holding nothing now), for the
    /// async path.
    ToAsync(BlockingStream, BytesMut, Arc<Share>),
}

/// Run the transmission phase of a negotiated connection on threads of its own until it
/// ends or moves to the async path; `buf` holds bytes already read past the negotiation.
pub(crate) async fn serve(
    stream: BlockingStream,
    buf: BytesMut,
    export: Arc<dyn Export>,
    phase: Phase,
) -> io::Result<Leaving> {
    let Phase {
        config,
        stop: mut shutdown,
        activity,
        share,
        mode,
    } = phase;
    let waker = stream.try_clone()?;
    let _seat = share.limits().threaded_seat();
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
    let conn = Arc::new(Connection {
        export,
        activity,
        handle: Handle::current(),
        out: ReplyOut {
            sock: Mutex::new(stream.try_clone()?),
            queue: Mutex::new(ReplyQueue::default()),
        },
        leader: Mutex::new(ReadSide {
            stream,
            buf,
            scratch: vec![0; READ_CHUNK],
            poll: BusyPoll::new(config.busy_poll),
            batch: ReplyBatch {
                buf: Vec::with_capacity(64 << 10),
                filled: 0,
                mode,
            },
            ended: false,
            moving: false,
            result: Ok(()),
            reserved_kib: 0,
        }),
        budget: share,
        threads: Mutex::new(Threads {
            alive: 0,
            idle: 0,
            done: Some(done_tx),
        }),
        max_threads: config.max_in_flight.max(2),
        threaded_connections: config.threaded_connections,
        mode,
    });
    conn.start_thread()?;
    let ended = |r: Result<io::Result<()>, _>| {
        r.unwrap_or_else(|_| {
            Err(io::Error::other(
                "connection threads ended without a result",
            ))
        })
    };
    let result = tokio::select! {
        r = &mut done_rx => ended(r),
        _ = async { drop(shutdown.wait_for(|s| *s).await) } => {
            // End the leader's blocked read; the threads then drain and close.
            let _ = waker.shutdown(Shutdown::Read);
            match tokio::time::timeout(DRAIN_LIMIT, &mut done_rx).await {
                Ok(r) => ended(r),
                Err(_) => {
                    // A client that does not read its replies keeps a thread blocked
                    // in a write; cut the socket so the server can stop.
                    tracing::debug!("replies not collected within the drain limit; closing");
                    let _ = waker.shutdown(Shutdown::Both);
                    ended(done_rx.await)
                }
            }
        }
    };
    result?;
    let mut side = lock(&conn.leader);
    Ok(if side.moving {
        Leaving::ToAsync(
            side.stream.try_clone()?,
            std::mem::take(&mut side.buf),
            conn.budget.clone(),
        )
    } else {
        Leaving::Closed
    })
}

/// How long server shutdown waits for a connection's replies to drain before it cuts the
/// socket (only a client that stopped reading its replies takes that long).
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Thread accounting; `done` is taken by the last thread out.
struct Threads {
    alive: usize,
    idle: usize,
    done: Option<tokio::sync::oneshot::Sender<io::Result<()>>>,
}

/// One connection's shared state.
struct Connection {
    export: Arc<dyn Export>,
    /// When the last request arrived (for the server's idle rules, `roster`).
    activity: Arc<Activity>,
    handle: Handle,
    out: ReplyOut,
    leader: Mutex<ReadSide>,
    /// This connection's part of the node-wide limits: payload budget and workers.
    budget: Arc<Share>,
    threads: Mutex<Threads>,
    max_threads: usize,
    /// More connections than this in transmission, node-wide, and this one moves to the
    /// async path.
    threaded_connections: usize,
    /// How replies are framed (structured replies, block status).
    mode: ReplyMode,
}

impl Connection {
    fn threads(&self) -> std::sync::MutexGuard<'_, Threads> {
        lock(&self.threads)
    }

    /// Start one more thread (counted idle until it takes work). Every thread but the
    /// connection's first holds a worker of the node-wide pool: `Ok(false)` when the pool
    /// or this connection's share of it is used up.
    fn start_thread(self: &Arc<Self>) -> io::Result<bool> {
        {
            let mut t = self.threads();
            if t.alive > 0 && !self.budget.try_worker() {
                return Ok(false);
            }
            t.alive += 1;
            t.idle += 1;
        }
        let conn = self.clone();
        let started = std::thread::Builder::new()
            .name("nbd-conn".into())
            .spawn(move || conn.thread_main());
        if let Err(e) = started {
            let mut t = self.threads();
            t.alive -= 1;
            t.idle -= 1;
            if t.alive > 0 {
                self.budget.release_worker();
            }
            return Err(e);
        }
        Ok(true)
    }

    /// Lead or follow until the connection ends; the last thread out closes it.
    fn thread_main(self: Arc<Self>) {
        // This thread's reply buffer for large reads, reused without zeroing.
        let mut reply = Vec::new();
        loop {
            let job = {
                let mut side = lock(&self.leader);
                self.threads().idle -= 1;
                let job = if side.ended {
                    None
                } else {
                    self.lead(&mut side)
                };
                if job.is_none() {
                    side.ended = true;
                }
                job
                // Leadership passes to a waiting follower here.
            };
            let Some(job) = job else { break };
            self.run_job(job, &mut reply);
            let mut t = self.threads();
            if t.idle >= SPARE_FOLLOWERS {
                // Enough threads already wait to lead: this one's worker goes back to
                // the pool.
                break;
            }
            t.idle += 1;
        }
        let last = {
            let mut t = self.threads();
            if t.alive > 1 {
                self.budget.release_worker();
            }
            t.alive -= 1;
            (t.alive == 0).then(|| t.done.take()).flatten()
        };
        if let Some(done) = last {
            let _ = done.send(self.close());
        }
    }

    /// Make sure some thread will take the read side when the leader leaves it.
    fn ensure_follower(self: &Arc<Self>) {
        let need = {
            let t = self.threads();
            t.idle == 0 && t.alive < self.max_threads
        };
        // Without a new thread (the pool is used up, or the system refused one) the
        // request still runs on this one, and reading resumes once it is done.
        if need {
            if let Err(e) = self.start_thread() {
                tracing::warn!(error = %e, "could not start a connection thread");
            }
        }
    }

    /// Whether the node has more connections than the threaded path serves.
    fn crowded(&self) -> bool {
        self.budget.limits().transmitting() > self.threaded_connections
    }

    /// Close after the last thread: the result of reading, and the write side shut
    /// (left open for a connection moving to the async path).
    fn close(&self) -> io::Result<()> {
        let mut side = lock(&self.leader);
        let result = std::mem::replace(&mut side.result, Ok(()));
        if side.moving {
            return result;
        }
        let closed = lock(&self.out.sock).shutdown(Shutdown::Write);
        // A peer that already left makes the shutdown fail; that is not an error here.
        let closed = closed.or_else(|e| match e.kind() {
            io::ErrorKind::NotConnected => Ok(()),
            _ => Err(e),
        });
        result.and(closed)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
