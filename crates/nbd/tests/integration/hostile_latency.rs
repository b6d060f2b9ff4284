//! Issue 17, "memory and threads": many fio jobs at a deep queue must not multiply the
//! server's threads and must keep read latency on hits low and fair between clients.
//! Before the node-wide worker pool, 64 fio jobs at queue depth 32 made 2,180 threads and
//! a 9.4 s maximum read latency (p99.9 4.7 s).
//!
//! fio (Debian `fio`, with its `nbd` engine) runs against a memory export served in this
//! process: every read is a hit. A missing fio FAILS the test with the package to install.
//! Each test runs in a process of its own (the harness's process runs this binary again
//! for it alone), so the process's thread count is the server's and the runtime's.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use nbd::server::{ExportMap, Limits, ServerConfig};
use nbd::MemExport;

use crate::common::in_a_process_of_its_own;

const SIZE: u64 = 64 << 20;

struct Figures {
    /// Worst p99.9 completion latency of any job, ms.
    worst_p999_ms: f64,
    /// Best p99.9 of any job, ms.
    best_p999_ms: f64,
    /// Slowest and fastest job's IOPS.
    min_iops: f64,
    max_iops: f64,
    total_iops: f64,
    max_lat_ms: f64,
    threads: u64,
}

fn threads() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Run `jobs` fio jobs of 4 KiB random reads at `depth` for `secs` against a server with
/// the default limits; return per-job figures and the process's peak thread count.
fn run(jobs: usize, depth: usize, secs: u64) -> Figures {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mem = Arc::new(MemExport::new(SIZE));
    let pattern: Vec<u8> = (0..SIZE).map(|i| (i * 7 + 1) as u8).collect();
    mem.write_sync(0, &pattern);
    let exports = Arc::new(ExportMap::new().with("disk", mem));
    let config = ServerConfig::default();
    let limits = Limits::for_config(&config);
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = rt.spawn(
        nbd::Server::builder()
            .config(config)
            .limits(limits)
            .build(listener, exports)
            .serve(async move {
                let _ = rx.await;
            }),
    );
    // Sample the thread count while fio runs.
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(threads(), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let out = Command::new("fio")
        .args([
            "--name=hits",
            "--ioengine=nbd",
            &format!("--uri=nbd://127.0.0.1:{port}/disk"),
            "--rw=randread",
            "--bs=4k",
            &format!("--size={SIZE}"),
            &format!("--iodepth={depth}"),
            &format!("--numjobs={jobs}"),
            "--time_based",
            &format!("--runtime={secs}"),
            "--output-format=json",
        ])
        .output()
        .expect("fio must be installed (Debian package `fio`, with the nbd engine)");
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    assert!(
        out.status.success(),
        "fio failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stop.send(()).unwrap();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("server stops")
            .unwrap()
            .unwrap()
    });
    let json = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&json[json.find('{').unwrap()..]).unwrap();
    let jobs_v = v["jobs"].as_array().unwrap();
    assert_eq!(jobs_v.len(), jobs);
    let mut f = Figures {
        worst_p999_ms: 0.0,
        best_p999_ms: f64::MAX,
        min_iops: f64::MAX,
        max_iops: 0.0,
        total_iops: 0.0,
        max_lat_ms: 0.0,
        threads: peak.load(std::sync::atomic::Ordering::Relaxed),
    };
    for j in jobs_v {
        let r = &j["read"];
        let p999 = r["clat_ns"]["percentile"]["99.900000"].as_f64().unwrap() / 1e6;
        let iops = r["iops"].as_f64().unwrap();
        f.worst_p999_ms = f.worst_p999_ms.max(p999);
        f.best_p999_ms = f.best_p999_ms.min(p999);
        f.min_iops = f.min_iops.min(iops);
        f.max_iops = f.max_iops.max(iops);
        f.total_iops += iops;
        f.max_lat_ms = f
            .max_lat_ms
            .max(r["clat_ns"]["max"].as_f64().unwrap() / 1e6);
    }
    println!(
        "{jobs} fio jobs x iodepth {depth}, 4 KiB random read hits, {secs} s: {:.0} IOPS in \
         all; per job IOPS {:.0}..{:.0}, p99.9 {:.2}..{:.2} ms, max {:.1} ms; peak threads \
         of the process {}",
        f.total_iops,
        f.min_iops,
        f.max_iops,
        f.best_p999_ms,
        f.worst_p999_ms,
        f.max_lat_ms,
        f.threads
    );
    f
}

/// CI's form: 16 jobs at depth 16 for 3 s. CI machines are shared (16 fio processes and
/// the server on 2 cores here), so the bound is looser than the 100 ms, which the
/// ignored test below asserts; it still catches the seconds-long stalls of a thread per
/// request.
#[test]
fn deep_queues_of_many_clients_keep_hit_latency_low_and_threads_bounded() {
    if !in_a_process_of_its_own(
        "hostile_latency::deep_queues_of_many_clients_keep_hit_latency_low_and_threads_bounded",
    ) {
        return;
    }
    let f = run(16, 16, 3);
    assert!(f.worst_p999_ms < 500.0, "p99.9 {} ms", f.worst_p999_ms);
    // One reader per connection plus few workers (hits never need one), plus the runtime.
    assert!(f.threads < 16 + 32, "{} threads", f.threads);
    // Shared fairly: with a thread per connection the slowest job got half the fastest
    // one's IOPS (4,168 against 8,198); the runtime's workers keep them within ~10 %.
    assert!(
        f.min_iops >= 0.7 * f.max_iops,
        "per job IOPS {:.0}..{:.0}",
        f.min_iops,
        f.max_iops
    );
}

/// The form: 64 jobs at depth 32 for 10 s.
/// `cargo test -p nbd --release --test integration hostile_latency:: -- --ignored --nocapture`
#[test]
#[ignore = "the issue's full figure; run by hand (see docs/node.md)"]
fn sixty_four_fio_jobs_at_depth_32() {
    if !in_a_process_of_its_own("hostile_latency::sixty_four_fio_jobs_at_depth_32") {
        return;
    }
    let f = run(64, 32, 10);
    assert!(f.worst_p999_ms < 100.0, "p99.9 {} ms", f.worst_p999_ms);
    assert!(
        f.min_iops >= 0.7 * f.max_iops,
        "per job IOPS {:.0}..{:.0}",
        f.min_iops,
        f.max_iops
    );
}
