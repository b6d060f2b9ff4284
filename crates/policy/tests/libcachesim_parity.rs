//! Exact parity of the classic eviction policies (LRU, FIFO, CLOCK, LFU, MRU) with
//! libCacheSim in object mode on the shared cloudPhysics oracleGeneral trace: every record
//! is one access to its `obj_id` (object sizes ignored), replayed through
//! [`policy::sim::simulate`] in [`KeyMode::Object`].
//!
//! The reference miss counts are PyPI `libcachesim` 0.3.5's miss ratios times the 113,872
//! requests (every product is an integer), produced by
//!
//! ```text
//! python3 tools/libcachesim_ref.py --trace shared/traces/cloudPhysicsIO.oracleGeneral.bin \
//!     --policy lru,fifo,clock,lfu,lruk --size 10,100,500,1000,2000,5000,10000,20000
//! ```
//!
//! PyPI `libcachesim` has no MRU: MRU is checked against a naive model of libCacheSim's
//! `MRU.c` (a vector ordered by recency; hits and insertions go to the head, the head is
//! evicted) and its counts are pinned from that model.
//!
//! LRU-K without retained history (`lruk:history=0`) is libCacheSim's `LRUK` and matches it
//! exactly; the default keeps the paper's retained history and is pinned on its own (see
//! `eviction/lruk.rs`). LRFU has no peer; its limits λ = 1 and λ = 0 must give LRU's and
//! LFU's counts.

use policy::sim::simulate;
use std::path::PathBuf;
use trace::{KeyMode, Request, TraceError};

const TRACE: &str = "cloudPhysicsIO.oracleGeneral.bin";
const REQUESTS: usize = 113_872;
const SIZES: [usize; 8] = [10, 100, 500, 1000, 2000, 5000, 10000, 20000];

/// libCacheSim's miss counts, one per size in [`SIZES`].
const LIBCACHESIM: &[(&str, [u64; 8])] = &[
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

/// MRU miss counts, from the naive model in [`naive_mru`] (no PyPI peer).
const MRU: [u64; 8] = [111174, 110826, 109417, 108363, 106488, 100554, 90583, 74333];

/// PyPI libCacheSim's `LRUK` (k = 2) miss counts: equal to ours with `history=0`.
const LIBCACHESIM_LRUK: [u64; 8] = [108938, 106503, 96486, 95452, 93707, 89798, 81059, 64431];

/// Our `lruk` (k = 2, retained history of `capacity` evicted blocks), pinned; an
/// independent heap-based Python model of the same rule gives the same counts.
const LRUK_HISTORY: [u64; 8] = [106341, 98504, 95110, 94760, 92547, 84347, 78134, 64977];

/// Locates `shared/traces/<name>` above the crate (see `trace::find_shared_trace`).
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

/// The `obj_id` of every 24-byte oracleGeneral record (`u32 time, u64 obj_id, u32 size,
/// i64 next_access_vtime`, little-endian).
fn keys() -> Vec<u64> {
    let bytes = std::fs::read(trace_path(TRACE)).expect("read trace");
    assert_eq!(bytes.len() % 24, 0, "truncated oracleGeneral trace");
    let keys: Vec<u64> = bytes
        .chunks_exact(24)
        .map(|r| u64::from_le_bytes(r[4..12].try_into().unwrap()))
        .collect();
    assert_eq!(keys.len(), REQUESTS);
    keys
}

/// Object-mode requests whose key is `obj_id` (offset = sector `obj_id`, one volume).
fn requests(keys: &[u64]) -> impl Iterator<Item = Result<Request, TraceError>> + '_ {
    keys.iter().map(|&k| Ok(Request::read(k * 512, 4096)))
}

fn misses(spec: &str, capacity: usize, keys: &[u64]) -> u64 {
    let s = simulate(spec, capacity, KeyMode::Object, requests(keys), &|_| {}).unwrap();
    assert_eq!(s.accesses, REQUESTS as u64);
    s.misses
}

/// libCacheSim's `MRU.c` as plainly as possible: `v[0]` is the head (most recent).
fn naive_mru(capacity: usize, keys: &[u64]) -> u64 {
    let mut v: Vec<u64> = Vec::with_capacity(capacity);
    let mut misses = 0;
    for &k in keys {
        if let Some(i) = v.iter().position(|&x| x == k) {
            v.remove(i);
        } else {
            misses += 1;
            if v.len() == capacity {
                v.remove(0);
            }
        }
        v.insert(0, k);
    }
    misses
}

#[test]
fn classic_policies_match_libcachesim_exactly() {
    let keys = keys();
    let mut bad = Vec::new();
    for &(spec, want) in LIBCACHESIM {
        for (&size, &want) in SIZES.iter().zip(want.iter()) {
            let got = misses(spec, size, &keys);
            if got != want {
                bad.push(format!("{spec} @ {size}: ours {got}, libCacheSim {want}"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn mru_matches_the_naive_model() {
    let keys = keys();
    // The naive model is quadratic: check it on the small sizes and a prefix at the large.
    for (&size, &want) in SIZES.iter().zip(MRU.iter()) {
        assert_eq!(misses("mru", size, &keys), want, "mru @ {size}");
        if size <= 1000 {
            assert_eq!(naive_mru(size, &keys), want, "naive mru @ {size}");
        }
    }
    let prefix = &keys[..20_000];
    let got = simulate("mru", 5000, KeyMode::Object, requests(prefix), &|_| {})
        .unwrap()
        .misses;
    assert_eq!(got, naive_mru(5000, prefix));
}

#[test]
fn lruk_without_history_matches_libcachesim_exactly() {
    let keys = keys();
    let mut bad = Vec::new();
    for (&size, &want) in SIZES.iter().zip(LIBCACHESIM_LRUK.iter()) {
        let got = misses("lruk:history=0", size, &keys);
        if got != want {
            bad.push(format!(
                "lruk:history=0 @ {size}: ours {got}, libCacheSim {want}"
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn lruk_with_history_is_pinned() {
    // The default retains the histories of `capacity` evicted blocks (the paper's retained
    // information), which libCacheSim does not: these are our own numbers, pinned.
    let keys = keys();
    let got: Vec<u64> = SIZES.iter().map(|&s| misses("lruk", s, &keys)).collect();
    assert_eq!(got, LRUK_HISTORY);
}

#[test]
fn lrfu_limits_are_lru_and_lfu() {
    let keys = keys();
    for (i, &size) in SIZES.iter().enumerate().step_by(2) {
        assert_eq!(
            misses("lrfu:lambda=1", size, &keys),
            LIBCACHESIM[0].1[i],
            "λ=1 @ {size}"
        );
        assert_eq!(
            misses("lrfu:lambda=0", size, &keys),
            LIBCACHESIM[3].1[i],
            "λ=0 @ {size}"
        );
    }
}
