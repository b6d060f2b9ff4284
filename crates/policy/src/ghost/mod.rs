//! Ghosts: keys of evicted blocks that a policy remembers (with a little data each) so a
//! block that comes back soon can be treated differently from a new one.
//!
//! Two shapes, one per way policies use them:
//! * [`GhostFifo`]: a bounded FIFO of ghosts with their own index, dropped oldest first
//!   when full and taken out of order when the block is missed again. 2Q's A1out,
//!   S3-FIFO's G, MQ's Qout (with each block's count) and LRU-K's retained histories use
//!   it.
//! * [`GhostRing`]: a FIFO of keys without an index of its own, whose sequence numbers the
//!   cache's directory holds as ghost tags (ARC's B1 and B2, see
//!   [`crate::policy::Directory`]), so a ghost lookup costs no extra hash probe.

mod fifo;
mod ring;

pub use fifo::GhostFifo;
pub use ring::{GhostRing, SEQ_MASK};
