//! Tenants: each one's request stream read in batches, its pacing (closed loops, Poisson
//! rates, the trace's timestamps, idle windows, the client's queue depth), its profilers
//! (an LRU curve, SOPA's phantom caches) and counters, and the prefetch hints issued a few
//! of its own requests ahead.
//!
//! Does not own: the event heap and the run loop (`engine`), what a request does in the
//! hierarchy (`serve`).

use super::{key_of, tenant_of, Engine, BLOCK_MASK};
use crate::scenario::{Pacing, Scenario, Workload};
use crate::stats::Counters;
use crate::SimError;
use control::Scheme;
use mrc::profiler::{OnlineProfiler, PhantomCaches};
use policy::dirmap::Hashed;
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use trace::{Op, Request, RequestStream};

/// Requests read from a tenant's stream at a time. Small, so that a batch is still in the
/// core's cache when its requests are served (4,096 requests of 32 bytes, read over some
/// 16,000 events of all tenants, were evicted before use and cost a memory load each).
const REQUEST_BATCH: usize = 128;

/// How far ahead in a tenant's own requests [`Engine::prefetch_ahead`] works, in three
/// stages so none waits for a load: the directory buckets of the request this many ahead
/// (and the profilers' counters), ...
const AHEAD_DIR: usize = 4;
/// ... the policy metadata of its slot when it is resident, this many ahead ...
const AHEAD_SLOT: usize = 2;
/// ... and that slot's neighbours (what a hit or a removal relinks), this many ahead.
const AHEAD_NEIGHBOURS: usize = 1;
/// Blocks of one request prefetched (a long sequential request's first ones).
const PREFETCH_BLOCKS: u64 = 4;

/// One tenant's run: its requests, pacing state, profilers and counters.
pub(super) struct TenantRun {
    pub(super) stream: Box<dyn RequestStream + Send>,
    pub(super) buf: Vec<Request>,
    pub(super) pos: usize,
    pub(super) issued: u64,
    pub(super) first_time: Option<u64>,
    pub(super) last_arrival: f64,
    /// Open loops: when the request the tenant's next event issues was due (it is issued
    /// later when `max_in_flight` requests are outstanding).
    pub(super) due: f64,
    /// Open loops: the completion times (`f64` bits) of the requests still outstanding
    /// when the last one was issued, at most `max_in_flight`, earliest on top.
    pub(super) in_flight: BinaryHeap<Reverse<u64>>,
    pub(super) rng: StdRng,
    pub(super) profiler: Option<OnlineProfiler>,
    pub(super) phantoms: Vec<(String, PhantomCaches)>,
    pub(super) curve_sizes: Vec<u64>,
    pub(super) counters: Counters,
    pub(super) ended: bool,
}

impl TenantRun {
    /// Tenant `i` of `sc` ready to issue its first request; `profiled` when the scheme
    /// allocates from hit-ratio curves.
    pub(super) fn new(
        sc: &Scenario,
        scheme: &Scheme,
        i: usize,
        profiled: bool,
    ) -> Result<TenantRun, SimError> {
        let seed = sc.seed;
        let t = &sc.tenants[i];
        let stream: Box<dyn RequestStream + Send> = match &t.workload {
            Workload::Trace { path, format } => {
                let f = format
                    .as_ref()
                    .map(|f| f.parse::<trace::Format>())
                    .transpose()
                    .map_err(|e| SimError::Trace {
                        tenant: t.name.clone(),
                        error: e,
                    })?;
                let r = trace::open(path, f.as_ref()).map_err(|e| SimError::Trace {
                    tenant: t.name.clone(),
                    error: e,
                })?;
                Box::new(r)
            }
            Workload::Synthetic(spec) => {
                let mut w = trace::synth::parse(spec).map_err(|e| SimError::Trace {
                    tenant: t.name.clone(),
                    error: e,
                })?;
                if sc.reseeded {
                    w = w.with_seed(seed.wrapping_add(i as u64));
                }
                Box::new(trace::Plain(w.into_iter().map(Ok)))
            }
        };
        let reach: u64 =
            sc.hosts[t.host].blocks + t.servers.iter().map(|&s| sc.servers[s].blocks).sum::<u64>();
        let curve_sizes: Vec<u64> = (0..=64u64).map(|k| reach * k / 64).collect::<Vec<_>>();
        let mut curve_sizes = curve_sizes;
        curve_sizes.dedup();
        let mut phantoms = Vec::new();
        if let Some(pc) = &scheme.policy_choice {
            let sizes: Vec<u64> = [16u64, 8, 4, 2]
                .iter()
                .map(|d| (reach / d).max(1))
                .chain([reach * 3 / 4, reach].into_iter().map(|x| x.max(1)))
                .collect();
            for c in &pc.candidates {
                if c != "lru" {
                    let p = PhantomCaches::for_sizes(c, &sizes).map_err(SimError::Profiler)?;
                    phantoms.push((c.clone(), p));
                }
            }
        }
        Ok(TenantRun {
            stream,
            buf: Vec::with_capacity(REQUEST_BATCH),
            pos: 0,
            issued: 0,
            first_time: None,
            last_arrival: t.start,
            due: t.start,
            in_flight: BinaryHeap::new(),
            rng: StdRng::seed_from_u64(seed ^ (0xA5A5 + i as u64)),
            profiler: profiled.then(OnlineProfiler::tenant),
            phantoms,
            curve_sizes,
            counters: Counters::default(),
            ended: false,
        })
    }
}

impl Engine<'_> {
    /// Refills tenant `i`'s buffer; false at the end of its stream.
    fn refill(&mut self, i: usize) -> Result<bool, SimError> {
        let limit = self.sc.tenants[i].requests;
        let rt = self.tenants[i].as_mut().expect("active");
        if rt.pos < rt.buf.len() {
            return Ok(true);
        }
        if rt.ended {
            return Ok(false);
        }
        rt.buf.clear();
        rt.pos = 0;
        loop {
            rt.stream
                .next_batch(&mut rt.buf, REQUEST_BATCH)
                .map_err(|e| SimError::Trace {
                    tenant: self.sc.tenants[i].name.clone(),
                    error: e,
                })?;
            if rt.buf.is_empty() {
                rt.ended = true;
                return Ok(false);
            }
            rt.buf.retain(|r| r.op != Op::Flush);
            if let Some(l) = limit {
                let left = l.saturating_sub(rt.issued) as usize;
                rt.buf.truncate(left);
                if left == 0 {
                    rt.ended = true;
                    return Ok(false);
                }
            }
            rt.issued += rt.buf.len() as u64;
            if !rt.buf.is_empty() {
                return Ok(true);
            }
        }
    }

    pub(super) fn take_request(&mut self, i: usize) -> Result<Option<Request>, SimError> {
        if !self.refill(i)? {
            return Ok(None);
        }
        let rt = self.tenants[i].as_mut().expect("active");
        let r = rt.buf[rt.pos];
        rt.pos += 1;
        Ok(Some(r))
    }

    /// When open-loop tenant `i` issues its request due at `due`: then, unless
    /// `max_in_flight` requests are still outstanding, else when the earliest of them
    /// completes (the client's queue depth; the request's latency counts from `due`).
    pub(super) fn issue_when_due(&mut self, i: usize, due: f64) -> f64 {
        let cap = self.sc.tenants[i].max_in_flight.max(1) as usize;
        let rt = self.tenants[i].as_mut().expect("active");
        rt.due = due;
        while rt
            .in_flight
            .peek()
            .is_some_and(|&Reverse(c)| f64::from_bits(c) <= due)
        {
            rt.in_flight.pop();
        }
        if rt.in_flight.len() < cap {
            return due;
        }
        rt.in_flight
            .pop()
            .map_or(due, |Reverse(earliest)| f64::from_bits(earliest))
    }

    /// The arrival time of tenant `i`'s next request (open loops), or `None` at the end.
    pub(super) fn next_arrival(&mut self, i: usize) -> Result<Option<f64>, SimError> {
        if !self.refill(i)? {
            return Ok(None);
        }
        let t = &self.sc.tenants[i];
        let rt = self.tenants[i].as_mut().expect("active");
        let at = match t.pacing {
            Pacing::Rate(r) => {
                rt.last_arrival
                    + Exp::new(r)
                        .map(|e| e.sample(&mut rt.rng))
                        .unwrap_or(1.0 / r)
            }
            Pacing::Timestamps { speed } => {
                let ts = rt.buf[rt.pos].time_us;
                let first = *rt.first_time.get_or_insert(ts);
                (t.start + ts.saturating_sub(first) as f64 / 1e6 / speed).max(rt.last_arrival)
            }
            Pacing::Depth(_) => rt.last_arrival,
        };
        let at = match (t.idle, t.pacing) {
            (Some((a, b)), Pacing::Timestamps { .. }) if at >= a => at + (b - a),
            (Some((a, b)), _) if at >= a && at < b => b + (at - a),
            _ => at,
        };
        rt.last_arrival = at;
        Ok(Some(at))
    }

    /// Starts loading what tenant `i`'s coming requests will look up, a few of its own
    /// requests ahead ([`AHEAD_DIR`], [`AHEAD_SLOT`], [`AHEAD_NEIGHBOURS`]): the buckets of
    /// its partitions' directories at both levels, the resident slots' policy metadata
    /// and neighbours, and its profilers' counters. The partitions are tables larger than
    /// the core's caches, so each lookup is otherwise a wait for memory; the other
    /// tenants' requests served in between cover the loads. A hint only: it changes no
    /// state, and a request whose partition changes before it is served just finds its
    /// lines cold.
    #[inline]
    pub(super) fn prefetch_ahead(&self, i: usize) {
        let Some(rt) = self.tenants[i].as_ref() else {
            return;
        };
        let spec = &self.sc.tenants[i];
        let bs = self.sc.block_size as u32;
        let host = &self.hosts[spec.host].level;
        let l1 = host.of_tenant[i].map(|p| &host.parts[p].cache);
        let server_part = |t: usize, b: u64| {
            let s = &self.servers[self.sc.tenants[t].server_of(b)].level;
            s.of_tenant[t].map(|p| &s.parts[p].cache)
        };
        if !self.sc.inclusive {
            // Level 1's next victim is demoted to level 2 (`absorb_l1_evictions`).
            if let Some(v) = l1.and_then(|c| c.next_victim_key()) {
                if let Some(c) = server_part(tenant_of(v), v & BLOCK_MASK) {
                    c.prefetch(Hashed::new(v));
                }
            }
        }
        for (stage, ahead) in [AHEAD_DIR, AHEAD_SLOT, AHEAD_NEIGHBOURS]
            .into_iter()
            .enumerate()
        {
            let Some(r) = rt.buf.get(rt.pos + ahead) else {
                continue;
            };
            let (first, count) = r.block_range(bs);
            for b in first..first + count.min(PREFETCH_BLOCKS) {
                let key = key_of(i, b);
                let h = Hashed::new(key);
                let l2 = server_part(i, b);
                for c in l1.into_iter().chain(l2) {
                    match stage {
                        0 => c.prefetch(h),
                        1 => {
                            c.prefetch_slot(h);
                        }
                        _ => {
                            if let Some(slot) = c.prefetch_slot(h) {
                                c.prefetch_neighbours(slot);
                            }
                        }
                    }
                }
                if stage == 0 {
                    if let Some(p) = rt.profiler.as_ref() {
                        p.prefetch_hashed(mrc::profiler::sample_hash(key));
                    }
                }
            }
        }
    }
}
