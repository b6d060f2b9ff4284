//! Issue 35, "hostile conditions", end to end: a node whose backend is nbdkit's file plugin
//! behind its `error` filter (writes fail while a trigger file exists) or its `delay`
//! filter (every write takes seconds), driven by qemu-io.
//!
//! * `a_stale_recovery_file_never_reverts_flushed_data`: the exact reproduction of the
//!   issue. Before, the recovery file a start replayed while the backend still failed
//!   stayed on disk after a later FLUSH and a clean stop, and the next start replayed
//!   its old bytes over the flushed ones.
//! * `a_stop_over_a_slow_backend_ends_by_its_deadline_and_keeps_the_rest`: `[node]
//!   stop_timeout`, parallel write-back at a stop, a hung backend.
//! * `dirty_blocks_of_a_deleted_image_are_kept_not_written_into_the_void`,
//!   `a_shrunk_image_is_not_regrown_and_a_truncated_one_is_refused`: images deleted or
//!   shrunk under a running node, truncated while it was stopped.
//! * `at_risk`: dirty blocks that neither the backend nor the data directory can take.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::nbdkit::{sparse_image, Nbdkit};
use crate::common::small_disk::SmallDisk;

mod at_risk;

use node::config::NodeConfig;

const BS: u64 = 4096;
/// The block the reproduction writes.
const X: u64 = 16 * BS;

/// A node in front of `upstream` with one write-back cache (memory only) over export
/// `vol`; `extra` goes into `[node]`.
fn config(dir: &Path, upstream: &str, extra: &str) -> NodeConfig {
    let text = format!(
        r#"
[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "1MiB"
{extra}

[[export]]
name = "vol"
upstream = ["{upstream}"]

[[cache]]
name = "c"
size = "512KiB"
write_policy = "write-back"

[[rule]]
export = "vol"
cache = "c"
"#
    );
    let mut cfg = NodeConfig::parse(&text).unwrap();
    cfg.node.data_dir = Some(dir.to_path_buf());
    cfg
}

fn qemu_io(uri: &str, cmds: &[&str]) -> String {
    // Write-back: qemu-io's default (write-through) flushes after every write.
    let mut args = vec!["-f", "raw", "-t", "writeback", uri];
    for c in cmds {
        args.push("-c");
        args.push(c);
    }
    let out = Command::new("qemu-io")
        .args(&args)
        .output()
        .expect("qemu-io must be installed (Debian qemu-utils; .ci/run installs it)");
    // A failed command (a FLUSH) prints nothing; its exit status tells.
    format!(
        "{}{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        if out.status.success() {
            ""
        } else {
            "\nqemu-io failed"
        }
    )
}

fn image_block(img: &Path, offset: u64) -> Vec<u8> {
    let all = std::fs::read(img).unwrap();
    all[offset as usize..(offset + BS) as usize].to_vec()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_stale_recovery_file_never_reverts_flushed_data() {
    let rt = runtime();
    let tmp = tempfile::tempdir().unwrap();
    let img = sparse_image(tmp.path(), 8 << 20);
    let trigger = tmp.path().join("fail-writes");
    std::fs::write(&trigger, b"").unwrap();
    let kit = Nbdkit::start(
        &img,
        &["error"],
        &[
            "error-pwrite=EIO".into(),
            "error-pwrite-rate=1".into(),
            format!("error-pwrite-file={}", trigger.display()),
        ],
    );
    let dir = tmp.path().join("node");
    let recovery = dir.join(node::RECOVERY_FILE);
    let cfg = config(&dir, &kit.upstream(), "");

    // v3 is acknowledged (write-back) but cannot reach the backend: the stop fails and
    // keeps it in the recovery file.
    let n = rt.block_on(node::start(&cfg)).unwrap();
    let uri = format!("nbd://{}/vol", n.nbd_addr);
    let out = qemu_io(&uri, &[&format!("write -P 0x33 {X} 4k")]);
    assert!(out.contains("wrote 4096/4096"), "{out}");
    let err = rt.block_on(n.shutdown()).unwrap_err().to_string();
    assert!(
        err.contains("1 dirty block(s)") && err.contains("recovery.bin"),
        "{err}"
    );
    assert_eq!(cache::recovery::read(&recovery).unwrap().len(), 1);

    // The backend still fails: the start replays the file into the cache and keeps it.
    let n = rt.block_on(node::start(&cfg)).unwrap();
    assert!(
        recovery.exists(),
        "the file goes only once its blocks are durable"
    );
    let uri = format!("nbd://{}/vol", n.nbd_addr);
    let out = qemu_io(&uri, &[&format!("read -P 0x33 {X} 4k")]);
    assert!(
        out.contains("read 4096/4096") && !out.contains("failed"),
        "{out}"
    );

    // Healed; v4 is written and flushed: the flush consumed the file before it answered.
    std::fs::remove_file(&trigger).unwrap();
    let out = qemu_io(&uri, &[&format!("write -P 0x44 {X} 4k"), "flush"]);
    assert!(
        out.contains("wrote 4096/4096") && !out.contains("failed"),
        "{out}"
    );
    assert!(
        !recovery.exists(),
        "a flushed write must not be older than a recovery file"
    );
    rt.block_on(n.shutdown()).unwrap();
    assert!(!recovery.exists());

    // The next start reads v4, on the node and on the image.
    let n = rt.block_on(node::start(&cfg)).unwrap();
    let uri = format!("nbd://{}/vol", n.nbd_addr);
    let out = qemu_io(&uri, &[&format!("read -P 0x44 {X} 4k")]);
    assert!(
        out.contains("read 4096/4096") && !out.contains("failed"),
        "{out}"
    );
    rt.block_on(n.shutdown()).unwrap();
    assert_eq!(
        image_block(&img, X),
        vec![0x44; BS as usize],
        "on the image"
    );
}

#[test]
fn a_graceful_stop_with_dirty_blocks_rewrites_the_recovery_file_with_the_newest_bytes() {
    let rt = runtime();
    let tmp = tempfile::tempdir().unwrap();
    let img = sparse_image(tmp.path(), 8 << 20);
    let trigger = tmp.path().join("fail-writes");
    std::fs::write(&trigger, b"").unwrap();
    let kit = Nbdkit::start(
        &img,
        &["error"],
        &[
            "error-pwrite=EIO".into(),
            "error-pwrite-rate=1".into(),
            format!("error-pwrite-file={}", trigger.display()),
        ],
    );
    let dir = tmp.path().join("node");
    let recovery = dir.join(node::RECOVERY_FILE);
    let cfg = config(&dir, &kit.upstream(), "");
    let n = rt.block_on(node::start(&cfg)).unwrap();
    let uri = format!("nbd://{}/vol", n.nbd_addr);
    qemu_io(&uri, &[&format!("write -P 0x33 {X} 4k")]);
    assert!(rt.block_on(n.shutdown()).is_err());
    // Still failing: v4 overwrites the replayed v3 and the stop keeps v4, not v3.
    let n = rt.block_on(node::start(&cfg)).unwrap();
    let uri = format!("nbd://{}/vol", n.nbd_addr);
    let out = qemu_io(&uri, &[&format!("write -P 0x44 {X} 4k")]);
    assert!(out.contains("wrote 4096/4096"), "{out}");
    assert!(rt.block_on(n.shutdown()).is_err());
    let kept = cache::recovery::read(&recovery).unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].data, vec![0x44; BS as usize]);
    // Healed: the start writes v4 back and removes the file.
    std::fs::remove_file(&trigger).unwrap();
    let n = rt.block_on(node::start(&cfg)).unwrap();
    assert!(!recovery.exists());
    rt.block_on(n.shutdown()).unwrap();
    assert_eq!(image_block(&img, X), vec![0x44; BS as usize]);
}

/// The content of block `b` in the stop tests.
fn pattern(b: u64) -> Vec<u8> {
    vec![0x40u8.wrapping_add(b as u8); BS as usize]
}

/// Item 2: a backend that takes 5 s per write (nbdkit's delay filter). Before, 16 dirty
/// blocks took 80 s to write back one after another at a stop (and a hung backend never
/// let the stop end). Now they are written back at once; and with a stop limited to 2 s
/// the stop ends by its deadline, even with a client's FLUSH stuck in flight, keeps the
/// 16 blocks in the recovery file and fails naming the count; a start over the healed
/// backend writes them back.
#[test]
fn a_stop_over_a_slow_backend_ends_by_its_deadline_and_keeps_the_rest() {
    let rt = runtime();
    let tmp = tempfile::tempdir().unwrap();
    let img = sparse_image(tmp.path(), 8 << 20);
    let slow = Nbdkit::start(&img, &["delay"], &["delay-write=5".into()]);
    let dir = tmp.path().join("node");
    let recovery = dir.join(node::RECOVERY_FILE);
    let write16 = |addr: std::net::SocketAddr, base: u64| {
        let client = rt.block_on(nbd::NbdClient::connect(addr, "vol")).unwrap();
        for b in 0..16 {
            rt.block_on(client.write((base + b) * BS, pattern(base + b), false))
                .unwrap();
        }
        client
    };

    // Time enough: the 16 blocks are written back at once (one write's time, not 80 s).
    let n = rt
        .block_on(node::start(&config(
            &dir,
            &slow.upstream(),
            "stop_timeout = \"30s\"",
        )))
        .unwrap();
    drop(write16(n.nbd_addr, 100));
    let t0 = Instant::now();
    rt.block_on(n.shutdown()).unwrap();
    let took = t0.elapsed();
    println!("16 dirty blocks written back at a stop over a 5 s-per-write backend: {took:?}");
    assert!(took < Duration::from_secs(20), "the stop took {took:?}");
    assert!(!recovery.exists());

    // Not enough: the stop ends by its deadline.
    let n = rt
        .block_on(node::start(&config(
            &dir,
            &slow.upstream(),
            "stop_timeout = \"2s\"",
        )))
        .unwrap();
    let client = write16(n.nbd_addr, 0);
    // A FLUSH that would take 80 s is in flight when the stop is asked for.
    let flushing = rt.spawn(async move { client.flush().await });
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let err = rt.block_on(n.shutdown()).unwrap_err().to_string();
    let took = t0.elapsed();
    println!("stop over a 5 s-per-write backend with stop_timeout 2 s: {took:?}: {err}");
    assert!(took < Duration::from_secs(5), "the stop took {took:?}");
    assert!(
        err.contains("16 dirty block(s)") && err.contains("stop_timeout"),
        "{err}"
    );
    let kept = cache::recovery::read(&recovery).unwrap();
    assert_eq!(kept.len(), 16);
    for k in &kept {
        assert_eq!(k.data, pattern(k.offset / BS), "block at {}", k.offset);
    }
    drop(slow);
    let _ = rt.block_on(flushing);

    // The backend is healed: the start writes the blocks back and removes the file.
    let kit = Nbdkit::start(&img, &[], &[]);
    let n = rt
        .block_on(node::start(&config(&dir, &kit.upstream(), "")))
        .unwrap();
    assert!(!recovery.exists());
    let uri = format!("nbd://{}/vol", n.nbd_addr);
    let reads: Vec<String> = (0..16)
        .map(|b| format!("read -P {} {} 4k", pattern(b)[0], b * BS))
        .collect();
    let reads: Vec<&str> = reads.iter().map(String::as_str).collect();
    let out = qemu_io(&uri, &reads);
    assert!(
        out.matches("read 4096/4096").count() == 16 && !out.contains("failed"),
        "{out}"
    );
    rt.block_on(n.shutdown()).unwrap();
    for b in (0..16).chain(100..116) {
        assert_eq!(
            image_block(&img, b * BS),
            pattern(b),
            "block {b} on the image"
        );
    }
}

/// A node over the image `vol.img` (created with 8 MiB) in `dir` with one write-back cache.
fn file_config(dir: &Path, recreate: bool) -> NodeConfig {
    let text = format!(
        r#"
[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "1MiB"

[[export]]
name = "vol"
file = "vol.img"
size = "8MiB"
recreate_missing = {recreate}

[[cache]]
name = "c"
size = "512KiB"
write_policy = "write-back"

[[rule]]
export = "vol"
cache = "c"
"#
    );
    let mut cfg = NodeConfig::parse(&text).unwrap();
    cfg.node.data_dir = Some(dir.to_path_buf());
    cfg
}

/// Item 3: the image is deleted under a running node right after a flush. Before, the
/// next FLUSH wrote the dirty blocks into the unlinked file (inside the identity check's
/// window), answered EIO, and the stop exited 0 with no recovery file: the data existed
/// nowhere. Now the writes fail, the blocks stay dirty, the stop keeps them and fails, and
/// a start on a recreated image gets them back.
#[test]
fn dirty_blocks_of_a_deleted_image_are_kept_not_written_into_the_void() {
    let rt = runtime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let img = dir.join("vol.img");
    let recovery = dir.join(node::RECOVERY_FILE);
    let n = rt.block_on(node::start(&file_config(dir, false))).unwrap();
    let client = rt
        .block_on(nbd::NbdClient::connect(n.nbd_addr, "vol"))
        .unwrap();
    rt.block_on(client.write(0, pattern(0), false)).unwrap();
    rt.block_on(client.flush()).unwrap();
    for b in 1..17 {
        rt.block_on(client.write(b * BS, pattern(b), false))
            .unwrap();
    }
    std::fs::remove_file(&img).unwrap();
    assert!(rt.block_on(client.flush()).is_err(), "FLUSH must fail");
    drop(client);
    let err = rt.block_on(n.shutdown()).unwrap_err().to_string();
    assert!(err.contains("16 dirty block(s)"), "{err}");
    let kept = cache::recovery::read(&recovery).unwrap();
    assert_eq!(kept.len(), 16);

    // The image is missing: no start without `recreate_missing`; with it, the recovery
    // file is replayed into the new image.
    let e = rt
        .block_on(node::start(&file_config(dir, false)))
        .err()
        .expect("started over a missing image")
        .to_string();
    assert!(e.contains("vol.img is missing"), "{e}");
    assert!(recovery.exists());
    let n = rt.block_on(node::start(&file_config(dir, true))).unwrap();
    assert!(!recovery.exists());
    let uri = format!("nbd://{}/vol", n.nbd_addr);
    let reads: Vec<String> = (1..17)
        .map(|b| format!("read -P {} {} 4k", pattern(b)[0], b * BS))
        .collect();
    let reads: Vec<&str> = reads.iter().map(String::as_str).collect();
    let out = qemu_io(&uri, &reads);
    assert!(
        out.matches("read 4096/4096").count() == 16 && !out.contains("failed"),
        "{out}"
    );
    rt.block_on(n.shutdown()).unwrap();
    assert_eq!(image_block(&img, 5 * BS), pattern(5));
}

/// Item 3: an image shrunk while the node runs is not grown back with zeros by a write
/// past its new end (the write stays dirty and is kept at the stop); an image truncated
/// while the node is stopped makes the start fail, naming the image and both sizes.
#[test]
fn a_shrunk_image_is_not_regrown_and_a_truncated_one_is_refused() {
    let rt = runtime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let img = dir.join("vol.img");
    let recovery = dir.join(node::RECOVERY_FILE);
    let shrink = |len: u64| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&img)
            .unwrap()
            .set_len(len)
            .unwrap()
    };

    // Shrunk under the running node: the write past the end fails to reach it.
    let n = rt.block_on(node::start(&file_config(dir, false))).unwrap();
    let uri = format!("nbd://{}/vol", n.nbd_addr);
    shrink(1 << 20);
    let out = qemu_io(&uri, &["write -P 0x77 4M 4k", "flush"]);
    assert!(out.contains("wrote 4096/4096"), "{out}");
    assert!(out.contains("qemu-io failed"), "the FLUSH must fail: {out}");
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 1 << 20, "regrown");
    let err = rt.block_on(n.shutdown()).unwrap_err().to_string();
    assert!(
        err.contains("1 dirty block(s)") && err.contains("shrunk"),
        "{err}"
    );
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 1 << 20, "regrown");
    assert_eq!(cache::recovery::read(&recovery).unwrap().len(), 1);

    // Truncated while stopped: the start refuses, naming the image and both sizes.
    let e = rt
        .block_on(node::start(&file_config(dir, false)))
        .err()
        .expect("started over a truncated image")
        .to_string();
    println!("start over a truncated image: {e}");
    assert!(
        e.contains("vol.img is 1048576 bytes") && e.contains("8388608 bytes"),
        "{e}"
    );
    // Grown back, it starts and the kept block lands.
    shrink(8 << 20);
    let n = rt.block_on(node::start(&file_config(dir, false))).unwrap();
    assert!(!recovery.exists());
    rt.block_on(n.shutdown()).unwrap();
    assert_eq!(image_block(&img, 4 << 20), vec![0x77; BS as usize]);
}

/// `GET /healthz` of a node: (status, body).
fn health(api: std::net::SocketAddr) -> (u16, String) {
    match ureq::get(&format!("http://{api}/healthz")).call() {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(s, r)) => (s, r.into_string().unwrap()),
        Err(e) => panic!("/healthz: {e}"),
    }
}

/// `GET /metrics` of a node, the lines starting with `prefix`.
fn metric(api: std::net::SocketAddr, prefix: &str) -> Vec<String> {
    let text = ureq::get(&format!("http://{api}/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// Waits up to `limit` for `f`; returns how long it took, or panics naming `what`.
fn within(limit: Duration, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    t0.elapsed()
}

/// Item 4: the level-1 node's upstream (nbdkit) is killed and started again on the same
/// port. Before, every read miss and FLUSH answered EIO until level 1 itself restarted,
/// with nothing in its log. Now the node notices the loss without a request (`/healthz`
/// 503 `degraded`, `lachesis_upstream_up 0`), a miss while the upstream has been away
/// longer than `upstream_wait` fails at once (EIO, not a hang), the link heals by itself
/// once the upstream is back (reads, writes and FLUSH served, `/healthz` ok again,
/// `lachesis_upstream_reconnects_total 1`), and a miss issued while the upstream is
/// briefly away waits for it and is served.
#[test]
fn a_restarted_upstream_is_reconnected_and_reported_while_away() {
    let rt = runtime();
    let tmp = tempfile::tempdir().unwrap();
    let img = sparse_image(tmp.path(), 8 << 20);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&img).unwrap();
        f.write_all_at(&[0x5a; BS as usize], 40 * BS).unwrap();
        f.write_all_at(&[0x5b; BS as usize], 41 * BS).unwrap();
    }
    let kit = Nbdkit::start(&img, &[], &[]);
    let port = kit.port;
    let dir = tmp.path().join("node");
    let cfg = config(&dir, &kit.upstream(), "upstream_wait = \"3s\"");
    let n = rt.block_on(node::start(&cfg)).unwrap();
    let uri = format!("nbd://{}/vol", n.nbd_addr);
    let out = qemu_io(&uri, &[&format!("write -P 0x11 {X} 4k"), "flush"]);
    assert!(
        out.contains("wrote 4096/4096") && !out.contains("failed"),
        "{out}"
    );
    assert_eq!(health(n.api_addr).0, 200);

    // Away: noticed without a request.
    drop(kit);
    let noticed = within(Duration::from_secs(3), "/healthz degraded", || {
        let (s, body) = health(n.api_addr);
        s == 503 && body.contains("degraded") && body.contains(&port.to_string())
    });
    println!("upstream loss noticed in {noticed:?}");
    let up = metric(n.api_addr, "lachesis_upstream_up{");
    assert!(up.len() == 1 && up[0].ends_with(" 0"), "{up:?}");
    // Away longer than upstream_wait: a miss fails at once.
    std::thread::sleep(Duration::from_millis(3200));
    let t0 = Instant::now();
    let out = qemu_io(&uri, &[&format!("read -P 0x5a {} 4k", 40 * BS)]);
    let took = t0.elapsed();
    println!("a miss with the upstream away for 3 s: {took:?}: {out}");
    assert!(out.contains("Input/output error"), "{out}");
    assert!(took < Duration::from_secs(2), "the miss took {took:?}");

    // Back on the same port: the link heals by itself.
    let kit = Nbdkit::start_at(&img, &[], &[], Some(port));
    let healed = within(Duration::from_secs(10), "/healthz ok again", || {
        health(n.api_addr).0 == 200
    });
    println!("link healed {healed:?} after the upstream came back");
    let out = qemu_io(
        &uri,
        &[
            &format!("read -P 0x5a {} 4k", 40 * BS),
            &format!("read -P 0x11 {X} 4k"),
            &format!("write -P 0x22 {X} 4k"),
            "flush",
        ],
    );
    assert!(
        out.matches("read 4096/4096").count() == 2
            && out.contains("wrote 4096/4096")
            && !out.contains("failed"),
        "{out}"
    );
    let rec = metric(n.api_addr, "lachesis_upstream_reconnects_total{");
    assert!(rec.len() == 1 && rec[0].ends_with(" 1"), "{rec:?}");

    // Briefly away: a miss in between waits for the link and is served.
    drop(kit);
    within(Duration::from_secs(3), "/healthz degraded", || {
        health(n.api_addr).0 == 503
    });
    let reader = {
        let uri = uri.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let out = qemu_io(&uri, &[&format!("read -P 0x5b {} 4k", 41 * BS)]);
            (out, t0.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let kit = Nbdkit::start_at(&img, &[], &[], Some(port));
    let (out, took) = reader.join().unwrap();
    println!("a miss while the upstream restarted: {took:?}");
    assert!(
        out.contains("read 4096/4096") && !out.contains("failed"),
        "{out}"
    );
    rt.block_on(n.shutdown()).unwrap();
    drop(kit);
    assert_eq!(
        image_block(&img, X),
        vec![0x22; BS as usize],
        "on the image"
    );
}

/// Item 2: the data directory shares the image's disk and others fill that disk while
/// the node holds acknowledged dirty blocks. Before, FLUSH answered ENOSPC and the stop
/// logged "… could not be written back … nor kept in recovery.bin: No space" and exited:
/// the blocks were lost. Now the start reserved the recovery file's space
/// (`recovery.reserve`), a write the cache could only take by writing back another dirty
/// block is refused with ENOSPC (not acknowledged), the stop gives the reserve back and
/// keeps every dirty block in `recovery.bin`, and after space is freed a start writes them
/// all back: the 512 acknowledged blocks read back right, on the node and on the image.
#[test]
fn a_full_disk_never_drops_acknowledged_dirty_blocks_at_a_stop() {
    let Some(disk) = SmallDisk::mount("8m") else {
        return;
    };
    let rt = runtime();
    let dir = disk.path().join("node");
    let text = r#"
[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "2MiB"

[[export]]
name = "vol"
file = "vol.img"
size = "16MiB"

[[cache]]
name = "c"
size = "2MiB"
write_policy = "write-back"

[[rule]]
export = "vol"
cache = "c"
"#;
    let mut cfg = NodeConfig::parse(text).unwrap();
    cfg.node.data_dir = Some(dir.clone());
    let img = dir.join("vol.img");
    let recovery = dir.join(node::RECOVERY_FILE);
    let reserve = dir.join(node::reserve::RESERVE_FILE);

    let n = rt.block_on(node::start(&cfg)).unwrap();
    let reserved = std::fs::metadata(&reserve).unwrap().len();
    assert!(reserved > 2 << 20, "reserve of {reserved} bytes");
    // 512 blocks acknowledged: the cache's whole capacity.
    let client = rt
        .block_on(nbd::NbdClient::connect(n.nbd_addr, "vol"))
        .unwrap();
    for b in 0..512 {
        rt.block_on(client.write(b * BS, pattern(b), false))
            .unwrap();
    }
    let filler = disk.fill();
    // The disk is full: FLUSH fails with ENOSPC, and a write that needs a dirty block
    // written back first is refused, not acknowledged.
    let flush = rt.block_on(client.flush()).unwrap_err().to_string();
    assert!(flush.contains("ENOSPC"), "FLUSH: {flush}");
    let mut refused = 0;
    let mut acknowledged: Vec<u64> = (0..512).collect();
    for b in 600..1400 {
        match rt.block_on(client.write(b * BS, pattern(b), false)) {
            Ok(()) => acknowledged.push(b),
            Err(e) => {
                assert!(e.to_string().contains("ENOSPC"), "write {b}: {e}");
                refused += 1;
            }
        }
    }
    println!("writes on a full disk: {refused} of 800 refused with ENOSPC, the rest acknowledged");
    assert!(refused > 0, "every write was acknowledged on a full disk");
    let uri = format!("nbd://{}/vol", n.nbd_addr);
    let out = qemu_io(&uri, &[&format!("read -P {} {} 4k", pattern(7)[0], 7 * BS)]);
    assert!(out.contains("read 4096/4096"), "reads go on: {out}");
    drop(client);

    // The stop keeps every dirty block in the reserved space.
    let err = rt.block_on(n.shutdown()).unwrap_err().to_string();
    println!("stop on a full disk: {err}");
    assert!(
        err.contains("dirty block(s)") && err.contains("kept in") && !err.contains("nor kept"),
        "{err}"
    );
    let kept = cache::recovery::read(&recovery).unwrap();
    println!("kept {} dirty block(s) in recovery.bin", kept.len());
    assert!(!kept.is_empty());
    for k in &kept {
        assert_eq!(k.data, pattern(k.offset / BS), "block at {}", k.offset);
    }

    // Space freed: the start writes them back; every acknowledged block reads back.
    std::fs::remove_file(&filler).unwrap();
    let n = rt.block_on(node::start(&cfg)).unwrap();
    assert!(!recovery.exists());
    assert!(reserve.exists(), "the reserve is taken again");
    let client = rt
        .block_on(nbd::NbdClient::connect(n.nbd_addr, "vol"))
        .unwrap();
    let mut wrong = 0;
    for &b in &acknowledged {
        let got = rt.block_on(client.read(b * BS, BS as u32)).unwrap();
        if got[..] != pattern(b)[..] {
            wrong += 1;
        }
    }
    assert_eq!(wrong, 0, "acknowledged blocks read wrong");
    drop(client);
    rt.block_on(n.shutdown()).unwrap();
    let image = std::fs::read(&img).unwrap();
    for b in 0..512u64 {
        let at = (b * BS) as usize;
        assert_eq!(
            &image[at..at + BS as usize],
            &pattern(b)[..],
            "block {b} on the image"
        );
    }
}
