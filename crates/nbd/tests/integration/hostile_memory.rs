//! Issue 17, "memory and threads": many clients that send reads and never read the
//! replies must not grow the server's memory or threads with their number. Before the
//! node-wide limits, each connection had a 64 MiB budget and up to 128 threads of its own
//! (40 such clients took a node to 4.8 GB RSS and 2,626 threads).
//!
//! The test runs in a process of its own (the harness's process runs this binary again
//! for it alone), so the process's RSS and thread count (`/proc/self/status`) are the
//! server's plus the test's few sockets.
//! Raw sockets negotiate with `NBD_OPT_GO`; every message is spelled out from the protocol
//! document.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nbd::server::{ExportMap, Limits, ServerConfig};
use nbd::{MemExport, NbdClient};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::in_a_process_of_its_own;

const SIZE: u64 = 8 << 20;
const MIB: u64 = 1 << 20;

fn status(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn rss_mib() -> u64 {
    status("VmRSS:") / 1024
}

fn threads() -> u64 {
    status("Threads:")
}

async fn go(addr: std::net::SocketAddr, name: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).await.unwrap();
    assert_eq!(&greeting[..8], b"NBDMAGIC");
    s.write_all(&3u32.to_be_bytes()).await.unwrap();
    let mut opt = b"IHAVEOPT".to_vec();
    opt.extend_from_slice(&7u32.to_be_bytes());
    opt.extend_from_slice(&(4 + name.len() as u32 + 2).to_be_bytes());
    opt.extend_from_slice(&(name.len() as u32).to_be_bytes());
    opt.extend_from_slice(name.as_bytes());
    opt.extend_from_slice(&0u16.to_be_bytes());
    s.write_all(&opt).await.unwrap();
    // Two option replies: NBD_REP_INFO (export) and NBD_REP_ACK.
    for want in [3u32, 1] {
        let mut h = [0u8; 20];
        s.read_exact(&mut h).await.unwrap();
        assert_eq!(u32::from_be_bytes(h[12..16].try_into().unwrap()), want);
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).await.unwrap();
    }
    s
}

fn read_request(handle: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut b = vec![0x25, 0x60, 0x95, 0x13, 0, 0, 0, 0];
    b.extend_from_slice(&handle.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&len.to_be_bytes());
    b
}

/// `hogs` clients each send `reads` reads of 1 MiB and never read a reply; the server's
/// bytes in flight, RSS and threads must stay bounded by the node-wide limits, a new
/// client's small read is answered at once, and once the hogs are closed as idle the
/// budget is whole again and a large read is served.
async fn hogs_stay_bounded(hogs: usize, reads: u64, total: usize, workers: usize) {
    let mem = Arc::new(MemExport::new(SIZE));
    mem.write_sync(0, b"live");
    let exports = Arc::new(ExportMap::new().with("disk", mem.clone()));
    let config = ServerConfig {
        in_flight_total: total,
        max_workers: workers,
        idle_timeout: Some(Duration::from_secs(2)),
        ..ServerConfig::default()
    };
    let limits = Limits::for_config(&config);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        nbd::Server::builder()
            .config(config)
            .limits(limits.clone())
            .build(listener, exports)
            .serve(async move {
                let _ = rx.await;
            }),
    );
    let (rss0, threads0) = (rss_mib(), threads());

    // Each hog's socket stays open (and unread) until `release` is dropped.
    let (release, held) = tokio::sync::watch::channel(());
    let mut socks = Vec::new();
    for _ in 0..hogs {
        let mut s = go(addr, "disk").await;
        let mut flood = Vec::new();
        for i in 0..reads {
            flood.extend_from_slice(&read_request(i, (i % 8) * MIB, MIB as u32));
        }
        // The requests are small; the server stops reading them once the budget is out,
        // and the rest waits in socket buffers.
        let mut held = held.clone();
        socks.push(tokio::spawn(async move {
            let _ = s.write_all(&flood).await;
            let _ = held.changed().await;
            drop(s);
        }));
    }
    // Let the hogs fill what they can.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let g = limits.gauge();
    let (rss, thr) = (rss_mib(), threads());
    println!(
        "{hogs} clients x {reads} reads of 1 MiB never read: in flight {} MiB (peak {} MiB, \
         limit {} MiB + reserve), RSS +{} MiB, threads +{}, workers {}",
        g.in_flight_bytes >> 20,
        g.peak_in_flight_bytes >> 20,
        total >> 20,
        rss.saturating_sub(rss0),
        thr.saturating_sub(threads0),
        g.workers
    );
    let bound = total as u64 + total as u64 / 4;
    assert!(g.peak_in_flight_bytes <= bound, "{g:?}");
    assert!(g.workers <= workers, "{g:?}");
    // One reader thread per connection plus the pool, a few spare for the test's tasks.
    assert!(
        thr.saturating_sub(threads0) <= (hogs + workers + 4) as u64,
        "threads grew from {threads0} to {thr}"
    );
    // The memory of the replies held is bounded by the budget, not by the clients.
    assert!(
        rss.saturating_sub(rss0) <= (bound >> 20) + 64,
        "RSS grew from {rss0} MiB to {rss} MiB"
    );

    // A newcomer's small read (a hit) is answered at once, without any budget.
    let t0 = Instant::now();
    let c = NbdClient::connect(addr, "disk").await.unwrap();
    assert_eq!(&c.read(0, 4).await.unwrap()[..], b"live");
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());

    // The hogs are quiet (their readers wait for budget), so the idle timeout closes them
    // and the budget comes back whole.
    let t0 = Instant::now();
    while limits.gauge().in_flight_bytes > 0 || limits.gauge().connections > 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{:?}",
            limits.gauge()
        );
        // Keep the newcomer from being idle meanwhile.
        c.read(0, 4).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let big = c.read(0, MIB as u32).await.unwrap();
    assert_eq!(big.len() as u64, MIB);
    assert_eq!(&big[..4], b"live");
    c.disconnect().await.unwrap();
    drop(release);
    for s in socks {
        s.await.unwrap();
    }
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("server stops")
        .unwrap()
        .unwrap();
}

/// CI's form: 16 clients, a 16 MiB budget, 8 workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_never_read_replies_cost_bounded_memory_and_threads() {
    if !in_a_process_of_its_own(
        "hostile_memory::clients_that_never_read_replies_cost_bounded_memory_and_threads",
    ) {
        return;
    }
    hogs_stay_bounded(16, 48, 16 << 20, 8).await;
}

/// The form: 64 clients against the default limits (128 MiB, 256 workers).
/// `cargo test -p nbd --release --test integration hostile_memory:: -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the issue's full figure; run by hand (see docs/node.md)"]
async fn sixty_four_clients_that_never_read_replies() {
    if !in_a_process_of_its_own("hostile_memory::sixty_four_clients_that_never_read_replies") {
        return;
    }
    let d = ServerConfig::default();
    hogs_stay_bounded(64, 64, d.in_flight_total, d.max_workers).await;
}
