//! Proportional sharing of the node's backend between tenants, in the backend's service
//! time (the enforcement half of the coordinated-learning controller: the automata, or
//! the operator's static shares, pick proportions; this enforces them).
//!
//! Owns: the point where requests wait for the backend. Every export's backend is
//! wrapped in a [`QueuedBackend`] (below the hot tier, so only what reaches the disk or
//! upstream waits), and all of them share the node's one [`FairQueue`]: at most
//! `[node] backend_depth` calls are in service at the backend at once, and when more
//! want to go, the next to start is the oldest waiting request of the tenant that has
//! received the least backend time for its weight. Does not own: choosing the
//! proportions (`PUT /v1/proportions`, from a controller or by hand).
//!
//! How (virtual time per tenant, as in weighted fair queueing with measured costs):
//! each tenant has a virtual clock `v`. A request that starts charges its tenant
//! `estimate / weight` (the tenant's recent mean service time); when it completes, the
//! charge is corrected to `measured service time / weight`. Among the tenants with
//! waiting requests the one with the smallest `v` goes next, FIFO within a tenant. A
//! tenant that was idle rejoins at the node's virtual time (the clock of the last
//! request started) so it banks no credit while idle: the sharing is work-conserving,
//! an idle tenant's share goes to the busy ones. Over a backlogged period each tenant's
//! backend time is therefore in the ratio of the weights, whatever the sizes of its
//! requests or the cost of its pattern (a tenant of random reads pays for its seeks).
//!
//! Weights: with no proportions set every tenant weighs 1 (equal shares). Proportions
//! set through the API must be finite, positive and sum to one (within
//! [`SUM_TOLERANCE`]); a tenant they do not name weighs as the smallest share named.
//! A change applies to the next charge: requests already waiting keep their place.
//!
//! Measured, per tenant, cumulative since start ([`TenantBackend`], reported in the
//! observations): backend calls, bytes, service time (the call's duration) and queueing
//! delay (from the call's arrival to its start). `backend_depth = 0` makes the queue
//! pass-through (nothing waits; the times are still measured).
//!
//! Where it falls short: every backend of the node is treated as one device (one queue),
//! which is right for the usual one disk or one upstream per node and too strict for
//! several independent ones; flushes and trims count as calls of their tenant with zero
//! bytes; a write-back the cache does on its own is charged to the export's tenant.

use cache::Backend;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How far from one the sum of proportions may be (the contract's).
pub const SUM_TOLERANCE: f64 = api::bandwidth::SUM_TOLERANCE;

/// Calls in service at the backend at once unless `[node] backend_depth` says otherwise.
pub const DEFAULT_DEPTH: usize = 32;

/// What a set of proportions is refused for (nothing changes).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProportionsError {
    /// A proportion that is negative, zero, NaN or infinite.
    #[error("proportions.{tenant}: {value} must be a positive finite number")]
    NotPositive {
        /// The tenant.
        tenant: String,
        /// Its proportion.
        value: f64,
    },
    /// The proportions do not add up to one.
    #[error("proportions: they sum to {sum}, not 1 (tolerance {SUM_TOLERANCE})")]
    Sum {
        /// Their sum.
        sum: f64,
    },
}

/// Checks proportions as [`FairQueue::set_proportions`] does: an empty map resets to
/// equal shares; otherwise every value positive and finite, the sum within
/// [`SUM_TOLERANCE`] of one.
pub fn check_proportions(p: &BTreeMap<String, f64>) -> Result<(), ProportionsError> {
    if p.is_empty() {
        return Ok(());
    }
    for (tenant, &value) in p {
        if !(value.is_finite() && value > 0.0) {
            return Err(ProportionsError::NotPositive {
                tenant: tenant.clone(),
                value,
            });
        }
    }
    let sum: f64 = p.values().sum();
    if (sum - 1.0).abs() > SUM_TOLERANCE {
        return Err(ProportionsError::Sum { sum });
    }
    Ok(())
}

/// One tenant's use of the backend, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TenantBackend {
    /// Calls completed.
    pub requests: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// Total service time (ns).
    pub service_ns: u64,
    /// Total queueing delay before the calls started (ns).
    pub queue_ns: u64,
}

struct Tenant {
    /// Virtual clock: weighted backend time received (ms / weight).
    v: f64,
    /// Recent mean service time of a call (ms), the charge at the start.
    est_ms: f64,
    /// Waiting requests, oldest first.
    waiting: VecDeque<u64>,
    /// Calls of the tenant waiting or in service.
    busy: usize,
    stats: TenantBackend,
}

struct Inner {
    in_service: usize,
    /// The node's virtual time: the largest clock a started request had.
    vtime: f64,
    next_seq: u64,
    /// Requests allowed to start that have not woken yet.
    granted: Vec<u64>,
    tenants: FxHashMap<Arc<str>, Tenant>,
    proportions: BTreeMap<String, f64>,
    /// Weight of a tenant the proportions do not name.
    default_weight: f64,
}

impl Inner {
    fn weight(&self, tenant: &str) -> f64 {
        self.proportions
            .get(tenant)
            .copied()
            .unwrap_or(self.default_weight)
    }

    /// Starts waiting requests while there is room.
    fn dispatch(&mut self, depth: usize) -> bool {
        let mut any = false;
        while self.in_service < depth {
            let Some((name, _)) = self
                .tenants
                .iter()
                .filter(|(_, t)| !t.waiting.is_empty())
                .min_by(|a, b| a.1.v.total_cmp(&b.1.v))
            else {
                break;
            };
            let name = name.clone();
            let w = self.weight(&name);
            let Some(t) = self.tenants.get_mut(&name) else {
                break;
            };
            let Some(seq) = t.waiting.pop_front() else {
                break;
            };
            self.vtime = self.vtime.max(t.v);
            t.v += t.est_ms / w;
            self.in_service += 1;
            self.granted.push(seq);
            any = true;
        }
        any
    }
}

/// The node's backend queue (see the module doc).
pub struct FairQueue {
    depth: usize,
    inner: Mutex<Inner>,
    turn: Condvar,
}

/// A call admitted to the backend; give it back with [`FairQueue::done`] (dropping it
/// does, with the time since it started).
pub struct Ticket<'a> {
    queue: &'a FairQueue,
    tenant: Arc<str>,
    bytes: u64,
    weight: f64,
    charged_ms: f64,
    started: Instant,
    queued: Duration,
    finished: bool,
}

impl Ticket<'_> {
    /// Time the call waited before it started.
    pub fn queued(&self) -> Duration {
        self.queued
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.finished = true;
            let took = self.started.elapsed();
            self.queue.finish(self, took);
        }
    }
}

impl FairQueue {
    /// A queue letting `depth` calls into the backend at once (0: no limit).
    pub fn new(depth: usize) -> Self {
        FairQueue {
            depth,
            inner: Mutex::new(Inner {
                in_service: 0,
                vtime: 0.0,
                next_seq: 0,
                granted: Vec::new(),
                tenants: FxHashMap::default(),
                proportions: BTreeMap::new(),
                default_weight: 1.0,
            }),
            turn: Condvar::new(),
        }
    }

    /// One tenant's use of the backend (zeros if it made no call yet).
    pub fn tenant(&self, tenant: &str) -> TenantBackend {
        self.lock()
            .tenants
            .get(tenant)
            .map(|t| t.stats)
            .unwrap_or_default()
    }

    /// The proportion set for `tenant`, if any.
    pub fn proportion(&self, tenant: &str) -> Option<f64> {
        self.lock().proportions.get(tenant).copied()
    }

    /// Calls let into the backend at once (0: no limit).
    pub fn depth(&self) -> usize {
        self.depth
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the proportions (see the module doc); an empty map restores equal shares.
    /// Errors (nothing changes): [`check_proportions`].
    pub fn set_proportions(&self, p: BTreeMap<String, f64>) -> Result<(), ProportionsError> {
        check_proportions(&p)?;
        let mut g = self.lock();
        g.default_weight = p.values().copied().fold(f64::INFINITY, f64::min);
        if !g.default_weight.is_finite() {
            g.default_weight = 1.0;
        }
        g.proportions = p;
        Ok(())
    }

    /// The proportions set (empty: equal shares).
    pub fn proportions(&self) -> BTreeMap<String, f64> {
        self.lock().proportions.clone()
    }

    /// Per tenant, what the backend did for it.
    pub fn stats(&self) -> BTreeMap<String, TenantBackend> {
        self.lock()
            .tenants
            .iter()
            .map(|(k, t)| (k.to_string(), t.stats))
            .collect()
    }

    /// Waits until `tenant` may start a call moving `bytes` at the backend. Blocks the
    /// calling thread (the cache's data path is blocking).
    pub fn admit(&self, tenant: &Arc<str>, bytes: u64) -> Ticket<'_> {
        let arrived = Instant::now();
        let mut g = self.lock();
        let vtime = g.vtime;
        let weight = g.weight(tenant);
        let seq = g.next_seq;
        g.next_seq += 1;
        let t = g.tenants.entry(tenant.clone()).or_insert_with(|| Tenant {
            v: vtime,
            est_ms: 0.0,
            waiting: VecDeque::new(),
            busy: 0,
            stats: TenantBackend::default(),
        });
        if t.busy == 0 {
            // Back from idle: no credit for the time away.
            t.v = t.v.max(vtime);
        }
        t.busy += 1;
        let charged_ms = t.est_ms;
        let immediate = self.depth == 0 || (g.in_service < self.depth && !any_waiting(&g));
        if immediate {
            let t = g.tenants.get_mut(tenant).expect("inserted above");
            let v = t.v;
            t.v += charged_ms / weight;
            g.vtime = g.vtime.max(v);
            g.in_service += 1;
        } else {
            g.tenants
                .get_mut(tenant)
                .expect("inserted above")
                .waiting
                .push_back(seq);
            loop {
                if let Some(i) = g.granted.iter().position(|&s| s == seq) {
                    g.granted.swap_remove(i);
                    break;
                }
                g = self.turn.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
        drop(g);
        let started = Instant::now();
        Ticket {
            queue: self,
            tenant: tenant.clone(),
            bytes,
            weight,
            charged_ms,
            started,
            queued: started - arrived,
            finished: false,
        }
    }

    /// Gives a call back, its service time measured; the next waiting call starts.
    pub fn done(&self, mut ticket: Ticket<'_>) {
        ticket.finished = true;
        let took = ticket.started.elapsed();
        self.finish(&ticket, took);
    }

    fn finish(&self, ticket: &Ticket<'_>, took: Duration) {
        let ms = took.as_secs_f64() * 1e3;
        let mut g = self.lock();
        g.in_service = g.in_service.saturating_sub(1);
        if let Some(t) = g.tenants.get_mut(&ticket.tenant) {
            t.v += (ms - ticket.charged_ms) / ticket.weight;
            t.est_ms = if t.stats.requests == 0 {
                ms
            } else {
                0.9 * t.est_ms + 0.1 * ms
            };
            t.busy = t.busy.saturating_sub(1);
            let s = &mut t.stats;
            s.requests += 1;
            s.bytes = s.bytes.saturating_add(ticket.bytes);
            s.service_ns = s.service_ns.saturating_add(nanos(took));
            s.queue_ns = s.queue_ns.saturating_add(nanos(ticket.queued));
        }
        if g.dispatch(self.depth) {
            drop(g);
            self.turn.notify_all();
        }
    }

    /// Runs `f` as one call of `tenant` moving `bytes` at the backend.
    pub fn run<T>(&self, tenant: &Arc<str>, bytes: u64, f: impl FnOnce() -> T) -> T {
        let ticket = self.admit(tenant, bytes);
        let out = f();
        self.done(ticket);
        out
    }
}

fn any_waiting(g: &Inner) -> bool {
    g.tenants.values().any(|t| !t.waiting.is_empty())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// An export's backend with every call going through the node's [`FairQueue`] as a
/// call of the export's tenant.
pub struct QueuedBackend {
    inner: Arc<dyn Backend>,
    tenant: Arc<str>,
    queue: Arc<FairQueue>,
}

impl QueuedBackend {
    /// Wraps `inner` for `tenant`.
    pub fn new(inner: Arc<dyn Backend>, tenant: &str, queue: Arc<FairQueue>) -> Self {
        QueuedBackend {
            inner,
            tenant: tenant.into(),
            queue,
        }
    }
}

impl Backend for QueuedBackend {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let n = buf.len() as u64;
        self.queue
            .run(&self.tenant, n, || self.inner.read_at(offset, buf))
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.queue.run(&self.tenant, data.len() as u64, || {
            self.inner.write_at(offset, data)
        })
    }

    fn flush(&self) -> io::Result<()> {
        self.queue.run(&self.tenant, 0, || self.inner.flush())
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.queue
            .run(&self.tenant, 0, || self.inner.trim(offset, len))
    }

    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
        self.inner.allocation(offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn props(p: &[(&str, f64)]) -> BTreeMap<String, f64> {
        p.iter().map(|(n, w)| (n.to_string(), *w)).collect()
    }

    /// A device serving one call at a time: every call takes `cost` of wall time.
    struct Device {
        cost: Duration,
    }

    impl Device {
        fn serve(&self) {
            std::thread::sleep(self.cost);
        }
    }

    /// `threads` closed-loop callers per tenant for `run`; the backend time each tenant
    /// got (the device's costs differ per tenant: b's calls cost twice a's).
    fn contend(q: &Arc<FairQueue>, run: Duration) -> [u64; 2] {
        let stop = Arc::new(AtomicBool::new(false));
        let dev = Arc::new([
            Device {
                cost: Duration::from_micros(500),
            },
            Device {
                cost: Duration::from_micros(1000),
            },
        ]);
        let mut handles = Vec::new();
        for (i, name) in ["a", "b"].into_iter().enumerate() {
            for _ in 0..4 {
                let (q, stop, dev) = (q.clone(), stop.clone(), dev.clone());
                let name: Arc<str> = name.into();
                handles.push(std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        q.run(&name, 4096, || dev[i].serve());
                    }
                }));
            }
        }
        std::thread::sleep(run);
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().unwrap();
        }
        let s = q.stats();
        [s["a"].service_ns, s["b"].service_ns]
    }

    #[test]
    fn backend_time_follows_the_proportions_not_the_request_counts() {
        let q = Arc::new(FairQueue::new(1));
        q.set_proportions(props(&[("a", 0.75), ("b", 0.25)]))
            .unwrap();
        let t = contend(&q, Duration::from_millis(1500));
        let ratio = t[0] as f64 / t[1] as f64;
        assert!((ratio / 3.0 - 1.0).abs() < 0.15, "a/b backend time {ratio}");
        let s = q.stats();
        // a's calls cost half of b's: about six times as many.
        assert!(s["a"].requests > 4 * s["b"].requests, "{s:?}");
        assert!(s["b"].queue_ns > 0);
    }

    #[test]
    fn equal_weights_share_backend_time_equally() {
        let q = Arc::new(FairQueue::new(1));
        let t = contend(&q, Duration::from_millis(1500));
        let ratio = t[0] as f64 / t[1] as f64;
        assert!((ratio - 1.0).abs() < 0.15, "a/b backend time {ratio}");
    }

    #[test]
    fn a_lone_tenant_is_never_held_and_depth_zero_never_waits() {
        for depth in [0, 2] {
            let q = FairQueue::new(depth);
            let a: Arc<str> = "a".into();
            for _ in 0..100 {
                let t = q.admit(&a, 10);
                assert_eq!(t.queued().as_millis(), 0);
                q.done(t);
            }
            let s = q.stats();
            assert_eq!(s["a"].requests, 100);
            assert_eq!(s["a"].bytes, 1000);
        }
    }

    #[test]
    fn bad_proportions_are_refused_naming_the_field_and_change_nothing() {
        let q = FairQueue::new(4);
        q.set_proportions(props(&[("a", 0.5), ("b", 0.5)])).unwrap();
        // Values are checked before the sum: the bad one is named.
        for bad in [-0.5, f64::NAN, 0.0, f64::INFINITY] {
            let e = q
                .set_proportions(props(&[("a", 0.5), ("b", bad)]))
                .unwrap_err();
            assert!(e.to_string().starts_with("proportions.b:"), "{e}");
        }
        let e = q
            .set_proportions(props(&[("a", 0.75), ("b", 0.75)]))
            .unwrap_err();
        assert_eq!(e, ProportionsError::Sum { sum: 1.5 });
        assert_eq!(q.proportions(), props(&[("a", 0.5), ("b", 0.5)]));
        // Within the tolerance, and the reset.
        q.set_proportions(props(&[("a", 0.7504), ("b", 0.25)]))
            .unwrap();
        q.set_proportions(BTreeMap::new()).unwrap();
        assert!(q.proportions().is_empty());
    }
}
