//! LIRS, Low Inter-reference Recency Set (Jiang and Zhang, "LIRS: An Efficient Low
//! Inter-reference Recency Set Replacement Policy to Improve Buffer Cache Performance",
//! SIGMETRICS '02).
//!
//! Owns: the recency stack S (LIR blocks, resident HIR blocks and non-resident HIR blocks,
//! most recent on top), the list Q of resident HIR blocks (the eviction candidates), the
//! LIR/HIR status of every tracked block, and a bound on the non-resident entries kept in
//! S.
//!
//! ## Algorithm (for a cache of `c` blocks: `Lhirs = max(1, floor(hir * c))` HIR slots, the
//! other `Llirs = c - Lhirs` for LIR blocks)
//! * a block's *IRR* is the number of other blocks accessed between its last two accesses;
//!   LIR blocks (low IRR) stay resident, HIR blocks (high IRR) get the small Q;
//! * hit on an LIR block: move it to the top of S; if it was at the bottom, *prune* S
//!   (remove HIR entries from the bottom until an LIR block is there);
//! * hit on a resident HIR block in S: its IRR is now below the bottom LIR's recency, so it
//!   becomes LIR (top of S, out of Q) and the bottom LIR block becomes HIR at Q's end;
//!   prune;
//! * hit on a resident HIR block not in S: move it to the top of S and Q's end;
//! * miss: evict Q's front block (its S entry, if any, becomes non-resident); a block with a
//!   non-resident entry in S becomes LIR (and the bottom LIR moves to Q, prune); any other
//!   block enters as resident HIR (top of S, end of Q) — or as LIR while fewer than `Llirs`
//!   LIR blocks exist;
//! * S is bounded: when it holds more than `stack-ratio * c` entries, the oldest
//!   non-resident entries are dropped (pruning alone does not bound S on long scans).
//!
//! Pruning keeps an LIR block at S's bottom, so every step above is O(1) amortised: each
//! entry is pruned at most once per push.
//!
//! ## Where it shines and where it fails
//! Loops and scans larger than the cache (LRU misses every time; LIRS keeps `Llirs` blocks
//! of the loop resident), and mixes of hot blocks with long-IRR traffic: the small Q
//! absorbs the cold blocks. It needs tuning of `Lhirs` for some workloads, keeps up to
//! `stack-ratio * c` extra entries of metadata, and reacts slowly when the working set
//! moves (an old LIR block leaves only once it sinks to S's bottom).
//!
//! ## Parameters and libCacheSim
//! `hir` (alias `hirs-ratio`, default 0.01 as in the paper and libCacheSim) and
//! `stack-ratio` (default 2.0: like libCacheSim's `LIRS`, S is bounded to `2c` entries by
//! dropping the non-resident entries that were evicted longest ago, after every access).
//!
//! libCacheSim's `LIRS` differs from the paper at one defined point: on a hit to a resident
//! HIR block that is *not* in S while the LIR set is full, it demotes the bottom LIR block
//! to Q and, Q being full, evicts Q's front block at once; the next miss then enters as LIR
//! without evicting. The paper only moves the hit block (top of S, end of Q). We implement
//! the paper by default; `q-hit-demotes=1` selects libCacheSim's rule (test
//! `q_hit_paper_versus_libcachesim` shows a sequence where they differ). Our cache evicts
//! only on a miss, so under `q-hit-demotes=1` the block libCacheSim evicts on the hit is
//! *condemned*: it leaves the policy's lists at the hit, exactly as there, and its slot is
//! handed out by the next `evict` (an access in between is a hit here, a miss there).
//! When `Lhirs = 1` (under 200 blocks) libCacheSim's rule may pick the hit block itself and
//! still count it as resident; we keep it instead.
//!
//! On the cloudPhysics trace the paper rule is within 0.0002 of libCacheSim's miss ratio at
//! every size tested, and `q-hit-demotes=1` is identical from 100 blocks up (see
//! `tests/libcachesim_parity_adaptive.rs`).

use crate::keymap::KeyMap;
use crate::list::{Links, List, NodeSlab, NIL};
use crate::params::Params;
use crate::policy::{Directory, EvictionPolicy, Key, Slot};
use crate::PolicyError;

const LIR: u8 = 1;
const IN_S: u8 = 2;
const IN_Q: u8 = 4;

/// One tracked block: resident (with a slot) or a non-resident HIR entry of S.
#[derive(Clone, Copy, Debug, Default)]
struct Node {
    key: Key,
    /// The resident slot, `NIL` when non-resident.
    slot: Slot,
    flags: u8,
}

/// What the pending miss (between `on_miss` and `on_insert`) was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    /// A key with no entry in S.
    New,
    /// A key with a non-resident HIR entry in S (this node, already on top of S).
    NonResident(u32),
}

/// LIRS with a bounded stack.
#[derive(Debug)]
pub struct Lirs {
    hir_ratio: f64,
    stack_ratio: f64,
    q_hit_demotes: bool,
    lir_cap: usize,
    hir_cap: usize,
    stack_cap: usize,
    nodes: NodeSlab<Node>,
    s_links: Links,
    s: List,
    /// Links for Q (resident HIR nodes) and NH (non-resident nodes in S, oldest-evicted at
    /// the back); a node is never in both.
    q_links: Links,
    q: List,
    nh: List,
    /// Non-resident entries of S by key.
    nonresident: KeyMap<u32>,
    /// Node of each resident slot; `NIL` for a condemned slot.
    slot_node: Vec<u32>,
    /// Slots already evicted by the policy, still resident in the cache until the next
    /// `evict` hands them out.
    condemned: Vec<Slot>,
    lirs: usize,
    pending: Option<Pending>,
}

impl Lirs {
    /// A LIRS with `hir` of the capacity for resident HIR blocks, S bounded to
    /// `stack_ratio` times the capacity, and libCacheSim's (`q_hit_demotes`) or the paper's
    /// rule for hits on resident HIR blocks outside S.
    pub fn new(hir: f64, stack_ratio: f64, q_hit_demotes: bool) -> Self {
        Lirs {
            hir_ratio: hir,
            stack_ratio,
            q_hit_demotes,
            lir_cap: 0,
            hir_cap: 0,
            stack_cap: 0,
            nodes: NodeSlab::default(),
            s_links: Links::default(),
            s: List::default(),
            q_links: Links::default(),
            q: List::default(),
            nh: List::default(),
            nonresident: KeyMap::default(),
            slot_node: Vec::new(),
            condemned: Vec::new(),
            lirs: 0,
            pending: None,
        }
    }

    /// Builds from `hir=..,stack-ratio=..,q-hit-demotes=0|1`.
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let hir = p.f64_first(&["hir", "hirs-ratio"], 0.01, 0.0, 1.0)?;
        let stack = p.f64_first(&["stack-ratio"], 2.0, 1.0, 1e6)?;
        let demote = p.usize_in("q-hit-demotes", 0, 0, 1)? == 1;
        p.finish()?;
        Ok(Self::new(hir, stack, demote))
    }

    /// Number of LIR blocks, resident HIR blocks, entries in S, non-resident entries.
    pub fn sizes(&self) -> [usize; 4] {
        [
            self.lirs,
            self.q.len(),
            self.s.len(),
            self.nonresident.len(),
        ]
    }

    #[inline]
    fn flags(&self, n: u32) -> u8 {
        self.nodes.get(n).flags
    }

    /// Removes HIR entries from S's bottom until an LIR block (or the top) is there.
    #[inline]
    fn prune(&mut self) {
        while let Some(b) = self.s.back() {
            let node = *self.nodes.get(b);
            if node.flags & LIR != 0 || self.s.front() == Some(b) {
                break;
            }
            self.s.remove(&mut self.s_links, b);
            if node.slot == NIL {
                self.nh.remove(&mut self.q_links, b);
                self.nonresident.remove(&node.key);
                self.nodes.release(b);
            } else {
                self.nodes.get_mut(b).flags &= !IN_S;
            }
        }
    }

    /// Evicts Q's front block: its S entry, if any, becomes non-resident. Returns its slot
    /// (and condemns it when `condemn`: the cache will get it from the next `evict`).
    #[inline]
    fn evict_hir(&mut self, condemn: bool) -> Slot {
        let t = self.q.pop_back(&mut self.q_links).expect("non-empty Q");
        let node = self.nodes.get_mut(t);
        let slot = node.slot;
        node.flags &= !IN_Q;
        if node.flags & IN_S != 0 {
            node.slot = NIL;
            let key = node.key;
            self.nh.push_front(&mut self.q_links, t);
            self.nonresident.insert(key, t);
        } else {
            self.nodes.release(t);
        }
        self.slot_node[slot as usize] = NIL;
        if condemn {
            self.condemned.push(slot);
        }
        slot
    }

    /// Moves the bottom LIR block of S to Q's end as a resident HIR block (the caller
    /// prunes).
    #[inline]
    fn demote_bottom_lir(&mut self) {
        self.prune();
        let b = self.s.pop_back(&mut self.s_links).expect("non-empty S");
        debug_assert!(self.flags(b) & LIR != 0, "S's bottom is not LIR");
        self.nodes.get_mut(b).flags = IN_Q;
        self.lirs -= 1;
        self.q.push_front(&mut self.q_links, b);
    }

    /// libCacheSim's `evictLIR` on a hit: demote the bottom LIR block, evicting (and
    /// condemning) Q's front blocks while Q is full, but never `keep`.
    #[inline]
    fn evict_lir_on_hit(&mut self, keep: u32) {
        while self.q.len() >= self.hir_cap {
            match self.q.back() {
                Some(t) if t != keep => {
                    self.evict_hir(true);
                }
                _ => break,
            }
        }
        self.demote_bottom_lir();
        self.prune();
    }

    /// Counts a new LIR block (already on top of S). The first LIR block after a time
    /// without any (only after removals or resizes) prunes the HIR entries below it, so
    /// that S's bottom is LIR again.
    #[inline]
    fn add_lir(&mut self) {
        self.lirs += 1;
        if self.lirs == 1 {
            self.prune();
        }
    }

    /// Drops the oldest non-resident entries while S is over its bound.
    #[inline]
    fn limit_stack(&mut self) {
        while self.s.len() > self.stack_cap {
            let Some(t) = self.nh.pop_back(&mut self.q_links) else {
                break;
            };
            self.s.remove(&mut self.s_links, t);
            self.nonresident.remove(&self.nodes.get(t).key);
            self.nodes.release(t);
        }
    }

    /// Puts a pending non-resident node back (its miss was not admitted).
    fn restore_pending(&mut self) {
        if let Some(Pending::NonResident(n)) = self.pending.take() {
            self.nh.push_front(&mut self.q_links, n);
            self.nonresident.insert(self.nodes.get(n).key, n);
        }
    }

    /// Evicts S's bottom LIR block outright (only when Q is empty).
    fn evict_bottom_lir(&mut self) -> Slot {
        self.prune();
        let b = self.s.pop_back(&mut self.s_links).expect("non-empty S");
        let node = *self.nodes.get(b);
        debug_assert!(node.flags & LIR != 0 && node.slot != NIL);
        self.lirs -= 1;
        self.nodes.release(b);
        self.slot_node[node.slot as usize] = NIL;
        self.prune();
        node.slot
    }
}

impl Default for Lirs {
    fn default() -> Self {
        Self::new(0.01, 2.0, false)
    }
}

impl EvictionPolicy for Lirs {
    fn name(&self) -> String {
        let mut s = format!(
            "lirs(hir={},stack-ratio={}",
            self.hir_ratio, self.stack_ratio
        );
        if self.q_hit_demotes {
            s.push_str(",q-hit-demotes=1");
        }
        s.push(')');
        s
    }

    fn set_capacity(&mut self, capacity: usize, _dir: &mut Directory<'_>) {
        // At least one HIR slot, and at least one LIR slot once there are two slots.
        self.hir_cap = ((self.hir_ratio * capacity as f64) as usize)
            .max(1)
            .min(capacity.saturating_sub(1).max(capacity.min(1)));
        self.lir_cap = capacity - self.hir_cap;
        self.stack_cap = (self.stack_ratio * capacity as f64) as usize;
        let n = capacity.min(1 << 24);
        if self.slot_node.len() < n {
            self.slot_node.resize(n, NIL);
        }
        let nodes = (n as f64 * (self.stack_ratio + 0.1)).min((1u64 << 25) as f64) as usize;
        self.s_links.reserve(nodes);
        self.q_links.reserve(nodes);
        self.nonresident.reserve(
            nodes
                .saturating_sub(n)
                .saturating_sub(self.nonresident.len()),
        );
        while self.lirs > self.lir_cap {
            self.demote_bottom_lir();
            self.prune();
        }
        self.limit_stack();
    }

    #[inline]
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        let n = self.slot_node[slot as usize];
        if n == NIL {
            return; // condemned: leaves at the next eviction
        }
        let flags = self.flags(n);
        if flags & LIR != 0 {
            let was_bottom = self.s.back() == Some(n);
            self.s.move_to_front(&mut self.s_links, n);
            if was_bottom {
                self.prune();
            }
        } else if flags & IN_S != 0 && self.lir_cap > 0 {
            // Resident HIR in S: becomes LIR, the bottom LIR goes to Q.
            self.s.move_to_front(&mut self.s_links, n);
            if flags & IN_Q != 0 {
                self.q.remove(&mut self.q_links, n);
            }
            self.nodes.get_mut(n).flags = LIR | IN_S;
            if self.lirs >= self.lir_cap && self.lirs > 0 {
                self.evict_lir_on_hit(n);
            }
            self.add_lir();
        } else if flags & IN_S != 0 {
            // A one-block cache has no LIR set: the block stays HIR.
            self.s.move_to_front(&mut self.s_links, n);
            self.q.move_to_front(&mut self.q_links, n);
        } else {
            // Resident HIR outside S: top of S, end of Q.
            self.q.move_to_front(&mut self.q_links, n);
            if self.q_hit_demotes && self.lirs >= self.lir_cap && self.lirs > 0 {
                self.evict_lir_on_hit(n);
            }
            self.s.push_front(&mut self.s_links, n);
            self.nodes.get_mut(n).flags |= IN_S;
        }
        self.limit_stack();
    }

    #[inline]
    fn on_miss(&mut self, key: Key, _ghost: Option<u32>) {
        self.restore_pending();
        self.pending = Some(match self.nonresident.remove(&key) {
            Some(n) => {
                self.nh.remove(&mut self.q_links, n);
                self.s.move_to_front(&mut self.s_links, n);
                Pending::NonResident(n)
            }
            None => Pending::New,
        });
    }

    #[inline]
    fn on_insert(&mut self, slot: Slot, key: Key) {
        let i = slot as usize;
        if self.slot_node.len() <= i {
            let n = (i + 1).max(self.slot_node.len() * 2);
            self.slot_node.resize(n, NIL);
        }
        let n = match self.pending.take() {
            Some(Pending::NonResident(n)) if self.lir_cap > 0 => {
                // Becomes LIR; the bottom LIR goes to Q if the LIR set is full (`evict`
                // already did this when the cache was full).
                if self.lirs >= self.lir_cap && self.lirs > 0 {
                    self.demote_bottom_lir();
                    self.prune();
                }
                let node = self.nodes.get_mut(n);
                node.slot = slot;
                node.flags = LIR | IN_S;
                self.add_lir();
                n
            }
            pending => {
                if let Some(Pending::NonResident(n)) = pending {
                    // No LIR set (one-block cache): forget the old entry, enter as new.
                    self.s.remove(&mut self.s_links, n);
                    self.nodes.release(n);
                }
                if self.lirs < self.lir_cap {
                    let n = self.nodes.alloc(Node {
                        key,
                        slot,
                        flags: LIR | IN_S,
                    });
                    self.s.push_front(&mut self.s_links, n);
                    self.add_lir();
                    n
                } else {
                    let n = self.nodes.alloc(Node {
                        key,
                        slot,
                        flags: IN_S | IN_Q,
                    });
                    self.s.push_front(&mut self.s_links, n);
                    self.q.push_front(&mut self.q_links, n);
                    n
                }
            }
        };
        self.slot_node[i] = n;
        self.limit_stack();
    }

    #[inline]
    fn evict(&mut self, _dir: &mut Directory<'_>) -> Slot {
        if let Some(s) = self.condemned.pop() {
            return s;
        }
        let lir_full = self.lirs >= self.lir_cap && self.lirs > 0;
        let q_full = self.q.len() >= self.hir_cap && !self.q.is_empty();
        match self.pending {
            Some(Pending::NonResident(_)) if lir_full && q_full => {
                // libCacheSim's evictLIR: Q's front leaves, the bottom LIR goes to Q.
                let v = self.evict_hir(false);
                self.demote_bottom_lir();
                self.prune();
                v
            }
            _ if !self.q.is_empty() => self.evict_hir(false),
            _ => self.evict_bottom_lir(),
        }
    }

    fn on_remove(&mut self, slot: Slot, _key: Key) {
        let n = self.slot_node[slot as usize];
        if n == NIL {
            self.condemned.retain(|&c| c != slot);
            return;
        }
        self.slot_node[slot as usize] = NIL;
        let flags = self.flags(n);
        if flags & IN_S != 0 {
            self.s.remove(&mut self.s_links, n);
        }
        if flags & IN_Q != 0 {
            self.q.remove(&mut self.q_links, n);
        }
        self.nodes.release(n);
        if flags & LIR != 0 {
            self.lirs -= 1;
            self.prune();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{miss_count, pinned};
    use crate::BlockCache;

    #[test]
    fn loop_larger_than_cache_keeps_lir_blocks() {
        // A loop over 12 keys with capacity 10 (Llirs = 9, Lhirs = 1): LRU misses every
        // access; LIRS keeps the 9 LIR blocks of the first pass resident.
        let mut seq = Vec::new();
        for _ in 0..10 {
            seq.extend(1..=12u64);
        }
        assert_eq!(miss_count("lru", 10, &seq), 120);
        // First pass: 12 misses. Every later pass: 1..=9 hit (LIR), 10, 11, 12 miss.
        assert_eq!(miss_count("lirs", 10, &seq), 12 + 9 * 3);
    }

    #[test]
    fn paper_example_hir_block_with_small_irr_becomes_lir() {
        // Capacity 3: Llirs = 2, Lhirs = 1. 1 2 become LIR; 3 resident HIR (in S and Q).
        let mut c = BlockCache::new(3, Lirs::default());
        for k in [1, 2, 3] {
            c.access(k, |_, _| {});
        }
        assert_eq!(c.policy().sizes(), [2, 1, 3, 0]);
        // 3 hit while in S: it becomes LIR, 1 (bottom LIR) becomes HIR in Q, and pruning
        // drops nothing (2 is LIR at the bottom now).
        c.access(3, |_, _| {});
        assert_eq!(c.policy().sizes(), [2, 1, 2, 0]);
        // 4 misses: Q's front (1) is evicted; it is not in S any more, so no ghost.
        let mut ev = Vec::new();
        c.access(4, |k, _| ev.push(k));
        assert_eq!(ev, [1]);
        // 5 misses: 4 (HIR, in S) is evicted and stays in S as non-resident.
        ev.clear();
        c.access(5, |k, _| ev.push(k));
        assert_eq!(ev, [4]);
        assert_eq!(c.policy().sizes(), [2, 1, 4, 1]);
        // 4 again: a non-resident entry in S, so it returns as LIR; 2 (bottom LIR) is
        // demoted, Q's front (5) is evicted.
        ev.clear();
        c.access(4, |k, _| ev.push(k));
        assert_eq!(ev, [5]);
        assert_eq!(c.policy().sizes(), [2, 1, 3, 1]);
    }

    #[test]
    fn q_hit_paper_versus_libcachesim() {
        // Capacity 4 with hir=0.5: Llirs = 2, Lhirs = 2. S and Q are shown newest first.
        //   1 2 3 4     S = [4 3 2 1], Q = [4 3]; 1 and 2 are LIR
        //   1           LIR hit: S = [1 4 3 2]
        //   2           LIR hit at the bottom: S = [2 1 4 3], pruning drops 3 and 4 from S
        //               (they stay resident in Q): S = [2 1]
        //   3           hit on a resident HIR block outside S:
        //     paper:        S = [3 2 1], Q = [3 4]
        //     libCacheSim:  the bottom LIR (1) is demoted and, Q being full, Q's front (4)
        //                   is evicted at once: S = [3 2], Q = [1 3], one LIR block
        //   5           paper: evicts 4, 5 enters as HIR: S = [5 3 2 1], Q = [5 3]
        //               libCacheSim: takes the slot freed by 4, 5 enters as LIR (the LIR set
        //               has room): S = [5 3 2], Q = [1 3]
        //   4           both evict Q's front (3, non-resident in S); 4 enters as HIR
        //   6           paper evicts 5; libCacheSim evicts 1
        //   1           paper: hit (1 is LIR); libCacheSim: miss
        let seq = [1u64, 2, 3, 4, 1, 2, 3, 5, 4, 6, 1];
        assert_eq!(miss_count("lirs:hir=0.5", 4, &seq), 7);
        assert_eq!(miss_count("lirs:hir=0.5,q-hit-demotes=1", 4, &seq), 8);
    }

    #[test]
    fn stack_is_bounded() {
        // A long scan of new keys: each evicted HIR block leaves a non-resident entry in
        // S; the bound keeps S at 2c entries.
        let mut c = BlockCache::new(10, Lirs::default());
        for k in 0..1000u64 {
            c.access(k, |_, _| {});
        }
        let [lir, hir, s, nr] = c.policy().sizes();
        assert_eq!((lir, hir, s), (9, 1, 20));
        assert_eq!(nr, 10);
    }

    proptest::proptest! {
        /// At a fixed capacity: at most Llirs LIR blocks and Lhirs resident HIR blocks, the
        /// resident blocks are exactly the LIR blocks plus Q (plus condemned blocks under
        /// libCacheSim's rule), S stays within its bound, and S's bottom is LIR.
        #[test]
        fn set_invariants(
            cap in 1usize..24,
            hir in 0.0f64..0.5,
            lcs in proptest::bool::ANY,
            keys in proptest::collection::vec(0u64..64, 1..600),
        ) {
            let mut c = BlockCache::new(cap, Lirs::new(hir, 2.0, lcs));
            for k in keys {
                c.access(k, |_, _| {});
                let pol = c.policy();
                let [lir, q, s, nr] = pol.sizes();
                // Under libCacheSim's rule with Lhirs = 1, keeping the hit block (see the
                // module doc) lets Q hold one block more until the next miss.
                proptest::prop_assert!(lir <= pol.lir_cap && q <= pol.hir_cap + lcs as usize);
                proptest::prop_assert_eq!(lir + q + pol.condemned.len(), c.len());
                proptest::prop_assert!(s <= 2 * cap && nr <= s);
                if let Some(b) = pol.s.back() {
                    proptest::prop_assert!(lir == 0 || pol.flags(b) & LIR != 0);
                }
            }
        }
    }

    #[test]
    fn contract_holds() {
        pinned::contract("lirs");
        pinned::contract("lirs:q-hit-demotes=1");
    }
}
