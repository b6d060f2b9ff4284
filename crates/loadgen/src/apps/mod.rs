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
//!
//! This file holds the options, results, errors, the checks and the run of every arm;
//! beside it are one arm's cluster (`arm`), the blocking benchmark on it (`bench`), and
//! the reading of what the tools report (`reports`).

mod arm;
mod bench;
mod reports;

pub(crate) use arm::start_arm;

use crate::demo::{DemoError, DemoOptions};
use bench::bench_arm;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

pub(crate) fn step(arm: &str, what: &str, e: impl std::fmt::Display) -> AppsError {
    AppsError::Step {
        arm: arm.into(),
        step: what.into(),
        detail: e.to_string(),
    }
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
mod tests;
