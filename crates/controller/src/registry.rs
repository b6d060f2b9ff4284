//! The node registry: every node the controller knows (from the configuration or from its
//! own registration), where its API is, its token, its capacity and its health.
//!
//! A node is *up* while it answers; after `down_after` polls in a row fail it is marked
//! down (its partitions are planned at capacity 0, so its tenants are re-planned without
//! it). Its `epoch` is the one it last reported: when a node comes back with another epoch
//! (it restarted, empty), or comes back at all, it is re-programmed from the controller's
//! plan at the next reconcile.

use serde::{Deserialize, Serialize};

/// A node's registration, its exports and heartbeat: the contract's types.
pub use api::controller::{ExportRef, Heartbeat, Registration};

/// One node as the controller knows it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeEntry {
    /// Name.
    pub name: String,
    /// Level.
    pub level: u8,
    /// API base URL.
    pub api: Option<String>,
    /// NBD address.
    pub nbd: Option<String>,
    /// Cache memory (bytes; 0 unknown).
    pub cache_size: u64,
    /// Block size (bytes).
    pub block_size: u64,
    /// Epoch last seen.
    pub epoch: String,
    /// Exports it reported.
    pub exports: Vec<ExportRef>,
    /// Its API token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Whether it answers.
    pub up: bool,
    /// Polls failed in a row.
    pub failures: u32,
    /// The epoch whose configuration matches the last plan (`None`: reprogram).
    pub programmed: Option<String>,
    /// The last error talking to it.
    pub last_error: Option<String>,
    /// Unix seconds of the last heartbeat or successful poll.
    pub last_seen: f64,
    /// Why its counters are not believed (see [`crate::counters`]); `None` while they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspect: Option<String>,
    /// The upstream links its `/healthz` reports down (empty while it says `ok`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<api::node::UpstreamDown>,
    /// Its exports' hot tiers as its last answer reported them (settings and cumulative
    /// counters; empty: no tier).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<api::node::HotTierView>,
}

impl NodeEntry {
    /// Capacity in blocks of `block_size` while up, 0 while down or unknown.
    pub fn capacity(&self, block_size: u64) -> u64 {
        if self.up {
            self.cache_size / block_size.max(1)
        } else {
            0
        }
    }

    /// The entry as the API shows it (without the token).
    pub fn public(&self) -> NodeEntry {
        NodeEntry {
            token: None,
            ..self.clone()
        }
    }

    /// Applies a registration.
    pub fn register(&mut self, r: &Registration, now: f64) {
        if self.epoch != r.epoch {
            self.programmed = None;
        }
        self.level = r.level;
        self.api = Some(r.api.clone());
        self.nbd = r.nbd.clone();
        self.cache_size = r.cache_size;
        self.block_size = r.block_size;
        self.epoch = r.epoch.clone();
        self.exports = r.exports.clone();
        self.token = Some(r.token.clone());
        self.up = true;
        self.failures = 0;
        self.last_seen = now;
    }

    /// A poll succeeded with this epoch and cache size.
    pub fn answered(&mut self, epoch: &str, cache_size: u64, now: f64) {
        if self.epoch != epoch || !self.up {
            self.programmed = None;
        }
        self.epoch = epoch.to_string();
        if cache_size > 0 {
            self.cache_size = cache_size;
        }
        self.up = true;
        self.failures = 0;
        self.last_error = None;
        self.last_seen = now;
    }

    /// A poll failed; returns whether the node just went down.
    pub fn failed(&mut self, err: &str, down_after: u32) -> bool {
        self.failures = self.failures.saturating_add(1);
        self.last_error = Some(err.to_string());
        if self.up && self.failures >= down_after {
            self.up = false;
            self.programmed = None;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_after_failures_and_reprogrammed_on_return_or_restart() {
        let mut n = NodeEntry {
            name: "a".into(),
            up: true,
            epoch: "e1".into(),
            cache_size: 1 << 20,
            programmed: Some("e1".into()),
            ..Default::default()
        };
        assert_eq!(n.capacity(4096), 256);
        assert!(!n.failed("x", 3));
        assert!(!n.failed("x", 3));
        assert!(n.failed("x", 3));
        assert!(!n.up);
        assert_eq!(n.capacity(4096), 0);
        n.answered("e1", 1 << 20, 1.0);
        assert!(n.up);
        assert_eq!(n.programmed, None);
        n.programmed = Some("e1".into());
        n.answered("e2", 1 << 20, 2.0);
        assert_eq!(n.programmed, None, "a restart (new epoch) is re-programmed");
    }
}
