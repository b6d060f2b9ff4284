//! Two levels for real: a level-1 node whose export is striped over two level-2 nodes
//! reached over NBD; a hot-chunk tier (bandwidth shares: `bandwidth`).

use crate::common::TestNode;
use bytes::Bytes;

fn l2() -> TestNode {
    TestNode::start(
        r#"
[node]
cache_size = "32MiB"
level = 2
[[export]]
name = "vol"
file = "vol.img"
size = "32MiB"
[[cache]]
name = "l2"
size = "16MiB"
write_policy = "write-through"
[[rule]]
export = "vol"
cache = "l2"
"#,
    )
}

fn reads_of(t: &TestNode) -> u64 {
    let (_, v) = t.api("GET", "/v1/tenants", None);
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x["reads"].as_u64().unwrap())
        .sum()
}

#[test]
fn level_one_striped_over_two_level_two_nodes_serves_a_fitting_working_set_from_memory() {
    let (a, b) = (l2(), l2());
    let l1 = TestNode::start(&format!(
        r#"
[node]
cache_size = "16MiB"
[[export]]
name = "tenant"
upstream = ["{}/vol", "{}/vol"]
stripe_unit = "1MiB"
[[cache]]
name = "l1"
size = "8MiB"
eviction = "arc"
write_policy = "write-back"
[[rule]]
export = "tenant"
cache = "l1"
"#,
        a.node().nbd_addr,
        b.node().nbd_addr
    ));
    let client = l1
        .rt
        .block_on(nbd::NbdClient::connect(l1.node().nbd_addr, "tenant"))
        .unwrap();
    assert_eq!(client.size(), 64 << 20, "two 32 MiB servers striped");
    // Write 4 MiB (a working set that fits in level 1) with a pattern per MiB, flush.
    for mib in 0..4u64 {
        let data = Bytes::from(vec![0x40 + mib as u8; 1 << 20]);
        l1.rt
            .block_on(client.write(mib << 20, data, false))
            .unwrap();
    }
    l1.rt.block_on(client.flush()).unwrap();
    // The stripes reached the servers: MiB 0 and 2 on the first, 1 and 3 on the second.
    let file = |t: &TestNode| std::fs::read(t.dir.path().join("vol.img")).unwrap();
    let (fa, fb) = (file(&a), file(&b));
    assert!(
        fa[..1 << 20].iter().all(|&x| x == 0x40) && fa[1 << 20..2 << 20].iter().all(|&x| x == 0x42)
    );
    assert!(
        fb[..1 << 20].iter().all(|&x| x == 0x41) && fb[1 << 20..2 << 20].iter().all(|&x| x == 0x43)
    );
    // After warm-up, reads of the working set never reach level 2.
    let before = reads_of(&a) + reads_of(&b);
    let l1_before = reads_of(&l1);
    for _ in 0..3 {
        for mib in 0..4u64 {
            let got = l1.rt.block_on(client.read(mib << 20, 1 << 20)).unwrap();
            assert!(got.iter().all(|&x| x == 0x40 + mib as u8));
        }
    }
    assert_eq!(reads_of(&a) + reads_of(&b), before, "level 2 saw no reads");
    // Each 1 MiB hit is one read in the tenant's counters, however it was sent.
    assert_eq!(reads_of(&l1) - l1_before, 12);
    let (_, c) = l1.api("GET", "/v1/caches/l1", None);
    assert_eq!(
        c["stats"]["misses"].as_u64().unwrap(),
        1024,
        "only the first writes missed"
    );
    // A read past the working set goes through to level 2 and back.
    let got = l1.rt.block_on(client.read(40 << 20, 4096)).unwrap();
    assert!(got.iter().all(|&x| x == 0));
    assert!(reads_of(&a) + reads_of(&b) > before);
    l1.stop();
    a.stop();
    b.stop();
}

#[test]
fn hot_tier_places_a_repeatedly_read_chunk_on_the_fast_file() {
    let t = TestNode::start(
        r#"
[node]
cache_size = "1MiB"
[[export]]
name = "slow"
file = "slow.img"
size = "16MiB"
[export.hot_tier]
file = "fast.img"
size = "4MiB"
chunk = "1MiB"
admission = "mrfu"
max_migrations_per_sec = 0
"#,
    );
    let client =
        t.rt.block_on(nbd::NbdClient::connect(t.node().nbd_addr, "slow"))
            .unwrap();
    t.rt.block_on(client.write(5 << 20, Bytes::from(vec![7u8; 1 << 20]), true))
        .unwrap();
    // Chunks 5 and 12 read in turn (the sequential filter ignores back-to-back repeats):
    // each reaches MRFU's threshold of 2 on its second read and migrates.
    for _ in 0..6 {
        let got = t.rt.block_on(client.read(5 << 20, 1 << 20)).unwrap();
        assert!(got.iter().all(|&x| x == 7));
        let got = t.rt.block_on(client.read(12 << 20, 1 << 20)).unwrap();
        assert!(got.iter().all(|&x| x == 0));
    }
    let (_, ex) = t.api("GET", "/v1/exports", None);
    let tier = &ex[0]["hot_tier"];
    assert_eq!(tier["migrations"], 2, "{tier}");
    assert_eq!(tier["resident_chunks"], 2, "{tier}");
    assert!(tier["hits"].as_u64().unwrap() >= 8, "{tier}");
    let fast = std::fs::read(t.dir.path().join("fast.img")).unwrap();
    assert_eq!(
        fast.iter().filter(|&&x| x == 7).count(),
        1 << 20,
        "the chunk is on the fast file"
    );
    t.stop();
}
