//! The demo's modelled disks: one NBD server in-process whose exports are sparse
//! temporary files behind a model of a hard disk (one request at a time per disk; a
//! random access costs `seek_ms`, a sequential one 0.1 ms, plus transfer at 200 MB/s),
//! one disk per level-2 node, so tenants sharing a server contend for its disk.

use super::error::{setup, DemoError};
use super::workload::{DemoTenant, VOLUME};
use bytes::Bytes;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

struct Disk {
    queue: tokio::sync::Mutex<u64>,
    seek: Duration,
}

impl Disk {
    async fn serve(&self, offset: u64, len: u64) {
        let mut last = self.queue.lock().await;
        let position = if *last == offset {
            Duration::from_micros(100)
        } else {
            self.seek
        };
        let transfer = Duration::from_secs_f64(len as f64 / 200e6);
        tokio::time::sleep(position + transfer).await;
        *last = offset + len;
    }
}

struct SlowFile {
    file: nbd::FileExport,
    disk: Arc<Disk>,
}

type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl nbd::Export for SlowFile {
    fn size(&self) -> u64 {
        self.file.size()
    }
    fn capabilities(&self) -> nbd::Capabilities {
        self.file.capabilities()
    }
    fn read(&self, offset: u64, len: u32) -> Fut<'_, std::io::Result<Bytes>> {
        Box::pin(async move {
            self.disk.serve(offset, len as u64).await;
            self.file.read(offset, len).await
        })
    }
    fn write(&self, offset: u64, data: Bytes, fua: bool) -> Fut<'_, std::io::Result<()>> {
        Box::pin(async move {
            self.disk.serve(offset, data.len() as u64).await;
            self.file.write(offset, data, fua).await
        })
    }
    fn flush(&self) -> Fut<'_, std::io::Result<()>> {
        self.file.flush()
    }
    fn trim(&self, offset: u64, len: u32) -> Fut<'_, std::io::Result<()>> {
        self.file.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> Fut<'_, std::io::Result<()>> {
        self.file.write_zeroes(offset, len, fua)
    }
}

/// The disks served: where they listen, and how to stop them.
pub(crate) struct Disks {
    /// The NBD server's address; disk `S.T` is level-2 node `S`'s disk of tenant `T`.
    pub addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// One disk per level-2 node in `servers`, with a file of half a volume per tenant it
/// serves (`dir/disk-S-T.img`), served on a loopback port.
pub(crate) async fn start(
    dir: &Path,
    servers: &[&str],
    ts: &[DemoTenant],
    seek_ms: f64,
) -> Result<Disks, DemoError> {
    let mut map = nbd::ExportMap::new();
    for &s in servers {
        let disk = Arc::new(Disk {
            queue: tokio::sync::Mutex::new(u64::MAX),
            seek: Duration::from_secs_f64(seek_ms / 1e3),
        });
        for t in ts.iter().filter(|t| t.servers.contains(&s)) {
            let path = dir.join(format!("disk-{s}-{}.img", t.name));
            let file = nbd::FileExport::create(&path, VOLUME / 2).map_err(setup("a disk file"))?;
            map.insert(
                format!("{s}.{}", t.name),
                Arc::new(SlowFile {
                    file,
                    disk: disk.clone(),
                }),
            );
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(setup("the disks' listener"))?;
    let addr = listener
        .local_addr()
        .map_err(setup("the disks' listener"))?;
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(
        nbd::Server::builder()
            .build(listener, Arc::new(map))
            .serve(async {
                let _ = rx.await;
            }),
    );
    Ok(Disks { addr, stop, task })
}

impl Disks {
    /// Stops serving, waiting at most 30 s for in-flight requests.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(30), self.task).await;
    }
}
