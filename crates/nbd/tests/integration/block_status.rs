//! Structured replies and `base:allocation` block status, byte for byte over a raw socket,
//! on both transmission paths (a current-thread runtime serves connections as async
//! tasks, a multi-threaded one on threads of their own).
//!
//! Covers the negotiation (`NBD_OPT_STRUCTURED_REPLY`, `LIST_META_CONTEXT`,
//! `SET_META_CONTEXT`), reads framed as `OFFSET_DATA` chunks, errors as `ERROR` chunks,
//! block status of a sparse memory export, and the bad block status requests: past the
//! end, zero length, without a selected context, without structured replies; none of
//! them ends the connection.

use std::sync::Arc;
use std::time::Duration;

use nbd::server::{BoxFuture, Export, ExportMap};
use nbd::MemExport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

const SIZE: u64 = 1 << 20;
const IHAVEOPT: &[u8; 8] = b"IHAVEOPT";
const REQ_MAGIC: [u8; 4] = [0x25, 0x60, 0x95, 0x13];
const SIMPLE_MAGIC: [u8; 4] = [0x67, 0x44, 0x66, 0x98];
const CHUNK_MAGIC: [u8; 4] = [0x66, 0x8e, 0x33, 0xef];
const ACK: u32 = 1;
const META_CONTEXT: u32 = 4;
const ERR_INVALID: u32 = (1 << 31) | 3;
const ERR_UNKNOWN: u32 = (1 << 31) | 6;
const READ: u16 = 0;
const WRITE: u16 = 1;
const BLOCK_STATUS: u16 = 7;
const REQ_ONE: u16 = 1 << 3;
const EINVAL: u32 = 22;
const HOLE_ZERO: u32 = 3;
const TYPE_NONE: u16 = 0;
const TYPE_OFFSET_DATA: u16 = 1;
const TYPE_BLOCK_STATUS: u16 = 5;
const TYPE_ERROR: u16 = (1 << 15) | 1;

struct Server {
    addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// `disk` holds 4 KiB of 0x5a at 64 KiB and 8 KiB of 0xa5 at 512 KiB, else nothing.
    async fn start() -> Server {
        let mem = Arc::new(MemExport::new(SIZE));
        mem.write_sync(64 << 10, &[0x5a; 4096]);
        mem.write_sync(512 << 10, &[0xa5; 8192]);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, rx) = oneshot::channel::<()>();
        let exports = ExportMap::new()
            .with("disk", mem.clone())
            .with("lent", Arc::new(Lending(mem)));
        let task = tokio::spawn(
            nbd::Server::builder()
                .build(listener, Arc::new(exports))
                .serve(async move {
                    let _ = rx.await;
                }),
        );
        Server {
            addr,
            stop: Some(stop),
            task,
        }
    }

    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("serve returns after shutdown")
            .unwrap()
            .unwrap();
    }
}

/// `disk`'s memory lent in two slices ([`Export::read_now_borrowed`], what the cache
/// node does for large hits), so the threaded path sends large reads from it directly.
struct Lending(Arc<MemExport>);

impl Export for Lending {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn capabilities(&self) -> nbd::Capabilities {
        self.0.capabilities()
    }
    fn read(&self, offset: u64, len: u32) -> BoxFuture<'_, std::io::Result<bytes::Bytes>> {
        self.0.read(offset, len)
    }
    fn read_now_borrowed(
        &self,
        offset: u64,
        len: usize,
        out: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<std::io::Result<()>> {
        let data = self.0.read_sync(offset, len);
        let (a, b) = data.split_at(len / 2);
        out(&[a, b]);
        Some(Ok(()))
    }
    fn write(
        &self,
        offset: u64,
        data: bytes::Bytes,
        fua: bool,
    ) -> BoxFuture<'_, std::io::Result<()>> {
        self.0.write(offset, data, fua)
    }
    fn flush(&self) -> BoxFuture<'_, std::io::Result<()>> {
        self.0.flush()
    }
    fn trim(&self, offset: u64, len: u32) -> BoxFuture<'_, std::io::Result<()>> {
        self.0.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> BoxFuture<'_, std::io::Result<()>> {
        self.0.write_zeroes(offset, len, fua)
    }
}

async fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut b))
        .await
        .expect("server answered in time")
        .expect("read");
    b
}

async fn connect(server: &Server) -> TcpStream {
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    let g = read_n(&mut s, 18).await;
    assert_eq!(&g[..8], b"NBDMAGIC");
    s.write_all(&3u32.to_be_bytes()).await.unwrap();
    s
}

async fn send_opt(s: &mut TcpStream, code: u32, data: &[u8]) {
    let mut b = IHAVEOPT.to_vec();
    b.extend_from_slice(&code.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).await.unwrap();
}

/// One option reply: (option, reply type, data).
async fn opt_reply(s: &mut TcpStream) -> (u32, u32, Vec<u8>) {
    let h = read_n(s, 20).await;
    let opt = u32::from_be_bytes(h[8..12].try_into().unwrap());
    let typ = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    (opt, typ, read_n(s, len).await)
}

fn meta_body(name: &str, queries: &[&str]) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(queries.len() as u32).to_be_bytes());
    for q in queries {
        d.extend_from_slice(&(q.len() as u32).to_be_bytes());
        d.extend_from_slice(q.as_bytes());
    }
    d
}

fn go_body(name: &str) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&0u16.to_be_bytes());
    d
}

async fn go(s: &mut TcpStream, name: &str) {
    send_opt(s, 7, &go_body(name)).await;
    assert_eq!(opt_reply(s).await.1, 3, "REP_INFO");
    assert_eq!(opt_reply(s).await.1, ACK);
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

/// A structured chunk: (flags, type, handle, payload).
async fn chunk(s: &mut TcpStream) -> (u16, u16, u64, Vec<u8>) {
    let h = read_n(s, 20).await;
    assert_eq!(&h[..4], &CHUNK_MAGIC, "a structured reply chunk: {h:02x?}");
    let flags = u16::from_be_bytes(h[4..6].try_into().unwrap());
    let kind = u16::from_be_bytes(h[6..8].try_into().unwrap());
    let handle = u64::from_be_bytes(h[8..16].try_into().unwrap());
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    (flags, kind, handle, read_n(s, len).await)
}

/// The error value of an `ERROR` chunk for `handle`.
async fn error_chunk(s: &mut TcpStream, handle: u64) -> u32 {
    let (flags, kind, h, p) = chunk(s).await;
    assert_eq!((flags, kind, h), (1, TYPE_ERROR, handle));
    assert_eq!(p.len(), 6);
    u32::from_be_bytes(p[..4].try_into().unwrap())
}

/// Decode a block status payload: (context id, [(length, flags)]).
fn extents(p: &[u8]) -> (u32, Vec<(u32, u32)>) {
    assert_eq!((p.len() - 4) % 8, 0);
    let id = u32::from_be_bytes(p[..4].try_into().unwrap());
    let e = p[4..]
        .chunks_exact(8)
        .map(|d| {
            (
                u32::from_be_bytes(d[..4].try_into().unwrap()),
                u32::from_be_bytes(d[4..].try_into().unwrap()),
            )
        })
        .collect();
    (id, e)
}

/// Negotiate structured replies and `base:allocation` on `disk`, then enter it; returns
/// the context id the server gave.
async fn negotiated(server: &Server) -> (TcpStream, u32) {
    let mut s = connect(server).await;
    send_opt(&mut s, 8, &[]).await;
    assert_eq!(opt_reply(&mut s).await, (8, ACK, vec![]));
    send_opt(&mut s, 10, &meta_body("disk", &["base:allocation"])).await;
    let (opt, typ, data) = opt_reply(&mut s).await;
    assert_eq!((opt, typ), (10, META_CONTEXT));
    assert_eq!(&data[4..], b"base:allocation");
    let id = u32::from_be_bytes(data[..4].try_into().unwrap());
    assert_ne!(id, 0);
    assert_eq!(opt_reply(&mut s).await, (10, ACK, vec![]));
    go(&mut s, "disk").await;
    (s, id)
}

async fn negotiation_and_block_status() {
    let server = Server::start().await;

    // Meta contexts before structured replies: invalid; listing and selecting after.
    let mut s = connect(&server).await;
    send_opt(&mut s, 9, &meta_body("disk", &[])).await;
    assert_eq!(opt_reply(&mut s).await, (9, ERR_INVALID, vec![]));
    send_opt(&mut s, 10, &meta_body("disk", &["base:allocation"])).await;
    assert_eq!(opt_reply(&mut s).await, (10, ERR_INVALID, vec![]));
    send_opt(&mut s, 8, &[]).await;
    assert_eq!(opt_reply(&mut s).await, (8, ACK, vec![]));
    for queries in [
        &[][..],
        &["base:"][..],
        &["x-other:thing", "base:allocation"][..],
    ] {
        send_opt(&mut s, 9, &meta_body("disk", queries)).await;
        let (_, typ, data) = opt_reply(&mut s).await;
        assert_eq!(typ, META_CONTEXT, "{queries:?}");
        assert_eq!(data, b"\0\0\0\0base:allocation");
        assert_eq!(opt_reply(&mut s).await, (9, ACK, vec![]));
    }
    // Unknown namespaces and leaves are ignored; unknown exports are errors.
    send_opt(&mut s, 9, &meta_body("disk", &["qemu:dirty-bitmap:x"])).await;
    assert_eq!(opt_reply(&mut s).await, (9, ACK, vec![]));
    send_opt(&mut s, 10, &meta_body("nope", &["base:allocation"])).await;
    assert_eq!(opt_reply(&mut s).await, (10, ERR_UNKNOWN, vec![]));
    // A garbled body is invalid and negotiation goes on.
    send_opt(&mut s, 10, &[0, 0, 0, 9, b'd']).await;
    assert_eq!(opt_reply(&mut s).await, (10, ERR_INVALID, vec![]));
    drop(s);

    let (mut s, id) = negotiated(&server).await;
    // The whole export: hole, 4 KiB of data at 64 KiB, hole, 8 KiB at 512 KiB, hole.
    s.write_all(&request(0, BLOCK_STATUS, 1, 0, SIZE as u32))
        .await
        .unwrap();
    let (flags, kind, handle, p) = chunk(&mut s).await;
    assert_eq!((flags, kind, handle), (1, TYPE_BLOCK_STATUS, 1));
    let (ctx, e) = extents(&p);
    assert_eq!(ctx, id);
    assert_eq!(
        e,
        vec![
            (64 << 10, HOLE_ZERO),
            (4096, 0),
            ((512 << 10) - (68 << 10), HOLE_ZERO),
            (8192, 0),
            ((SIZE as u32) - (520 << 10), HOLE_ZERO),
        ]
    );
    // REQ_ONE: one extent, no longer than the request.
    s.write_all(&request(REQ_ONE, BLOCK_STATUS, 2, 60 << 10, 1 << 20 >> 4))
        .await
        .unwrap();
    let (_, kind, _, p) = chunk(&mut s).await;
    assert_eq!(kind, TYPE_BLOCK_STATUS);
    assert_eq!(extents(&p).1, vec![(4096, HOLE_ZERO)]);

    // Bad block status requests: errors, and the connection goes on.
    s.write_all(&request(0, BLOCK_STATUS, 3, SIZE - 4096, 8192))
        .await
        .unwrap();
    assert_eq!(error_chunk(&mut s, 3).await, EINVAL, "past the end");
    s.write_all(&request(0, BLOCK_STATUS, 4, 0, 0))
        .await
        .unwrap();
    assert_eq!(error_chunk(&mut s, 4).await, EINVAL, "zero length");
    s.write_all(&request(1 << 4, BLOCK_STATUS, 5, 0, 4096))
        .await
        .unwrap();
    assert_eq!(error_chunk(&mut s, 5).await, EINVAL, "unknown flag");

    // Reads are OFFSET_DATA chunks with the bytes; a bad read is an ERROR chunk.
    s.write_all(&request(0, READ, 6, (64 << 10) - 2, 6))
        .await
        .unwrap();
    let (flags, kind, handle, p) = chunk(&mut s).await;
    assert_eq!((flags, kind, handle), (1, TYPE_OFFSET_DATA, 6));
    assert_eq!(&p[..8], &((64u64 << 10) - 2).to_be_bytes());
    assert_eq!(&p[8..], &[0, 0, 0x5a, 0x5a, 0x5a, 0x5a]);
    s.write_all(&request(0, READ, 7, SIZE, 1)).await.unwrap();
    assert_eq!(error_chunk(&mut s, 7).await, EINVAL);
    // A large read (handed off on the threaded path) is one OFFSET_DATA chunk too.
    s.write_all(&request(0, READ, 8, 512 << 10, 256 << 10))
        .await
        .unwrap();
    let (_, kind, _, p) = chunk(&mut s).await;
    assert_eq!(kind, TYPE_OFFSET_DATA);
    assert_eq!(p.len(), 8 + (256 << 10));
    assert!(p[8..8 + 8192].iter().all(|&b| b == 0xa5));
    assert!(p[8 + 8192..].iter().all(|&b| b == 0));
    // A zero-length read: NONE.
    s.write_all(&request(0, READ, 9, 0, 0)).await.unwrap();
    assert_eq!(chunk(&mut s).await, (1, TYPE_NONE, 9, vec![]));
    // A write's success may stay a simple reply; block status sees its data at once.
    let mut w = request(0, WRITE, 10, 256 << 10, 4096);
    w.extend_from_slice(&[1u8; 4096]);
    s.write_all(&w).await.unwrap();
    let r = read_n(&mut s, 16).await;
    assert_eq!(&r[..4], &SIMPLE_MAGIC);
    assert_eq!(&r[4..8], &[0, 0, 0, 0]);
    s.write_all(&request(0, BLOCK_STATUS, 11, 252 << 10, 12 << 10))
        .await
        .unwrap();
    let (_, _, _, p) = chunk(&mut s).await;
    assert_eq!(
        extents(&p).1,
        vec![(4096, HOLE_ZERO), (4096, 0), (4096, HOLE_ZERO)]
    );
    drop(s);

    // Structured replies without a selected context: block status is EINVAL.
    let mut s = connect(&server).await;
    send_opt(&mut s, 8, &[]).await;
    assert_eq!(opt_reply(&mut s).await.1, ACK);
    // Selected for another name than the export entered: not selected.
    send_opt(&mut s, 10, &meta_body("", &["base:allocation"])).await;
    assert_eq!(opt_reply(&mut s).await.1, META_CONTEXT);
    assert_eq!(opt_reply(&mut s).await.1, ACK);
    go(&mut s, "disk").await;
    s.write_all(&request(0, BLOCK_STATUS, 12, 0, 4096))
        .await
        .unwrap();
    assert_eq!(error_chunk(&mut s, 12).await, EINVAL);
    drop(s);

    // No structured replies at all: a simple EINVAL, and reads stay simple.
    let mut s = connect(&server).await;
    go(&mut s, "disk").await;
    s.write_all(&request(0, BLOCK_STATUS, 13, 0, 4096))
        .await
        .unwrap();
    let r = read_n(&mut s, 16).await;
    assert_eq!(&r[..4], &SIMPLE_MAGIC);
    assert_eq!(u32::from_be_bytes(r[4..8].try_into().unwrap()), EINVAL);
    s.write_all(&request(0, READ, 14, 64 << 10, 4))
        .await
        .unwrap();
    let r = read_n(&mut s, 20).await;
    assert_eq!(&r[..4], &SIMPLE_MAGIC);
    assert_eq!(&r[16..], &[0x5a; 4]);
    drop(s);

    // A large read lent by the export (sent from its memory on the threaded path) is one
    // OFFSET_DATA chunk as well; the export without block status says "all data".
    let mut s = connect(&server).await;
    send_opt(&mut s, 8, &[]).await;
    assert_eq!(opt_reply(&mut s).await.1, ACK);
    send_opt(&mut s, 10, &meta_body("lent", &["base:allocation"])).await;
    assert_eq!(opt_reply(&mut s).await.1, META_CONTEXT);
    assert_eq!(opt_reply(&mut s).await.1, ACK);
    go(&mut s, "lent").await;
    s.write_all(&request(0, READ, 15, 508 << 10, 512 << 10))
        .await
        .unwrap();
    let (flags, kind, handle, p) = chunk(&mut s).await;
    assert_eq!((flags, kind, handle), (1, TYPE_OFFSET_DATA, 15));
    assert_eq!(&p[..8], &(508u64 << 10).to_be_bytes());
    assert_eq!(p.len(), 8 + (512 << 10));
    assert!(p[8..8 + 4096].iter().all(|&b| b == 0));
    assert!(p[8 + 4096..8 + 12288].iter().all(|&b| b == 0xa5));
    assert!(p[8 + 12288..].iter().all(|&b| b == 0));
    s.write_all(&request(0, BLOCK_STATUS, 16, 0, 8192))
        .await
        .unwrap();
    let (_, kind, _, p) = chunk(&mut s).await;
    assert_eq!(kind, TYPE_BLOCK_STATUS);
    assert_eq!(extents(&p).1, vec![(8192, 0)]);
    drop(s);
    server.stop().await;
}

#[tokio::test]
async fn async_path_speaks_structured_replies_and_block_status() {
    negotiation_and_block_status().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threaded_path_speaks_structured_replies_and_block_status() {
    negotiation_and_block_status().await;
}
