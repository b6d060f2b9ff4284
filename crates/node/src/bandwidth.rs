//! Proportional sharing of a device's bandwidth by time quanta (the enforcement half of
//! the coordinated-learning controller: the automaton picks proportions, this enforces
//! them).
//!
//! Owns: turning per-tenant weights into start times for requests, and counting what each
//! tenant was granted. Does not own: choosing the weights (the controller's learning
//! automaton does), sleeping (the node is async: it awaits the returned instant), or
//! measuring the device (the total is configured).
//!
//! How: time is cut into quanta of `quantum` from the first call. Each quantum carries a
//! budget of `total_bytes_per_sec * quantum` bytes, split among the *active* tenants in
//! proportion to their weights (1.0 unless set by [`BandwidthShare::set_proportions`]).
//! A tenant is active while it made a request in the last [`ACTIVE_QUANTA`] quanta or
//! still has bytes scheduled in a future quantum, so an idle tenant's share flows to the
//! busy ones (work-conserving). Each tenant has a cursor — a quantum and the bytes already
//! placed in it — that never lags the current quantum. A request that fits the rest of the
//! cursor quantum's share starts in that quantum (at `now` if it is the current one); a
//! request larger than the rest starts at the next quantum boundary, unless the cursor
//! quantum is still untouched, in which case it starts there. Either way its bytes are
//! laid end to end after the tenant's earlier bytes, so what does not fit becomes debt
//! carried into the following quanta and the next requests wait: a request is delayed,
//! never refused, and the long-run rate of a saturating tenant is exactly its share
//! (no budget is lost at quantum edges). Per call the work is one hash lookup and O(1)
//! arithmetic; once per quantum the active set is rebuilt in O(tenants), so the cost is
//! O(1) amortised when tenants call at least once per quantum.
//!
//! Where it falls short: bytes already scheduled keep the share they were scheduled with,
//! so a change of weights or of the active set takes effect only after a tenant's
//! backlog (at most one request's worth for a closed-loop tenant); a newcomer gets its
//! share at once, so for about one quantum the device may be promised more than its total;
//! delays are capped at [`MAX_DELAY`] (a request sized near `u64::MAX` would otherwise
//! overflow `Instant`); a tenant name once seen is remembered for the life of the
//! scheduler.

use cache::{CacheError, Result};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A tenant counts as active this many quanta after its last request.
pub const ACTIVE_QUANTA: u64 = 3;

/// The longest delay [`BandwidthShare::reserve`] returns.
pub const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);

struct Tenant {
    weight: f64,
    active: bool,
    last_q: u64,
    cursor_q: u64,
    used: f64,
    granted: u64,
}

struct Inner {
    origin: Option<Instant>,
    weights: FxHashMap<String, f64>,
    tenants: FxHashMap<String, Tenant>,
    active_weight: f64,
    scanned_q: u64,
}

impl Inner {
    fn rescan(&mut self, q_now: u64) {
        self.active_weight = 0.0;
        for t in self.tenants.values_mut() {
            t.active = t.last_q.saturating_add(ACTIVE_QUANTA) > q_now || t.cursor_q > q_now;
            if t.active {
                self.active_weight += t.weight;
            }
        }
        self.scanned_q = q_now;
    }
}

/// One tenant in a [`BandwidthSnapshot`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantBandwidth {
    /// The tenant.
    pub tenant: String,
    /// Its weight.
    pub weight: f64,
    /// Whether it counted as active at the last call.
    pub active: bool,
    /// Bytes reserved so far.
    pub granted_bytes: u64,
    /// Its fraction of the total bandwidth now (0 when idle).
    pub share: f64,
}

/// What a [`BandwidthShare`] has granted, by tenant name.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BandwidthSnapshot {
    /// Bytes per second shared (0 = unlimited).
    pub total_bytes_per_sec: u64,
    /// Quantum in microseconds.
    pub quantum_us: u64,
    /// Per tenant, sorted by name.
    pub tenants: Vec<TenantBandwidth>,
}

/// Time-quanta proportional-share scheduler of one device's bandwidth.
pub struct BandwidthShare {
    total: u64,
    quantum: Duration,
    budget: f64,
    inner: Mutex<Inner>,
}

impl BandwidthShare {
    /// Shares `total_bytes_per_sec` (0 = unlimited) by quanta of `quantum`. Errors: a zero
    /// quantum.
    pub fn new(total_bytes_per_sec: u64, quantum: Duration) -> Result<Self> {
        if quantum.is_zero() {
            return Err(CacheError::Invalid(
                "bandwidth share: quantum must be longer than zero".into(),
            ));
        }
        Ok(BandwidthShare {
            total: total_bytes_per_sec,
            quantum,
            budget: total_bytes_per_sec as f64 * quantum.as_secs_f64(),
            inner: Mutex::new(Inner {
                origin: None,
                weights: FxHashMap::default(),
                tenants: FxHashMap::default(),
                active_weight: 0.0,
                scanned_q: 0,
            }),
        })
    }

    /// Bytes per second shared (0 = unlimited).
    pub fn total_bytes_per_sec(&self) -> u64 {
        self.total
    }

    /// The quantum.
    pub fn quantum(&self) -> Duration {
        self.quantum
    }

    /// Sets the weights; tenants not listed get 1.0. Errors (nothing changes): a weight
    /// that is not a positive finite number, or a tenant listed twice — the error names
    /// the tenant.
    pub fn set_proportions(&self, proportions: &[(String, f64)]) -> Result<()> {
        let mut weights = FxHashMap::default();
        for (name, w) in proportions {
            if !(w.is_finite() && *w > 0.0) {
                return Err(CacheError::Invalid(format!(
                    "bandwidth weight of tenant `{name}` is {w}; it must be a positive finite number"
                )));
            }
            if weights.insert(name.clone(), *w).is_some() {
                return Err(CacheError::Invalid(format!(
                    "tenant `{name}` is listed twice in the bandwidth proportions"
                )));
            }
        }
        let mut g = lock(&self.inner);
        let inner = &mut *g;
        inner.active_weight = 0.0;
        for (name, t) in inner.tenants.iter_mut() {
            t.weight = weights.get(name).copied().unwrap_or(1.0);
            if t.active {
                inner.active_weight += t.weight;
            }
        }
        inner.weights = weights;
        Ok(())
    }

    fn quantum_of(&self, origin: Instant, now: Instant) -> u64 {
        let d = now.saturating_duration_since(origin);
        u64::try_from(d.as_nanos() / self.quantum.as_nanos()).unwrap_or(u64::MAX)
    }

    fn start_of(&self, origin: Instant, q: u64, now: Instant) -> Instant {
        let at = self
            .quantum
            .as_nanos()
            .checked_mul(u128::from(q))
            .and_then(|n| u64::try_from(n).ok())
            .and_then(|n| origin.checked_add(Duration::from_nanos(n)));
        let cap = now.checked_add(MAX_DELAY).unwrap_or(now);
        match at {
            Some(t) => t.min(cap).max(now),
            None => cap,
        }
    }

    /// Reserves `bytes` for `tenant` at `now`; returns when the request may start (`now`
    /// itself if it may start at once). Never refuses: a request beyond the tenant's
    /// budget is scheduled later.
    pub fn reserve(&self, tenant: &str, bytes: u64, now: Instant) -> Instant {
        let mut g = lock(&self.inner);
        let inner = &mut *g;
        let origin = *inner.origin.get_or_insert(now);
        let q_now = self.quantum_of(origin, now);
        if q_now > inner.scanned_q {
            inner.rescan(q_now);
        }
        if !inner.tenants.contains_key(tenant) {
            let weight = inner.weights.get(tenant).copied().unwrap_or(1.0);
            inner.tenants.insert(
                tenant.to_string(),
                Tenant {
                    weight,
                    active: false,
                    last_q: q_now,
                    cursor_q: q_now,
                    used: 0.0,
                    granted: 0,
                },
            );
        }
        let Some(t) = inner.tenants.get_mut(tenant) else {
            return now;
        };
        t.granted = t.granted.saturating_add(bytes);
        if self.total == 0 {
            return now;
        }
        if !t.active {
            t.active = true;
            inner.active_weight += t.weight;
        }
        t.last_q = t.last_q.max(q_now);
        let share = (self.budget * t.weight / inner.active_weight).max(1.0);
        if t.cursor_q < q_now {
            t.cursor_q = q_now;
            t.used = 0.0;
        }
        let b = bytes as f64;
        let start_q = if t.used == 0.0 || t.used + b <= share {
            t.cursor_q
        } else {
            t.cursor_q.saturating_add(1)
        };
        // Lay the bytes end to end after the tenant's earlier ones.
        let end = t.used + b;
        let whole = (end / share).floor();
        t.cursor_q = t.cursor_q.saturating_add(whole as u64);
        t.used = (end - whole * share).max(0.0);
        if start_q == q_now {
            now
        } else {
            self.start_of(origin, start_q, now)
        }
    }

    /// Per-tenant grants and shares, as of the last call.
    pub fn snapshot(&self) -> BandwidthSnapshot {
        let g = lock(&self.inner);
        let mut tenants: Vec<TenantBandwidth> = g
            .tenants
            .iter()
            .map(|(name, t)| TenantBandwidth {
                tenant: name.clone(),
                weight: t.weight,
                active: t.active,
                granted_bytes: t.granted,
                share: if t.active && g.active_weight > 0.0 {
                    t.weight / g.active_weight
                } else {
                    0.0
                },
            })
            .collect();
        tenants.sort_by(|a, b| a.tenant.cmp(&b.tenant));
        BandwidthSnapshot {
            total_bytes_per_sec: self.total,
            quantum_us: u64::try_from(self.quantum.as_micros()).unwrap_or(u64::MAX),
            tenants,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    /// Closed-loop tenants: each issues its next request the moment the previous one may
    /// start, so every tenant always wants more than it gets.
    struct Sim {
        t0: Instant,
        names: Vec<String>,
        sizes: Vec<u64>,
        next: Vec<Instant>,
    }

    impl Sim {
        fn new(t0: Instant, tenants: &[(&str, u64)]) -> Self {
            Sim {
                t0,
                names: tenants.iter().map(|t| t.0.to_string()).collect(),
                sizes: tenants.iter().map(|t| t.1).collect(),
                next: vec![t0; tenants.len()],
            }
        }

        /// Runs the tenants in `which` until `until`; calls `seen(tenant, start, bytes)`.
        fn run(
            &mut self,
            bw: &BandwidthShare,
            which: &[usize],
            until: Duration,
            mut seen: impl FnMut(usize, Duration, u64),
        ) {
            let end = self.t0 + until;
            loop {
                let Some(&i) = which
                    .iter()
                    .filter(|&&i| self.next[i] < end)
                    .min_by_key(|&&i| self.next[i])
                else {
                    return;
                };
                let now = self.next[i];
                let start = bw.reserve(&self.names[i], self.sizes[i], now);
                assert!(start >= now);
                seen(i, start - self.t0, self.sizes[i]);
                self.next[i] = start;
            }
        }
    }

    fn props(p: &[(&str, f64)]) -> Vec<(String, f64)> {
        p.iter().map(|(n, w)| (n.to_string(), *w)).collect()
    }

    #[test]
    fn two_saturating_tenants_get_bytes_in_their_proportions() {
        // 100 MB/s in 10 ms quanta; requests of different sizes so the split is by bytes,
        // not by requests.
        let bw = BandwidthShare::new(100_000_000, 10 * MS).unwrap();
        bw.set_proportions(&props(&[("a", 3.0), ("b", 1.0)]))
            .unwrap();
        let t0 = Instant::now();
        let mut sim = Sim::new(t0, &[("a", 4096), ("b", 65536)]);
        let mut bytes = [0u64; 2];
        sim.run(&bw, &[0, 1], 2000 * MS, |i, start, n| {
            if start >= 100 * MS && start < 2000 * MS {
                bytes[i] += n;
            }
        });
        let ratio = bytes[0] as f64 / bytes[1] as f64;
        assert!((ratio / 3.0 - 1.0).abs() < 0.05, "ratio {ratio} {bytes:?}");
        // Together they get the device, no more: 1.9 s at 100 MB/s.
        let total = (bytes[0] + bytes[1]) as f64;
        assert!((total / 190e6 - 1.0).abs() < 0.02, "total {total}");
        let snap = bw.snapshot();
        assert_eq!(snap.tenants.len(), 2);
        assert_eq!(snap.tenants[0].tenant, "a");
        assert!((snap.tenants[0].share - 0.75).abs() < 1e-9);
        assert!((snap.tenants[1].share - 0.25).abs() < 1e-9);
        assert!(snap.tenants[0].granted_bytes >= bytes[0]);
        assert_eq!(snap.quantum_us, 10_000);
    }

    #[test]
    fn one_active_tenant_gets_the_whole_bandwidth() {
        let bw = BandwidthShare::new(100_000_000, 10 * MS).unwrap();
        bw.set_proportions(&props(&[("a", 1.0), ("b", 4.0)]))
            .unwrap();
        let t0 = Instant::now();
        let mut sim = Sim::new(t0, &[("a", 16384), ("b", 16384)]);
        // Both busy for 200 ms: a gets a fifth.
        let mut both = [0u64; 2];
        sim.run(&bw, &[0, 1], 200 * MS, |i, start, n| {
            if start >= 50 * MS && start < 200 * MS {
                both[i] += n;
            }
        });
        assert!((both[0] as f64 / 15e6 * 5.0 - 1.0).abs() < 0.05, "{both:?}");
        // b goes idle; after ACTIVE_QUANTA quanta its share is a's.
        let mut alone = 0u64;
        sim.run(&bw, &[0], 1300 * MS, |_, start, n| {
            if start >= 300 * MS && start < 1300 * MS {
                alone += n;
            }
        });
        assert!((alone as f64 / 100e6 - 1.0).abs() < 0.02, "alone {alone}");
        let snap = bw.snapshot();
        let b = snap.tenants.iter().find(|t| t.tenant == "b").unwrap();
        assert!(!b.active);
        assert_eq!(b.share, 0.0);
        assert_eq!(snap.tenants[0].share, 1.0);
    }

    #[test]
    fn changed_proportions_take_effect_within_two_quanta() {
        let bw = BandwidthShare::new(100_000_000, 10 * MS).unwrap();
        let t0 = Instant::now();
        let mut sim = Sim::new(t0, &[("a", 4096), ("b", 4096)]);
        let quanta = 200usize;
        let mut per_q = vec![[0u64; 2]; quanta];
        let mut record = |i: usize, start: Duration, n: u64| {
            let q = (start.as_nanos() / (10 * MS).as_nanos()) as usize;
            if q < quanta {
                per_q[q][i] += n;
            }
        };
        sim.run(&bw, &[0, 1], 1000 * MS, &mut record);
        bw.set_proportions(&props(&[("a", 3.0)])).unwrap();
        sim.run(&bw, &[0, 1], 2000 * MS, &mut record);
        let ratio = |b: &[u64; 2]| b[0] as f64 / b[1] as f64;
        for (q, b) in per_q.iter().enumerate().take(99).skip(10) {
            assert!((ratio(b) - 1.0).abs() < 0.05, "quantum {q}: {b:?}");
        }
        // The change came at the start of quantum 100; from quantum 101 on (within the
        // two-quanta bound; measured: from quantum 100) every quantum is 3:1.
        for (q, b) in per_q.iter().enumerate().take(199).skip(101) {
            assert!((ratio(b) / 3.0 - 1.0).abs() < 0.05, "quantum {q}: {b:?}");
        }
    }

    #[test]
    fn huge_requests_are_delayed_not_refused() {
        // 1 MB/s in 10 ms quanta: 10 kB per quantum.
        let bw = BandwidthShare::new(1_000_000, 10 * MS).unwrap();
        let t0 = Instant::now();
        assert_eq!(bw.reserve("a", 100, t0), t0);
        // 50 kB does not fit the 9.9 kB left: it starts at the next quantum, and its
        // bytes run through quantum 5.
        assert_eq!(bw.reserve("a", 50_000, t0), t0 + 10 * MS);
        assert_eq!(bw.reserve("a", 100, t0 + MS), t0 + 50 * MS);
        // A fresh tenant's huge first request starts at once; its debt delays the next.
        // (a is still active: both get 5 kB per quantum.)
        assert_eq!(bw.reserve("b", 1_000_000, t0 + 2 * MS), t0 + 2 * MS);
        assert_eq!(bw.reserve("b", 1, t0 + 3 * MS), t0 + 2000 * MS);
        // Absurd sizes are capped, not refused and not a panic.
        let far = bw.reserve("c", u64::MAX, t0 + 4 * MS);
        assert_eq!(far, t0 + 4 * MS);
        let later = bw.reserve("c", 1, t0 + 5 * MS);
        assert_eq!(later, t0 + 5 * MS + MAX_DELAY);
        let snap = bw.snapshot();
        let c = snap.tenants.iter().find(|t| t.tenant == "c").unwrap();
        assert_eq!(c.granted_bytes, u64::MAX);
    }

    #[test]
    fn unlimited_bandwidth_never_delays() {
        let bw = BandwidthShare::new(0, 10 * MS).unwrap();
        let t0 = Instant::now();
        for i in 0..1000 {
            assert_eq!(bw.reserve("a", 1 << 30, t0 + i * MS), t0 + i * MS);
        }
        assert_eq!(bw.snapshot().tenants[0].granted_bytes, 1000 << 30);
    }

    #[test]
    fn bad_configuration_is_an_error_naming_the_tenant() {
        assert!(matches!(
            BandwidthShare::new(1000, Duration::ZERO),
            Err(CacheError::Invalid(_))
        ));
        let bw = BandwidthShare::new(1000, 10 * MS).unwrap();
        for w in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = bw
                .set_proportions(&props(&[("alice", 1.0), ("bob", w)]))
                .unwrap_err();
            assert!(err.to_string().contains("`bob`"), "{err}");
        }
        let err = bw
            .set_proportions(&props(&[("carol", 1.0), ("carol", 2.0)]))
            .unwrap_err();
        assert!(err.to_string().contains("`carol`"), "{err}");
        // Nothing changed: an unlisted tenant still has weight 1.
        bw.reserve("alice", 1, Instant::now());
        assert_eq!(bw.snapshot().tenants[0].weight, 1.0);
    }

    proptest! {
        #[test]
        fn starts_are_ordered_bounded_and_within_budget(
            reqs in proptest::collection::vec((0usize..3, 1u64..30_000, 0u64..4_000), 1..300),
            weights in proptest::collection::vec(0.1f64..10.0, 3),
        ) {
            // 1 MB/s, 10 ms quanta: 10 kB per quantum. Time moves in microseconds.
            let bw = BandwidthShare::new(1_000_000, 10 * MS).unwrap();
            let names = ["t0", "t1", "t2"];
            bw.set_proportions(&names.iter().zip(&weights).map(|(n, w)| (n.to_string(), *w)).collect::<Vec<_>>()).unwrap();
            let t0 = Instant::now();
            let mut now = t0;
            let mut last = [t0; 3];
            let mut granted = [0u64; 3];
            let mut per_quantum: FxHashMap<(usize, u128), u64> = FxHashMap::default();
            let mut first: Option<Instant> = None;
            for (t, bytes, dt) in reqs {
                now += Duration::from_micros(dt);
                // Quanta are counted from the first call.
                let origin = *first.get_or_insert(now);
                let start = bw.reserve(names[t], bytes, now);
                prop_assert!(start >= now);
                prop_assert!(start >= last[t], "tenant {} went back in time", t);
                let since = start - origin;
                if start != now {
                    prop_assert_eq!(since.as_nanos() % (10 * MS).as_nanos(), 0);
                }
                last[t] = start;
                granted[t] += bytes;
                *per_quantum.entry((t, since.as_nanos() / (10 * MS).as_nanos())).or_default() += bytes;
            }
            // In one quantum a tenant starts at most a whole budget (its share is never
            // more) plus one request carried in from the quantum before.
            for (&(t, q), &b) in &per_quantum {
                prop_assert!(b <= 10_000 + 30_000, "tenant {} quantum {} started {} bytes", t, q, b);
            }
            let snap = bw.snapshot();
            for t in &snap.tenants {
                let i = names.iter().position(|n| *n == t.tenant).unwrap();
                prop_assert_eq!(t.granted_bytes, granted[i]);
            }
        }
    }
}
