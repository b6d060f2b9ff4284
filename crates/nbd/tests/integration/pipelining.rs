//! The client's pipelining: many requests on the wire on one connection, replies matched
//! by handle whatever their order.
//!
//! * Byte by byte against a fake server on an in-memory pipe, which reads every request
//!   before answering any and answers them in reverse order (one with an error), then
//!   sends a reply to a handle nobody asked for.
//! * Against a real `nbdkit memory` behind its `delay` filter (5 ms a read): reads sent
//!   together finish in about one delay, reads sent one by one in one delay each. A
//!   missing `nbdkit` FAILS the test with the package to install.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nbd::{ClientError, Errno, NbdClient};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

const SIZE: u64 = 1 << 20;

/// What the fake server saw of one request.
#[derive(Debug)]
struct Seen {
    command: u16,
    handle: u64,
    offset: u64,
    length: u32,
}

/// The byte a fake or real disk holds at `offset` in these tests' pattern.
fn byte_at(offset: u64) -> u8 {
    (offset / 512 % 251) as u8
}

/// The fake server's half of a fixed-newstyle negotiation, raw: greeting, client flags,
/// `NBD_OPT_GO` answered with the export's info and an ACK.
async fn fake_negotiation(s: &mut DuplexStream) {
    let mut greeting = Vec::new();
    greeting.extend_from_slice(b"NBDMAGIC");
    greeting.extend_from_slice(b"IHAVEOPT");
    greeting.extend_from_slice(&3u16.to_be_bytes()); // FIXED_NEWSTYLE | NO_ZEROES
    s.write_all(&greeting).await.unwrap();
    assert_eq!(s.read_u32().await.unwrap(), 3, "client flags");
    assert_eq!(s.read_u64().await.unwrap(), 0x4948_4156_454F_5054); // IHAVEOPT
    assert_eq!(s.read_u32().await.unwrap(), 7, "NBD_OPT_GO");
    let len = s.read_u32().await.unwrap();
    let mut body = vec![0; len as usize];
    s.read_exact(&mut body).await.unwrap();
    // NBD_REP_INFO: NBD_INFO_EXPORT, size, HAS_FLAGS | SEND_FLUSH.
    let mut info = Vec::new();
    info.extend_from_slice(&0u16.to_be_bytes());
    info.extend_from_slice(&SIZE.to_be_bytes());
    info.extend_from_slice(&5u16.to_be_bytes());
    for (reply, data) in [(3u32, &info[..]), (1u32, &[][..])] {
        let mut r = Vec::new();
        r.extend_from_slice(&0x0003_e889_0455_65a9u64.to_be_bytes());
        r.extend_from_slice(&7u32.to_be_bytes());
        r.extend_from_slice(&reply.to_be_bytes());
        r.extend_from_slice(&(data.len() as u32).to_be_bytes());
        r.extend_from_slice(data);
        s.write_all(&r).await.unwrap();
    }
}

/// Reads one 28-byte request header.
async fn read_request(s: &mut DuplexStream) -> Seen {
    assert_eq!(s.read_u32().await.unwrap(), 0x2560_9513, "request magic");
    let _flags = s.read_u16().await.unwrap();
    let command = s.read_u16().await.unwrap();
    let handle = s.read_u64().await.unwrap();
    let offset = s.read_u64().await.unwrap();
    let length = s.read_u32().await.unwrap();
    Seen {
        command,
        handle,
        offset,
        length,
    }
}

/// Writes a simple reply: magic, error, handle, then `data`.
async fn write_reply(s: &mut DuplexStream, handle: u64, error: u32, data: &[u8]) {
    let mut r = Vec::with_capacity(16 + data.len());
    r.extend_from_slice(&0x6744_6698u32.to_be_bytes());
    r.extend_from_slice(&error.to_be_bytes());
    r.extend_from_slice(&handle.to_be_bytes());
    r.extend_from_slice(data);
    s.write_all(&r).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_out_of_order_reach_their_own_requests() {
    let (client_end, mut server) = tokio::io::duplex(1 << 20);
    let (r, w) = tokio::io::split(client_end);
    let (c, ()) = tokio::join!(
        NbdClient::handshake(r, w, "x"),
        fake_negotiation(&mut server)
    );
    let c = c.unwrap();
    assert_eq!(c.size(), SIZE);

    // Twelve reads of different offsets and lengths, sent together.
    let ranges: Vec<(u64, u32)> = (0..12u64)
        .map(|i| (i * 8192 + 512, 512 * (1 + i as u32 % 4)))
        .collect();
    let failing = ranges[5].0;
    let fake = async {
        // Every request is on the wire before the first reply: read them all first.
        let mut seen = Vec::new();
        for _ in 0..ranges.len() {
            seen.push(read_request(&mut server).await);
        }
        let handles: HashSet<u64> = seen.iter().map(|s| s.handle).collect();
        assert_eq!(handles.len(), seen.len(), "handles are distinct: {seen:?}");
        assert!(seen.iter().all(|s| s.command == 0), "all reads: {seen:?}");
        let mut asked: Vec<(u64, u32)> = seen.iter().map(|s| (s.offset, s.length)).collect();
        asked.sort_unstable();
        assert_eq!(asked, ranges);
        // Answer last request first; the one at `failing` gets EIO and no data.
        for s in seen.iter().rev() {
            if s.offset == failing {
                write_reply(&mut server, s.handle, 5, &[]).await;
            } else {
                let data: Vec<u8> = (0..s.length as u64)
                    .map(|i| byte_at(s.offset + i))
                    .collect();
                write_reply(&mut server, s.handle, 0, &data).await;
            }
        }
        seen
    };
    let (got, seen) = tokio::join!(c.read_many(&ranges), fake);
    assert_eq!(got.len(), ranges.len());
    for (&(offset, len), r) in ranges.iter().zip(&got) {
        if offset == failing {
            assert!(
                matches!(r, Err(ClientError::Server(Errno::Io))),
                "{offset}: {r:?}"
            );
            continue;
        }
        let data = r.as_ref().unwrap();
        assert_eq!(data.len(), len as usize, "{offset}");
        let want: Vec<u8> = (0..len as u64).map(|i| byte_at(offset + i)).collect();
        assert_eq!(&data[..], &want[..], "read at {offset} got another's bytes");
    }

    // Started one at a time and awaited in reverse: each still gets its own reply.
    let a = c.start_read(0, 512).await.unwrap();
    let b = c.start_read(4096, 1024).await.unwrap();
    let (ra, rb) = (
        read_request(&mut server).await,
        read_request(&mut server).await,
    );
    assert_eq!((ra.offset, rb.offset, rb.length), (0, 4096, 1024));
    write_reply(&mut server, rb.handle, 0, &[7; 1024]).await;
    write_reply(&mut server, ra.handle, 0, &[9; 512]).await;
    assert_eq!(&b.reply().await.unwrap()[..], &[7; 1024][..]);
    assert_eq!(&a.reply().await.unwrap()[..], &[9; 512][..]);

    // A reply to a handle no request has (a spent one) is a protocol error: the
    // connection ends and a request waiting on it fails.
    let waiting = c.start_read(0, 512).await.unwrap();
    let w = read_request(&mut server).await;
    assert_ne!(w.handle, seen[0].handle);
    write_reply(&mut server, seen[0].handle, 0, &[0; 512]).await;
    assert!(matches!(
        waiting.reply().await,
        Err(ClientError::Disconnected)
    ));
    tokio::time::timeout(Duration::from_secs(5), c.closed())
        .await
        .expect("the client notices the broken connection");
    assert!(matches!(
        c.read(0, 512).await,
        Err(ClientError::Disconnected)
    ));
}

/// `nbdkit memory` behind the delay filter on a Unix socket, ended on drop.
struct Nbdkit {
    child: Child,
    socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Nbdkit {
    fn start(rdelay_ms: u32, threads: u32) -> Nbdkit {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("nbdkit.sock");
        let child = Command::new("nbdkit")
            .args(["--foreground", "--exit-with-parent", "--threads"])
            .arg(threads.to_string())
            .arg("--unix")
            .arg(&socket)
            .args(["--filter=delay", "memory"])
            .arg(format!("size={SIZE}"))
            .arg(format!("rdelay={rdelay_ms}ms"))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run nbdkit ({e}): install it with `apt-get install -y nbdkit`")
            });
        let start = Instant::now();
        while !socket.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "nbdkit did not create {}",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Nbdkit {
            child,
            socket,
            _dir: dir,
        }
    }
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_sent_together_to_nbdkit_take_one_delay_not_one_each() {
    const DELAY: Duration = Duration::from_millis(5);
    const N: usize = 32;
    let kit = Nbdkit::start(DELAY.as_millis() as u32, 64);
    let c = NbdClient::connect_unix(&kit.socket, "").await.unwrap();
    assert_eq!(c.size(), SIZE);
    let data: Vec<u8> = (0..SIZE).map(byte_at).collect();
    c.write(0, data.clone(), false).await.unwrap();
    let ranges: Vec<(u64, u32)> = (0..N as u64).map(|i| (i * 16384 + 512, 4096)).collect();

    // One by one: each read waits out its own delay.
    let t0 = Instant::now();
    for &(offset, len) in &ranges {
        let got = c.read(offset, len).await.unwrap();
        assert_eq!(&got[..], &data[offset as usize..][..len as usize]);
    }
    let one_by_one = t0.elapsed();
    assert!(one_by_one >= DELAY * N as u32, "{one_by_one:?}");

    // Together, on the same connection: the delays overlap. Best of five, so a burst of
    // load from a neighbour on a shared machine does not decide it.
    let mut together = Duration::MAX;
    for _ in 0..5 {
        let t0 = Instant::now();
        let got = c.read_many(&ranges).await;
        together = together.min(t0.elapsed());
        for (&(offset, len), r) in ranges.iter().zip(got) {
            assert_eq!(&r.unwrap()[..], &data[offset as usize..][..len as usize]);
        }
    }
    eprintln!(
        "{N} reads at {DELAY:?} each: one by one {one_by_one:?}, together {together:?} (best of 5)"
    );
    assert!(together >= DELAY, "{together:?}");
    assert!(
        together < DELAY * 4,
        "{N} reads sent together took {together:?}, not about one delay of {DELAY:?}"
    );

    // More reads than the client keeps on the wire at once still all complete: places
    // are given back as replies arrive, not as the caller reads them.
    let many: Vec<(u64, u32)> = (0..(nbd::client::MAX_IN_FLIGHT as u64 * 2 + 7))
        .map(|i| (i * 4096 % SIZE, 512))
        .collect();
    let got = tokio::time::timeout(Duration::from_secs(30), c.read_many(&many))
        .await
        .expect("read_many of more than MAX_IN_FLIGHT reads completes");
    for (&(offset, len), r) in many.iter().zip(got) {
        assert_eq!(&r.unwrap()[..], &data[offset as usize..][..len as usize]);
    }
    c.disconnect().await.unwrap();
}
