//! Issue 37: `PATCH /v1/caches` changes several caches in one call, in order, each entry
//! applied or refused on its own: a shrink first makes the room a later grow takes, an
//! entry naming no cache or asking for more than the node holds is refused with the
//! status its single `PATCH` would answer, and the caches it names are left as they were.

use crate::common::TestNode;

const TOML: &str = r#"
[node]
cache_size = "8MiB"
[[export]]
name = "vol"
file = "vol.img"
size = "16MiB"
[[cache]]
name = "a"
size = "4MiB"
[[cache]]
name = "b"
size = "4MiB"
"#;

#[test]
fn a_batch_applies_in_order_and_refuses_entry_by_entry() {
    let t = TestNode::start(TOML);
    // The node is full (4 + 4 of 8 MiB): `b` can grow only after `a` shrinks.
    let (s, v) = t.api(
        "PATCH",
        "/v1/caches",
        Some(
            r#"{"caches": [
                {"cache": "a", "patch": {"size": "1MiB"}},
                {"cache": "b", "patch": {"size": "6MiB"}},
                {"cache": "nosuch", "patch": {"size": "1MiB"}},
                {"cache": "a", "patch": {"size": "64MiB"}},
                {"cache": "a", "patch": {"eviction": "arc"}}
            ]}"#,
        ),
    );
    assert_eq!(s, 200, "{v}");
    let out = v["caches"].as_array().expect("outcomes");
    assert_eq!(out.len(), 5, "{v}");
    assert_eq!(out[0]["status"], 200, "{v}");
    assert_eq!(out[0]["info"]["size_bytes"], 1 << 20, "{v}");
    assert_eq!(out[1]["status"], 200, "{v}");
    assert_eq!(out[1]["info"]["size_bytes"], 6 << 20, "{v}");
    assert_eq!(out[2]["status"], 404, "{v}");
    assert!(out[2]["error"].as_str().unwrap().contains("nosuch"), "{v}");
    assert_eq!(out[3]["status"], 409, "{v}");
    assert_eq!(out[4]["status"], 200, "{v}");
    // Read back: the refused grow changed nothing; the rest holds.
    let (_, a) = t.api("GET", "/v1/caches/a", None);
    let (_, b) = t.api("GET", "/v1/caches/b", None);
    assert_eq!(a["size_bytes"], 1 << 20, "{a}");
    assert_eq!(a["stats"]["eviction"], "arc", "{a}");
    assert_eq!(b["size_bytes"], 6 << 20, "{b}");
}

#[test]
fn a_bad_or_oversized_batch_is_refused_whole_and_changes_nothing() {
    let t = TestNode::start(TOML);
    // An unknown field anywhere refuses the whole body, naming the field.
    let (s, v) = t.api(
        "PATCH",
        "/v1/caches",
        Some(r#"{"caches": [{"cache": "a", "patch": {"size": "1MiB"}}, {"cache": "b", "patch": {"colour": "red"}}]}"#),
    );
    assert_eq!(s, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("colour"), "{v}");
    let (_, a) = t.api("GET", "/v1/caches/a", None);
    assert_eq!(a["size_bytes"], 4 << 20, "{a}");
    // More entries than a batch may carry.
    let entries: Vec<String> = (0..=node::api::MAX_BATCH)
        .map(|_| r#"{"cache": "a", "patch": {"size": "1MiB"}}"#.to_string())
        .collect();
    let body = format!(r#"{{"caches": [{}]}}"#, entries.join(","));
    let (s, v) = t.api("PATCH", "/v1/caches", Some(&body));
    assert_eq!(s, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("at most"), "{v}");
    let (_, a) = t.api("GET", "/v1/caches/a", None);
    assert_eq!(a["size_bytes"], 4 << 20, "{a}");
}
