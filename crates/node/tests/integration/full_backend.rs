//! Issue 17, "write-back under pressure", end to end: a write-back cache in front of a
//! backend that runs out of space. Before: writes kept being acknowledged and evicted
//! dirty blocks piled up without limit, `DELETE` of the cache answered 500, and shutdown
//! dropped the dirty data with one log line and exit 0.
//!
//! The backend is an upstream NBD export served in this process whose writes can be made
//! to fail with ENOSPC (a full disk); the node's clients are real NBD clients.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use nbd::server::{BoxFuture, Capabilities, Export, ExportMap};
use nbd::{Errno, MemExport, NbdClient};
use node::config::NodeConfig;

const BS: usize = 4096;

/// A memory disk that can be made full.
struct Disk {
    mem: MemExport,
    full: AtomicBool,
}

impl Disk {
    fn enospc(&self) -> Option<std::io::Error> {
        self.full
            .load(Ordering::SeqCst)
            .then(|| std::io::Error::from_raw_os_error(28))
    }
}

impl Export for Disk {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn capabilities(&self) -> Capabilities {
        self.mem.capabilities()
    }
    fn read(&self, offset: u64, len: u32) -> BoxFuture<'_, std::io::Result<Bytes>> {
        self.mem.read(offset, len)
    }
    fn write(&self, offset: u64, data: Bytes, fua: bool) -> BoxFuture<'_, std::io::Result<()>> {
        match self.enospc() {
            Some(e) => Box::pin(async move { Err(e) }),
            None => self.mem.write(offset, data, fua),
        }
    }
    fn flush(&self) -> BoxFuture<'_, std::io::Result<()>> {
        match self.enospc() {
            Some(e) => Box::pin(async move { Err(e) }),
            None => self.mem.flush(),
        }
    }
    fn trim(&self, offset: u64, len: u32) -> BoxFuture<'_, std::io::Result<()>> {
        self.mem.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> BoxFuture<'_, std::io::Result<()>> {
        self.mem.write_zeroes(offset, len, fua)
    }
}

fn block(b: u64) -> Vec<u8> {
    vec![(b % 251) as u8 + 1; BS]
}

fn config(upstream: std::net::SocketAddr, dir: &std::path::Path) -> NodeConfig {
    let text = format!(
        r#"
[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "1MiB"

[[export]]
name = "vol"
upstream = ["{upstream}/disk"]

[[cache]]
name = "c"
size = "64KiB"
write_policy = "write-back"

[[rule]]
export = "vol"
cache = "c"
"#
    );
    let mut cfg = NodeConfig::parse(&text).unwrap();
    cfg.node.data_dir = Some(dir.to_path_buf());
    cfg
}

#[test]
fn a_full_backend_is_reported_removal_refused_and_shutdown_keeps_the_data() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let disk = Arc::new(Disk {
        mem: MemExport::new(4 << 20),
        full: AtomicBool::new(false),
    });
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let upstream = listener.local_addr().unwrap();
    let (stop_up, rx) = tokio::sync::oneshot::channel::<()>();
    let exports = Arc::new(ExportMap::new().with("disk", disk.clone()));
    rt.spawn(
        nbd::Server::builder()
            .build(listener, exports)
            .serve(async move {
                let _ = rx.await;
            }),
    );
    let dir = tempfile::tempdir().unwrap();
    let node = rt
        .block_on(node::start(&config(upstream, dir.path())))
        .unwrap();
    let token = node.api_token.secret().to_string();
    let (nbd_addr, api_addr) = (node.nbd_addr, node.api_addr);

    rt.block_on(async {
        let c = NbdClient::connect(nbd_addr, "vol").await.unwrap();
        // The cache holds 16 blocks; 16 fit dirty.
        for b in 0..16u64 {
            c.write(b * BS as u64, Bytes::from(block(b)), false)
                .await
                .unwrap();
        }
        disk.full.store(true, Ordering::SeqCst);
        let mut refused = 0;
        for b in 16..64u64 {
            match c.write(b * BS as u64, Bytes::from(block(b)), false).await {
                Ok(()) => {}
                Err(nbd::ClientError::Server(e)) => {
                    assert!(matches!(e, Errno::NoSpc | Errno::Io), "{e:?}");
                    refused += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        println!("full backend: {refused} of 48 writes past the limit refused");
        assert_eq!(refused, 48, "no write past the dirty limit is acknowledged");
        // What was acknowledged reads back.
        assert_eq!(
            &c.read(5 * BS as u64, BS as u32).await.unwrap()[..],
            &block(5)[..]
        );
        c.disconnect().await.unwrap();
    });

    // DELETE answers 409 with the reason, as JSON.
    let url = format!("http://{api_addr}/v1/caches/c");
    let res = ureq::delete(&url)
        .set("authorization", &format!("Bearer {token}"))
        .call();
    let (status, body) = match res {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(s, r)) => (s, r.into_string().unwrap()),
        Err(e) => panic!("{e}"),
    };
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, 409, "{body}");
    assert!(
        v["error"].as_str().unwrap().contains("dirty block"),
        "{body}"
    );

    // Shutdown fails, naming the recovery file that keeps the 16 blocks.
    let err = rt.block_on(node.shutdown()).unwrap_err().to_string();
    let file = dir.path().join(node::RECOVERY_FILE);
    assert!(err.contains("recovery.bin"), "{err}");
    assert_eq!(cache::recovery::read(&file).unwrap().len(), 16);

    // The disk has room again: the next start replays the file onto it.
    disk.full.store(false, Ordering::SeqCst);
    let node = rt
        .block_on(node::start(&config(upstream, dir.path())))
        .unwrap();
    assert!(!file.exists(), "the replayed file is removed");
    for b in 0..16u64 {
        assert_eq!(
            disk.mem.read_sync(b * BS as u64, BS),
            block(b),
            "block {b} on the backend"
        );
    }
    rt.block_on(node.shutdown()).unwrap();
    let _ = stop_up.send(());
}
