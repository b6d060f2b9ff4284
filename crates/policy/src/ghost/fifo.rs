//! [`GhostFifo`]: a bounded FIFO of ghosts (keys of evicted blocks), each with a small
//! value, indexed by key so a miss can take its ghost out of the middle.
//!
//! Storage is the index-linked list of [`crate::list`] over a node slab plus a
//! [`KeyMap`] from key to node: remembering, taking and dropping the oldest are O(1) and
//! allocate nothing once the slab has grown to the capacity. Every ghost also gets a node
//! number, stable while it is remembered, so a policy can keep larger per-ghost data in a
//! side table of its own (LRU-K's reference times).

use crate::keymap::KeyMap;
use crate::list::{Links, List, NodeSlab};
use crate::Key;

/// A bounded FIFO of ghosts with values of type `V`; see the module docs.
#[derive(Debug, Default)]
pub struct GhostFifo<V> {
    capacity: usize,
    index: KeyMap<u32>,
    nodes: NodeSlab<(Key, V)>,
    links: Links,
    fifo: List,
}

impl<V: Copy> GhostFifo<V> {
    /// Number of ghosts remembered.
    #[inline]
    pub fn len(&self) -> usize {
        self.fifo.len()
    }

    /// Whether no ghost is remembered.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    /// The most ghosts kept.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Sets the most ghosts kept, dropping the oldest beyond it, and pre-sizes the index
    /// (up to 2^24 ghosts).
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        let g = capacity.min(1 << 24);
        self.links.reserve(g);
        self.index.reserve(g.saturating_sub(self.index.len()));
        while self.fifo.len() > capacity {
            self.drop_oldest();
        }
    }

    /// Remembers `key` (not already a ghost) as the newest ghost with `value`, dropping the
    /// oldest first when full, and returns its node number; with capacity 0 remembers
    /// nothing and returns `None`.
    #[inline]
    pub fn remember(&mut self, key: Key, value: V) -> Option<u32> {
        if self.capacity == 0 {
            return None;
        }
        if self.fifo.len() >= self.capacity {
            self.drop_oldest();
        }
        let node = self.nodes.alloc((key, value));
        self.fifo.push_front(&mut self.links, node);
        let old = self.index.insert(key, node);
        debug_assert!(old.is_none(), "key {key} remembered twice");
        Some(node)
    }

    /// Forgets ghost `key` and returns its node number (valid until the next
    /// [`GhostFifo::remember`]) and value, or `None` if `key` is not a ghost.
    #[inline]
    pub fn take(&mut self, key: Key) -> Option<(u32, V)> {
        let node = self.index.remove(&key)?;
        self.fifo.remove(&mut self.links, node);
        let value = self.nodes.get(node).1;
        self.nodes.release(node);
        Some((node, value))
    }

    /// Forgets the oldest ghost.
    #[inline]
    fn drop_oldest(&mut self) {
        if let Some(node) = self.fifo.pop_back(&mut self.links) {
            self.index.remove(&self.nodes.get(node).0);
            self.nodes.release(node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_the_oldest_and_takes_out_of_order() {
        let mut g = GhostFifo::<u32>::default();
        g.set_capacity(3);
        for k in 1..=3 {
            assert!(g.remember(k, k as u32 * 10).is_some());
        }
        assert_eq!(g.take(2).map(|(_, v)| v), Some(20));
        assert_eq!(g.take(2), None);
        g.remember(4, 40);
        g.remember(5, 50); // full (1, 3, 4): 1 leaves
        assert_eq!(g.len(), 3);
        assert_eq!(g.take(1), None);
        assert_eq!(g.take(3).map(|(_, v)| v), Some(30));
        g.set_capacity(1); // 4 leaves, 5 stays
        assert_eq!(g.take(4), None);
        assert_eq!(g.take(5).map(|(_, v)| v), Some(50));
        assert!(g.is_empty());
    }

    #[test]
    fn capacity_zero_remembers_nothing() {
        let mut g = GhostFifo::<()>::default();
        assert_eq!(g.remember(7, ()), None);
        assert_eq!(g.take(7), None);
        assert_eq!(g.len(), 0);
    }
}
