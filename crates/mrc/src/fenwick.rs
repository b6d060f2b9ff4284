//! A Fenwick (binary indexed) tree of 0/1 marks over access times, with compaction.
//!
//! Stack distance of an access = number of distinct keys touched since that key's previous
//! access = marks after its previous time. Each key keeps one mark at its last access
//! time; a new access moves the mark. Times only grow, so the tree would grow with the
//! trace; [`Marks::compact`] renumbers the live marks `0..n` (order kept) when the time
//! axis fills, so memory stays proportional to the live keys. Hand-written: no crate
//! offers a compacting order-statistics tree over `u32` times.

/// 0/1 marks over times `0..capacity` with prefix counts in O(log n).
#[derive(Clone, Debug)]
pub struct Marks {
    tree: Vec<u32>,
    total: u64,
}

impl Marks {
    /// Room for times `0..capacity`.
    pub fn new(capacity: usize) -> Self {
        Marks {
            tree: vec![0; capacity.max(1) + 1],
            total: 0,
        }
    }

    /// Times that fit.
    pub fn capacity(&self) -> usize {
        self.tree.len() - 1
    }

    /// Live marks.
    pub fn total(&self) -> u64 {
        self.total
    }

    #[inline]
    fn add(&mut self, t: usize, delta: i32) {
        let mut i = t + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
        self.total = self.total.wrapping_add_signed(delta as i64);
    }

    /// Marks time `t`.
    #[inline]
    pub fn set(&mut self, t: usize) {
        self.add(t, 1)
    }

    /// Unmarks time `t` (which must be marked).
    #[inline]
    pub fn clear(&mut self, t: usize) {
        self.add(t, -1)
    }

    /// Marks at times `<= t`.
    #[inline]
    pub fn prefix(&self, t: usize) -> u64 {
        let mut i = t + 1;
        let mut s = 0u64;
        while i > 0 {
            s += self.tree[i] as u64;
            i &= i - 1;
        }
        s
    }

    /// Marks at times `> t`.
    #[inline]
    pub fn after(&self, t: usize) -> u64 {
        self.total - self.prefix(t)
    }

    /// Rebuilds the tree with the given live times renumbered to `0..n` in order, sized for
    /// `capacity` times. `times` must be sorted.
    pub fn rebuild(&mut self, live: usize, capacity: usize) {
        self.tree = vec![0; capacity.max(live + 1) + 1];
        self.total = 0;
        // Build in O(n): set leaf counts then push each to its parent.
        for t in 0..live {
            self.tree[t + 1] += 1;
        }
        for i in 1..self.tree.len() {
            let j = i + (i & i.wrapping_neg());
            if j < self.tree.len() {
                self.tree[j] += self.tree[i];
            }
        }
        self.total = live as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_after() {
        let mut m = Marks::new(16);
        for t in [1, 3, 5, 9] {
            m.set(t);
        }
        assert_eq!(m.after(3), 2);
        assert_eq!(m.after(0), 4);
        m.clear(5);
        assert_eq!(m.after(3), 1);
        m.rebuild(3, 8);
        assert_eq!((m.total(), m.after(0), m.prefix(2)), (3, 2, 3));
    }
}
