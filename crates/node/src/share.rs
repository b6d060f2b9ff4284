//! Bandwidth sharing between the tenants of a node: the proportions set through the API,
//! and the wait a data request makes before it starts.
//!
//! The scheduling itself (time quanta, work-conserving shares among active tenants) is
//! [`crate::bandwidth::BandwidthShare`]; this module turns its reservation into an async
//! sleep, so a throttled tenant holds no thread while it waits.

use crate::bandwidth::{BandwidthShare, BandwidthSnapshot};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Length of one scheduling quantum.
pub const QUANTUM: Duration = Duration::from_millis(10);

/// The node's bandwidth shares.
pub struct Share {
    sched: BandwidthShare,
    proportions: Mutex<BTreeMap<String, f64>>,
}

impl Share {
    /// Shares of `total` bytes per second (0 = unlimited).
    pub fn new(total: u64) -> Self {
        Share {
            sched: BandwidthShare::new(total, QUANTUM).expect("the quantum is positive"),
            proportions: Mutex::default(),
        }
    }

    /// Bytes per second shared (0 = unlimited).
    pub fn total(&self) -> u64 {
        self.sched.total_bytes_per_sec()
    }

    /// Sets the proportions (weights) of tenants; the error names a bad one. Tenants not
    /// named weigh 1.
    pub fn set_proportions(&self, p: BTreeMap<String, f64>) -> Result<(), String> {
        let list: Vec<(String, f64)> = p.iter().map(|(k, v)| (k.clone(), *v)).collect();
        self.sched
            .set_proportions(&list)
            .map_err(|e| e.to_string())?;
        *self.proportions.lock().unwrap_or_else(|e| e.into_inner()) = p;
        Ok(())
    }

    /// The proportions set.
    pub fn proportions(&self) -> BTreeMap<String, f64> {
        self.proportions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Per-tenant granted bytes and current shares.
    pub fn snapshot(&self) -> BandwidthSnapshot {
        self.sched.snapshot()
    }

    /// Waits until `tenant` may move `bytes`.
    pub async fn admit(&self, tenant: &str, bytes: u64) {
        if self.total() == 0 || bytes == 0 {
            return;
        }
        // tokio's clock (which tests may pause), as a std instant for the scheduler.
        let now: Instant = tokio::time::Instant::now().into_std();
        let at = self.sched.reserve(tenant, bytes, now);
        if at > now {
            tokio::time::sleep_until(at.into()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_tenant_is_held_to_the_bandwidth() {
        // 10 MB/s alone: 20 requests of 1 MB take about 2 s of (paused, auto-advancing) time.
        let s = Share::new(10_000_000);
        let start = tokio::time::Instant::now();
        for _ in 0..20 {
            s.admit("a", 1_000_000).await;
        }
        let took = start.elapsed().as_secs_f64();
        assert!((1.7..=2.1).contains(&took), "{took}");
        assert!(s
            .set_proportions([("a".to_string(), 0.0)].into())
            .unwrap_err()
            .contains('a'));
    }
}
