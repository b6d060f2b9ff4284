//! The roster of live connections: who is connected, when each last sent a request, and
//! a way to close any of them from outside its task or threads.
//!
//! The accept loop (`super`) enlists every accepted socket ([`Roster::enlist`]) and
//! uses the roster for the two node-wide limits on connections:
//!
//! * **Idle timeout.** A negotiated connection that has sent no request for
//!   [`ServerConfig::idle_timeout`](super::ServerConfig::idle_timeout) is closed
//!   ([`Roster::close_idle`], run from a timer in the accept loop). Connections still
//!   negotiating have their own, shorter `handshake_timeout`.
//! * **Room for a new client.** When all `max_connections` slots are taken, a new client
//!   does not wait behind connections that do nothing: the connection that has been quiet
//!   longest (the oldest last request, or the oldest accept for one still negotiating) is
//!   closed to admit it ([`Roster::evict_oldest_idle`]) — least-recently-active, like
//!   an LRU of connections. At first only a connection quiet for at least [`EVICT_GRACE`]
//!   is taken, so clients that are briefly busy are not made to take turns; once the new
//!   client has waited that long (already accepted, so at most one socket waits this
//!   way) the connection with the least recent request is closed however recent it is:
//!   when every connection is busy, busy clients take turns rather than newcomers
//!   being locked out.
//! * **Stalled payloads.** A connection reading in a write's payload holds its share of
//!   the byte budget for it; when no byte of that payload arrives for
//!   [`ServerConfig::payload_timeout`](super::ServerConfig::payload_timeout) the
//!   connection is closed ([`Roster::close_stalled`]) and the budget freed. We prefer eviction over refusing the newcomer because an
//!   idle NBD connection is cheap for its client to reopen, whereas a refused client that
//!   has real work cannot proceed at all; and over a reserved slot because a reserve is
//!   consumed by the next idler.
//!
//! "Quiet" is measured from the last request *received*: a request that runs longer than
//! the idle timeout itself (5 minutes by default) could see its connection closed under
//! it; its client then gets an error for that request and may reconnect.
//!
//! Closing is `shutdown(2)` of both directions on a duplicate of the socket's descriptor
//! ([`Closer`]): on either transmission path the connection's next (or blocked) read
//! returns end of stream, so it ends through its ordinary ending path, and its slot is
//! freed when its task ends.

use std::collections::HashMap;
use std::io;
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The least time a connection must have been quiet to be closed for a new client.
pub(crate) const EVICT_GRACE: Duration = Duration::from_millis(250);

/// A duplicate of a connection's socket, used only to shut it down.
pub(crate) enum Closer {
    /// A TCP connection.
    Tcp(std::net::TcpStream),
    /// A Unix-domain connection.
    Unix(std::os::unix::net::UnixStream),
}

impl Closer {
    /// A closer for `s` (duplicates its descriptor).
    pub(crate) fn tcp(s: &tokio::net::TcpStream) -> io::Result<Self> {
        Ok(Closer::Tcp(s.as_fd().try_clone_to_owned()?.into()))
    }

    /// A closer for `s` (duplicates its descriptor).
    pub(crate) fn unix(s: &tokio::net::UnixStream) -> io::Result<Self> {
        Ok(Closer::Unix(s.as_fd().try_clone_to_owned()?.into()))
    }

    fn close(&self) {
        let _ = match self {
            Closer::Tcp(s) => s.shutdown(Shutdown::Both),
            Closer::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

/// What a connection reports about itself: when it last sent a request, and whether it
/// has finished negotiating.
#[derive(Debug)]
pub(crate) struct Activity {
    epoch: Instant,
    /// Milliseconds from `epoch` to the last request (or to the accept).
    last_ms: AtomicU64,
    negotiated: AtomicBool,
    /// Milliseconds from `epoch` to the last bytes of a write payload still arriving
    /// (`NO_PAYLOAD`: none is).
    payload_ms: AtomicU64,
}

/// `Activity::payload_ms` while no write payload is arriving.
const NO_PAYLOAD: u64 = u64::MAX;

impl Activity {
    fn new(epoch: Instant) -> Self {
        let a = Activity {
            epoch,
            last_ms: AtomicU64::new(0),
            negotiated: AtomicBool::new(false),
            payload_ms: AtomicU64::new(NO_PAYLOAD),
        };
        a.touch();
        a
    }

    /// A request arrived (whole: no payload of it is still arriving).
    pub(crate) fn touch(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Relaxed);
        self.payload_ms.store(NO_PAYLOAD, Ordering::Relaxed);
    }

    /// A write's payload is arriving and holds budget: bytes of it came in now (or the
    /// reader just took budget for it).
    pub(crate) fn payload_progress(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.payload_ms.store(now, Ordering::Relaxed);
    }

    /// Milliseconds since a payload still arriving last made progress (None: none is).
    fn payload_stalled_ms(&self, now_ms: u64) -> Option<u64> {
        let at = self.payload_ms.load(Ordering::Relaxed);
        (at != NO_PAYLOAD).then(|| now_ms.saturating_sub(at))
    }

    /// Negotiation finished; the connection is in its transmission phase.
    pub(crate) fn negotiated(&self) {
        self.negotiated.store(true, Ordering::Relaxed);
        self.touch();
    }

    fn quiet_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.last_ms.load(Ordering::Relaxed))
    }
}

struct Entry {
    closer: Closer,
    activity: Arc<Activity>,
    peer: String,
}

/// Every live connection of one server.
pub(crate) struct Roster {
    epoch: Instant,
    entries: Mutex<(u64, HashMap<u64, Entry>)>,
}

/// A connection's place on the roster; leaving it (drop) takes the connection off.
pub(crate) struct Enlisted {
    roster: Arc<Roster>,
    id: u64,
    /// What the connection reports.
    pub(crate) activity: Arc<Activity>,
}

impl Drop for Enlisted {
    fn drop(&mut self) {
        self.roster.entries().1.remove(&self.id);
    }
}

impl Roster {
    /// An empty roster.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Roster {
            epoch: Instant::now(),
            entries: Mutex::new((0, HashMap::new())),
        })
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, (u64, HashMap<u64, Entry>)> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Puts a connection from `peer` on the roster.
    pub(crate) fn enlist(self: &Arc<Self>, closer: Closer, peer: String) -> Enlisted {
        let activity = Arc::new(Activity::new(self.epoch));
        let mut e = self.entries();
        let id = e.0;
        e.0 += 1;
        e.1.insert(
            id,
            Entry {
                closer,
                activity: activity.clone(),
                peer,
            },
        );
        Enlisted {
            roster: self.clone(),
            id,
            activity,
        }
    }

    /// Closes the connection quiet longest, if it has been quiet at least `grace`;
    /// whether one was closed.
    pub(crate) fn evict_oldest_idle(&self, grace: Duration) -> bool {
        let now = self.now_ms();
        let mut e = self.entries();
        let oldest =
            e.1.iter()
                .map(|(id, en)| (en.activity.quiet_ms(now), std::cmp::Reverse(*id)))
                .filter(|(quiet, _)| *quiet >= grace.as_millis() as u64)
                // Quiet equally long (to the millisecond): the one accepted first.
                .max();
        let Some((quiet, std::cmp::Reverse(id))) = oldest else {
            return false;
        };
        if let Some(en) = e.1.remove(&id) {
            tracing::info!(peer = %en.peer, quiet_ms = quiet, "connection limit reached; closing the connection idle longest");
            en.closer.close();
        }
        true
    }

    /// Closes every connection whose write payload has made no progress for `timeout`
    /// (it holds budget for bytes that do not come); returns how many.
    pub(crate) fn close_stalled(&self, timeout: Duration) -> usize {
        let now = self.now_ms();
        let limit = timeout.as_millis() as u64;
        let mut e = self.entries();
        let stalled: Vec<u64> =
            e.1.iter()
                .filter(|(_, en)| {
                    en.activity
                        .payload_stalled_ms(now)
                        .is_some_and(|q| q >= limit)
                })
                .map(|(id, _)| *id)
                .collect();
        for id in &stalled {
            if let Some(en) = e.1.remove(id) {
                tracing::warn!(peer = %en.peer, ?timeout,
                    "a write's payload stalled (payload_timeout); closing the connection");
                en.closer.close();
            }
        }
        stalled.len()
    }

    /// Closes every negotiated connection quiet for at least `timeout`; how many.
    pub(crate) fn close_idle(&self, timeout: Duration) -> usize {
        let now = self.now_ms();
        let limit = timeout.as_millis() as u64;
        let mut e = self.entries();
        let idle: Vec<u64> = e
            .1
            .iter()
            .filter(|(_, en)| {
                en.activity.negotiated.load(Ordering::Relaxed) && en.activity.quiet_ms(now) >= limit
            })
            .map(|(id, _)| *id)
            .collect();
        for id in &idle {
            if let Some(en) = e.1.remove(id) {
                tracing::info!(peer = %en.peer, "idle timeout; closing the connection");
                en.closer.close();
            }
        }
        idle.len()
    }
}
