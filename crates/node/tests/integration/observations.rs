//! `GET /v1/observations` through the real API after real NBD I/O: cumulative counters,
//! the hit/miss latency split, one curve per candidate policy, "no data" for an idle
//! tenant, the epoch; and the idempotent cache verbs a controller relies on.

use crate::common::TestNode;
use serde_json::Value;

const NODE: &str = r#"
[node]
name = "l1-a"
cache_size = "64MiB"
[[export]]
name = "vol1"
tenant = "t1"
file = "vol1.img"
size = "64MiB"
[[export]]
name = "vol2"
tenant = "t2"
file = "vol2.img"
size = "16MiB"
[[cache]]
name = "t1"
size = "16MiB"
[[rule]]
export = "vol1"
cache = "t1"
"#;

const BS: u64 = 4096;
const READ: u32 = 64 << 10;
/// A loop over 1,024 blocks (4 MiB) read ten times in 64 KiB reads.
const LOOP_BLOCKS: u64 = 1024;
const PASSES: u64 = 10;

fn tenant<'a>(obs: &'a Value, name: &str) -> &'a Value {
    obs["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tenant"] == name)
        .unwrap_or_else(|| panic!("no tenant {name} in {obs}"))
}

/// The miss ratio of `curve` at `size` bytes (a point must be there).
fn at(curve: &Value, size: u64) -> f64 {
    curve["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p[0].as_u64() == Some(size))
        .unwrap_or_else(|| panic!("no point at {size} in {curve}"))[1]
        .as_f64()
        .unwrap()
}

#[test]
fn observations_count_what_the_tenants_did() {
    let t = TestNode::start(NODE);
    let (status, before) = t.api("GET", "/v1/observations", None);
    assert_eq!(status, 200, "{before}");
    assert_eq!(before["node"], "l1-a");
    assert_eq!(before["level"], 1);
    assert_eq!(before["block_size"], BS);
    assert_eq!(before["cache_size"], 64u64 << 20);
    let epoch = before["epoch"].as_str().unwrap().to_string();
    assert_eq!(epoch.len(), 16, "{before}");
    assert_eq!(tenant(&before, "t1")["requests"], 0);
    assert_eq!(tenant(&before, "t1")["curves"], Value::Array(vec![]));

    let client =
        t.rt.block_on(nbd::NbdClient::connect(t.node().nbd_addr, "vol1"))
            .unwrap();
    let reads_per_pass = LOOP_BLOCKS * BS / READ as u64;
    for _ in 0..PASSES {
        for i in 0..reads_per_pass {
            let data = t.rt.block_on(client.read(i * READ as u64, READ)).unwrap();
            assert_eq!(data.len(), READ as usize);
        }
    }
    let (_, obs) = t.api("GET", "/v1/observations", None);
    assert_eq!(
        obs["epoch"],
        epoch.as_str(),
        "the epoch stays while the node runs"
    );
    assert!(obs["uptime_ms"].as_u64().unwrap() >= before["uptime_ms"].as_u64().unwrap());
    let t1 = tenant(&obs, "t1");
    let requests = reads_per_pass * PASSES;
    assert_eq!(t1["cache"], "t1");
    assert_eq!(t1["size"], 16u64 << 20);
    assert_eq!(t1["eviction"], "lru");
    assert_eq!(t1["admission"], "demand");
    assert_eq!(t1["requests"], requests);
    assert_eq!(t1["read_bytes"], requests * READ as u64);
    assert_eq!(t1["write_bytes"], 0);
    assert_eq!(t1["lookups"], LOOP_BLOCKS * PASSES);
    // The first pass misses, the other nine hit (the loop fits in 16 MiB).
    assert_eq!(t1["hits"], LOOP_BLOCKS * (PASSES - 1));
    assert_eq!(t1["latency"]["count"], requests);
    assert_eq!(t1["served"]["miss"]["count"], reads_per_pass);
    assert_eq!(t1["served"]["hit"]["count"], reads_per_pass * (PASSES - 1));
    let sum = t1["latency"]["sum_ms"].as_f64().unwrap();
    let split = t1["served"]["hit"]["sum_ms"].as_f64().unwrap()
        + t1["served"]["miss"]["sum_ms"].as_f64().unwrap();
    assert!((sum - split).abs() < 1e-6, "{t1}");
    let p50 = t1["latency"]["p50_ms"].as_f64().unwrap();
    let p99 = t1["latency"]["p99_ms"].as_f64().unwrap();
    assert!(p50 > 0.0 && p50 <= p99, "{t1}");

    // One curve per candidate, covering 0..=64 MiB (the tenant's export), ascending.
    let curves = t1["curves"].as_array().unwrap();
    let names: Vec<&str> = curves
        .iter()
        .map(|c| c["policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lru", "arc", "lirs", "s3fifo"]);
    for c in curves {
        let pts = c["points"].as_array().unwrap();
        assert_eq!(pts[0][0], 0, "{c}");
        assert_eq!(pts[0][1], 1.0, "{c}");
        assert_eq!(pts.last().unwrap()[0], 64u64 << 20, "{c}");
        assert!(
            pts.windows(2)
                .all(|w| w[0][0].as_u64().unwrap() < w[1][0].as_u64().unwrap()),
            "{c}"
        );
        // Above the loop, only the first pass misses: 1 in 10.
        let last = pts.last().unwrap()[1].as_f64().unwrap();
        assert!((last - 0.1).abs() < 0.05, "{c}");
    }
    // LRU: below the loop's 1,024 blocks every access misses.
    assert!(at(&curves[0], 512 * BS) > 0.95, "{}", curves[0]);
    assert!(
        (at(&curves[0], 2048 * BS) - 0.1).abs() < 0.02,
        "{}",
        curves[0]
    );

    // The idle tenant: no cache, no requests, no curve ("no data", not a flat 0).
    let t2 = tenant(&obs, "t2");
    assert_eq!(t2["cache"], Value::Null);
    assert_eq!(t2["size"], 0);
    assert_eq!(t2["requests"], 0);
    assert_eq!(t2["curves"], Value::Array(vec![]));
    assert_eq!(t2["served"]["hit"]["count"], 0);

    // Without the token: 401.
    let (status, _) = t.api_as(None, "GET", "/v1/observations", None);
    assert_eq!(status, 401);

    // Another start of a node has another epoch.
    let other = TestNode::start(NODE);
    let (_, o2) = other.api("GET", "/v1/observations", None);
    assert_ne!(o2["epoch"], epoch.as_str());
    other.stop();
    t.stop();
}

#[test]
fn cache_verbs_are_idempotent_for_a_controller() {
    let t = TestNode::start(NODE);
    let spec = r#"{"name":"t2","size":"8MiB","eviction":"arc"}"#;
    let (status, c) = t.api("POST", "/v1/caches", Some(spec));
    assert_eq!(status, 201, "{c}");
    let id = c["id"].clone();
    // The same create again: 200, the same cache.
    let (status, c) = t.api("POST", "/v1/caches", Some(spec));
    assert_eq!(status, 200, "{c}");
    assert_eq!(c["id"], id);
    assert_eq!(c["size_bytes"], 8u64 << 20);
    // Other settings under the same name: 409 naming what differs.
    let (status, c) = t.api(
        "POST",
        "/v1/caches",
        Some(r#"{"name":"t2","size":"4MiB","eviction":"lru"}"#),
    );
    assert_eq!(status, 409, "{c}");
    let reason = c["error"].as_str().unwrap();
    assert!(
        reason.contains("size") && reason.contains("eviction"),
        "{reason}"
    );
    // Resize and switch policy through the configure verb.
    let (status, c) = t.api(
        "PATCH",
        "/v1/caches/t2",
        Some(r#"{"size":"4MiB","eviction":"lirs"}"#),
    );
    assert_eq!(status, 200, "{c}");
    assert_eq!(c["size_bytes"], 4u64 << 20);
    assert_eq!(c["stats"]["eviction"], "lirs");
    // Delete, then delete again: 404 with a JSON reason.
    let (status, _) = t.api("DELETE", "/v1/caches/t2", None);
    assert_eq!(status, 200);
    let (status, c) = t.api("DELETE", "/v1/caches/t2", None);
    assert_eq!(status, 404, "{c}");
    assert!(c["error"].as_str().unwrap().contains("t2"), "{c}");
    t.stop();
}

/// Issue 35: a request answered with an error is counted as failed and never timed. Over
/// an nbdkit whose every read fails (EIO), five reads that fail and three writes that
/// succeed show as `failed: 5` and three timed requests, and the failures leave the
/// histogram empty of reads.
#[test]
fn failed_requests_are_counted_apart_and_never_timed() {
    let tmp = tempfile::tempdir().unwrap();
    let img = crate::common::nbdkit::sparse_image(tmp.path(), 8 << 20);
    let kit = crate::common::nbdkit::Nbdkit::start(
        &img,
        &["error"],
        &["error-pread=EIO".into(), "error-pread-rate=1".into()],
    );
    let t = TestNode::start(&format!(
        "[node]\ncache_size = \"4MiB\"\n[[export]]\nname = \"vol\"\ntenant = \"t\"\nupstream = [\"{}\"]\n",
        kit.upstream()
    ));
    let client =
        t.rt.block_on(nbd::NbdClient::connect(t.node().nbd_addr, "vol"))
            .unwrap();
    for k in 0..5u64 {
        assert!(t.rt.block_on(client.read(k * BS, 4096)).is_err());
    }
    for k in 0..3u64 {
        t.rt.block_on(client.write(k * BS, vec![7; 4096], false))
            .unwrap();
    }
    let (status, obs) = t.api("GET", "/v1/observations", None);
    assert_eq!(status, 200, "{obs}");
    let l = &tenant(&obs, "t")["latency"];
    assert_eq!(l["failed"], 5, "{l}");
    assert_eq!(l["count"], 3, "{l}");
    let served = &tenant(&obs, "t")["served"];
    assert_eq!(served["hit"]["count"].as_u64().unwrap_or(0), 0, "{served}");
    assert_eq!(served["miss"]["count"].as_u64().unwrap_or(0), 0, "{served}");
    // `/metrics` counts them too, and keeps them out of the latency series.
    let metrics = ureq::get(&format!("http://{}/metrics", t.node().api_addr))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    let sample = |name: &str| -> Vec<&str> {
        metrics
            .lines()
            .filter(|l| l.starts_with(name) && l.contains("tenant=\"t\""))
            .collect()
    };
    let failed = sample("lachesis_tenant_failed_requests_total{");
    assert!(failed.len() == 1 && failed[0].ends_with(" 5"), "{failed:?}");
    let counts = sample("lachesis_tenant_latency_seconds_count{");
    assert!(
        counts
            .iter()
            .any(|l| l.contains("op=\"read\"") && l.ends_with(" 0")),
        "{counts:?}"
    );
}
