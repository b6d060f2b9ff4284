//! Client <-> server round trips: our pipelined client against our server.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use nbd::server::{BoxFuture, Capabilities, Export, ExportMap, ServerConfig};
use nbd::{ClientError, Errno, FileExport, MemExport, NbdClient};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A MemExport whose reads at offsets >= 1 MiB take `delay`, counting calls in flight.
struct SlowExport {
    mem: MemExport,
    delay: Duration,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
}

impl SlowExport {
    fn new(size: u64, delay: Duration) -> Self {
        SlowExport {
            mem: MemExport::new(size),
            delay,
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }
}

impl Export for SlowExport {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn capabilities(&self) -> Capabilities {
        self.mem.capabilities()
    }
    fn read(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<Bytes>> {
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            if offset >= 1 << 20 {
                tokio::time::sleep(self.delay).await;
            }
            let r = self.mem.read(offset, len).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            r
        })
    }
    fn write(&self, offset: u64, data: Bytes, fua: bool) -> BoxFuture<'_, io::Result<()>> {
        self.mem.write(offset, data, fua)
    }
    fn flush(&self) -> BoxFuture<'_, io::Result<()>> {
        self.mem.flush()
    }
    fn trim(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<()>> {
        self.mem.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> BoxFuture<'_, io::Result<()>> {
        self.mem.write_zeroes(offset, len, fua)
    }
}

struct Running {
    addr: std::net::SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<io::Result<()>>,
}

async fn start(exports: ExportMap, config: ServerConfig) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(
        nbd::Server::builder()
            .config(config)
            .build(listener, Arc::new(exports))
            .serve(async move {
                let _ = rx.await;
            }),
    );
    Running { addr, stop, task }
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("serve returns")
            .unwrap()
            .unwrap();
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_read_fua_flush_trim_zeroes() {
    let mem = Arc::new(MemExport::new(8 << 20));
    let srv = start(
        ExportMap::new().with("d", mem.clone()),
        ServerConfig::default(),
    )
    .await;
    let c = NbdClient::connect(srv.addr, "d").await.unwrap();
    assert_eq!(c.size(), 8 << 20);
    assert!(c.flags().has(nbd::TransmissionFlags::CAN_MULTI_CONN));

    let data = pattern(7, 64 * 1024);
    c.write(12_288, data.clone(), false).await.unwrap();
    assert_eq!(&c.read(12_288, 64 * 1024).await.unwrap()[..], &data[..]);
    c.write(0, vec![0xab; 512], true).await.unwrap();
    c.flush().await.unwrap();
    let st = mem.stats();
    assert_eq!((st.writes, st.fua, st.flushes), (2, 1, 1));

    // Trim 16 KiB in the middle of the pattern: zeroes there, pattern around it.
    c.trim(16_384, 16_384).await.unwrap();
    let back = c.read(12_288, 64 * 1024).await.unwrap();
    assert_eq!(&back[..4096], &data[..4096]);
    assert!(back[4096..20_480].iter().all(|&b| b == 0));
    assert_eq!(&back[20_480..], &data[20_480..]);

    // Write zeroes over an unaligned range, with FUA.
    c.write_zeroes(100, 300, true).await.unwrap();
    let back = c.read(0, 512).await.unwrap();
    assert!(back[..100].iter().all(|&b| b == 0xab));
    assert!(back[100..400].iter().all(|&b| b == 0));
    assert!(back[400..].iter().all(|&b| b == 0xab));
    assert_eq!(mem.stats().fua, 2);

    // Errors come back as NBD error values and the connection keeps working.
    assert!(matches!(
        c.read((8 << 20) - 10, 20).await,
        Err(ClientError::Server(Errno::Inval))
    ));
    assert!(matches!(
        c.write(8 << 20, vec![1], false).await,
        Err(ClientError::Server(Errno::NoSpc))
    ));
    assert_eq!(c.read(0, 1).await.unwrap()[0], 0xab);
    c.disconnect().await.unwrap();
    assert!(matches!(c.read(0, 1).await, Err(ClientError::Disconnected)));
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_requests_and_out_of_order_replies() {
    let slow = Arc::new(SlowExport::new(4 << 20, Duration::from_millis(300)));
    let srv = start(
        ExportMap::new().with("d", slow.clone()),
        ServerConfig::default(),
    )
    .await;
    let c = Arc::new(NbdClient::connect(srv.addr, "d").await.unwrap());

    // 256 writes of distinct 4 KiB patterns, all in flight together, then 256 reads.
    let mut tasks = Vec::new();
    for i in 0..256u64 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            c.write(i * 4096, pattern(i as u8, 4096), false).await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let mut tasks = Vec::new();
    for i in 0..256u64 {
        let c = c.clone();
        tasks.push(tokio::spawn(
            async move { (i, c.read(i * 4096, 4096).await) },
        ));
    }
    for t in tasks {
        let (i, r) = t.await.unwrap();
        assert_eq!(&r.unwrap()[..], &pattern(i as u8, 4096)[..], "block {i}");
    }

    // A slow read sent first completes after a fast read sent second.
    let t0 = Instant::now();
    let slow_read = {
        let c = c.clone();
        tokio::spawn(async move {
            let r = c.read(1 << 20, 4096).await;
            (r, t0.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let fast = c.read(0, 4096).await.unwrap();
    let fast_done = t0.elapsed();
    assert_eq!(&fast[..], &pattern(0, 4096)[..]);
    let (slow_r, slow_done) = slow_read.await.unwrap();
    slow_r.unwrap();
    assert!(
        fast_done < Duration::from_millis(200),
        "fast read waited: {fast_done:?}"
    );
    assert!(slow_done >= Duration::from_millis(300));

    // 64 slow reads in flight at once on one connection.
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..64u64 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            c.read((1 << 20) + i * 4096, 4096).await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "not concurrent: {:?}",
        t0.elapsed()
    );
    assert!(slow.peak.load(Ordering::SeqCst) >= 32);
    c.disconnect().await.unwrap();
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_in_flight_requests() {
    let slow = Arc::new(SlowExport::new(4 << 20, Duration::from_millis(300)));
    let srv = start(
        ExportMap::new().with("d", slow.clone()),
        ServerConfig::default(),
    )
    .await;
    let c = Arc::new(NbdClient::connect(srv.addr, "d").await.unwrap());
    c.write((1 << 20) + 8, vec![0x5a; 8], false).await.unwrap();
    let mut reads = Vec::new();
    for _ in 0..8 {
        let c = c.clone();
        reads.push(tokio::spawn(async move { c.read((1 << 20) + 8, 8).await }));
    }
    // Let the reads reach the server, then shut down while they sleep.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(slow.in_flight.load(Ordering::SeqCst), 8);
    let t0 = Instant::now();
    srv.stop().await;
    assert!(
        t0.elapsed() >= Duration::from_millis(200),
        "serve waited for the reads"
    );
    for r in reads {
        assert_eq!(&r.await.unwrap().unwrap()[..], &[0x5a; 8]);
    }
    // The server is gone: new requests fail cleanly.
    assert!(matches!(c.read(0, 1).await, Err(ClientError::Disconnected)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_server_closes_the_connection_quiet_longest_for_a_new_client() {
    for threaded in [true, false] {
        let mem = Arc::new(MemExport::new(1 << 20));
        let cfg = ServerConfig {
            max_connections: 1,
            max_in_flight: 4,
            threaded,
            ..ServerConfig::default()
        };
        let srv = start(ExportMap::new().with("d", mem), cfg).await;
        let first = NbdClient::connect(srv.addr, "d").await.unwrap();
        first.write(0, vec![1, 2, 3], false).await.unwrap();
        let addr = srv.addr;
        let second = tokio::spawn(async move { NbdClient::connect(addr, "d").await });
        // Even while the only connection stays busy (a request every 50 ms, never quiet
        // for the grace), the new client is not locked out: once it has waited the grace
        // the connection with the least recent request is closed for it (issue 35 item 6).
        let t0 = std::time::Instant::now();
        while !second.is_finished() && t0.elapsed() < Duration::from_secs(3) {
            if first.read(0, 3).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let second = tokio::time::timeout(Duration::from_secs(3), second)
            .await
            .expect("second client admitted beside a busy first one")
            .unwrap()
            .unwrap();
        assert!(
            t0.elapsed() >= Duration::from_millis(200),
            "a busy connection was closed before the grace (threaded {threaded})"
        );
        assert_eq!(&second.read(0, 3).await.unwrap()[..], &[1, 2, 3]);
        assert!(first.read(0, 3).await.is_err(), "threaded {threaded}");
        second.disconnect().await.unwrap();
        srv.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_time_out_on_both_paths() {
    for threaded in [true, false] {
        let mem = Arc::new(MemExport::new(1 << 20));
        let cfg = ServerConfig {
            idle_timeout: Some(Duration::from_millis(300)),
            threaded,
            ..ServerConfig::default()
        };
        let srv = start(ExportMap::new().with("d", mem), cfg).await;
        let quiet = NbdClient::connect(srv.addr, "d").await.unwrap();
        let busy = NbdClient::connect(srv.addr, "d").await.unwrap();
        for _ in 0..12 {
            busy.read(0, 1).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(quiet.read(0, 1).await.is_err(), "threaded {threaded}");
        busy.read(0, 1).await.unwrap();
        busy.disconnect().await.unwrap();
        srv.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_export_read_only_and_multi_connection() {
    let mem = Arc::new(MemExport::new(1 << 20));
    let ro = MemExport::new(1 << 20).with_capabilities(Capabilities {
        read_only: true,
        ..Capabilities::default()
    });
    let exports = ExportMap::new()
        .with("d", mem.clone())
        .with("ro", Arc::new(ro));
    let srv = start(exports, ServerConfig::default()).await;
    assert!(matches!(
        NbdClient::connect(srv.addr, "missing").await,
        Err(ClientError::UnknownExport(n)) if n == "missing"
    ));
    let ro = NbdClient::connect(srv.addr, "ro").await.unwrap();
    assert!(ro.flags().has(nbd::TransmissionFlags::READ_ONLY));
    assert!(matches!(
        ro.write(0, vec![1], false).await,
        Err(ClientError::Server(Errno::Perm))
    ));
    assert!(matches!(
        ro.trim(0, 1).await,
        Err(ClientError::Unsupported(_))
    ));

    // Two connections to one export see each other's writes.
    let a = NbdClient::connect(srv.addr, "d").await.unwrap();
    let b = NbdClient::connect(srv.addr, "").await.unwrap();
    a.write(4096, b"shared".to_vec(), true).await.unwrap();
    assert_eq!(&b.read(4096, 6).await.unwrap()[..], b"shared");
    for c in [ro, a, b] {
        c.disconnect().await.unwrap();
    }
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_export_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let sock = dir.path().join("nbd.sock");
    let file = Arc::new(FileExport::create(&img, 2 << 20).unwrap());
    let listener = tokio::net::UnixListener::bind(&sock).unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(
        nbd::Server::builder()
            .build(listener, Arc::new(ExportMap::new().with("f", file)))
            .serve(async move {
                let _ = rx.await;
            }),
    );
    let c = NbdClient::connect_unix(&sock, "f").await.unwrap();
    assert_eq!(c.size(), 2 << 20);
    let data = pattern(3, 128 * 1024);
    c.write(65_536, data.clone(), true).await.unwrap();
    c.write_zeroes(65_536, 1024, false).await.unwrap();
    c.flush().await.unwrap();
    let back = c.read(65_536, 128 * 1024).await.unwrap();
    assert!(back[..1024].iter().all(|&b| b == 0));
    assert_eq!(&back[1024..], &data[1024..]);
    c.disconnect().await.unwrap();
    let _ = stop.send(());
    task.await.unwrap().unwrap();
    // The bytes are in the file itself.
    let on_disk = std::fs::read(&img).unwrap();
    assert_eq!(&on_disk[65_536 + 1024..65_536 + 128 * 1024], &data[1024..]);
}

/// A hand-written old server: refuses NBD_OPT_GO, accepts NBD_OPT_EXPORT_NAME with the 124
/// zero bytes, then answers one read with a fixed pattern.
#[tokio::test]
async fn client_falls_back_to_export_name() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut g = b"NBDMAGICIHAVEOPT".to_vec();
        g.extend_from_slice(&[0, 1]); // FIXED_NEWSTYLE only: zeroes will follow
        s.write_all(&g).await.unwrap();
        let mut flags = [0u8; 4];
        s.read_exact(&mut flags).await.unwrap();
        assert_eq!(
            flags,
            [0, 0, 0, 1],
            "client must not ask for NO_ZEROES here"
        );
        // First option: GO -> ERR_UNSUP.
        let mut h = [0u8; 16];
        s.read_exact(&mut h).await.unwrap();
        assert_eq!(&h[8..12], &[0, 0, 0, 7]);
        let mut body = vec![0u8; u32::from_be_bytes(h[12..16].try_into().unwrap()) as usize];
        s.read_exact(&mut body).await.unwrap();
        let mut rep = vec![0, 3, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9, 0, 0, 0, 7];
        rep.extend_from_slice(&[0x80, 0, 0, 1, 0, 0, 0, 0]);
        s.write_all(&rep).await.unwrap();
        // Second option: EXPORT_NAME "old".
        s.read_exact(&mut h).await.unwrap();
        assert_eq!(&h[8..16], &[0, 0, 0, 1, 0, 0, 0, 3]);
        let mut name = [0u8; 3];
        s.read_exact(&mut name).await.unwrap();
        assert_eq!(&name, b"old");
        let mut info = 65536u64.to_be_bytes().to_vec();
        info.extend_from_slice(&[0, 1]); // HAS_FLAGS only
        info.extend_from_slice(&[0u8; 124]);
        s.write_all(&info).await.unwrap();
        // One read request, answered with 0x77 bytes.
        let mut req = [0u8; 28];
        s.read_exact(&mut req).await.unwrap();
        assert_eq!(&req[4..8], &[0, 0, 0, 0], "flags 0, NBD_CMD_READ");
        assert_eq!(&req[24..28], &[0, 0, 0, 16]);
        let mut r = vec![0x67, 0x44, 0x66, 0x98, 0, 0, 0, 0];
        r.extend_from_slice(&req[8..16]);
        r.extend_from_slice(&[0x77; 16]);
        s.write_all(&r).await.unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).await.unwrap();
        rest
    });
    let c = NbdClient::connect(addr, "old").await.unwrap();
    assert_eq!(c.size(), 65536);
    assert_eq!(c.flags().0, 1);
    assert!(matches!(
        c.flush().await,
        Err(ClientError::Unsupported("flush"))
    ));
    assert!(matches!(
        c.write(0, vec![1], true).await,
        Err(ClientError::Unsupported("FUA"))
    ));
    assert_eq!(&c.read(0, 16).await.unwrap()[..], &[0x77; 16]);
    c.disconnect().await.unwrap();
    // After the read, the client sent exactly one NBD_CMD_DISC and closed.
    let rest = server.await.unwrap();
    assert_eq!(rest.len(), 28);
    assert_eq!(&rest[..8], &[0x25, 0x60, 0x95, 0x13, 0, 0, 0, 2]);
}

mod model {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Write(u64, usize, u8, bool),
        Zero(u64, usize),
        Trim(u64, usize),
        Read(u64, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let off = 0u64..60_000;
        let len = 1usize..6_000;
        prop_oneof![
            (off.clone(), len.clone(), any::<u8>(), any::<bool>())
                .prop_map(|(o, l, b, f)| Op::Write(o, l, b, f)),
            (off.clone(), len.clone()).prop_map(|(o, l)| Op::Zero(o, l)),
            (off.clone(), len.clone()).prop_map(|(o, l)| Op::Trim(o, l)),
            (off, len).prop_map(|(o, l)| Op::Read(o, l)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Any sequence of client operations leaves the export equal to a flat byte array,
        /// and every read returns the model's bytes.
        #[test]
        fn client_server_match_a_flat_model(ops in prop::collection::vec(op(), 1..30)) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                const SIZE: u64 = 64 * 1024;
                let mem = Arc::new(MemExport::new(SIZE));
                let srv = start(ExportMap::new().with("m", mem.clone()), ServerConfig::default()).await;
                let c = NbdClient::connect(srv.addr, "m").await.unwrap();
                let mut model = vec![0u8; SIZE as usize];
                for op in ops {
                    match op {
                        Op::Write(o, l, b, fua) => {
                            let l = l.min((SIZE - o) as usize);
                            c.write(o, vec![b; l], fua).await.unwrap();
                            model[o as usize..o as usize + l].fill(b);
                        }
                        Op::Zero(o, l) if o + l as u64 > SIZE => {
                            let r = c.write_zeroes(o, l as u32, false).await;
                            assert!(matches!(r, Err(ClientError::Server(Errno::NoSpc))));
                        }
                        Op::Trim(o, l) if o + l as u64 > SIZE => {
                            let r = c.trim(o, l as u32).await;
                            assert!(matches!(r, Err(ClientError::Server(Errno::Inval))));
                        }
                        Op::Zero(o, l) => {
                            c.write_zeroes(o, l as u32, false).await.unwrap();
                            model[o as usize..o as usize + l].fill(0);
                        }
                        Op::Trim(o, l) => {
                            c.trim(o, l as u32).await.unwrap();
                            model[o as usize..o as usize + l].fill(0);
                        }
                        Op::Read(o, l) if o + l as u64 > SIZE => {
                            let r = c.read(o, l as u32).await;
                            assert!(matches!(r, Err(ClientError::Server(Errno::Inval))));
                        }
                        Op::Read(o, l) => {
                            let got = c.read(o, l as u32).await.unwrap();
                            assert_eq!(&got[..], &model[o as usize..o as usize + l]);
                        }
                    }
                }
                assert_eq!(&mem.read_sync(0, SIZE as usize)[..], &model[..]);
                c.disconnect().await.unwrap();
                srv.stop().await;
            });
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_budget_bounds_large_requests_in_flight() {
    // 64 MiB of payload per connection: two 32 MiB reads at a time, not four.
    let slow = Arc::new(SlowExport::new(256 << 20, Duration::from_millis(100)));
    let srv = start(
        ExportMap::new().with("d", slow.clone()),
        ServerConfig::default(),
    )
    .await;
    let c = Arc::new(NbdClient::connect(srv.addr, "d").await.unwrap());
    let mut tasks = Vec::new();
    for i in 0..4u64 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            c.read((1 << 20) + i * (32 << 20), 32 << 20)
                .await
                .map(|b| b.len())
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), 32 << 20);
    }
    assert_eq!(slow.peak.load(Ordering::SeqCst), 2);
    c.disconnect().await.unwrap();
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builder_options_reach_the_server() {
    // Defaults: `ServerConfig::default()`, fresh limits sized by it, TLS off.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain = nbd::Server::builder().build(l, Arc::new(ExportMap::new()));
    assert_eq!(*plain.config(), ServerConfig::default());
    assert_eq!(plain.limits().gauge().in_flight_bytes, 0);

    // Given limits are shared, not copied: the caller's gauge sees the server's requests.
    let config = ServerConfig {
        max_connections: 3,
        ..ServerConfig::default()
    };
    let limits = nbd::Limits::for_config(&config);
    let slow = Arc::new(SlowExport::new(1 << 20, Duration::from_millis(300)));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let server = nbd::Server::builder()
        .config(config)
        .limits(limits.clone())
        .tls(None)
        .build(l, Arc::new(ExportMap::new().with("d", slow)));
    assert!(Arc::ptr_eq(server.limits(), &limits));
    assert_eq!(server.config().max_connections, 3);
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = rx.await;
    }));
    let c = NbdClient::connect(addr, "d").await.unwrap();
    assert_eq!(c.read(0, 65536).await.unwrap().len(), 65536);
    let g = limits.gauge();
    assert_eq!(g.connections, 1, "{g:?}");
    assert!(g.peak_in_flight_bytes >= 65536, "{g:?}");
    c.disconnect().await.unwrap();
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}
