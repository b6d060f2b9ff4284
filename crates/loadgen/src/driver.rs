//! The one driver: a closed-loop NBD client that sends a [`Stream`]'s requests to an
//! export one at a time (each connection has one request in flight, as `node::replay`'s
//! workers do, through the same `node::replay::send`), until told to stop, and logs the
//! latency of every request it completes ([`Log`]). A request the server answers with
//! an error is counted apart and not logged; the driver waits 50 ms and goes on.
//!
//! A driver may be paced ([`Pace`]): then it starts a request no sooner than one period
//! after the one before started, so it asks for at most one request per period; a slow
//! request delays the next one, and the driver never bursts to catch up (a client that
//! wants a rate and gets what its latency allows).

use crate::stream::Stream;
use bytes::Bytes;
use nbd::NbdClient;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most latencies one driver keeps (a very long run stops logging, not serving).
pub const LOG_MAX: usize = 1 << 24;

/// What one connection measured, readable while it runs.
#[derive(Default)]
pub struct Log {
    latencies_ms: Mutex<Vec<f32>>,
    /// Requests answered with an error.
    pub errors: AtomicU64,
}

impl Log {
    /// How many requests it has completed so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether it has completed none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The latency (ms) of every request completed so far, in order.
    pub fn latencies_ms(&self) -> Vec<f32> {
        self.lock().clone()
    }

    fn push(&self, ms: f32) {
        let mut l = self.lock();
        if l.len() < LOG_MAX {
            l.push(ms);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<f32>> {
        self.latencies_ms.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How fast a driver may ask.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// The next request as soon as the last one is answered.
    ClosedLoop,
    /// At most this many requests per second (one request per period, no catching up).
    PerSecond(f64),
}

/// Connects to `export` at `addr` and sends `stream`'s requests closed loop, at `pace`,
/// until `stop` is set (after the request in flight), logging into `log`. A connection
/// that fails is reported (a warning) and ends the driver.
pub async fn drive(
    addr: SocketAddr,
    export: &str,
    stream: Stream,
    pace: Pace,
    stop: Arc<AtomicBool>,
    log: Arc<Log>,
) {
    let period = match pace {
        Pace::PerSecond(r) if r.is_finite() && r > 0.0 => Some(Duration::from_secs_f64(1.0 / r)),
        _ => None,
    };
    let client = match NbdClient::connect(addr, export).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%export, %e, "load generator could not connect");
            return;
        }
    };
    let size = client.size();
    let fill = Bytes::from(vec![0x5au8; node::replay::MAX_REQUEST as usize]);
    let mut due = Instant::now();
    for req in stream {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(p) = period {
            tokio::time::sleep_until(due.into()).await;
            due = Instant::now().max(due) + p;
        }
        let t0 = Instant::now();
        match node::replay::send(&client, &req, size, &fill).await {
            Ok(_) => log.push((t0.elapsed().as_secs_f64() * 1e3) as f32),
            Err(e) => {
                log.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%export, %e, "load generator's request failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    let _ = client.disconnect().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_logs_every_request_until_stopped() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let map = nbd::ExportMap::new().with("v", Arc::new(nbd::MemExport::new(1 << 20)));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (quit, rx) = tokio::sync::oneshot::channel::<()>();
            let server = tokio::spawn(nbd::Server::builder().build(listener, Arc::new(map)).serve(
                async {
                    let _ = rx.await;
                },
            ));
            let (stop, log) = (Arc::new(AtomicBool::new(false)), Arc::new(Log::default()));
            let d = tokio::spawn(drive(
                addr,
                "v",
                Stream::zipf(100, 0.9, 1),
                Pace::ClosedLoop,
                stop.clone(),
                log.clone(),
            ));
            while log.len() < 200 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            stop.store(true, Ordering::Relaxed);
            d.await.unwrap();
            let n = log.len();
            assert!(n >= 200);
            assert_eq!(log.errors.load(Ordering::Relaxed), 0);
            assert!(log
                .latencies_ms()
                .iter()
                .all(|&ms| (0.0..10_000.0).contains(&ms)));
            // Paced at 200 per second for about half a second: no more than the pace
            // allows (one at the start, then one per 5 ms), and not far fewer.
            let (stop, log) = (Arc::new(AtomicBool::new(false)), Arc::new(Log::default()));
            let d = tokio::spawn(drive(
                addr,
                "v",
                Stream::zipf(100, 0.9, 1),
                Pace::PerSecond(200.0),
                stop.clone(),
                log.clone(),
            ));
            let t0 = Instant::now();
            tokio::time::sleep(Duration::from_millis(500)).await;
            stop.store(true, Ordering::Relaxed);
            d.await.unwrap();
            let allowed = (t0.elapsed().as_secs_f64() * 200.0).floor() as usize + 2;
            let n = log.len();
            assert!(n <= allowed && n >= 20, "{n} requests, at most {allowed}");
            let _ = quit.send(());
            server.await.unwrap().unwrap();
        });
    }
}
