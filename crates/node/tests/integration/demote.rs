//! Exclusive levels live: a level-1 node whose export is a level-2 node's export over NBD,
//! both caches `exclusive = true`, the level-1 cache demoting its clean victims to the
//! level-2 node over HTTP. A loop larger than level 1 but smaller than both levels hits
//! level 2 only when exclusive; reads always return the latest write, whatever races the
//! demote path has with writes.

use crate::common::TestNode;
use bytes::Bytes;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::sync::Arc;

const BS: u64 = 4096;

fn l2(exclusive: bool, size: &str, write_policy: &str) -> TestNode {
    TestNode::start(&format!(
        r#"
[node]
cache_size = "8MiB"
level = 2
[[export]]
name = "vol"
file = "vol.img"
size = "8MiB"
[[cache]]
name = "l2"
size = "{size}"
write_policy = "{write_policy}"
exclusive = {exclusive}
[[rule]]
export = "vol"
cache = "l2"
"#
    ))
}

fn l1(below: &TestNode, exclusive: bool, size: &str, write_policy: &str) -> TestNode {
    TestNode::start(&format!(
        r#"
[node]
cache_size = "8MiB"
[[export]]
name = "tenant"
upstream = ["{}/vol"]
upstream_api = [{{ url = "http://{}", token_file = "{}" }}]
[[cache]]
name = "l1"
size = "{size}"
write_policy = "{write_policy}"
exclusive = {exclusive}
[[rule]]
export = "tenant"
cache = "l1"
"#,
        below.node().nbd_addr,
        below.node().api_addr,
        below.dir.path().join("api.token").display()
    ))
}

fn stats(t: &TestNode, cache: &str) -> Value {
    let (s, v) = t.api("GET", &format!("/v1/caches/{cache}"), None);
    assert_eq!(s, 200, "{v}");
    v["stats"].clone()
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// The bytes of block `b` in generation `g`.
fn block(b: u64, g: u8) -> Vec<u8> {
    let mut v = vec![g; BS as usize];
    v[..8].copy_from_slice(&b.to_le_bytes());
    v
}

/// Waits until level 1's demote queue is empty and no batch is in flight.
fn settle(t: &TestNode) {
    for _ in 0..500 {
        if t.node().state.demoter().idle() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the demote queue did not drain");
}

/// Level 1 of 256 blocks (1 MiB), level 2 of 384 (1.5 MiB), a loop over 512 (2 MiB) read
/// in 4 KiB requests: returns (level-2 hits, level-2 misses = disk reads, level-1 hits,
/// accesses) over the passes after the first.
fn loop_run(exclusive: bool) -> (u64, u64, u64, u64) {
    let (w, passes) = (512u64, 4);
    let b = l2(exclusive, "1536KiB", "write-through");
    let a = l1(&b, exclusive, "1MiB", "write-through");
    let client =
        a.rt.block_on(nbd::NbdClient::connect(a.node().nbd_addr, "tenant"))
            .unwrap();
    for i in 0..w {
        a.rt.block_on(client.write(i * BS, Bytes::from(block(i, 7)), false))
            .unwrap();
    }
    a.rt.block_on(client.flush()).unwrap();
    let read_pass = || {
        for i in 0..w {
            let got = a.rt.block_on(client.read(i * BS, BS as u32)).unwrap();
            assert_eq!(&got[..], &block(i, 7)[..], "block {i}");
        }
    };
    read_pass();
    settle(&a);
    let (s2, s1) = (stats(&b, "l2"), stats(&a, "l1"));
    for _ in 1..passes {
        read_pass();
    }
    settle(&a);
    let (e2, e1) = (stats(&b, "l2"), stats(&a, "l1"));
    let d = |e: &Value, s: &Value, k: &str| n(e, k) - n(s, k);
    let out = (
        d(&e2, &s2, "hits"),
        d(&e2, &s2, "misses"),
        d(&e1, &s1, "hits"),
        w * (passes - 1),
    );
    if exclusive {
        assert_eq!(e1["exclusive"], "upper");
        assert_eq!(e2["exclusive"], "lower");
        assert!(n(&e2, "demoted_in") > 0, "{e2}");
        assert!(n(&e2, "dropped_on_read") > 0, "{e2}");
        assert!(n(&e1, "demoted") > 0, "{e1}");
        let (_, node) = a.api("GET", "/v1/node", None);
        assert!(node["demote"]["sent"].as_u64().unwrap() > 0, "{node}");
        assert_eq!(node["demote"]["failed"], 0, "{node}");
        let (_, m) = a.api("GET", "/metrics", None);
        let m = m.as_str().unwrap().to_string();
        assert!(
            m.contains("lachesis_demote_blocks_total{outcome=\"sent\"}"),
            "{m}"
        );
    } else {
        assert_eq!(e1["exclusive"], "off");
        assert_eq!(n(&e1, "demoted"), 0);
    }
    a.stop();
    b.stop();
    out
}

#[test]
fn a_loop_between_level_one_and_both_levels_hits_level_two_only_when_exclusive() {
    let inc = loop_run(false);
    let exc = loop_run(true);
    let ratio = |(h2, m2, h1, acc): (u64, u64, u64, u64)| {
        let l2 = h2 as f64 / (h2 + m2).max(1) as f64;
        let combined = (h1 + h2) as f64 / acc as f64;
        (l2, combined)
    };
    let (inc_l2, inc_all) = ratio(inc);
    let (exc_l2, exc_all) = ratio(exc);
    eprintln!(
        "loop of 512 blocks, level 1 256, level 2 384: inclusive level-2 hit ratio {inc_l2:.3} \
         (disk reads {}), combined {inc_all:.3}; exclusive level-2 hit ratio {exc_l2:.3} \
         (disk reads {}), combined {exc_all:.3}",
        inc.1, exc.1
    );
    // Level 1 misses every access of the loop either way.
    assert_eq!(inc.2, 0);
    assert_eq!(exc.2, 0);
    // Inclusive: an LRU loop longer than level 2 misses there too; every access reads the disk.
    assert_eq!(inc.0, 0, "{inc:?}");
    assert_eq!(inc.1, inc.3, "{inc:?}");
    // Exclusive: one LRU of 640 blocks holds the loop.
    assert!(exc_all >= 0.95, "{exc:?}");
    assert!(exc.1 <= exc.3 / 20, "{exc:?}");
}

/// Random reads and writes from four clients on disjoint blocks, each checked against a
/// model, with the demote path racing them; at the end the disk holds the model.
fn latest_writes(l1_policy: &str) {
    let b = l2(true, "512KiB", "write-through");
    let a = l1(&b, true, "256KiB", l1_policy);
    let addr = a.node().nbd_addr;
    let blocks = 256u64;
    let models = a.rt.block_on(async move {
        let mut tasks = tokio::task::JoinSet::new();
        for t in 0..4u64 {
            tasks.spawn(async move {
                let c = Arc::new(nbd::NbdClient::connect(addr, "tenant").await.unwrap());
                let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                let mut model = vec![0u8; blocks as usize];
                for _ in 0..600 {
                    let i = rng.gen_range(0..blocks / 4) * 4 + t;
                    if rng.gen_bool(0.3) {
                        let g = rng.gen_range(1..=255u8);
                        c.write(i * BS, Bytes::from(block(i, g)), false)
                            .await
                            .unwrap();
                        model[i as usize] = g;
                    } else {
                        let got = c.read(i * BS, BS as u32).await.unwrap();
                        let g = model[i as usize];
                        let want = if g == 0 {
                            vec![0; BS as usize]
                        } else {
                            block(i, g)
                        };
                        assert_eq!(got[8], want[8], "block {i}: stale read");
                        assert_eq!(&got[..], &want[..], "block {i}");
                    }
                }
                c.flush().await.unwrap();
                (t, model)
            });
        }
        let mut all = Vec::new();
        while let Some(r) = tasks.join_next().await {
            all.push(r.unwrap());
        }
        all
    });
    settle(&a);
    let e2 = stats(&b, "l2");
    assert!(n(&e2, "demoted_in") > 0, "{e2}");
    a.stop();
    // Level 2 writes through: once level 1 has stopped (writing its dirty blocks back),
    // the image holds every write.
    let disk = std::fs::read(b_dir_image(&b)).unwrap();
    b.stop();
    for (t, model) in models {
        for (i, &g) in model.iter().enumerate() {
            if i as u64 % 4 != t {
                continue;
            }
            let at = i * BS as usize;
            let want = if g == 0 {
                vec![0; BS as usize]
            } else {
                block(i as u64, g)
            };
            assert_eq!(&disk[at..at + BS as usize], &want[..], "block {i} on disk");
        }
    }
}

fn b_dir_image(b: &TestNode) -> std::path::PathBuf {
    b.dir.path().join("vol.img")
}

#[test]
fn reads_return_the_latest_write_with_write_back_at_level_one() {
    latest_writes("write-back");
}

#[test]
fn reads_return_the_latest_write_with_write_through_at_level_one() {
    latest_writes("write-through");
}

#[test]
fn the_demote_endpoint_checks_its_input() {
    let b = l2(true, "1MiB", "write-through");
    let url = format!("http://{}/v1/demote/vol", b.node().api_addr);
    let r = ureq::post(&url).send_bytes(&[]);
    assert!(matches!(r, Err(ureq::Error::Status(401, _))));
    let bearer = format!("Bearer {}", b.node().api_token.secret());
    let post = |path: &str, body: &[u8]| {
        let url = format!("http://{}{path}", b.node().api_addr);
        match ureq::post(&url)
            .set("authorization", &bearer)
            .send_bytes(body)
        {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(s, r)) => (s, r.into_string().unwrap()),
            Err(e) => panic!("{e}"),
        }
    };
    let good = node::demote::encode([(BS, &block(1, 9)[..])].into_iter());
    let (s, t) = post("/v1/demote/vol", &good);
    assert_eq!(s, 200, "{t}");
    let v: Value = serde_json::from_str(&t).unwrap();
    assert_eq!(v["inserted"], 1);
    // Again: already held, moved to MRU.
    let (_, t) = post("/v1/demote/vol", &good);
    let v: Value = serde_json::from_str(&t).unwrap();
    assert_eq!(
        (v["inserted"].as_u64(), v["refreshed"].as_u64()),
        (Some(0), Some(1))
    );
    let (s, t) = post("/v1/demote/vol", &good[..20]);
    assert_eq!(s, 400);
    assert!(t.contains("record 0 at byte 0"), "{t}");
    let far = node::demote::encode([(8 << 20, &block(1, 9)[..])].into_iter());
    let (s, t) = post("/v1/demote/vol", &far);
    assert_eq!(s, 400);
    assert!(t.contains("record 0"), "{t}");
    let (s, t) = post("/v1/demote/nope", &good);
    assert_eq!(s, 404, "{t}");
    // The demoted block was not written to the disk, and a read serves it and drops it.
    let img = std::fs::read(b_dir_image(&b)).unwrap();
    assert!(img[BS as usize..2 * BS as usize].iter().all(|&x| x == 0));
    let c =
        b.rt.block_on(nbd::NbdClient::connect(b.node().nbd_addr, "vol"))
            .unwrap();
    let got = b.rt.block_on(c.read(BS, BS as u32)).unwrap();
    assert_eq!(&got[..], &block(1, 9)[..]);
    let s2 = stats(&b, "l2");
    assert_eq!((n(&s2, "hits"), n(&s2, "dropped_on_read")), (1, 1), "{s2}");
    assert_eq!(n(&s2, "resident"), 0, "{s2}");
    b.stop();
}

/// Issue 35 item 7: `POST /v1/demote/EXPORT` with a node's token could inject bytes that
/// an NBD read then served although the image held others, on a level-1 node and on a
/// non-exclusive cache. Now both answer 409 and the read returns the image's bytes.
#[test]
fn forged_demotions_are_refused_where_they_would_be_served() {
    let b = l2(false, "1MiB", "write-through");
    let a = l1(&b, false, "1MiB", "write-through");
    let forged = node::demote::encode([(BS, &[0xeeu8; BS as usize][..])].into_iter());
    for (t, export) in [(&a, "tenant"), (&b, "vol")] {
        let bearer = format!("Bearer {}", t.node().api_token.secret());
        let url = format!("http://{}/v1/demote/{export}", t.node().api_addr);
        let (status, text) = match ureq::post(&url)
            .set("authorization", &bearer)
            .send_bytes(&forged)
        {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(s, r)) => (s, r.into_string().unwrap()),
            Err(e) => panic!("{e}"),
        };
        println!("forged demotion to {export}: {status} {text}");
        assert_eq!(status, 409, "{text}");
        let c =
            t.rt.block_on(nbd::NbdClient::connect(t.node().nbd_addr, export))
                .unwrap();
        let got = t.rt.block_on(c.read(BS, BS as u32)).unwrap();
        assert!(got.iter().all(|&x| x == 0), "{export} served forged bytes");
    }
    a.stop();
    b.stop();
}
