//! Replaying a trace as real NBD I/O (`lachesis replay`, and the demo's tenants).
//!
//! [`replay`] takes a trace's requests and sends them to one NBD export over `threads`
//! connections, each with one request in flight (so `threads` is the queue depth):
//!
//! * **pace**: by default each request is issued at its own trace time, relative to the
//!   first, divided by `speed`; with `rate` the requests are issued at that many per
//!   second instead, ignoring the trace's times. When every connection is busy the issuer
//!   waits (closed loop), so the achieved rate may fall short of the asked one and the
//!   report says so.
//! * **mapping**: the trace's volume is ignored (every request goes to the one export);
//!   an offset past the end of the export wraps modulo its size (aligned down to 4 KiB)
//!   and a length past the end is cut; lengths above 32 MiB are cut to 32 MiB. Reads read,
//!   writes write `fill` bytes, trims trim, flushes flush.
//! * **filter and limits**: only the requests of `tenant`, if given; stops at the end of
//!   the trace, after `duration`, or after `max_requests`.
//!
//! Latency is timed per request from when a connection sends it to its reply. Counters
//! are live in a [`ReplayStats`] the caller may read while the replay runs; the final
//! [`ReplayReport`] gives achieved IOPS, bytes, mean/p50/p99 latency and errors (an NBD
//! error answer counts as an error and the replay goes on).

use bytes::Bytes;
use hdrhistogram::Histogram;
use nbd::NbdClient;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use trace::{Op, Request, TraceError};

/// Longest request sent (longer ones are cut).
pub const MAX_REQUEST: u32 = 32 << 20;

/// An error that stops a replay.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The target is not `nbd://HOST:PORT/EXPORT`.
    #[error("target `{0}`: expected nbd://HOST:PORT/EXPORT")]
    BadTarget(String),
    /// A setting is out of range.
    #[error("{0}")]
    Invalid(String),
    /// The NBD server could not be reached or refused the export.
    #[error("{target}: {error}")]
    Connect {
        /// `host:port/export`.
        target: String,
        /// What failed.
        error: nbd::ClientError,
    },
    /// The trace has a bad record.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Where to replay to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NbdTarget {
    /// `host:port`.
    pub addr: String,
    /// Export name.
    pub export: String,
}

impl std::str::FromStr for NbdTarget {
    type Err = ReplayError;
    fn from_str(s: &str) -> Result<Self, ReplayError> {
        let bad = || ReplayError::BadTarget(s.to_string());
        let rest = s.strip_prefix("nbd://").ok_or_else(bad)?;
        let (addr, export) = rest.split_once('/').ok_or_else(bad)?;
        if addr.is_empty() || !addr.contains(':') {
            return Err(bad());
        }
        Ok(NbdTarget {
            addr: addr.to_string(),
            export: export.to_string(),
        })
    }
}

impl std::fmt::Display for NbdTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "nbd://{}/{}", self.addr, self.export)
    }
}

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// The export.
    pub target: NbdTarget,
    /// Requests per second; `None`: the trace's own pace.
    pub rate: Option<f64>,
    /// Divides the trace's times (2 = twice as fast); ignored with `rate`.
    pub speed: f64,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many requests.
    pub max_requests: Option<u64>,
    /// Only this tenant's requests.
    pub tenant: Option<u32>,
    /// Connections, each with one request in flight.
    pub threads: usize,
    /// The byte written by writes.
    pub fill: u8,
}

impl ReplayConfig {
    /// Replaying to `target` at the trace's pace over 4 connections, to the end.
    pub fn new(target: NbdTarget) -> Self {
        ReplayConfig {
            target,
            rate: None,
            speed: 1.0,
            duration: None,
            max_requests: None,
            tenant: None,
            threads: 4,
            fill: 0xa5,
        }
    }

    fn check(&self) -> Result<(), ReplayError> {
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(ReplayError::Invalid(format!(
                    "rate: {r} must be a positive number of requests per second"
                )));
            }
        }
        if !(self.speed.is_finite() && self.speed > 0.0) {
            return Err(ReplayError::Invalid(format!(
                "speed: {} must be a positive factor",
                self.speed
            )));
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err(ReplayError::Invalid(format!(
                "threads: {} must be from 1 to 1024",
                self.threads
            )));
        }
        Ok(())
    }
}

/// Live counters of a replay.
pub struct ReplayStats {
    /// Requests completed (with or without error).
    pub requests: AtomicU64,
    /// Reads completed.
    pub reads: AtomicU64,
    /// Writes completed.
    pub writes: AtomicU64,
    /// Bytes read.
    pub read_bytes: AtomicU64,
    /// Bytes written.
    pub write_bytes: AtomicU64,
    /// Requests answered with an error.
    pub errors: AtomicU64,
    histogram: Mutex<Histogram<u64>>,
    first_error: Mutex<Option<String>>,
}

impl Default for ReplayStats {
    fn default() -> Self {
        ReplayStats {
            requests: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            histogram: Mutex::new(
                Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
            ),
            first_error: Mutex::new(None),
        }
    }
}

impl ReplayStats {
    fn record(&self, op: Op, len: u64, took: Duration, result: Result<(), String>) {
        let r = Ordering::Relaxed;
        self.requests.fetch_add(1, r);
        match op {
            Op::Read => {
                self.reads.fetch_add(1, r);
                self.read_bytes.fetch_add(len, r);
            }
            Op::Write => {
                self.writes.fetch_add(1, r);
                self.write_bytes.fetch_add(len, r);
            }
            _ => {}
        }
        if let Err(e) = result {
            self.errors.fetch_add(1, r);
            let mut f = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
            f.get_or_insert(e);
        }
        let us = (took.as_micros() as u64).clamp(1, 60_000_000);
        self.histogram
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .saturating_record(us);
    }

    /// The counters now, over `elapsed`.
    pub fn report(&self, elapsed: Duration) -> ReplayReport {
        let r = Ordering::Relaxed;
        let h = self.histogram.lock().unwrap_or_else(|e| e.into_inner());
        let q = |x: f64| {
            if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(x) as f64 / 1e3
            }
        };
        let requests = self.requests.load(r);
        let secs = elapsed.as_secs_f64();
        ReplayReport {
            requests,
            reads: self.reads.load(r),
            writes: self.writes.load(r),
            read_bytes: self.read_bytes.load(r),
            write_bytes: self.write_bytes.load(r),
            errors: self.errors.load(r),
            first_error: self
                .first_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            seconds: secs,
            iops: if secs > 0.0 {
                requests as f64 / secs
            } else {
                0.0
            },
            mean_ms: if h.is_empty() { 0.0 } else { h.mean() / 1e3 },
            p50_ms: q(0.5),
            p99_ms: q(0.99),
        }
    }
}

/// What a replay did.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReplayReport {
    /// Requests completed.
    pub requests: u64,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// The first error's text.
    pub first_error: Option<String>,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Achieved requests per second.
    pub iops: f64,
    /// Mean latency.
    pub mean_ms: f64,
    /// Median latency.
    pub p50_ms: f64,
    /// 99th percentile latency.
    pub p99_ms: f64,
}

/// `(offset, len)` of `req` inside an export of `size` bytes (see the module docs).
pub fn map_request(req: &Request, size: u64) -> Option<(u64, u32)> {
    if size == 0 {
        return None;
    }
    let mut offset = req.offset;
    if offset >= size {
        offset = (offset % size) & !4095;
    }
    let len = (req.len.min(MAX_REQUEST) as u64).min(size - offset) as u32;
    Some((offset, len))
}

/// Sends `req` on `c` to an export of `size` bytes, mapped as the module docs say
/// ([`map_request`]; a flush flushes); returns the bytes it moved (what the load
/// generators' driver and [`replay`]'s workers both send through).
pub async fn send(
    c: &NbdClient,
    req: &Request,
    size: u64,
    fill: &Bytes,
) -> Result<u64, nbd::ClientError> {
    if req.op == Op::Flush {
        return c.flush().await.map(|()| 0);
    }
    let Some((offset, len)) = map_request(req, size) else {
        return Ok(0);
    };
    if len == 0 {
        return Ok(0);
    }
    let len = match req.op {
        // A write writes what `fill` holds ([`MAX_REQUEST`] bytes in a replay).
        Op::Write => len.min(u32::try_from(fill.len()).unwrap_or(u32::MAX)),
        _ => len,
    };
    match req.op {
        Op::Read => c.read(offset, len).await.map(|_| ())?,
        Op::Write => c.write(offset, fill.slice(..len as usize), false).await?,
        Op::Trim => c.trim(offset, len).await?,
        Op::Flush => unreachable!("handled above"),
    }
    Ok(u64::from(len))
}

/// Replays `requests` as `cfg` says, counting into `stats` (readable while it runs);
/// returns the final report. Reading the trace runs on the blocking pool.
pub async fn replay<I>(
    requests: I,
    cfg: &ReplayConfig,
    stats: Arc<ReplayStats>,
) -> Result<ReplayReport, ReplayError>
where
    I: Iterator<Item = Result<Request, TraceError>> + Send + 'static,
{
    cfg.check()?;
    let target = format!("{}/{}", cfg.target.addr, cfg.target.export);
    let mut clients = Vec::new();
    for _ in 0..cfg.threads {
        let c = NbdClient::connect(cfg.target.addr.as_str(), &cfg.target.export)
            .await
            .map_err(|error| ReplayError::Connect {
                target: target.clone(),
                error,
            })?;
        clients.push(c);
    }
    let size = clients[0].size();
    let fill = Bytes::from(vec![cfg.fill; MAX_REQUEST as usize]);
    let (tx, rx) = tokio::sync::mpsc::channel::<Request>(cfg.threads);
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let start = Instant::now();
    let mut workers = Vec::new();
    for c in clients {
        let (rx, stats, fill) = (rx.clone(), stats.clone(), fill.clone());
        workers.push(tokio::spawn(async move {
            loop {
                let next = rx.lock().await.recv().await;
                let Some(req) = next else { break };
                let t = Instant::now();
                let (len, result) = match send(&c, &req, size, &fill).await {
                    Ok(len) => (len, Ok(())),
                    Err(e) => (0, Err(e.to_string())),
                };
                stats.record(req.op, len, t.elapsed(), result);
            }
            let _ = c.disconnect().await;
        }));
    }
    let cfg2 = cfg.clone();
    let issuer = tokio::task::spawn_blocking(move || -> Result<(), ReplayError> {
        let mut first_time: Option<u64> = None;
        let mut issued = 0u64;
        for r in requests {
            let req = r?;
            if cfg2.tenant.is_some_and(|t| t != req.tenant) {
                continue;
            }
            if cfg2.max_requests.is_some_and(|m| issued >= m) {
                break;
            }
            let due = match cfg2.rate {
                Some(rate) => Duration::from_secs_f64(issued as f64 / rate),
                None => {
                    let t0 = *first_time.get_or_insert(req.time_us);
                    Duration::from_secs_f64(
                        req.time_us.saturating_sub(t0) as f64 / 1e6 / cfg2.speed,
                    )
                }
            };
            if cfg2
                .duration
                .is_some_and(|d| due >= d || start.elapsed() >= d)
            {
                break;
            }
            let now = start.elapsed();
            if due > now {
                std::thread::sleep(due - now);
            }
            if tx.blocking_send(req).is_err() {
                break;
            }
            issued += 1;
        }
        Ok(())
    });
    let issued = issuer
        .await
        .map_err(|e| ReplayError::Invalid(format!("trace reader failed: {e}")));
    for w in workers {
        let _ = w.await;
    }
    issued??;
    Ok(stats.report(start.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        let t: NbdTarget = "nbd://127.0.0.1:10809/vol".parse().unwrap();
        assert_eq!(t.addr, "127.0.0.1:10809");
        assert_eq!(t.export, "vol");
        assert_eq!(t.to_string(), "nbd://127.0.0.1:10809/vol");
        assert!("127.0.0.1:1/x".parse::<NbdTarget>().is_err());
        assert!("nbd://host/x".parse::<NbdTarget>().is_err());
    }

    #[test]
    fn offsets_wrap_and_lengths_are_cut() {
        let r = |offset, len| Request {
            time_us: 0,
            tenant: 0,
            volume: 0,
            op: Op::Read,
            offset,
            len,
        };
        let size = 1 << 20;
        assert_eq!(map_request(&r(4096, 8192), size), Some((4096, 8192)));
        assert_eq!(map_request(&r(size + 5000, 4096), size), Some((4096, 4096)));
        assert_eq!(
            map_request(&r(size - 100, 4096), size),
            Some((size - 100, 100))
        );
        assert_eq!(map_request(&r(0, 4096), 0), None);
    }
}
