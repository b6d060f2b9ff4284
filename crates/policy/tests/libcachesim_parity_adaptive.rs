//! Parity of the adaptive eviction policies (ARC, LIRS, 2Q, MQ, S3-FIFO, SIEVE) with
//! libCacheSim in object mode on the shared cloudPhysics oracleGeneral trace: every record
//! is one access to its `obj_id`, object sizes are ignored.
//!
//! The reference miss ratios are PyPI `libcachesim` 0.3.5's, produced by
//!
//! ```text
//! python3 tools/libcachesim_ref.py --trace shared/traces/cloudPhysicsIO.oracleGeneral.bin \
//!     --policy arc,lirs,2q,mq,s3fifo,sieve --size 10,20,100,500,1000,2000,5000,10000,20000
//! ```
//!
//! Every policy must be within 0.005 of libCacheSim; where our semantics are libCacheSim's
//! the miss counts must be equal. Known differences (documented in each module):
//! * S3-FIFO is pinned from 20 blocks: below that libCacheSim's small queue holds one block
//!   and it refuses to insert anything (miss ratio 1.0 at 10 blocks);
//! * LIRS follows the paper by default on hits to resident HIR blocks outside the stack;
//!   `lirs:q-hit-demotes=1` is libCacheSim's rule and matches exactly from 100 blocks up
//!   (at 10 blocks libCacheSim can count an evicted block as resident).

use policy::{build, BlockCache};
use std::path::PathBuf;

const TRACE: &str = "cloudPhysicsIO.oracleGeneral.bin";

/// (policy, capacity in objects, libCacheSim's miss ratio).
const REFERENCE: &[(&str, usize, f64)] = &[
    // arc
    ("arc", 10, 0.9314142194744977),
    ("arc", 100, 0.8547316284951525),
    ("arc", 500, 0.8274026977659126),
    ("arc", 1000, 0.8257253758606155),
    ("arc", 2000, 0.8152047913446677),
    ("arc", 5000, 0.7707777153294928),
    ("arc", 10000, 0.6973882956301812),
    ("arc", 20000, 0.5657404805395532),
    // lirs
    ("lirs", 10, 0.9338467753266826),
    ("lirs", 100, 0.8595177040888015),
    ("lirs", 500, 0.8310295770689897),
    ("lirs", 1000, 0.8281579317128003),
    ("lirs", 2000, 0.8173475481242096),
    ("lirs", 5000, 0.7489900941407897),
    ("lirs", 10000, 0.65332127300829),
    ("lirs", 20000, 0.5153242236897569),
    // 2q
    ("2q", 10, 0.9296578614584797),
    ("2q", 100, 0.8558556976254039),
    ("2q", 500, 0.8304499789237039),
    ("2q", 1000, 0.8265157369678235),
    ("2q", 2000, 0.8173651117043699),
    ("2q", 5000, 0.7717349304482226),
    ("2q", 10000, 0.6922772938035688),
    ("2q", 20000, 0.6331934101447239),
    // mq
    ("mq", 10, 0.9318006182380216),
    ("mq", 100, 0.8601236476043277),
    ("mq", 500, 0.8309681045384292),
    ("mq", 1000, 0.8233016017985106),
    ("mq", 2000, 0.8135186876492905),
    ("mq", 5000, 0.7736405788956021),
    ("mq", 10000, 0.729678937754672),
    ("mq", 20000, 0.6090522692145567),
    // s3fifo
    ("s3fifo", 20, 0.9132007868483911),
    ("s3fifo", 100, 0.8547491920753126),
    ("s3fifo", 500, 0.8303972881832233),
    ("s3fifo", 1000, 0.8255321764788535),
    ("s3fifo", 2000, 0.8166186595475622),
    ("s3fifo", 5000, 0.7525028101728256),
    ("s3fifo", 10000, 0.6635871856119151),
    ("s3fifo", 20000, 0.5208567514402136),
    // sieve
    ("sieve", 10, 0.9312210200927357),
    ("sieve", 100, 0.8617570605592244),
    ("sieve", 500, 0.8288165659688072),
    ("sieve", 1000, 0.8252687227764508),
    ("sieve", 2000, 0.82031579317128),
    ("sieve", 5000, 0.7885871856119151),
    ("sieve", 10000, 0.7118431221020093),
    ("sieve", 20000, 0.565819516650274),
];

/// (spec, capacity) pairs whose miss count is not libCacheSim's exactly (but within 0.005).
const NOT_EXACT: &[(&str, usize)] = &[("lirs", 10), ("lirs", 10000), ("lirs", 20000)];

/// Locates `shared/traces/<name>` above the crate (see `trace::find_shared_trace`).
fn trace_path(name: &str) -> Option<PathBuf> {
    trace::find_shared_trace(name, std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
}

/// The `obj_id` of every 24-byte oracleGeneral record (`u32 time, u64 obj_id, u32 size,
/// i64 next_access_vtime`, little-endian).
fn read_keys(path: &PathBuf) -> Vec<u64> {
    let bytes = std::fs::read(path).expect("read trace");
    assert_eq!(bytes.len() % 24, 0, "truncated oracleGeneral trace");
    bytes
        .chunks_exact(24)
        .map(|r| u64::from_le_bytes(r[4..12].try_into().unwrap()))
        .collect()
}

fn misses(spec: &str, capacity: usize, keys: &[u64]) -> u64 {
    let mut c = BlockCache::new(capacity, build(spec).unwrap());
    keys.iter()
        .filter(|&&k| !c.access(k, |_, _| {}).is_hit())
        .count() as u64
}

fn keys() -> Vec<u64> {
    let p = trace_path(TRACE).unwrap_or_else(|| {
        panic!(
            "shared/traces/{TRACE} not found above {}",
            env!("CARGO_MANIFEST_DIR")
        )
    });
    let keys = read_keys(&p);
    assert_eq!(keys.len(), 113_872);
    keys
}

/// Checks `spec` against libCacheSim's `policy` at every pinned size; returns the report.
fn check(spec: &str, policy: &str, keys: &[u64], exact_from: usize) -> Vec<String> {
    let n = keys.len() as f64;
    let mut bad = Vec::new();
    for &(_, size, want) in REFERENCE.iter().filter(|r| r.0 == policy) {
        let got = misses(spec, size, keys);
        let ratio = got as f64 / n;
        let want_misses = (want * n).round() as u64;
        let exact = size >= exact_from && !NOT_EXACT.contains(&(spec, size));
        if (ratio - want).abs() > 0.005 || (exact && got != want_misses) {
            bad.push(format!(
                "{spec} @ {size}: ours {ratio:.6} ({got} misses), libCacheSim {want:.6} \
                 ({want_misses} misses), exact expected: {exact}"
            ));
        }
    }
    bad
}

#[test]
fn adaptive_policies_match_libcachesim() {
    let keys = keys();
    let mut bad = Vec::new();
    for p in ["arc", "lirs", "2q", "mq", "s3fifo", "sieve"] {
        bad.extend(check(p, p, &keys, 0));
    }
    bad.extend(check("lirs:q-hit-demotes=1", "lirs", &keys, 100));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn s3fifo_below_twenty_blocks_is_a_documented_difference() {
    // libCacheSim's S3-FIFO at 10 objects caches nothing (miss ratio 1.0); ours admits every
    // missed block into the one-block small queue.
    let keys = keys();
    assert_eq!(misses("s3fifo", 10, &keys), 106_148);
}
