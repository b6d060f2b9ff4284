//! [`GhostRing`]: a FIFO of ghost keys (keys of evicted blocks) whose entries can also be
//! removed out of order, for policies whose ghost lists are never reordered (ARC's B1 and
//! B2: a ghost is only ever pushed at the front, dropped at the back, or removed when it is
//! hit).
//!
//! The keys sit in a power-of-two ring indexed by a sequence number that wraps at
//! [`SEQ_MASK`] (30 bits, so it fits a directory tag with a bit to spare); the policy's
//! index (ARC: the cache's directory, see [`crate::policy::Directory`]) holds each live
//! ghost's sequence number. Removing a ghost out of order
//! sets its cell's bit in a small bitmap (a tombstone) instead of unlinking it, and dropping
//! the oldest ghost reads the ring's back, skipping tombstones. Compared with an intrusive
//! list over a node slab, a push and a drop touch only the ring's two ends (sequential
//! memory) and a removal one bit in a bitmap an eighth of a byte per cell, where the list
//! touched a node and its two neighbours at random.
//!
//! The ring grows by doubling when it is full of mostly live ghosts; sequence numbers stay
//! valid across growth because a cell's index is its sequence number masked by the
//! capacity. When it is full of mostly tombstones it compacts in place instead and
//! renumbers the live ghosts through a callback, so its memory stays proportional to the ghosts
//! it holds.

use crate::Key;

/// Sequence numbers are taken modulo `SEQ_MASK + 1` (2^30).
pub const SEQ_MASK: u32 = (1 << 30) - 1;

/// A FIFO of ghost keys with out-of-order removal; see the module docs.
#[derive(Clone, Debug, Default)]
pub struct GhostRing {
    /// Ring cells; the length is zero or a power of two.
    keys: Vec<Key>,
    /// One bit per cell: set when the cell's ghost was removed out of order.
    dead: Vec<u64>,
    /// Sequence number of the next push.
    head: u32,
    /// Sequence number of the oldest cell (live or dead).
    tail: u32,
    /// Live ghosts.
    live: usize,
}

impl GhostRing {
    /// Number of live ghosts.
    #[inline]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no ghost is live.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    #[inline]
    fn mask(&self) -> u32 {
        (self.keys.len() as u32).wrapping_sub(1)
    }

    #[inline]
    fn span(&self) -> usize {
        (self.head.wrapping_sub(self.tail) & SEQ_MASK) as usize
    }

    #[inline]
    fn next(s: u32) -> u32 {
        s.wrapping_add(1) & SEQ_MASK
    }

    #[inline]
    fn is_dead(&self, i: u32) -> bool {
        self.dead[(i >> 6) as usize] & (1 << (i & 63)) != 0
    }

    /// Makes room for at least `n` cells without growing later (rounded up to a power of
    /// two).
    pub fn reserve(&mut self, n: usize) {
        let want = n.max(16).next_power_of_two();
        if self.keys.len() < want {
            self.resize(want);
        }
    }

    /// Moves the cells into a ring of `cap` cells (a power of two at least the span).
    fn resize(&mut self, cap: usize) {
        assert!(cap.is_power_of_two() && cap >= self.span() && cap <= 1 << 29);
        let mut keys = vec![0; cap];
        let mut dead = vec![0u64; cap.div_ceil(64)];
        let new_mask = (cap - 1) as u32;
        let mut s = self.tail;
        while s != self.head {
            let (i, j) = (s & self.mask(), s & new_mask);
            keys[j as usize] = self.keys[i as usize];
            if self.is_dead(i) {
                dead[(j >> 6) as usize] |= 1 << (j & 63);
            }
            s = Self::next(s);
        }
        self.keys = keys;
        self.dead = dead;
    }

    /// Appends `key` at the front and returns its sequence number, which the caller
    /// records for `key`. A full ring of mostly tombstones is compacted first, and
    /// `renumber(key, seq)` is called for every live ghost whose number changes.
    #[inline]
    pub fn push(&mut self, key: Key, renumber: impl FnMut(Key, u32)) -> u32 {
        if self.span() == self.keys.len() {
            self.make_room(renumber);
        }
        let s = self.head;
        let i = s & self.mask();
        self.keys[i as usize] = key;
        self.head = Self::next(s);
        self.live += 1;
        s
    }

    #[cold]
    fn make_room(&mut self, mut renumber: impl FnMut(Key, u32)) {
        if self.live * 2 > self.keys.len() || self.keys.is_empty() {
            self.resize((self.keys.len() * 2).max(16));
            return;
        }
        // Compact in place: live cells move towards the back, keeping their order.
        let mask = self.mask();
        let (mut from, mut to) = (self.tail, self.tail);
        while from != self.head {
            let i = from & mask;
            if self.is_dead(i) {
                self.dead[(i >> 6) as usize] &= !(1 << (i & 63));
            } else {
                let key = self.keys[i as usize];
                self.keys[(to & mask) as usize] = key;
                if to != from {
                    renumber(key, to);
                }
                to = Self::next(to);
            }
            from = Self::next(from);
        }
        self.head = to;
    }

    /// Whether `key` is the live ghost with sequence number `seq` (false for a number
    /// that was dropped, removed, or reused by another key since).
    #[inline]
    pub fn holds(&self, seq: u32, key: Key) -> bool {
        let i = seq & self.mask();
        (seq.wrapping_sub(self.tail) & SEQ_MASK) < self.span() as u32
            && !self.is_dead(i)
            && self.keys[i as usize] == key
    }

    /// Removes the live ghost with sequence number `seq` (a ghost hit).
    #[inline]
    pub fn remove(&mut self, seq: u32) {
        let i = seq & self.mask();
        debug_assert!(
            !self.is_dead(i) && (seq.wrapping_sub(self.tail) & SEQ_MASK) < self.span() as u32
        );
        self.live -= 1;
        if seq == self.tail {
            self.tail = Self::next(seq);
            self.skip_dead();
        } else {
            self.dead[(i >> 6) as usize] |= 1 << (i & 63);
        }
    }

    /// Advances the back past tombstones, clearing them.
    #[inline]
    fn skip_dead(&mut self) {
        let mask = self.mask();
        while self.tail != self.head {
            let i = self.tail & mask;
            let w = &mut self.dead[(i >> 6) as usize];
            if *w & (1 << (i & 63)) == 0 {
                break;
            }
            *w &= !(1 << (i & 63));
            self.tail = Self::next(self.tail);
        }
    }

    /// The oldest live ghost (the next [`GhostRing::pop_back`]), if it is at the back
    /// already (always so right after a pop or a removal, which skip tombstones).
    #[inline]
    pub fn back(&self) -> Option<Key> {
        if self.tail == self.head || self.is_dead(self.tail & self.mask()) {
            return None;
        }
        Some(self.keys[(self.tail & self.mask()) as usize])
    }

    /// Removes and returns the oldest live ghost.
    #[inline]
    pub fn pop_back(&mut self) -> Option<Key> {
        // Every call that can leave a tombstone at the back (a removal at the back, a
        // pop) skips past it before returning, so the back is live here.
        debug_assert!(self.tail == self.head || !self.is_dead(self.tail & self.mask()));
        if self.tail == self.head {
            return None;
        }
        let key = self.keys[(self.tail & self.mask()) as usize];
        self.tail = Self::next(self.tail);
        self.live -= 1;
        self.skip_dead();
        Some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Random pushes, pops and out-of-order removals against a `VecDeque` model, through
    /// growth and compaction.
    #[test]
    fn matches_a_deque() {
        // Start just before the sequence numbers wrap.
        let mut ring = GhostRing {
            head: SEQ_MASK - 1000,
            tail: SEQ_MASK - 1000,
            ..GhostRing::default()
        };
        let mut map = crate::keymap::KeyMap::<u32>::default();
        let mut model: VecDeque<Key> = VecDeque::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next_key = 0u64;
        let mut max_live = 0;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Phases: grow, then churn with many removals (compaction), then drain.
            let r = x % 100;
            let phase = step / 50_000;
            if (phase == 0 && r < 70) || (phase == 1 && r < 50) || (phase == 2 && r < 35) {
                let k = next_key;
                next_key += 1;
                let s = ring.push(k, |k, s| *map.get_mut(&k).unwrap() = s);
                map.insert(k, s);
                model.push_front(k);
            } else if !model.is_empty() && (r.is_multiple_of(2) || phase == 1) {
                let idx = (x >> 20) as usize % model.len();
                let k = model.remove(idx).unwrap();
                ring.remove(map.remove(&k).unwrap());
            } else {
                let got = ring.pop_back();
                assert_eq!(got, model.pop_back());
                if let Some(k) = got {
                    map.remove(&k).unwrap();
                }
            }
            assert_eq!(ring.len(), model.len());
            max_live = max_live.max(model.len());
            assert!(
                ring.keys.len() <= 4 * max_live.max(16),
                "{} {max_live}",
                ring.keys.len()
            );
        }
        while let Some(k) = model.pop_back() {
            assert_eq!(ring.pop_back(), Some(k));
        }
        assert_eq!(ring.pop_back(), None);
    }
}
