//! Cache misses under concurrency, through NBD: many connections, each with many reads in
//! flight, read an image whose every byte is known through a cache far smaller than it,
//! so nearly every read misses and misses of the same blocks overlap. Every byte must be
//! the image's: aligned blocks (read straight into the reply), runs of blocks, and
//! unaligned ranges with partial end blocks (read through a scratch block).

use crate::common::TestNode;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const SIZE: u64 = 8 << 20;

const NODE: &str = r#"
[node]
cache_size = "1MiB"
[[export]]
name = "vol"
file = "vol.img"
[[cache]]
name = "small"
size = "64KiB"
[[rule]]
export = "vol"
cache = "small"
"#;

fn pattern(at: u64) -> u8 {
    (at ^ (at >> 8) ^ (at >> 16).wrapping_mul(31)) as u8
}

#[test]
fn concurrent_misses_read_back_the_image() {
    let image: Vec<u8> = (0..SIZE).map(pattern).collect();
    let t = TestNode::start_prepared(
        &NODE.replace(
            "[node]",
            "[node]\nnbd = \"127.0.0.1:0\"\napi = \"127.0.0.1:0\"",
        ),
        |dir| std::fs::write(dir.join("vol.img"), &image).unwrap(),
    );
    let addr = t.node().nbd_addr;
    t.rt.block_on(async {
        let mut conns = tokio::task::JoinSet::new();
        for c in 0..4u64 {
            conns.spawn(async move {
                let client = Arc::new(nbd::NbdClient::connect(addr, "vol").await.unwrap());
                let mut rng = rand::rngs::StdRng::seed_from_u64(c);
                for _ in 0..20 {
                    // 32 reads in flight on this connection at once.
                    let mut reads = tokio::task::JoinSet::new();
                    for i in 0..32u64 {
                        let (offset, len) = match i % 3 {
                            0 => (rng.gen_range(0..SIZE / 4096) * 4096, 4096),
                            1 => (rng.gen_range(0..SIZE / 4096 - 8) * 4096, 4096 * 8),
                            _ => {
                                let o = rng.gen_range(0..SIZE - 20_000);
                                (o, rng.gen_range(1..20_000))
                            }
                        };
                        let client = client.clone();
                        reads.spawn(async move {
                            let data = client.read(offset, len as u32).await.unwrap();
                            (offset, data)
                        });
                    }
                    while let Some(r) = reads.join_next().await {
                        let (offset, data) = r.unwrap();
                        for (k, &b) in data.iter().enumerate() {
                            let at = offset + k as u64;
                            assert_eq!(b, pattern(at), "byte {at} of a read at {offset}");
                        }
                    }
                }
                client.disconnect().await.unwrap();
            });
        }
        while let Some(r) = conns.join_next().await {
            r.unwrap();
        }
    });
    let (_, c) = t.api("GET", "/v1/caches/small", None);
    let misses = c["stats"]["misses"].as_u64().unwrap();
    assert!(misses > 2000, "{c}");
}
