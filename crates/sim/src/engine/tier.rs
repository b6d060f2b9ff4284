//! A storage server's SANCACHE hot-chunk tier in the simulator: which chunks are on the
//! fast device (an LRU of chunks), which missed chunks are placed (the admission policy,
//! fed the simulated clock so its periods are of time), and the migrations that copy
//! them there.
//!
//! As published (SANCACHE §3, §3.2):
//! * a request's piece in one chunk touches the chunk once; a resident chunk is served
//!   from the fast device; a chunk whose copy is still under way waits for it;
//! * a miss the admission policy admits becomes a migration, run in the background by one
//!   of `migration_threads` copy threads: the chunk is read from the disk (one operation
//!   for the whole chunk, queued at the disk like any request) and written to the fast
//!   device; the request that triggered it is served from the disk and does not wait for
//!   the copy. When every thread is busy the migration is deferred, not dropped: the
//!   policy is told ([`policy::admission::AdmissionPolicy::deferred`]), the chunk keeps
//!   its count and is placed at a later access;
//! * the tier is exclusive of the server's RAM cache: when a chunk is placed, its clean
//!   blocks leave the tenant's level-2 partition, blocks read from the tier are not kept
//!   there, and level 1's clean victims of a placed chunk are not demoted there;
//! * the controller's threshold (`plan.boost`) is set on the running policy, which keeps
//!   every candidate's count.
//!
//! Does not own: the disk's and the RAM cache's service (`below`, `serve`).

use crate::queue::Station;
use crate::scenario::{HotTier, Scenario};
use crate::SimError;
use control::BoostPlan;
use policy::admission::AdmissionPolicy;
use policy::{BlockCache, EvictionPolicy};

/// A storage server's hot-chunk tier.
pub(super) struct Tier {
    /// The chunks on the fast device (LRU; placement is decided by `admission`).
    pub(super) cache: BlockCache<Box<dyn EvictionPolicy>>,
    /// Which missed chunks are placed.
    pub(super) admission: Box<dyn AdmissionPolicy>,
    /// The fast device.
    pub(super) dev: Station,
    pub(super) chunk_blocks: u64,
    /// Chunk accesses served by the tier (this interval).
    pub(super) hits: u64,
    /// Migrations started (this interval).
    pub(super) migrations: u64,
    /// Admitted misses deferred because no copy thread was free (whole run).
    pub(super) deferred: u64,
    /// Per tenant, whether its blocks may be placed (SANCACHE boosts selected volumes).
    pub(super) volumes: Option<Vec<bool>>,
    /// Per slot of `cache`: when its chunk's copy is complete.
    ready: Vec<f64>,
    /// Per copy thread: when it is free.
    threads: Vec<f64>,
}

/// What a touch of one chunk found.
pub(super) enum Touch {
    /// Resident: served from the fast device from this time on.
    Hit(f64),
    /// Not resident; `migrate`: a copy thread took it, starting at this time.
    Miss { migrate: Option<usize> },
}

impl Tier {
    /// The tier `spec` describes, on the device `dev`.
    pub(super) fn new(sc: &Scenario, spec: &HotTier, dev: Station) -> Result<Tier, SimError> {
        let admission =
            policy::admission::build_admission(&spec.admission).map_err(SimError::Policy)?;
        let lru = policy::build("lru").map_err(SimError::Policy)?;
        Ok(Tier {
            cache: BlockCache::new(spec.chunks as usize, lru),
            admission,
            dev,
            chunk_blocks: spec.chunk_blocks,
            hits: 0,
            migrations: 0,
            deferred: 0,
            volumes: spec
                .volumes
                .as_ref()
                .map(|v| (0..sc.tenants.len()).map(|i| v.contains(&i)).collect()),
            ready: Vec::new(),
            threads: vec![0.0; spec.migration_threads.max(1) as usize],
        })
    }

    /// Whether tenant `i`'s blocks may be placed.
    pub(super) fn boosts(&self, i: usize) -> bool {
        self.volumes
            .as_ref()
            .map_or(true, |v| v.get(i) == Some(&true))
    }

    /// Whether `chunk` (a chunk key) is placed (its copy may still be under way).
    pub(super) fn holds(&self, chunk: u64) -> bool {
        self.cache.lookup(chunk).is_some()
    }

    /// The controller's setting: its threshold on the running policy (counts kept).
    pub(super) fn apply(&mut self, b: &BoostPlan) {
        if self.admission.threshold() != Some(b.threshold) {
            self.admission.set_threshold(b.threshold);
        }
    }

    /// One access at `at` to `chunk`: the policy sees it, a resident chunk is refreshed, an
    /// admitted miss takes a free copy thread or is deferred.
    pub(super) fn touch(&mut self, chunk: u64, at: f64) -> Touch {
        self.admission.tick(at);
        if let Some(slot) = self.cache.lookup(chunk) {
            self.admission.access(chunk, true);
            self.cache.access_slot(slot);
            self.hits += 1;
            let ready = self.ready.get(slot as usize).copied().unwrap_or(0.0);
            return Touch::Hit(ready.max(at));
        }
        if !self.admission.access(chunk, false) {
            return Touch::Miss { migrate: None };
        }
        match self.threads.iter().position(|&free| free <= at) {
            Some(k) => Touch::Miss { migrate: Some(k) },
            None => {
                self.admission.deferred(chunk);
                self.deferred += 1;
                Touch::Miss { migrate: None }
            }
        }
    }

    /// Places `chunk` (copy thread `thread` copies it, done at `ready`); the evicted chunk,
    /// if any, is returned.
    pub(super) fn place(&mut self, chunk: u64, thread: usize, ready: f64) -> Option<u64> {
        let mut evicted = None;
        let admission = &mut self.admission;
        if let policy::Access::Inserted(slot) = self.cache.access(chunk, |k, _| {
            admission.on_evict(k);
            evicted = Some(k);
        }) {
            let s = slot as usize;
            if s >= self.ready.len() {
                self.ready.resize(s + 1, 0.0);
            }
            self.ready[s] = ready;
        }
        self.migrations += 1;
        self.threads[thread] = ready;
        evicted
    }
}
