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
//!
//! The engine's parts, one job each: [`hierarchy`] (hosts, servers, partitions, stations,
//! and a plan applied to them), `tenants` (streams, pacing, profilers, prefetch hints),
//! `serve` (one request's path), `evictions` (where victims go), `below` (disks and the
//! hot tier), `observe` (an interval's observations, rows and control step). This module
//! owns the run: the event heap, interval boundaries and the result.

mod below;
mod evictions;
mod hierarchy;
mod observe;
mod serve;
mod tenants;
mod tier;

use crate::scenario::{Pacing, Scenario, Workload};
use crate::stats::{Counters, IntervalRow};
use crate::SimError;
use control::{Controller, Plan, Scheme};
use hierarchy::{Host, Server};
use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;
use tenants::TenantRun;

const BLOCK_MASK: u64 = (1 << 48) - 1;

#[inline]
fn key_of(tenant: usize, block: u64) -> u64 {
    ((tenant as u64) << 48) | (block & BLOCK_MASK)
}

#[inline]
fn tenant_of(key: u64) -> usize {
    (key >> 48) as usize
}

/// Events between two [`Engine::forget_before`] calls (the stations' calendars hold at
/// most about this many periods that have ended).
const FORGET_EVERY: u64 = 1024;

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
    /// Per server, its disk's busy time as of the last interval's end (for the interval's
    /// busy share, [`control::ServerObservation`]).
    disk_busy: Vec<f64>,
    /// While a plan is applied: per server, the dirty blocks its resizes evicted, to be
    /// written back sorted by address once the plan is in place (`evictions`).
    destaging: Option<Vec<Vec<(usize, u64)>>>,
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
        if let Some(a) = scheme.automata.as_mut() {
            // The learners' random choices follow the run's seed.
            a.seed = sc.seed;
        }
        if let Some(pc) = scheme.policy_choice.as_mut() {
            // Start every partition on the scenario's policy when it is a candidate.
            if let Some(k) = pc.candidates.iter().position(|c| *c == sc.eviction) {
                pc.candidates.swap(0, k);
            }
        }
        let controller = Controller::new(topo, scheme.clone()).map_err(SimError::Control)?;
        let plan = controller.initial_plan();
        let hosts = hierarchy::hosts(sc);
        let servers = hierarchy::servers(sc)?;
        let profiled = !matches!(
            scheme.allocation,
            control::Allocation::Alone | control::Allocation::Shared | control::Allocation::Fair
        );
        let mut tenants = Vec::new();
        for i in 0..sc.tenants.len() {
            if only.is_some_and(|o| o != i) {
                tenants.push(None);
                continue;
            }
            tenants.push(Some(TenantRun::new(sc, &scheme, i, profiled)?));
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
            disk_busy: vec![0.0; sc.servers.len()],
            destaging: None,
        };
        e.build_partitions(&plan)?;
        if let Some(w) = &sc.shares {
            e.set_static_shares(w);
        }
        Ok(e)
    }

    /// A variant's static proportions (weights by tenant index): each host's link divides
    /// between its tenants, and each storage server's disk between its tenants (with time
    /// quanta, between its volumes: the tenants of one host), in these ratios.
    fn set_static_shares(&mut self, w: &[f64]) {
        let sc = self.sc;
        let n = sc.tenants.len();
        let normed = |members: &[usize]| {
            let total: f64 = members.iter().map(|&i| w[i]).sum();
            (members.len() >= 2 && total > 0.0).then(|| {
                members
                    .iter()
                    .map(|&i| (i, w[i] / total))
                    .collect::<Vec<_>>()
            })
        };
        for (h, host) in self.hosts.iter_mut().enumerate() {
            let members: Vec<usize> = (0..n).filter(|&i| sc.tenants[i].host == h).collect();
            if let Some(shares) = normed(&members) {
                host.nic
                    .set_scheduler(hierarchy::scheduler(sc, n, &shares, &[]), 0.0);
            }
        }
        for (s, server) in self.servers.iter_mut().enumerate() {
            let mut members: Vec<usize> = (0..n)
                .filter(|&i| sc.tenants[i].servers.contains(&s))
                .collect();
            members.sort_by_key(|&i| sc.tenants[i].host);
            let mut hosts: Vec<usize> = members.iter().map(|&i| sc.tenants[i].host).collect();
            hosts.dedup();
            let volumes: Vec<usize> = members
                .iter()
                .map(|&i| {
                    hosts
                        .iter()
                        .position(|&h| h == sc.tenants[i].host)
                        .unwrap_or(0)
                })
                .collect();
            if let Some(shares) = normed(&members) {
                let volumes = if hosts.len() >= 2 {
                    volumes
                } else {
                    Vec::new()
                };
                server
                    .disk
                    .set_scheduler(hierarchy::scheduler(sc, n, &shares, &volumes), 0.0);
            }
        }
    }

    /// Whether partitions keep the history a policy switch rebuilds from (SOPA).
    fn history(&self) -> bool {
        self.scheme.policy_choice.is_some()
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
}
