//! `lachesis bench writeback`: sustained writes through a write-back cache that is 100 %
//! dirty, against a slow real backend, printed beside the backend's own speed.
//!
//! The backend is nbdkit's file plugin behind its rate filter (`rate=` bits per second,
//! reads and writes together), serving a file. The same fio load (4 KiB random writes at
//! queue depth 16 over an area eight times the cache) runs first straight against nbdkit
//! (the backend's own speed), then against a node whose export is that nbdkit over NBD,
//! with a write-back cache that was filled with dirty blocks first, so every new block
//! written must clean one. Issue 17 asks for at least 80 % of the backend's speed.

use crate::error::Result;
use crate::nbd::{fill, fio, free_port, node_config, peer};

/// What one run measured.
#[derive(Clone, Copy, Debug)]
pub struct WritebackFigures {
    /// Bytes per second written straight to the backend.
    pub backend: f64,
    /// Bytes per second written through the 100 %-dirty cache.
    pub cached: f64,
}

impl WritebackFigures {
    /// Throughput through the cache as a share of the backend's.
    pub fn ratio(&self) -> f64 {
        self.cached / self.backend
    }
}

/// Measures `seconds` of each side with the backend limited to `rate` (nbdkit's syntax,
/// bits per second: `64M`) and a cache of `cache_mib` MiB.
pub fn measure(seconds: u32, rate: &str, cache_mib: u64) -> Result<WritebackFigures> {
    let dir = tempfile::tempdir()?;
    let area = cache_mib * 8;
    let img = dir.path().join("backend.img");
    std::fs::File::create(&img)?.set_len((area + 16) << 20)?;
    let port = free_port()?;
    let _nbdkit = peer(
        "nbdkit",
        &[
            "--foreground",
            "--exit-with-parent",
            "-p",
            &port.to_string(),
            "--filter=rate",
            "file",
            &img.display().to_string(),
            &format!("rate={rate}"),
        ],
        port,
    )?;
    let size = format!("{area}m");
    let backend = fio(
        &format!("nbd://127.0.0.1:{port}/"),
        "randwrite",
        "4k",
        16,
        seconds,
        &size,
    )?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let cfg = node_config(
        dir.path(),
        &format!(
            r#"cache_size = "{cache_mib}MiB"
[[export]]
name = "slow"
upstream = ["127.0.0.1:{port}/"]
[[cache]]
name = "c"
size = "{cache_mib}MiB"
profile = false
[[rule]]
export = "slow"
cache = "c"
"#
        ),
    )?;
    let node = rt.block_on(node::start(&cfg))?;
    let uri = format!("nbd://{}/slow", node.nbd_addr);
    // Every block of the cache dirty before the measurement.
    fill(&uri, &format!("{cache_mib}m"))?;
    let cached = fio(&uri, "randwrite", "4k", 16, seconds, &size)?;
    // The dirty blocks left are not written back: the backend is thrown away.
    drop(node);
    rt.shutdown_background();
    Ok(WritebackFigures {
        backend: backend.bw,
        cached: cached.bw,
    })
}

/// Runs the benchmark and prints the figures beside each other.
pub fn run(seconds: u32, rate: &str, cache_mib: u64) -> Result<WritebackFigures> {
    println!(
        "4 KiB random writes, QD16, over {} MiB; backend: nbdkit file + rate={rate}; cache {cache_mib} MiB, 100 % dirty; {seconds} s per side",
        cache_mib * 8
    );
    let f = measure(seconds, rate, cache_mib)?;
    println!(
        "{:<44} {:>12} {:>12} {:>6}   target",
        "measure", "lachesis", "backend", "ratio"
    );
    println!(
        "{:<44} {:>12.2} {:>12.2} {:>6.2}   >= 0.80",
        "write-back at 100 % dirty (MiB/s)",
        f.cached / (1 << 20) as f64,
        f.backend / (1 << 20) as f64,
        f.ratio()
    );
    Ok(f)
}
