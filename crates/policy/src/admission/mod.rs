//! Admission (placement) policies: whether a missed block enters the cache at all.
//!
//! SANCACHE places a chunk on the fast tier only after it has proved itself; the same
//! rules serve any Lachesis partition. A policy sees every access (resident or not) and,
//! for a miss, answers whether to place the block:
//! * [`Demand`] (`demand`): every miss is placed — the classic cache;
//! * [`threshold::Threshold`] (`threshold:n=N`): placed on the N-th non-resident access;
//! * [`mrfu::Mrfu`] (`mrfu:threshold=N,cool-s=S`): threshold with periodic cooling (by
//!   time, SANCACHE's "reduce counts by 1 every 30 seconds") and a sequential filter;
//! * [`adaptive::Adaptive`] (`adaptive:...`): MRFU whose threshold follows SANCACHE's
//!   Figure 6 (hits per migration against a rising bar, JUSTIFY) every period of time,
//!   with a migration rate limit that defers placements.
//!
//! Time reaches a policy through [`AdmissionPolicy::tick`] (the caller's clock, seconds):
//! the owner calls it before each access. A placement the owner cannot make now (its
//! migration rate limit) is handed back with [`AdmissionPolicy::deferred`], so the block
//! keeps its count and is placed at a later access. A controller sets a policy's threshold
//! with [`AdmissionPolicy::set_threshold`], which keeps every candidate's count.
//!
//! Specs are parsed by [`build_admission`] with [`Params`], like eviction specs: names are
//! case-insensitive (`mfu` is an alias of `threshold`), unknown keys and out-of-range values
//! are errors naming the key. Each policy's parameters and defaults are listed on its
//! `from_params`. Counting state is bounded (see [`threshold::Candidates`]) and every
//! access costs O(1) amortised.

pub mod adaptive;
pub mod mrfu;
pub mod threshold;

use crate::params::Params;
use crate::policy::Key;
use crate::PolicyError;

/// Decides which missed blocks are placed in the cache.
pub trait AdmissionPolicy: Send {
    /// Canonical name with parameters.
    fn name(&self) -> String;

    /// One access to `key`; `resident` tells whether it hit. For a miss the return value
    /// says whether to place the block; for a hit it is ignored.
    fn access(&mut self, key: Key, resident: bool) -> bool;

    /// A placed block was evicted (a migration's benefit window is over).
    fn on_evict(&mut self, _key: Key) {}

    /// Sets the placement threshold (accesses a miss needs before it is placed) in
    /// place, keeping every candidate's count: how a controller's threshold (SANCACHE's
    /// rule run centrally) reaches a live tier. `n` is at least 1. `false` where the
    /// policy has no threshold (`demand`); an `adaptive` policy stops adapting its own.
    fn set_threshold(&mut self, _n: u32) -> bool {
        false
    }

    /// The caller's clock reads `now` seconds (monotonic): periods of time that have
    /// ended since the last tick take effect (cooling, adaptation). Policies without
    /// periods of time ignore it.
    fn tick(&mut self, _now: f64) {}

    /// The miss of `key` this policy just admitted was not placed (the owner's migration
    /// rate limit had no room): it counts as no migration, and `key` keeps the count that
    /// earned its admission, so it is placed at a later access (unless cooling takes the
    /// count away first).
    fn deferred(&mut self, _key: Key) {}

    /// The access count at which a block is placed now, if the policy has one.
    fn threshold(&self) -> Option<u32> {
        None
    }

    /// Keys the policy holds counts for (candidates for placement; bounded by its
    /// table), where it counts any.
    fn candidates(&self) -> Option<u64> {
        None
    }
}

/// Demand placement: every missed block is placed.
#[derive(Clone, Debug, Default)]
pub struct Demand;

impl AdmissionPolicy for Demand {
    fn name(&self) -> String {
        "demand".into()
    }
    fn access(&mut self, _key: Key, _resident: bool) -> bool {
        true
    }
}

/// The names of the admission policies.
pub const ADMISSION_NAMES: &[&str] = &["demand", "threshold", "mrfu", "adaptive"];

/// Constructs the admission policy named by `spec` (`name` or `name:key=value,...`).
pub fn build_admission(spec: &str) -> Result<Box<dyn AdmissionPolicy>, PolicyError> {
    let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
    let name = name.trim().to_ascii_lowercase();
    let p = Params::parse(&name, params)?;
    Ok(match name.as_str() {
        "demand" => {
            p.finish()?;
            Box::new(Demand)
        }
        "threshold" | "mfu" => Box::new(threshold::Threshold::from_params(&p)?),
        "mrfu" => Box::new(mrfu::Mrfu::from_params(&p)?),
        "adaptive" => Box::new(adaptive::Adaptive::from_params(&p)?),
        _ => {
            return Err(PolicyError::UnknownPolicy {
                name,
                known: ADMISSION_NAMES.join(", "),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_rejects_unknown_names_and_keys() {
        assert!(build_admission("demand").is_ok());
        assert!(build_admission("mrfu:threshold=3,period=100").is_ok());
        assert!(matches!(
            build_admission("psychic"),
            Err(PolicyError::UnknownPolicy { .. })
        ));
        assert!(matches!(
            build_admission("threshold:m=2"),
            Err(PolicyError::BadParam { .. })
        ));
        assert!(matches!(
            build_admission("adaptive:decay=2"),
            Err(PolicyError::BadParam { .. })
        ));
        for bad in [
            "demand:n=2",
            "threshold:n=0",
            "mrfu:period=0",
            "mrfu:sequential=2",
            "adaptive:threshold=0",
            "adaptive:justify=-1",
            "adaptive:justify-average=2",
            "adaptive:max-threshold=16",
            "threshold:n=two",
        ] {
            assert!(
                matches!(build_admission(bad), Err(PolicyError::BadParam { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn registry_names_and_aliases() {
        let name = |s: &str| build_admission(s).unwrap().name();
        assert_eq!(name("demand"), "demand");
        assert_eq!(name("Demand"), "demand");
        assert_eq!(name("threshold:n=3"), "threshold(n=3,candidates=65536)");
        assert_eq!(
            name("MFU:n=4,candidates=10"),
            "threshold(n=4,candidates=10)"
        );
        assert_eq!(
            name("mrfu:threshold=3,period=100,decay=0.25"),
            "mrfu(threshold=3,cool=100 accesses,decay=0.25)"
        );
        assert_eq!(name("adaptive"), "adaptive(threshold=2,justify=0)");
        for n in ADMISSION_NAMES {
            assert!(build_admission(n).is_ok(), "{n}");
        }
    }

    #[test]
    fn demand_places_every_miss() {
        let mut d = build_admission("demand").unwrap();
        assert!((0..100u64).all(|k| d.access(k, false)));
    }

    #[test]
    fn a_threshold_set_in_place_keeps_the_candidates_counts() {
        for spec in [
            "threshold:n=4",
            "mrfu:threshold=4,period=100000",
            "adaptive:threshold=4",
        ] {
            let mut p = build_admission(spec).unwrap();
            // Keys 0..10 seen twice each (a sequential run counts once under MRFU's
            // filter: keys are spread by 1000).
            for _ in 0..2 {
                for k in 0..10u64 {
                    assert!(!p.access(k * 1000, false), "{spec}");
                }
            }
            assert_eq!(p.candidates(), Some(10), "{spec}");
            // The threshold drops to 3: the third access places, so the two counted
            // survived the change.
            assert!(p.set_threshold(3), "{spec}");
            assert_eq!(p.threshold(), Some(3), "{spec}");
            assert!(p.access(0, false), "{spec}");
            assert!(p.access(1000, false), "{spec}");
            // Up to 5: keys 2000 and 3000 (taken in turn: MRFU counts a repeat once) do
            // not place on their third and fourth access, and do on their fifth.
            assert!(p.set_threshold(5));
            for place in [false, false, true] {
                assert_eq!(p.access(2000, false), place, "{spec}");
                assert_eq!(p.access(3000, false), place, "{spec}");
            }
        }
        let mut d = build_admission("demand").unwrap();
        assert!(!d.set_threshold(3));
        assert_eq!((d.threshold(), d.candidates()), (None, None));
    }
}
