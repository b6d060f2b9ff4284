//! The previous plan as the current topology sees it.

use super::state::ControlState;
use crate::plan::{Plan, TenantPlan};
use crate::topology::{Placement, Topology};

/// The previous plan as the current topology sees it: each tenant's part (by name) and
/// which nodes changed since (see [`damp`](super::damping::damp)).
pub(super) struct Previous<'a> {
    /// Per tenant, its part of the previous plan.
    pub(super) tenant: Vec<Option<&'a TenantPlan>>,
    /// Per host, whether it changed.
    pub(super) host_changed: Vec<bool>,
    /// Per server, whether it changed.
    pub(super) server_changed: Vec<bool>,
}

impl<'a> Previous<'a> {
    pub(super) fn new(
        topo: &Topology,
        place: &Placement,
        prev: &'a Plan,
        state: &ControlState,
    ) -> Previous<'a> {
        let tenant = by_tenant(topo, prev);
        // Partitions the previous plan had on each node, and members that had one there.
        let mut had_h = vec![0usize; topo.hosts.len()];
        let mut had_s = vec![0usize; topo.servers.len()];
        for tp in &prev.tenants {
            if let Some(c) = had_h.get_mut(tp.l1.node) {
                *c += 1;
            }
            for p in &tp.l2 {
                if let Some(c) = had_s.get_mut(p.node) {
                    *c += 1;
                }
            }
        }
        let host_changed = (0..topo.hosts.len())
            .map(|h| {
                let kept = place.hosts[h]
                    .iter()
                    .filter(|&&i| tenant[i].is_some_and(|tp| tp.l1.node == h))
                    .count();
                let cap = state.hosts.get(h).map(|n| n.capacity);
                cap != Some(topo.hosts[h].capacity)
                    || kept != place.hosts[h].len()
                    || had_h[h] != kept
            })
            .collect();
        let server_changed = (0..topo.servers.len())
            .map(|s| {
                let kept = place.servers[s]
                    .iter()
                    .filter(|&&(i, _)| {
                        tenant[i].is_some_and(|tp| tp.l2.iter().any(|p| p.node == s))
                    })
                    .count();
                let cap = state.servers.get(s).map(|n| n.capacity);
                cap != Some(topo.servers[s].capacity)
                    || kept != place.servers[s].len()
                    || had_s[s] != kept
            })
            .collect();
        Previous {
            tenant,
            host_changed,
            server_changed,
        }
    }

    /// Tenant `i`'s previous level-1 size on its host, if it had a partition there.
    pub(super) fn l1(&self, topo: &Topology, i: usize) -> Option<u64> {
        let tp = self.tenant[i]?;
        (tp.l1.node == topo.tenants[i].host).then_some(tp.l1.size)
    }

    /// Tenant `i`'s previous level-2 size on its `k`-th server.
    pub(super) fn l2(&self, topo: &Topology, i: usize, k: usize) -> Option<u64> {
        let s = topo.tenants[i].servers[k];
        let tp = self.tenant[i]?;
        tp.l2.iter().find(|p| p.node == s).map(|p| p.size)
    }

    /// Tenant `i`'s previous sizes, if it had a partition on each of its nodes.
    pub(super) fn sizes(&self, topo: &Topology, i: usize) -> Option<(u64, Vec<u64>)> {
        let l1 = self.l1(topo, i)?;
        let l2 = (0..topo.tenants[i].servers.len())
            .map(|k| self.l2(topo, i, k))
            .collect::<Option<Vec<u64>>>()?;
        Some((l1, l2))
    }
}

/// Per tenant of `topo`, its part of `prev` (by name). When the tenants are those the plan
/// was made for, in the same order (every interval but one whose topology changed), the
/// plan is read by position, without hashing a name.
pub(super) fn by_tenant<'a>(topo: &Topology, prev: &'a Plan) -> Vec<Option<&'a TenantPlan>> {
    let same_order = prev.tenants.len() == topo.tenants.len()
        && prev
            .tenants
            .iter()
            .zip(&topo.tenants)
            .all(|(tp, t)| tp.tenant == t.name);
    if same_order {
        return prev.tenants.iter().map(Some).collect();
    }
    let by_name: std::collections::HashMap<&str, &TenantPlan> = prev
        .tenants
        .iter()
        .map(|tp| (tp.tenant.as_str(), tp))
        .collect();
    topo.tenants
        .iter()
        .map(|t| by_name.get(t.name.as_str()).copied())
        .collect()
}
