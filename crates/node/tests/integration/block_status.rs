//! Issue 17, block status on the node: `base:allocation` through real clients reports
//! the image's holes, and blocks a write-back cache holds dirty (not yet on the image)
//! as data, never as a hole; `qemu-img convert` of the export keeps the copy sparse.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::common::{run, TestNode};

const CONFIG: &str = r#"
[node]
cache_size = "16MiB"

[[export]]
name = "vol"
file = "vol.img"
size = "64MiB"

[[cache]]
name = "c"
size = "8MiB"
write_policy = "write-back"

[[rule]]
export = "vol"
cache = "c"
"#;

fn allocated(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().blocks() * 512
}

/// `nbdinfo --map --json` as (offset, length, type) triples.
fn map(uri: &str) -> Vec<(u64, u64, u64)> {
    let out = run("nbdinfo", &["--map", "--json", uri]);
    let v: Vec<serde_json::Value> = serde_json::from_str(&out).expect(&out);
    v.iter()
        .map(|e| {
            let n = |k: &str| e[k].as_u64().unwrap();
            (n("offset"), n("length"), n("type"))
        })
        .collect()
}

/// The type `map` gives the byte at `offset`.
fn type_at(map: &[(u64, u64, u64)], offset: u64) -> u64 {
    map.iter()
        .find(|(o, l, _)| *o <= offset && offset < o + l)
        .unwrap_or_else(|| panic!("{offset} not mapped: {map:?}"))
        .2
}

#[test]
fn block_status_calls_dirty_blocks_data_and_image_holes_holes() {
    let node = TestNode::start(CONFIG);
    let img = node.dir.path().join("vol.img");
    let uri = node.uri("vol");

    // 1 MiB at 8 MiB, written through the write-back cache and not flushed: dirty in
    // memory, a hole in the image.
    node.rt.block_on(async {
        let c = nbd::NbdClient::connect(node.node().nbd_addr, "vol")
            .await
            .unwrap();
        c.write(8 << 20, bytes::Bytes::from(vec![0x42; 1 << 20]), false)
            .await
            .unwrap();
        c.disconnect().await.unwrap();
    });
    let before = allocated(&img);
    let m = map(&uri);
    let total: u64 = m.iter().map(|e| e.1).sum();
    assert_eq!(total, 64 << 20, "{m:?}");
    assert_eq!(type_at(&m, 0), 3, "hole,zero before the data: {m:?}");
    assert_eq!(
        type_at(&m, 8 << 20),
        0,
        "dirty data reported as data: {m:?}"
    );
    assert_eq!(type_at(&m, (9 << 20) - 1), 0, "{m:?}");
    assert_eq!(type_at(&m, 9 << 20), 3, "{m:?}");
    assert_eq!(type_at(&m, (64 << 20) - 1), 3, "{m:?}");
    println!("image allocated {before} bytes while nbdinfo --map said 1 MiB of data: {m:?}");

    // qemu-img map agrees; convert reads the data and keeps the copy sparse.
    let out = run("qemu-img", &["map", "--output=json", &uri]);
    let q: Vec<serde_json::Value> = serde_json::from_str(&out).expect(&out);
    let data: u64 = q
        .iter()
        .filter(|e| e["data"].as_bool() == Some(true))
        .map(|e| e["length"].as_u64().unwrap())
        .sum();
    assert_eq!(data, 1 << 20, "{out}");
    let copy = node.dir.path().join("copy.img");
    run(
        "qemu-img",
        &["convert", "-O", "raw", &uri, copy.to_str().unwrap()],
    );
    let got = std::fs::read(&copy).unwrap();
    assert_eq!(got.len(), 64 << 20);
    assert!(got[8 << 20..9 << 20].iter().all(|&b| b == 0x42));
    assert!(got[..8 << 20].iter().all(|&b| b == 0));
    let copied = allocated(&copy);
    assert!(
        copied < 4 << 20,
        "the copy of a 64 MiB export holding 1 MiB allocated {copied} bytes"
    );

    // After a flush the image holds the data; a trim makes it a hole again everywhere.
    run("qemu-io", &["-f", "raw", &uri, "-c", "flush"]);
    assert!(allocated(&img) >= 1 << 20);
    assert_eq!(type_at(&map(&uri), 8 << 20), 0);
    run("qemu-io", &["-f", "raw", &uri, "-c", "discard 8M 1M"]);
    let m = map(&uri);
    assert_eq!(m, vec![(0, 64 << 20, 3)], "{m:?}");
    assert!(allocated(&img) < 1 << 20);
    node.stop();
}
