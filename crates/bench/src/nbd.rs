//! `lachesis bench nbd`: the data path side by side with plain NBD servers, in one run, on
//! loopback, with the same load generator (fio's nbd engine) for every server.
//!
//! * Hit path: our node with a cache holding the whole export against nbdkit's memory
//!   plugin, both filled with the same data first: 4 KiB random reads at queue depth 32
//!   (IOPS), at queue depth 1 (mean latency), and 1 MiB sequential reads (throughput).
//! * Miss path: our node with a cache far smaller than the export (nearly every read
//!   misses and goes to the file) against `qemu-nbd` and nbdkit's file plugin serving the
//!   same file.
//! * Hierarchy: a level-1 node striped over two level-2 nodes, with a working set that fits
//!   in level 1, against the single node's hit path after warm-up.
//!
//! The figures are ratios from one run because absolute times on shared machines move a
//! lot from run to run; the targets are printed beside them. Each comparison runs its
//! servers interleaved `repeat` times (ours, peer, ours, peer, ...) and compares the best
//! of each side, so a burst of load from a neighbour does not decide a ratio.

use crate::error::{bail, BenchError, Context, Result};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// What one fio run measured.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Fio {
    pub(crate) iops: f64,
    pub(crate) bw: f64,
    pub(crate) lat_us: f64,
}

pub(crate) fn fio(uri: &str, rw: &str, bs: &str, qd: u32, seconds: u32, size: &str) -> Result<Fio> {
    let out = Command::new("fio")
        .args([
            "--name=bench",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            &format!("--rw={rw}"),
            &format!("--bs={bs}"),
            &format!("--iodepth={qd}"),
            &format!("--size={size}"),
            &format!("--runtime={seconds}"),
            "--time_based",
            "--ramp_time=1",
            "--randrepeat=0",
            "--output-format=json",
        ])
        .output()
        .context("running fio (install Debian's fio)")?;
    if !out.status.success() {
        bail!("fio on {uri}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text.find('{').context("fio printed no JSON")?;
    let v: serde_json::Value = serde_json::from_str(&text[start..]).context("fio's JSON")?;
    let side = if rw.contains("write") {
        "write"
    } else {
        "read"
    };
    let r = &v["jobs"][0][side];
    Ok(Fio {
        iops: r["iops"].as_f64().unwrap_or(0.0),
        bw: r["bw_bytes"].as_f64().unwrap_or(0.0),
        lat_us: r["lat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1000.0,
    })
}

/// One fio load: pattern, block size, queue depth, over the first `size` bytes.
#[derive(Clone, Copy)]
struct Load<'a> {
    rw: &'a str,
    bs: &'a str,
    qd: u32,
    size: &'a str,
    seconds: u32,
    repeat: u32,
}

impl Load<'_> {
    fn run(&self, uri: &str) -> Result<Fio> {
        fio(uri, self.rw, self.bs, self.qd, self.seconds, self.size)
    }
}

/// What a row compares.
#[derive(Clone, Copy)]
enum Metric {
    KiloIops,
    MeanLatencyMicros,
    MegabytesPerSec,
}

impl Metric {
    /// The figure, its unit, and whether higher is better.
    fn pick(self) -> (fn(&Fio) -> f64, &'static str, bool) {
        match self {
            Metric::KiloIops => (|f| f.iops / 1e3, "kIOPS", true),
            Metric::MeanLatencyMicros => (|f| f.lat_us, "µs", false),
            Metric::MegabytesPerSec => (|f| f.bw / 1e6, "MB/s", true),
        }
    }

    /// The best of several runs.
    fn best(self, runs: &[Fio]) -> Fio {
        let (pick, _, higher) = self.pick();
        let better = |a: &Fio, b: &Fio| {
            let (x, y) = (pick(a), pick(b));
            if higher {
                x > y
            } else {
                x < y
            }
        };
        let mut best = runs[0];
        for r in &runs[1..] {
            if better(r, &best) {
                best = *r;
            }
        }
        best
    }
}

/// Runs `load` on each of `uris` in turn, `repeat` rounds, and returns each one's best.
fn interleaved(load: Load, uris: &[&str], metric: Metric, repeat: u32) -> Result<Vec<Fio>> {
    let mut runs: Vec<Vec<Fio>> = vec![Vec::new(); uris.len()];
    for _ in 0..repeat.max(1) {
        for (i, uri) in uris.iter().enumerate() {
            runs[i].push(load.run(uri)?);
        }
    }
    Ok(runs.iter().map(|r| metric.best(r)).collect())
}

/// Runs `load` against our server and the peer, interleaved, and prints the row.
fn compare(
    what: &str,
    load: Load,
    ours: &str,
    peer: &str,
    metric: Metric,
    target: &str,
) -> Result<Fio> {
    let best = interleaved(load, &[ours, peer], metric, load.repeat)?;
    let (pick, unit, higher) = metric.pick();
    row(what, pick(&best[0]), pick(&best[1]), unit, target, higher);
    Ok(best[0])
}

pub(crate) fn fill(uri: &str, size: &str) -> Result<()> {
    let out = Command::new("fio")
        .args([
            "--name=fill",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--rw=write",
            "--bs=1m",
            "--iodepth=4",
            &format!("--size={size}"),
            "--output-format=terse",
        ])
        .output()
        .context("running fio")?;
    if !out.status.success() {
        bail!("filling {uri}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

pub(crate) fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub(crate) struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn peer(cmd: &str, args: &[&str], port: u16) -> Result<Peer> {
    let child = Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {cmd} (install Debian's nbdkit and qemu-utils)"))?;
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(Peer(child));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("{cmd} did not start listening on port {port}")
}

pub(crate) fn node_config(dir: &Path, body: &str) -> Result<node::config::NodeConfig> {
    let text = format!("[node]\nnbd = \"127.0.0.1:0\"\napi = \"127.0.0.1:0\"\n{body}");
    let mut cfg =
        node::config::NodeConfig::parse(&text).map_err(|e| BenchError::Failed(e.to_string()))?;
    cfg.node.data_dir = Some(dir.to_path_buf());
    Ok(cfg)
}

fn row(what: &str, ours: f64, peer: f64, unit: &str, target: &str, higher_is_better: bool) {
    let ratio = if higher_is_better {
        ours / peer
    } else {
        peer / ours
    };
    println!("{what:<44} {ours:>12.1} {peer:>12.1} {unit:<6} {ratio:>6.2}   {target}");
}

/// The rows `--only` can pick.
pub const ROWS: [&str; 5] = ["hit-qd32", "hit-qd1", "hit-seq", "miss", "l1"];

/// Runs the benchmark; `seconds` per measurement, `repeat` interleaved rounds per row.
pub fn run(seconds: u32, repeat: u32, only: &[String]) -> Result<()> {
    if let Some(bad) = only.iter().find(|o| !ROWS.contains(&o.as_str())) {
        bail!("--only {bad}: not a row; the rows are {}", ROWS.join(", "));
    }
    let want = |row: &str| only.is_empty() || only.iter().any(|o| o == row);
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let size = "256m";
    println!(
        "data path on loopback, fio's nbd engine for every server, {seconds} s per run, best of {repeat} interleaved runs per side"
    );
    println!(
        "{:<44} {:>12} {:>12} {:<6} {:>6}   target",
        "measure", "lachesis", "peer", "unit", "ratio"
    );

    // Hit path: whole export cached, against nbdkit memory.
    let cfg = node_config(
        dir.path(),
        r#"cache_size = "320MiB"
[[export]]
name = "hot"
file = "hot.img"
size = "256MiB"
[[cache]]
name = "hot"
size = "300MiB"
profile = false
[[rule]]
export = "hot"
cache = "hot"
"#,
    )?;
    let ours = rt.block_on(node::start(&cfg))?;
    let our_uri = format!("nbd://{}/hot", ours.nbd_addr);
    fill(&our_uri, size)?;
    let port = free_port()?;
    let nbdkit = peer(
        "nbdkit",
        &[
            "--foreground",
            "-i",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "memory",
            "256M",
        ],
        port,
    )?;
    let kit_uri = format!("nbd://127.0.0.1:{port}/");
    fill(&kit_uri, size)?;
    let rand4k = |qd| Load {
        rw: "randread",
        bs: "4k",
        qd,
        size,
        seconds,
        repeat,
    };
    use Metric::*;
    if want("hit-qd32") {
        compare(
            "hit: 4 KiB random read QD32 vs nbdkit memory",
            rand4k(32),
            &our_uri,
            &kit_uri,
            KiloIops,
            ">= 0.90",
        )?;
    }
    if want("hit-qd1") {
        compare(
            "hit: 4 KiB random read QD1 latency",
            rand4k(1),
            &our_uri,
            &kit_uri,
            MeanLatencyMicros,
            ">= 0.83 (1.2x)",
        )?;
    }
    let seq = Load {
        rw: "read",
        bs: "1m",
        qd: 4,
        size,
        seconds,
        repeat,
    };
    if want("hit-seq") {
        compare(
            "hit: 1 MiB sequential read QD4",
            seq,
            &our_uri,
            &kit_uri,
            MegabytesPerSec,
            ">= 0.90",
        )?;
    }
    drop(nbdkit);
    if want("l1") {
        // Against this node's hits on the same 64 MiB set, runs interleaved.
        let set64 = Load {
            size: "64m",
            ..rand4k(32)
        };
        hierarchy_row(dir.path(), &rt, set64, &our_uri, repeat)?;
    }
    rt.block_on(ours.shutdown())?;
    if want("miss") {
        miss_rows(dir.path(), &rt, rand4k(32), repeat)?;
    }
    Ok(())
}

/// Cache misses: a 1 MiB cache over a 256 MiB file (the hit section's), against
/// qemu-nbd and nbdkit's file plugin serving the same file.
fn miss_rows(dir: &Path, rt: &tokio::runtime::Runtime, load: Load, repeat: u32) -> Result<()> {
    let cfg = node_config(
        dir,
        r#"cache_size = "8MiB"
[[export]]
name = "cold"
file = "hot.img"
[[cache]]
name = "cold"
size = "1MiB"
profile = false
[[rule]]
export = "cold"
cache = "cold"
"#,
    )?;
    let ours = rt.block_on(node::start(&cfg))?;
    let our_uri = format!("nbd://{}/cold", ours.nbd_addr);
    let file = dir.join("hot.img").display().to_string();
    let qemu_port = free_port()?;
    let _qemu = peer(
        "qemu-nbd",
        &[
            "-f",
            "raw",
            "-b",
            "127.0.0.1",
            "-p",
            &qemu_port.to_string(),
            "-x",
            "cold",
            "--persistent",
            "--shared=8",
            "--cache=writeback",
            &file,
        ],
        qemu_port,
    )?;
    let kit_port = free_port()?;
    let _kit = peer(
        "nbdkit",
        &[
            "--foreground",
            "-i",
            "127.0.0.1",
            "-p",
            &kit_port.to_string(),
            "file",
            &file,
        ],
        kit_port,
    )?;
    let best = interleaved(
        load,
        &[
            &our_uri,
            &format!("nbd://127.0.0.1:{qemu_port}/cold"),
            &format!("nbd://127.0.0.1:{kit_port}/"),
        ],
        Metric::KiloIops,
        repeat,
    )?;
    for (peer_name, b) in [("qemu-nbd", best[1]), ("nbdkit file", best[2])] {
        row(
            &format!("miss: 4 KiB random read QD32 vs {peer_name}"),
            best[0].iops / 1e3,
            b.iops / 1e3,
            "kIOPS",
            ">= 0.90",
            true,
        );
    }
    rt.block_on(ours.shutdown())?;
    Ok(())
}

/// The hierarchy: a level-1 node striped over two level-2 nodes, a 64 MiB working set
/// that fits in level 1, against one node's hits on the same set (`single`, whose runs
/// alternate with the level-1 node's).
fn hierarchy_row(
    dir: &Path,
    rt: &tokio::runtime::Runtime,
    set64: Load,
    single: &str,
    repeat: u32,
) -> Result<()> {
    let l2 = |name: &str| -> Result<node::RunningNode> {
        let cfg = node_config(dir, &format!("cache_size = \"64MiB\"\nlevel = 2\n[[export]]\nname = \"v\"\nfile = \"{name}.img\"\nsize = \"128MiB\"\n"))?;
        Ok(rt.block_on(node::start(&cfg))?)
    };
    let (x, y) = (l2("l2a")?, l2("l2b")?);
    let cfg = node_config(
        dir,
        &format!(
            r#"cache_size = "96MiB"
[[export]]
name = "t"
upstream = ["{}/v", "{}/v"]
[[cache]]
name = "l1"
size = "80MiB"
profile = false
[[rule]]
export = "t"
cache = "l1"
"#,
            x.nbd_addr, y.nbd_addr
        ),
    )?;
    let l1 = rt.block_on(node::start(&cfg))?;
    let uri = format!("nbd://{}/t", l1.nbd_addr);
    fill(&uri, "64m")?;
    let best = interleaved(set64, &[&uri, single], Metric::KiloIops, repeat)?;
    row(
        "L1 over two L2, fitting set vs one node's hits",
        best[0].iops / 1e3,
        best[1].iops / 1e3,
        "kIOPS",
        ">= 0.90",
        true,
    );
    for n in [l1, x, y] {
        rt.block_on(n.shutdown())?;
    }
    Ok(())
}
