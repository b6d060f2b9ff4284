//! Node-wide limits shared by every connection of one server: a single budget of request
//! and reply payload bytes in flight, and a single pool of worker threads, each shared
//! fairly between the connections in their transmission phase.
//!
//! * **Bytes in flight.** A request that does not finish on the reading thread or task
//!   takes its payload's share (`kib`, from `admission`) before it starts and gives it
//!   back once its reply is on the socket. The server holds at most
//!   [`ServerConfig::in_flight_total`](super::ServerConfig::in_flight_total) this way,
//!   plus a reserve of a quarter of it that only a connection holding nothing may draw on,
//!   and only for a request of at most a sixteenth of the reserve (at least 64 KiB), so
//!   one request of a newcomer is admitted even while clients that never read their
//!   replies, or that started large writes and stalled, hold the rest (a stalled payload
//!   is also cut off after `payload_timeout`, see `roster`). Fairness: a connection that already holds something may hold
//!   at most its share, the total divided by the connections in transmission (and never
//!   more than [`IN_FLIGHT_KIB`]); a larger single request is admitted only when its
//!   connection holds nothing. So a connection whose client stops reading stops after its
//!   share, and the others keep theirs.
//! * **Worker threads.** On the threaded path (`threaded`) each connection always has
//!   one thread (the reader, bounded by `max_connections`); every further thread holds a
//!   worker of this pool, at most
//!   [`ServerConfig::max_workers`](super::ServerConfig::max_workers) node-wide and at most
//!   the pool divided by the connections (at least one) per connection. A connection
//!   refused a worker runs its request on the thread it has and reads again afterwards.
//!
//! * **Which path.** How many connections are in transmission decides whether a
//!   connection may run on threads of its own (`threaded`): see
//!   [`ServerConfig::threaded_connections`](super::ServerConfig::threaded_connections).
//!   The count is kept in an atomic as well, so a reader can look at it on every burst
//!   without the lock, and the connections on the threaded path are counted too
//!   ([`ThreadedSeat`]).
//!
//! Threads wait on a condition variable, async tasks on a [`Notify`]; every release wakes
//! both. The counters are exported ([`LimitsGauge`]) so a test or an operator can see the
//! bytes in flight, their peak, the limit, how many requests had to wait for room, the
//! workers and the connections on each path.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::server::admission::IN_FLIGHT_KIB;

/// The limits of one server (see the module docs).
#[derive(Debug)]
pub struct Limits {
    total_kib: u64,
    reserve_kib: u64,
    max_workers: usize,
    state: Mutex<State>,
    freed: Condvar,
    notify: Notify,
    /// Connections in transmission (as `State::conns`, readable without the lock).
    transmitting: AtomicUsize,
    /// Connections on the threaded path.
    threaded: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    used_kib: u64,
    peak_kib: u64,
    conns: usize,
    workers: usize,
    waits: u64,
}

/// What the limits of a server hold now, for tests and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LimitsGauge {
    /// Payload bytes held by requests in flight.
    pub in_flight_bytes: u64,
    /// The most ever held at once.
    pub peak_in_flight_bytes: u64,
    /// Connections in their transmission phase.
    pub connections: usize,
    /// Worker threads beyond each connection's own.
    pub workers: usize,
    /// The budget: [`super::ServerConfig::in_flight_total`] (a connection holding
    /// nothing may go a quarter beyond it, see the module docs).
    pub limit_bytes: u64,
    /// Requests that had to wait for room in the budget, since the server started.
    pub waits: u64,
    /// Connections whose transmission runs on threads of their own (the rest of
    /// `connections` are async tasks).
    pub threaded_connections: usize,
}

impl Limits {
    /// The limits `config` asks for
    /// ([`in_flight_total`](super::ServerConfig::in_flight_total),
    /// [`max_workers`](super::ServerConfig::max_workers)), for [`super::ServerBuilder::limits`].
    pub fn for_config(config: &super::ServerConfig) -> Arc<Self> {
        Self::new(config.in_flight_total, config.max_workers)
    }

    /// Limits of `total_bytes` in flight and `max_workers` worker threads.
    pub fn new(total_bytes: usize, max_workers: usize) -> Arc<Self> {
        let total_kib = (total_bytes as u64 / 1024).max(1);
        Arc::new(Limits {
            total_kib,
            reserve_kib: total_kib / 4,
            max_workers,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
            notify: Notify::new(),
            transmitting: AtomicUsize::new(0),
            threaded: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The counters now.
    pub fn gauge(&self) -> LimitsGauge {
        let st = self.lock();
        LimitsGauge {
            in_flight_bytes: st.used_kib * 1024,
            peak_in_flight_bytes: st.peak_kib * 1024,
            connections: st.conns,
            workers: st.workers,
            limit_bytes: self.total_kib * 1024,
            waits: st.waits,
            threaded_connections: self.threaded.load(Ordering::Relaxed),
        }
    }

    /// Connections in their transmission phase now (without the lock).
    pub(crate) fn transmitting(&self) -> usize {
        self.transmitting.load(Ordering::Relaxed)
    }

    /// Count a connection on the threaded path while the seat lives.
    pub(crate) fn threaded_seat(self: &Arc<Self>) -> ThreadedSeat {
        self.threaded.fetch_add(1, Ordering::Relaxed);
        ThreadedSeat(self.clone())
    }

    /// Register a connection entering its transmission phase; its share ends with it.
    pub(crate) fn join(self: &Arc<Self>) -> Share {
        self.lock().conns += 1;
        self.transmitting.fetch_add(1, Ordering::Relaxed);
        Share {
            limits: self.clone(),
            used_kib: AtomicU64::new(0),
            workers: AtomicUsize::new(0),
        }
    }

    fn wake(&self) {
        self.freed.notify_all();
        self.notify.notify_waiters();
    }
}

/// A connection's place on the threaded path (see [`Limits::threaded_seat`]).
#[derive(Debug)]
pub(crate) struct ThreadedSeat(Arc<Limits>);

impl Drop for ThreadedSeat {
    fn drop(&mut self) {
        self.0.threaded.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One connection's part of the [`Limits`].
#[derive(Debug)]
pub(crate) struct Share {
    limits: Arc<Limits>,
    /// KiB this connection holds; changed only under the limits' lock.
    used_kib: AtomicU64,
    /// Workers this connection holds; changed only under the limits' lock.
    workers: AtomicUsize,
}

impl Share {
    /// The limits this share is part of.
    pub(crate) fn limits(&self) -> &Arc<Limits> {
        &self.limits
    }

    fn fits(&self, st: &State, kib: u64) -> bool {
        let l = &self.limits;
        let used = self.used_kib.load(Ordering::Relaxed);
        let share = (l.total_kib / st.conns.max(1) as u64).min(u64::from(IN_FLIGHT_KIB));
        // The reserve is for a newcomer's ordinary request, not for one large payload:
        // otherwise a few connections that each start a 32 MiB write and stall would
        // hold it all.
        let small = (l.reserve_kib / 16).clamp(64, l.reserve_kib.max(64));
        let room = if used == 0 && kib <= small {
            l.total_kib + l.reserve_kib
        } else {
            l.total_kib
        };
        (used == 0 || used + kib <= share) && st.used_kib + kib <= room
    }

    fn take(&self, st: &mut State, kib: u64) {
        self.used_kib.fetch_add(kib, Ordering::Relaxed);
        st.used_kib += kib;
        st.peak_kib = st.peak_kib.max(st.used_kib);
    }

    /// Take `kib` without waiting, if this connection's share and the node's budget allow.
    pub(crate) fn try_acquire(&self, kib: u32) -> bool {
        let mut st = self.limits.lock();
        let ok = self.fits(&st, kib.into());
        if ok {
            self.take(&mut st, kib.into());
        }
        ok
    }

    /// Wait (blocking the thread) until `kib` can be taken, and take it.
    pub(crate) fn acquire(&self, kib: u32) {
        let mut st = self.limits.lock();
        if !self.fits(&st, kib.into()) {
            st.waits += 1;
        }
        while !self.fits(&st, kib.into()) {
            st = self
                .limits
                .freed
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
        self.take(&mut st, kib.into());
    }

    /// Wait (asynchronously) until `kib` can be taken, and take it.
    pub(crate) async fn acquire_async(&self, kib: u32) {
        let mut counted = false;
        loop {
            let notified = self.limits.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.try_acquire(kib) {
                return;
            }
            if !counted {
                counted = true;
                self.limits.lock().waits += 1;
            }
            notified.await;
        }
    }

    /// Give back `kib` taken before.
    pub(crate) fn release(&self, kib: u32) {
        if kib == 0 {
            return;
        }
        {
            let mut st = self.limits.lock();
            self.used_kib.fetch_sub(kib.into(), Ordering::Relaxed);
            st.used_kib -= u64::from(kib);
        }
        self.limits.wake();
    }

    /// Take a worker thread of the pool, if the pool and this connection's share of it
    /// allow.
    pub(crate) fn try_worker(&self) -> bool {
        let l = &self.limits;
        let mut st = l.lock();
        let mine = self.workers.load(Ordering::Relaxed);
        let share = (l.max_workers / st.conns.max(1)).max(1);
        let ok = st.workers < l.max_workers && mine < share;
        if ok {
            st.workers += 1;
            self.workers.store(mine + 1, Ordering::Relaxed);
        }
        ok
    }

    /// Give back a worker taken with [`Share::try_worker`].
    pub(crate) fn release_worker(&self) {
        let mut st = self.limits.lock();
        st.workers -= 1;
        self.workers.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        {
            let mut st = self.limits.lock();
            st.conns -= 1;
            self.limits.transmitting.fetch_sub(1, Ordering::Relaxed);
            st.used_kib -= self.used_kib.load(Ordering::Relaxed);
            st.workers -= self.workers.load(Ordering::Relaxed);
        }
        self.limits.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_fair_and_the_total_is_bounded() {
        let l = Limits::new(4 << 20, 4); // 4096 KiB, reserve 1024
        let a = l.join();
        let b = l.join();
        // Each may hold half once it holds something.
        assert!(a.try_acquire(1024));
        assert!(a.try_acquire(1024));
        assert!(!a.try_acquire(1024), "a is at its share of 2048 KiB");
        assert!(b.try_acquire(2048));
        assert!(!b.try_acquire(1), "the total is taken");
        // A newcomer holding nothing gets one small request from the reserve (at most a
        // sixteenth of it, at least 64 KiB), then waits; a large one may not use it.
        let c = l.join();
        assert!(!c.try_acquire(1000), "a large payload drew on the reserve");
        assert!(c.try_acquire(64));
        assert!(!c.try_acquire(1));
        let g = l.gauge();
        assert_eq!(g.in_flight_bytes, (4096 + 64) * 1024);
        assert!(g.peak_in_flight_bytes <= (4096 + 1024) * 1024);
        a.release(2048);
        drop(b); // a connection that ends gives back what it held
        assert_eq!(l.gauge().in_flight_bytes, 64 * 1024);
        assert_eq!(l.gauge().connections, 2);
        // Workers: two each of four while two connections are in.
        assert!(a.try_worker() && a.try_worker());
        assert!(!a.try_worker());
        assert!(c.try_worker() && c.try_worker());
        assert!(!c.try_worker());
        a.release_worker();
        assert_eq!(l.gauge().workers, 3);
        drop(c);
        drop(a);
        let end = LimitsGauge {
            peak_in_flight_bytes: g.peak_in_flight_bytes,
            limit_bytes: 4 << 20,
            ..Default::default()
        };
        assert_eq!(l.gauge(), end);
    }

    #[test]
    fn a_waiting_thread_is_woken_by_a_release() {
        let l = Limits::new(1 << 20, 1);
        let a = Arc::new(l.join());
        assert!(a.try_acquire(1024));
        let a2 = a.clone();
        let t = std::thread::spawn(move || a2.acquire(512));
        std::thread::sleep(std::time::Duration::from_millis(20));
        a.release(1024);
        t.join().unwrap();
        assert_eq!(l.gauge().in_flight_bytes, 512 * 1024);
        assert_eq!(l.gauge().waits, 1, "the thread had to wait once");
        assert_eq!(l.gauge().limit_bytes, 1 << 20);
    }
}
