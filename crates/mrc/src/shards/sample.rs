//! The spatial sample both SHARDS variants draw: the salted hash of a key, the threshold
//! for a rate, and what the sampler knows of the distinct keys it sampled, with the two
//! count corrections built on it (see the parent module's doc).

use crate::distinct::DistinctCounter;
use crate::histogram::DistanceHistogram;
use policy::keymap::mix64;

/// The modulus of the spatial hash.
pub const MODULUS: u64 = 1 << 56;

/// The default salt of the sampling hash.
pub const SALT: u64 = 0x5A4D_5348_4152_4453;

/// The sampling hash of a key in `[0, MODULUS)`.
#[inline]
pub fn sample_hash(key: u64) -> u64 {
    salted_hash(key, SALT)
}

/// The sampling hash with another salt (a different, independent sample of keys).
#[inline]
pub fn salted_hash(key: u64, salt: u64) -> u64 {
    mix64(key ^ salt) >> 8
}

/// The threshold `T` for sampling rate `rate` (clamped to `[1, MODULUS]`; a rate that is
/// not a positive number gives the smallest threshold).
pub fn threshold_for(rate: f64) -> u64 {
    if rate.is_nan() {
        return 1;
    }
    ((rate * MODULUS as f64).round() as u64).clamp(1, MODULUS)
}

/// What a sampler knows of the distinct keys it sampled, and the corrections built on it.
#[derive(Clone, Debug, Default)]
pub(super) struct SampledKeys {
    /// First accesses to sampled keys.
    keys: u64,
    /// The same, each weighted `1/R` at its time: the sample's estimate of the trace's
    /// distinct keys.
    scaled: f64,
}

impl SampledKeys {
    pub(super) fn new_key(&mut self, inv_rate: f64) {
        self.keys += 1;
        self.scaled += inv_rate;
    }

    /// The trace's distinct keys: the sample's estimate and the counter's, weighted by
    /// the inverse of their relative variances (`(1 - R) / n` for a sample of `n` keys at
    /// rate `R`; the counter's is fixed).
    pub(super) fn distinct_keys(
        &self,
        sample_size: u64,
        rate: f64,
        counter: &DistinctCounter,
    ) -> f64 {
        let counted = counter.estimate();
        if self.keys == 0 {
            return counted;
        }
        let v_sample = (1.0 - rate).max(0.0) / sample_size.max(1) as f64;
        if v_sample == 0.0 {
            return self.scaled;
        }
        let v_counter = DistinctCounter::RELATIVE_ERROR.powi(2);
        (self.scaled / v_sample + counted / v_counter) / (1.0 / v_sample + 1.0 / v_counter)
    }

    /// `hist` reweighted so the sample stands for the distinct-key estimate, and the
    /// remaining difference from `total` (the weight of all `accesses`) put at distance 0.
    ///
    /// Every count is multiplied by `keys / scaled`: each sampled key stands for the
    /// estimated number of keys over the number sampled, the realised rate, rather than
    /// `1/R`. That is the survey-sampling ratio estimator with the key count as auxiliary:
    /// a sample that happens to hold 5 % too many keys also holds about 5 % too many hits
    /// at every distance, and the old correction (cold misses alone rescaled, the rest at
    /// distance 0) removed that excess from distance 0 and so shifted the whole curve.
    pub(super) fn corrected(
        &self,
        hist: &DistanceHistogram,
        total: f64,
        accesses: u64,
        sample_size: u64,
        rate: f64,
        counter: &DistinctCounter,
    ) -> DistanceHistogram {
        let mut h = hist.clone();
        if accesses > 0 {
            let keys = self.distinct_keys(sample_size, rate, counter);
            if self.scaled > 0.0 {
                h.scale(keys / self.scaled);
            } else {
                // Nothing sampled: each distinct key is one cold miss of the mean access's
                // weight.
                h.adjust_cold(keys * total / accesses as f64);
            }
            if h.cold() > total {
                h.adjust_cold(total - h.cold());
            }
        }
        h.adjust_first(total - h.total());
        h
    }
}
