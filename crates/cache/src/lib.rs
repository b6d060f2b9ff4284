//! # cache
//!
//! The concurrent block cache on Lachesis's data path: a node's programmable caches
//! (Moirai's `createCache` / `removeCache` / `configureCache` / `createRule` /
//! `removeRule` / `getCacheStats`), each a [`CachePartition`] with its own capacity, eviction
//! policy (any [`policy`] spec, switched online by SOPA's reconstruction), admission
//! policy and [`WritePolicy`], in front of [`Backend`]s.
//!
//! Owns: partitions, rules, write policies, dirty tracking, dirty limits and write-back,
//! online resize / policy switch / removal, per-cache and per-tenant counters, recovery
//! files for dirty data that could not be written back, and both ends of exclusive levels
//! inside a cache ([`Exclusive`]: clean victims handed to a [`DemoteSink`], demoted blocks
//! inserted clean, reads that keep nothing at a lower level). Does not own: the network
//! (the `node` crate serves NBD and implements backends over upstream connections), sizes
//! (the controller decides them).
//!
//! The API is synchronous and blocking: the node calls it from
//! `tokio::task::spawn_blocking` or its own worker threads. Every call is safe to make
//! from many threads at once, data path and control alike.
//!
//! ## Guarantees
//! * A read returns the latest acknowledged write, whatever the controller does meanwhile
//!   (resize, switch, remove, write-policy change, rule changes).
//! * Write-back data is never lost by the cache: FLUSH and FUA complete only after the
//!   covered dirty blocks are on the backend; shrinking, leaving write-back, removing a
//!   rule or a cache write dirty blocks back before they leave.
//! * A partition holds at most its capacity in blocks once a call returns; the caches of a
//!   node never sum to more than its size.
//! * Dirty data stays within each cache's dirty limit (`partition::DirtyLimits`), evicted
//!   blocks the backend refuses included: past it a write fails with the backend's error
//!   instead of being acknowledged.
//!
//! How: see `partition` (one lock per partition, never held across I/O; fill, write-back
//! and per-block lock tables) and `node` (routing table held for the duration of a
//! request).

pub mod backend;
pub mod error;
pub mod ids;
pub mod node;
pub mod partition;
pub mod recovery;
pub mod rules;
pub mod stats;
pub mod striped;
pub mod volume;
pub mod write_log;
pub mod write_policy;

pub use backend::{Backend, FileBackend, MemBackend};
pub use error::{CacheError, Result};
pub use ids::{CacheId, RuleId};
pub use node::{CacheConfig, CacheNode};
pub use partition::{
    CachePartition, DemoteOutcome, DemoteSink, DirtyLimits, Exclusive, Lent, Route,
};
pub use recovery::DirtyBlock;
pub use rules::{Op, RoutingRule, Target};
pub use stats::{AccessObserver, CacheStats, OpOutcome, TenantSnapshot, TenantStats};
pub use striped::StripedBackend;
pub use volume::{Volume, VolumeTable};
pub use write_policy::WritePolicy;
