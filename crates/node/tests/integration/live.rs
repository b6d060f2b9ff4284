//! The node served to real NBD clients (qemu-io, qemu-img, nbdinfo) and driven through its
//! HTTP API, in one process: bytes written through the cache read back through it and
//! from the backing file after a FLUSH; the API's verbs work and its bad requests get 4xx
//! with a reason.

use crate::common::{run, TestNode};
use std::io::Write;

const NODE: &str = r#"
[node]
cache_size = "64MiB"
[[export]]
name = "demo"
file = "demo.img"
size = "64MiB"
[[export]]
name = "other"
tenant = "bob"
file = "other.img"
size = "16MiB"
[[cache]]
name = "demo"
size = "16MiB"
write_policy = "write-back"
[[rule]]
export = "demo"
cache = "demo"
"#;

fn backing(t: &TestNode, name: &str) -> Vec<u8> {
    std::fs::read(t.dir.path().join(name)).unwrap()
}

#[test]
fn qemu_io_writes_read_back_through_the_cache_and_reach_the_file_on_flush() {
    let t = TestNode::start(NODE);
    let uri = t.uri("demo");
    // 4 MiB of 0xab at 1 MiB, a partial-block write of 0xcd, then read both back.
    run(
        "qemu-io",
        &[
            "-f",
            "raw",
            &uri,
            "-c",
            "write -P 0xab 1M 4M",
            "-c",
            "write -P 0xcd 100 3000",
            "-c",
            "read -P 0xab 1M 4M",
            "-c",
            "read -P 0xcd 100 3000",
            "-c",
            "read -P 0 3100 993",
        ],
    );
    // qemu-io flushes when it closes the image, so the data is on the file already.
    let (_, c) = t.api("GET", "/v1/caches/demo", None);
    assert_eq!(c["stats"]["dirty"], 0, "{c}");
    // Our own client does not: a write stays dirty in the write-back cache until FLUSH.
    let addr = t.node().nbd_addr;
    let client =
        t.rt.block_on(nbd::NbdClient::connect(addr, "demo"))
            .unwrap();
    t.rt.block_on(client.write(8 << 20, bytes::Bytes::from(vec![0x5au8; 1 << 20]), false))
        .unwrap();
    let (_, c) = t.api("GET", "/v1/caches/demo", None);
    assert_eq!(c["stats"]["dirty"], 256, "{c}");
    assert!(backing(&t, "demo.img")[8 << 20..9 << 20]
        .iter()
        .all(|&b| b == 0));
    t.rt.block_on(client.flush()).unwrap();
    assert!(backing(&t, "demo.img")[8 << 20..9 << 20]
        .iter()
        .all(|&b| b == 0x5a));
    let (_, c) = t.api("GET", "/v1/caches/demo", None);
    assert_eq!(c["stats"]["dirty"], 0, "{c}");
    let file = backing(&t, "demo.img");
    assert!(file[1 << 20..5 << 20].iter().all(|&b| b == 0xab));
    assert!(file[100..3100].iter().all(|&b| b == 0xcd));
    assert!(file[3100..4096].iter().all(|&b| b == 0));
    // A re-read is served from memory: hits grow, misses do not.
    let (_, before) = t.api("GET", "/v1/caches/demo", None);
    run("qemu-io", &["-f", "raw", &uri, "-c", "read -P 0xab 1M 4M"]);
    let (_, after) = t.api("GET", "/v1/caches/demo", None);
    assert_eq!(after["stats"]["misses"], before["stats"]["misses"]);
    assert_eq!(
        after["stats"]["hits"].as_u64().unwrap() - before["stats"]["hits"].as_u64().unwrap(),
        1024
    );
    // The tenant (export, client) is counted with latencies.
    let (_, tenants) = t.api("GET", "/v1/tenants", None);
    let me = tenants
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["export"] == "demo")
        .unwrap();
    assert_eq!(me["client"], "127.0.0.1");
    assert!(me["latency"]["read"]["count"].as_u64().unwrap() >= 3);
    t.stop();
}

#[test]
fn qemu_img_convert_round_trips_and_nbdinfo_lists_exports() {
    let t = TestNode::start(NODE);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.raw");
    let back = dir.path().join("back.raw");
    let data: Vec<u8> = (0..16u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::File::create(&src)
        .unwrap()
        .write_all(&data)
        .unwrap();
    let other = t.uri("other");
    run(
        "qemu-img",
        &[
            "convert",
            "-n",
            "-f",
            "raw",
            "-O",
            "raw",
            src.to_str().unwrap(),
            &other,
        ],
    );
    run(
        "qemu-img",
        &[
            "convert",
            "-f",
            "raw",
            "-O",
            "raw",
            &other,
            back.to_str().unwrap(),
        ],
    );
    assert_eq!(std::fs::read(&back).unwrap(), data);
    // `other` has no rule: it is served directly, so the file has the bytes at once.
    assert_eq!(backing(&t, "other.img"), data);
    let info = run("qemu-img", &["info", "--output=json", &t.uri("demo")]);
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(v["virtual-size"], 64 << 20);
    let list = run(
        "nbdinfo",
        &["--list", "--json", &format!("nbd://{}", t.node().nbd_addr)],
    );
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    let names: Vec<&str> = v["exports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["export-name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["demo", "other"]);
    t.stop();
}

#[test]
fn api_verbs_change_caches_online_and_bad_requests_get_4xx() {
    let t = TestNode::start(NODE);
    let uri = t.uri("demo");
    run("qemu-io", &["-f", "raw", &uri, "-c", "write -P 0x11 0 8M"]);
    // Resize (shrinking writes back evicted dirty blocks), switch policy, change write policy.
    let (s, c) = t.api(
        "PATCH",
        "/v1/caches/demo",
        Some(r#"{"size":"4MiB","eviction":"arc"}"#),
    );
    assert_eq!(s, 200, "{c}");
    assert_eq!(c["stats"]["capacity"], 1024);
    assert!(c["stats"]["resident"].as_u64().unwrap() <= 1024);
    assert!(
        c["stats"]["eviction"].as_str().unwrap().starts_with("arc"),
        "{c}"
    );
    let (s, _) = t.api(
        "PATCH",
        "/v1/caches/0",
        Some(r#"{"write_policy":"write-through"}"#),
    );
    assert_eq!(s, 200);
    run("qemu-io", &["-f", "raw", &uri, "-c", "read -P 0x11 0 8M"]);
    // A second cache for `other`, read-only rule, then remove everything.
    let (s, c) = t.api(
        "POST",
        "/v1/caches",
        Some(r#"{"name":"bob","size":1048576,"eviction":"lirs"}"#),
    );
    assert_eq!(s, 201, "{c}");
    let (s, r) = t.api(
        "POST",
        "/v1/rules",
        Some(r#"{"export":"other","cache":"bob","op":"read"}"#),
    );
    assert_eq!(s, 201, "{r}");
    let rule = r["id"].as_u64().unwrap();
    run(
        "qemu-io",
        &[
            "-f",
            "raw",
            &t.uri("other"),
            "-c",
            "read -P 0 0 1M",
            "-c",
            "read -P 0 0 1M",
        ],
    );
    let (_, c) = t.api("GET", "/v1/caches/bob", None);
    assert_eq!(
        (c["stats"]["hits"].as_u64(), c["stats"]["misses"].as_u64()),
        (Some(256), Some(256))
    );
    // The curve of a profiled cache has points in increasing size.
    let (s, curve) = t.api("GET", "/v1/caches/demo/curve?points=10", None);
    assert_eq!(s, 200);
    let pts = curve["points"].as_array().unwrap();
    assert_eq!(pts.len(), 11, "size 0 and ten sizes");
    assert!(pts
        .windows(2)
        .all(|w| w[0]["cache_size"].as_u64() < w[1]["cache_size"].as_u64()));

    // Bad requests: each a 4xx whose reason names the problem.
    let bad: &[(&str, &str, Option<&str>, u16, &str)] = &[
        ("GET", "/v1/caches/nope", None, 404, "nope"),
        ("DELETE", "/v1/caches/99", None, 404, "99"),
        (
            "PATCH",
            "/v1/caches/demo",
            Some(r#"{"size":-4096}"#),
            400,
            "negative",
        ),
        (
            "PATCH",
            "/v1/caches/demo",
            Some(r#"{"size":"1TiB"}"#),
            409,
            "does not fit",
        ),
        (
            "PATCH",
            "/v1/caches/demo",
            Some(r#"{"eviction":"belady"}"#),
            400,
            "belady",
        ),
        (
            "PATCH",
            "/v1/caches/demo",
            Some(r#"{"colour":"red"}"#),
            400,
            "colour",
        ),
        (
            "POST",
            "/v1/caches",
            Some(r#"{"name":"x","size":"1MiB","write_policy":"sometimes"}"#),
            400,
            "write_policy",
        ),
        (
            "POST",
            "/v1/caches",
            Some(r#"{"name":"demo","size":"1MiB"}"#),
            409,
            "exists",
        ),
        ("POST", "/v1/caches", Some("{not json"), 400, "request body"),
        (
            "POST",
            "/v1/rules",
            Some(r#"{"export":"other","cache":"demo","op":"read"}"#),
            409,
            "overlaps",
        ),
        (
            "POST",
            "/v1/rules",
            Some(r#"{"export":"nope","cache":"demo"}"#),
            404,
            "nope",
        ),
        (
            "POST",
            "/v1/rules",
            Some(r#"{"export":"demo","cache":"demo","range":[5,4096]}"#),
            400,
            "range",
        ),
        ("DELETE", "/v1/rules/77", None, 404, "77"),
        ("PUT", "/v1/proportions", Some(r#"{"bob":-1}"#), 400, "bob"),
        ("GET", "/v1/nothing", None, 404, "endpoint"),
    ];
    for (m, p, b, want, reason) in bad {
        let (s, v) = t.api(m, p, *b);
        assert_eq!(s, *want, "{m} {p} {b:?}: {v}");
        let e = v["error"].as_str().unwrap_or_default();
        assert!(
            e.contains(reason),
            "{m} {p}: `{e}` should mention `{reason}`"
        );
    }
    let (s, _) = t.api("DELETE", &format!("/v1/rules/{rule}"), None);
    assert_eq!(s, 200);
    let (s, _) = t.api("DELETE", "/v1/caches/demo", None);
    assert_eq!(s, 200);
    // With the cache gone every acknowledged write is in the file.
    assert!(backing(&t, "demo.img")[..8 << 20]
        .iter()
        .all(|&b| b == 0x11));
    let (s, p) = t.api(
        "PUT",
        "/v1/proportions",
        Some(r#"{"bob":0.75,"demo":0.25}"#),
    );
    assert_eq!((s, p["bob"].as_f64()), (200, Some(0.75)));
    // Metrics and the page.
    let url = format!("http://{}/metrics", t.node().api_addr);
    let m = ureq::get(&url).call().unwrap().into_string().unwrap();
    assert!(
        m.contains("lachesis_cache_hits_total{cache=\"bob\",level=\"1\"} 256"),
        "{m}"
    );
    assert!(m.contains(
        "lachesis_tenant_latency_seconds_count{export=\"other\",tenant=\"bob\",op=\"read\"}"
    ));
    let page = ureq::get(&format!("http://{}/", t.node().api_addr))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(page.contains("<title>Lachesis node</title>"));
    t.stop();
}
