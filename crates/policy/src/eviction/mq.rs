//! MQ, the Multi-Queue algorithm for second-level buffer caches (Zhou, Philbin and Li, "The
//! Multi-Queue Replacement Algorithm for Second Level Buffer Caches", USENIX ATC '01).
//!
//! Owns: `m` LRU queues Q0..Q(m-1) of resident slots, each block's reference count and
//! expiration time, and Qout, a FIFO history of evicted keys with their reference counts.
//!
//! ## Algorithm
//! * a block with reference count `f` lives in queue `min(floor(log2 f), m-1)`;
//! * hit: `f += 1`, move to the front of its (possibly higher) queue, `expire = now +
//!   lifetime`;
//! * miss: if the key is in Qout, take its count from there (and drop it), else `f = 0`;
//!   then `f += 1` and insert like a hit;
//! * evict: the LRU block of the lowest non-empty queue; its key and count go to Qout's
//!   front (Qout forgets its oldest entry when full);
//! * after every hit and insert (Adjust): `now += 1`, and in each queue k >= 1 whose LRU
//!   block has expired, that block is demoted to the front of queue k-1 with a fresh
//!   expiration time.
//!
//! Frequency decides the queue, recency the order inside it, and expiration lets blocks
//! that were popular long ago sink back down instead of staying forever as in LFU.
//!
//! ## Where it shines and where it fails
//! Second-level caches (below a client's own cache), whose accesses have long reuse
//! distances that LRU cannot hold but whose frequencies are informative; Qout remembers
//! counts for about four cache sizes of history. It fails when `lifetime` is mistuned (too
//! short: it degrades to LRU over Q0; too long: stale popular blocks linger) and costs more
//! per hit than LRU (a queue move and up to `m - 1` expiration checks).
//!
//! ## Parameters and libCacheSim
//! `queues` (alias `n-queue`, default 8), `history` (alias `qout-size-ratio`, Qout's size
//! as a multiple of the capacity, default 4.0) and `lifetime` (in accesses, default
//! 10,000) are libCacheSim's `MQ` defaults. The paper tunes `lifeTime` to the peak temporal
//! distance of the workload; like libCacheSim we take it as a fixed parameter. Semantics
//! match libCacheSim's `MQ` (the clock ticks once per hit and once per insert; a block
//! expires when `expire < now`), and the miss ratios on the cloudPhysics trace are
//! identical at every size tested.

use crate::ghost::GhostFifo;
use crate::list::{Links, List};
use crate::params::Params;
use crate::policy::{BlockHistory, Directory, EvictionPolicy, Key, Slot};
use crate::PolicyError;

/// Most queues MQ may have.
pub const MAX_QUEUES: usize = 64;

/// Per-slot metadata.
#[derive(Clone, Copy, Debug, Default)]
struct Meta {
    key: Key,
    expire: u64,
    freq: u32,
    queue: u8,
}

/// Multi-Queue.
#[derive(Debug)]
pub struct Mq {
    history_ratio: f64,
    lifetime: u64,
    history_cap: usize,
    links: Links,
    queues: Vec<List>,
    /// Per queue, a lower bound on its LRU block's expiration time: blocks enter a queue
    /// at its front with `expire = now + lifetime`, so expiration times only grow towards
    /// the front and Adjust need not look at a queue before `now` passes the bound.
    expire_bound: Vec<u64>,
    meta: Vec<Meta>,
    now: u64,
    /// Qout: evicted blocks' keys with their counts.
    qout: GhostFifo<u32>,
    /// The count remembered for the pending miss, if it was in Qout.
    pending: Option<u32>,
}

impl Mq {
    /// An MQ with `queues` queues, a history of `history` times the capacity, and blocks
    /// demoted after `lifetime` accesses without a hit.
    pub fn new(queues: usize, history: f64, lifetime: u64) -> Self {
        assert!((1..=MAX_QUEUES).contains(&queues));
        Mq {
            history_ratio: history,
            lifetime,
            history_cap: 0,
            links: Links::default(),
            queues: vec![List::default(); queues],
            expire_bound: vec![0; queues],
            meta: Vec::new(),
            now: 0,
            qout: GhostFifo::default(),
            pending: None,
        }
    }

    /// Builds from `queues=..,history=..,lifetime=..` (libCacheSim's `n-queue` and
    /// `Qout-size-ratio` are accepted too).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let q = match p.usize_in("n-queue", 0, 1, MAX_QUEUES)? {
            0 => p.usize_in("queues", 8, 1, MAX_QUEUES)?,
            n => n,
        };
        let history = p.f64_first(&["history", "qout-size-ratio"], 4.0, 0.0, 64.0)?;
        let lifetime = p.usize_in("lifetime", 10_000, 1, usize::MAX)? as u64;
        p.finish()?;
        Ok(Self::new(q, history, lifetime))
    }

    /// Number of resident blocks in each queue.
    pub fn queue_lens(&self) -> Vec<usize> {
        self.queues.iter().map(List::len).collect()
    }

    /// Number of keys in the history buffer Qout.
    pub fn history_len(&self) -> usize {
        self.qout.len()
    }

    #[inline]
    fn place(&mut self, slot: Slot) {
        let m = &mut self.meta[slot as usize];
        let q = {
            let f = m.freq;
            let log2 = if f <= 1 { 0 } else { 31 - f.leading_zeros() };
            log2.min(self.queues.len() as u32 - 1) as u8
        };
        m.queue = q;
        m.expire = self.now + self.lifetime;
        self.queues[q as usize].push_front(&mut self.links, slot);
    }

    /// The paper's Adjust: tick the clock, demote each queue's expired LRU block.
    #[inline]
    fn adjust(&mut self) {
        self.now += 1;
        for k in 1..self.queues.len() {
            if self.now <= self.expire_bound[k] {
                continue;
            }
            if let Some(t) = self.queues[k].back() {
                let m = &mut self.meta[t as usize];
                if m.expire < self.now {
                    m.queue = (k - 1) as u8;
                    m.expire = self.now + self.lifetime;
                    self.queues[k].remove(&mut self.links, t);
                    self.queues[k - 1].push_front(&mut self.links, t);
                    self.expire_bound[k] = 0;
                } else {
                    self.expire_bound[k] = m.expire;
                }
            }
        }
    }
}

impl Default for Mq {
    fn default() -> Self {
        Self::new(8, 4.0, 10_000)
    }
}

impl EvictionPolicy for Mq {
    fn name(&self) -> String {
        format!(
            "mq(queues={},history={},lifetime={})",
            self.queues.len(),
            self.history_ratio,
            self.lifetime
        )
    }

    fn set_capacity(&mut self, capacity: usize, _dir: &mut Directory<'_>) {
        self.history_cap = (capacity as f64 * self.history_ratio) as usize;
        let n = capacity.min(1 << 24);
        self.links.reserve(n);
        if self.meta.len() < n {
            self.meta.resize(n, Meta::default());
        }
        self.qout.set_capacity(self.history_cap);
    }

    #[inline]
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        let m = &mut self.meta[slot as usize];
        let old = m.queue as usize;
        m.freq = m.freq.saturating_add(1).min(i32::MAX as u32);
        self.queues[old].remove(&mut self.links, slot);
        self.place(slot);
        self.adjust();
    }

    #[inline]
    fn on_miss(&mut self, key: Key, _ghost: Option<u32>) {
        self.pending = self.qout.take(key).map(|(_, freq)| freq);
    }

    #[inline]
    fn on_insert(&mut self, slot: Slot, key: Key) {
        let i = slot as usize;
        if self.meta.len() <= i {
            let n = (i + 1).max(self.meta.len() * 2);
            self.meta.resize(n, Meta::default());
        }
        let freq = match self.pending.take() {
            Some(f) => f.saturating_add(1).min(i32::MAX as u32),
            None => 1,
        };
        self.meta[i].key = key;
        self.meta[i].freq = freq;
        self.place(slot);
        self.adjust();
    }

    /// A switched-in block keeps its frequency: 1 + its hits since it entered.
    fn on_reconstruct(&mut self, slot: Slot, key: Key, h: BlockHistory) {
        self.pending = Some(h.hits);
        self.on_insert(slot, key);
    }

    #[inline]
    fn evict(&mut self, _dir: &mut Directory<'_>) -> Slot {
        let slot = self
            .queues
            .iter_mut()
            .find_map(|q| q.pop_back(&mut self.links))
            .expect("evict called on an empty MQ");
        let m = self.meta[slot as usize];
        self.qout.remember(m.key, m.freq);
        slot
    }

    fn on_remove(&mut self, slot: Slot, _key: Key) {
        let q = self.meta[slot as usize].queue as usize;
        self.queues[q].remove(&mut self.links, slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{miss_count, pinned};
    use crate::BlockCache;

    #[test]
    fn frequency_protects_and_history_restores_counts() {
        // Capacity 2. 1 is hit three times (f = 4, queue 2); 2 and then 3..=6 arrive with
        // f = 1 in queue 0 and evict each other, never 1.
        let mut c = BlockCache::new(2, Mq::default());
        for k in [1, 1, 1, 1, 2, 3, 4, 5, 6] {
            c.access(k, |_, _| {});
        }
        assert!(c.lookup(1).is_some() && c.lookup(6).is_some());
        assert_eq!(c.policy().queue_lens()[..3], [1, 0, 1]);
        // Qout holds 5 4 3 2. 5 was evicted with f = 1: it returns through Qout with f = 2
        // (queue 1) and evicts 6 (queue 0) into Qout.
        assert_eq!(c.policy().history_len(), 4);
        c.access(5, |_, _| {});
        assert_eq!(c.policy().queue_lens()[..3], [0, 1, 1]);
        assert_eq!(c.policy().history_len(), 4);
    }

    #[test]
    fn lifetime_demotes_idle_blocks() {
        // Capacity 3, lifetime 3: 1 reaches queue 1 at time 1 (f = 2, expires at 4). After
        // the insert of 4 (time 5) it has expired and sinks to the front of queue 0, which
        // holds [1 4 3]; 5, 6 and 7 then evict 3, 4 and 1, so the final 1 misses.
        let seq = [1, 1, 2, 3, 4, 5, 6, 7, 1];
        assert_eq!(miss_count("mq:lifetime=3", 3, &seq), 8);
        // With the default lifetime 1 stays in queue 1 (2..=5 are evicted from queue 0)
        // and the final access hits.
        assert_eq!(miss_count("mq", 3, &seq), 7);
    }

    #[test]
    fn params() {
        assert_eq!(
            crate::build("mq").unwrap().name(),
            "mq(queues=8,history=4,lifetime=10000)"
        );
        assert_eq!(
            crate::build("mq:n-queue=4,Qout-size-ratio=1,lifetime=5")
                .unwrap()
                .name(),
            "mq(queues=4,history=1,lifetime=5)"
        );
        assert!(crate::build("mq:queues=65").is_err());
    }

    #[test]
    fn contract_holds() {
        pinned::contract("mq");
    }
}
