//! Which transmission path serves a connection: its own threads while the node has at most
//! `threaded_connections` connections, the async path beyond, and a threaded connection
//! moves to the async path when a newcomer makes the node crowded, keeping every request
//! it had read and every byte it had not yet parsed.

use std::sync::Arc;
use std::time::Duration;

use nbd::server::ServerConfig;
use nbd::{MemExport, NbdClient as Client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{self, until, Server};

const SIZE: u64 = 4 << 20;

fn byte_at(i: u64) -> u8 {
    (i * 13 + 5) as u8
}

async fn start(threaded_connections: usize) -> Server {
    let disk = Arc::new(MemExport::new(SIZE));
    let pattern: Vec<u8> = (0..SIZE).map(byte_at).collect();
    disk.write_sync(0, &pattern);
    let config = ServerConfig {
        threaded_connections,
        ..ServerConfig::default()
    };
    Server::start(config, disk).await
}

fn read_request(handle: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut r = vec![0x25, 0x60, 0x95, 0x13, 0, 0, 0, 0]; // magic, flags 0, NBD_CMD_READ
    r.extend_from_slice(&handle.to_be_bytes());
    r.extend_from_slice(&offset.to_be_bytes());
    r.extend_from_slice(&len.to_be_bytes());
    r
}

async fn read_reply(c: &mut TcpStream, handle: u64, offset: u64, len: usize) {
    let mut h = [0u8; 16];
    c.read_exact(&mut h).await.unwrap();
    assert_eq!(&h[4..8], &[0, 0, 0, 0], "read at {offset} succeeded");
    assert_eq!(u64::from_be_bytes(h[8..16].try_into().unwrap()), handle);
    let mut data = vec![0; len];
    c.read_exact(&mut data).await.unwrap();
    assert!(
        data.iter()
            .enumerate()
            .all(|(i, &b)| b == byte_at(offset + i as u64)),
        "data read at {offset}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_threaded_connection_moves_to_the_async_path_mid_request() {
    let s = start(1).await;
    let mut a = TcpStream::connect(("127.0.0.1", s.port)).await.unwrap();
    common::negotiate_go(&mut a, "d").await;
    a.write_all(&read_request(1, 4096, 4096)).await.unwrap();
    read_reply(&mut a, 1, 4096, 4096).await;
    let g = s.limits.gauge();
    assert_eq!(
        (g.connections, g.threaded_connections),
        (1, 1),
        "alone: threaded"
    );

    // A second client makes the node crowded: it is served async from the start.
    let mut b = TcpStream::connect(("127.0.0.1", s.port)).await.unwrap();
    common::negotiate_go(&mut b, "d").await;
    until(&s.limits, "two connections", |g| g.connections == 2).await;
    assert_eq!(s.limits.gauge().threaded_connections, 1);

    // A's reader is blocked in a read; half a request header wakes it, and it moves with
    // those 10 bytes in hand, before it has a whole request.
    let req = read_request(2, 65536, 8192);
    a.write_all(&req[..10]).await.unwrap();
    until(&s.limits, "A moved", |g| g.threaded_connections == 0).await;
    a.write_all(&req[10..]).await.unwrap();
    read_reply(&mut a, 2, 65536, 8192).await;

    // Both keep being served, with pipelined requests.
    for (c, base) in [(&mut a, 0u64), (&mut b, 1 << 20)] {
        let mut burst = Vec::new();
        for k in 0..16u64 {
            burst.extend_from_slice(&read_request(10 + k, base + k * 4096, 4096));
        }
        c.write_all(&burst).await.unwrap();
        for k in 0..16u64 {
            read_reply(c, 10 + k, base + k * 4096, 4096).await;
        }
    }
    assert_eq!(s.limits.gauge().threaded_connections, 0);

    // Once the crowd has gone, a newcomer gets threads of its own again.
    drop(a);
    drop(b);
    until(&s.limits, "both gone", |g| g.connections == 0).await;
    let c = Client::connect(("127.0.0.1", s.port), "d").await.unwrap();
    let got = c.read(12288, 4096).await.unwrap();
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, &b)| b == byte_at(12288 + i as u64)));
    assert_eq!(s.limits.gauge().threaded_connections, 1);
    c.disconnect().await.unwrap();

    s.stop().await;
}

/// Clients that keep requests in flight while a crowd arrives lose none of them and read
/// back what they wrote, whichever path each request was served on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_clients_lose_nothing_when_the_node_becomes_crowded() {
    let s = start(2).await;
    let mut workers = Vec::new();
    for id in 0..6u64 {
        let port = s.port;
        workers.push(tokio::spawn(async move {
            let c = Arc::new(Client::connect(("127.0.0.1", port), "d").await.unwrap());
            // Each client owns a 64 KiB region: writes its id, then reads the region and
            // the shared pattern beyond the regions, 32 requests at a time.
            let region = (2 << 20) + id * 65536;
            let mut checked = 0u64;
            for round in 0..40u64 {
                let mut tasks = tokio::task::JoinSet::new();
                for k in 0..32u64 {
                    let c = c.clone();
                    tasks.spawn(async move {
                        if k % 4 == 0 {
                            let fill = vec![(id * 40 + round) as u8; 4096];
                            c.write(region + (k / 4) * 4096, fill, false).await.unwrap();
                            let back = c.read(region + (k / 4) * 4096, 4096).await.unwrap();
                            assert!(back.iter().all(|&b| b == (id * 40 + round) as u8));
                        } else {
                            let off = ((round * 32 + k) * 4096) % (2 << 20);
                            let got = c.read(off, 4096).await.unwrap();
                            assert!(got
                                .iter()
                                .enumerate()
                                .all(|(i, &b)| b == byte_at(off + i as u64)));
                        }
                    });
                }
                while let Some(r) = tasks.join_next().await {
                    r.unwrap();
                    checked += 1;
                }
            }
            c.disconnect().await.unwrap();
            checked
        }));
        // Clients arrive one by one: the first two start threaded and move when the
        // third comes.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut total = 0;
    for w in workers {
        total += w.await.unwrap();
    }
    assert_eq!(total, 6 * 40 * 32);
    s.stop().await;
}
