//! The demo's workload: four tenants driving real NBD I/O against their level-1 exports,
//! closed loop, each with `depth` client connections ([`crate::driver`]). `cloud` replays
//! the shared CloudPhysics trace (reads and writes, looped; [`crate::trace_file`]), `db`
//! reads a Zipf hot set at a rate of its own ([`DB_RATE`]) with a tight tail-latency SLO
//! (gold), `web` reads a wider Zipf set
//! with an MLMS degradation SLO, `scan` reads sequentially through its whole volume (no
//! SLO). The request streams ([`crate::stream`]) are deterministic (seeded per tenant and
//! connection), so request `k` of one arm is request `k` of another; each connection logs
//! the latency of every request it completes.

use super::error::{setup, DemoError};
use super::results::DriverLog;
use crate::driver::{drive, Log, Pace};
use crate::stream::Stream;
use control::Slo;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A tenant of the demo.
pub(crate) struct DemoTenant {
    pub(crate) name: &'static str,
    pub(crate) host: &'static str,
    pub(crate) servers: [&'static str; 2],
    pub(crate) slo: Option<Slo>,
    pub(crate) class: Option<&'static str>,
    pub(crate) depth: usize,
    /// How fast each of its connections asks.
    pub(crate) pace: Pace,
}

/// Requests per second each of `db`'s connections asks for: a front end with a rate of
/// its own rather than a loop as fast as the cache answers (which would spend the
/// machine's cores on `db`'s hits and slow every other tenant and arm). At this rate a
/// block of `db`'s set comes back every few seconds, while `scan` streams a level-1
/// cache's worth of blocks through in about two: a cache `db` shares with `scan` loses
/// the colder part of `db`'s set.
pub(crate) const DB_RATE: f64 = 300.0;

/// Bytes of each tenant's volume.
pub(crate) const VOLUME: u64 = 1 << 30;

/// The demo's tenants, `db` with a p99 SLO of `db_slo_ms`.
pub(crate) fn tenants(db_slo_ms: f64) -> Vec<DemoTenant> {
    vec![
        DemoTenant {
            name: "db",
            host: "l1-a",
            servers: ["l2-a", "l2-b"],
            slo: Some(Slo::P99Ms(db_slo_ms)),
            class: Some("gold"),
            depth: 2,
            pace: Pace::PerSecond(DB_RATE),
        },
        DemoTenant {
            name: "scan",
            host: "l1-a",
            servers: ["l2-a", "l2-d"],
            slo: None,
            class: None,
            depth: 1,
            pace: Pace::ClosedLoop,
        },
        DemoTenant {
            name: "cloud",
            host: "l1-b",
            servers: ["l2-b", "l2-c"],
            slo: Some(Slo::Degradation(0.1)),
            class: Some("silver"),
            depth: 2,
            pace: Pace::ClosedLoop,
        },
        DemoTenant {
            name: "web",
            host: "l1-b",
            servers: ["l2-c", "l2-d"],
            slo: Some(Slo::Degradation(0.2)),
            class: None,
            depth: 2,
            pace: Pace::ClosedLoop,
        },
    ]
}

/// The tenants' client connections, running.
pub(crate) struct Workload {
    stop: Arc<AtomicBool>,
    drivers: Vec<tokio::task::JoinHandle<()>>,
    logs: Vec<(String, Arc<Log>)>,
}

/// What connection `k` of tenant `t` (the `ti`-th) sends: `db` and `web` their Zipf sets,
/// `scan` its volume from a start of its own, `cloud` the trace from a point of its own
/// (or, without the trace, a Zipf set).
fn stream(t: &DemoTenant, ti: usize, k: usize, trace: Option<&Arc<Vec<trace::Request>>>) -> Stream {
    let seed = 0x1234_5678 + (ti as u64) * 1000 + k as u64;
    let from = k * 7919;
    match (t.name, trace) {
        ("db", _) => Stream::zipf(3_500, 0.6, seed),
        ("web", _) => Stream::zipf(20_000, 0.9, seed),
        ("scan", _) => Stream::scan(65536, from as u64 * 4096),
        (_, Some(tr)) => Stream::looped(tr.clone(), from),
        (_, None) => Stream::zipf(40_000, 0.8, seed),
    }
}

impl Workload {
    /// Starts `depth` connections per tenant of `ts` to its host's export (`l1_addr` by
    /// host name); `cloud` replays `trace` if given, else a synthetic Zipf set.
    pub(crate) fn start(
        ts: &[DemoTenant],
        l1_addr: &HashMap<String, SocketAddr>,
        trace: Option<&Path>,
    ) -> Result<Workload, DemoError> {
        let stop = Arc::new(AtomicBool::new(false));
        let trace = match trace {
            Some(p) => Some(crate::trace_file::read(p, VOLUME).map_err(setup("the trace"))?),
            None => None,
        };
        let mut drivers = Vec::new();
        let mut logs = Vec::new();
        for (ti, t) in ts.iter().enumerate() {
            for k in 0..t.depth {
                let log = Arc::new(Log::default());
                logs.push((t.name.to_string(), log.clone()));
                drivers.push(tokio::spawn(drive(
                    l1_addr[t.host],
                    t.name,
                    stream(t, ti, k, trace.as_ref()),
                    t.pace,
                    stop.clone(),
                    log,
                )));
            }
        }
        Ok(Workload {
            stop,
            drivers,
            logs,
        })
    }

    /// How many requests each connection has logged so far.
    pub(crate) fn mark(&self) -> Vec<usize> {
        self.logs.iter().map(|(_, l)| l.len()).collect()
    }

    /// Each connection's log so far.
    pub(crate) fn snapshot(&self) -> Vec<DriverLog> {
        self.logs
            .iter()
            .map(|(t, l)| DriverLog {
                tenant: t.clone(),
                latencies_ms: l.latencies_ms(),
            })
            .collect()
    }

    /// Stops every connection (each after its request in flight) and returns the
    /// requests completed per tenant.
    pub(crate) async fn stop(self) -> HashMap<String, u64> {
        self.stop.store(true, Ordering::Relaxed);
        for d in self.drivers {
            let _ = d.await;
        }
        let mut done = HashMap::new();
        for (t, l) in &self.logs {
            *done.entry(t.clone()).or_insert(0) += l.len() as u64;
        }
        done
    }
}
