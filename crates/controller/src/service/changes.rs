//! Changes through the API: nodes registering and beating, tenants created, replaced or
//! deleted, SLOs set. Each change is checked against the whole configuration as it would
//! be after it (names, references, numbers, and `control::Topology::validate`) before
//! anything is written; a rejected change writes nothing and touches no node. An accepted
//! change is written in one store batch and takes effect at the next interval. Only the
//! leader accepts changes; a standby answers 409 naming the leader.

use super::{to_json, unix_now, Inner, Service};
use crate::config::{check_images, check_tenants, TenantConfig};
use crate::error::ServiceError;
use crate::placement::topology;
use crate::registry::{Heartbeat, NodeEntry, Registration};
use crate::store;
use control::Slo;

impl Service {
    /// `POST /v1/nodes/register`.
    pub fn register(&self, r: Registration) -> Result<NodeEntry, ServiceError> {
        self.must_lead()?;
        api::names::check("name", &r.name).map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        for (i, x) in r.exports.iter().enumerate() {
            api::names::check(&format!("exports[{i}].name"), &x.name)
                .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        }
        if r.level != 1 && r.level != 2 {
            return Err(ServiceError::BadRequest(format!(
                "level: {} must be 1 or 2",
                r.level
            )));
        }
        if r.block_size != self.cfg.block_size.0 {
            return Err(ServiceError::BadRequest(format!(
                "block_size: {} differs from the controller's {}",
                r.block_size, self.cfg.block_size.0
            )));
        }
        if r.token.is_empty() {
            return Err(ServiceError::BadRequest("token: must not be empty".into()));
        }
        let mut g = self.lock();
        if let Some(e) = g.nodes.get(&r.name) {
            if e.level != r.level && e.level != 0 {
                return Err(ServiceError::Conflict(format!(
                    "node `{}` is known as level {}, registration says {}",
                    r.name, e.level, r.level
                )));
            }
        }
        let e = g.nodes.entry(r.name.clone()).or_default();
        e.name = r.name.clone();
        e.register(&r, unix_now());
        let out = e.public();
        let nodes: Vec<&NodeEntry> = g.nodes.values().collect();
        self.store.put(&[(store::NODES, Some(to_json(&nodes)))])?;
        tracing::info!(node = %r.name, level = r.level, api = %r.api, epoch = %r.epoch, "node registered");
        Ok(out)
    }

    /// `POST /v1/nodes/{name}/heartbeat`; `NotFound` means "register again".
    pub fn heartbeat(&self, name: &str, hb: Heartbeat) -> Result<(), ServiceError> {
        self.must_lead()?;
        let mut g = self.lock();
        let e = g
            .nodes
            .get_mut(name)
            .filter(|e| e.token.is_some() || self.config_tokens.contains_key(name))
            .ok_or_else(|| ServiceError::NotFound(format!("unknown node `{name}`: register")))?;
        if e.epoch != hb.epoch {
            // Restarted: its registration will bring exports and token; make it register.
            return Err(ServiceError::NotFound(format!(
                "node `{name}` has a new epoch: register again"
            )));
        }
        e.last_seen = unix_now();
        Ok(())
    }

    fn node_levels(g: &Inner) -> Vec<(String, u8)> {
        g.nodes
            .values()
            .map(|n| (n.name.clone(), n.level))
            .collect()
    }

    /// Checks a whole tenant list as it would be after a change.
    fn check_change(&self, g: &Inner, tenants: &[TenantConfig]) -> Result<(), ServiceError> {
        let levels = Self::node_levels(g);
        check_tenants(tenants, &self.config.images, Some(&levels))
            .map_err(ServiceError::BadRequest)?;
        // An image's servers are checked through its readers' (they are the same).
        check_images(&self.config.images, tenants, None).map_err(ServiceError::BadRequest)?;
        let (topo, _) = topology(&self.cfg, tenants, &g.nodes, true);
        topo.validate()
            .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        Ok(())
    }

    fn commit_tenants(
        &self,
        g: &mut Inner,
        tenants: Vec<TenantConfig>,
    ) -> Result<(), ServiceError> {
        self.store
            .put(&[(store::TENANTS, Some(to_json(&tenants)))])?;
        g.tenants = tenants;
        Ok(())
    }

    /// Creates (`create = true`: 409 if it exists) or replaces a tenant.
    pub fn put_tenant(&self, spec: TenantConfig, create: bool) -> Result<(), ServiceError> {
        self.must_lead()?;
        let mut g = self.lock();
        let mut next = g.tenants.clone();
        match next.iter_mut().find(|t| t.name == spec.name) {
            Some(_) if create => {
                return Err(ServiceError::Conflict(format!(
                    "tenant `{}` exists (PUT /v1/tenants/{} replaces it)",
                    spec.name, spec.name
                )))
            }
            Some(t) => *t = spec,
            None => next.push(spec),
        }
        self.check_change(&g, &next)?;
        self.commit_tenants(&mut g, next)
    }

    /// Removes a tenant; the next interval's reconcile removes its caches from the nodes.
    pub fn delete_tenant(&self, name: &str) -> Result<(), ServiceError> {
        self.must_lead()?;
        let mut g = self.lock();
        if !g.tenants.iter().any(|t| t.name == name) {
            return Err(ServiceError::NotFound(format!("unknown tenant `{name}`")));
        }
        let next: Vec<TenantConfig> = g
            .tenants
            .iter()
            .filter(|t| t.name != name)
            .cloned()
            .collect();
        self.commit_tenants(&mut g, next)
    }

    /// Sets (or clears) a tenant's SLO and class.
    pub fn set_slo(
        &self,
        name: &str,
        slo: Option<Slo>,
        class: Option<String>,
    ) -> Result<(), ServiceError> {
        self.must_lead()?;
        let mut g = self.lock();
        let mut next = g.tenants.clone();
        let t = next
            .iter_mut()
            .find(|t| t.name == name)
            .ok_or_else(|| ServiceError::NotFound(format!("unknown tenant `{name}`")))?;
        t.slo = slo;
        if class.is_some() {
            t.class = class;
        }
        self.check_change(&g, &next)?;
        self.commit_tenants(&mut g, next)
    }
}
