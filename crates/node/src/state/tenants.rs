//! The node's tenants (the owners of its exports): their observers (profile and latency
//! recorders, see [`crate::observe`]), their counters, and the caches their rules route
//! to.

use super::NodeState;
use crate::latency::Latency;
use crate::observe::TenantObserver;
use api::node::TenantInfo;
use cache::CacheId;
use std::sync::Arc;

/// Bits of a profiled block key left for the block number (the export's index above).
const KEY_BLOCK_BITS: u32 = 44;

impl NodeState {
    /// The latency recorder of `export`'s `client` (its tenant's, made on first use); a
    /// recorder of no tenant's for an export the node does not serve.
    pub fn latency(&self, export: &str, client: &str) -> Arc<Latency> {
        match self
            .exports
            .get(export)
            .and_then(|e| self.observers.get(&e.tenant))
        {
            Some(o) => o.recorder(export, client),
            None => Arc::default(),
        }
    }

    /// Every `(export, client)` that connected, with its recorder, in that order.
    fn recorders(&self) -> Vec<((String, String), Arc<Latency>)> {
        let mut all: Vec<_> = self
            .observers
            .values()
            .flat_map(|o| o.recorders())
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Every tenant that sent a request.
    pub fn tenants(&self) -> Vec<TenantInfo> {
        self.recorders()
            .into_iter()
            .map(|((export, client), l)| {
                let counters = self
                    .cache
                    .tenant_stats(&export, &client)
                    .unwrap_or_default();
                let lookups = counters.hits + counters.misses;
                TenantInfo {
                    tenant: self
                        .exports
                        .get(&export)
                        .map(|e| e.tenant.clone())
                        .unwrap_or_default(),
                    hit_ratio: if lookups == 0 {
                        0.0
                    } else {
                        counters.hits as f64 / lookups as f64
                    },
                    reads: counters.reads,
                    writes: counters.writes,
                    read_bytes: counters.read_bytes,
                    write_bytes: counters.write_bytes,
                    hits: counters.hits,
                    misses: counters.misses,
                    evictions: counters.evictions,
                    writebacks: counters.writebacks,
                    latency: l.summary(),
                    export,
                    client,
                }
            })
            .collect()
    }

    /// The base of an export's profiled block keys (block `b` is `base | b`), unique on
    /// the node.
    pub fn key_base(&self, export: &str) -> u64 {
        self.export_index.get(export).copied().unwrap_or(0) << KEY_BLOCK_BITS
    }

    /// The tenants owning the exports, by name.
    pub fn tenant_names(&self) -> Vec<String> {
        let mut t: Vec<String> = self.exports.values().map(|e| e.tenant.clone()).collect();
        t.sort();
        t.dedup();
        t
    }

    /// The observer of `tenant` (`None` if it owns no export here).
    pub fn observer(&self, tenant: &str) -> Option<&Arc<TenantObserver>> {
        self.observers.get(tenant)
    }

    /// A tenant's counters summed over its exports and clients.
    pub fn tenant_counters(&self, tenant: &str) -> cache::TenantSnapshot {
        let mut sum = cache::TenantSnapshot::default();
        let Some(o) = self.observers.get(tenant) else {
            return sum;
        };
        for ((export, client), _) in o.recorders() {
            let c = self
                .cache
                .tenant_stats(&export, &client)
                .unwrap_or_default();
            sum.reads += c.reads;
            sum.writes += c.writes;
            sum.read_bytes += c.read_bytes;
            sum.write_bytes += c.write_bytes;
            sum.hits += c.hits;
            sum.misses += c.misses;
            sum.evictions += c.evictions;
            sum.writebacks += c.writebacks;
        }
        sum
    }

    /// The cache the rules of `tenant`'s exports route to (the lowest rule id's).
    pub fn cache_of_tenant(&self, tenant: &str) -> Option<CacheId> {
        self.cache
            .rules()
            .into_iter()
            .filter(|(_, r, _)| {
                self.exports
                    .get(&r.export)
                    .is_some_and(|e| e.tenant == tenant)
            })
            .min_by_key(|(id, _, _)| *id)
            .map(|(_, _, c)| c)
    }

    /// The tenants whose exports' rules route to cache `id`.
    pub fn tenants_of_cache(&self, id: CacheId) -> Vec<String> {
        let mut t: Vec<String> = self
            .cache
            .rules()
            .into_iter()
            .filter(|(_, _, c)| *c == id)
            .filter_map(|(_, r, _)| self.exports.get(&r.export).map(|e| e.tenant.clone()))
            .collect();
        t.sort();
        t.dedup();
        t
    }
}
