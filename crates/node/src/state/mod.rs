//! The node's control plane: the [`cache::CacheNode`] plus what the node adds around it —
//! cache names, online profilers, per-tenant latency histograms and exports' owners.
//!
//! Every API verb and every start-up step from `node.toml` goes through [`ControlPlane`], so
//! the file and the API can never disagree about what a verb does. Data-path requests go
//! to `cache::CacheNode` directly (see `export`); this module only adds latency timing.
//!
//! A [`builder::ControlPlaneBuilder`] makes it (`builder.rs`: the node's parts, its exports, one
//! observer per tenant); its fields are private and set once. This file holds the state
//! and its exports; `caches.rs` the verbs on caches and rules, `log.rs` a cache's durable
//! write log replayed at creation, `tenants.rs` the tenants' observers and counters,
//! `observations.rs` the answer a controller polls.

use crate::bandwidth::FairQueue;
use crate::demote::Demoter;
use crate::error::NodeError;
use crate::hot_tier::HotTier;
use crate::observe::TenantObserver;
use crate::upstream::UpstreamLinks;
use cache::{CacheId, CacheNode};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

pub mod builder;
mod caches;
mod log;
mod observations;
pub mod tenants;
mod tiers;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An export as the node serves it.
#[derive(Clone, Debug, Serialize)]
pub struct ExportInfo {
    /// NBD export name.
    pub name: String,
    /// Owning tenant.
    pub tenant: String,
    /// Size in bytes.
    pub size: u64,
    /// Writes refused.
    pub read_only: bool,
    /// What serves it (`file:PATH`, `nbd:ADDR/NAME`, `stripe(...)`).
    pub backend: String,
}

/// A change to a cache through the API (`PATCH /v1/caches/{c}`): the contract's type.
pub use api::node::CachePatch;

/// The node's state shared by the NBD server and the API, made by a
/// [`builder::ControlPlaneBuilder`] and not changed afterwards but through its verbs.
pub struct ControlPlane {
    /// The data path and its caches.
    cache: Arc<CacheNode>,
    /// This node's level in the hierarchy.
    level: u8,
    /// When the node started.
    started: Instant,
    exports: BTreeMap<String, ExportInfo>,
    hot_tiers: BTreeMap<String, Arc<HotTier>>,
    /// Each export's index, the base of its profiled block keys.
    export_index: BTreeMap<String, u64>,
    /// One observer per tenant owning an export.
    observers: BTreeMap<String, Arc<TenantObserver>>,
    /// The caches whose curve the API answers (`[[cache]] profile`).
    profiled: Mutex<BTreeSet<CacheId>>,
    /// The backend's queue: every export's backend calls wait in it, shared between
    /// tenants in proportion to their weights ([`crate::bandwidth`]).
    bandwidth: Arc<FairQueue>,
    /// The node's name (`[node] name`, else `HOST-PORT`: `register::default_name`).
    name: String,
    /// A random id chosen at start: a controller sees a restart by its change.
    epoch: String,
    /// The demote path to level 2 (used by exclusive caches on a level-1 node).
    demoter: Demoter,
    /// The links to upstream NBD exports (level 1 → level 2), for health reports.
    upstreams: UpstreamLinks,
    /// The NBD server's node-wide limits (bytes in flight, workers), for `/metrics`.
    nbd_limits: Option<Arc<nbd::Limits>>,
    /// Where relative paths of caches' write logs are taken from (`[node] data_dir`).
    data_dir: Option<PathBuf>,
    /// Whether `/metrics` labels tenant series with client addresses
    /// (`[node] metrics_client_labels`).
    metrics_client_labels: bool,
    /// Dirty blocks neither the backends nor the data directory can take, and whether a
    /// stop was asked ([`crate::risk`]): the writes refused.
    risk: crate::risk::Risk,
}

impl ControlPlane {
    /// The data path and its caches.
    pub fn cache_node(&self) -> &Arc<CacheNode> {
        &self.cache
    }

    /// This node's level in the hierarchy.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// When the node started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The backend's queue, shared between tenants in proportion to their weights.
    pub fn bandwidth(&self) -> &Arc<FairQueue> {
        &self.bandwidth
    }

    /// The node's name (`[node] name`, else `HOST-PORT`: `register::default_name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A random id chosen at start: a controller sees a restart by its change.
    pub fn epoch(&self) -> &str {
        &self.epoch
    }

    /// The demote path to level 2.
    pub fn demoter(&self) -> &Demoter {
        &self.demoter
    }

    /// The links to upstream NBD exports, for health reports.
    pub fn upstreams(&self) -> &UpstreamLinks {
        &self.upstreams
    }

    /// Dirty data at risk and the writes it refuses ([`crate::risk`]).
    pub fn risk(&self) -> &crate::risk::Risk {
        &self.risk
    }

    /// The NBD server's node-wide limits, when the node serves NBD.
    pub fn nbd_limits(&self) -> Option<&Arc<nbd::Limits>> {
        self.nbd_limits.as_ref()
    }

    /// Whether `/metrics` labels tenant series with client addresses.
    pub fn metrics_client_labels(&self) -> bool {
        self.metrics_client_labels
    }

    /// The exports.
    pub fn exports(&self) -> impl Iterator<Item = &ExportInfo> {
        self.exports.values()
    }

    /// The hot-chunk tier of an export, if it has one.
    pub fn hot_tier(&self, export: &str) -> Option<&Arc<HotTier>> {
        self.hot_tiers.get(export)
    }

    /// One export.
    pub fn export(&self, name: &str) -> Option<&ExportInfo> {
        self.exports.get(name)
    }

    fn blocks(&self, bytes: u64, field: &str) -> Result<usize, NodeError> {
        let bs = self.cache.block_size() as u64;
        let blocks = bytes / bs;
        if blocks == 0 {
            return Err(NodeError::Invalid(format!(
                "{field}: {bytes} bytes is less than one block of {bs} bytes"
            )));
        }
        Ok(blocks as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CacheSpec, RuleSpec};
    use crate::latency::LatencyClass;
    use std::time::Duration;

    /// A node of 1,024 blocks with exports `a`, `b`, `c` of tenants `ta`, `tb`, `tc`, 256
    /// blocks each, and caches `ca` (routing `a`), `shared` (routing `b` and `c`) and
    /// `idle`.
    fn node() -> ControlPlane {
        let mut b = ControlPlane::builder(1024, 4096, 1, 0).unwrap();
        for (e, t) in [("a", "ta"), ("b", "tb"), ("c", "tc")] {
            let info = ExportInfo {
                name: e.into(),
                tenant: t.into(),
                size: 256 * 4096,
                read_only: false,
                backend: "mem".into(),
            };
            b.add_export(info, Arc::new(cache::MemBackend::new(256 * 4096)), None)
                .unwrap();
        }
        let s = b.build();
        let spec = |name: &str| -> CacheSpec {
            toml::from_str(&format!("name = \"{name}\"\nsize = \"256KiB\"")).unwrap()
        };
        let rule = |export: &str, cache: &str| -> RuleSpec {
            toml::from_str(&format!("export = \"{export}\"\ncache = \"{cache}\"")).unwrap()
        };
        s.create_cache(&spec("ca")).unwrap();
        s.create_cache(&spec("shared")).unwrap();
        s.create_cache(&spec("idle")).unwrap();
        s.create_rule(&rule("a", "ca")).unwrap();
        s.create_rule(&rule("b", "shared")).unwrap();
        s.create_rule(&rule("c", "shared")).unwrap();
        s
    }

    #[test]
    fn one_observer_per_tenant_gives_both_curves_and_one_recorder_per_request() {
        let s = node();
        assert_eq!(s.tenant_names(), ["ta", "tb", "tc"]);
        let o = s.observer("ta").unwrap().clone();
        assert!(s.observer("nobody").is_none());
        // A loop over 128 blocks, ten times: misses below 128 blocks, hits above.
        let base = s.key_base("a");
        for _ in 0..10 {
            o.access((0..128u64).map(|b| base | b));
        }
        let ca = s.cache_id("ca").unwrap();
        let c = s.curve(ca, false, 8).unwrap().unwrap();
        let sizes: Vec<u64> = c.points().iter().map(|p| p.cache_size).collect();
        assert_eq!(sizes, [0, 32, 64, 96, 128, 160, 192, 224, 256]);
        let tenant = o.lru_curve(&sizes[1..], false).unwrap();
        assert_eq!(
            c.points(),
            tenant.points(),
            "the cache's curve is its tenant's"
        );
        assert!(c.points()[3].miss_ratio > 0.95, "{:?}", c.points());
        assert!(c.points()[6].miss_ratio < 0.15, "{:?}", c.points());
        // A cache no rule routes to has no data; a shared one is a conflict naming both.
        let idle = s.cache_id("idle").unwrap();
        assert!(s.curve(idle, false, 8).unwrap().is_none());
        let shared = s.cache_id("shared").unwrap();
        let e = s.curve(shared, false, 8).unwrap_err().to_string();
        assert!(e.contains("tb, tc"), "{e}");
        // One recorder per client: a request is timed once, a miss once more for the
        // misses' histogram.
        let r = s.latency("a", "10.0.0.1");
        o.record(&r, false, LatencyClass::Hit, Duration::from_micros(100));
        o.record(&r, false, LatencyClass::Miss, Duration::from_millis(4));
        o.record(&r, true, LatencyClass::Other, Duration::from_millis(1));
        let (l, served) = o.latency_view();
        assert_eq!(l.count, 3);
        assert!((l.sum_ms - 5.1).abs() < 1e-9, "{l:?}");
        assert_eq!((served.hit.count, served.miss.count), (1, 1));
        assert_eq!(l.miss_buckets.iter().map(|b| b.1).sum::<u64>(), 1);
        assert_eq!(l.buckets.iter().map(|b| b.1).sum::<u64>(), 3);
        assert_eq!(s.tenants().len(), 1);
        let obs = s.observations();
        assert_eq!(obs.tenants.len(), 3);
        assert_eq!(obs.tenants[0].latency.count, 3);
        assert_eq!(obs.tenants[0].served.miss.count, 1);
    }

    #[test]
    fn a_range_past_the_export_or_a_write_policy_its_backend_cannot_honour_is_refused() {
        let mut b = ControlPlane::builder(1024, 4096, 2, 0).unwrap();
        let info = ExportInfo {
            name: "golden".into(),
            tenant: "img".into(),
            size: 256 * 4096,
            read_only: true,
            backend: "mem".into(),
        };
        b.add_export(info, Arc::new(cache::MemBackend::new(256 * 4096)), None)
            .unwrap();
        let s = b.build();
        let spec: CacheSpec =
            toml::from_str("name = \"ro\"\nsize = \"256KiB\"\nwrite_policy = \"read-only\"")
                .unwrap();
        s.create_cache(&spec).unwrap();
        let rule = |range: &str| -> RuleSpec {
            toml::from_str(&format!(
                "export = \"golden\"\ncache = \"ro\"\nrange = {range}"
            ))
            .unwrap()
        };
        // Past the end of the export (256 blocks), or empty: 400 naming `range`, no rule.
        for bad in ["[0, 1052672]", "[4096, 4096]"] {
            let e = s.create_rule(&rule(bad)).unwrap_err();
            assert!(matches!(e, NodeError::Invalid(_)), "{e}");
            assert!(e.to_string().contains("range"), "{e}");
        }
        assert!(s.rules().is_empty());
        s.create_rule(&rule("[0, 1048576]")).unwrap();
        // A writing policy for a cache a read-only export is routed to: refused naming
        // `write_policy`, the cache unchanged.
        let id = s.cache_id("ro").unwrap();
        let patch = CachePatch {
            write_policy: Some("write-back".into()),
            ..Default::default()
        };
        let e = s.configure_cache(id, &patch).unwrap_err();
        assert!(matches!(e, NodeError::Invalid(_)), "{e}");
        assert!(
            e.to_string().contains("write_policy") && e.to_string().contains("golden"),
            "{e}"
        );
        assert_eq!(s.cache(id).unwrap().stats.write_policy, "read-only");
    }
}
