//! Nothing lost: fio writes with verification through a write-back cache of a real
//! `lachesis serve` process while `lachesis ctl` resizes the cache, switches its eviction
//! and write policies and finally removes it; a second run writes again through a new
//! cache and ends with a FLUSH, after which the node is killed with SIGKILL. fio then
//! verifies, on the backing file itself, every block both runs wrote. And a SIGTERM over a
//! hung backend ends the process by `[node] stop_timeout`, keeping the dirty blocks; a
//! SIGTERM while dirty blocks can be neither written back nor kept waits, until a second
//! signal, or at once with `--discard-dirty`.

mod common;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Node {
    child: Child,
    nbd: String,
    api: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(config: &std::path::Path, data: &std::path::Path) -> Node {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lachesis"))
        .args([
            "serve",
            config.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lachesis serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines
        .by_ref()
        .map(|l| l.unwrap())
        .find(|l| l.starts_with("lachesis node: NBD on"))
        .expect("the node announces its addresses");
    // Keep draining stderr so the node never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let word = |after: &str| {
        let rest = &line[line.find(after).unwrap() + after.len()..];
        rest.split([' ', '/'])
            .find(|s| !s.is_empty())
            .unwrap()
            .to_string()
    };
    Node {
        nbd: word("NBD on "),
        api: word("http://"),
        child,
    }
}

/// The node's generated API token, which `ctl` is given.
static TOKEN_FILE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn ctl(api: &str, args: &[&str]) -> String {
    let token = TOKEN_FILE.get().expect("the node has started");
    let mut all = vec!["ctl", "--api", api, "--token-file", token.as_str()];
    all.extend_from_slice(args);
    common::ok(&all)
}

fn fio(args: &[&str]) {
    let out = Command::new("fio")
        .args(args)
        .output()
        .expect("fio must be installed (.ci/run installs it)");
    assert!(
        out.status.success(),
        "fio {args:?}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn job(name: &str, offset: &str, size: &str, seed: &str) -> Vec<String> {
    [
        format!("--name={name}"),
        "--rw=randwrite".into(),
        "--bs=4k".into(),
        format!("--offset={offset}"),
        format!("--size={size}"),
        "--verify=crc32c".into(),
        format!("--randseed={seed}"),
        "--output-format=terse".into(),
    ]
    .to_vec()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn acknowledged_writes_survive_online_changes_and_sigkill_after_flush() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("node.toml");
    std::fs::write(
        &config,
        r#"
[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "64MiB"
[[export]]
name = "demo"
file = "demo.img"
size = "256MiB"
[[cache]]
name = "wb"
size = "32MiB"
write_policy = "write-back"
[[rule]]
export = "demo"
cache = "wb"
"#,
    )
    .unwrap();
    let node = serve(&config, dir.path());
    let token = dir.path().join("api.token");
    let _ = TOKEN_FILE.set(token.to_str().unwrap().to_string());
    // Without the token, `ctl` is refused and says how to give it.
    let refused = common::fails(&["ctl", "--api", &node.api, "caches"]);
    assert!(
        refused.contains("401") && refused.contains("--token-file"),
        "{refused}"
    );
    let uri = format!("--uri=nbd://{}/demo", node.nbd);

    // Run 1: 64 MiB of verified random writes while the cache is changed under it.
    let api = node.api.clone();
    let changes = std::thread::spawn(move || {
        let steps: &[&[&str]] = &[
            &["configure", "wb", "--size", "4MiB"],
            &["configure", "wb", "--eviction", "arc"],
            &["configure", "wb", "--size", "48MiB", "--eviction", "lirs"],
            &["configure", "wb", "--write-policy", "write-through"],
            &[
                "configure",
                "wb",
                "--write-policy",
                "write-back",
                "--eviction",
                "s3fifo",
            ],
            &["configure", "wb", "--size", "8MiB"],
            &["remove-cache", "wb"],
        ];
        for s in steps {
            std::thread::sleep(Duration::from_millis(150));
            ctl(&api, s);
        }
    });
    let mut run1 = job("run1", "0", "64m", "11");
    run1.extend([
        "--ioengine=nbd".into(),
        uri.clone(),
        "--iodepth=8".into(),
        "--do_verify=1".into(),
        "--rate=24m".into(),
    ]);
    fio(&refs(&run1));
    changes.join().unwrap();
    assert!(
        ctl(&node.api, &["caches"]).trim() == "[]",
        "the cache was removed"
    );

    // Run 2: a new write-back cache larger than the data, then FLUSH (end_fsync), SIGKILL.
    ctl(
        &node.api,
        &[
            "create-cache",
            "wb2",
            "--size",
            "32MiB",
            "--write-policy",
            "write-back",
        ],
    );
    ctl(
        &node.api,
        &["create-rule", "--export", "demo", "--cache", "wb2"],
    );
    let mut run2 = job("run2", "128m", "16m", "22");
    run2.extend([
        "--ioengine=nbd".into(),
        uri,
        "--iodepth=16".into(),
        "--do_verify=0".into(),
        "--end_fsync=1".into(),
    ]);
    fio(&refs(&run2));
    let stats: serde_json::Value =
        serde_json::from_str(&ctl(&node.api, &["stats", "wb2"])).unwrap();
    assert_eq!(stats["stats"]["dirty"], 0, "{stats}");
    assert!(
        stats["stats"]["writebacks"].as_u64().unwrap() >= 4096,
        "the FLUSH wrote the 4,096 dirty blocks back: {stats}"
    );
    let mut node = node;
    node.child.kill().unwrap(); // SIGKILL: no shutdown path runs
    node.child.wait().unwrap();

    // Every block of both runs is on the backing file.
    let file = format!("--filename={}", dir.path().join("demo.img").display());
    for (name, offset, size, seed) in [("run1", "0", "64m", "11"), ("run2", "128m", "16m", "22")] {
        let mut v = job(name, offset, size, seed);
        v.extend([
            "--ioengine=psync".into(),
            file.clone(),
            "--verify_only".into(),
        ]);
        fio(&refs(&v));
    }
    // The check has teeth: a region nobody wrote does not verify.
    let mut wrong = job("run2", "192m", "16m", "22");
    wrong.extend(["--ioengine=psync".into(), file, "--verify_only".into()]);
    let out = Command::new("fio").args(refs(&wrong)).output().unwrap();
    assert!(
        !out.status.success(),
        "verifying an unwritten region must fail"
    );
}

/// nbdkit serving `img` (the file plugin) behind `filter` with `params`, on a port of its
/// own: the child and the port.
fn nbdkit(img: &std::path::Path, filter: &str, params: &[String]) -> (Child, u16) {
    let pidfile = img.with_extension("pid");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kit = Command::new("nbdkit")
        .args(["-f", "--exit-with-parent", "-i", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .arg("-P")
        .arg(&pidfile)
        .arg(format!("--filter={filter}"))
        .arg("file")
        .arg(img)
        .args(params)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nbdkit must be installed (.ci/run installs it)");
    let t0 = std::time::Instant::now();
    while !pidfile.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nbdkit did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    (kit, port)
}

/// `lachesis serve CONFIG --data-dir DATA EXTRA...` with its stderr read line by line: the
/// child, its NBD address, and the lines after the announcement.
fn serve_logged(
    config: &std::path::Path,
    data: &std::path::Path,
    extra: &[&str],
) -> (Child, String, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lachesis"))
        .args(["serve", config.to_str().unwrap(), "--data-dir"])
        .arg(data)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lachesis serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines
        .by_ref()
        .map(|l| l.unwrap())
        .find(|l| l.starts_with("lachesis node: NBD on"))
        .expect("the node announces its addresses");
    let nbd = line["lachesis node: NBD on ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    (child, nbd, rx)
}

/// Sends `signal` (`-TERM`) to `child`.
fn signal(child: &Child, signal: &str) {
    let sent = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Waits up to `limit` for `child` to exit: its status and how long it took.
fn exited(child: &mut Child, limit: Duration) -> (std::process::ExitStatus, Duration) {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return (s, t0.elapsed());
        }
        assert!(
            t0.elapsed() < limit,
            "the node did not stop within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A node's configuration over the upstream on `port`, with `extra` in `[node]`.
fn upstream_config(dir: &std::path::Path, port: u16, extra: &str) -> std::path::PathBuf {
    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            r#"[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "1MiB"
stop_timeout = "2s"
{extra}
[[export]]
name = "vol"
upstream = ["127.0.0.1:{port}/img"]
[[cache]]
name = "c"
size = "512KiB"
[[rule]]
export = "vol"
cache = "c"
"#
        ),
    )
    .unwrap();
    config
}

/// Issue 35: SIGTERM to `lachesis serve` over a hung backend (nbdkit's delay filter, 60 s
/// per write) with dirty blocks and a client's FLUSH stuck in flight: the process exits 1
/// by `[node] stop_timeout` (2 s) plus slack, naming the count, and the blocks are in
/// `recovery.bin`. Before, the stop never ended.
#[test]
fn sigterm_over_a_hung_backend_exits_by_the_stop_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let img = tmp.path().join("backend.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let (mut kit, port) = nbdkit(&img, "delay", &["delay-write=60".into()]);
    let config = upstream_config(tmp.path(), port, "");
    let data = tmp.path().join("data");
    let (mut child, nbd, lines) = serve_logged(&config, &data, &[]);
    // qemu-io writes 8 blocks (acknowledged: write-back), then its closing FLUSH hangs.
    let mut qemu = Command::new("qemu-io")
        .args(["-f", "raw", "-t", "writeback", "-c", "write -P 0x5a 0 32k"])
        .arg(format!("nbd://{nbd}/vol"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("qemu-io must be installed (.ci/run installs it)");
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, "-TERM");
    let (status, took) = exited(&mut child, Duration::from_secs(15));
    let stderr = lines.try_iter().collect::<Vec<_>>().join("\n");
    println!("SIGTERM over a hung backend: {status} after {took:?}");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(took < Duration::from_secs(5), "the stop took {took:?}");
    assert!(
        stderr.contains("8 dirty block(s)") && stderr.contains("stop_timeout"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(data.join("recovery.bin")).unwrap().len(),
        8 + 8 * (2 + 3 + 8 + 4 + 4096),
        "8 blocks of export `vol` kept"
    );
    let _ = qemu.kill();
    let _ = qemu.wait();
    let _ = kit.kill();
    let _ = kit.wait();
}

/// A tmpfs of `size` on `dir` (None where this process may not mount: root is needed, as
/// the CI has), unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &std::path::Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!(
                "skipped: this test needs a small file system of its own, and mounting a \
                 tmpfs needs root (the CI runs as root)"
            );
        }
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Issue 35, item 2: SIGTERM to `lachesis serve` while its dirty blocks can be neither
/// written back (nbdkit's error filter fails every write) nor kept (the data directory on
/// a full tmpfs, `recovery_reserve = "0"`). Before, the process exited at once, logging
/// that the blocks could not be kept: they were gone. Now it stays up after SIGTERM,
/// saying why, and only a second SIGTERM ends it (exit 1, naming the blocks dropped); with
/// `--discard-dirty` the first SIGTERM ends it, the same way.
#[test]
fn sigterm_waits_for_blocks_nobody_can_take_until_a_second_signal_or_discard_dirty() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(_disk) = Tmpfs::mount(&tmp.path().join("disk"), "4m") else {
        return;
    };
    let img = tmp.path().join("backend.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let trigger = tmp.path().join("fail-writes");
    std::fs::write(&trigger, b"").unwrap();
    let (mut kit, port) = nbdkit(
        &img,
        "error",
        &[
            "error-pwrite=EIO".into(),
            "error-pwrite-rate=1".into(),
            format!("error-pwrite-file={}", trigger.display()),
        ],
    );
    let config = upstream_config(tmp.path(), port, "recovery_reserve = \"0\"");
    for discard in [false, true] {
        let data = tmp.path().join("disk").join(format!("data-{discard}"));
        let extra: &[&str] = if discard { &["--discard-dirty"] } else { &[] };
        let (mut child, nbd, lines) = serve_logged(&config, &data, extra);
        // 16 blocks acknowledged (write-back); qemu-io's closing FLUSH fails (EIO).
        let out = Command::new("qemu-io")
            .args(["-f", "raw", "-t", "writeback", "-c", "write -P 0x5a 0 64k"])
            .arg(format!("nbd://{nbd}/vol"))
            .output()
            .expect("qemu-io must be installed (.ci/run installs it)");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("wrote 65536/65536"), "{said}");
        // The disk fills up: the blocks are at risk.
        let filler = tmp.path().join("disk").join("filler");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&filler).unwrap();
            while f.write_all(&[0xff; 64 << 10]).is_ok() {}
        }
        let t0 = std::time::Instant::now();
        let mut log = Vec::new();
        while !log
            .iter()
            .any(|l: &String| l.contains("dirty blocks at risk"))
        {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "not at risk: {log:?}"
            );
            if let Ok(l) = lines.recv_timeout(Duration::from_millis(100)) {
                log.push(l);
            }
        }
        signal(&child, "-TERM");
        if !discard {
            std::thread::sleep(Duration::from_secs(3));
            assert!(
                child.try_wait().unwrap().is_none(),
                "the node exited after one SIGTERM with blocks at risk"
            );
            signal(&child, "-TERM");
        }
        let (status, took) = exited(&mut child, Duration::from_secs(15));
        log.extend(lines.try_iter());
        let stderr = log.join("\n");
        println!("discard = {discard}: {status} {took:?} after the last SIGTERM");
        assert_eq!(status.code(), Some(1), "{stderr}");
        assert!(took < Duration::from_secs(5), "the stop took {took:?}");
        assert!(
            stderr.contains("16 dirty block(s)")
                && stderr.contains("dropped at the operator's request"),
            "{stderr}"
        );
        assert_eq!(
            stderr.contains("the stop waits"),
            !discard,
            "whether it said it waits: {stderr}"
        );
        std::fs::remove_file(&filler).unwrap();
    }
    let _ = kit.kill();
    let _ = kit.wait();
}
