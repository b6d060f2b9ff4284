//! Eviction policies, one per module, each opening with a sketch of its algorithm, the
//! paper it follows, and where it shines and fails.

pub mod arc;
pub mod clock;
pub mod fifo;
pub mod lfu;
pub mod lirs;
pub mod lrfu;
pub mod lru;
pub mod lruk;
pub mod mq;
pub mod mru;
pub mod s3fifo;
pub mod sieve;
pub mod twoq;
