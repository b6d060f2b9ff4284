//! Issue 35: the crash harness with the controller deciding. A level-2 node `s` and a
//! level-1 node `h` run as processes of their own (this test binary run again with
//! `LACHESIS_CTL_CRASH_NODE=CONFIG`: `crash::node_process` then starts a node from that
//! file and serves until it is killed); both register with an in-process controller and
//! send it heartbeats. Four writers write versioned patterns through `h` into two
//! tenants' volumes (`a` at random blocks, `b` in a loop larger than its partition) and
//! FLUSH every 32 writes, while the controller plans and
//! applies its intervals (creating caches and rules, resizing them, switching eviction
//! policies, and switching tenant `b`'s write policy when the driver changes it through
//! the controller's API; tenant `a`'s SLO changes too), and the driver SIGKILLs `h`, `s`
//! or both at a random moment. The nodes restart (`s` on the same NBD port, so `h`'s
//! links reconnect and replay their journals) and register again, and the controller
//! re-creates what they lost.
//!
//! The caches are the controller's (write-back, no durable log), so a write is promised
//! only once a FLUSH after it has been answered: after every restart each block must hold
//! a version at least as new as the last one a FLUSH covered, and a version some writer
//! wrote (never a torn or foreign pattern). 30 cycles here; `LACHESIS_CTL_CRASH_CYCLES=N`
//! runs more and `LACHESIS_CTL_CRASH_SEED` picks another sequence. It prints cycles,
//! writes, flushes, block checks, the controller's actions by verb, and blocks lost
//! (must be 0).

use crate::common::call;
use controller::config::ControllerConfig;
use controller::{SqliteStore, Store};
use nbd::NbdClient;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NODE_ENV: &str = "LACHESIS_CTL_CRASH_NODE";
const BS: usize = 4096;
/// Blocks each writer may touch in its volume (4 MiB of each 8 MiB volume).
const SPAN: u64 = 1024;
const VOLUMES: [&str; 2] = ["a", "b"];
/// Writers per volume; writer `w` owns the blocks `b` with `b % WRITERS == w`.
const WRITERS: u64 = 2;

/// Not a test when run by the harness: the body of a node process.
#[test]
fn node_process() {
    let Ok(cfg) = std::env::var(NODE_ENV) else {
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
        eprintln!("node process: the node refused to start: {e}");
        std::process::exit(1)
    });
    std::fs::write(dir.join("ready.tmp"), n.nbd_addr.to_string()).unwrap();
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
}

impl Proc {
    fn new(dir: &Path, toml: &str) -> Proc {
        std::fs::create_dir_all(dir).unwrap();
        let config = dir.join("node.toml");
        std::fs::write(&config, toml).unwrap();
        Proc {
            child: None,
            config,
            dir: dir.to_path_buf(),
            nbd: String::new(),
        }
    }

    fn start(&mut self) {
        self.kill();
        let ready = self.dir.join("ready");
        let _ = std::fs::remove_file(&ready);
        self.child = Some(self.spawn());
        let t0 = Instant::now();
        loop {
            if let Ok(s) = std::fs::read_to_string(&ready) {
                self.nbd = s;
                return;
            }
            if self.child.as_mut().unwrap().try_wait().unwrap().is_some() {
                // Its fixed NBD port still held for a moment after the kill: again.
                std::thread::sleep(Duration::from_millis(100));
                self.child = Some(self.spawn());
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
            .env(NODE_ENV, &self.config)
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
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The content of version `v` of block `b` of volume `vol`: a header naming all three,
/// then a fill.
fn pattern(vol: usize, b: u64, v: u64) -> Vec<u8> {
    let mut d = vec![(b as u8) ^ (v as u8) ^ (vol as u8) ^ 0xa5; BS];
    d[..8].copy_from_slice(&b.to_le_bytes());
    d[8..16].copy_from_slice(&v.to_le_bytes());
    d[16] = vol as u8;
    d
}

/// The version a block holds (0: never written), or `None` if it is no pattern of it.
fn version_of(vol: usize, b: u64, data: &[u8]) -> Option<u64> {
    if data.iter().all(|&x| x == 0) {
        return Some(0);
    }
    let v = u64::from_le_bytes(data[8..16].try_into().unwrap());
    (data == pattern(vol, b, v).as_slice()).then_some(v)
}

/// What the driver knows of one block.
#[derive(Default, Clone, Copy)]
struct Known {
    /// The newest version written (acknowledged or in flight).
    written: u64,
    /// The newest version a successful FLUSH covered: it must survive.
    flushed: u64,
}

type Blocks = Arc<Mutex<HashMap<(usize, u64), Known>>>;

/// A small deterministic generator (xorshift64*), so the harness needs no other crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One writer on `vol`'s export of `h`: writes versioned blocks it owns and FLUSHes every
/// 32 writes; a FLUSH that succeeds makes every write it saw acknowledged before it
/// `flushed`. Returns (writes, flushes) when stopped or when the connection fails.
async fn writer(
    client: Arc<NbdClient>,
    vol: usize,
    w: u64,
    seed: u64,
    known: Blocks,
    stop: Arc<AtomicBool>,
) -> (u64, u64) {
    let mut rng = Rng(seed | 1);
    let (mut writes, mut flushes) = (0, 0);
    let mut since_flush: Vec<(u64, u64)> = Vec::new();
    // Volume `a` is written at random; volume `b` in a loop over all its blocks (larger
    // than its partition: LRU keeps nothing of it, so the controller has a reason to
    // choose another eviction policy).
    let mut next = rng.below(SPAN / WRITERS);
    while !stop.load(Ordering::Relaxed) {
        let i = if vol == 0 {
            rng.below(SPAN / WRITERS)
        } else {
            next = (next + 1) % (SPAN / WRITERS);
            next
        };
        let b = i * WRITERS + w;
        let v = {
            let mut k = known.lock().unwrap();
            let e = k.entry((vol, b)).or_default();
            e.written += 1;
            e.written
        };
        if client
            .write(b * BS as u64, pattern(vol, b, v), false)
            .await
            .is_err()
        {
            break;
        }
        writes += 1;
        since_flush.push((b, v));
        if since_flush.len() >= 32 {
            if client.flush().await.is_err() {
                break;
            }
            flushes += 1;
            let mut k = known.lock().unwrap();
            for (b, v) in since_flush.drain(..) {
                let e = k.get_mut(&(vol, b)).unwrap();
                e.flushed = e.flushed.max(v);
            }
        }
    }
    (writes, flushes)
}

/// Reads every known block of every volume through `h` and checks it: at least its
/// flushed version, at most its newest, a pattern of its own. What it holds becomes the
/// newest version written (so the next write is one newer). Returns (checks, lost).
fn check(rt: &tokio::runtime::Runtime, h: &Proc, known: &Blocks, cycle: u64) -> (u64, u64) {
    let (mut checks, mut lost) = (0, 0);
    for (vol, name) in VOLUMES.iter().enumerate() {
        let client = rt
            .block_on(NbdClient::connect(h.nbd.as_str(), name))
            .unwrap();
        let mut span = Vec::with_capacity(SPAN as usize * BS);
        for off in (0..SPAN * BS as u64).step_by(1 << 20) {
            let d = rt
                .block_on(client.read(off, 1 << 20))
                .unwrap_or_else(|e| panic!("cycle {cycle}: read {name} at {off}: {e}"));
            span.extend_from_slice(&d);
        }
        let mut k = known.lock().unwrap();
        for (&(v_idx, b), e) in k.iter_mut() {
            if v_idx != vol {
                continue;
            }
            checks += 1;
            let data = &span[b as usize * BS..(b as usize + 1) * BS];
            match version_of(vol, b, data) {
                Some(v) if v >= e.flushed && v <= e.written => e.written = v,
                got => {
                    lost += 1;
                    eprintln!(
                        "cycle {cycle}: {name} block {b} holds {got:?}, flushed {}, newest {}",
                        e.flushed, e.written
                    );
                }
            }
        }
    }
    (checks, lost)
}

fn node_config(name: &str, level: u8, dir: &Path, nbd: &str, ctl: &str, exports: &str) -> String {
    format!(
        "[node]\nname = \"{name}\"\nnbd = \"{nbd}\"\napi = \"127.0.0.1:0\"\ncache_size = \"4MiB\"\n\
         level = {level}\ndata_dir = \"{}\"\nbusy_poll = \"0s\"\ncontroller = \"http://{ctl}\"\n\
         controller_token_file = \"ctl.token\"\nheartbeat = \"200ms\"\nstop_timeout = \"1s\"\n{exports}",
        dir.display()
    )
}

const CONTROLLER: &str = r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "lachesis"
exclusive = false
[[tenant]]
name = "a"
slo = { latency_ms = 2.0 }
[[tenant.volume]]
name = "a"
host = "h"
servers = ["s"]
[[tenant]]
name = "b"
[[tenant.volume]]
name = "b"
host = "h"
servers = ["s"]
"#;

/// Tenant `b` with its volume's write policy `wp`, as `PUT /v1/tenants/b` takes it.
fn tenant_b(wp: &str) -> serde_json::Value {
    serde_json::json!({
        "name": "b",
        "volume": [{"name": "b", "host": "h", "servers": ["s"], "write_policy": wp}]
    })
}

#[test]
fn flushed_writes_survive_kills_while_the_controller_replans() {
    if std::env::var(NODE_ENV).is_ok() {
        return;
    }
    let cycles: u64 = std::env::var("LACHESIS_CTL_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let seed: u64 = std::env::var("LACHESIS_CTL_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(35);
    let tmp = tempfile::tempdir().unwrap();
    let rt = crate::common::runtime();
    let mut cfg = ControllerConfig::parse(CONTROLLER).unwrap();
    cfg.controller.data_dir = tmp.path().join("ctl");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&tmp.path().join("ctl.db")).unwrap());
    let ctl = rt.block_on(controller::start(&cfg, store, false)).unwrap();
    let (ctl_addr, token) = (ctl.addr.to_string(), ctl.token.secret().to_string());
    let base = format!("http://{ctl_addr}");

    // `s` keeps one NBD port across restarts, so `h`'s links reconnect to it.
    let s_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s_nbd = format!("127.0.0.1:{s_port}");
    let (s_dir, h_dir) = (tmp.path().join("s"), tmp.path().join("h"));
    let s_exports: String = VOLUMES
        .iter()
        .map(|v| format!("[[export]]\nname = \"{v}\"\nfile = \"{v}.img\"\nsize = \"8MiB\"\n"))
        .collect();
    let h_exports: String = VOLUMES
        .iter()
        .map(|v| format!("[[export]]\nname = \"{v}\"\nupstream = [\"{s_nbd}/{v}\"]\n"))
        .collect();
    let mut s = Proc::new(
        &s_dir,
        &node_config("s", 2, &s_dir, &s_nbd, &ctl_addr, &s_exports),
    );
    let mut h = Proc::new(
        &h_dir,
        &node_config("h", 1, &h_dir, "127.0.0.1:0", &ctl_addr, &h_exports),
    );
    for d in [&s_dir, &h_dir] {
        std::fs::write(d.join("ctl.token"), &token).unwrap();
    }

    let known: Blocks = Arc::default();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let (mut writes, mut flushes, mut checks, mut lost) = (0u64, 0u64, 0u64, 0u64);
    let mut verbs: BTreeMap<String, u64> = BTreeMap::new();
    let mut failed_actions = 0u64;
    let mut kills: BTreeMap<&str, u64> = BTreeMap::new();
    let mut b_write_back = true;
    let t0 = Instant::now();
    for cycle in 0..cycles {
        if s.child.is_none() {
            s.start();
        }
        if h.child.is_none() {
            h.start();
        }
        let (c, l) = check(&rt, &h, &known, cycle);
        checks += c;
        lost += l;

        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for (vol, name) in VOLUMES.iter().enumerate() {
            let client = Arc::new(
                rt.block_on(NbdClient::connect(h.nbd.as_str(), name))
                    .unwrap(),
            );
            for w in 0..WRITERS {
                tasks.push(rt.spawn(writer(
                    client.clone(),
                    vol,
                    w,
                    rng.next(),
                    known.clone(),
                    stop.clone(),
                )));
            }
        }
        // The operator's changes, through the controller's API.
        match rng.below(3) {
            0 => {
                let ms = [0.5, 1.0, 2.0, 5.0][rng.below(4) as usize];
                let (st, v) = call(
                    &base,
                    Some(&token),
                    "PUT",
                    "/v1/tenants/a/slo",
                    Some(serde_json::json!({"slo": {"latency_ms": ms}})),
                );
                assert_eq!(st, 200, "{v}");
            }
            1 => {
                b_write_back = !b_write_back;
                let wp = if b_write_back {
                    "write-back"
                } else {
                    "write-through"
                };
                let (st, v) = call(
                    &base,
                    Some(&token),
                    "PUT",
                    "/v1/tenants/b",
                    Some(tenant_b(wp)),
                );
                assert_eq!(st, 200, "{v}");
            }
            _ => {}
        }
        // The controller's intervals while the writers run, then the kill.
        for _ in 0..1 + rng.below(3) {
            std::thread::sleep(Duration::from_millis(150 + rng.below(300)));
            let r = ctl.service.tick().unwrap();
            for a in &r.actions {
                *verbs.entry(a.verb.clone()).or_default() += 1;
                if a.result != "ok" {
                    failed_actions += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(rng.below(200)));
        let which = match rng.below(10) {
            0..=5 => "h",
            6..=7 => "s",
            _ => "both",
        };
        *kills.entry(which).or_default() += 1;
        if which != "h" {
            s.kill();
        }
        if which != "s" {
            h.kill();
        }
        if which == "s" {
            // `h` stays up: its writers wait for the link, so stop them with a restart of
            // `s` (the writes they had in flight are replayed on the new connection).
            s.start();
        }
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            let (w, f) = rt.block_on(t).unwrap();
            writes += w;
            flushes += f;
        }
    }
    // A last check after a final restart of both.
    s.start();
    h.start();
    let (c, l) = check(&rt, &h, &known, cycles);
    checks += c;
    lost += l;
    h.kill();
    s.kill();
    println!(
        "controller crash harness: {cycles} cycles in {:.1} s, {writes} writes and {flushes} flushes acknowledged, {checks} block checks, {lost} blocks lost; kills {kills:?}; the controller's actions {verbs:?} ({failed_actions} not ok, nodes being down)",
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(lost, 0, "flushed writes were lost");
    assert!(writes > 0 && flushes > 0, "nothing was written");
    for verb in ["create", "resize"] {
        assert!(
            verbs.get(verb).copied().unwrap_or(0) > 0,
            "the controller never did `{verb}`: {verbs:?}"
        );
    }
}
