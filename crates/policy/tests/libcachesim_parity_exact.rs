//! Exact parity of LRU, FIFO, CLOCK and LFU with libCacheSim in object mode on the shared
//! cloudPhysics oracleGeneral trace (every record one access to its `obj_id`), and of MRU
//! with a naive reference model (libCacheSim's PyPI bindings have no MRU; the model
//! follows libCacheSim's `MRU.c`: evict the head, the block touched last).
//!
//! The miss counts are PyPI `libcachesim` 0.3.5's, produced by
//!
//! ```text
//! python3 tools/libcachesim_ref.py --trace shared/traces/cloudPhysicsIO.oracleGeneral.bin \
//!     --policy lru,fifo,clock,lfu --size 10,100,500,1000,2000,5000,10000,20000
//! ```
//! (miss ratio × 113,872 requests). `tools/parity.py` repeats the comparison live in CI.

use policy::sim::simulate;
use std::path::PathBuf;
use trace::{KeyMode, Request};

const SIZES: [usize; 8] = [10, 100, 500, 1000, 2000, 5000, 10000, 20000];
const REFERENCE: &[(&str, [u64; 8])] = &[
    (
        "lru",
        [107620, 100215, 95398, 94823, 94189, 91527, 79438, 72053],
    ),
    (
        "fifo",
        [107793, 101495, 96483, 95520, 94588, 91581, 79210, 72229],
    ),
    (
        "clock",
        [107584, 100047, 95293, 94727, 94081, 91458, 84750, 72151],
    ),
    (
        "lfu",
        [107693, 100973, 96651, 95562, 93707, 89798, 81059, 64431],
    ),
];

fn shared_trace() -> PathBuf {
    let mut d = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        let c = d.join("shared/traces/cloudPhysicsIO.oracleGeneral.bin");
        if c.exists() {
            return c;
        }
        assert!(
            d.pop(),
            "shared/traces not found above {}",
            env!("CARGO_MANIFEST_DIR")
        );
    }
}

fn requests() -> Vec<Request> {
    trace::open(&shared_trace(), None)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn lru_fifo_clock_lfu_match_libcachesim_exactly() {
    let reqs = requests();
    assert_eq!(reqs.len(), 113_872);
    for (policy, misses) in REFERENCE {
        for (size, want) in SIZES.iter().zip(misses) {
            let s = simulate(
                policy,
                *size,
                KeyMode::Object,
                reqs.iter().copied().map(Ok),
                &|_| {},
            )
            .unwrap();
            assert_eq!(s.misses, *want, "{policy} at {size} objects");
        }
    }
}

/// MRU by definition, in O(n) per access: a recency-ordered vector, evict the newest.
fn naive_mru(keys: &[u64], cap: usize) -> u64 {
    let mut order: Vec<u64> = Vec::new(); // oldest .. newest
    let mut misses = 0;
    for &k in keys {
        if let Some(i) = order.iter().position(|&x| x == k) {
            order.remove(i);
        } else {
            misses += 1;
            if order.len() == cap {
                order.pop();
            }
        }
        order.push(k);
    }
    misses
}

#[test]
fn mru_matches_the_reference_model() {
    let reqs = requests();
    let keys: Vec<u64> = reqs.iter().take(30_000).map(Request::object_key).collect();
    for size in [10, 100, 1000] {
        let s = simulate(
            "mru",
            size,
            KeyMode::Object,
            reqs.iter().take(30_000).copied().map(Ok),
            &|_| {},
        )
        .unwrap();
        assert_eq!(s.misses, naive_mru(&keys, size), "mru at {size}");
    }
}
