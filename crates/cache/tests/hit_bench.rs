//! Timed benchmark of the cache-hit 4 KiB read path through `CacheNode::read` (routing,
//! partition lock, policy update, copy, tenant counters), with 1 and 2 threads.
//! Run: `cargo test --release -p cache --test hit_bench -- --ignored --nocapture`.

use cache::{CacheNode, MemBackend, RoutingRule, WritePolicy};
use std::sync::Arc;
use std::time::Instant;

const BS: usize = 4096;
const RESIDENT: u64 = 1024;
const OPS: u64 = 2_000_000;

fn run(threads: u64, policy: &str) -> f64 {
    let node = Arc::new(CacheNode::new(RESIDENT as usize, BS).unwrap());
    node.add_export("vol", Arc::new(MemBackend::new(RESIDENT * BS as u64)))
        .unwrap();
    let c = node
        .create_cache(
            "c",
            RESIDENT as usize,
            &policy.parse().unwrap(),
            WritePolicy::WriteBack,
        )
        .unwrap();
    node.create_rule(
        RoutingRule {
            client: None,
            op: None,
            export: "vol".into(),
            range: None,
        },
        c,
    )
    .unwrap();
    let mut buf = vec![0u8; BS];
    for b in 0..RESIDENT {
        node.read("vol", "t", b * BS as u64, &mut buf).unwrap();
    }
    let start = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let node = node.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; BS];
                let mut x = t.wrapping_mul(0x9E37_79B9) | 1;
                for _ in 0..OPS / threads {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    node.read("vol", "t", (x % RESIDENT) * BS as u64, &mut buf)
                        .unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let ns = start.elapsed().as_nanos() as f64 / OPS as f64;
    let s = node.get_cache_stats(c).unwrap();
    assert_eq!(s.misses, RESIDENT);
    assert_eq!(s.hits, OPS - OPS % threads);
    ns
}

/// The floor: a `Mutex<HashMap>` lookup plus the same 4 KiB copy, one thread.
fn baseline() -> f64 {
    let map: std::sync::Mutex<std::collections::HashMap<u64, Vec<u8>>> =
        std::sync::Mutex::new((0..RESIDENT).map(|b| (b, vec![b as u8; BS])).collect());
    let mut buf = vec![0u8; BS];
    let mut x = 1u64;
    let start = Instant::now();
    for _ in 0..OPS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let g = map.lock().unwrap();
        buf.copy_from_slice(&g[&(x % RESIDENT)]);
    }
    std::hint::black_box(&buf);
    start.elapsed().as_nanos() as f64 / OPS as f64
}

#[test]
#[ignore]
fn hit_path_4k() {
    println!("baseline Mutex<HashMap> + 4 KiB copy: {:.0} ns", baseline());
    for policy in ["lru", "s3fifo"] {
        for threads in [1, 2] {
            let ns = run(threads, policy);
            println!(
                "{policy}: {threads} thread(s): {ns:.0} ns per 4 KiB hit (wall time / ops), {:.2} M ops/s",
                1e3 / ns
            );
        }
    }
}
