//! Crash harness (issue 17): real node processes are SIGKILLed at random points and
//! restarted, and every acknowledged write must read back.
//!
//! The node processes are this test binary run again with `LACHESIS_CRASH_NODE=CONFIG`
//! (the `crash::node_process` test then starts a node from the file, writes its addresses to
//! `DATA_DIR/ready` and serves until it is killed), so no other binary is needed.
//!
//! * `durable_log_survives_sigkill`: one write-back node, writes without FLUSH, SIGKILL,
//!   restart, qemu-io reads: present with the durable log; without it the same
//!   writes lived in memory only and are gone (what docs/node.md says: not guaranteed).
//! * `a_level_one_node_restarts_while_the_backend_below_level_two_fails`: a killed
//!   level-1 node whose write log cannot be flushed (the backend under level 2 refuses
//!   writes) starts, serves its acknowledged writes and flushes them once the backend
//!   heals.
//! * `crash_harness_loses_no_acknowledged_write`: a level-1 write-back node over a
//!   level-2 write-back node, both with durable logs. Writers write versioned patterns at
//!   random blocks while the driver drives the API (FLUSH, resize, policy switch, cache
//!   removal and re-creation, rule removal and re-creation, tight dirty limits that make
//!   the cleaner work) and SIGKILLs the level-1 node or both at a random moment; after the
//!   restart every block must hold its last acknowledged version (or the one in flight
//!   at the kill). The level-2 node's backend is nbdkit behind its error filter: from 40 %
//!   of the cycles to 60 % every write it is sent fails (EIO), then it heals, so
//!   cycles kill and restart both nodes over a failing backend, and the blocks written
//!   then must be on the image once it heals. Resizes go as single `PATCH
//!   /v1/caches/c` calls and as the controller sends them (`PATCH /v1/caches`, size and
//!   eviction in one batch). 100 cycles here; `LACHESIS_CRASH_CYCLES=N` runs more. It prints
//!   cycles, writes checked and writes lost (must be 0).

use crate::common::nbdkit::{sparse_image, Nbdkit};
use nbd::NbdClient;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BS: usize = 4096;

/// Not a test when run by the harness: the body of a node process.
#[test]
fn node_process() {
    let Ok(cfg) = std::env::var("LACHESIS_CRASH_NODE") else {
        return;
    };
    let cfg = node::config::NodeConfig::load(Path::new(&cfg), None).unwrap();
    let dir = cfg.node.data_dir.clone().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let n = rt.block_on(node::start(&cfg)).unwrap_or_else(|e| {
        // A refused start (the harness expects some over a failing backend): one line.
        eprintln!("node process: the node refused to start: {e}");
        std::process::exit(1)
    });
    let ready = format!("{} {} {}", n.nbd_addr, n.api_addr, n.api_token.secret());
    std::fs::write(dir.join("ready.tmp"), ready).unwrap();
    std::fs::rename(dir.join("ready.tmp"), dir.join("ready")).unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// A node process of this harness.
struct Proc {
    child: Option<Child>,
    config: PathBuf,
    dir: PathBuf,
    nbd: String,
    api: String,
    token: String,
}

impl Proc {
    fn new(dir: &Path, toml: &str) -> Proc {
        std::fs::create_dir_all(dir).unwrap();
        let p = Proc {
            child: None,
            config: dir.join("node.toml"),
            dir: dir.to_path_buf(),
            nbd: String::new(),
            api: String::new(),
            token: String::new(),
        };
        p.configure(toml);
        p
    }

    /// (Re)writes the node's configuration file.
    fn configure(&self, toml: &str) {
        let text = toml.replace(
            "[node]",
            &format!("[node]\ndata_dir = \"{}\"", self.dir.display()),
        );
        std::fs::write(&self.config, text).unwrap();
    }

    fn start(&mut self) {
        assert!(
            self.try_start(Duration::from_secs(10)),
            "node {} exited at start",
            self.config.display()
        );
    }

    /// Starts the node; `false` if it keeps exiting at start for `limit` (it refuses to
    /// start, saying why on stderr).
    fn try_start(&mut self, limit: Duration) -> bool {
        self.kill();
        let ready = self.dir.join("ready");
        let _ = std::fs::remove_file(&ready);
        self.child = Some(self.spawn());
        let t0 = Instant::now();
        loop {
            if let Ok(s) = std::fs::read_to_string(&ready) {
                let mut it = s.split(' ');
                self.nbd = it.next().unwrap().into();
                self.api = it.next().unwrap().into();
                self.token = it.next().unwrap().into();
                return true;
            }
            if self.child.as_mut().unwrap().try_wait().unwrap().is_some() {
                if t0.elapsed() >= limit {
                    self.child = None;
                    return false;
                }
                // A listening address still held for a moment after the kill: retry.
                std::thread::sleep(Duration::from_millis(100));
                self.child = Some(self.spawn());
                continue;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "node {} did not start",
                self.config.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn spawn(&self) -> Child {
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "crash::node_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("LACHESIS_CRASH_NODE", &self.config)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap()
    }

    /// SIGKILL (no shutdown path runs).
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Calls the API; returns the status (0 if the node did not answer).
    fn api(&self, method: &str, path: &str, body: Option<&str>) -> u16 {
        let url = format!("http://{}{path}", self.api);
        let req = ureq::request(method, &url)
            .set("content-type", "application/json")
            .set("authorization", &format!("Bearer {}", self.token))
            .timeout(Duration::from_secs(5));
        let res = match body {
            Some(b) => req.send_string(b),
            None => req.call(),
        };
        match res {
            Ok(r) => r.status(),
            Err(ureq::Error::Status(s, _)) => s,
            Err(_) => 0,
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The content of version `v` of block `b`: a header naming both, then a fill.
fn pattern(b: u64, v: u64) -> Vec<u8> {
    let mut d = vec![(b as u8) ^ (v as u8) ^ 0x5a; BS];
    d[..8].copy_from_slice(&b.to_le_bytes());
    d[8..16].copy_from_slice(&v.to_le_bytes());
    d
}

/// The version a block holds (0: never written), or `None` if it is neither.
fn version_of(b: u64, data: &[u8]) -> Option<u64> {
    if data.iter().all(|&x| x == 0) {
        return Some(0);
    }
    let v = u64::from_le_bytes(data[8..16].try_into().unwrap());
    (data == pattern(b, v).as_slice()).then_some(v)
}

#[test]
fn durable_log_survives_sigkill() {
    if std::env::var("LACHESIS_CRASH_NODE").is_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for durable in [true, false] {
        let dir = tmp.path().join(format!("durable-{durable}"));
        let mut n = Proc::new(
            &dir,
            &format!(
                r#"[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "8MiB"
[[export]]
name = "vol"
file = "vol.img"
size = "16MiB"
[[cache]]
name = "c"
size = "8MiB"
durable = {durable}
[[rule]]
export = "vol"
cache = "c"
"#
            ),
        );
        n.start();
        // Written with our NBD client, which (unlike qemu-io, which flushes when it
        // closes) sends no FLUSH; the node is killed while the connection is open.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let c = rt
            .block_on(NbdClient::connect(n.nbd.as_str(), "vol"))
            .unwrap();
        rt.block_on(c.write(65536, vec![0xabu8; 1 << 20], false))
            .unwrap();
        rt.block_on(c.write(3 << 20, vec![0xcdu8; 4096], false))
            .unwrap();
        n.kill();
        n.start();
        let uri = format!("nbd://{}/vol", n.nbd);
        let out = Command::new("qemu-io")
            .args([
                "-f",
                "raw",
                "-r",
                "-c",
                "read -P 0xab 65536 1M",
                "-c",
                "read -P 0xcd 3M 4096",
            ])
            .arg(&uri)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let intact = out.status.success() && !text.contains("Pattern verification failed");
        println!("durable = {durable}: data after SIGKILL and restart intact = {intact}");
        if durable {
            assert!(intact, "with the log the writes must survive: {text}");
            assert_eq!(n.api("GET", "/v1/caches/c", None), 200);
        } else {
            assert!(
                !intact,
                "without a log unflushed writes live in memory only: {text}"
            );
        }
        n.kill();
    }
}

/// What the driver knows of a block: its last acknowledged version and the one in
/// flight, if any.
#[derive(Default, Clone, Copy)]
struct Known {
    acked: u64,
    inflight: Option<u64>,
}

const L1_TOML: &str = r#"[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "2MiB"
level = 1
[[export]]
name = "vol"
upstream = ["UPSTREAM/vol"]
[[cache]]
name = "c"
size = "1MiB"
durable = true
[[rule]]
export = "vol"
cache = "c"
"#;

const L2_TOML: &str = r#"[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "2MiB"
level = 2
[[export]]
name = "vol"
upstream = ["BACKEND"]
[[cache]]
name = "c"
size = "1MiB"
durable = true
[[rule]]
export = "vol"
cache = "c"
"#;

/// The backend under level 2: nbdkit's file plugin over an 8 MiB image (`dir`'s
/// `backend.img`) behind its error
/// filter, whose writes, trims and zeroes all fail with EIO while `trigger`
/// exists (reads never fail).
fn failing_backend(dir: &Path, trigger: &Path) -> Nbdkit {
    std::fs::create_dir_all(dir).unwrap();
    let img = sparse_image(dir, 8 << 20);
    let mut params = Vec::new();
    for op in ["pwrite", "trim", "zero"] {
        params.push(format!("error-{op}=EIO"));
        params.push(format!("error-{op}-rate=1"));
        params.push(format!("error-{op}-file={}", trigger.display()));
    }
    Nbdkit::start(&img, &["error"], &params)
}

/// A level-1 node with a durable log, SIGKILLed with dirty blocks, starts again while the
/// backend under level 2 refuses every write: its log cannot be flushed, so its records
/// go through the recovery file into its cache and new log, reads return them, and once
/// the backend heals a FLUSH puts them on the image.
#[test]
fn a_level_one_node_restarts_while_the_backend_below_level_two_fails() {
    if std::env::var("LACHESIS_CRASH_NODE").is_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trigger = tmp.path().join("backend-fails");
    let backend = failing_backend(&tmp.path().join("backend"), &trigger);
    let mut l2 = Proc::new(
        &tmp.path().join("l2"),
        &L2_TOML.replace("BACKEND", &backend.upstream()),
    );
    l2.start();
    let mut l1 = Proc::new(
        &tmp.path().join("l1"),
        &L1_TOML.replace("UPSTREAM", &l2.nbd),
    );
    l1.start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    std::fs::write(&trigger, b"").unwrap();
    let client = rt
        .block_on(NbdClient::connect(l1.nbd.as_str(), "vol"))
        .unwrap();
    for b in 0..32u64 {
        rt.block_on(client.write(b * BS as u64, pattern(b, 1), false))
            .unwrap();
    }
    assert!(
        rt.block_on(client.flush()).is_err(),
        "a FLUSH succeeded while the backend refuses writes"
    );
    drop(client);
    l1.kill();
    l1.start();
    assert!(
        !l1.dir.join("recovery.bin").exists(),
        "the log's records stayed in the recovery file instead of the cache's new log"
    );
    let client = rt
        .block_on(NbdClient::connect(l1.nbd.as_str(), "vol"))
        .unwrap();
    for b in 0..32u64 {
        let d = rt.block_on(client.read(b * BS as u64, BS as u32)).unwrap();
        assert_eq!(version_of(b, &d), Some(1), "block {b} after the restart");
    }
    std::fs::remove_file(&trigger).unwrap();
    rt.block_on(client.flush()).unwrap();
    let image = std::fs::read(tmp.path().join("backend/backend.img")).unwrap();
    for b in 0..32usize {
        assert_eq!(
            version_of(b as u64, &image[b * BS..(b + 1) * BS]),
            Some(1),
            "block {b} on the image after the heal"
        );
    }
}

/// The final check: every block holds its acknowledged (or in-flight) version.
fn client_after(
    rt: &tokio::runtime::Runtime,
    l1: &Proc,
    known: &Mutex<HashMap<u64, Known>>,
    checked: &mut u64,
    lost: &mut u64,
) -> NbdClient {
    let client = rt
        .block_on(NbdClient::connect(l1.nbd.as_str(), "vol"))
        .unwrap();
    let span = read_span(rt, &client);
    check_span("final", &span, known, checked, lost);
    client
}

/// Every known block of `span` (the first blocks of the volume, read through a node or
/// from the image) holds its acknowledged or in-flight version; `what` names the read.
fn check_span(
    what: &str,
    span: &[u8],
    known: &Mutex<HashMap<u64, Known>>,
    checked: &mut u64,
    lost: &mut u64,
) {
    for (&b, e) in known.lock().unwrap().iter() {
        *checked += 1;
        let v = version_of(b, &span[b as usize * BS..(b as usize + 1) * BS]);
        if v != Some(e.acked) && v != e.inflight {
            *lost += 1;
            eprintln!("{what}: block {b} holds {v:?}, acknowledged {}", e.acked);
        }
    }
}

/// The blocks the writers touch, read in 1 MiB requests.
fn read_span(rt: &tokio::runtime::Runtime, client: &NbdClient) -> Vec<u8> {
    let mut out = Vec::with_capacity(SPAN as usize * BS);
    let chunk = 1u64 << 20;
    for off in (0..SPAN * BS as u64).step_by(chunk as usize) {
        let d = rt
            .block_on(client.read(off, chunk as u32))
            .unwrap_or_else(|e| panic!("read at {off}: {e}"));
        out.extend_from_slice(&d);
    }
    out
}

/// Blocks the writers touch (4 MiB: four times the level-1 cache).
const SPAN: u64 = 1024;
const WRITERS: u64 = 4;

#[test]
fn crash_harness_loses_no_acknowledged_write() {
    if std::env::var("LACHESIS_CRASH_NODE").is_ok() {
        return;
    }
    let cycles: u64 = std::env::var("LACHESIS_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let seed: u64 = std::env::var("LACHESIS_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(17);
    let tmp = tempfile::tempdir().unwrap();
    // The backend fails every write and flush from 40 % of the cycles to 60 % (the
    // trigger file exists), then heals.
    let trigger = tmp.path().join("backend-fails");
    let backend = failing_backend(&tmp.path().join("backend"), &trigger);
    let (fail_from, heal_at) = (cycles * 2 / 5, cycles * 3 / 5);
    // Every start listens on new ports; the level-1 node is told where level 2 is now
    // (it restarts whenever level 2 does).
    let mut l2 = Proc::new(
        &tmp.path().join("l2"),
        &L2_TOML.replace("BACKEND", &backend.upstream()),
    );
    let mut l1 = Proc::new(&tmp.path().join("l1"), L1_TOML);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let known: Arc<Mutex<HashMap<u64, Known>>> = Arc::default();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (mut checked, mut lost, mut writes) = (0u64, 0u64, 0u64);
    let mut actions: HashMap<&'static str, u64> = HashMap::new();
    let t0 = Instant::now();
    let (mut writes_while_failing, mut refused_starts) = (0u64, 0u64);
    // A node that refused to start over the failing backend stays down until it heals.
    let mut down = false;
    for cycle in 0..cycles {
        if cycle == fail_from {
            std::fs::write(&trigger, b"").unwrap();
        }
        if cycle == heal_at {
            std::fs::remove_file(&trigger).unwrap();
            down = false;
        }
        let failing = (fail_from..heal_at).contains(&cycle);
        if down {
            continue;
        }
        // Over the failing backend a start may be refused (a write log or recovery file
        // the caches cannot hold dirty while the backend takes nothing): nothing may be
        // lost by that either, which the first cycle after the heal checks.
        let limit = Duration::from_secs(if failing { 3 } else { 10 });
        if l2.child.is_none() {
            l1.kill();
            if !l2.try_start(limit) {
                assert!(failing, "level 2 did not start over a healthy backend");
                refused_starts += 1;
                down = true;
                continue;
            }
        }
        if l1.child.is_none() {
            l1.configure(&L1_TOML.replace("UPSTREAM", &l2.nbd));
            if !l1.try_start(limit) {
                assert!(failing, "level 1 did not start over a healthy backend");
                refused_starts += 1;
                down = true;
                continue;
            }
        }
        let client = Arc::new(
            rt.block_on(NbdClient::connect(l1.nbd.as_str(), "vol"))
                .unwrap(),
        );
        // Verify: every block written so far holds its acknowledged (or in-flight)
        // version; what it holds becomes the acknowledged version.
        {
            let span = read_span(&rt, &client);
            let mut k = known.lock().unwrap();
            for (&b, e) in k.iter_mut() {
                checked += 1;
                match version_of(b, &span[b as usize * BS..(b as usize + 1) * BS]) {
                    Some(v) if v == e.acked || Some(v) == e.inflight => {
                        e.acked = v;
                        e.inflight = None;
                    }
                    got => {
                        lost += 1;
                        eprintln!(
                            "cycle {cycle}: block {b} holds {got:?}, acknowledged {} (in flight {:?})",
                            e.acked, e.inflight
                        );
                        e.acked = got.unwrap_or(0);
                        e.inflight = None;
                    }
                }
            }
        }
        // Writers: each owns the blocks b with b % WRITERS == w, one write at a time.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let (client, known, stop) = (client.clone(), known.clone(), stop.clone());
            let mut wr = rand::rngs::StdRng::seed_from_u64(seed ^ (cycle << 8) ^ w);
            tasks.push(rt.spawn(async move {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let b = wr.gen_range(0..SPAN / WRITERS) * WRITERS + w;
                    let v = {
                        let mut k = known.lock().unwrap();
                        let e = k.entry(b).or_default();
                        let v = e.acked + 1;
                        e.inflight = Some(v);
                        v
                    };
                    let fua = wr.gen_bool(0.02);
                    if client
                        .write(b * BS as u64, pattern(b, v), fua)
                        .await
                        .is_err()
                    {
                        return n;
                    }
                    let mut k = known.lock().unwrap();
                    let e = k.get_mut(&b).unwrap();
                    e.acked = v;
                    e.inflight = None;
                    n += 1;
                }
                n
            }));
        }
        // One action through the API (or a FLUSH) while the writers run, then the kill.
        std::thread::sleep(Duration::from_millis(rng.gen_range(5..40)));
        let target = if rng.gen_bool(0.5) { &l1 } else { &l2 };
        let action = match rng.gen_range(0..8) {
            0 => {
                let _ = rt.block_on(client.flush());
                "flush"
            }
            1 => {
                let size = ["512KiB", "1MiB", "768KiB"][rng.gen_range(0..3)];
                if rng.gen_bool(0.5) {
                    target.api(
                        "PATCH",
                        "/v1/caches/c",
                        Some(&format!("{{\"size\":\"{size}\"}}")),
                    );
                    "resize"
                } else {
                    // As the controller sends a node's part of a plan: one batch, the
                    // size and the eviction policy together.
                    let p = ["arc", "lru", "s3fifo", "lirs"][rng.gen_range(0..4)];
                    target.api(
                        "PATCH",
                        "/v1/caches",
                        Some(&format!(
                            "{{\"caches\":[{{\"cache\":\"c\",\"patch\":{{\"size\":\"{size}\",\"eviction\":\"{p}\"}}}}]}}"
                        )),
                    );
                    "batch resize"
                }
            }
            2 => {
                let p = ["arc", "lru", "s3fifo", "lirs"][rng.gen_range(0..4)];
                target.api(
                    "PATCH",
                    "/v1/caches/c",
                    Some(&format!("{{\"eviction\":\"{p}\"}}")),
                );
                "policy switch"
            }
            3 => {
                target.api("DELETE", "/v1/caches/c", None);
                target.api(
                    "POST",
                    "/v1/caches",
                    Some(r#"{"name":"c","size":"1MiB","durable":true}"#),
                );
                target.api("POST", "/v1/rules", Some(r#"{"export":"vol","cache":"c"}"#));
                "cache removal"
            }
            4 => {
                for id in 0..64 {
                    if target.api("DELETE", &format!("/v1/rules/{id}"), None) == 200 {
                        break;
                    }
                }
                target.api("POST", "/v1/rules", Some(r#"{"export":"vol","cache":"c"}"#));
                "rule change"
            }
            5 => {
                target.api("PATCH", "/v1/caches/c", Some(r#"{"dirty_ratio":0.1}"#));
                "cleaning"
            }
            6 => {
                let wp = ["write-through", "write-back"][rng.gen_range(0..2)];
                target.api(
                    "PATCH",
                    "/v1/caches/c",
                    Some(&format!("{{\"write_policy\":\"{wp}\"}}")),
                );
                "write-policy change"
            }
            _ => "writes",
        };
        *actions.entry(action).or_default() += 1;
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..30)));
        // The kill: the level-1 node, or the level-2 node (its level-1 client then has
        // no upstream any more, and is killed too).
        let both = rng.gen_bool(0.3);
        if both {
            l2.kill();
        }
        l1.kill();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in tasks {
            let n = rt.block_on(t).unwrap();
            writes += n;
            if failing {
                writes_while_failing += n;
            }
        }
    }
    // A last check after a final restart of both.
    l2.start();
    l1.configure(&L1_TOML.replace("UPSTREAM", &l2.nbd));
    l1.start();
    let client = client_after(&rt, &l1, &known, &mut checked, &mut lost);
    // Once the backend has healed, a FLUSH through both levels puts every acknowledged
    // block on the image itself.
    rt.block_on(client.flush())
        .expect("a FLUSH once the backend has healed");
    let image = std::fs::read(tmp.path().join("backend/backend.img")).unwrap();
    check_span("image", &image, &known, &mut checked, &mut lost);
    drop(client);
    l1.kill();
    l2.kill();
    println!(
        "crash harness: {cycles} cycles in {:.1} s, {writes} writes acknowledged, {checked} block checks, {lost} writes lost; backend failing in cycles {fail_from}..{heal_at} ({writes_while_failing} writes acknowledged there, {refused_starts} start(s) refused there); actions {actions:?}",
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(lost, 0, "acknowledged writes were lost");
}
