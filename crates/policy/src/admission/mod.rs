//! Admission (placement) policies: whether a missed block enters the cache at all.
//!
//! SANCACHE places a chunk on the fast tier only after it has proved itself; the same
//! rules serve any Lachesis partition. A policy sees every access (resident or not) and,
//! for a miss, answers whether to place the block. Implementations:
//! * [`Demand`]: every miss is placed (the classic cache).
//! * threshold (MFU), MRFU with cooling and a sequential filter, and SANCACHE's adaptive
//!   threshold live in their own modules.

use crate::policy::Key;

/// Decides which missed blocks are placed in the cache.
pub trait AdmissionPolicy: Send {
    /// Canonical name with parameters.
    fn name(&self) -> String;

    /// One access to `key`; `resident` tells whether it hit. For a miss the return value
    /// says whether to place the block; for a hit it is ignored.
    fn access(&mut self, key: Key, resident: bool) -> bool;

    /// A placed block was evicted (a migration's benefit window is over).
    fn on_evict(&mut self, _key: Key) {}
}

/// Demand placement: every missed block is placed.
#[derive(Clone, Debug, Default)]
pub struct Demand;

impl AdmissionPolicy for Demand {
    fn name(&self) -> String {
        "demand".into()
    }
    fn access(&mut self, _key: Key, _resident: bool) -> bool {
        true
    }
}
