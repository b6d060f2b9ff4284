//! Eviction policies, one per module, each opening with a sketch of its algorithm, the
//! paper it follows, and where it shines and fails.

pub mod lru;
