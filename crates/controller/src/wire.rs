//! The service's records in the contract's form (`api::controller`): the plan with nodes
//! and volumes by name ([`plan_view`]), a shortfall, a node of the registry. Only
//! conversions live here; what the views show is [`crate::views`]'.

use crate::registry::NodeEntry;
use api::controller::{
    BoostView, ConsolidatedView, NodeView, PartitionView, PlanView, ScaleOutView, SharesView,
    Shortfall, TenantPlanView,
};
use control::{Layout, Partition, Plan, TenantPlan, Topology};

/// `control`'s shortfall as the contract's.
pub fn shortfall(s: &control::Shortfall) -> Shortfall {
    Shortfall {
        tenant: s.tenant.clone(),
        target_ms: s.target_ms,
        predicted_ms: s.predicted_ms,
        reason: s.reason.clone(),
    }
}

/// A node of the registry as `GET /v1/nodes` shows it (without its token).
pub fn node_view(e: &NodeEntry) -> NodeView {
    NodeView {
        name: e.name.clone(),
        level: e.level,
        api: e.api.clone(),
        nbd: e.nbd.clone(),
        cache_size: e.cache_size,
        block_size: e.block_size,
        epoch: e.epoch.clone(),
        exports: e.exports.clone(),
        up: e.up,
        failures: e.failures,
        programmed: e.programmed.clone(),
        last_error: e.last_error.clone(),
        last_seen: e.last_seen,
        suspect: e.suspect.clone(),
        degraded: e.degraded.clone(),
        tiers: e.tiers.clone(),
    }
}

/// The name of node `i` of `nodes`, or `#i` where the topology has no such node (a plan
/// older than the nodes it is shown on).
fn name(nodes: &[control::Node], i: usize) -> String {
    nodes
        .get(i)
        .map_or_else(|| format!("#{i}"), |n| n.name.clone())
}

fn partition(nodes: &[control::Node], p: &Partition, bs: u64) -> PartitionView {
    PartitionView {
        node: name(nodes, p.node),
        size: p.size,
        bytes: p.size * bs,
        reason: p.reason.to_string(),
    }
}

/// One volume's part of the plan by name.
pub fn tenant_plan_view(topo: &Topology, tp: &TenantPlan) -> TenantPlanView {
    let bs = topo.block_size;
    TenantPlanView {
        tenant: tp.tenant.clone(),
        l1: partition(&topo.hosts, &tp.l1, bs),
        l2: tp
            .l2
            .iter()
            .map(|p| partition(&topo.servers, p, bs))
            .collect(),
        eviction: tp.eviction.clone(),
        eviction_reason: tp.eviction_reason.clone(),
        admission: tp.admission.clone(),
        predicted_latency_ms: tp.predicted_latency_ms,
        target_latency_ms: tp.target_latency_ms,
        slo_met: tp.slo_met,
    }
}

/// The plan by name, on the topology it was planned on (or the one now).
pub fn plan_view(topo: &Topology, plan: &Plan) -> PlanView {
    let tenant = |i: usize| {
        plan.tenants
            .get(i)
            .map_or_else(|| format!("#{i}"), |t| t.tenant.clone())
    };
    PlanView {
        interval: plan.interval,
        time: plan.time,
        layout: match plan.layout {
            Layout::Partitioned => "partitioned",
            Layout::Shared => "shared",
            Layout::Alone => "alone",
            Layout::PartitionedLevel1 => "partitioned-level1",
            Layout::PartitionedLevel2 => "partitioned-level2",
        }
        .into(),
        tenants: plan
            .tenants
            .iter()
            .map(|tp| tenant_plan_view(topo, tp))
            .collect(),
        bandwidth: plan
            .bandwidth
            .iter()
            .map(|b| SharesView {
                node: match b.level.as_str() {
                    "host" => name(&topo.hosts, b.node),
                    _ => name(&topo.servers, b.node),
                },
                level: b.level.clone(),
                shares: b.shares.iter().map(|&(i, p)| (tenant(i), p)).collect(),
            })
            .collect(),
        boost: plan
            .boost
            .iter()
            .map(|b| BoostView {
                node: name(&topo.servers, b.server),
                threshold: b.threshold,
                justify: b.justify,
            })
            .collect(),
        scale_out: plan
            .scale_out
            .iter()
            .map(|s| ScaleOutView {
                tenant: tenant(s.tenant),
                total: s.total,
                host: s.host,
                storage: s.storage,
                alpha: s.alpha,
                predicted_ms: s.predicted_ms,
            })
            .collect(),
        consolidated: plan
            .consolidated
            .iter()
            .map(|c| ConsolidatedView {
                image: c.image.clone(),
                server: name(&topo.servers, c.server),
                size: c.size,
                bytes: c.size * topo.block_size,
                readers: c.readers.iter().map(|&i| tenant(i)).collect(),
                predicted_hit_ratio: c.predicted_hit_ratio,
                predicted_ms: c.predicted_ms,
                reason: c.reason.clone(),
                applied: None,
            })
            .collect(),
        infeasible: plan.infeasible.iter().map(shortfall).collect(),
        predicted_fair_speedup: plan.predicted_fair_speedup,
    }
}
