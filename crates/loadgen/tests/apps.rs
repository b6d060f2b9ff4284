//! PostgreSQL as a tenant, end to end (`loadgen::apps`): pgbench on ext4 on a Lachesis
//! volume (qemu-storage-daemon's FUSE export of the node's NBD export, a loop device,
//! mkfs.ext4, mount) beside fio scanning a second volume, under fair share and under
//! `lachesis` at once. Ignored by default: it needs root (mounts, loop devices, a memory
//! cgroup, `runuser`) and Debian's postgresql, qemu-utils and fio; `.ci/run` runs it as
//! root with `--ignored`, where it fails (does not skip) if any of that is missing.

use loadgen::apps::{run_apps, AppsOptions};
use std::time::Duration;

#[test]
#[ignore = "needs root, postgresql, qemu-utils and fio; .ci/run runs it as root"]
fn pgbench_on_a_lachesis_volume_beside_a_scanner_under_fair_share_and_lachesis() {
    let opts = AppsOptions {
        duration: Duration::from_secs(20),
        warmup: Duration::from_secs(10),
        scale: 2,
        ..AppsOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rows = rt
        .block_on(run_apps(&opts, dir.path()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        rows.iter().map(|r| r.scheme.as_str()).collect::<Vec<_>>(),
        ["fair", "lachesis"]
    );
    for r in &rows {
        println!("{r:?}");
        // Transactions ran through the whole stack and were timed one by one.
        assert!(r.transactions >= 50, "{r:?}");
        // The mean may exceed the 99th percentile: a transaction waiting for a FLUSH (a
        // journal commit, a checkpoint's fsync) waits for every dirty block of both levels
        // to reach the disks, seconds here, so the few that do weigh on the mean.
        assert!(r.tps > 0.0 && r.mean_ms > 0.0, "{r:?}");
        assert!(r.p99_ms > 0.0 && r.max_ms >= r.p99_ms, "{r:?}");
        // pgbench's rate agrees with its per-transaction log over the log's own span (at
        // least the 20 s asked for; longer when transactions were still waiting at the end).
        assert!(r.span_s >= 19.0, "{r:?}");
        let logged = r.transactions as f64 / r.span_s;
        assert!((r.tps / logged - 1.0).abs() < 0.3, "{r:?}");
        // The neighbour read its volume all along, and pg had a partition at each level.
        assert!(r.neighbour_mbps > 1.0, "{r:?}");
        assert!(r.pg_sizes.0 > 0 && r.pg_sizes.1 > 0, "{r:?}");
    }
}
