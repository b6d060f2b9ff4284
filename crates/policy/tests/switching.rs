//! Online policy switching by reconstruction and online resizing, through the public API
//! only, over every registered eviction policy.

use policy::{build, Access, BlockCache, EvictionPolicy, POLICY_NAMES};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

/// A stationary Zipf(0.9) stream over 50,000 objects (the `trace` crate's generator).
fn stationary(requests: u64, seed: u64) -> Vec<u64> {
    let spec = format!("zipf:alpha=0.9,objects=50000,requests={requests},seed={seed}");
    trace::synth::parse(&spec)
        .unwrap()
        .iter()
        .map(|r| r.object_key())
        .collect()
}

fn hit_ratio(c: &mut BlockCache, keys: &[u64]) -> f64 {
    keys.iter()
        .filter(|&&k| c.access(k, |_, _| {}).is_hit())
        .count() as f64
        / keys.len() as f64
}

const WINDOW: usize = 60_000;
const CAPACITY: usize = 2_000;
/// Windows of 60,000 accesses at hit ratios near 0.5: the standard error of a window's
/// hit ratio is about 0.002 (sqrt(p(1-p)/n)), and Zipf streams are close to independent
/// draws; two windows differ by more than 0.01 (about 3.5 combined standard errors) by
/// chance rarely, and the seeds are fixed, so the test is repeatable.
const TOLERANCE: f64 = 0.01;

#[test]
fn switch_keeps_every_block_in_place() {
    let keys = stationary(40_000, 3);
    for &from in POLICY_NAMES {
        for &to in POLICY_NAMES {
            let mut c = BlockCache::new(CAPACITY, build(from).unwrap()).with_history();
            for &k in &keys {
                c.access(k, |_, _| {});
            }
            let before: HashMap<u64, u32> = c.resident().collect();
            c.switch_policy(build(to).unwrap());
            let after: HashMap<u64, u32> = c.resident().collect();
            assert_eq!(before, after, "{from} -> {to}: blocks moved or dropped");
            assert_eq!(c.policy().name(), build(to).unwrap().name());
            // The new policy knows every block: accessing all of them hits, and evicting
            // works from the first miss.
            let mut evicted = 0;
            for k in 1_000_000..1_000_010u64 {
                c.access(k, |_, _| evicted += 1);
            }
            assert_eq!(evicted, 10, "{from} -> {to}");
            assert!(c.len() <= c.capacity());
        }
    }
}

#[test]
fn hit_ratio_after_a_switch_is_not_below_before() {
    let keys = stationary(3 * WINDOW as u64, 11);
    let (warm, rest) = keys.split_at(WINDOW);
    let (before_w, after_w) = rest.split_at(WINDOW);
    // Each policy's own steady state on the after-window, to know which switches can be
    // expected not to lose (the new policy is at least as good on this stream).
    let steady: HashMap<&str, f64> = POLICY_NAMES
        .iter()
        .map(|&p| {
            let mut c = BlockCache::new(CAPACITY, build(p).unwrap());
            hit_ratio(&mut c, warm);
            hit_ratio(&mut c, before_w);
            (p, hit_ratio(&mut c, after_w))
        })
        .collect();
    for &from in POLICY_NAMES {
        for &to in POLICY_NAMES {
            let mut c = BlockCache::new(CAPACITY, build(from).unwrap()).with_history();
            hit_ratio(&mut c, warm);
            let before = hit_ratio(&mut c, before_w);
            c.switch_policy(build(to).unwrap());
            let after = hit_ratio(&mut c, after_w);
            // Reconstruction hands over every resident block, so the new policy starts
            // from the old one's contents, not cold. (Frequency-based policies still have
            // to relearn counts: reconstruction replays blocks, not their history.)
            if steady[to] >= steady[from] {
                assert!(
                    after >= before - TOLERANCE,
                    "{from} -> {to}: {after:.4} after < {before:.4} before"
                );
            }
        }
    }
    // What reconstruction saves: a switch that drops the cache instead starts cold.
    let mut cold = BlockCache::new(CAPACITY, build("lru").unwrap());
    let mut warm_cache = BlockCache::new(CAPACITY, build("lru").unwrap()).with_history();
    hit_ratio(&mut warm_cache, warm);
    warm_cache.switch_policy(build("arc").unwrap());
    let first = &after_w[..1_000];
    let (w, c) = (
        hit_ratio(&mut warm_cache, first),
        hit_ratio(&mut cold, first),
    );
    assert!(w > c + 0.1, "reconstructed {w:.3}, cold {c:.3}");
}

#[test]
fn resize_reports_exactly_the_blocks_that_leave() {
    let keys = stationary(20_000, 5);
    for &p in POLICY_NAMES {
        let mut c = BlockCache::new(1_000, build(p).unwrap());
        for &k in &keys {
            c.access(k, |_, _| {});
        }
        let before: HashSet<u64> = c.resident().map(|(k, _)| k).collect();
        let mut reported = HashSet::new();
        c.resize(300, |k, _| {
            assert!(reported.insert(k), "{p}: {k} reported twice");
        });
        let after: HashSet<u64> = c.resident().map(|(k, _)| k).collect();
        assert_eq!(c.len(), 300, "{p}");
        assert_eq!(
            before.difference(&after).copied().collect::<HashSet<_>>(),
            reported,
            "{p}"
        );
        // Grow again: nothing leaves, and the cache fills up to the new size.
        c.resize(2_000, |_, _| panic!("{p}: growing evicted a block"));
        for &k in &keys {
            c.access(k, |_, _| {});
        }
        assert!(c.len() > 1_000 && c.len() <= 2_000, "{p}: {}", c.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// A partition never exceeds its capacity, whatever the policy, admission, accesses
    /// and resizes.
    #[test]
    fn never_exceeds_capacity(
        policy in prop::sample::select(POLICY_NAMES),
        admission in prop::sample::select(&["demand", "threshold:n=2", "mrfu:threshold=2,period=50", "adaptive:period=40,max-migrations=5"][..]),
        ops in prop::collection::vec((0u64..200, 0usize..10), 1..600),
    ) {
        let mut c = BlockCache::new(16, build(policy).unwrap())
            .with_admission(policy::admission::build_admission(admission).unwrap());
        for (key, op) in ops {
            if op == 0 {
                let n = (key % 40) as usize;
                c.resize(n, |_, _| {});
            } else {
                let a = c.access(key, |_, _| {});
                if let Access::Hit(s) | Access::Inserted(s) = a {
                    prop_assert_eq!(c.key_of(s), key);
                }
            }
            prop_assert!(c.len() <= c.capacity());
        }
    }
}

#[test]
fn admission_keeps_one_touch_blocks_out() {
    // A hot loop of 100 blocks interleaved with a scan of new blocks: with threshold
    // placement the scan never enters, so the hot set stays resident.
    let mut keys = Vec::new();
    for i in 0..20_000u64 {
        keys.push(i % 100);
        keys.push(1_000_000 + i);
    }
    let mut demand = BlockCache::new(150, build("lru").unwrap());
    let mut picky = BlockCache::new(150, build("lru").unwrap())
        .with_admission(policy::admission::build_admission("threshold:n=2").unwrap());
    let hd = hit_ratio(&mut demand, &keys);
    let hp = hit_ratio(&mut picky, &keys);
    assert!(hd < 0.3, "{hd}");
    assert!(hp > 0.49, "{hp}");
    let _: &dyn EvictionPolicy = picky.policy();
}
