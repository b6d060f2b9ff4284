//! The demo's workload: four tenants driving real NBD I/O against their level-1 exports,
//! closed loop, each with `depth` client connections. `cloud` replays the shared
//! CloudPhysics trace (reads and writes, looped), `db` reads a Zipf hot set with a tight
//! latency SLO (gold), `web` reads a wider Zipf set with an MLMS degradation SLO, `scan`
//! reads sequentially through its whole volume (no SLO). The request streams are
//! deterministic (seeded per tenant and connection), so request `k` of one arm is request
//! `k` of another; each connection logs the latency of every request it completes.

use super::error::{setup, DemoError};
use super::results::DriverLog;
use bytes::Bytes;
use control::Slo;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A tenant of the demo.
pub(super) struct DemoTenant {
    pub(super) name: &'static str,
    pub(super) host: &'static str,
    pub(super) servers: [&'static str; 2],
    pub(super) slo: Option<Slo>,
    pub(super) class: Option<&'static str>,
    pub(super) depth: usize,
}

/// Bytes of each tenant's volume.
pub(super) const VOLUME: u64 = 1 << 30;

/// The demo's tenants, `db` with a p99 SLO of `db_slo_ms`.
pub(super) fn tenants(db_slo_ms: f64) -> Vec<DemoTenant> {
    vec![
        DemoTenant {
            name: "db",
            host: "l1-a",
            servers: ["l2-a", "l2-b"],
            slo: Some(Slo::P99Ms(db_slo_ms)),
            class: Some("gold"),
            depth: 2,
        },
        DemoTenant {
            name: "scan",
            host: "l1-a",
            servers: ["l2-a", "l2-d"],
            slo: None,
            class: None,
            depth: 1,
        },
        DemoTenant {
            name: "cloud",
            host: "l1-b",
            servers: ["l2-b", "l2-c"],
            slo: Some(Slo::Degradation(0.1)),
            class: Some("silver"),
            depth: 2,
        },
        DemoTenant {
            name: "web",
            host: "l1-b",
            servers: ["l2-c", "l2-d"],
            slo: Some(Slo::Degradation(0.2)),
            class: None,
            depth: 2,
        },
    ]
}

/// One request of a generator.
#[derive(Clone, Copy)]
struct Io {
    write: bool,
    offset: u64,
    len: u32,
}

/// Deterministic request streams (SplitMix64 for randomness; Zipf by inverse transform
/// over a precomputed table).
struct Gen {
    kind: Kind,
    state: u64,
    next: u64,
}

enum Kind {
    Zipf(Arc<Vec<f64>>),
    Scan,
    Trace(Arc<Vec<Io>>),
}

impl Gen {
    fn rand(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn next(&mut self) -> Io {
        match &self.kind {
            Kind::Zipf(cdf) => {
                let cdf = cdf.clone();
                let u = (self.rand() >> 11) as f64 / (1u64 << 53) as f64;
                let k = cdf.partition_point(|&c| c < u) as u64;
                // Scatter ranks over the volume so hot blocks are not adjacent.
                let block = k.wrapping_mul(2_654_435_761) % (VOLUME / 4096);
                Io {
                    write: false,
                    offset: block * 4096,
                    len: 4096,
                }
            }
            Kind::Scan => {
                let off = self.next % VOLUME;
                self.next = off + 65536;
                Io {
                    write: false,
                    offset: off,
                    len: 65536,
                }
            }
            Kind::Trace(t) => {
                let io = t[(self.next % t.len() as u64) as usize];
                self.next += 1;
                io
            }
        }
    }
}

fn zipf_cdf(n: usize, alpha: f64) -> Arc<Vec<f64>> {
    let mut w: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(alpha)).collect();
    let total: f64 = w.iter().sum();
    let mut acc = 0.0;
    for x in &mut w {
        acc += *x / total;
        *x = acc;
    }
    Arc::new(w)
}

/// The CloudPhysics trace as block requests on a 1 GiB volume (offsets wrapped, lengths
/// rounded up to 4 KiB, at most 64 KiB).
fn load_trace(path: &Path) -> Result<Arc<Vec<Io>>, DemoError> {
    let text = std::fs::read_to_string(path).map_err(setup("the CloudPhysics trace"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 5 {
            return Err(DemoError::Setup(format!(
                "{}:{}: expected version,time,op,size,lbn",
                path.display(),
                i + 1
            )));
        }
        let write = f[2].eq_ignore_ascii_case("2a");
        let size: u64 = f[3].parse().unwrap_or(4096);
        let lbn: u64 = f[4].parse().unwrap_or(0);
        let offset = (lbn * 512 % VOLUME) / 4096 * 4096;
        let len = size.div_ceil(4096).clamp(1, 16) * 4096;
        let len = len.min(VOLUME - offset) as u32;
        out.push(Io { write, offset, len });
    }
    if out.is_empty() {
        return Err(DemoError::Setup(format!("{}: no requests", path.display())));
    }
    Ok(Arc::new(out))
}

/// Most latencies one driver keeps (a very long `--linger` stops logging, not serving).
const LOG_MAX: usize = 1 << 24;

async fn drive(
    addr: SocketAddr,
    export: &str,
    mut g: Gen,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    log: Arc<Mutex<Vec<f32>>>,
) {
    let client = match nbd::NbdClient::connect(addr, export).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%export, %e, "demo client could not connect");
            return;
        }
    };
    let zeros = Bytes::from(vec![0x5au8; 65536]);
    while !stop.load(Ordering::Relaxed) {
        let io = g.next();
        let t0 = Instant::now();
        let r = if io.write {
            client
                .write(io.offset, zeros.slice(..io.len as usize), false)
                .await
                .map(|_| ())
        } else {
            client.read(io.offset, io.len).await.map(|_| ())
        };
        if let Err(e) = r {
            tracing::warn!(%export, %e, "demo request failed");
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        done.fetch_add(1, Ordering::Relaxed);
        let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
        if l.len() < LOG_MAX {
            l.push(ms as f32);
        }
    }
    let _ = client.disconnect().await;
}

/// The tenants' client connections, running.
pub(super) struct Workload {
    stop: Arc<AtomicBool>,
    drivers: Vec<tokio::task::JoinHandle<()>>,
    counters: HashMap<String, Arc<AtomicU64>>,
    logs: Vec<(String, Arc<Mutex<Vec<f32>>>)>,
}

impl Workload {
    /// Starts `depth` connections per tenant of `ts` to its host's export (`l1_addr` by
    /// host name); `cloud` replays `trace` if given, else a synthetic mixed set.
    pub(super) fn start(
        ts: &[DemoTenant],
        l1_addr: &HashMap<String, SocketAddr>,
        trace: Option<&Path>,
    ) -> Result<Workload, DemoError> {
        let stop = Arc::new(AtomicBool::new(false));
        let trace = match trace {
            Some(p) => Some(load_trace(p)?),
            None => None,
        };
        let mut counters = HashMap::new();
        let mut drivers = Vec::new();
        let mut logs: Vec<(String, Arc<Mutex<Vec<f32>>>)> = Vec::new();
        for (ti, t) in ts.iter().enumerate() {
            let done = Arc::new(AtomicU64::new(0));
            counters.insert(t.name.to_string(), done.clone());
            for k in 0..t.depth {
                let kind = match t.name {
                    "db" => Kind::Zipf(zipf_cdf(3_500, 0.6)),
                    "web" => Kind::Zipf(zipf_cdf(60_000, 0.9)),
                    "scan" => Kind::Scan,
                    _ => match &trace {
                        Some(tr) => Kind::Trace(tr.clone()),
                        None => Kind::Zipf(zipf_cdf(40_000, 0.8)),
                    },
                };
                let g = Gen {
                    kind,
                    state: 0x1234_5678 + (ti as u64) * 1000 + k as u64,
                    next: (k as u64) * 7919 * 4096,
                };
                let log = Arc::new(Mutex::new(Vec::new()));
                logs.push((t.name.to_string(), log.clone()));
                drivers.push(tokio::spawn(drive(
                    l1_addr[t.host],
                    t.name,
                    g,
                    stop.clone(),
                    done.clone(),
                    log,
                )));
            }
        }
        Ok(Workload {
            stop,
            drivers,
            counters,
            logs,
        })
    }

    /// How many requests each connection has logged so far.
    pub(super) fn mark(&self) -> Vec<usize> {
        self.logs
            .iter()
            .map(|(_, l)| l.lock().unwrap_or_else(|p| p.into_inner()).len())
            .collect()
    }

    /// Each connection's log so far.
    pub(super) fn snapshot(&self) -> Vec<DriverLog> {
        self.logs
            .iter()
            .map(|(t, l)| DriverLog {
                tenant: t.clone(),
                latencies_ms: l.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            })
            .collect()
    }

    /// Stops every connection (each after its request in flight) and returns the
    /// requests completed per tenant.
    pub(super) async fn stop(self) -> HashMap<String, u64> {
        self.stop.store(true, Ordering::Relaxed);
        for d in self.drivers {
            let _ = d.await;
        }
        self.counters
            .into_iter()
            .map(|(k, v)| (k, v.load(Ordering::Relaxed)))
            .collect()
    }
}
