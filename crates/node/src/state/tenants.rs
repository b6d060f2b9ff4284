//! The node's tenants (the owners of its exports): their latency recorders, observers
//! and counters, and the cache their rules route to.

use super::{lock, NodeState};
use crate::latency::Latency;
use crate::observe::TenantObserver;
use api::node::TenantInfo;
use cache::CacheId;
use std::sync::Arc;

/// Bits of a profiled block key left for the block number (the export's index above).
const KEY_BLOCK_BITS: u32 = 44;

impl NodeState {
    /// The latency recorder of a tenant (export, client).
    pub fn latency(&self, export: &str, client: &str) -> Arc<Latency> {
        lock(&self.latency)
            .entry((export.to_string(), client.to_string()))
            .or_default()
            .clone()
    }

    /// Every request of `tenant` (its exports' recorders, all clients) in one histogram.
    pub fn tenant_histogram(&self, tenant: &str) -> hdrhistogram::Histogram<u64> {
        let lat: Vec<Arc<Latency>> = lock(&self.latency)
            .iter()
            .filter(|((export, _), _)| self.exports.get(export).is_some_and(|e| e.tenant == tenant))
            .map(|(_, l)| l.clone())
            .collect();
        let mut h = Latency::empty();
        for l in lat {
            l.merge_into(&mut h);
        }
        h
    }

    /// Every tenant that sent a request.
    pub fn tenants(&self) -> Vec<TenantInfo> {
        let lat: Vec<_> = lock(&self.latency)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        lat.into_iter()
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

    /// The profiler and latency of `tenant` (made on first use; its range is the tenant's
    /// exports, capped at four times the node's cache).
    pub fn observer(&self, tenant: &str) -> Arc<TenantObserver> {
        let mut m = lock(&self.observers);
        if let Some(o) = m.get(tenant) {
            return o.clone();
        }
        let bs = self.cache.block_size() as u64;
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
        let o = Arc::new(o);
        m.insert(tenant.to_string(), o.clone());
        o
    }

    /// A tenant's counters summed over its exports and clients.
    pub fn tenant_counters(&self, tenant: &str) -> cache::TenantSnapshot {
        let keys: Vec<(String, String)> = lock(&self.latency).keys().cloned().collect();
        let mut sum = cache::TenantSnapshot::default();
        for (export, client) in keys {
            if self.exports.get(&export).is_none_or(|e| e.tenant != tenant) {
                continue;
            }
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
}
