//! [`DistinctCounter`]: the number of distinct keys in a stream, in 64 KiB, whatever the
//! stream's footprint (HyperLogLog; Flajolet et al. 2007, with Ertl's 2017 "improved raw"
//! estimator, which needs neither bias tables nor a switch to linear counting).
//!
//! SHARDS uses it for its cold-miss count. A sample of 1 % of the keys knows the trace's
//! distinct keys only to within `1/sqrt(0.01 × keys)` (±4.5 % on a 50 k-key trace), and
//! every size's miss ratio carries that error, since each distinct key is one cold miss.
//! This counter sees every key and is within ±0.4 % (one standard error), so the samplers
//! take the cold count from it (see `shards`).
//!
//! Written here rather than taken from a crate: it is fed the sampling hash SHARDS has
//! already computed for the key, which keeps its cost to one register update per access
//! on SHARDS's fast path; the HyperLogLog crates hash keys themselves.

/// Index bits: `2^16` one-byte registers, standard error `1.04 / 2^8` ≈ 0.41 %.
const P: u32 = 16;
const REGISTERS: usize = 1 << P;
/// Bits of the hash this counter is fed (the SHARDS sampling hash is 56 bits wide).
const HASH_BITS: u32 = 56;
/// Bits left for the rank once the index is taken.
const Q: u32 = HASH_BITS - P;

/// HyperLogLog over 56-bit hashes.
#[derive(Clone, Debug)]
pub struct DistinctCounter {
    registers: Vec<u8>,
}

impl Default for DistinctCounter {
    fn default() -> Self {
        DistinctCounter {
            registers: vec![0; REGISTERS],
        }
    }
}

impl DistinctCounter {
    /// Relative standard error of [`DistinctCounter::estimate`].
    pub const RELATIVE_ERROR: f64 = 1.04 / (1u64 << (P / 2)) as f64;

    /// Counts a key by its hash (uniform over `[0, 2^56)`).
    #[inline]
    pub fn add_hash(&mut self, hash: u64) {
        let index = (hash & (REGISTERS as u64 - 1)) as usize;
        let rest = hash >> P;
        // Rank: position of the first 1 bit of the Q-bit remainder, Q + 1 when it is 0.
        let rank = (rest.leading_zeros() - (64 - Q) + 1) as u8;
        let r = &mut self.registers[index];
        *r = (*r).max(rank);
    }

    /// Starts loading the register [`DistinctCounter::add_hash`] of `hash` will update
    /// ([`policy::prefetch`]); changes nothing. For callers that know their keys early.
    #[inline]
    pub fn prefetch_hash(&self, hash: u64) {
        policy::prefetch::prefetch_at(&self.registers, (hash & (REGISTERS as u64 - 1)) as usize);
    }

    /// The estimated number of distinct hashes added.
    pub fn estimate(&self) -> f64 {
        let mut counts = [0u32; Q as usize + 2];
        for &r in &self.registers {
            counts[r as usize] += 1;
        }
        estimate_from_ranks(&counts)
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.registers.len()
    }
}

/// Ertl's improved raw estimate from a register histogram: `ranks[r]` registers hold rank
/// `r`, for ranks `0..=q + 1` (`q + 1` is saturated); the register count is their sum.
pub(crate) fn estimate_from_ranks(ranks: &[u32]) -> f64 {
    let q = ranks.len() - 2;
    let m = ranks.iter().map(|&c| c as f64).sum::<f64>();
    let mut z = m * tau(1.0 - ranks[q + 1] as f64 / m);
    for k in (1..=q).rev() {
        z = 0.5 * (z + ranks[k] as f64);
    }
    z += m * sigma(ranks[0] as f64 / m);
    if z.is_infinite() {
        return 0.0;
    }
    m * m / (2.0 * std::f64::consts::LN_2) / z
}

/// `x + Σ_{k≥1} x^(2^k) 2^(k-1)`: the empty registers' share of the estimator.
fn sigma(mut x: f64) -> f64 {
    if x >= 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

/// `(1 - x - Σ_{k≥1} (1 - x^(2^-k))² 2^-k) / 3`: the saturated registers' share.
fn tau(mut x: f64) -> f64 {
    if x <= 0.0 || x >= 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shards::sample_hash;

    #[test]
    fn estimates_within_a_few_standard_errors() {
        assert_eq!(DistinctCounter::default().estimate(), 0.0);
        for (n, salt) in [
            (1u64, 1u64),
            (100, 2),
            (10_000, 3),
            (200_000, 4),
            (3_000_000, 5),
        ] {
            let mut c = DistinctCounter::default();
            for k in 0..n {
                // Each key twice: repeats must not count.
                c.add_hash(sample_hash(k ^ (salt << 40)));
                c.add_hash(sample_hash(k ^ (salt << 40)));
            }
            let rel = (c.estimate() - n as f64).abs() / n as f64;
            // Small counts are nearly exact (few registers collide); large ones within
            // four standard errors.
            let bound = if n <= 10_000 {
                0.01
            } else {
                4.0 * DistinctCounter::RELATIVE_ERROR
            };
            assert!(
                rel <= bound,
                "{n} keys: estimate {} ({rel:.4})",
                c.estimate()
            );
        }
    }

    #[test]
    fn a_saturated_register_is_finite() {
        let mut c = DistinctCounter::default();
        c.add_hash(0);
        assert!(c.estimate().is_finite() && c.estimate() > 0.0);
    }
}
