//! Making a [`ControlPlane`]: the node's parts first (its cache, the backend's queue, the
//! demote path, the upstream links: the exports' backends are built on them), then its
//! settings and exports, then [`ControlPlaneBuilder::build`], which makes one observer per
//! tenant owning an export. Nothing of the state changes afterwards but through its verbs.

use super::{ControlPlane, ExportInfo};
use crate::bandwidth::FairQueue;
use crate::demote::Demoter;
use crate::error::NodeError;
use crate::hot_tier::HotTier;
use crate::observe::{TenantObserver, DEFAULT_PHANTOM_POLICIES};
use crate::upstream::UpstreamLinks;
use cache::CacheNode;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A [`ControlPlane`] being made.
pub struct ControlPlaneBuilder {
    cache: Arc<CacheNode>,
    level: u8,
    started: Instant,
    bandwidth: Arc<FairQueue>,
    demoter: Demoter,
    upstreams: UpstreamLinks,
    exports: BTreeMap<String, ExportInfo>,
    hot_tiers: BTreeMap<String, Arc<HotTier>>,
    export_index: BTreeMap<String, u64>,
    name: String,
    phantom_policies: Vec<String>,
    nbd_limits: Option<Arc<nbd::Limits>>,
    data_dir: Option<PathBuf>,
    metrics_client_labels: bool,
}

/// A random id for this start of the process.
fn new_epoch() -> String {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let h = std::collections::hash_map::RandomState::new().hash_one((nanos, std::process::id()));
    format!("{h:016x}")
}

impl ControlPlane {
    /// A node of level `level` with `total_blocks` blocks of `block_size` bytes and
    /// `backend_depth` calls in service at the backend at once (see [`crate::bandwidth`]),
    /// no exports yet.
    pub fn builder(
        total_blocks: usize,
        block_size: usize,
        level: u8,
        backend_depth: usize,
    ) -> Result<ControlPlaneBuilder, NodeError> {
        Ok(ControlPlaneBuilder {
            cache: Arc::new(CacheNode::new(total_blocks, block_size)?),
            level,
            started: Instant::now(),
            bandwidth: Arc::new(FairQueue::new(backend_depth)),
            demoter: Demoter::new(),
            upstreams: UpstreamLinks::default(),
            exports: BTreeMap::new(),
            hot_tiers: BTreeMap::new(),
            export_index: BTreeMap::new(),
            name: String::new(),
            phantom_policies: DEFAULT_PHANTOM_POLICIES
                .iter()
                .map(|p| p.to_string())
                .collect(),
            nbd_limits: None,
            data_dir: None,
            metrics_client_labels: false,
        })
    }
}

impl ControlPlaneBuilder {
    /// The node's name for a controller.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Candidate policies profiled by phantom caches besides LRU (default
    /// [`DEFAULT_PHANTOM_POLICIES`]).
    pub fn phantom_policies(mut self, policies: Vec<String>) -> Self {
        self.phantom_policies = policies;
        self
    }

    /// The NBD server's node-wide limits, for `/metrics`.
    pub fn nbd_limits(mut self, limits: Option<Arc<nbd::Limits>>) -> Self {
        self.nbd_limits = limits;
        self
    }

    /// Where relative paths of caches' write logs are taken from.
    pub fn data_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.data_dir = dir;
        self
    }

    /// Whether `/metrics` labels tenant series with client addresses.
    pub fn metrics_client_labels(mut self, on: bool) -> Self {
        self.metrics_client_labels = on;
        self
    }

    /// The backend's queue the exports' backends wait in.
    pub fn bandwidth(&self) -> &Arc<FairQueue> {
        &self.bandwidth
    }

    /// The demote path exclusive exports' backends register with.
    pub fn demoter(&self) -> &Demoter {
        &self.demoter
    }

    /// The upstream links, for health reports.
    pub fn upstreams(&self) -> &UpstreamLinks {
        &self.upstreams
    }

    /// Registers an export served by `backend`, with its hot tier if any.
    pub fn add_export(
        &mut self,
        info: ExportInfo,
        backend: Arc<dyn cache::Backend>,
        hot_tier: Option<Arc<HotTier>>,
    ) -> Result<(), NodeError> {
        self.cache.add_export(&info.name, backend)?;
        if let Some(t) = hot_tier {
            self.hot_tiers.insert(info.name.clone(), t);
        }
        let index = self.export_index.len() as u64;
        self.export_index.insert(info.name.clone(), index);
        self.exports.insert(info.name.clone(), info);
        Ok(())
    }

    /// The state, with one observer per tenant owning an export: its profiled range is
    /// the tenant's exports' blocks, capped at four times the node's cache; a phantom
    /// policy it cannot build leaves it profiling LRU only (logged).
    pub fn build(self) -> ControlPlane {
        let bs = self.cache.block_size() as u64;
        let mut observers = BTreeMap::new();
        for tenant in self.exports.values().map(|e| e.tenant.as_str()) {
            if observers.contains_key(tenant) {
                continue;
            }
            let blocks: u64 = self
                .exports
                .values()
                .filter(|e| e.tenant == tenant)
                .map(|e| e.size.div_ceil(bs))
                .sum();
            let range = blocks.min(self.cache.total_blocks() as u64 * 4);
            let o = TenantObserver::new(range, &self.phantom_policies).unwrap_or_else(|e| {
                tracing::warn!(tenant, error = %e, "phantom caches not built; profiling LRU only");
                TenantObserver::new(range, &[]).expect("no phantom policies")
            });
            observers.insert(tenant.to_string(), Arc::new(o));
        }
        ControlPlane {
            cache: self.cache,
            level: self.level,
            started: self.started,
            exports: self.exports,
            hot_tiers: self.hot_tiers,
            export_index: self.export_index,
            observers,
            profiled: Mutex::default(),
            bandwidth: self.bandwidth,
            name: self.name,
            epoch: new_epoch(),
            demoter: self.demoter,
            upstreams: self.upstreams,
            nbd_limits: self.nbd_limits,
            data_dir: self.data_dir,
            metrics_client_labels: self.metrics_client_labels,
            risk: crate::risk::Risk::default(),
        }
    }
}
