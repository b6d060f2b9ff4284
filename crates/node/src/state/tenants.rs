//! The node's tenants (the owners of its exports): their observers (profile and latency
//! recorders, see [`crate::observe`]), their counters, and the caches their rules route
//! to.

use super::ControlPlane;
use crate::latency::Latency;
use crate::observe::TenantObserver;
use api::node::TenantInfo;
use cache::{CacheId, TenantSnapshot};
use std::sync::Arc;

/// Bits of a profiled block key left for the block number (the export's index above).
const KEY_BLOCK_BITS: u32 = 44;

/// One export's client: its tenant, the cache's counters of it, its latency recorder.
pub struct TenantRow {
    /// The export.
    pub export: String,
    /// The client's address.
    pub client: String,
    /// The tenant owning the export.
    pub tenant: String,
    /// The cache's counters of this client.
    pub counters: TenantSnapshot,
    /// Its latency recorder.
    pub latency: Arc<Latency>,
}

impl ControlPlane {
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

    /// Every `(export, client)` that connected, in that order: its tenant, the cache's
    /// counters of it and its latency recorder.
    pub fn tenant_rows(&self) -> Vec<TenantRow> {
        let mut rows: Vec<TenantRow> = self
            .observers
            .iter()
            .flat_map(|(tenant, o)| {
                o.recorders()
                    .into_iter()
                    .map(move |((export, client), latency)| (tenant, export, client, latency))
            })
            .map(|(tenant, export, client, latency)| TenantRow {
                counters: self
                    .cache
                    .tenant_stats(&export, &client)
                    .unwrap_or_default(),
                tenant: tenant.clone(),
                export,
                client,
                latency,
            })
            .collect();
        rows.sort_by(|a, b| (&a.export, &a.client).cmp(&(&b.export, &b.client)));
        rows
    }

    /// Every tenant that sent a request, per export and client (`GET /v1/tenants`: the
    /// one place the cache's tenant counters become the contract's).
    pub fn tenants(&self) -> Vec<TenantInfo> {
        self.tenant_rows()
            .into_iter()
            .map(|r| {
                let c = r.counters;
                let lookups = c.hits + c.misses;
                TenantInfo {
                    tenant: r.tenant,
                    hit_ratio: if lookups == 0 {
                        0.0
                    } else {
                        c.hits as f64 / lookups as f64
                    },
                    reads: c.reads,
                    writes: c.writes,
                    read_bytes: c.read_bytes,
                    write_bytes: c.write_bytes,
                    hits: c.hits,
                    misses: c.misses,
                    evictions: c.evictions,
                    writebacks: c.writebacks,
                    latency: r.latency.summary(),
                    export: r.export,
                    client: r.client,
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
    pub fn tenant_counters(&self, tenant: &str) -> TenantSnapshot {
        let mut sum = TenantSnapshot::default();
        for r in self
            .tenant_rows()
            .into_iter()
            .filter(|r| r.tenant == tenant)
        {
            sum += r.counters;
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
