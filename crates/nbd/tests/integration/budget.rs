//! Write payloads count in the node-wide budget of bytes in flight from the moment their
//! header is read, before the payload has arrived, on both transmission paths.

use crate::common;

use std::sync::Arc;

use nbd::server::{Limits, ServerConfig};
use nbd::MemExport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SIZE: u64 = 8 << 20;
const WRITE: usize = 2 << 20;

async fn wait_for(limits: &Limits, bytes: u64) {
    common::until(limits, &format!("in flight, expected {bytes}"), |g| {
        g.in_flight_bytes == bytes
    })
    .await;
}

async fn half_sent_write_is_counted(threaded: bool) {
    let disk = Arc::new(MemExport::new(SIZE));
    let config = ServerConfig {
        threaded,
        in_flight_total: 16 << 20,
        ..ServerConfig::default()
    };
    let server = common::Server::start(config, disk.clone()).await;
    let (port, limits) = (server.port, server.limits.clone());
    let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    common::negotiate_go(&mut c, "d").await;
    // A 2 MiB write at 1 MiB: header and half the payload.
    let mut req = vec![0x25, 0x60, 0x95, 0x13, 0, 0, 0, 1];
    req.extend_from_slice(&42u64.to_be_bytes());
    req.extend_from_slice(&(1u64 << 20).to_be_bytes());
    req.extend_from_slice(&(WRITE as u32).to_be_bytes());
    c.write_all(&req).await.unwrap();
    c.write_all(&vec![0x77; WRITE / 2]).await.unwrap();
    // The whole payload is counted while half of it is still on its way.
    wait_for(&limits, WRITE as u64).await;
    c.write_all(&vec![0x77; WRITE / 2]).await.unwrap();
    let mut reply = [0u8; 16];
    c.read_exact(&mut reply).await.unwrap();
    assert_eq!(&reply[4..8], &[0, 0, 0, 0], "write succeeded");
    assert_eq!(u64::from_be_bytes(reply[8..16].try_into().unwrap()), 42);
    wait_for(&limits, 0).await;
    assert!(disk.read_sync(1 << 20, WRITE).iter().all(|&b| b == 0x77));
    assert!(disk.read_sync(0, 1 << 20).iter().all(|&b| b == 0));
    assert!(limits.gauge().peak_in_flight_bytes >= WRITE as u64);
    // A client that leaves halfway through a payload gives its share back.
    c.write_all(&req).await.unwrap();
    c.write_all(&vec![0x11; 4096]).await.unwrap();
    wait_for(&limits, WRITE as u64).await;
    drop(c);
    wait_for(&limits, 0).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threaded_path_counts_write_payloads_before_reading_them() {
    half_sent_write_is_counted(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_path_counts_write_payloads_before_reading_them() {
    half_sent_write_is_counted(false).await;
}
