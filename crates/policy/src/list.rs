//! Index-linked doubly linked lists over a shared link array (the `linked_slab` idea of
//! quick_cache): nodes are `u32` indices, links live in one `Vec`, no per-node allocation
//! and no `unsafe`. Several lists may share one [`Links`] array as long as a node is in at
//! most one of them at a time (2Q's queues, ARC's T1/T2, S3-FIFO's small/main).
//!
//! Front = most recently pushed ("head", MRU end); back = oldest ("tail", LRU end).

use crate::prefetch::prefetch_at;

/// The "no node" index.
pub const NIL: u32 = u32::MAX;

/// Previous and next node of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// Towards the front (newer); `NIL` at the front.
    pub prev: u32,
    /// Towards the back (older); `NIL` at the back.
    pub next: u32,
}

const UNLINKED: Link = Link {
    prev: NIL,
    next: NIL,
};

/// The link array shared by one or more lists.
#[derive(Clone, Debug, Default)]
pub struct Links {
    links: Vec<Link>,
}

impl Links {
    /// Makes sure node `i` has a link cell.
    #[inline]
    pub fn ensure(&mut self, i: u32) {
        let need = i as usize + 1;
        if self.links.len() < need {
            self.links
                .resize(need.max(self.links.len() * 2).max(16), UNLINKED);
        }
    }

    /// The link of node `i`.
    #[inline]
    pub fn get(&self, i: u32) -> Link {
        self.links[i as usize]
    }

    /// Starts loading node `i`'s link cell, if it has one ([`crate::prefetch`]; a hint
    /// for [`crate::EvictionPolicy::prefetch`]).
    #[inline]
    pub fn prefetch(&self, i: u32) {
        prefetch_at(&self.links, i as usize);
    }

    /// Reads node `i`'s link cell and starts loading its two neighbours' cells: with
    /// [`Links::prefetch`] of `i` earlier, the cells an unlink of `i` writes.
    #[inline]
    pub fn prefetch_neighbours(&self, i: u32) {
        if let Some(l) = self.links.get(i as usize) {
            prefetch_at(&self.links, l.prev as usize);
            prefetch_at(&self.links, l.next as usize);
        }
    }

    /// Pre-sizes the array for nodes `0..n`.
    pub fn reserve(&mut self, n: usize) {
        if self.links.len() < n {
            self.links.resize(n, UNLINKED);
        }
    }
}

/// One list: its two ends and its length. The links are in a [`Links`] passed to each call.
#[derive(Clone, Copy, Debug)]
pub struct List {
    head: u32,
    tail: u32,
    len: usize,
}

impl Default for List {
    fn default() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl List {
    /// Number of nodes in the list.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The newest node, if any.
    #[inline]
    pub fn front(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// The oldest node, if any.
    #[inline]
    pub fn back(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// Inserts unlinked node `i` at the front.
    #[inline]
    pub fn push_front(&mut self, links: &mut Links, i: u32) {
        links.ensure(i);
        links.links[i as usize] = Link {
            prev: NIL,
            next: self.head,
        };
        if self.head != NIL {
            links.links[self.head as usize].prev = i;
        } else {
            self.tail = i;
        }
        self.head = i;
        self.len += 1;
    }

    /// Inserts unlinked node `i` at the back.
    #[inline]
    pub fn push_back(&mut self, links: &mut Links, i: u32) {
        links.ensure(i);
        links.links[i as usize] = Link {
            prev: self.tail,
            next: NIL,
        };
        if self.tail != NIL {
            links.links[self.tail as usize].next = i;
        } else {
            self.head = i;
        }
        self.tail = i;
        self.len += 1;
    }

    /// Unlinks node `i`, which must be in this list.
    #[inline]
    pub fn remove(&mut self, links: &mut Links, i: u32) {
        let Link { prev, next } = links.links[i as usize];
        if prev != NIL {
            links.links[prev as usize].next = next;
        } else {
            debug_assert_eq!(self.head, i);
            self.head = next;
        }
        if next != NIL {
            links.links[next as usize].prev = prev;
        } else {
            debug_assert_eq!(self.tail, i);
            self.tail = prev;
        }
        links.links[i as usize] = UNLINKED;
        self.len -= 1;
    }

    /// Removes and returns the oldest node.
    #[inline]
    pub fn pop_back(&mut self, links: &mut Links) -> Option<u32> {
        let t = self.back()?;
        self.remove(links, t);
        Some(t)
    }

    /// Removes and returns the newest node.
    #[inline]
    pub fn pop_front(&mut self, links: &mut Links) -> Option<u32> {
        let h = self.front()?;
        self.remove(links, h);
        Some(h)
    }

    /// Moves node `i` (in this list) to the front.
    #[inline]
    pub fn move_to_front(&mut self, links: &mut Links, i: u32) {
        if self.head != i {
            self.remove(links, i);
            self.push_front(links, i);
        }
    }

    /// The node after `i` towards the back.
    #[inline]
    pub fn next(&self, links: &Links, i: u32) -> Option<u32> {
        let n = links.links[i as usize].next;
        (n != NIL).then_some(n)
    }

    /// The node before `i` towards the front.
    #[inline]
    pub fn prev(&self, links: &Links, i: u32) -> Option<u32> {
        let p = links.links[i as usize].prev;
        (p != NIL).then_some(p)
    }

    /// Iterates from the front (newest) to the back (oldest).
    pub fn iter<'a>(&self, links: &'a Links) -> impl Iterator<Item = u32> + 'a {
        let mut cur = self.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                None
            } else {
                let c = cur;
                cur = links.links[c as usize].next;
                Some(c)
            }
        })
    }
}

/// A slab of nodes with keys for policies that remember blocks by key (ghost entries,
/// LIRS's non-resident HIR blocks): node indices are recycled through a free list.
#[derive(Clone, Debug, Default)]
pub struct NodeSlab<T> {
    nodes: Vec<T>,
    free: Vec<u32>,
}

impl<T> NodeSlab<T> {
    /// Stores `value` in a free node and returns its index.
    #[inline]
    pub fn alloc(&mut self, value: T) -> u32 {
        if let Some(i) = self.free.pop() {
            self.nodes[i as usize] = value;
            i
        } else {
            self.nodes.push(value);
            (self.nodes.len() - 1) as u32
        }
    }

    /// Returns node `i` to the free list.
    #[inline]
    pub fn release(&mut self, i: u32) {
        self.free.push(i);
    }

    /// Node `i`.
    #[inline]
    pub fn get(&self, i: u32) -> &T {
        &self.nodes[i as usize]
    }

    /// Node `i`, mutably.
    #[inline]
    pub fn get_mut(&mut self, i: u32) -> &mut T {
        &mut self.nodes[i as usize]
    }

    /// Number of live nodes.
    pub fn live(&self) -> usize {
        self.nodes.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_remove_order() {
        let mut links = Links::default();
        let mut l = List::default();
        for i in 0..5 {
            l.push_front(&mut links, i);
        }
        assert_eq!(l.iter(&links).collect::<Vec<_>>(), vec![4, 3, 2, 1, 0]);
        l.remove(&mut links, 2);
        l.move_to_front(&mut links, 0);
        assert_eq!(l.iter(&links).collect::<Vec<_>>(), vec![0, 4, 3, 1]);
        assert_eq!(l.pop_back(&mut links), Some(1));
        assert_eq!(l.len(), 3);
        l.push_back(&mut links, 9);
        assert_eq!(l.back(), Some(9));
    }
}
