//! Byte-level protocol tests: raw bytes to the server, raw bytes back.
//!
//! Nothing here uses the crate's encoders or its client: every message is spelled out
//! from the protocol document, so a bug shared by our parser and our encoder cannot hide.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use nbd::server::{BoxFuture, Capabilities, Export, ExportMap};
use nbd::MemExport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

const IHAVEOPT: &[u8; 8] = b"IHAVEOPT";
const REPLY_MAGIC: [u8; 8] = [0, 3, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9];
const REQ_MAGIC: [u8; 4] = [0x25, 0x60, 0x95, 0x13];
const SIMPLE_MAGIC: [u8; 4] = [0x67, 0x44, 0x66, 0x98];
const SIZE: u64 = 1 << 20;
/// HAS_FLAGS | SEND_FLUSH | SEND_FUA | SEND_TRIM | SEND_WRITE_ZEROES | CAN_MULTI_CONN.
const RW_FLAGS: u16 = 0x1 | 0x4 | 0x8 | 0x20 | 0x40 | 0x100;
/// HAS_FLAGS | READ_ONLY | SEND_FLUSH | SEND_FUA | CAN_MULTI_CONN.
const RO_FLAGS: u16 = 0x1 | 0x2 | 0x4 | 0x8 | 0x100;

struct Server {
    addr: std::net::SocketAddr,
    mem: Arc<MemExport>,
    /// The memory of `lent-half` and `lent-failing`, [`BIG`] bytes.
    big: Arc<MemExport>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start() -> Server {
        let mem = Arc::new(MemExport::new(SIZE));
        let big = Arc::new(MemExport::new(BIG));
        let ro = MemExport::new(SIZE).with_capabilities(Capabilities {
            read_only: true,
            ..Capabilities::default()
        });
        let exports = ExportMap::new()
            .with("disk", mem.clone())
            .with("ro", Arc::new(ro))
            .with("lent", Arc::new(LentExport::new(mem.clone(), SIZE, SIZE)))
            .with(
                "lent-half",
                Arc::new(LentExport::new(big.clone(), BIG / 2, BIG)),
            )
            .with(
                "lent-failing",
                Arc::new(LentExport::new(big.clone(), BIG, BIG / 2)),
            );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(
            nbd::Server::builder()
                .build(listener, Arc::new(exports))
                .serve(async move {
                    let _ = rx.await;
                }),
        );
        Server {
            addr,
            mem,
            big,
            stop: Some(stop),
            task,
        }
    }

    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("serve returns after shutdown")
            .unwrap()
            .unwrap();
    }
}

/// `disk`'s memory served through [`Export::read_now_borrowed`] (what the cache node does
/// for large hits), as two slices; ranges past `absent_from` are "not in memory" (only
/// `read` serves them) and ranges past `fail_at` fail.
struct LentExport {
    mem: Arc<MemExport>,
    absent_from: u64,
    fail_at: u64,
}

impl LentExport {
    fn new(mem: Arc<MemExport>, absent_from: u64, fail_at: u64) -> Self {
        LentExport {
            mem,
            absent_from,
            fail_at,
        }
    }
}

impl Export for LentExport {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn capabilities(&self) -> Capabilities {
        self.mem.capabilities()
    }
    fn read(&self, offset: u64, len: u32) -> BoxFuture<'_, std::io::Result<Bytes>> {
        self.mem.read(offset, len)
    }
    fn read_now_borrowed(
        &self,
        offset: u64,
        len: usize,
        out: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<std::io::Result<()>> {
        if offset + len as u64 > self.fail_at {
            return Some(Err(std::io::Error::other("medium error")));
        }
        if offset + len as u64 > self.absent_from {
            return None;
        }
        let data = self.mem.read_sync(offset, len);
        let (a, b) = data.split_at(len / 3);
        out(&[a, b]);
        Some(Ok(()))
    }
    fn write(&self, offset: u64, data: Bytes, fua: bool) -> BoxFuture<'_, std::io::Result<()>> {
        self.mem.write(offset, data, fua)
    }
    fn flush(&self) -> BoxFuture<'_, std::io::Result<()>> {
        self.mem.flush()
    }
    fn trim(&self, offset: u64, len: u32) -> BoxFuture<'_, std::io::Result<()>> {
        self.mem.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> BoxFuture<'_, std::io::Result<()>> {
        self.mem.write_zeroes(offset, len, fua)
    }
}

/// Size of `lent-half` and `lent-failing`: room for a read of several lent pieces.
const BIG: u64 = 4 * SIZE;

async fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut b))
        .await
        .expect("server answered in time")
        .expect("read");
    b
}

/// Assert the server closed the connection (no more bytes, EOF).
async fn expect_closed(s: &mut TcpStream) {
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut b))
        .await
        .expect("server closed in time")
        .unwrap_or(0);
    assert_eq!(n, 0, "expected the server to close the connection");
}

/// Connect, check the greeting byte for byte, send client flags.
async fn connect(server: &Server, client_flags: u32) -> TcpStream {
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    let g = read_n(&mut s, 18).await;
    assert_eq!(&g[..8], b"NBDMAGIC");
    assert_eq!(&g[8..16], IHAVEOPT);
    assert_eq!(&g[16..], &[0, 3], "FIXED_NEWSTYLE | NO_ZEROES");
    s.write_all(&client_flags.to_be_bytes()).await.unwrap();
    s
}

async fn send_opt(s: &mut TcpStream, code: u32, data: &[u8]) {
    let mut b = IHAVEOPT.to_vec();
    b.extend_from_slice(&code.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).await.unwrap();
}

/// Read one option reply: (option, reply type, data).
async fn opt_reply(s: &mut TcpStream) -> (u32, u32, Vec<u8>) {
    let h = read_n(s, 20).await;
    assert_eq!(&h[..8], &REPLY_MAGIC);
    let opt = u32::from_be_bytes(h[8..12].try_into().unwrap());
    let typ = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    (opt, typ, read_n(s, len).await)
}

fn info_body(name: &str, requests: &[u16]) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(requests.len() as u16).to_be_bytes());
    for r in requests {
        d.extend_from_slice(&r.to_be_bytes());
    }
    d
}

fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut d = vec![0, 0];
    d.extend_from_slice(&size.to_be_bytes());
    d.extend_from_slice(&flags.to_be_bytes());
    d
}

/// Negotiate with NBD_OPT_GO and return the stream in transmission phase.
async fn go(server: &Server, name: &str) -> TcpStream {
    let mut s = connect(server, 3).await;
    send_opt(&mut s, 7, &info_body(name, &[])).await;
    let (opt, typ, data) = opt_reply(&mut s).await;
    assert_eq!((opt, typ), (7, 3));
    let flags = if name == "ro" { RO_FLAGS } else { RW_FLAGS };
    let size = if name == "lent-half" || name == "lent-failing" {
        BIG
    } else {
        SIZE
    };
    assert_eq!(data, info_export(size, flags));
    assert_eq!(opt_reply(&mut s).await, (7, 1, vec![]));
    s
}

fn request(flags: u16, cmd: u16, handle: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut b = REQ_MAGIC.to_vec();
    b.extend_from_slice(&flags.to_be_bytes());
    b.extend_from_slice(&cmd.to_be_bytes());
    b.extend_from_slice(&handle.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&len.to_be_bytes());
    b
}

/// Read one simple reply header: (error, handle).
async fn reply(s: &mut TcpStream) -> (u32, u64) {
    let h = read_n(s, 16).await;
    assert_eq!(&h[..4], &SIMPLE_MAGIC);
    (
        u32::from_be_bytes(h[4..8].try_into().unwrap()),
        u64::from_be_bytes(h[8..].try_into().unwrap()),
    )
}

#[tokio::test]
async fn list_info_and_go() {
    let server = Server::start().await;
    let mut s = connect(&server, 1).await;
    send_opt(&mut s, 3, &[]).await;
    for name in ["disk", "lent", "lent-failing", "lent-half", "ro"] {
        let mut entry = (name.len() as u32).to_be_bytes().to_vec();
        entry.extend_from_slice(name.as_bytes());
        assert_eq!(opt_reply(&mut s).await, (3, 2, entry));
    }
    assert_eq!(opt_reply(&mut s).await, (3, 1, vec![]));

    // NBD_OPT_INFO with NBD_INFO_BLOCK_SIZE requested.
    send_opt(&mut s, 6, &info_body("disk", &[3])).await;
    assert_eq!(opt_reply(&mut s).await, (6, 3, info_export(SIZE, RW_FLAGS)));
    let mut bs = vec![0, 3, 0, 0, 0, 1, 0, 0, 0x10, 0];
    bs.extend_from_slice(&(1u32 << 25).to_be_bytes());
    assert_eq!(opt_reply(&mut s).await, (6, 3, bs));
    assert_eq!(opt_reply(&mut s).await, (6, 1, vec![]));

    // The default export ("") is the first one added.
    send_opt(&mut s, 7, &info_body("", &[])).await;
    assert_eq!(opt_reply(&mut s).await, (7, 3, info_export(SIZE, RW_FLAGS)));
    assert_eq!(opt_reply(&mut s).await, (7, 1, vec![]));
    // In transmission now: a read of 4 bytes at 0 returns zeroes.
    s.write_all(&request(0, 0, 42, 0, 4)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 42));
    assert_eq!(read_n(&mut s, 4).await, vec![0; 4]);
    server.stop().await;
}

#[tokio::test]
async fn bad_options_are_answered_and_negotiation_goes_on() {
    let server = Server::start().await;
    let mut s = connect(&server, 3).await;
    // Unknown option.
    send_opt(&mut s, 99, b"whatever").await;
    assert_eq!(opt_reply(&mut s).await, (99, 0x8000_0001, vec![]));
    // Structured replies with data: invalid; without: accepted.
    send_opt(&mut s, 8, &[1]).await;
    assert_eq!(opt_reply(&mut s).await, (8, 0x8000_0003, vec![]));
    send_opt(&mut s, 8, &[]).await;
    assert_eq!(opt_reply(&mut s).await, (8, 1, vec![]));
    // STARTTLS: unsupported.
    send_opt(&mut s, 5, &[]).await;
    assert_eq!(opt_reply(&mut s).await, (5, 0x8000_0001, vec![]));
    // Unknown export.
    send_opt(&mut s, 7, &info_body("nope", &[])).await;
    assert_eq!(opt_reply(&mut s).await, (7, 0x8000_0006, vec![]));
    // Name length beyond the option: invalid.
    send_opt(&mut s, 6, &[0, 0, 0, 50, b'x', 0, 0]).await;
    assert_eq!(opt_reply(&mut s).await, (6, 0x8000_0003, vec![]));
    // LIST with data: invalid.
    send_opt(&mut s, 3, &[1]).await;
    assert_eq!(opt_reply(&mut s).await, (3, 0x8000_0003, vec![]));
    // Still negotiating: abort gets an ACK and the server closes.
    send_opt(&mut s, 2, &[]).await;
    assert_eq!(opt_reply(&mut s).await, (2, 1, vec![]));
    expect_closed(&mut s).await;
    server.stop().await;
}

#[tokio::test]
async fn export_name_with_and_without_zeroes() {
    let server = Server::start().await;
    let mut s = connect(&server, 3).await;
    send_opt(&mut s, 1, b"disk").await;
    let r = read_n(&mut s, 10).await;
    assert_eq!(&r[..8], &SIZE.to_be_bytes());
    assert_eq!(&r[8..], &RW_FLAGS.to_be_bytes());
    s.write_all(&request(0, 0, 1, 0, 0)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 1), "no zeroes before the reply");

    let mut s = connect(&server, 1).await;
    send_opt(&mut s, 1, b"ro").await;
    let r = read_n(&mut s, 134).await;
    assert_eq!(&r[8..10], &RO_FLAGS.to_be_bytes());
    assert!(r[10..].iter().all(|&b| b == 0));

    // Unknown export name: the server must close.
    let mut s = connect(&server, 1).await;
    send_opt(&mut s, 1, b"nope").await;
    expect_closed(&mut s).await;
    server.stop().await;
}

#[tokio::test]
async fn fatal_handshake_errors_close_only_that_connection() {
    let server = Server::start().await;
    // Unknown client flag.
    let mut s = connect(&server, 0x10).await;
    expect_closed(&mut s).await;
    // Bad option magic.
    let mut s = connect(&server, 1).await;
    s.write_all(b"IHAVEOPX\0\0\0\x07\0\0\0\0").await.unwrap();
    expect_closed(&mut s).await;
    // Oversize option.
    let mut s = connect(&server, 1).await;
    s.write_all(b"IHAVEOPT\0\0\0\x07\x10\0\0\0").await.unwrap();
    expect_closed(&mut s).await;
    // The server survives.
    let mut s = go(&server, "disk").await;
    s.write_all(&request(0, 3, 5, 0, 0)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 5));
    server.stop().await;
}

async fn commands_byte_for_byte() {
    let server = Server::start().await;
    let mut s = go(&server, "disk").await;
    // WRITE 8 bytes at 4094 (crosses a page), FUA.
    let mut w = request(1, 1, 0x0102_0304_0506_0708, 4094, 8);
    w.extend_from_slice(b"ABCDEFGH");
    s.write_all(&w).await.unwrap();
    let r = read_n(&mut s, 16).await;
    let mut want = SIMPLE_MAGIC.to_vec();
    want.extend_from_slice(&[0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(r, want, "exact reply bytes");
    // READ it back with a margin.
    s.write_all(&request(0, 0, 2, 4092, 12)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 2));
    assert_eq!(read_n(&mut s, 12).await, b"\0\0ABCDEFGH\0\0");
    // FLUSH.
    s.write_all(&request(0, 3, 3, 0, 0)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 3));
    // TRIM the first page: its part of the data reads as zeroes.
    s.write_all(&request(0, 4, 4, 0, 4096)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 4));
    // WRITE_ZEROES with NO_HOLE over the last 2 bytes.
    s.write_all(&request(2, 6, 5, 4100, 2)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 5));
    s.write_all(&request(0, 0, 6, 4092, 12)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 6));
    assert_eq!(read_n(&mut s, 12).await, b"\0\0\0\0CDEF\0\0\0\0");
    let st = server.mem.stats();
    assert_eq!(
        (st.writes, st.fua, st.flushes, st.trims, st.write_zeroes),
        (1, 1, 1, 1, 1)
    );
    server.stop().await;
}

async fn bad_requests_get_errors_and_the_connection_survives() {
    let server = Server::start().await;
    let mut s = go(&server, "disk").await;
    // Read past the end: EINVAL.
    s.write_all(&request(0, 0, 1, SIZE - 2, 4)).await.unwrap();
    assert_eq!(reply(&mut s).await, (22, 1));
    // Offset + length overflowing u64: EINVAL.
    s.write_all(&request(0, 0, 2, u64::MAX, 4)).await.unwrap();
    assert_eq!(reply(&mut s).await, (22, 2));
    // Write past the end (payload still consumed): ENOSPC.
    let mut w = request(0, 1, 3, SIZE - 2, 4);
    w.extend_from_slice(&[9; 4]);
    s.write_all(&w).await.unwrap();
    assert_eq!(reply(&mut s).await, (28, 3));
    // Trim past the end: EINVAL; write-zeroes past the end: ENOSPC.
    s.write_all(&request(0, 4, 4, SIZE, 1)).await.unwrap();
    assert_eq!(reply(&mut s).await, (22, 4));
    s.write_all(&request(0, 6, 5, SIZE, 1)).await.unwrap();
    assert_eq!(reply(&mut s).await, (28, 5));
    // Oversize read (2^25 + 1): EINVAL, no payload.
    s.write_all(&request(0, 0, 6, 0, (1 << 25) + 1))
        .await
        .unwrap();
    assert_eq!(reply(&mut s).await, (22, 6));
    // Unknown command 42 and unknown flag bit 7: EINVAL.
    s.write_all(&request(0, 42, 7, 0, 0)).await.unwrap();
    assert_eq!(reply(&mut s).await, (22, 7));
    s.write_all(&request(0x80, 0, 8, 0, 1)).await.unwrap();
    assert_eq!(reply(&mut s).await, (22, 8));
    // Still alive: a good read works.
    s.write_all(&request(0, 0, 9, 0, 1)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 9));
    assert_eq!(read_n(&mut s, 1).await, vec![0]);
    // Oversize write: EINVAL, then the server hangs up (it cannot skip 2^25+ bytes).
    s.write_all(&request(0, 1, 10, 0, (1 << 25) + 1))
        .await
        .unwrap();
    assert_eq!(reply(&mut s).await, (22, 10));
    expect_closed(&mut s).await;
    // Bad request magic: closed without a reply.
    let mut s = go(&server, "disk").await;
    let mut bad = request(0, 0, 11, 0, 1);
    bad[0] = 0;
    s.write_all(&bad).await.unwrap();
    expect_closed(&mut s).await;
    assert_eq!(server.mem.stats().writes, 0, "nothing was written");
    server.stop().await;
}

async fn read_only_export_refuses_writes_with_eperm() {
    let server = Server::start().await;
    let mut s = go(&server, "ro").await;
    let mut w = request(0, 1, 1, 0, 4);
    w.extend_from_slice(b"nope");
    s.write_all(&w).await.unwrap();
    assert_eq!(reply(&mut s).await, (1, 1));
    // TRIM and WRITE_ZEROES are not advertised on a read-only export: EINVAL. FLUSH is ok.
    s.write_all(&request(0, 4, 2, 0, 4)).await.unwrap();
    assert_eq!(reply(&mut s).await, (22, 2));
    s.write_all(&request(0, 3, 3, 0, 0)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 3));
    s.write_all(&request(0, 0, 4, 0, 4)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 4));
    assert_eq!(read_n(&mut s, 4).await, vec![0; 4]);
    server.stop().await;
}

async fn disconnect_answers_pipelined_requests_first() {
    let server = Server::start().await;
    let mut s = go(&server, "disk").await;
    // One burst: write then disc. The write is answered, then EOF.
    let mut b = request(0, 1, 1, 100, 3);
    b.extend_from_slice(b"xyz");
    b.extend_from_slice(&request(0, 2, 0, 0, 0));
    s.write_all(&b).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 1));
    expect_closed(&mut s).await;
    assert_eq!(&server.mem.read_sync(100, 3)[..], b"xyz");
    server.stop().await;
}

async fn a_write_split_across_many_segments_is_reassembled() {
    let server = Server::start().await;
    let mut s = go(&server, "disk").await;
    let mut w = request(0, 1, 1, 0, 10_000);
    w.extend((0..10_000u32).map(|i| (i % 251) as u8));
    for chunk in w.chunks(7) {
        s.write_all(chunk).await.unwrap();
        s.flush().await.unwrap();
    }
    assert_eq!(reply(&mut s).await, (0, 1));
    let got = server.mem.read_sync(0, 10_000);
    assert!(got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    server.stop().await;
}

#[tokio::test]
async fn shutdown_closes_negotiating_clients_and_returns() {
    let server = Server::start().await;
    let mut idle = connect(&server, 3).await;
    let mut listing = connect(&server, 3).await;
    send_opt(&mut listing, 3, &[]).await;
    assert_eq!(opt_reply(&mut listing).await.1, 2);
    server.stop().await;
    expect_closed(&mut idle).await;
}

#[tokio::test]
async fn silent_clients_time_out_in_negotiation() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let exports = ExportMap::new().with("disk", Arc::new(MemExport::new(SIZE)));
    let config = nbd::ServerConfig {
        max_connections: 1,
        handshake_timeout: Duration::from_millis(100),
        ..nbd::ServerConfig::default()
    };
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(
        nbd::Server::builder()
            .config(config)
            .build(listener, Arc::new(exports))
            .serve(async move {
                let _ = rx.await;
            }),
    );
    // The silent client holds the only slot, then is dropped by the server.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    assert_eq!(&read_n(&mut silent, 18).await[..8], b"NBDMAGIC");
    expect_closed(&mut silent).await;
    // The slot is free again.
    let mut next = TcpStream::connect(addr).await.unwrap();
    assert_eq!(&read_n(&mut next, 18).await[..8], b"NBDMAGIC");
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}

mod garbage {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static PANICS: AtomicUsize = AtomicUsize::new(0);

    /// Bytes that look like requests often enough to reach past the magic check.
    fn blob() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..40),
                (any::<u16>(), 0u16..8, any::<u64>(), any::<u32>()).prop_map(|(f, c, o, l)| {
                    let mut r = request(f, c, 1, o % (2 * SIZE), l % 70_000);
                    if c == 1 {
                        r.extend(vec![0x42; (l % 70_000).min(100) as usize]);
                    }
                    r
                }),
            ],
            1..8,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Whatever a client sends after negotiation, the server neither panics nor stops
        /// serving other clients.
        #[test]
        fn server_survives_garbage(bytes in blob(), go_first: bool) {
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                PANICS.fetch_add(1, Ordering::SeqCst);
                prev(info);
            }));
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let server = Server::start().await;
                let mut s = if go_first {
                    go(&server, "disk").await
                } else {
                    connect(&server, 1).await
                };
                let _ = s.write_all(&bytes).await;
                let _ = s.shutdown().await;
                let mut sink = Vec::new();
                let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut sink)).await;
                // Another client is still served.
                let mut t = go(&server, "disk").await;
                t.write_all(&request(0, 0, 9, 0, 1)).await.unwrap();
                assert_eq!(reply(&mut t).await, (0, 9));
                server.stop().await;
            });
            let _ = std::panic::take_hook();
            prop_assert_eq!(PANICS.load(Ordering::SeqCst), 0);
        }
    }
}

async fn a_client_that_never_reads_replies_stalls_only_itself() {
    let server = Server::start().await;
    server.mem.write_sync(0, b"live");
    // A floods 1 MiB reads (far more reply bytes than socket buffers and the connection's
    // 64 MiB budget hold) and never reads a reply.
    let mut a = go(&server, "disk").await;
    let mut flood = Vec::new();
    for i in 0..200u64 {
        flood.extend_from_slice(&request(0, 0, i, 0, SIZE as u32));
    }
    a.write_all(&flood).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // B is served as usual meanwhile.
    let mut b = go(&server, "disk").await;
    let t0 = std::time::Instant::now();
    b.write_all(&request(0, 0, 1, 0, 4)).await.unwrap();
    assert_eq!(reply(&mut b).await, (0, 1));
    assert_eq!(read_n(&mut b, 4).await, b"live");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // A leaves without reading; its blocked threads end and the server stops promptly.
    drop(a);
    b.write_all(&request(0, 2, 2, 0, 0)).await.unwrap();
    expect_closed(&mut b).await;
    server.stop().await;
}

async fn large_reads_lent_by_the_export_arrive_whole() {
    let server = Server::start().await;
    let data: Vec<u8> = (0..BIG as usize)
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect();
    server.mem.write_sync(0, &data[..SIZE as usize]);
    server.big.write_sync(0, &data);
    // Far more reply bytes than the socket buffers hold, none read for a while: later
    // pieces find the socket full and go out after the export lets go. On `lent-half`
    // the pieces past the middle are no longer "in memory" and come the slow way.
    read_back_lent(&server, "lent", SIZE, &data).await;
    read_back_lent(&server, "lent-half", BIG, &data).await;
    server.stop().await;
}

async fn read_back_lent(server: &Server, name: &str, size: u64, data: &[u8]) {
    let mut s = go(server, name).await;
    let reads: Vec<(u64, u32)> = (0..24u64)
        .map(|i| match i % 3 {
            0 => (0, size as u32),
            1 => (4096 * i + 17, 200_000),
            _ => (size - 300_001, 300_001),
        })
        .collect();
    let mut burst = Vec::new();
    for (h, &(off, len)) in reads.iter().enumerate() {
        burst.extend_from_slice(&request(0, 0, h as u64, off, len));
    }
    s.write_all(&burst).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut seen = vec![false; reads.len()];
    for _ in 0..reads.len() {
        let (err, h) = reply(&mut s).await;
        assert_eq!(err, 0, "handle {h}");
        let (off, len) = reads[h as usize];
        let got = read_n(&mut s, len as usize).await;
        assert!(
            got == data[off as usize..off as usize + len as usize],
            "{name}, handle {h}: bytes differ"
        );
        seen[h as usize] = true;
    }
    assert!(seen.iter().all(|&x| x));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lent_read_that_fails_midway_closes_only_its_connection() {
    let server = Server::start().await;
    server.mem.write_sync(0, b"live");
    let half = BIG / 2;
    let mut s = go(&server, "lent-failing").await;
    // Failing before any data is handed over: an error reply, and the connection goes on.
    s.write_all(&request(0, 0, 1, half, 256 << 10))
        .await
        .unwrap();
    assert_eq!(reply(&mut s).await, (5, 1), "EIO");
    s.write_all(&request(0, 0, 2, 0, 4)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 2));
    assert_eq!(read_n(&mut s, 4).await, [0; 4]);
    // Failing after the first lent pieces went out: the reply cannot be completed, so
    // the connection is closed (short of the promised bytes)...
    s.write_all(&request(0, 0, 3, 0, BIG as u32)).await.unwrap();
    assert_eq!(reply(&mut s).await, (0, 3));
    let mut got = 0usize;
    let mut b = vec![0u8; 64 << 10];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut b))
            .await
            .expect("server closed in time")
            .unwrap_or(0);
        if n == 0 {
            break;
        }
        got += n;
    }
    assert!(
        got >= half as usize / 2 && got < BIG as usize,
        "{got} bytes of a reply that failed"
    );
    // ...and the server goes on serving others.
    let mut t = go(&server, "lent").await;
    t.write_all(&request(0, 0, 4, 0, 4)).await.unwrap();
    assert_eq!(reply(&mut t).await, (0, 4));
    assert_eq!(read_n(&mut t, 4).await, b"live");
    drop(t);
    server.stop().await;
}

/// Runs a transmission-phase test on both paths: a current-thread runtime keeps
/// connections as async tasks, a multi-threaded one gives each its own thread.
macro_rules! on_both_paths {
    ($($name:ident),* $(,)?) => {
        mod async_path {
            $(#[tokio::test]
            async fn $name() {
                super::$name().await
            })*
        }
        mod threaded_path {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name().await
            })*
        }
    };
}

on_both_paths!(
    commands_byte_for_byte,
    bad_requests_get_errors_and_the_connection_survives,
    read_only_export_refuses_writes_with_eperm,
    disconnect_answers_pipelined_requests_first,
    a_write_split_across_many_segments_is_reassembled,
    a_client_that_never_reads_replies_stalls_only_itself,
    large_reads_lent_by_the_export_arrive_whole,
);
