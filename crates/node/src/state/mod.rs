//! The node's control plane: the [`cache::CacheNode`] plus what the node adds around it —
//! cache names, online profilers, per-tenant latency histograms and exports' owners.
//!
//! Every API verb and every start-up step from `node.toml` goes through [`NodeState`], so
//! the file and the API can never disagree about what a verb does. Data-path requests go
//! to `cache::CacheNode` directly (see `export`); this module only adds latency timing.
//!
//! This file holds the state and its exports; `caches.rs` the verbs on caches and rules,
//! `log.rs` a cache's durable write log replayed at creation, `tenants.rs` the tenants'
//! recorders, observers and counters.

use crate::error::NodeError;
use crate::hot_tier::HotTier;
use crate::latency::Latency;
use crate::observe::TenantObserver;
use cache::{CacheId, CacheNode};
use mrc::profiler::OnlineProfiler;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

mod caches;
mod log;
mod tenants;

/// Samples kept by each cache's SHARDS profiler (bounded memory, ~100 KiB).
pub const PROFILER_SMAX: usize = 8192;
/// Accesses per profiler window (the windowed curve covers the last one to two).
pub const PROFILER_WINDOW: u64 = 1_000_000;

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

/// The node's state shared by the NBD server and the API.
pub struct NodeState {
    /// The data path and its caches.
    pub cache: Arc<CacheNode>,
    /// This node's level in the hierarchy.
    pub level: u8,
    /// When the node started.
    pub started: Instant,
    exports: BTreeMap<String, ExportInfo>,
    hot_tiers: BTreeMap<String, Arc<HotTier>>,
    profilers: Mutex<BTreeMap<CacheId, Arc<Mutex<OnlineProfiler>>>>,
    latency: Mutex<BTreeMap<(String, String), Arc<Latency>>>,
    /// The backend's queue: every export's backend calls wait in it, shared between
    /// tenants in proportion to their weights ([`crate::bandwidth`]).
    pub bandwidth: Arc<crate::bandwidth::FairQueue>,
    /// The node's name (`[node] name`, else its API address).
    pub name: String,
    /// A random id chosen at start: a controller sees a restart by its change.
    pub epoch: String,
    /// Candidate policies profiled by phantom caches besides LRU.
    pub phantom_policies: Vec<String>,
    export_index: BTreeMap<String, u64>,
    observers: Mutex<BTreeMap<String, Arc<TenantObserver>>>,
    /// The demote path to level 2 (used by exclusive caches on a level-1 node).
    pub demoter: crate::demote::Demoter,
    /// The links to upstream NBD exports (level 1 → level 2), for health reports.
    pub upstreams: crate::upstream::Links,
    /// The NBD server's node-wide limits (bytes in flight, workers), for `/metrics`; set
    /// by `start` before the node is shared.
    pub nbd_limits: Option<Arc<nbd::Limits>>,
    /// Where relative paths of caches' write logs are taken from (`[node] data_dir`).
    pub data_dir: Option<PathBuf>,
    /// Whether `/metrics` labels tenant series with client addresses
    /// (`[node] metrics_client_labels`).
    pub metrics_client_labels: bool,
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

impl NodeState {
    /// A node with `total_blocks` blocks of `block_size` bytes and no exports yet.
    pub fn new(
        total_blocks: usize,
        block_size: usize,
        level: u8,
        backend_depth: usize,
    ) -> Result<Self, NodeError> {
        Ok(NodeState {
            cache: Arc::new(CacheNode::new(total_blocks, block_size)?),
            level,
            started: Instant::now(),
            exports: BTreeMap::new(),
            hot_tiers: BTreeMap::new(),
            profilers: Mutex::default(),
            latency: Mutex::default(),
            bandwidth: Arc::new(crate::bandwidth::FairQueue::new(backend_depth)),
            name: String::new(),
            epoch: new_epoch(),
            phantom_policies: crate::observe::DEFAULT_PHANTOM_POLICIES
                .iter()
                .map(|p| p.to_string())
                .collect(),
            export_index: BTreeMap::new(),
            observers: Mutex::default(),
            demoter: crate::demote::Demoter::new(),
            upstreams: Default::default(),
            nbd_limits: None,
            data_dir: None,
            metrics_client_labels: false,
        })
    }

    /// Registers an export (only before the node is shared).
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
