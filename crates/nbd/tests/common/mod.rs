//! Helpers shared by the nbd crate's integration tests that speak the protocol by hand:
//! a server on a loopback port, polling its gauge, negotiating by hand.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nbd::server::{ExportMap, Limits, LimitsGauge, ServerConfig};
use nbd::MemExport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A server on a loopback port serving one export, `d`.
pub struct Server {
    pub port: u16,
    pub limits: Arc<Limits>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Serves `disk` as export `d` with `config` and limits sized by it.
    pub async fn start(config: ServerConfig, disk: Arc<MemExport>) -> Server {
        let limits = Limits::for_config(&config);
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let exports = Arc::new(ExportMap::new().with("d", disk));
        let task = tokio::spawn(nbd::serve_limited(
            l,
            exports,
            config,
            limits.clone(),
            async {
                let _ = rx.await;
            },
        ));
        Server {
            port,
            limits,
            stop,
            task,
        }
    }

    /// Shuts the server down; it must end without error.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// Wait (at most 5 s) until the server's gauge says `what`.
pub async fn until(limits: &Limits, what: &str, ok: impl Fn(&LimitsGauge) -> bool) {
    let start = Instant::now();
    while !ok(&limits.gauge()) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{what}: {:?}",
            limits.gauge()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Negotiate export `name` by hand (fixed newstyle, `NBD_OPT_GO`), so the test controls
/// every byte sent afterwards.
pub async fn negotiate_go(c: &mut TcpStream, name: &str) {
    let mut greet = [0u8; 18];
    c.read_exact(&mut greet).await.unwrap();
    c.write_all(&3u32.to_be_bytes()).await.unwrap();
    let mut m = b"IHAVEOPT".to_vec();
    m.extend_from_slice(&7u32.to_be_bytes()); // NBD_OPT_GO
    m.extend_from_slice(&(6 + name.len() as u32).to_be_bytes());
    m.extend_from_slice(&(name.len() as u32).to_be_bytes());
    m.extend_from_slice(name.as_bytes());
    m.extend_from_slice(&0u16.to_be_bytes()); // no information requests
    c.write_all(&m).await.unwrap();
    loop {
        let mut h = [0u8; 20];
        c.read_exact(&mut h).await.unwrap();
        let mut d = vec![0; u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize];
        c.read_exact(&mut d).await.unwrap();
        if u32::from_be_bytes(h[12..16].try_into().unwrap()) == 1 {
            return; // NBD_REP_ACK
        }
    }
}
