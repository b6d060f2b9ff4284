//! Where evicted blocks go. Level-1 victims are demoted to level 2 when the levels are
//! exclusive (clean ones of a chunk the server's hot tier holds are dropped: the tier is
//! exclusive of level 2), or written down when dirty (level 2 keeps a dirty block dirty only under
//! write-back, else it goes on to the disk); level-2 victims that are dirty are written to
//! the disk. Both kinds of level-1 eviction — a request's, one block at a time, and a
//! resize's, batched — take one path ([`Engine::demote`]); they differ only in how the
//! victims are grouped into network transfers.
//!
//! A plan's resizes set their dirty victims' disk writes aside and issue them together,
//! sorted by address ([`Engine::destage`]).
//!
//! Does not own: the caches that evict (`hierarchy`), the disk's service (`below`).

use super::below::{disk_runs, in_tier};
use super::{tenant_of, Engine, BLOCK_MASK};
use crate::scenario::WritePolicy;
use policy::Access;

/// Bytes per network transfer when a resize sends level-1 victims down (the live node
/// batches its demotions up to 1 MiB per request).
const RESIZE_BATCH: u64 = 1 << 20;

impl Engine<'_> {
    /// A request's level-1 evictions: each victim that goes down is one network
    /// transfer, in the order the cache evicted them.
    pub(super) fn absorb_l1_evictions(&mut self, now: f64) {
        if self.evicted.is_empty() {
            return;
        }
        let sc = self.sc;
        let mut ev = std::mem::take(&mut self.evicted);
        for victim in &ev {
            let (key, dirty) = *victim;
            if sc.inclusive && !dirty {
                continue;
            }
            let s = sc.tenants[tenant_of(key)].server_of(key & BLOCK_MASK);
            self.demote(s, std::slice::from_ref(victim), now);
        }
        ev.clear();
        self.evicted = ev;
    }

    /// Level-1 victims of a resize: the same outcome per block as
    /// [`Engine::absorb_l1_evictions`], but carried over the network in batches of up to
    /// [`RESIZE_BATCH`] bytes per server, as a node's demotion queue sends them, instead of
    /// one network operation per block. A shrink evicts thousands of blocks at one
    /// instant; one operation each (every operation pays the link's fixed cost) would hold
    /// the links for a tenth of a second and stall every tenant behind them.
    pub(super) fn absorb_resize_evictions(&mut self, now: f64) {
        if self.evicted.is_empty() {
            return;
        }
        let sc = self.sc;
        let bs = sc.block_size;
        let mut ev = std::mem::take(&mut self.evicted);
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
                self.demote(s, batch, now);
            }
        }
        ev.clear();
        self.evicted = ev;
    }

    /// Sends level-1 `victims` (`(key, dirty)`, one tenant's, all striped on server `s`)
    /// down in one network transfer from their host to `s`; there each goes into the
    /// tenant's level-2 partition (dirty only under write-back) or, dirty and not kept, to
    /// the disk. Level 2's own evictions are absorbed after each block.
    fn demote(&mut self, s: usize, victims: &[(u64, bool)], now: f64) {
        let sc = self.sc;
        let bs = sc.block_size;
        let t = tenant_of(victims[0].0);
        let spec = &sc.tenants[t];
        let nbytes = victims.len() as u64 * bs;
        let t_host = self.hosts[spec.host].nic.serve(t, now, 0, nbytes, true);
        let arrive = self.servers[s].nic.serve(t, t_host, 0, nbytes, true);
        for &(key, dirty) in victims {
            let mut to_disk = dirty;
            if !dirty && in_tier(&self.servers[s], t, key & BLOCK_MASK) {
                // The hot tier holds its chunk: exclusive of it, level 2 does not keep it.
                continue;
            }
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
                self.write_to_disk(s, t, key & BLOCK_MASK, arrive);
            }
            self.absorb_l2_evictions(s, now);
        }
    }

    /// Level-2 evictions at server `s`: dirty blocks are written to the disk.
    pub(super) fn absorb_l2_evictions(&mut self, s: usize, now: f64) {
        if self.evicted2.is_empty() {
            return;
        }
        let mut ev = std::mem::take(&mut self.evicted2);
        for &(key, dirty) in &ev {
            if dirty {
                self.write_to_disk(s, tenant_of(key), key & BLOCK_MASK, now);
            }
        }
        ev.clear();
        self.evicted2 = ev;
    }

    /// Writes tenant `t`'s dirty `block` to server `s`'s disk at `at`, or, while a plan is
    /// being applied, sets it aside for [`Engine::destage`].
    fn write_to_disk(&mut self, s: usize, t: usize, block: u64, at: f64) {
        if let Some(d) = self.destaging.as_mut() {
            d[s].push((t, block));
            return;
        }
        let spec = &self.sc.tenants[t];
        let n = spec.servers.len() as u64;
        disk_runs(
            &mut self.servers[s],
            spec,
            t,
            &[block],
            n,
            self.sc.block_size,
            at,
            true,
        );
    }

    /// Sets aside the dirty blocks the next resizes write back (until [`Engine::destage`]).
    pub(super) fn start_destaging(&mut self) {
        self.destaging = Some(vec![Vec::new(); self.servers.len()]);
    }

    /// Writes the dirty blocks a plan's resizes evicted to their servers' disks at `now`,
    /// each tenant's sorted by address, as an elevator (or a node's batched write-back)
    /// orders them: contiguous dirty blocks are one disk operation, not one each in the
    /// order the caches evicted them. How many there are per interval is the plan's
    /// business (`control` paces shrinks to a budget of disk time). (Spreading them over
    /// the interval instead, booked ahead on the disk's calendar, left gaps between them
    /// shorter than a read's service, so reads queued behind the whole interval's
    /// write-backs: idle-priority destaging needs a scheduler class the disk model does
    /// not have.)
    pub(super) fn destage(&mut self, now: f64) {
        let Some(per_server) = self.destaging.take() else {
            return;
        };
        let bs = self.sc.block_size;
        for (s, mut writes) in per_server.into_iter().enumerate() {
            writes.sort_unstable();
            for run in writes.chunk_by(|a, b| a.0 == b.0) {
                let t = run[0].0;
                let blocks: Vec<u64> = run.iter().map(|&(_, b)| b).collect();
                let spec = &self.sc.tenants[t];
                let n = spec.servers.len() as u64;
                disk_runs(&mut self.servers[s], spec, t, &blocks, n, bs, now, true);
            }
        }
    }
}
