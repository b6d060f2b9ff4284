//! One request carried through the hierarchy, in named steps: the profilers see its
//! blocks ([`Engine::profile`]); level 1 looks each block up, with exclusive levels
//! looking level 2 up at once ([`Engine::level1`]); then per storage server holding
//! missed blocks, written data goes down ([`Engine::write_down`]) or missed data is read
//! from level 2, the hot tier or the disk and returned ([`Engine::read_from_server`]);
//! finally the tenant's counters record the request. Trims drop the blocks at both
//! levels ([`Engine::trim`]).
//!
//! Does not own: the caches and stations (`hierarchy`), where victims go (`evictions`),
//! the disk and the hot tier (`below`), when requests are issued (`tenants`).

use super::below::{disk_runs, read_below};
use super::{key_of, Engine};
use crate::scenario::WritePolicy;
use crate::stats::Served;
use policy::Access;
use trace::{Op, Request};

/// What level 1 (and, with exclusive levels, level 2) found for one request's blocks.
#[derive(Default)]
struct Lookups {
    l1_hits: u64,
    l2_lookups: u64,
    l2_hits: u64,
    /// Written data goes below level 1 now (write-through or write-around at level 1).
    lower_writes: bool,
}

impl Engine<'_> {
    /// Carries one request, issued at `now` and due at `due` (its latency counts from
    /// then), through the hierarchy; returns its completion time.
    pub(super) fn serve(&mut self, i: usize, now: f64, due: f64, req: &Request) -> f64 {
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
        self.profile(i, first, count, req.len as u64);
        let h = spec.host;
        for m in self.misses.iter_mut().chain(self.need.iter_mut()) {
            m.clear();
        }
        let mut look = self.level1(i, now, first, count, write);
        let mut done = self.hosts[h].ram.serve(0, now, 0, bytes, write);
        let mut served = Served::Level1;
        for (k, &s) in spec.servers.iter().enumerate() {
            if self.misses[k].is_empty() {
                continue;
            }
            let blocks = std::mem::take(&mut self.misses[k]);
            let mut disk_blocks = std::mem::take(&mut self.scratch);
            disk_blocks.clear();
            let (t, from) = if write && look.lower_writes {
                self.write_down(i, s, now, &blocks, &mut disk_blocks)
            } else {
                self.read_from_server(i, k, s, now, &blocks, &mut disk_blocks, &mut look)
            };
            done = done.max(t);
            served = served.max_with(from);
            self.scratch = disk_blocks;
            // Kept for the next request (cleared then), so its buffer is reused.
            self.misses[k] = blocks;
            self.absorb_l2_evictions(s, now);
        }
        self.absorb_l1_evictions(now);
        let rt = self.tenants[i].as_mut().expect("active");
        rt.counters.l1_lookups += count;
        rt.counters.l1_hits += look.l1_hits;
        rt.counters.l2_lookups += look.l2_lookups;
        rt.counters.l2_hits += look.l2_hits;
        rt.counters.record(done - due, write, served);
        done
    }

    /// Counts the request's bytes and feeds its blocks to tenant `i`'s profiler and
    /// phantom caches (one sampling hash per block serves them all).
    fn profile(&mut self, i: usize, first: u64, count: u64, len: u64) {
        let rt = self.tenants[i].as_mut().expect("active");
        rt.counters.bytes += len;
        if rt.profiler.is_some() || !rt.phantoms.is_empty() {
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

    /// Level 1, block by block: hits counted, written blocks marked dirty (write-back) or
    /// queued to go down, missed blocks queued per server (`misses`). With exclusive levels
    /// each miss is looked up in level 2 at once (a hit leaves level 2; what level 2 lacks
    /// is queued in `need`) and level 1's victims are demoted right after, in the order one
    /// LRU stack over both levels would see them.
    fn level1(&mut self, i: usize, now: f64, first: u64, count: u64, write: bool) -> Lookups {
        let sc = self.sc;
        let spec = &sc.tenants[i];
        let h = spec.host;
        let exclusive = !sc.inclusive;
        let mut look = Lookups::default();
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
                look.l1_hits += 1;
            }
            if write {
                if keeps_writes {
                    if let (Some(s), Some(p)) = (slot, part_idx) {
                        self.hosts[h].level.parts[p].set_dirty(s, true);
                    }
                } else {
                    // Write-through or write-around: the data goes down now.
                    look.lower_writes = true;
                    self.misses[k].push(b);
                }
            } else if !hit {
                self.misses[k].push(b);
            }
            if exclusive && !hit && (keeps_writes || !write) {
                look.l2_lookups += 1;
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
                        look.l2_hits += 1;
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
        look
    }

    /// Written `blocks` of tenant `i` travel down to server `s`, whose level 2 applies its
    /// own write policy (what goes on to the disk is collected in `disk_blocks`); returns
    /// the completion and how deep the write went.
    fn write_down(
        &mut self,
        i: usize,
        s: usize,
        now: f64,
        blocks: &[u64],
        disk_blocks: &mut Vec<u64>,
    ) -> (f64, Served) {
        let sc = self.sc;
        let spec = &sc.tenants[i];
        let bs = sc.block_size;
        let n = spec.servers.len() as u64;
        let nbytes = blocks.len() as u64 * bs;
        let server = &mut self.servers[s];
        let part = server.level.of_tenant[i];
        let t_host = self.hosts[spec.host].nic.serve(i, now, 0, nbytes, true);
        let ready = server.nic.serve(i, t_host, 0, nbytes, true);
        for &b in blocks {
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
        let t_disk = disk_runs(server, spec, i, disk_blocks, n, bs, t_ram, true);
        let served = if disk_blocks.is_empty() {
            Served::Level2
        } else {
            Served::Disk
        };
        (t_disk.max(t_ram), served)
    }

    /// Missed `blocks` of tenant `i` (its `k`-th server, `s`) read from level 2, else from
    /// the hot tier or the disk, and returned over the server's and the host's links.
    /// Exclusive levels looked level 2 up already (`need`: the blocks it did not have);
    /// inclusive ones look now and keep what they read (counted in `look`). Returns the
    /// completion and how deep the read went.
    #[allow(clippy::too_many_arguments)]
    fn read_from_server(
        &mut self,
        i: usize,
        k: usize,
        s: usize,
        now: f64,
        blocks: &[u64],
        disk_blocks: &mut Vec<u64>,
        look: &mut Lookups,
    ) -> (f64, Served) {
        let sc = self.sc;
        let spec = &sc.tenants[i];
        let bs = sc.block_size;
        let n = spec.servers.len() as u64;
        let nbytes = blocks.len() as u64 * bs;
        let at_server = now + self.net_latency;
        let server = &mut self.servers[s];
        let part = server.level.of_tenant[i];
        if sc.inclusive {
            for &b in blocks {
                let key = key_of(i, b);
                look.l2_lookups += 1;
                let Some(p) = part else {
                    disk_blocks.push(b);
                    continue;
                };
                match server.level.parts[p].access(key, &mut self.evicted2) {
                    Access::Hit(_) => look.l2_hits += 1,
                    _ => disk_blocks.push(b),
                }
            }
        } else {
            disk_blocks.extend_from_slice(&self.need[k]);
        }
        let hit_bytes = (blocks.len() - disk_blocks.len()) as u64 * bs;
        let t_ram = server.ram.serve(0, at_server, 0, hit_bytes.max(bs), false);
        let mut t_data = t_ram;
        let served = if !disk_blocks.is_empty() {
            let below = read_below(server, spec, i, disk_blocks, n, bs, at_server);
            t_data = t_data.max(below.done);
            let rt = self.tenants[i].as_mut().expect("active");
            rt.counters.tier_hits += below.tier_blocks;
            rt.counters.migrations += below.migrations;
            rt.counters.disk_blocks += disk_blocks.len() as u64 - below.tier_blocks;
            Served::Disk
        } else {
            Served::Level2
        };
        let t_out = server.nic.serve(i, t_data, 0, nbytes, false);
        let t_in = self.hosts[spec.host].nic.serve(i, t_out, 0, nbytes, false);
        (t_in, served)
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
}

impl Served {
    /// The deeper of two.
    fn max_with(self, o: Served) -> Served {
        if (o as u8) > (self as u8) {
            o
        } else {
            self
        }
    }
}
