//! The simulated hierarchy: level-1 hosts and level-2 storage servers, their partitions
//! (one `policy::BlockCache` per tenant, or one shared, with a dirty bit per slot), their
//! stations (memory, network links, disks, the hot tier's device), and how a plan is laid
//! onto them: partitions built and resized, policies switched, hot-tier thresholds and
//! bandwidth shares set.
//!
//! Does not own: what a request does on its way through (`serve`), where evicted blocks
//! go (`evictions`), the disks' and the hot tier's reads (`below`), tenants (`tenants`).

use super::tier::Tier;
use super::Engine;
use crate::device::Device;
use crate::queue::{Scheduler, Station};
use crate::scenario::Scenario;
use crate::SimError;
use control::{Layout, Plan};
use policy::{Access, BlockCache, EvictionPolicy};

/// A cache partition with the dirty bit of each slot.
pub(super) struct Part {
    pub(super) cache: BlockCache<Box<dyn EvictionPolicy>>,
    pub(super) dirty: Vec<bool>,
    pub(super) policy: String,
}

impl Part {
    pub(super) fn new(capacity: u64, policy: &str, history: bool) -> Result<Part, SimError> {
        let p = policy::build(policy).map_err(SimError::Policy)?;
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
    pub(super) fn access(&mut self, key: u64, out: &mut Vec<(u64, bool)>) -> Access {
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
    pub(super) fn set_dirty(&mut self, slot: u32, d: bool) {
        let s = slot as usize;
        if s >= self.dirty.len() {
            self.dirty.resize(s + 1, false);
        }
        self.dirty[s] = d;
    }

    /// Removes `key`; returns whether it was there and dirty.
    pub(super) fn take(&mut self, key: u64) -> Option<bool> {
        let s = self.cache.remove(key)? as usize;
        let d = self.dirty.get(s).copied().unwrap_or(false);
        if d {
            self.dirty[s] = false;
        }
        Some(d)
    }

    pub(super) fn resize(&mut self, capacity: u64, out: &mut Vec<(u64, bool)>) {
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
    pub(super) fn dirty_count(&self) -> (u64, u64) {
        let dirty = self.dirty.iter().filter(|&&d| d).count() as u64;
        (self.cache.len() as u64, dirty)
    }

    pub(super) fn switch(&mut self, policy: &str) -> Result<(), SimError> {
        if self.policy != policy {
            let p = policy::build(policy).map_err(SimError::Policy)?;
            self.cache.switch_policy(p);
            self.policy = policy.into();
        }
        Ok(())
    }
}

/// One node's partitions: which part each tenant uses.
pub(super) struct Level {
    pub(super) parts: Vec<Part>,
    pub(super) of_tenant: Vec<Option<usize>>,
}

/// A level-1 host: its partitions, memory and network link.
pub(super) struct Host {
    pub(super) level: Level,
    pub(super) ram: Station,
    pub(super) nic: Station,
}

/// A level-2 storage server: its partitions, memory, network link, disk and hot tier.
pub(super) struct Server {
    pub(super) level: Level,
    pub(super) ram: Station,
    pub(super) nic: Station,
    pub(super) disk: Station,
    pub(super) tier: Option<Tier>,
}

/// The level-1 hosts, one partition table each (filled by [`Engine::build_partitions`]).
pub(super) fn hosts(sc: &Scenario) -> Vec<Host> {
    (0..sc.hosts.len())
        .map(|h| Host {
            level: Level {
                parts: Vec::new(),
                of_tenant: vec![None; sc.tenants.len()],
            },
            ram: station(sc, sc.ram, 1 + h as u64),
            nic: station(sc, sc.hosts[h].link.unwrap_or(sc.network), 1000 + h as u64),
        })
        .collect()
}

/// The storage servers with their disks and hot tiers.
pub(super) fn servers(sc: &Scenario) -> Result<Vec<Server>, SimError> {
    let mut servers = Vec::new();
    for (s, spec) in sc.servers.iter().enumerate() {
        let tier = match &spec.hot_tier {
            None => None,
            Some(t) => Some(Tier::new(sc, t, station(sc, t.device, 3000 + s as u64))?),
        };
        servers.push(Server {
            level: Level {
                parts: Vec::new(),
                of_tenant: vec![None; sc.tenants.len()],
            },
            ram: station(sc, sc.ram, 2000 + s as u64),
            nic: station(sc, sc.network, 4000 + s as u64),
            disk: station(sc, spec.disk, 5000 + s as u64),
            tier,
        });
    }
    Ok(servers)
}

/// A station for device `spec`, its randomness seeded from the scenario's seed and `k`.
fn station(sc: &Scenario, spec: crate::device::DeviceSpec, k: u64) -> Station {
    Station::new(Device::new(
        spec,
        sc.seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15),
    ))
}

impl Engine<'_> {
    pub(super) fn build_partitions(&mut self, plan: &Plan) -> Result<(), SimError> {
        let sc = self.sc;
        let hist = self.history();
        let chooses = self.scheme.policy_choice.is_some();
        let active = |i: usize| self.tenants[i].is_some();
        for (h, host) in self.hosts.iter_mut().enumerate() {
            if plan.layout.shared_at(1) {
                host.level
                    .parts
                    .push(Part::new(sc.hosts[h].blocks, &sc.eviction, hist)?);
                for (i, t) in sc.tenants.iter().enumerate() {
                    if t.host == h {
                        host.level.of_tenant[i] = Some(0);
                    }
                }
                continue;
            }
            for (i, tp) in plan.tenants.iter().enumerate() {
                if tp.l1.node == h && active(i) {
                    host.level.of_tenant[i] = Some(host.level.parts.len());
                    host.level.parts.push(Part::new(
                        tp.l1.size,
                        running_policy(sc, chooses, tp, 1),
                        hist,
                    )?);
                }
            }
        }
        for (s, server) in self.servers.iter_mut().enumerate() {
            if plan.layout.shared_at(2) {
                server.level.parts.push(Part::new(
                    sc.servers[s].blocks,
                    sc.l2_eviction.as_deref().unwrap_or(&sc.eviction),
                    hist,
                )?);
                for (i, t) in sc.tenants.iter().enumerate() {
                    if t.servers.contains(&s) {
                        server.level.of_tenant[i] = Some(0);
                    }
                }
                continue;
            }
            for (i, tp) in plan.tenants.iter().enumerate() {
                for p in tp.l2.iter().filter(|p| p.node == s) {
                    if active(i) {
                        server.level.of_tenant[i] = Some(server.level.parts.len());
                        server.level.parts.push(Part::new(
                            p.size,
                            running_policy(sc, chooses, tp, 2),
                            hist,
                        )?);
                    }
                }
            }
        }
        Ok(())
    }

    /// Applies a new plan: resizes, switches policies, sets bandwidth shares.
    pub(super) fn apply(&mut self, plan: &Plan, now: f64) -> Result<(), SimError> {
        let chooses = self.scheme.policy_choice.is_some();
        // Only the partitioned levels of a partitioned layout move (a shared level keeps
        // its one cache; the `alone` baseline keeps its whole-node partitions).
        let moves = |level: u8| plan.layout != Layout::Alone && !plan.layout.shared_at(level);
        self.start_destaging();
        if moves(1) || moves(2) {
            for (i, tp) in plan.tenants.iter().enumerate() {
                if self.tenants[i].is_none() {
                    continue;
                }
                let h = tp.l1.node;
                let policy = running_policy(self.sc, chooses, tp, 1);
                if let (true, Some(k)) = (moves(1), self.hosts[h].level.of_tenant[i]) {
                    let mut ev = std::mem::take(&mut self.evicted);
                    let part = &mut self.hosts[h].level.parts[k];
                    part.switch(policy)?;
                    part.resize(tp.l1.size, &mut ev);
                    self.evicted = ev;
                    self.absorb_resize_evictions(now);
                }
                let policy = running_policy(self.sc, chooses, tp, 2);
                for p in tp.l2.iter().filter(|_| moves(2)) {
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
        self.destage(now);
        for b in &plan.boost {
            if let Some(tier) = self.servers.get_mut(b.server).and_then(|s| s.tier.as_mut()) {
                tier.apply(b);
            }
        }
        for r in &plan.bandwidth {
            let sched = scheduler(self.sc, self.sc.tenants.len(), &r.shares, &r.volumes);
            match r.level.as_str() {
                "server" => self.servers[r.node].disk.set_scheduler(sched, now),
                _ => self.hosts[r.node].nic.set_scheduler(sched, now),
            }
        }
        Ok(())
    }

    /// Every FIFO station forgets the busy periods that ended before `now`, the time of
    /// the event being served: nothing booked from here on arrives earlier
    /// ([`Station::forget_before`]).
    pub(super) fn forget_before(&mut self, now: f64) {
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
}

/// The eviction policy a partition of `tp` at `level` (1 or 2) runs: the plan's when the
/// scheme chooses policies (SOPA), else the scenario's `eviction`, or at level 2 its
/// `l2_eviction` where set (a variant's policy reaches partitioned schemes as it reaches
/// shared caches; `control` plans `lru` when it does not choose).
pub(super) fn running_policy<'p>(
    sc: &'p Scenario,
    chooses: bool,
    tp: &'p control::TenantPlan,
    level: u8,
) -> &'p str {
    match (chooses, level, &sc.l2_eviction) {
        (true, _, _) => &tp.eviction,
        (false, 2, Some(e)) => e,
        _ => &sc.eviction,
    }
}

/// The scheduler that enforces `shares` (`(tenant, proportion)`) among `n` tenants: weighted
/// fair sharing, or time quanta when the scenario sets `sim.quantum`. Classes are tenant
/// indices, or with time quanta and `volumes` (the volume of each of `shares`' tenants)
/// one class per volume, with the sum of its tenants' shares; tenants not listed get no
/// share (they do not use the resource).
pub(super) fn scheduler(
    sc: &Scenario,
    n: usize,
    shares: &[(usize, f64)],
    volumes: &[usize],
) -> Scheduler {
    let mut w = vec![0.0; n];
    for &(i, x) in shares {
        if i < n {
            w[i] = x;
        }
    }
    match sc.quantum {
        Some(quantum) if volumes.len() == shares.len() && !volumes.is_empty() => {
            let nv = volumes.iter().max().map_or(0, |v| v + 1);
            // Volumes first, then one class (of no share) per tenant not listed.
            let mut classes: Vec<usize> = (nv..nv + n).collect();
            let mut per_class = vec![0.0; nv + n];
            for (&(i, x), &v) in shares.iter().zip(volumes) {
                if i < n {
                    classes[i] = v;
                    per_class[v] += x;
                }
            }
            Scheduler::Quanta {
                quantum,
                shares: per_class,
                classes,
            }
        }
        Some(quantum) => Scheduler::Quanta {
            quantum,
            shares: w,
            classes: Vec::new(),
        },
        None => Scheduler::Weighted { weights: w },
    }
}
