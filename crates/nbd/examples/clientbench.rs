//! Random 4 KiB reads (or writes) through one pipelined [`NbdClient`] connection.
//!
//! ```text
//! cargo run --release -p nbd --example clientbench -- HOST:PORT EXPORT [SECONDS] [DEPTH] [read|write] [BS]
//! ```
//! Point it at `memserver` and at a peer (e.g. `nbdkit memory 1G`) to compare servers
//! with the same client; use `fio --ioengine=nbd` to compare clients.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nbd::NbdClient;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:10809".into());
    let export = args.get(1).cloned().unwrap_or_else(|| "mem".into());
    let secs: u64 = args.get(2).map_or(Ok(3), |s| s.parse())?;
    let depth: usize = args.get(3).map_or(Ok(32), |s| s.parse())?;
    let write = args.get(4).is_some_and(|s| s == "write");
    let bs: u32 = args.get(5).map_or(Ok(4096), |s| s.parse())?;

    let client = Arc::new(NbdClient::connect(addr.as_str(), &export).await?);
    let blocks = client.size() / bs as u64;
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let payload = bytes::Bytes::from(vec![0x5a; bs as usize]);
    let mut tasks = Vec::new();
    for w in 0..depth as u64 {
        let (client, done, payload) = (client.clone(), done.clone(), payload.clone());
        tasks.push(tokio::spawn(async move {
            // xorshift: cheap, deterministic per worker.
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (w + 1);
            while Instant::now() < deadline {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let off = (x % blocks) * bs as u64;
                if write {
                    client.write(off, payload.clone(), false).await?;
                } else {
                    client.read(off, bs).await?;
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, nbd::ClientError>(())
        }));
    }
    let t0 = Instant::now();
    for t in tasks {
        t.await??;
    }
    let el = t0.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed) as f64;
    println!(
        "{} {}B depth {depth}: {:.0} IOPS, {:.1} MiB/s ({:.2} s)",
        if write { "randwrite" } else { "randread" },
        bs,
        n / el,
        n * bs as f64 / el / (1 << 20) as f64,
        el
    );
    client.disconnect().await?;
    Ok(())
}
