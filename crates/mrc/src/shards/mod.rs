//! SHARDS (Waldspurger, Park, Garthwaite and Ahmad, FAST'15): approximate LRU curves from
//! a spatially hashed sample of keys.
//!
//! A key is sampled when `hash(key) mod P < T` (P = 2^56), so either every access to a key
//! is sampled or none is, and the sample's reuse distances, divided by the rate `R = T/P`,
//! estimate the full trace's. Each sampled access stands for `1/R` accesses.
//!
//! * [`ShardsFixedRate`]: `R` fixed; memory grows with the sampled keys (`R` × footprint).
//!   With a floor of `min_keys` ([`MIN_SAMPLE`], 16,384, by default) it starts at rate 1
//!   and lowers the rate as fixed-size SHARDS does until it reaches `R`, so the sample
//!   never holds fewer than `min_keys` keys while a higher rate could keep them: a 1 %
//!   sample of a 100 k-key trace is only ~1,000 keys, and which of them fall in (a loop's
//!   share, the hot keys) is luck no count correction removes. Over 10 salts at rate
//!   0.01 on a Zipf-and-loop mix of 100 k objects the plain rate's error had median 0.011
//!   and worst 0.014; with the floor 0.002 and 0.004 (`examples/salts`, last argument the
//!   floor). Memory is the larger of `min_keys` and `R × footprint` keys.
//! * [`ShardsFixedSize`]: at most `s_max` sampled keys. Past that the key with the largest
//!   hash leaves the sample (with any other key of that same hash) and `T` drops to its
//!   hash, lowering `R` as the footprint grows — the paper's priority queue of sampled
//!   keys by hash. Memory is bounded by `s_max` whatever the trace's length or footprint.
//!
//! Each sampled access is recorded with weight `1/R` at the rate current when it happens,
//! which is the paper's rescaling of older counts by `R_new/R_old` expressed the other way
//! round (both make every count estimate full-trace references).
//!
//! The hash is MurmurHash3's 64-bit finaliser of the salted key, top 56 bits: the paper's
//! `P = 2^24` would make equal hashes (ties at the threshold) common once the footprint
//! reaches millions of keys, and fixed-size SHARDS lowers `T` by one hash value at a time.
//!
//! Both apply two count corrections when a curve is asked for:
//! * **Keys (a ratio estimator).** Every access also goes into a [`DistinctCounter`](crate::distinct::DistinctCounter)
//!   (HyperLogLog over the hash already computed). The number of distinct keys that the
//!   counter and the sample estimate together (inverse-variance weighted, so at rate 1 the
//!   sample's exact count wins) is divided by the sample's own estimate, and every count,
//!   cold misses and hits at every distance, is multiplied by that ratio: each sampled key
//!   stands for the realised share of keys rather than `1/R`. A 1 % sample of a 50 k-key
//!   trace knows the key count only to ±4.5 %, and a sample with too many keys has too
//!   many hits as well as too many cold misses. On the shared 114 k-request trace at rate
//!   0.01 this brought the median error over 30 salts from 0.030 (no correction) through
//!   0.016 (cold misses alone rescaled) to 0.013 in object mode, and from 0.010 to 0.009
//!   in 4 KiB-block mode; on synthetic Zipf traces of 10⁵–10⁶ keys it lowered the median
//!   by 3–40 % and the worst salt's error by 10–37 % (`examples/salts`).
//! * **Total (the paper's SHARDS_adj).** The reweighted sample's weight is compared with
//!   the number of accesses it stands for, and the difference is added at distance 0,
//!   which removes most of the bias a lucky or unlucky sample of hot keys causes.
//!
//! Fixed-rate SHARDS also takes most of each sampled distance from a [`CounterStack`](crate::counter_stack::CounterStack) of
//! the whole trace. The sample's own estimate (sampled keys in between over `R`) is ±10 %
//! for a distance of 10,000 at rate 0.01, and that error is shared by every reuse over
//! the same stretch, so it moves the curve sideways rather than averaging out. The
//! counters count the distinct keys since each epoch start to ±0.8 %; the sample
//! estimates only the gap between the previous access and the next epoch start, and the
//! sum is clamped between the counts from the epoch starts just after and just before
//! the previous access. Once the key weighting is right that sideways noise is most of
//! the error left; over 30 salts at rate 0.01 on the shared trace the median falls from
//! 0.009 to 0.006 and the worst from 0.019 to 0.011 (4 KiB blocks; 0.008 to 0.003 at
//! the default salt), in object mode the median from 0.013 to 0.009 and the worst from
//! 0.042 to 0.022, and on Zipf traces of 10⁵–10⁶ keys the median falls by 36–47 %. It
//! costs every access a register check (and about one in five a few register updates
//! in older counters), which takes fixed-rate SHARDS from about 60 to 20–25 M requests/s,
//! and 2 MiB. Fixed-size SHARDS, which has a speed target and no accuracy gap, does
//! without.
//!
//! A sampled-out access costs one hash and one compare (fixed-rate: and the counter
//! stack's register check), so both run far faster than the exact method. That test is all `access_weighted` does inline; the work of a sampled
//! access is a separate, never-inlined function, so the test fuses into the caller's loop
//! (with the trace reader's decoding, in `build_curve`) instead of costing a call per key.

//!
//! `sample` holds the hash, the threshold and the corrections both variants share;
//! `fixed_rate` and `fixed_size` one variant each.

mod fixed_rate;
mod fixed_size;
mod sample;

pub use fixed_rate::{ShardsFixedRate, MIN_SAMPLE};
pub use fixed_size::ShardsFixedSize;
pub use sample::{salted_hash, sample_hash, threshold_for, MODULUS, SALT};
