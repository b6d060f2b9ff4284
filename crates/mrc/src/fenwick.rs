//! A Fenwick (binary indexed) tree of 0/1 marks over access times, with compaction.
//!
//! Stack distance of an access = number of distinct keys touched since that key's previous
//! access = marks after its previous time. Each key keeps one mark at its last access
//! time; a new access moves the mark. Times only grow, so the tree would grow with the
//! trace; [`Marks::rebuild`] renumbers the live marks `0..n` (order kept) when the time
//! axis fills, so memory stays proportional to the live keys.
//!
//! Layout, for speed: the marks are a bitmap of 64-bit words and the Fenwick tree counts
//! marks per word, so it is 64 times smaller than the time axis (a million keys need a
//! 256 KiB tree that stays in cache) and a query is one tree walk plus one `popcount`.
//! Hand-written: no crate offers a compacting order-statistics tree over `u32` times.

/// 0/1 marks over times `0..capacity` with prefix counts in O(log n).
#[derive(Clone, Debug)]
pub struct Marks {
    bits: Vec<u64>,
    /// Fenwick tree over per-word counts, 1-based.
    tree: Vec<u32>,
    total: u64,
}

impl Marks {
    /// Room for times `0..capacity` (rounded up to a multiple of 64).
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

    /// Marks at words `< w`.
    #[inline]
    fn words_before(&self, w: usize) -> u64 {
        let mut i = w;
        let mut s = 0u64;
        while i > 0 {
            s += self.tree[i] as u64;
            i &= i - 1;
        }
        s
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
        self.bits[t / 64] &= !(1 << (t % 64));
        self.add_word(t / 64, -1);
        self.total -= 1;
    }

    /// Marks at times `<= t`.
    #[inline]
    pub fn prefix(&self, t: usize) -> u64 {
        let (w, b) = (t / 64, t % 64);
        let mask = if b == 63 {
            u64::MAX
        } else {
            (1u64 << (b + 1)) - 1
        };
        self.words_before(w) + (self.bits[w] & mask).count_ones() as u64
    }

    /// Marks at times `> t`.
    #[inline]
    pub fn after(&self, t: usize) -> u64 {
        self.total - self.prefix(t)
    }

    /// Marks at times `> t`, then unmarks `t` (which must be marked): one access's
    /// distance and the removal of its old mark.
    #[inline]
    pub fn take(&mut self, t: usize) -> u64 {
        let d = self.after(t);
        self.clear(t);
        d
    }

    /// The rank of every marked time among the marked times (`0` for the earliest), in
    /// O(1) per query after an O(words) pass: what compaction renumbers times to.
    pub fn ranks(&self) -> Ranks<'_> {
        let mut before = Vec::with_capacity(self.bits.len());
        let mut sum = 0u32;
        for w in &self.bits {
            before.push(sum);
            sum += w.count_ones();
        }
        Ranks {
            marks: self,
            before,
        }
    }

    /// Replaces the marks with times `0..live` all marked, room for `capacity` times.
    pub fn rebuild(&mut self, live: usize, capacity: usize) {
        let words = capacity.max(live + 1).div_ceil(64);
        self.bits = vec![0; words];
        for w in 0..live / 64 {
            self.bits[w] = u64::MAX;
        }
        if live & 63 != 0 {
            self.bits[live / 64] = (1u64 << (live % 64)) - 1;
        }
        // Build in O(n): leaf counts, then each node pushed to its parent.
        self.tree = vec![0; words + 1];
        for w in 0..words {
            self.tree[w + 1] = self.bits[w].count_ones();
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

/// Ranks of marked times, from [`Marks::ranks`].
pub struct Ranks<'a> {
    marks: &'a Marks,
    /// Marks in the words before each word.
    before: Vec<u32>,
}

impl Ranks<'_> {
    /// Marked times before `t`.
    #[inline]
    pub fn of(&self, t: u32) -> u32 {
        let (w, b) = (t as usize / 64, t % 64);
        let below = self.marks.bits[w] & ((1u64 << b) - 1);
        self.before[w] + below.count_ones()
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
        let r = m.ranks();
        assert_eq!((r.of(1), r.of(3), r.of(9)), (0, 1, 2));
        m.rebuild(3, 8);
        assert_eq!((m.total(), m.after(0), m.prefix(2)), (3, 2, 3));
        m.rebuild(130, 200);
        assert_eq!(
            (m.prefix(63), m.prefix(64), m.after(128), m.prefix(150)),
            (64, 65, 1, 130)
        );
        assert_eq!(m.capacity(), 256);
    }

    proptest! {
        #[test]
        fn matches_a_plain_bitmap(ops in prop::collection::vec((0usize..700, any::<bool>()), 1..400)) {
            let mut m = Marks::new(700);
            let mut plain = vec![false; 700];
            for (t, on) in ops {
                if on && !plain[t] {
                    m.set(t);
                    plain[t] = true;
                } else if !on && plain[t] {
                    prop_assert_eq!(m.take(t), plain[t + 1..].iter().filter(|&&x| x).count() as u64);
                    plain[t] = false;
                }
                let probe = (t * 7) % 700;
                prop_assert_eq!(m.prefix(probe), plain[..=probe].iter().filter(|&&x| x).count() as u64);
            }
        }
    }
}
