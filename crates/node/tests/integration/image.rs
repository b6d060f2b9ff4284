//! Issue 17, "the image is the data", through real NBD clients: a trim punches holes in
//! the image (`qemu-io discard`; before, one 1 GiB trim fully allocated a sparse image);
//! an image deleted under a running node makes writes and flushes fail; on restart a
//! missing image that an earlier start used is an error naming it, not a new empty file,
//! unless the export says `recreate_missing = true`.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use node::config::NodeConfig;

fn config(dir: &Path, recreate: bool) -> NodeConfig {
    let text = format!(
        r#"
[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "8MiB"

[[export]]
name = "vol"
file = "vol.img"
size = "64MiB"
recreate_missing = {recreate}

[[cache]]
name = "c"
size = "4MiB"
write_policy = "write-through"

[[rule]]
export = "vol"
cache = "c"
"#
    );
    let mut cfg = NodeConfig::parse(&text).unwrap();
    cfg.node.data_dir = Some(dir.to_path_buf());
    cfg
}

fn allocated(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().blocks() * 512
}

fn qemu_io(uri: &str, cmds: &[&str]) -> (bool, String) {
    let mut args = vec!["-f", "raw", uri];
    for c in cmds {
        args.push("-c");
        args.push(c);
    }
    let out = std::process::Command::new("qemu-io")
        .args(&args)
        .output()
        .expect("qemu-io must be installed (Debian qemu-utils; .ci/run installs it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && !text.contains("failed"), text)
}

#[test]
fn trim_punches_holes_and_a_lost_image_fails_loudly() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("vol.img");
    let node = rt
        .block_on(node::start(&config(dir.path(), false)))
        .unwrap();
    let uri = format!("nbd://{}/vol", node.nbd_addr);
    assert!(allocated(&img) < 1 << 20, "created sparse");

    let (ok, out) = qemu_io(&uri, &["write -P 0x5a 0 16M", "flush"]);
    assert!(ok, "{out}");
    let written = allocated(&img);
    assert!(
        written >= 16 << 20,
        "{written} bytes allocated after 16 MiB"
    );
    let (ok, out) = qemu_io(&uri, &["discard 0 64M", "flush", "read -P 0 0 16M"]);
    assert!(ok, "{out}");
    let trimmed = allocated(&img);
    println!(
        "image allocation: {written} bytes after writing 16 MiB, {trimmed} after trimming all"
    );
    assert!(
        trimmed < 1 << 20,
        "{trimmed} bytes still allocated after the trim"
    );
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 64 << 20);

    // The image is deleted under the running node: writes and flushes fail.
    std::fs::remove_file(&img).unwrap();
    std::thread::sleep(cache::backend::IDENTITY_CHECK);
    let (ok, out) = qemu_io(&uri, &["write -P 0x11 0 64k", "flush"]);
    assert!(!ok, "a write to a deleted image succeeded: {out}");
    let _ = rt.block_on(node.shutdown());

    // Restarting does not recreate it silently...
    let err = match rt.block_on(node::start(&config(dir.path(), false))) {
        Ok(_) => panic!("started over a missing image"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("vol.img is missing"), "{err}");
    assert!(!img.exists());
    // ...unless told to.
    let node = rt.block_on(node::start(&config(dir.path(), true))).unwrap();
    assert!(img.exists());
    rt.block_on(node.shutdown()).unwrap();
}
