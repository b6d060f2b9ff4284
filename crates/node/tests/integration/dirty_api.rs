//! Issue 17: dirty limits change through the API (`PATCH /v1/caches/C` with `dirty_ratio`
//! and `dirty_bytes`), show in `GET`, and bad values answer 400 with `{"error": ...}`
//! naming the field and change nothing (not even the valid fields of the same patch).

use crate::common::TestNode;

const TOML: &str = r#"
[node]
cache_size = "8MiB"
[[export]]
name = "vol"
file = "vol.img"
size = "16MiB"
[[cache]]
name = "c"
size = "4MiB"
"#;

#[test]
fn dirty_limits_through_patch() {
    let t = TestNode::start(TOML);
    let (s, v) = t.api("GET", "/v1/caches/c", None);
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["dirty_ratio"], 1.0);
    assert_eq!(v["dirty_bytes"], 0);
    let (s, v) = t.api(
        "PATCH",
        "/v1/caches/c",
        Some(r#"{"dirty_ratio":0.25,"dirty_bytes":"1MiB"}"#),
    );
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["dirty_ratio"], 0.25);
    assert_eq!(v["dirty_bytes"], 1 << 20);
    // Only the ratio: the byte limit stays.
    let (s, v) = t.api("PATCH", "/v1/caches/c", Some(r#"{"dirty_ratio":0.5}"#));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["dirty_ratio"], 0.5);
    assert_eq!(v["dirty_bytes"], 1 << 20);
    for (body, field) in [
        (r#"{"dirty_ratio":1.5}"#, "dirty_ratio"),
        (r#"{"dirty_ratio":0}"#, "dirty_ratio"),
        (r#"{"dirty_bytes":100}"#, "dirty_bytes"),
        (r#"{"dirty_bytes":"lots"}"#, "dirty_bytes"),
        (r#"{"dirty_ratio":"half"}"#, "dirty_ratio"),
        (r#"{"dirty_ratio":-0.5}"#, "dirty_ratio"),
        (r#"{"size":"2MiB","dirty_bytes":100}"#, "dirty_bytes"),
        (
            r#"{"dirty_ratio":0.75,"dirty_bytes":"lots"}"#,
            "dirty_bytes",
        ),
        (
            r#"{"dirty_ratio":1.01,"dirty_bytes":"2MiB"}"#,
            "dirty_ratio",
        ),
    ] {
        let (s, v) = t.api("PATCH", "/v1/caches/c", Some(body));
        assert_eq!(s, 400, "{body}: {v}");
        let e = v["error"].as_str().unwrap();
        assert!(e.contains(field), "{body}: {e}");
    }
    // Refused patches changed nothing: limits, size.
    let (_, v) = t.api("GET", "/v1/caches/c", None);
    assert_eq!(v["dirty_ratio"], 0.5, "{v}");
    assert_eq!(v["dirty_bytes"], 1 << 20, "{v}");
    assert_eq!(v["size_bytes"], 4 << 20, "{v}");
    // 0 removes the byte limit.
    let (s, v) = t.api("PATCH", "/v1/caches/c", Some(r#"{"dirty_bytes":0}"#));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["dirty_bytes"], 0);
    t.stop();
}
