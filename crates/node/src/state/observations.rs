//! `GET /v1/observations`: the node's observers and counters turned into the contract's
//! answer ([`api::node::NodeObservations`]), cumulative since the node started; this is
//! the one place that builds it. A controller takes differences between polls and
//! recognises a restart by the `epoch`.

use super::ControlPlane;
use api::bandwidth::BackendView;
use api::node::{NodeObservations, TenantObservations};

impl ControlPlane {
    /// Everything the node observed, cumulative since it started.
    pub fn observations(&self) -> NodeObservations {
        let bs = self.cache.block_size() as u64;
        let tenants = self
            .tenant_names()
            .into_iter()
            .map(|t| self.tenant_observations(&t, bs))
            .collect();
        NodeObservations {
            version: api::API_VERSION,
            node: self.name.clone(),
            level: self.level,
            block_size: bs,
            cache_size: self.cache.total_blocks() as u64 * bs,
            uptime_ms: self.started.elapsed().as_millis() as u64,
            epoch: self.epoch.clone(),
            tenants,
            tiers: self.tier_views(),
        }
    }

    fn tenant_observations(&self, name: &str, bs: u64) -> TenantObservations {
        let counters = self.tenant_counters(name);
        let (latency, served, curves) = match self.observer(name) {
            Some(o) => {
                let (l, s) = o.latency_view();
                (l, s, o.curves(bs))
            }
            None => Default::default(),
        };
        let cache = self
            .cache_of_tenant(name)
            .and_then(|id| self.cache(id).ok());
        TenantObservations {
            tenant: name.to_string(),
            size: cache.as_ref().map_or(0, |c| c.size_bytes),
            eviction: cache.as_ref().map(|c| c.stats.eviction.clone()),
            write_policy: cache.as_ref().map(|c| c.stats.write_policy.clone()),
            admission: cache.as_ref().map(|c| c.stats.admission.clone()),
            resident_blocks: cache.as_ref().map(|c| c.stats.resident),
            dirty_blocks: cache.as_ref().map(|c| c.stats.dirty),
            cache: cache.map(|c| c.name),
            requests: counters.reads + counters.writes,
            read_bytes: counters.read_bytes,
            write_bytes: counters.write_bytes,
            lookups: counters.hits + counters.misses,
            hits: counters.hits,
            latency,
            served,
            curves,
            backend: self.backend_view(name),
        }
    }

    /// The tenant's use of the backend and its proportion.
    fn backend_view(&self, name: &str) -> BackendView {
        let b = self.bandwidth.tenant(name);
        BackendView {
            requests: b.requests,
            bytes: b.bytes,
            service_ms: b.service_ns as f64 / 1e6,
            queue_ms: b.queue_ns as f64 / 1e6,
            proportion: self.bandwidth.proportion(name),
        }
    }
}
