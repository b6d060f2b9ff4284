//! Issue 37 item 2, the node's half: two tenants contend for one node's slow backend
//! (nbdkit's file plugin behind its `delay` filter, every read 4 ms) and the node's
//! backend queue shares the backend's service time in the proportions set through
//! `PUT /v1/proportions`; with none set, equally. The bad-input half: proportions that do
//! not sum to one, non-positive ones and unknown tenants are refused naming the field,
//! and the node keeps what it had.

use crate::common::nbdkit::Nbdkit;
use crate::common::TestNode;
use std::time::Duration;

const READ: u64 = 64 << 10;
const IMAGE: u64 = 64 << 20;
/// Reads each tenant keeps in flight: far more than the node lets into the backend.
const DEPTH: u64 = 8;

/// Both tenants read for `secs` with `DEPTH` reads in flight each; bytes read by each.
fn contend(t: &TestNode, secs: f64) -> (u64, u64) {
    let addr = t.node().nbd_addr;
    t.rt.block_on(async move {
        let run = |name: &'static str| async move {
            let c = std::sync::Arc::new(nbd::NbdClient::connect(addr, name).await.unwrap());
            let end = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
            let mut tasks = tokio::task::JoinSet::new();
            for q in 0..DEPTH {
                let c = c.clone();
                tasks.spawn(async move {
                    let mut n = 0u64;
                    let mut i = q;
                    while tokio::time::Instant::now() < end {
                        // Spread over the image; no cache, so every read is a backend read.
                        let off = (i * 7919 * READ) % IMAGE;
                        c.read(off, READ as u32).await.unwrap();
                        n += READ;
                        i += DEPTH;
                    }
                    n
                });
            }
            let mut bytes = 0u64;
            while let Some(n) = tasks.join_next().await {
                bytes += n.unwrap();
            }
            bytes
        };
        tokio::join!(run("gold"), run("bronze"))
    })
}

/// `(requests, service_ms, queue_ms, proportion)` of each tenant's backend use, from the
/// node's observations.
fn backend(t: &TestNode) -> Vec<(String, api::bandwidth::BackendView)> {
    let (s, v) = t.api("GET", "/v1/observations", None);
    assert_eq!(s, 200);
    let o: api::node::NodeObservations = serde_json::from_value(v).unwrap();
    o.tenants
        .into_iter()
        .map(|t| (t.tenant, t.backend))
        .collect()
}

fn view<'a>(
    all: &'a [(String, api::bandwidth::BackendView)],
    tenant: &str,
) -> &'a api::bandwidth::BackendView {
    &all.iter().find(|(t, _)| t == tenant).unwrap().1
}

#[test]
fn a_slow_backend_is_shared_in_the_proportions_set_and_equally_without() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::File::create(&img).unwrap().set_len(IMAGE).unwrap();
    let disk = Nbdkit::start(&img, &["delay"], &["rdelay=4ms".into()]);
    let up = disk.upstream();
    // No cache: every read waits for the backend, two at a time.
    let t = TestNode::start(&format!(
        r#"
[node]
cache_size = "1MiB"
backend_depth = 2
[[export]]
name = "gold"
upstream = ["{up}"]
[[export]]
name = "bronze"
upstream = ["{up}"]
"#
    ));
    // 3:1.
    let (s, v) = t.api(
        "PUT",
        "/v1/proportions",
        Some(r#"{"gold":0.75,"bronze":0.25}"#),
    );
    assert_eq!(s, 200, "{v}");
    let before = backend(&t);
    let (gold, bronze) = contend(&t, 4.0);
    let after = backend(&t);
    let ratio = gold as f64 / bronze as f64;
    // Two calls of about 4 ms at a time: about 500 reads a second, 2,000 in the run.
    let reads = (gold + bronze) / READ;
    assert!(reads >= 800, "only {reads} reads");
    assert!(
        (ratio / 3.0 - 1.0).abs() <= 0.10,
        "gold/bronze throughput {ratio:.3} ({gold} / {bronze} bytes), want 3 within 10 %"
    );
    // The node's own account agrees: service time 3:1, both queued, proportions as set.
    let d = |name: &str, f: fn(&api::bandwidth::BackendView) -> f64| {
        f(view(&after, name)) - f(view(&before, name))
    };
    let service = d("gold", |b| b.service_ms) / d("bronze", |b| b.service_ms);
    assert!(
        (service / 3.0 - 1.0).abs() <= 0.10,
        "gold/bronze service time {service:.3}"
    );
    assert!(d("bronze", |b| b.queue_ms) > d("bronze", |b| b.service_ms));
    assert_eq!(
        d("gold", |b| b.requests as f64),
        (gold / READ) as f64,
        "every read of gold was one backend call"
    );
    assert_eq!(view(&after, "gold").proportion, Some(0.75));
    assert_eq!(view(&after, "bronze").proportion, Some(0.25));
    println!("3:1 -> throughput {ratio:.3}, service time {service:.3}, {reads} reads");

    // Bad input: each refused naming the field, the proportions unchanged.
    for (body, status, field) in [
        (r#"{"gold":0.75,"bronze":0.5}"#, 400, "proportions"),
        (r#"{"gold":1.5,"bronze":-0.5}"#, 400, "proportions.bronze"),
        (r#"{"gold":1.0,"bronze":0}"#, 400, "proportions.bronze"),
        (r#"{"gold":0.5,"nobody":0.5}"#, 404, "proportions.nobody"),
        (r#"{"gold":"half"}"#, 400, "gold"),
    ] {
        let (s, v) = t.api("PUT", "/v1/proportions", Some(body));
        assert_eq!(s, status, "{body}: {v}");
        assert!(v.to_string().contains(field), "{body}: {v}");
    }
    let (_, v) = t.api("GET", "/v1/proportions", None);
    assert_eq!(v["proportions"]["gold"], 0.75);
    assert_eq!(v["proportions"]["bronze"], 0.25);

    // None set: equal shares.
    let (s, v) = t.api("PUT", "/v1/proportions", Some("{}"));
    assert_eq!(s, 200, "{v}");
    let (gold, bronze) = contend(&t, 4.0);
    let ratio = gold as f64 / bronze as f64;
    assert!(
        (ratio - 1.0).abs() <= 0.10,
        "gold/bronze throughput {ratio:.3} ({gold} / {bronze} bytes), want 1 within 10 %"
    );
    assert_eq!(view(&backend(&t), "gold").proportion, None);
    println!("none -> throughput {ratio:.3}");
    t.stop();
    drop(disk);
}
