//! Serve a sparse in-memory export over NBD, for trying clients and for benchmarks.
//!
//! ```text
//! cargo run --release -p nbd --example memserver -- [ADDR] [SIZE_MIB] [NAME]
//! # defaults: 127.0.0.1:10809 1024 mem
//! qemu-io -f raw nbd://127.0.0.1:10809/mem -c 'write -P 0xab 0 64k'
//! fio --ioengine=nbd --uri=nbd://127.0.0.1:10809/mem --rw=randread --bs=4k ...
//! ```
//! Runs until stdin closes or a line is typed, then drains in-flight requests and exits.

use std::io::BufRead;
use std::sync::Arc;

use nbd::server::ExportMap;
use nbd::MemExport;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:10809".into());
    let mib: u64 = match args.next() {
        Some(s) => s.parse().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("SIZE_MIB {s:?}: {e}"),
            )
        })?,
        None => 1024,
    };
    let name = args.next().unwrap_or_else(|| "mem".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!(
        "serving {mib} MiB export {name:?} on nbd://{}/{name}; press Enter to stop",
        listener.local_addr()?
    );
    let exports = ExportMap::new().with(name, Arc::new(MemExport::new(mib << 20)));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        let _ = tx.send(());
    });
    nbd::Server::builder()
        .build(listener, Arc::new(exports))
        .serve(async move {
            let _ = rx.await;
        })
        .await
}
