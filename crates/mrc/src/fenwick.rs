//! 0/1 marks over access times with prefix counts, and compaction.
//!
//! Stack distance of an access = number of distinct keys touched since that key's previous
//! access = marks after its previous time. Each key keeps one mark at its last access
//! time; a new access moves the mark. Times only grow, so the axis would grow with the
//! trace; [`Marks::rebuild`] renumbers the live marks `0..n` (order kept) when it fills,
//! so memory stays proportional to the live keys.
//!
//! Layout: the marks are a bitset (one bit per time) and a Fenwick (binary indexed) tree
//! counts them per 64-bit word. A prefix count is a Fenwick prefix over whole words plus
//! a popcount of the last word. For a million live keys the bitset is 512 KiB and the tree
//! 256 KiB — both stay in the L2 cache, where a plain Fenwick tree over times (16 MiB)
//! would miss to memory at every level. Hand-written: no crate offers a compacting
//! order-statistics structure over a bit axis.

/// 0/1 marks over times `0..capacity` with prefix counts in O(log n).
#[derive(Clone, Debug)]
pub struct Marks {
    bits: Vec<u64>,
    tree: Vec<u32>,
    total: u64,
}

impl Marks {
    /// Room for times `0..capacity`.
    pub fn new(capacity: usize) -> Self {
        let words = capacity.max(1).div_ceil(64);
        Marks {
            bits: vec![0; words],
            tree: vec![0; words + 1],
            total: 0,
        }
    }

    /// Times that fit.
    pub fn capacity(&self) -> usize {
        self.bits.len() * 64
    }

    /// Live marks.
    pub fn total(&self) -> u64 {
        self.total
    }

    #[inline]
    fn add_word(&mut self, w: usize, delta: i32) {
        let mut i = w + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Marks time `t` (which must be unmarked).
    #[inline]
    pub fn set(&mut self, t: usize) {
        self.bits[t / 64] |= 1 << (t % 64);
        self.add_word(t / 64, 1);
        self.total += 1;
    }

    /// Unmarks time `t` (which must be marked).
    #[inline]
    pub fn clear(&mut self, t: usize) {
        self.bits[t / 64] &= !(1u64 << (t % 64));
        self.add_word(t / 64, -1);
        self.total -= 1;
    }

    /// Marks at times `<= t`.
    #[inline]
    pub fn prefix(&self, t: usize) -> u64 {
        let w = t / 64;
        let mut i = w; // whole words 0..w
        let mut s = 0u64;
        while i > 0 {
            s += self.tree[i] as u64;
            i &= i - 1;
        }
        let mask = if t % 64 == 63 {
            u64::MAX
        } else {
            (1u64 << (t % 64 + 1)) - 1
        };
        s + (self.bits[w] & mask).count_ones() as u64
    }

    /// Marks at times `> t`.
    #[inline]
    pub fn after(&self, t: usize) -> u64 {
        self.total - self.prefix(t)
    }

    /// Resets to `live` marks at times `0..live`, with room for `capacity` times.
    pub fn rebuild(&mut self, live: usize, capacity: usize) {
        let words = capacity.max(live + 1).div_ceil(64);
        self.bits = vec![0; words];
        for t in 0..live {
            self.bits[t / 64] |= 1 << (t % 64);
        }
        self.tree = vec![0; words + 1];
        for (w, b) in self.bits.iter().enumerate() {
            self.tree[w + 1] = b.count_ones();
        }
        // Build the Fenwick tree in O(n): push each node's sum to its parent.
        for i in 1..self.tree.len() {
            let j = i + (i & i.wrapping_neg());
            if j < self.tree.len() {
                self.tree[j] += self.tree[i];
            }
        }
        self.total = live as u64;
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.bits.capacity() * 8 + self.tree.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    proptest! {
        #[test]
        fn prefix_matches_a_plain_array(ops in prop::collection::vec((0usize..700, any::<bool>()), 1..400), q in 0usize..700) {
            let mut m = Marks::new(700);
            let mut plain = vec![false; 700];
            for (t, on) in ops {
                if on && !plain[t] { m.set(t); plain[t] = true; }
                if !on && plain[t] { m.clear(t); plain[t] = false; }
            }
            prop_assert_eq!(m.prefix(q), plain[..=q].iter().filter(|&&b| b).count() as u64);
            prop_assert_eq!(m.total(), plain.iter().filter(|&&b| b).count() as u64);
        }
    }
}
