//! Admission policies on the shared cloudPhysics oracleGeneral trace (113,872 accesses to
//! 48,974 objects), in front of LRU: hits and placements (insertions) pinned.
//!
//! Demand, threshold and MRFU agree exactly with an independent naive Python model (a
//! dictionary of counts, an `OrderedDict` LRU, eager halving every period:
//! `tools/admission_model.py`): the counts below are its output.
//! Demand's misses at 1,000 blocks (113,872 - 19,049 = 94,823) are libCacheSim's LRU count.
//! The adaptive rule has no peer; its numbers are pinned, and its rate limit is checked
//! against the number of periods.

use policy::admission::adaptive::Adaptive;
use policy::admission::{build_admission, AdmissionPolicy};
use policy::Params;
use policy::{build, BlockCache};
use std::path::PathBuf;

const TRACE: &str = "cloudPhysicsIO.oracleGeneral.bin";

/// Locates `shared/traces/<name>` above the crate.
fn trace_path(name: &str) -> PathBuf {
    trace::find_shared_trace(name, std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_or_else(
        || {
            panic!(
                "shared/traces/{name} not found above {}",
                env!("CARGO_MANIFEST_DIR")
            )
        },
    )
}

/// The `obj_id` of every 24-byte oracleGeneral record.
fn keys() -> Vec<u64> {
    let bytes = std::fs::read(trace_path(TRACE)).expect("read trace");
    bytes
        .chunks_exact(24)
        .map(|r| u64::from_le_bytes(r[4..12].try_into().unwrap()))
        .collect()
}

/// (hits, insertions) of LRU with `capacity` blocks behind `admission`.
fn run(capacity: usize, admission: &str, keys: &[u64]) -> (u64, u64) {
    let mut c = BlockCache::new(capacity, build("lru").unwrap())
        .with_admission(build_admission(admission).unwrap());
    let (mut hits, mut inserted) = (0, 0);
    for &k in keys {
        match c.access(k, |_, _| {}) {
            policy::Access::Hit(_) => hits += 1,
            policy::Access::Inserted(_) => inserted += 1,
            policy::Access::Bypassed => {}
        }
    }
    (hits, inserted)
}

#[test]
fn demand_threshold_and_mrfu_match_the_naive_model() {
    let keys = keys();
    assert_eq!(keys.len(), 113_872);
    let expected: &[(usize, &str, (u64, u64))] = &[
        (1000, "demand", (19049, 94823)),
        (1000, "threshold:n=2", (17094, 37632)),
        (1000, "threshold:n=3", (16771, 10885)),
        (1000, "mrfu:threshold=2,period=10000", (17078, 5446)),
        (
            1000,
            "mrfu:threshold=2,period=10000,sequential=0",
            (17962, 5713),
        ),
        (5000, "demand", (22345, 91527)),
        (5000, "threshold:n=2", (20067, 35910)),
        (5000, "threshold:n=3", (23907, 9864)),
        (5000, "mrfu:threshold=2,period=10000", (22492, 3826)),
        (
            5000,
            "mrfu:threshold=2,period=10000,sequential=0",
            (23257, 4090),
        ),
    ];
    for &(cap, spec, want) in expected {
        assert_eq!(run(cap, spec, &keys), want, "{spec} at {cap}");
    }
}

#[test]
fn a_small_candidate_table_forgets_long_reuse() {
    // 48,974 distinct objects: a table of 4,096 candidates is swept whenever it fills, and
    // objects whose reuse spans more than a few thousand other misses lose their count;
    // threshold 3 then places 1,500 blocks instead of 9,864 and hits 32 % less (pinned).
    // Size the table to the number of distinct misses in a reuse window.
    let keys = keys();
    let (h, i) = run(5000, "threshold:n=3,candidates=4096", &keys);
    let (hu, iu) = run(5000, "threshold:n=3", &keys);
    assert_eq!((hu, iu), (23907, 9864));
    assert_eq!((h, i), PINNED_BOUNDED);
}

const PINNED_BOUNDED: (u64, u64) = (16351, 1500);

#[test]
fn adaptive_respects_its_rate_limit() {
    let keys = keys();
    let periods = keys.len().div_ceil(10_000) as u64;
    let (h, i) = run(5000, "adaptive:period=10000,max-migrations=500", &keys);
    assert!(i <= 500 * periods, "{i} placements in {periods} periods");
    assert_eq!((h, i), PINNED_ADAPTIVE);
    let (hu, iu) = run(5000, "adaptive:period=10000", &keys);
    assert_eq!((hu, iu), PINNED_ADAPTIVE_UNLIMITED);
    // The (threshold, JUSTIFY) trajectory (Figure 6), one entry per completed period of
    // the unlimited run: JUSTIFY climbs by one on each period whose placements earned at
    // least JUSTIFY hits each; the first period that falls short raises the threshold
    // (period 3: 2 -> 3); the bar keeps climbing to 6, where migrations at threshold 3
    // become no more than the bar, so both come down once (period 8); at threshold 2
    // placements earn less than 6 and the threshold goes back to 3. Against the fixed
    // threshold 3 (23,907 hits for 9,864 placements) it places 3.4x fewer chunks for 24 %
    // fewer hits: 6.3 hits per placement against 2.4.
    let mut a = Adaptive::from_params(&Params::parse("adaptive", "period=10000").unwrap()).unwrap();
    let mut c = BlockCache::new(5000, build("lru").unwrap());
    for &k in &keys {
        let resident = c.lookup(k).is_some();
        if a.access(k, resident) || resident {
            c.access(k, |_, _| {});
        }
    }
    let t: Vec<(u32, f64)> = a.history().map(|s| (s.threshold, s.justify)).collect();
    assert_eq!(
        t,
        [
            (2, 1.0),
            (2, 2.0),
            (3, 2.0),
            (3, 3.0),
            (3, 4.0),
            (3, 5.0),
            (3, 6.0),
            (2, 5.0),
            (2, 6.0),
            (3, 6.0),
            (3, 7.0)
        ]
    );
}

const PINNED_ADAPTIVE: (u64, u64) = (18096, 2211);
const PINNED_ADAPTIVE_UNLIMITED: (u64, u64) = (18226, 2907);
