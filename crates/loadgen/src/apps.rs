//! A real application as a tenant (`lachesis bench apps`): PostgreSQL on ext4 on a
//! Lachesis volume, beside a scanning neighbour, under each control scheme asked for, all
//! at once (one machine load for every arm).
//!
//! Each arm is the demo's cluster ([`crate::demo`]'s disks, nodes and controller, stepped
//! every interval) with two tenants on one host and the same two servers: `pg`, whose SLO
//! is to be at most 10 % slower than under fair share, and `scan`, no SLO. Then, as root:
//!
//! 1. `qemu-storage-daemon` connects to `pg`'s NBD export on the level-1 node and exports
//!    it as a FUSE file; `losetup` makes that a block device (buffered, not
//!    `--direct-io=on`: see below); `mkfs.ext4` and `mount` put a file system on it;
//! 2. PostgreSQL (Debian's, as the `postgres` user) gets a cluster there (`initdb`,
//!    `pg_ctl start`, `shared_buffers` 16 MB) in a memory cgroup of `memory_limit` bytes,
//!    so that the kernel's page cache cannot hold the database and its reads reach the
//!    volume; commits are asynchronous (`synchronous_commit = off`), so a transaction
//!    waits for its reads and not for a flush through the stack to the disks (no cache
//!    size changes a flush);
//! 3. `pgbench -i -s SCALE` fills it; `fio` (its `nbd` engine) reads `scan`'s volume
//!    sequentially in 64 KiB requests from then on; after `warmup` (the controller plans
//!    from the tenants' curves), `pgbench -T DURATION` runs the TPC-B-like script with
//!    each transaction's latency logged (`-l`).
//!
//! [`AppResult`] gives each arm's transactions per second, mean and p99 latency (from the
//! per-transaction log), and the neighbour's MB/s; everything is torn down in reverse
//! order, whatever failed. Not root, or a tool missing: [`AppsError`] says which, before
//! anything starts.
//!
//! Why the loop device is buffered: with `--direct-io=on` over qemu-storage-daemon's FUSE
//! export of an NBD disk, `pgbench -i -s 5` fails with "could not create unique index
//! pgbench_accounts_pkey ... is duplicated" every time here (Linux 6.18, QEMU 10.0),
//! also when the NBD server is `nbdkit file` and no Lachesis code is on the path; with
//! the loop device buffered, or with the daemon's `file` driver instead of `nbd`, it
//! passes. So the corruption is in that stack, not in the volume: this benchmark does not
//! use it. The loop device's page cache is charged to PostgreSQL's memory cgroup (since
//! Linux 5.12 the loop driver charges the cgroup that issued the I/O), so `memory_limit`
//! still bounds what the kernel can hold. Lachesis's own data path is checked byte by
//! byte by [`crate::verify`].

use crate::demo::cluster::{self, DemoNode};
use crate::demo::disks::{self, Disks};
use crate::demo::workload::DemoTenant;
use crate::demo::{DemoError, DemoOptions};
use crate::driver::Pace;
use control::Slo;
use controller::RunningController;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where Debian keeps PostgreSQL's programs: `/usr/lib/postgresql/N/bin`, the highest
/// `N` installed (`None`: none is).
fn pg_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((n, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b)
}

/// What `lachesis bench apps` runs.
#[derive(Clone, Debug)]
pub struct AppsOptions {
    /// The control schemes, one arm each, run at the same time.
    pub schemes: Vec<String>,
    /// How long `pgbench` runs.
    pub duration: Duration,
    /// How long the neighbour scans before `pgbench` starts (the controller plans).
    pub warmup: Duration,
    /// `pgbench`'s scale (about 15 MB a unit).
    pub scale: u32,
    /// `pgbench`'s clients.
    pub clients: u32,
    /// Bytes of memory PostgreSQL's processes may hold, page cache included.
    pub memory_limit: u64,
    /// The cluster: interval, caches, disks.
    pub cluster: DemoOptions,
}

impl Default for AppsOptions {
    fn default() -> Self {
        AppsOptions {
            schemes: vec!["fair".into(), "lachesis".into()],
            duration: Duration::from_secs(60),
            warmup: Duration::from_secs(20),
            scale: 5,
            clients: 4,
            memory_limit: 96 << 20,
            cluster: DemoOptions::default(),
        }
    }
}

/// What one arm measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AppResult {
    /// The scheme.
    pub scheme: String,
    /// Transactions `pgbench` completed.
    pub transactions: u64,
    /// Transactions per second (`pgbench`'s, without connection time).
    pub tps: f64,
    /// Mean transaction latency (ms), from the per-transaction log.
    pub mean_ms: f64,
    /// 99th percentile of transaction latency (ms).
    pub p99_ms: f64,
    /// The slowest transaction (ms): one that waited for a FLUSH (a journal commit,
    /// a checkpoint's fsync) waits until every dirty block of the volume, at both levels,
    /// is on the disks.
    pub max_ms: f64,
    /// From the first transaction's start to the last one's end (s): pgbench's run,
    /// including the transactions still running at `-T`'s end.
    pub span_s: f64,
    /// The neighbour's read rate over the same time (MB/s).
    pub neighbour_mbps: f64,
    /// `pg`'s level-1 and level-2 sizes at the end (bytes, as planned).
    pub pg_sizes: (u64, u64),
}

/// Why the benchmark could not run, or failed.
#[derive(Debug, thiserror::Error)]
pub enum AppsError {
    /// It needs root (mounts, loop devices, cgroups, another user).
    #[error("bench apps needs root (mount, losetup, a memory cgroup, runuser); skipped")]
    NotRoot,
    /// A program it needs is missing.
    #[error("`{0}` is missing: apt-get install -y postgresql qemu-utils fio util-linux")]
    Missing(String),
    /// Setting up the cluster.
    #[error(transparent)]
    Cluster(#[from] DemoError),
    /// A step failed.
    #[error("{arm}: {step}: {detail}")]
    Step {
        /// The arm.
        arm: String,
        /// What was being done.
        step: String,
        /// What it said.
        detail: String,
    },
}

/// The two tenants of an arm.
fn tenants() -> Vec<DemoTenant> {
    let t = |name, slo| DemoTenant {
        name,
        host: "l1-a",
        servers: ["l2-a", "l2-b"],
        slo,
        class: None,
        depth: 1,
        pace: Pace::ClosedLoop,
    };
    vec![t("pg", Some(Slo::Degradation(0.1))), t("scan", None)]
}

/// Checks for root and every program used.
pub fn check() -> Result<(), AppsError> {
    // Root: the effective uid in /proc/self/status.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("");
    if uid != "0" {
        return Err(AppsError::NotRoot);
    }
    let bin =
        pg_bin().ok_or_else(|| AppsError::Missing("/usr/lib/postgresql/*/bin/initdb".into()))?;
    let pg = |p: &str| bin.join(p).display().to_string();
    for tool in [
        "qemu-storage-daemon".to_string(),
        "losetup".into(),
        "mkfs.ext4".into(),
        "mount".into(),
        "umount".into(),
        "runuser".into(),
        "fio".into(),
        pg("initdb"),
        pg("pg_ctl"),
        pg("pgbench"),
    ] {
        let found = if tool.starts_with('/') {
            Path::new(&tool).exists()
        } else {
            std::env::var_os("PATH")
                .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(&tool).exists()))
        };
        if !found {
            return Err(AppsError::Missing(tool));
        }
    }
    Ok(())
}

/// One arm's cluster (tenants `pg` and `scan`), stepped every interval by a task until
/// `stop` (also used by `verify`).
pub(crate) struct Arm {
    pub(crate) scheme: String,
    pub(crate) disks: Disks,
    pub(crate) ctl: RunningController,
    pub(crate) nodes: Vec<DemoNode>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) stepping: tokio::task::JoinHandle<()>,
}

pub(crate) async fn start_arm(c: &DemoOptions, scheme: &str, dir: &Path) -> Result<Arm, AppsError> {
    let ts = tenants();
    std::fs::create_dir_all(dir).map_err(|e| step(scheme, "its directory", e))?;
    let disks = disks::start(dir, &cluster::servers(&ts), &ts, c.seek_ms).await?;
    let ctl = cluster::start_controller(c, scheme, dir, &ts).await?;
    let nodes = cluster::start_nodes(c, dir, &ts, disks.addr, &ctl).await?;
    cluster::registered(&ctl, nodes.len()).await?;
    let svc = ctl.service.clone();
    tokio::task::spawn_blocking(move || svc.tick())
        .await
        .map_err(|e| step(scheme, "the first interval", e))?
        .map_err(|e| step(scheme, "the first interval", e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (svc, flag, interval) = (ctl.service.clone(), stop.clone(), c.interval);
    let stepping = tokio::spawn(async move {
        while !flag.load(Ordering::Relaxed) {
            tokio::time::sleep(interval).await;
            let s = svc.clone();
            if let Ok(Err(e)) = tokio::task::spawn_blocking(move || s.tick()).await {
                tracing::warn!(%e, "apps interval failed");
            }
            for a in svc.last().map(|r| r.actions).unwrap_or_default() {
                tracing::info!(node = %a.node, verb = %a.verb, cache = %a.cache, detail = %a.detail, result = %a.result, "apps: the controller changed a node");
            }
        }
    });
    Ok(Arm {
        scheme: scheme.into(),
        disks,
        ctl,
        nodes,
        stop,
        stepping,
    })
}

impl Arm {
    /// The level-1 node's NBD address (where `pg` and `scan` are exported).
    pub(crate) fn level1(&self) -> Result<std::net::SocketAddr, AppsError> {
        self.nodes
            .iter()
            .find(|n| n.level == 1)
            .map(|n| n.node.nbd_addr)
            .ok_or_else(|| step(&self.scheme, "the cluster", "no level-1 node"))
    }

    /// Stops stepping, then the nodes (writing back), the disks and the controller;
    /// returns the intervals the controller kept.
    pub(crate) async fn stop(self) -> Vec<api::controller::IntervalReport> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stepping.await;
        let series = self.ctl.service.series();
        cluster::stop_nodes(self.nodes, Duration::from_secs(60)).await;
        self.disks.stop().await;
        let _ = tokio::time::timeout(Duration::from_secs(3), self.ctl.shutdown()).await;
        series
    }
}

pub(crate) fn step(arm: &str, what: &str, e: impl std::fmt::Display) -> AppsError {
    AppsError::Step {
        arm: arm.into(),
        step: what.into(),
        detail: e.to_string(),
    }
}

/// Runs `cmd`, failing with its stderr unless it exits 0; returns its stdout.
fn run(arm: &str, what: &str, cmd: &mut Command) -> Result<String, AppsError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| step(arm, what, e))?;
    if !out.status.success() {
        return Err(step(
            arm,
            what,
            format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What an arm set up outside the process, undone in reverse order when dropped.
struct Teardown {
    pg_bin: PathBuf,
    daemon: Option<Child>,
    loop_dev: Option<String>,
    mounted: Option<PathBuf>,
    postgres: Option<PathBuf>,
    cgroup: Option<PathBuf>,
    neighbour: Option<Child>,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        if let Some(mut n) = self.neighbour.take() {
            let _ = n.kill();
            let _ = n.wait();
        }
        if let Some(data) = self.postgres.take() {
            let _ = Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(self.pg_bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "-w", "stop"])
                .output();
        }
        if let Some(m) = self.mounted.take() {
            let _ = Command::new("umount").arg(&m).output();
        }
        if let Some(l) = self.loop_dev.take() {
            let _ = Command::new("losetup").args(["-d", &l]).output();
        }
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
        if let Some(c) = self.cgroup.take() {
            let _ = std::fs::remove_dir(&c);
        }
    }
}

/// The transaction latencies of `pgbench -l`'s log files `dir/PREFIX*`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Latencies {
    /// Transactions logged.
    n: usize,
    /// Mean, 99th percentile and maximum (ms).
    mean_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// From the earliest start to the latest end (s).
    span_s: f64,
}

/// Reads the logs: each line is `client transaction latency_us script epoch_s epoch_us`,
/// the epoch being the transaction's end.
fn latencies(dir: &Path, prefix: &str) -> Latencies {
    let mut v: Vec<f64> = Vec::new();
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if !e.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for l in text.lines() {
            let f: Vec<f64> = l
                .split_whitespace()
                .map(|x| x.parse::<f64>().unwrap_or(f64::NAN))
                .collect();
            let (Some(&us), Some(&sec), Some(&usec)) = (f.get(2), f.get(4), f.get(5)) else {
                continue;
            };
            if !(us.is_finite() && sec.is_finite() && usec.is_finite()) {
                continue;
            }
            let end = sec + usec / 1e6;
            first = first.min(end - us / 1e6);
            last = last.max(end);
            v.push(us / 1e3);
        }
    }
    if v.is_empty() {
        return Latencies::default();
    }
    let mean_ms = v.iter().sum::<f64>() / v.len() as f64;
    v.sort_unstable_by(f64::total_cmp);
    let rank = ((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Latencies {
        n: v.len(),
        mean_ms,
        p99_ms: v[rank - 1],
        max_ms: v[v.len() - 1],
        span_s: (last - first).max(0.0),
    }
}

/// `pgbench`'s "tps = X (without initial connection time)".
fn tps_of(out: &str) -> Option<f64> {
    out.lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| l.trim_start_matches("tps = ").split_whitespace().next())
        .and_then(|x| x.parse().ok())
}

/// The blocking part of one arm: the file system, PostgreSQL, the neighbour, pgbench.
fn bench_arm(
    opts: &AppsOptions,
    arm: &str,
    index: usize,
    dir: &Path,
    l1: std::net::SocketAddr,
) -> Result<(Latencies, f64, f64), AppsError> {
    let bin = pg_bin().ok_or_else(|| step(arm, "PostgreSQL", "not installed"))?;
    let mut td = Teardown {
        pg_bin: bin.clone(),
        daemon: None,
        loop_dev: None,
        mounted: None,
        postgres: None,
        cgroup: None,
        neighbour: None,
    };
    let img = dir.join("pg.img");
    std::fs::write(&img, b"").map_err(|e| step(arm, "the FUSE mount point", e))?;
    td.daemon = Some(
        Command::new("qemu-storage-daemon")
            .arg("--blockdev")
            .arg(format!(
                "driver=nbd,server.type=inet,server.host={},server.port={},export=pg,node-name=pg,cache.direct=on",
                l1.ip(),
                l1.port()
            ))
            .arg("--export")
            .arg(format!(
                "type=fuse,id=pg,node-name=pg,mountpoint={},writable=on",
                img.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| step(arm, "qemu-storage-daemon", e))?,
    );
    let t0 = Instant::now();
    while std::fs::metadata(&img).map_or(0, |m| m.len()) == 0 {
        if t0.elapsed() > Duration::from_secs(20) {
            return Err(step(
                arm,
                "qemu-storage-daemon",
                "the FUSE export did not appear",
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let dev = run(
        arm,
        "losetup",
        Command::new("losetup")
            .args(["-f", "--show", "--direct-io=off"])
            .arg(&img),
    )?
    .trim()
    .to_string();
    td.loop_dev = Some(dev.clone());
    run(
        arm,
        "mkfs.ext4",
        Command::new("mkfs.ext4").args([
            "-q",
            "-E",
            "lazy_itable_init=0,lazy_journal_init=0",
            &dev,
        ]),
    )?;
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).map_err(|e| step(arm, "the mount point", e))?;
    run(arm, "mount", Command::new("mount").arg(&dev).arg(&mnt))?;
    td.mounted = Some(mnt.clone());
    let (data, sock, logs) = (mnt.join("data"), dir.join("sock"), dir.join("logs"));
    for d in [&sock, &logs] {
        std::fs::create_dir_all(d).map_err(|e| step(arm, "a directory", e))?;
    }
    run(
        arm,
        "chown",
        Command::new("chown")
            .arg("postgres:postgres")
            .arg(&mnt)
            .arg(&sock)
            .arg(&logs)
            .arg(dir),
    )?;
    let cg = PathBuf::from(format!(
        "/sys/fs/cgroup/memory/lachesis-apps-{}-{index}",
        std::process::id()
    ));
    std::fs::create_dir_all(&cg).map_err(|e| step(arm, "a memory cgroup", e))?;
    td.cgroup = Some(cg.clone());
    std::fs::write(
        cg.join("memory.limit_in_bytes"),
        opts.memory_limit.to_string(),
    )
    .map_err(|e| step(arm, "the cgroup's memory limit", e))?;
    let as_pg = |what: &str, args: &[String], cwd: &Path| -> Result<String, AppsError> {
        // Joins the cgroup, then runs as postgres; its children stay in the cgroup.
        let mut script = format!(
            "echo $$ > {}/cgroup.procs && exec runuser -u postgres --",
            cg.display()
        );
        for a in args {
            script.push_str(" '");
            script.push_str(&a.replace('\'', "'\\''"));
            script.push('\'');
        }
        run(
            arm,
            what,
            Command::new("sh").arg("-c").arg(script).current_dir(cwd),
        )
    };
    let s = |x: &Path| x.display().to_string();
    as_pg(
        "initdb",
        &[
            s(&bin.join("initdb")),
            "-D".into(),
            s(&data),
            "-A".into(),
            "trust".into(),
            "-U".into(),
            "postgres".into(),
            "--no-sync".into(),
        ],
        dir,
    )?;
    let port = (54_320 + index).to_string();
    as_pg(
        "pg_ctl start",
        &[
            s(&bin.join("pg_ctl")),
            "-D".into(),
            s(&data),
            "-l".into(),
            s(&logs.join("postgres.log")),
            "-w".into(),
            "-o".into(),
            format!(
                "-k {} -p {port} -c listen_addresses= -c shared_buffers=16MB -c synchronous_commit=off",
                s(&sock)
            ),
            "start".into(),
        ],
        dir,
    )?;
    td.postgres = Some(data.clone());
    let pgbench = |extra: &[&str]| -> Vec<String> {
        let mut a = vec![
            s(&bin.join("pgbench")),
            "-h".into(),
            s(&sock),
            "-p".into(),
            port.clone(),
        ];
        a.extend(extra.iter().map(|x| x.to_string()));
        a.push("postgres".into());
        a
    };
    as_pg(
        "pgbench -i",
        &pgbench(&["-i", "-q", "-s", &opts.scale.to_string()]),
        &logs,
    )?;
    // The neighbour, from now to the end.
    let scan_for = opts.warmup + opts.duration + Duration::from_secs(30);
    let fio_out = dir.join("fio.json");
    td.neighbour = Some(
        Command::new("fio")
            .args([
                "--name=scan",
                "--ioengine=nbd",
                &format!("--uri=nbd://{}:{}/scan", l1.ip(), l1.port()),
                "--rw=read",
                "--bs=64k",
                "--iodepth=1",
                "--time_based",
                &format!("--runtime={}", scan_for.as_secs()),
                "--output-format=json",
                &format!("--output={}", fio_out.display()),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| step(arm, "fio", e))?,
    );
    std::thread::sleep(opts.warmup);
    let threads = opts.clients.min(2).to_string();
    let out = as_pg(
        "pgbench",
        &pgbench(&[
            "-T",
            &opts.duration.as_secs().max(1).to_string(),
            "-c",
            &opts.clients.to_string(),
            "-j",
            &threads,
            "-l",
            "--log-prefix=pgbench_log",
        ]),
        &logs,
    )?;
    let tps = tps_of(&out).ok_or_else(|| step(arm, "pgbench", format!("no tps in: {out}")))?;
    let lat = latencies(&logs, "pgbench_log");
    // The neighbour's rate so far: stop it, then read its report.
    let mbps = match td.neighbour.take() {
        Some(mut f) => {
            // SIGINT-free stop: fio writes its JSON when killed with SIGTERM.
            let _ = Command::new("kill").arg(f.id().to_string()).output();
            let _ = f.wait();
            neighbour_mbps(&fio_out)
        }
        None => 0.0,
    };
    drop(td);
    Ok((lat, tps, mbps))
}

/// The read bandwidth (MB/s) in fio's JSON report.
fn neighbour_mbps(path: &Path) -> f64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.find('{').unwrap_or(0);
    serde_json::from_str::<serde_json::Value>(&text[start..])
        .ok()
        .and_then(|v| v["jobs"][0]["read"]["bw_bytes"].as_f64())
        .map_or(0.0, |b| b / 1e6)
}

/// Runs every arm at once under `dir` and returns their results in `opts.schemes`' order.
pub async fn run_apps(opts: &AppsOptions, dir: &Path) -> Result<Vec<AppResult>, AppsError> {
    check()?;
    let mut arms = Vec::new();
    for s in &opts.schemes {
        arms.push(start_arm(&opts.cluster, s, &dir.join(s)).await?);
    }
    let mut jobs = Vec::new();
    for (i, a) in arms.iter().enumerate() {
        let l1 = a.level1()?;
        let (o, arm, d) = (opts.clone(), a.scheme.clone(), dir.join(&a.scheme));
        jobs.push(tokio::task::spawn_blocking(move || {
            bench_arm(&o, &arm, i, &d, l1)
        }));
    }
    let mut results = Vec::new();
    for j in jobs {
        results.push(j.await.map_err(|e| step("?", "an arm", e))?);
    }
    let mut out = Vec::new();
    for (a, r) in arms.into_iter().zip(results) {
        let scheme = a.scheme.clone();
        let sizes = a
            .stop()
            .await
            .pop()
            .and_then(|r| r.rows.into_iter().find(|x| x.tenant == "pg"))
            .map_or((0, 0), |x| (x.l1_size, x.l2_size));
        let (lat, tps, neighbour_mbps) = r?;
        out.push(AppResult {
            scheme,
            transactions: lat.n as u64,
            tps,
            mean_ms: lat.mean_ms,
            p99_ms: lat.p99_ms,
            max_ms: lat.max_ms,
            span_s: lat.span_s,
            neighbour_mbps,
            pg_sizes: sizes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgbench_output_and_logs_are_read() {
        let out = "number of transactions actually processed: 120\n\
                   latency average = 33.1 ms\ntps = 120.53 (without initial connection time)\n";
        assert_eq!(tps_of(out), Some(120.53));
        assert_eq!(tps_of("nothing"), None);
        let dir = tempfile::tempdir().unwrap();
        // client, transaction, latency (µs), script, end (epoch s, µs): transaction k
        // takes k ms and ends at 1,700,000,000 s + k × 10 ms.
        let lines: String = (1..=100)
            .map(|k| format!("0 {k} {} 0 1700000000 {}\n", k * 1000, k * 10_000))
            .collect();
        std::fs::write(dir.path().join("pgbench_log.1"), lines).unwrap();
        std::fs::write(dir.path().join("other"), "0 1 999999999 0 0 0\n").unwrap();
        let l = latencies(dir.path(), "pgbench_log");
        assert_eq!(l.n, 100);
        assert!((l.mean_ms - 50.5).abs() < 1e-9);
        assert!((l.p99_ms - 99.0).abs() < 1e-9);
        assert!((l.max_ms - 100.0).abs() < 1e-9);
        // From the first's start (10 ms - 1 ms) to the last's end (1 s).
        assert!((l.span_s - 0.991).abs() < 1e-6, "{l:?}");
        let fio = dir.path().join("fio.json");
        std::fs::write(
            &fio,
            "note: x\n{\"jobs\": [{\"read\": {\"bw_bytes\": 52000000}}]}",
        )
        .unwrap();
        assert!((neighbour_mbps(&fio) - 52.0).abs() < 1e-9);
    }
}
