//! The simulation of one scheme on one scenario: tenants replay their requests through
//! level-1 hosts and level-2 storage servers, devices queue them, and every interval the
//! `control` step re-plans from what was observed.
//!
//! Time advances from request to request: the tenants' next issue times sit in a heap,
//! and each request is carried through the hierarchy when it is issued, reserving time at
//! every station it passes ([`crate::queue`]), so its completion is known at once. Closed
//! loops issue their next request at that completion; open loops (a rate or the trace's
//! timestamps) issue theirs when it is due, or, with `max_in_flight` requests
//! outstanding, when the earliest of them completes (its latency counts from when it was
//! due). Work that nobody waits for —
//! demotions, write-backs of dirty evictions, hot-tier migrations — is reserved on the
//! stations too, so it delays the requests behind it.
//!
//! A request's path: level-1 lookup of each block on its host (hits are served from the
//! host's memory). Blocks that miss go, grouped by the server their stripe lives on,
//! over the network to that server's level-2 partition, then (if they miss there) to the
//! hot tier or the disk, one disk operation per contiguous run; data returns over the
//! server's and the host's links. With exclusive levels a level-2 hit moves the block up
//! (removed from level 2) and every level-1 eviction is demoted to level 2, so the levels
//! act as one LRU stack; with inclusive levels level 2 keeps what it reads. Write policies
//! apply per level (see [`WritePolicy`]). Every cache is a `policy::BlockCache`, the same
//! code as the single-cache simulator and the live node.
//!
//! Each interval the control step gets what the live controller gets from a node: per
//! tenant the requests, writes, block lookups and hits per level, mean and p99 latency,
//! the reads' and the writes' mean latency apart, the reads' service time per level, and
//! one hit-ratio curve per candidate policy (SHARDS for LRU, phantom caches for the rest).

use crate::device::Device;
use crate::queue::{Scheduler, Station};
use crate::scenario::{Pacing, Scenario, Workload, WritePolicy};
use crate::stats::{Counters, IntervalRow, Served};
use crate::SimError;
use control::{
    Controller, Layout, Observations, Plan, PolicyCurve, Scheme, TenantObservation, TierObservation,
};
use mrc::profiler::{OnlineProfiler, PhantomCaches};
use policy::dirmap::Hashed;
use policy::{Access, BlockCache, EvictionPolicy};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;
use trace::{Op, Request, RequestStream};

const BLOCK_MASK: u64 = (1 << 48) - 1;

/// Bytes per network transfer when a resize sends level-1 victims down (the live node
/// batches its demotions up to 1 MiB per request).
const RESIZE_BATCH: u64 = 1 << 20;

#[inline]
fn key_of(tenant: usize, block: u64) -> u64 {
    ((tenant as u64) << 48) | (block & BLOCK_MASK)
}

#[inline]
fn tenant_of(key: u64) -> usize {
    (key >> 48) as usize
}

/// Requests read from a tenant's stream at a time. Small, so that a batch is still in the
/// core's cache when its requests are served (4,096 requests of 32 bytes, read over some
/// 16,000 events of all tenants, were evicted before use and cost a memory load each).
const REQUEST_BATCH: usize = 128;

/// Events between two [`Engine::forget_before`] calls (the stations' calendars hold at
/// most about this many periods that have ended).
const FORGET_EVERY: u64 = 1024;

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

/// A cache partition with the dirty bit of each slot.
struct Part {
    cache: BlockCache<Box<dyn EvictionPolicy>>,
    dirty: Vec<bool>,
    policy: String,
}

impl Part {
    fn new(capacity: u64, policy: &str, history: bool) -> Result<Part, SimError> {
        let p = policy::build(policy).map_err(|e| SimError::Plan(e.to_string()))?;
        let mut cache = BlockCache::new(capacity as usize, p);
        if history {
            cache = cache.with_history();
        }
        Ok(Part {
            cache,
            dirty: Vec::new(),
            policy: policy.into(),
        })
    }

    /// Accesses `key`; evicted `(key, dirty)` pairs are appended to `out`.
    #[inline]
    fn access(&mut self, key: u64, out: &mut Vec<(u64, bool)>) -> Access {
        let dirty = &mut self.dirty;
        let a = self.cache.access(key, |k, s| {
            let d = dirty.get(s as usize).copied().unwrap_or(false);
            if d {
                dirty[s as usize] = false;
            }
            out.push((k, d));
        });
        if let Access::Inserted(s) = a {
            self.set_dirty(s, false);
        }
        a
    }

    #[inline]
    fn set_dirty(&mut self, slot: u32, d: bool) {
        let s = slot as usize;
        if s >= self.dirty.len() {
            self.dirty.resize(s + 1, false);
        }
        self.dirty[s] = d;
    }

    /// Removes `key`; returns whether it was there and dirty.
    fn take(&mut self, key: u64) -> Option<bool> {
        let s = self.cache.remove(key)? as usize;
        let d = self.dirty.get(s).copied().unwrap_or(false);
        if d {
            self.dirty[s] = false;
        }
        Some(d)
    }

    fn resize(&mut self, capacity: u64, out: &mut Vec<(u64, bool)>) {
        let dirty = &mut self.dirty;
        self.cache.resize(capacity as usize, |k, s| {
            let d = dirty.get(s as usize).copied().unwrap_or(false);
            if d {
                dirty[s as usize] = false;
            }
            out.push((k, d))
        });
    }

    /// Resident blocks and how many of them are dirty (a freed slot's bit is cleared when
    /// its block leaves, so only resident blocks count).
    fn dirty_count(&self) -> (u64, u64) {
        let dirty = self.dirty.iter().filter(|&&d| d).count() as u64;
        (self.cache.len() as u64, dirty)
    }

    fn switch(&mut self, policy: &str) -> Result<(), SimError> {
        if self.policy != policy {
            let p = policy::build(policy).map_err(|e| SimError::Plan(e.to_string()))?;
            self.cache.switch_policy(p);
            self.policy = policy.into();
        }
        Ok(())
    }
}

/// One node's partitions: which part each tenant uses.
struct Level {
    parts: Vec<Part>,
    of_tenant: Vec<Option<usize>>,
}

struct Tier {
    cache: BlockCache<Box<dyn EvictionPolicy>>,
    dev: Station,
    chunk_blocks: u64,
    hits: u64,
    migrations: u64,
    /// Per tenant, whether its blocks may be placed (SANCACHE boosts selected volumes).
    volumes: Option<Vec<bool>>,
    /// The admission spec the scenario configured.
    admission: String,
    /// The controller's threshold in force (`plan.boost`), once one was applied.
    threshold: Option<u32>,
}

struct Host {
    level: Level,
    ram: Station,
    nic: Station,
}

struct Server {
    level: Level,
    ram: Station,
    nic: Station,
    disk: Station,
    tier: Option<Tier>,
}

struct TenantRun {
    stream: Box<dyn RequestStream + Send>,
    buf: Vec<Request>,
    pos: usize,
    issued: u64,
    first_time: Option<u64>,
    last_arrival: f64,
    /// Open loops: when the request the tenant's next event issues was due (it is issued
    /// later when `max_in_flight` requests are outstanding).
    due: f64,
    /// Open loops: the completion times (`f64` bits) of the requests still outstanding
    /// when the last one was issued, at most `max_in_flight`, earliest on top.
    in_flight: BinaryHeap<Reverse<u64>>,
    rng: StdRng,
    profiler: Option<OnlineProfiler>,
    phantoms: Vec<(String, PhantomCaches)>,
    curve_sizes: Vec<u64>,
    counters: Counters,
    ended: bool,
}

/// What one engine run produced.
pub struct EngineResult {
    /// Per interval, per tenant counters (index: interval, then tenant).
    pub intervals: Vec<Vec<Counters>>,
    /// Per interval: end time and the rows (sizes, targets, reasons).
    pub rows: Vec<IntervalRow>,
    /// The plans, one per interval boundary.
    pub plans: Vec<Plan>,
    /// Requests processed.
    pub requests: u64,
    /// Simulated seconds.
    pub seconds: f64,
}

/// One scheme's simulation (of all tenants, or of one alone).
pub struct Engine<'a> {
    sc: &'a Scenario,
    scheme: Scheme,
    controller: Controller,
    plan: Plan,
    hosts: Vec<Host>,
    servers: Vec<Server>,
    tenants: Vec<Option<TenantRun>>,
    evicted: Vec<(u64, bool)>,
    evicted2: Vec<(u64, bool)>,
    misses: Vec<Vec<u64>>,
    need: Vec<Vec<u64>>,
    scratch: Vec<u64>,
    net_latency: f64,
}

impl<'a> Engine<'a> {
    /// An engine for `scheme`; with `only`, just that tenant issues requests.
    pub fn new(
        sc: &'a Scenario,
        scheme: Scheme,
        only: Option<usize>,
    ) -> Result<Engine<'a>, SimError> {
        let topo = sc.topology(&[]);
        let mut scheme = scheme;
        if let (Some(pc), Some(c)) = (scheme.policy_choice.as_mut(), sc.candidates.as_ref()) {
            pc.candidates = c.clone();
        }
        if let Some(pc) = scheme.policy_choice.as_mut() {
            // Start every partition on the scenario's policy when it is a candidate.
            if let Some(k) = pc.candidates.iter().position(|c| *c == sc.eviction) {
                pc.candidates.swap(0, k);
            }
        }
        let controller =
            Controller::new(topo, scheme.clone()).map_err(|e| SimError::Plan(e.to_string()))?;
        let plan = controller.initial_plan();
        let seed = sc.seed;
        let mk = |spec, k: u64| {
            Station::new(Device::new(
                spec,
                seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ))
        };
        let hosts = (0..sc.hosts.len())
            .map(|h| Host {
                level: Level {
                    parts: Vec::new(),
                    of_tenant: vec![None; sc.tenants.len()],
                },
                ram: mk(sc.ram, 1 + h as u64),
                nic: mk(sc.network, 1000 + h as u64),
            })
            .collect();
        let mut servers = Vec::new();
        for (s, spec) in sc.servers.iter().enumerate() {
            let tier = match &spec.hot_tier {
                None => None,
                Some(t) => {
                    let adm = policy::admission::build_admission(&t.admission)
                        .map_err(|e| SimError::Plan(e.to_string()))?;
                    let lru = policy::build("lru").map_err(|e| SimError::Plan(e.to_string()))?;
                    Some(Tier {
                        cache: BlockCache::new(t.chunks as usize, lru).with_admission(adm),
                        dev: mk(t.device, 3000 + s as u64),
                        chunk_blocks: t.chunk_blocks,
                        hits: 0,
                        migrations: 0,
                        volumes: t
                            .volumes
                            .as_ref()
                            .map(|v| (0..sc.tenants.len()).map(|i| v.contains(&i)).collect()),
                        admission: t.admission.clone(),
                        threshold: None,
                    })
                }
            };
            servers.push(Server {
                level: Level {
                    parts: Vec::new(),
                    of_tenant: vec![None; sc.tenants.len()],
                },
                ram: mk(sc.ram, 2000 + s as u64),
                nic: mk(sc.network, 4000 + s as u64),
                disk: mk(spec.disk, 5000 + s as u64),
                tier,
            });
        }
        let profiled = !matches!(
            scheme.allocation,
            control::Allocation::Alone | control::Allocation::Shared | control::Allocation::Fair
        );
        let mut tenants = Vec::new();
        for (i, t) in sc.tenants.iter().enumerate() {
            if only.is_some_and(|o| o != i) {
                tenants.push(None);
                continue;
            }
            let stream: Box<dyn RequestStream + Send> = match &t.workload {
                Workload::Trace { path, format } => {
                    let f = format
                        .as_ref()
                        .map(|f| f.parse::<trace::Format>())
                        .transpose()
                        .map_err(|e| SimError::Trace {
                            tenant: t.name.clone(),
                            reason: e.to_string(),
                        })?;
                    let r = trace::open(path, f.as_ref()).map_err(|e| SimError::Trace {
                        tenant: t.name.clone(),
                        reason: e.to_string(),
                    })?;
                    Box::new(r)
                }
                Workload::Synthetic(spec) => {
                    let mut w = trace::synth::parse(spec).map_err(|e| SimError::Trace {
                        tenant: t.name.clone(),
                        reason: e.to_string(),
                    })?;
                    if sc.reseeded {
                        w = w.with_seed(seed.wrapping_add(i as u64));
                    }
                    Box::new(trace::Plain(w.into_iter().map(Ok)))
                }
            };
            let reach: u64 = sc.hosts[t.host].blocks
                + t.servers.iter().map(|&s| sc.servers[s].blocks).sum::<u64>();
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
                        let p = PhantomCaches::for_sizes(c, &sizes)
                            .map_err(|e| SimError::Plan(e.to_string()))?;
                        phantoms.push((c.clone(), p));
                    }
                }
            }
            tenants.push(Some(TenantRun {
                stream,
                buf: Vec::with_capacity(REQUEST_BATCH),
                pos: 0,
                issued: 0,
                first_time: None,
                last_arrival: t.start,
                due: t.start,
                in_flight: BinaryHeap::new(),
                rng: StdRng::seed_from_u64(seed ^ (0xA5A5 + i as u64)),
                profiler: profiled.then(|| OnlineProfiler::new(8192, 200_000)),
                phantoms,
                curve_sizes,
                counters: Counters::default(),
                ended: false,
            }));
        }
        let net_latency = match sc.network {
            crate::device::DeviceSpec::Net { latency_us, .. } => latency_us * 1e-6,
            other => other.expected(0),
        };
        let mut e = Engine {
            sc,
            scheme,
            controller,
            plan: plan.clone(),
            hosts,
            servers,
            tenants,
            evicted: Vec::new(),
            evicted2: Vec::new(),
            misses: vec![Vec::new(); sc.servers.len()],
            need: vec![Vec::new(); sc.servers.len()],
            scratch: Vec::new(),
            net_latency,
        };
        e.build_partitions(&plan)?;
        if let Some(w) = &sc.shares {
            // A variant's static proportions, at every storage server's disk.
            for (s, server) in e.servers.iter_mut().enumerate() {
                let members: Vec<usize> = (0..sc.tenants.len())
                    .filter(|&i| sc.tenants[i].servers.contains(&s))
                    .collect();
                let total: f64 = members.iter().map(|&i| w[i]).sum();
                if members.len() >= 2 && total > 0.0 {
                    let shares = members
                        .iter()
                        .map(|&i| (i, w[i] / total))
                        .collect::<Vec<_>>();
                    server
                        .disk
                        .set_scheduler(scheduler(sc, sc.tenants.len(), &shares), 0.0);
                }
            }
        }
        Ok(e)
    }

    fn history(&self) -> bool {
        self.scheme.policy_choice.is_some()
    }

    fn build_partitions(&mut self, plan: &Plan) -> Result<(), SimError> {
        let sc = self.sc;
        let hist = self.history();
        let chooses = self.scheme.policy_choice.is_some();
        let active = |i: usize| self.tenants[i].is_some();
        for (h, host) in self.hosts.iter_mut().enumerate() {
            match plan.layout {
                Layout::Shared => {
                    host.level
                        .parts
                        .push(Part::new(sc.hosts[h].blocks, &sc.eviction, hist)?);
                    for (i, t) in sc.tenants.iter().enumerate() {
                        if t.host == h {
                            host.level.of_tenant[i] = Some(0);
                        }
                    }
                }
                Layout::Partitioned | Layout::Alone => {
                    for (i, tp) in plan.tenants.iter().enumerate() {
                        if tp.l1.node == h && active(i) {
                            host.level.of_tenant[i] = Some(host.level.parts.len());
                            host.level.parts.push(Part::new(
                                tp.l1.size,
                                running_policy(sc, chooses, tp),
                                hist,
                            )?);
                        }
                    }
                }
            }
        }
        for (s, server) in self.servers.iter_mut().enumerate() {
            match plan.layout {
                Layout::Shared => {
                    server
                        .level
                        .parts
                        .push(Part::new(sc.servers[s].blocks, &sc.eviction, hist)?);
                    for (i, t) in sc.tenants.iter().enumerate() {
                        if t.servers.contains(&s) {
                            server.level.of_tenant[i] = Some(0);
                        }
                    }
                }
                Layout::Partitioned | Layout::Alone => {
                    for (i, tp) in plan.tenants.iter().enumerate() {
                        for p in tp.l2.iter().filter(|p| p.node == s) {
                            if active(i) {
                                server.level.of_tenant[i] = Some(server.level.parts.len());
                                server.level.parts.push(Part::new(
                                    p.size,
                                    running_policy(sc, chooses, tp),
                                    hist,
                                )?);
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Applies a new plan: resizes, switches policies, sets bandwidth shares.
    fn apply(&mut self, plan: &Plan, now: f64) -> Result<(), SimError> {
        let chooses = self.scheme.policy_choice.is_some();
        if plan.layout == Layout::Partitioned {
            for (i, tp) in plan.tenants.iter().enumerate() {
                let policy = running_policy(self.sc, chooses, tp);
                if self.tenants[i].is_none() {
                    continue;
                }
                let h = tp.l1.node;
                if let Some(k) = self.hosts[h].level.of_tenant[i] {
                    let mut ev = std::mem::take(&mut self.evicted);
                    let part = &mut self.hosts[h].level.parts[k];
                    part.switch(policy)?;
                    part.resize(tp.l1.size, &mut ev);
                    self.evicted = ev;
                    self.absorb_resize_evictions(now);
                }
                for p in &tp.l2 {
                    if let Some(k) = self.servers[p.node].level.of_tenant[i] {
                        let mut ev = std::mem::take(&mut self.evicted2);
                        let part = &mut self.servers[p.node].level.parts[k];
                        part.switch(policy)?;
                        part.resize(p.size, &mut ev);
                        self.evicted2 = ev;
                        self.absorb_l2_evictions(p.node, now);
                    }
                }
            }
        }
        for b in &plan.boost {
            let Some(tier) = self.servers.get_mut(b.server).and_then(|s| s.tier.as_mut()) else {
                continue;
            };
            if tier.threshold != Some(b.threshold) {
                let spec = controlled_admission(&tier.admission, b.threshold);
                let adm = policy::admission::build_admission(&spec)
                    .map_err(|e| SimError::Plan(format!("hot tier `{spec}`: {e}")))?;
                let lru = policy::build("lru").map_err(|e| SimError::Plan(e.to_string()))?;
                let cache = std::mem::replace(&mut tier.cache, BlockCache::new(1, lru));
                tier.cache = cache.with_admission(adm);
                tier.threshold = Some(b.threshold);
            }
        }
        for r in &plan.bandwidth {
            let sched = scheduler(self.sc, self.sc.tenants.len(), &r.shares);
            match r.level.as_str() {
                "server" => self.servers[r.node].disk.set_scheduler(sched, now),
                _ => self.hosts[r.node].nic.set_scheduler(sched, now),
            }
        }
        Ok(())
    }

    /// Runs to the end of every tenant's requests (or the scenario's duration); `progress`
    /// gets the fraction done when it is known (by duration or request limits).
    pub fn run(mut self, progress: &mut dyn FnMut(f64)) -> Result<EngineResult, SimError> {
        let sc = self.sc;
        let mut heap: BinaryHeap<Reverse<(u64, u32, u32)>> = BinaryHeap::new();
        for i in 0..sc.tenants.len() {
            if self.tenants[i].is_none() {
                continue;
            }
            match sc.tenants[i].pacing {
                Pacing::Depth(d) => {
                    for slot in 0..d {
                        heap.push(Reverse((sc.tenants[i].start.to_bits(), i as u32, slot)));
                    }
                }
                _ => {
                    if let Some(t) = self.next_arrival(i)? {
                        let at = self.issue_when_due(i, t);
                        heap.push(Reverse((at.to_bits(), i as u32, 0)));
                    }
                }
            }
        }
        let interval = sc.interval;
        let mut boundary = interval;
        let mut intervals: Vec<Vec<Counters>> = Vec::new();
        let mut rows = Vec::new();
        let mut plans = Vec::new();
        let mut total = 0u64;
        let mut now = 0.0f64;
        let expected: Option<u64> = sc
            .tenants
            .iter()
            .enumerate()
            .filter(|(i, _)| self.tenants[*i].is_some())
            .map(|(_, t)| {
                let synth = match &t.workload {
                    Workload::Synthetic(spec) => {
                        trace::synth::parse(spec).ok().map(|w| w.requests())
                    }
                    Workload::Trace { .. } => None,
                };
                match (t.requests, synth) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .sum();
        // The earliest event stays at the top while its request is served and is then
        // replaced by the tenant's next one in place (one sift down, not a pop and a
        // push). Keys are unique (tenant, slot), so the order of events is the same.
        while let Some(mut top) = heap.peek_mut() {
            let Reverse((tb, i, slot)) = *top;
            let t = f64::from_bits(tb);
            if sc.duration.is_some_and(|d| t >= d) {
                break;
            }
            while t >= boundary {
                self.close_interval(boundary, interval, &mut intervals, &mut rows, &mut plans)?;
                boundary += interval;
                if let Some(d) = sc.duration {
                    progress((boundary / d).min(1.0));
                }
            }
            now = t;
            let i = i as usize;
            let req = match sc.tenants[i].pacing {
                Pacing::Depth(_) => self.take_request(i)?,
                _ => {
                    let rt = self.tenants[i].as_mut().expect("active");
                    let r = rt.buf[rt.pos];
                    rt.pos += 1;
                    Some(r)
                }
            };
            let Some(req) = req else {
                PeekMut::pop(top);
                continue;
            };
            self.prefetch_ahead(i);
            let due = match sc.tenants[i].pacing {
                Pacing::Depth(_) => t,
                _ => self.tenants[i].as_ref().expect("active").due,
            };
            let done = self.serve(i, t, due, &req);
            total += 1;
            if total % FORGET_EVERY == 0 {
                self.forget_before(t);
            }
            if total % 262_144 == 0 {
                if let Some(n) = expected {
                    progress((total as f64 / n as f64).min(1.0));
                }
            }
            match sc.tenants[i].pacing {
                Pacing::Depth(_) => {
                    let mut next = done.max(t);
                    if let Some((a, b)) = sc.tenants[i].idle {
                        if next >= a && next < b {
                            next = b + (next - a).min(sc.interval);
                        }
                    }
                    *top = Reverse((next.to_bits(), i as u32, slot));
                }
                _ => match self.next_arrival(i)? {
                    Some(next) => {
                        let rt = self.tenants[i].as_mut().expect("active");
                        rt.in_flight.push(Reverse(done.max(t).to_bits()));
                        let at = self.issue_when_due(i, next);
                        *top = Reverse((at.to_bits(), i as u32, 0));
                    }
                    None => {
                        PeekMut::pop(top);
                    }
                },
            }
        }
        // The last, partial interval is reported, without a control step after it.
        let end = sc
            .duration
            .map_or(now, |d| d.min(now.max(boundary - interval)));
        let part_len = (end - (boundary - interval)).max(0.0);
        let pending = self
            .tenants
            .iter()
            .flatten()
            .any(|r| r.counters.l1_lookups > 0);
        if part_len > 0.0 || pending || intervals.is_empty() {
            let mut row = Vec::new();
            for i in 0..sc.tenants.len() {
                row.push(
                    self.tenants[i]
                        .as_mut()
                        .map(|r| std::mem::take(&mut r.counters))
                        .unwrap_or_default(),
                );
            }
            self.rows_for(
                intervals.len() as u64,
                boundary - interval + part_len.max(1e-9),
                part_len.max(1e-9),
                &row,
                &mut rows,
            );
            row.iter_mut().for_each(Counters::seal);
            intervals.push(row);
        }
        progress(1.0);
        Ok(EngineResult {
            intervals,
            rows,
            plans,
            requests: total,
            seconds: now,
        })
    }

    fn close_interval(
        &mut self,
        boundary: f64,
        len: f64,
        intervals: &mut Vec<Vec<Counters>>,
        rows: &mut Vec<IntervalRow>,
        plans: &mut Vec<Plan>,
    ) -> Result<(), SimError> {
        let sc = self.sc;
        let mut obs = Observations {
            seconds: len,
            tenants: Vec::new(),
            tiers: Vec::new(),
        };
        let mut counters = Vec::new();
        for i in 0..sc.tenants.len() {
            let Some(rt) = self.tenants[i].as_mut() else {
                obs.tenants.push(TenantObservation::default());
                counters.push(Counters::default());
                continue;
            };
            let c = std::mem::take(&mut rt.counters);
            let mut curves = Vec::new();
            if let Some(p) = rt.profiler.as_mut() {
                if p.accesses() > 0 {
                    curves.push(PolicyCurve {
                        policy: "lru".into(),
                        curve: p.windowed_curve(&rt.curve_sizes),
                    });
                }
            }
            for (name, ph) in &mut rt.phantoms {
                if ph.sampled() > 0 {
                    curves.push(PolicyCurve {
                        policy: name.clone(),
                        curve: ph.curve(),
                    });
                }
            }
            let split = c.read_write_ms();
            // The share of its resident blocks (both levels) that are dirty, as a node's
            // cache statistics count them.
            let (mut resident, mut dirty) = (0u64, 0u64);
            let spec = &sc.tenants[i];
            let levels = std::iter::once(&self.hosts[spec.host].level)
                .chain(spec.servers.iter().map(|&s| &self.servers[s].level));
            for level in levels {
                if let Some(p) = level.of_tenant[i] {
                    let (r, d) = level.parts[p].dirty_count();
                    resident += r;
                    dirty += d;
                }
            }
            obs.tenants.push(TenantObservation {
                dirty_share: (resident > 0).then(|| dirty as f64 / resident as f64),
                requests: c.requests,
                bytes: c.bytes,
                l1: control::LevelCount {
                    lookups: c.l1_lookups,
                    hits: c.l1_hits,
                },
                l2: control::LevelCount {
                    lookups: c.l2_lookups,
                    hits: c.l2_hits,
                },
                mean_latency_ms: c.mean_ms(),
                p99_latency_ms: c.p99_ms(),
                service: control::ObservedService {
                    l1_hit_ms: c.kind_ms(Served::Level1),
                    l2_hit_ms: c.kind_ms(Served::Level2),
                    miss_ms: c.kind_ms(Served::Disk),
                },
                curves,
                writes: c.writes,
                read_latency_ms: split.map(|(r, _)| r),
                write_latency_ms: split.map(|(_, w)| w),
                write_back: sc.l1_write == WritePolicy::WriteBack,
                latency_quantiles: c.quantiles(),
                miss_quantiles: c.miss_quantiles(),
            });
            counters.push(c);
        }
        for s in &mut self.servers {
            let (hits, migrations) = s.tier.as_mut().map_or((0, 0), |t| {
                let r = (t.hits, t.migrations);
                t.hits = 0;
                t.migrations = 0;
                r
            });
            obs.tiers.push(TierObservation { hits, migrations });
        }
        self.rows_for(intervals.len() as u64, boundary, len, &counters, rows);
        counters.iter_mut().for_each(Counters::seal);
        intervals.push(counters);
        let plan = self
            .controller
            .step(boundary, &obs)
            .map_err(|e| SimError::Plan(e.to_string()))?;
        self.apply(&plan, boundary)?;
        self.plan = plan.clone();
        plans.push(plan);
        Ok(())
    }

    fn rows_for(
        &self,
        k: u64,
        end: f64,
        len: f64,
        counters: &[Counters],
        rows: &mut Vec<IntervalRow>,
    ) {
        for (i, c) in counters.iter().enumerate() {
            if self.tenants[i].is_none() {
                continue;
            }
            let tp = &self.plan.tenants[i];
            let split = c.read_write_ms();
            rows.push(IntervalRow {
                scheme: self.scheme.name.clone(),
                interval: k,
                time_s: end,
                tenant: self.sc.tenants[i].name.clone(),
                requests: c.requests,
                iops: c.requests as f64 / len,
                mean_latency_ms: c.mean_ms(),
                p99_latency_ms: c.p99_ms(),
                l1_hit_ratio: c.l1_hit_ratio(),
                l2_hit_ratio: c.l2_hit_ratio(),
                l1_size: tp.l1.size,
                l2_size: tp.l2_total(),
                target_ms: tp.target_latency_ms,
                slo_met: None,
                eviction: running_policy(self.sc, self.scheme.policy_choice.is_some(), tp)
                    .to_string(),
                l1_reason: tp.l1.reason.to_string(),
                l2_reason: tp
                    .l2
                    .first()
                    .map_or(String::new(), |p| p.reason.to_string()),
                deviance: None,
                migrations: c.migrations,
                disk_blocks: c.disk_blocks,
                writes: c.writes,
                read_latency_ms: split.map(|(r, _)| r),
                write_latency_ms: split.map(|(_, w)| w),
            });
        }
    }

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
                    reason: e.to_string(),
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

    fn take_request(&mut self, i: usize) -> Result<Option<Request>, SimError> {
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
    fn issue_when_due(&mut self, i: usize, due: f64) -> f64 {
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
    fn next_arrival(&mut self, i: usize) -> Result<Option<f64>, SimError> {
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

    /// Every FIFO station forgets the busy periods that ended before `now`, the time of
    /// the event being served: nothing booked from here on arrives earlier
    /// ([`Station::forget_before`]).
    fn forget_before(&mut self, now: f64) {
        for h in &mut self.hosts {
            h.ram.forget_before(now);
            h.nic.forget_before(now);
        }
        for s in &mut self.servers {
            s.ram.forget_before(now);
            s.nic.forget_before(now);
            s.disk.forget_before(now);
            if let Some(t) = s.tier.as_mut() {
                t.dev.forget_before(now);
            }
        }
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
    fn prefetch_ahead(&self, i: usize) {
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

    /// Carries one request, issued at `now` and due at `due` (its latency counts from
    /// then), through the hierarchy; returns its completion time.
    fn serve(&mut self, i: usize, now: f64, due: f64, req: &Request) -> f64 {
        let sc = self.sc;
        let spec = &sc.tenants[i];
        let bs = sc.block_size;
        let (first, count) = req.block_range(bs as u32);
        if req.op == Op::Trim {
            self.trim(i, first, count);
            return now;
        }
        let write = req.op == Op::Write;
        let bytes = count * bs;
        let exclusive = !sc.inclusive;
        {
            let rt = self.tenants[i].as_mut().expect("active");
            rt.counters.bytes += req.len as u64;
            if rt.profiler.is_some() || !rt.phantoms.is_empty() {
                // One sampling hash per block feeds the profiler and every phantom set.
                for b in first..first + count {
                    let k = key_of(i, b);
                    let h = mrc::profiler::sample_hash(k);
                    if let Some(p) = rt.profiler.as_mut() {
                        p.record_hashed(k, h);
                    }
                    for (_, ph) in rt.phantoms.iter_mut() {
                        ph.record_hashed(k, h);
                    }
                }
            }
        }
        let h = spec.host;
        let n = spec.servers.len() as u64;
        for m in self.misses.iter_mut().chain(self.need.iter_mut()) {
            m.clear();
        }
        let mut l1_hits = 0u64;
        let mut l2_lookups = 0u64;
        let mut l2_hits = 0u64;
        let mut lower_writes = false;
        // Level 1, block by block. With exclusive levels each miss is looked up in level 2
        // at once (a hit leaves level 2) and level 1's victims are demoted right after, in
        // the order one LRU stack over both levels would see them.
        let part_idx = self.hosts[h].level.of_tenant[i];
        let keeps_writes = sc.l1_write == WritePolicy::WriteBack;
        for b in first..first + count {
            let key = key_of(i, b);
            let k = spec.stripe_of(b);
            let (slot, hit) = match part_idx {
                None => (None, false),
                Some(p) => {
                    let part = &mut self.hosts[h].level.parts[p];
                    if write && sc.l1_write == WritePolicy::WriteAround {
                        part.take(key);
                        (None, false)
                    } else {
                        match part.access(key, &mut self.evicted) {
                            Access::Hit(s) => (Some(s), true),
                            Access::Inserted(s) => (Some(s), false),
                            Access::Bypassed => (None, false),
                        }
                    }
                }
            };
            if hit {
                l1_hits += 1;
            }
            if write {
                if keeps_writes {
                    if let (Some(s), Some(p)) = (slot, part_idx) {
                        self.hosts[h].level.parts[p].set_dirty(s, true);
                    }
                } else {
                    // Write-through or write-around: the data goes down now.
                    lower_writes = true;
                    self.misses[k].push(b);
                }
            } else if !hit {
                self.misses[k].push(b);
            }
            if exclusive && !hit && (keeps_writes || !write) {
                l2_lookups += 1;
                let s = spec.servers[k];
                let found = match self.servers[s].level.of_tenant[i] {
                    None => None,
                    Some(p) => {
                        let pt = &mut self.servers[s].level.parts[p];
                        if slot.is_some() {
                            pt.take(key)
                        } else {
                            // Level 1 holds nothing for this tenant: level 2 is its cache.
                            match pt.access(key, &mut self.evicted2) {
                                Access::Hit(_) => Some(false),
                                _ => None,
                            }
                        }
                    }
                };
                match found {
                    Some(dirty) => {
                        l2_hits += 1;
                        if let (true, Some(s), Some(p)) = (dirty, slot, part_idx) {
                            self.hosts[h].level.parts[p].set_dirty(s, true);
                        }
                    }
                    None if !write => self.need[k].push(b),
                    None => {}
                }
                self.absorb_l2_evictions(s, now);
            }
            self.absorb_l1_evictions(now);
        }
        let mut done = self.hosts[h].ram.serve(0, now, 0, bytes, write);
        let mut served = Served::Level1;
        for (k, &s) in spec.servers.iter().enumerate() {
            if self.misses[k].is_empty() {
                continue;
            }
            let blocks = std::mem::take(&mut self.misses[k]);
            let nbytes = blocks.len() as u64 * bs;
            let at_server = now + self.net_latency;
            let server = &mut self.servers[s];
            let part = server.level.of_tenant[i];
            let mut disk_blocks = std::mem::take(&mut self.scratch);
            disk_blocks.clear();
            if write && lower_writes {
                // Data travels down; level 2 applies its own write policy.
                let t_host = self.hosts[h].nic.serve(i, now, 0, nbytes, true);
                let ready = server.nic.serve(i, t_host, 0, nbytes, true);
                for &b in &blocks {
                    let key = key_of(i, b);
                    if let Some(p) = part {
                        let pt = &mut server.level.parts[p];
                        match sc.l2_write {
                            WritePolicy::WriteAround => {
                                pt.take(key);
                                disk_blocks.push(b);
                            }
                            wp => {
                                if let Access::Hit(slot) | Access::Inserted(slot) =
                                    pt.access(key, &mut self.evicted2)
                                {
                                    pt.set_dirty(slot, wp == WritePolicy::WriteBack);
                                }
                                if wp == WritePolicy::WriteThrough {
                                    disk_blocks.push(b);
                                }
                            }
                        }
                    } else {
                        disk_blocks.push(b);
                    }
                }
                let t_ram = server.ram.serve(0, ready, 0, nbytes, true);
                let t_disk = disk_runs(server, spec, i, &disk_blocks, n, bs, t_ram, true);
                done = done.max(t_disk.max(t_ram));
                served = if disk_blocks.is_empty() {
                    served.max_with(Served::Level2)
                } else {
                    Served::Disk
                };
            } else {
                // Reads. Exclusive levels looked level 2 up already (`need`: the blocks
                // it did not have); inclusive ones look now and keep what they read.
                for &b in &blocks {
                    if exclusive {
                        continue;
                    }
                    let key = key_of(i, b);
                    l2_lookups += 1;
                    let Some(p) = part else {
                        disk_blocks.push(b);
                        continue;
                    };
                    let pt = &mut server.level.parts[p];
                    {
                        match pt.access(key, &mut self.evicted2) {
                            Access::Hit(_) => l2_hits += 1,
                            _ => disk_blocks.push(b),
                        }
                    }
                }
                if exclusive {
                    disk_blocks.extend_from_slice(&self.need[k]);
                }
                let hit_bytes = (blocks.len() - disk_blocks.len()) as u64 * bs;
                let t_ram = server.ram.serve(0, at_server, 0, hit_bytes.max(bs), false);
                let mut t_data = t_ram;
                if !disk_blocks.is_empty() {
                    let before = server
                        .tier
                        .as_ref()
                        .map_or((0, 0), |t| (t.hits, t.migrations));
                    t_data =
                        t_data.max(read_below(server, spec, i, &disk_blocks, n, bs, at_server));
                    let after = server
                        .tier
                        .as_ref()
                        .map_or((0, 0), |t| (t.hits, t.migrations));
                    let rt = self.tenants[i].as_mut().expect("active");
                    let tier_hits = after.0 - before.0;
                    rt.counters.tier_hits += tier_hits;
                    rt.counters.migrations += after.1 - before.1;
                    rt.counters.disk_blocks += disk_blocks.len() as u64 - tier_hits;
                    served = Served::Disk;
                } else {
                    served = served.max_with(Served::Level2);
                }
                let t_out = server.nic.serve(i, t_data, 0, nbytes, false);
                let t_in = self.hosts[h].nic.serve(i, t_out, 0, nbytes, false);
                done = done.max(t_in);
            }
            self.scratch = disk_blocks;
            // Kept for the next request (cleared then), so its buffer is reused.
            self.misses[k] = blocks;
            self.absorb_l2_evictions(s, now);
        }
        self.absorb_l1_evictions(now);
        let rt = self.tenants[i].as_mut().expect("active");
        rt.counters.l1_lookups += count;
        rt.counters.l1_hits += l1_hits;
        rt.counters.l2_lookups += l2_lookups;
        rt.counters.l2_hits += l2_hits;
        rt.counters.record(done - due, write, served);
        done
    }

    /// Drops tenant `i`'s copies of the trimmed blocks at both levels.
    fn trim(&mut self, i: usize, first: u64, count: u64) {
        let spec = &self.sc.tenants[i];
        for b in first..first + count {
            let key = key_of(i, b);
            if let Some(k) = self.hosts[spec.host].level.of_tenant[i] {
                self.hosts[spec.host].level.parts[k].take(key);
            }
            let s = spec.server_of(b);
            if let Some(k) = self.servers[s].level.of_tenant[i] {
                self.servers[s].level.parts[k].take(key);
            }
        }
    }

    /// Level-1 evictions: demoted to level 2 (exclusive), or written down if dirty
    /// (inclusive); level 2 keeps a dirty block dirty only under write-back.
    fn absorb_l1_evictions(&mut self, now: f64) {
        if self.evicted.is_empty() {
            return;
        }
        let sc = self.sc;
        let bs = sc.block_size;
        let mut ev = std::mem::take(&mut self.evicted);
        for &(key, dirty) in &ev {
            let t = tenant_of(key);
            let spec = &sc.tenants[t];
            let block = key & BLOCK_MASK;
            let n = spec.servers.len() as u64;
            let s = spec.server_of(block);
            if sc.inclusive && !dirty {
                continue;
            }
            let t_host = self.hosts[spec.host].nic.serve(t, now, 0, bs, true);
            let arrive = self.servers[s].nic.serve(t, t_host, 0, bs, true);
            let mut to_disk = dirty;
            if let Some(p) = self.servers[s].level.of_tenant[t] {
                let keep = dirty && sc.l2_write == WritePolicy::WriteBack;
                let pt = &mut self.servers[s].level.parts[p];
                if let Access::Hit(slot) | Access::Inserted(slot) =
                    pt.access(key, &mut self.evicted2)
                {
                    pt.set_dirty(slot, keep);
                    to_disk = dirty && !keep;
                }
            }
            if to_disk {
                disk_runs(&mut self.servers[s], spec, t, &[block], n, bs, arrive, true);
            }
            self.absorb_l2_evictions(s, now);
        }
        ev.clear();
        self.evicted = ev;
    }

    /// Level-1 victims of a resize: the same outcome per block as
    /// [`Engine::absorb_l1_evictions`] (demoted to level 2 when levels are exclusive,
    /// written down when dirty), but carried over the network in batches of up to
    /// [`RESIZE_BATCH`] bytes per server, as a node's demotion queue sends them, instead of
    /// one network operation per block. A shrink evicts thousands of blocks at one
    /// instant; one operation each (every operation pays the link's fixed cost) would hold
    /// the links for a tenth of a second and stall every tenant behind them.
    fn absorb_resize_evictions(&mut self, now: f64) {
        if self.evicted.is_empty() {
            return;
        }
        let sc = self.sc;
        let bs = sc.block_size;
        let ev = std::mem::take(&mut self.evicted);
        let mut by_server: Vec<Vec<(u64, bool)>> = vec![Vec::new(); self.servers.len()];
        for &(key, dirty) in &ev {
            if sc.inclusive && !dirty {
                continue;
            }
            let spec = &sc.tenants[tenant_of(key)];
            by_server[spec.server_of(key & BLOCK_MASK)].push((key, dirty));
        }
        let per_batch = (RESIZE_BATCH / bs).max(1) as usize;
        for (s, victims) in by_server.iter().enumerate() {
            for batch in victims.chunks(per_batch) {
                let t = tenant_of(batch[0].0);
                let spec = &sc.tenants[t];
                let n = spec.servers.len() as u64;
                let nbytes = batch.len() as u64 * bs;
                let t_host = self.hosts[spec.host].nic.serve(t, now, 0, nbytes, true);
                let arrive = self.servers[s].nic.serve(t, t_host, 0, nbytes, true);
                for &(key, dirty) in batch {
                    let mut to_disk = dirty;
                    if let Some(p) = self.servers[s].level.of_tenant[t] {
                        let keep = dirty && sc.l2_write == WritePolicy::WriteBack;
                        let pt = &mut self.servers[s].level.parts[p];
                        if let Access::Hit(slot) | Access::Inserted(slot) =
                            pt.access(key, &mut self.evicted2)
                        {
                            pt.set_dirty(slot, keep);
                            to_disk = dirty && !keep;
                        }
                    }
                    if to_disk {
                        let block = key & BLOCK_MASK;
                        disk_runs(&mut self.servers[s], spec, t, &[block], n, bs, arrive, true);
                    }
                    self.absorb_l2_evictions(s, now);
                }
            }
        }
        let mut ev = ev;
        ev.clear();
        self.evicted = ev;
    }

    /// Level-2 evictions: dirty blocks are written to the disk.
    fn absorb_l2_evictions(&mut self, s: usize, now: f64) {
        if self.evicted2.is_empty() {
            return;
        }
        let sc = self.sc;
        let bs = sc.block_size;
        let mut ev = std::mem::take(&mut self.evicted2);
        for &(key, dirty) in &ev {
            if dirty {
                let t = tenant_of(key);
                let spec = &sc.tenants[t];
                let n = spec.servers.len() as u64;
                disk_runs(
                    &mut self.servers[s],
                    spec,
                    t,
                    &[key & BLOCK_MASK],
                    n,
                    bs,
                    now,
                    true,
                );
            }
        }
        ev.clear();
        self.evicted2 = ev;
    }
}

impl Served {
    fn max_with(self, o: Served) -> Served {
        if (o as u8) > (self as u8) {
            o
        } else {
            self
        }
    }
}

/// The hot tier's admission under the controller's threshold (`plan.boost`): the
/// configured rule's kind and period with the plan's threshold. A fixed threshold stays a
/// fixed threshold; MRFU and the tier's own adaptive rule become MRFU with the plan's
/// threshold (the controller's rule replaces the tier's own). Candidates' counts restart
/// when the threshold changes (the admission policy is rebuilt).
fn controlled_admission(configured: &str, threshold: u32) -> String {
    let (name, params) = configured.split_once(':').unwrap_or((configured, ""));
    let name = name.trim().to_ascii_lowercase();
    if name == "threshold" || name == "mfu" {
        return format!("threshold:n={threshold}");
    }
    let mut spec = format!("mrfu:threshold={threshold}");
    for kv in params.split(',') {
        let key = kv.split_once('=').map_or("", |(k, _)| k.trim());
        if matches!(key, "period" | "decay" | "sequential" | "candidates") {
            spec.push(',');
            spec.push_str(kv.trim());
        }
    }
    spec
}

/// The eviction policy a partition of `tp` runs: the plan's when the scheme chooses
/// policies (SOPA), else the scenario's `eviction` (a variant's policy reaches partitioned
/// schemes as it reaches shared caches; `control` plans `lru` when it does not choose).
fn running_policy<'p>(sc: &'p Scenario, chooses: bool, tp: &'p control::TenantPlan) -> &'p str {
    if chooses {
        &tp.eviction
    } else {
        &sc.eviction
    }
}

/// The scheduler that enforces `shares` (`(tenant, proportion)`) among `n` tenants: weighted
/// fair sharing, or time quanta when the scenario sets `sim.quantum`. Classes are tenant
/// indices; tenants not listed get no share (they do not use the resource).
fn scheduler(sc: &Scenario, n: usize, shares: &[(usize, f64)]) -> Scheduler {
    let mut w = vec![0.0; n];
    for &(i, x) in shares {
        if i < n {
            w[i] = x;
        }
    }
    match sc.quantum {
        Some(quantum) => Scheduler::Quanta { quantum, shares: w },
        None => Scheduler::Weighted { weights: w },
    }
}

/// The byte offset on the server's disk of a tenant's block (stripes of `su` blocks
/// dealt round-robin over `n` servers; each tenant in its own region).
fn disk_offset(
    spec: &crate::scenario::TenantSpec,
    tenant: usize,
    n: u64,
    block: u64,
    bs: u64,
) -> u64 {
    let su = spec.stripe_blocks;
    let local = (block / su / n) * su + block % su;
    ((tenant as u64) << 36) + local * bs
}

/// Serves `blocks` (sorted or not) at the disk, one operation per contiguous run; returns
/// the last completion.
#[allow(clippy::too_many_arguments)]
fn disk_runs(
    server: &mut Server,
    spec: &crate::scenario::TenantSpec,
    tenant: usize,
    blocks: &[u64],
    n: u64,
    bs: u64,
    at: f64,
    write: bool,
) -> f64 {
    let class = tenant;
    let mut done = at;
    let mut k = 0;
    while k < blocks.len() {
        let start = disk_offset(spec, tenant, n, blocks[k], bs);
        let mut len = bs;
        while k + 1 < blocks.len() && disk_offset(spec, tenant, n, blocks[k + 1], bs) == start + len
        {
            len += bs;
            k += 1;
        }
        done = done.max(server.disk.serve(class, at, start, len, write));
        k += 1;
    }
    done
}

/// Reads missed blocks from the hot tier or the disk; migrations to the tier are
/// reserved as background work.
#[allow(clippy::too_many_arguments)]
fn read_below(
    server: &mut Server,
    spec: &crate::scenario::TenantSpec,
    tenant: usize,
    blocks: &[u64],
    n: u64,
    bs: u64,
    at: f64,
) -> f64 {
    let boosted = server
        .tier
        .as_ref()
        .is_some_and(|t| t.volumes.as_ref().map_or(true, |v| v[tenant]));
    let (true, Some(tier)) = (boosted, server.tier.as_mut()) else {
        return disk_runs(server, spec, tenant, blocks, n, bs, at, false);
    };
    let mut from_disk = Vec::new();
    let mut done = at;
    let mut migrate = Vec::new();
    let cb = tier.chunk_blocks;
    for &b in blocks {
        let chunk = key_of(tenant, b / cb);
        match tier.cache.access(chunk, |_, _| {}) {
            Access::Hit(_) => {
                tier.hits += 1;
                done = done.max(tier.dev.serve(0, at, 0, bs, false));
            }
            Access::Inserted(_) => {
                tier.migrations += 1;
                migrate.push(b / cb);
                from_disk.push(b);
            }
            Access::Bypassed => from_disk.push(b),
        }
    }
    done = done.max(disk_runs(
        server, spec, tenant, &from_disk, n, bs, at, false,
    ));
    for c in migrate {
        // Copy the whole chunk: read it from the disk, write it to the tier.
        let first = c * cb;
        let chunk_blocks: Vec<u64> = (first..first + cb).collect();
        let t = disk_runs(server, spec, tenant, &chunk_blocks, n, bs, done, false);
        let tier = server.tier.as_mut().expect("tier");
        tier.dev.serve(0, t, first * bs, cb * bs, true);
    }
    done
}
