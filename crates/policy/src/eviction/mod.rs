//! Eviction policies, one per module, each opening with a sketch of its algorithm, the
//! paper it follows, and where it shines and fails.

pub mod arc;
pub mod lirs;
pub mod lru;
pub mod mq;
pub mod s3fifo;
pub mod sieve;
pub mod twoq;
