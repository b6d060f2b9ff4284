//! What a new user tripped on (issue 18), through the real API: JSON errors for a bad
//! query and a wrong method, a cache called "0", "no data" for an idle cache's curve,
//! proportions naming unknown tenants, the tenant label on latency histograms, process
//! metrics, and a clear error for an address in use.

use crate::common::TestNode;

const NODE: &str = r#"
[node]
cache_size = "32MiB"
[[export]]
name = "vol"
tenant = "alice"
file = "vol.img"
size = "8MiB"
[[cache]]
name = "x"
size = "4MiB"
[[cache]]
name = "0"
size = "8MiB"
[[rule]]
export = "vol"
cache = "x"
"#;

#[test]
fn errors_are_json_and_names_win() {
    let t = TestNode::start(NODE);
    // Cache "x" has id 0; the cache called "0" (id 1) is reached by its name.
    let (s, c) = t.api("GET", "/v1/caches/0", None);
    assert_eq!(s, 200, "{c}");
    assert_eq!(c["name"], "0");
    assert_eq!(c["id"], 1);
    assert_eq!(c["size_bytes"], 8u64 << 20);
    // An idle cache's curve: no data, no made-up points.
    let (s, c) = t.api("GET", "/v1/caches/0/curve", None);
    assert_eq!(s, 200, "{c}");
    assert_eq!(c["status"], "no data");
    assert_eq!(c["points"], serde_json::json!([]));
    // A bad query and a wrong method: JSON errors naming the problem.
    let (s, c) = t.api("GET", "/v1/caches/x/curve?points=abc", None);
    assert_eq!(s, 400, "{c}");
    assert!(c["error"].as_str().unwrap().contains("points"), "{c}");
    let (s, c) = t.api("PUT", "/v1/caches", Some("{}"));
    assert_eq!(s, 405, "{c}");
    assert!(c["error"].as_str().unwrap().contains("PUT"), "{c}");
    // Proportions for tenants the node does not serve are refused, naming them.
    let (s, c) = t.api(
        "PUT",
        "/v1/proportions",
        Some(r#"{"alice": 1, "ghost": 2}"#),
    );
    assert_eq!(s, 404, "{c}");
    let reason = c["error"].as_str().unwrap();
    assert!(
        reason.contains("ghost") && !reason.contains("tenant(s) alice"),
        "{reason}"
    );
    let (s, c) = t.api("PUT", "/v1/proportions", Some(r#"{"alice": 1}"#));
    assert_eq!(s, 200, "{c}");

    // One read, then the metrics: the tenant label on the histogram, process figures.
    let client =
        t.rt.block_on(nbd::NbdClient::connect(t.node().nbd_addr, "vol"))
            .unwrap();
    t.rt.block_on(client.read(0, 4096)).unwrap();
    let (_, c) = t.api("GET", "/v1/caches/x/curve?points=4", None);
    assert_eq!(c["status"], "ok", "{c}");
    let (_, m) = t.api("GET", "/metrics", None);
    let m = m.as_str().unwrap();
    assert!(
        m.lines()
            .any(|l| l.starts_with("lachesis_tenant_latency_seconds_count{")
                && l.contains("tenant=\"alice\"")
                && l.contains("op=\"read\"")
                && l.ends_with(" 1")),
        "{m}"
    );
    for name in [
        "process_resident_memory_bytes",
        "process_threads",
        "process_open_fds",
    ] {
        let v: f64 = m
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {m}"))
            .parse()
            .unwrap();
        assert!(v >= 1.0, "{name} {v}");
    }

    // A second node on the first one's NBD address: one clear error.
    let mut cfg = node::config::NodeConfig::parse(&NODE.replace(
        "[node]",
        &format!(
            "[node]\nnbd = \"{}\"\napi = \"127.0.0.1:0\"",
            t.node().nbd_addr
        ),
    ))
    .unwrap();
    cfg.node.data_dir = Some(t.dir.path().join("second"));
    let err = t.rt.block_on(node::start(&cfg)).err().unwrap().to_string();
    assert!(err.starts_with("NBD listener"), "{err}");
    assert!(
        err.contains("already in use") && err.contains("--nbd"),
        "{err}"
    );
    assert_eq!(err.matches("in use").count(), 1, "{err}");
    t.stop();
}
