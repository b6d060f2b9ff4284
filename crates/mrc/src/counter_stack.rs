//! [`CounterStack`]: how many distinct keys the whole trace touched since a past moment,
//! to within a few per cent, for any moment, in bounded memory (the counter stacks of
//! Wires et al., OSDI'14, with HyperLogLog counters).
//!
//! SHARDS estimates a sampled reuse's distance as the sampled keys in between over the
//! rate. At rate 0.01 a distance of 10,000 rests on about 100 sampled keys (±10 %), and
//! the error is shared by every reuse that spans the same stretch of the trace, so it
//! moves the curve sideways instead of averaging out. On the shared trace, with the
//! sampled reuses given their true distances, the error of fixed-rate SHARDS at rate
//! 0.01 and the default salt falls from 0.009 to 0.001 (4 KiB blocks) and from 0.022 to
//! 0.011 (objects).
//!
//! A stack starts a counter every `epoch` accesses; every access goes into all of them.
//! The counter started at `s` holds the distinct keys of `[s, now)`. A reuse whose
//! previous access was at `t` has a true distance between the count of the first counter
//! started after `t` and the count of the last counter started at or before `t` (less the
//! key itself), and [`CounterStack::stretch`] gives those two numbers. With the sample's
//! keys tracked too, it also tells how many of them were seen since the later counter
//! started, so the sampler can take the whole trace's count for the stretch the counter
//! covers and its own estimate only for the gap before it (less than one epoch), and
//! clamp the sum into the bracket.
//!
//! Cost: an older counter has seen every access a newer one has, so its registers are at
//! least as large; an update walks from the newest counter and stops at the first that
//! already holds the rank. On a 10 M-request Zipf trace 62 % of accesses stop at the
//! newest (one load and compare), 18 % go past the previous counter, and older counters
//! take 1.7 register updates per access on average: fixed-rate SHARDS runs at 20–25 M
//! requests/s with the stack against about 60 without. Each counter keeps its register
//! histogram, so its estimate (Ertl's, as in
//! [`DistinctCounter`](crate::distinct::DistinctCounter)) takes `O(ranks)`, not
//! `O(registers)`. Memory: [`MAX_COUNTERS`] counters of 16 KiB (2 MiB, allocated up
//! front); when they are all in use every other one is dropped and the epoch doubles,
//! so the counters always cover the trace at 1/64 to 1/128 of its length.
//!
//! Written here because no crate keeps HyperLogLog counters nested this way; the
//! registers are fed the sampling hash already computed, from bits the sampling test does
//! not look at (index from the low 14 bits, rank from the trailing zeros of the 30 above
//! them; the sampling test looks at the top bits, 12 of them at rate 2^-12), so the
//! counters' errors do not depend on which keys are sampled.

use crate::distinct::estimate_from_ranks;

/// Index bits of a counter: 16,384 one-byte registers, standard error 0.8 %.
const P: u32 = 14;
const REGISTERS: usize = 1 << P;
/// Hash bits a rank is taken from (above the index bits, below the bits the sampling
/// test looks at for rates down to 2^-12).
const Q: u32 = 30;
/// Most counters kept.
pub const MAX_COUNTERS: usize = 128;
/// Accesses per epoch at the start (doubles each time the stack is thinned).
const FIRST_EPOCH: u64 = 1024;

/// What a counter knows besides its registers: when it started and how many of its
/// registers hold each rank (all its estimate needs).
#[derive(Clone, Debug)]
struct Tally {
    start: u64,
    /// `ranks[r]` = registers holding rank `r`.
    ranks: [u32; Q as usize + 2],
    /// Tracked keys (see [`CounterStack::track`]) last seen in this counter's epoch.
    tracked: u64,
}

impl Tally {
    fn new(start: u64) -> Self {
        let mut ranks = [0; Q as usize + 2];
        ranks[0] = REGISTERS as u32;
        Tally {
            start,
            ranks,
            tracked: 0,
        }
    }

    /// Notes one register going from rank `from` to `to`.
    #[inline]
    fn moved(&mut self, from: u8, to: u8) {
        self.ranks[from as usize] -= 1;
        self.ranks[to as usize] += 1;
    }

    /// Distinct keys since `start` (Ertl's improved raw estimator).
    fn estimate(&self) -> f64 {
        estimate_from_ranks(&self.ranks)
    }
}

/// What the counters know of the stretch of the trace since a key's previous access: the
/// distinct keys other than it lie between `low` and `high` (each ±0.8 %). `low` counts
/// from the first epoch start after the access (0 when there is none); the tracked keys
/// seen since that start are `tracked_since_low`, so a sample that knows how many of its
/// keys it saw since the previous access can tell how many fell in the gap before `low`
/// begins.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stretch {
    /// Distinct keys since the first epoch start after the previous access.
    pub low: f64,
    /// Distinct keys, less the key itself, since the last epoch start at or before it.
    pub high: f64,
    /// Tracked keys seen since the epoch start `low` counts from.
    pub tracked_since_low: u64,
}

/// Slots for older counters (the newest is kept apart).
const SLOTS: usize = MAX_COUNTERS - 1;

/// Nested distinct-key counters started every epoch.
///
/// The newest counter's registers are one 16 KiB array, so the common case (its register
/// already holds the rank) is one load and compare in cache. The older counters' registers
/// are interleaved by register (`older[index * SLOTS + slot]`), so raising one register
/// in every counter that holds less touches one or two cache lines, not one per counter.
#[derive(Clone, Debug)]
pub struct CounterStack {
    newest: Box<[u8]>,
    newest_tally: Tally,
    /// A copy of the registers of the most recent older counter (the smallest of the
    /// older ones): a raise that stops there, most of them, stays in cache.
    previous: Box<[u8]>,
    /// Older counters' registers, interleaved; slot `i` is the `i`-th oldest.
    older: Box<[u8]>,
    /// Older counters' tallies, oldest first; the first starts at access 0 and is never
    /// dropped.
    older_tallies: Vec<Tally>,
    epoch: u64,
    /// When the next counter starts.
    next_start: u64,
    accesses: u64,
}

impl Default for CounterStack {
    fn default() -> Self {
        CounterStack {
            newest: vec![0; REGISTERS].into_boxed_slice(),
            newest_tally: Tally::new(0),
            previous: vec![0; REGISTERS].into_boxed_slice(),
            older: vec![0; REGISTERS * SLOTS].into_boxed_slice(),
            older_tallies: Vec::with_capacity(SLOTS),
            epoch: FIRST_EPOCH,
            next_start: FIRST_EPOCH,
            accesses: 0,
        }
    }
}

impl CounterStack {
    /// Records one access by its 56-bit sampling hash; returns the access's time (the
    /// number of accesses before it).
    #[inline]
    pub fn add_hash(&mut self, hash: u64) -> u64 {
        let now = self.accesses;
        self.accesses += 1;
        let index = (hash & (REGISTERS as u64 - 1)) as usize;
        let rest = (hash >> P) & ((1 << Q) - 1);
        let rank = (rest.trailing_zeros().min(Q) + 1) as u8;
        if now >= self.next_start || self.newest[index] < rank {
            self.raise(now, index, rank);
        }
        now
    }

    /// Starts a counter when an epoch ends, and raises register `index` to `rank` in every
    /// counter that holds less: a suffix of the stack, since older counters hold at least
    /// as much as newer ones.
    #[inline(never)]
    fn raise(&mut self, now: u64, index: usize, rank: u8) {
        if now >= self.next_start {
            self.start_counter(now);
        }
        let r = self.newest[index];
        if r >= rank {
            return;
        }
        self.newest[index] = rank;
        self.newest_tally.moved(r, rank);
        if self.older_tallies.is_empty() || self.previous[index] >= rank {
            return;
        }
        self.previous[index] = rank;
        let row = &mut self.older[index * SLOTS..(index + 1) * SLOTS];
        for (slot, tally) in self.older_tallies.iter_mut().enumerate().rev() {
            let r = row[slot];
            if r >= rank {
                break;
            }
            row[slot] = rank;
            tally.moved(r, rank);
        }
    }

    /// Moves the newest counter into the older slots (thinning them to every other one
    /// when full, and doubling the epoch) and starts a new one at `now`.
    #[cold]
    fn start_counter(&mut self, now: u64) {
        if self.older_tallies.len() == SLOTS {
            let kept = SLOTS.div_ceil(2);
            for row in self.older.chunks_exact_mut(SLOTS) {
                for j in 0..kept {
                    row[j] = row[2 * j];
                }
            }
            // Counter 2j absorbs counter 2j + 1's epoch, and with it its tracked keys.
            let mut i = 0;
            let mut absorbed = 0;
            for j in (0..SLOTS).rev() {
                if j % 2 == 1 {
                    absorbed = self.older_tallies[j].tracked;
                } else {
                    self.older_tallies[j].tracked += std::mem::take(&mut absorbed);
                }
            }
            self.older_tallies.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.epoch *= 2;
        }
        let slot = self.older_tallies.len();
        for (row, &r) in self.older.chunks_exact_mut(SLOTS).zip(self.newest.iter()) {
            row[slot] = r;
        }
        let finished = std::mem::replace(&mut self.newest_tally, Tally::new(now));
        self.older_tallies.push(finished);
        self.previous.copy_from_slice(&self.newest);
        self.newest.fill(0);
        self.next_start = now + self.epoch;
    }

    /// The counters' tallies, oldest first.
    fn tallies(&self) -> impl Iterator<Item = &Tally> {
        self.older_tallies
            .iter()
            .chain(std::iter::once(&self.newest_tally))
    }

    /// What the counters know of the stretch between a key's access at time `previous`
    /// and now (call before [`CounterStack::track`] records the key's new access).
    pub fn stretch(&self, previous: u64) -> Stretch {
        // Counters are in start order; the first starts at 0 <= previous.
        let started = self.older_tallies.partition_point(|c| c.start <= previous)
            + usize::from(self.newest_tally.start <= previous);
        let mut from_before = self.tallies().skip(started - 1);
        let before = from_before.next().expect("the first counter starts at 0");
        let high = (before.estimate() - 1.0).max(0.0);
        let mut low = 0.0;
        let mut tracked_since_low = 0;
        if let Some(after) = from_before.next() {
            low = after.estimate().min(high);
            tracked_since_low = after.tracked + from_before.map(|c| c.tracked).sum::<u64>();
        }
        Stretch {
            low,
            high,
            tracked_since_low,
        }
    }

    /// Notes that a tracked key (one of a sample), last seen at `previous` if ever, was
    /// seen at `now` (the time [`CounterStack::add_hash`] returned for this access).
    pub fn track(&mut self, previous: Option<u64>, now: u64) {
        if let Some(previous) = previous {
            self.untrack(previous);
        }
        debug_assert!(now >= self.newest_tally.start);
        self.newest_tally.tracked += 1;
    }

    /// Notes that a tracked key last seen at `previous` is tracked no more (a sample that
    /// dropped it).
    pub fn untrack(&mut self, previous: u64) {
        let tally = if previous >= self.newest_tally.start {
            &mut self.newest_tally
        } else {
            // Some older counter starts at or before `previous` (the first at 0).
            let epoch = self.older_tallies.partition_point(|c| c.start <= previous);
            &mut self.older_tallies[epoch - 1]
        };
        tally.tracked -= 1;
    }

    /// Accesses recorded.
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// Counters held (at most [`MAX_COUNTERS`]).
    pub fn counters(&self) -> usize {
        self.older_tallies.len() + 1
    }

    /// Bytes held: the registers of [`MAX_COUNTERS`] counters, allocated up front.
    pub fn memory_bytes(&self) -> usize {
        self.newest.len()
            + self.previous.len()
            + self.older.len()
            + (self.older_tallies.capacity() + 1) * std::mem::size_of::<Tally>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shards::sample_hash;
    use std::collections::HashSet;

    #[test]
    fn brackets_hold_the_true_distance() {
        // A stream of 400,000 accesses over 60,000 keys; at sampled moments the true
        // number of distinct keys since an earlier access must lie within the bracket,
        // allowing the counters' error (4 standard errors of 1.6 %, or 2 keys).
        let mut x = 7u64;
        let keys: Vec<u64> = (0..400_000)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (x >> 33) % 60_000
            })
            .collect();
        let mut stack = CounterStack::default();
        let mut checked = 0;
        for (t, &k) in keys.iter().enumerate() {
            stack.add_hash(sample_hash(k));
            if t % 20_011 == 20_010 {
                let now = t as u64 + 1;
                for back in [50u64, 3_000, 70_000, 250_000] {
                    let Some(prev) = now.checked_sub(back) else {
                        continue;
                    };
                    let truth = keys[prev as usize + 1..now as usize]
                        .iter()
                        .collect::<HashSet<_>>()
                        .len() as f64;
                    let Stretch {
                        low: lo, high: hi, ..
                    } = stack.stretch(prev);
                    let slack = (0.065 * truth).max(2.0);
                    assert!(
                        lo - slack <= truth && truth <= hi + slack,
                        "t {t} back {back}: {truth} not in [{lo}, {hi}]"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 60, "{checked}");
        assert!(stack.counters() <= MAX_COUNTERS);
        assert!(
            stack.counters() > MAX_COUNTERS / 2 - 2,
            "{}",
            stack.counters()
        );
    }

    #[test]
    fn tracked_keys_are_counted_by_epoch_through_thinning() {
        // Every 40th key is tracked, as a sample's keys are. After 500,000 accesses (the
        // stack thinned twice) the tracked keys seen since each epoch start must be exact.
        let mut x = 3u64;
        let mut stack = CounterStack::default();
        let mut last: std::collections::HashMap<u64, u64> = Default::default();
        for _ in 0..500_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let k = (x >> 33) % 80_000;
            let now = stack.add_hash(sample_hash(k));
            if k.is_multiple_of(40) {
                let previous = last.insert(k, now);
                stack.track(previous, now);
            }
        }
        assert!(stack.epoch >= 4 * FIRST_EPOCH, "{}", stack.epoch);
        let total: u64 = stack.tallies().map(|t| t.tracked).sum();
        assert_eq!(total, last.len() as u64);
        for previous in [0u64, 12_345, 200_000, 431_000, 499_000] {
            let s = stack.stretch(previous);
            let after = stack.tallies().map(|t| t.start).find(|&st| st > previous);
            let want = after.map_or(0, |st| last.values().filter(|&&t| t >= st).count() as u64);
            assert_eq!(s.tracked_since_low, want, "previous {previous}");
            assert!(s.low <= s.high);
        }
    }

    #[test]
    fn memory_stays_bounded_as_the_trace_grows() {
        let mut stack = CounterStack::default();
        let mut sizes = Vec::new();
        for i in 0..2_000_000u64 {
            stack.add_hash(sample_hash(i % 100_000));
            if i == 500_000 || i == 1_999_999 {
                sizes.push(stack.memory_bytes());
            }
        }
        assert!(stack.counters() <= MAX_COUNTERS);
        assert_eq!(sizes[0], sizes[1]);
        assert!(
            sizes[1] <= (MAX_COUNTERS + 1) * (REGISTERS + 256),
            "{sizes:?}"
        );
        assert_eq!(stack.accesses(), 2_000_000);
    }
}
