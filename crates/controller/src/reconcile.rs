//! Reconciling a node to the plan, as a Kubernetes controller does: the desired caches
//! and rules of one node ([`desired`]) against what the node reports ([`apply`] reads
//! `/v1/caches` and `/v1/rules` back first), changing only what differs, so applying the
//! same plan twice changes nothing the second time.
//!
//! Order on a node: shrink caches first (freeing memory), then create and grow, then add
//! the rule of each volume the node exports, having first removed the caches no plan wants (a
//! deleted tenant's, freeing their memory) with their rules: a node registered with the controller is the
//! controller's, so a cache made on it by hand goes too. The node refuses a cache smaller than one
//! block, so a partition planned at 0 keeps one block, taken from the node's largest
//! partition so the node's sum stays within its capacity. Last, the node's backend
//! proportions are made the plan's `bandwidth` ([`crate::bandwidth`]), every interval
//! (read back first, and sent only when they differ). Every call is retried on
//! transport errors and 5xx answers (`api::client::NodeClient`); a node that still fails is
//! reported and tried again at the next interval.

use crate::placement::Volume;
use crate::registry::NodeEntry;
use api::client::{CallError, NodeClient};
use api::node::{CacheInfo, CachePatch, CreateCache, CreateRule, Proportions, SHARED_CACHE};
use control::{Plan, Topology};
use serde::{Deserialize, Serialize};
use units::ByteSize;

/// One cache the plan wants on a node.
#[derive(Clone, Debug, PartialEq)]
pub struct WantCache {
    /// Its name (the volume's).
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// Eviction policy.
    pub eviction: String,
    /// Admission policy.
    pub admission: String,
    /// The exports whose rule sends their requests to it: the volume's own if the node
    /// exports it, or every exported volume's for the shared cache.
    pub routes: Vec<String>,
    /// Exclusive levels (`upper` on a level-1 node, `lower` on a level-2 node).
    pub exclusive: bool,
}

/// What the plan wants on one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Desired {
    /// The caches.
    pub caches: Vec<WantCache>,
    /// The backend proportions per tenant (empty: equal shares;
    /// [`crate::bandwidth::node_proportions`]); `None`: leave them as they are (no plan).
    pub proportions: Option<Proportions>,
}

/// One change made on a node.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Action {
    /// The node.
    pub node: String,
    /// `create`, `resize`, `policy`, `rule`, `unrule`, `remove`.
    pub verb: String,
    /// The cache.
    pub cache: String,
    /// What changed (`1048576 -> 2097152`).
    pub detail: String,
    /// `ok` or the node's reason.
    pub result: String,
}

/// The caches the plan wants on node `e`: one per volume placed on it, or where the layout
/// shares the node's level ([`control::Layout::shared_at`]: every node under [`control::Layout::Shared`], the
/// `uncontrolled` scheme; the other level of MLMS's one-level baselines) one cache,
/// [`SHARED_CACHE`], of the node's whole memory, that every volume the node exports is
/// routed to.
pub fn desired(topo: &Topology, plan: &Plan, vols: &[Volume], e: &NodeEntry, bs: u64) -> Desired {
    let mut caches: Vec<WantCache> = Vec::new();
    let exports = |v: &Volume| e.exports.is_empty() || e.exports.iter().any(|x| x.name == v.cache);
    for (i, tp) in plan.tenants.iter().enumerate() {
        let v = &vols[i];
        let blocks = if e.level == 1 && topo.hosts[tp.l1.node].name == e.name {
            Some(tp.l1.size)
        } else if e.level == 2 {
            tp.l2
                .iter()
                .find(|p| topo.servers[p.node].name == e.name)
                .map(|p| p.size)
        } else {
            None
        };
        let Some(b) = blocks else {
            continue;
        };
        let route = exports(v).then(|| v.cache.clone());
        if plan.layout.shared_at(e.level) {
            match caches.first_mut() {
                Some(c) => c.routes.extend(route),
                None => caches.push(WantCache {
                    name: SHARED_CACHE.to_string(),
                    size: e.cache_size / bs * bs,
                    eviction: tp.eviction.clone(),
                    admission: tp.admission.clone(),
                    routes: route.into_iter().collect(),
                    exclusive: v.exclusive,
                }),
            }
            continue;
        }
        // A volume on several hosts is several tenants: on a server, its one cache
        // holds all their level-2 partitions.
        if let Some(c) = caches.iter_mut().find(|c| c.name == v.cache) {
            c.size += b * bs;
            continue;
        }
        caches.push(WantCache {
            name: v.cache.clone(),
            size: b * bs,
            eviction: tp.eviction.clone(),
            admission: tp.admission.clone(),
            routes: route.into_iter().collect(),
            exclusive: v.exclusive,
        });
    }
    // At least one block each, the sum within the node's memory.
    let cap = e.cache_size / bs * bs;
    for c in &mut caches {
        c.size = c.size.max(bs);
    }
    let total: u64 = caches.iter().map(|c| c.size).sum();
    if total > cap && cap > 0 {
        let mut excess = total - cap;
        caches.sort_by_key(|c| std::cmp::Reverse(c.size));
        for c in &mut caches {
            let take = excess.min(c.size.saturating_sub(bs));
            c.size -= take;
            excess -= take;
            if excess == 0 {
                break;
            }
        }
        caches.sort_by(|a, b| a.name.cmp(&b.name));
    }
    Desired {
        caches,
        proportions: Some(crate::bandwidth::node_proportions(topo, plan, vols, e)),
    }
}

/// One node to reconcile: its client, what the plan wants on it, and whether it is
/// fresh (not yet programmed at its current epoch: logged when it is).
pub struct Work {
    /// The node.
    pub node: String,
    /// Its client.
    pub client: NodeClient,
    /// What the plan wants on it.
    pub want: Desired,
    /// Not yet programmed at its current epoch.
    pub fresh: bool,
}

/// A node's reconcile: done, or the error it stopped at.
pub type Outcome = (String, Result<(), CallError>);

/// Every node of `work` made to match its plan, all at once (bounded): a node busy
/// writing back what a shrink evicts holds up only its own reconcile. The actions done on
/// all nodes, and each node's outcome.
pub fn apply_all(work: &[Work]) -> (Vec<Action>, Vec<Outcome>) {
    let done: Vec<_> =
        crate::fanout::map_bounded(work, crate::fanout::MAX_CONCURRENT_NODE_CALLS, |w| {
            if w.fresh {
                tracing::info!(node = %w.node, "programming the node from the plan");
            }
            (w.node.clone(), apply(&w.client, &w.node, &w.want))
        });
    let mut actions = Vec::new();
    let mut outcomes = Vec::new();
    for (name, r) in done {
        match r {
            Ok(a) => {
                actions.extend(a);
                outcomes.push((name, Ok(())));
            }
            Err((a, e)) => {
                actions.extend(a);
                outcomes.push((name, Err(e)));
            }
        }
    }
    (actions, outcomes)
}

/// Makes node `name` match `want`; on failure, the actions done so far and the error.
pub fn apply(
    c: &NodeClient,
    name: &str,
    want: &Desired,
) -> Result<Vec<Action>, (Vec<Action>, CallError)> {
    let mut actions = Vec::new();
    let caches = match c.caches() {
        Ok(v) => v,
        Err(e) => return Err((actions, e)),
    };
    let act = |verb: &str, cache: &str, detail: String, r: &Result<(), CallError>| Action {
        node: name.to_string(),
        verb: verb.into(),
        cache: cache.into(),
        detail,
        result: match r {
            Ok(()) => "ok".into(),
            Err(e) => e.to_string(),
        },
    };
    let mut first_err = None;
    // Caches no plan wants (a deleted tenant's, a volume moved elsewhere): their rules
    // first, so no request reaches a cache being removed, then the cache (the node writes
    // its dirty blocks back before it answers).
    let unwanted: Vec<&CacheInfo> = caches
        .iter()
        .filter(|h| !want.caches.iter().any(|w| w.name == h.name))
        .collect();
    if !unwanted.is_empty() {
        let rules = c.rules().unwrap_or_default();
        for h in unwanted {
            for r in rules.iter().filter(|r| r.cache == h.id) {
                let res = c.remove_rule(r.id).map(|_| ());
                actions.push(act("unrule", &h.name, format!("rule {}", r.id), &res));
                if let Err(e) = res {
                    first_err.get_or_insert(e);
                }
            }
            // A name outside the rule (left by an older node) cannot be a URL segment
            // (`..` would resolve away): such a cache is removed by its id.
            let key = match api::names::is_valid(&h.name) {
                true => h.name.clone(),
                false => h.id.to_string(),
            };
            let res = c.remove_cache(&key).map(|_| ());
            actions.push(act(
                "remove",
                &h.name,
                format!("{} bytes, no plan wants it", h.size_bytes),
                &res,
            ));
            if let Err(e) = res {
                first_err.get_or_insert(e);
            }
        }
    }
    // Shrinks first, then creates, grows and policy switches.
    for pass in 0..2 {
        for w in &want.caches {
            let have = caches.iter().find(|x| x.name == w.name);
            let r = match (pass, have) {
                (0, Some(h)) if w.size < h.size_bytes => {
                    let patch = CachePatch {
                        size: Some(ByteSize(w.size)),
                        ..Default::default()
                    };
                    let r = c.configure_cache(&w.name, &patch).map(|_| ());
                    actions.push(act(
                        "resize",
                        &w.name,
                        format!("{} -> {}", h.size_bytes, w.size),
                        &r,
                    ));
                    r
                }
                (1, None) => {
                    let spec = CreateCache {
                        name: w.name.clone(),
                        size: ByteSize(w.size),
                        eviction: Some(w.eviction.clone()),
                        admission: Some(w.admission.clone()),
                        exclusive: w.exclusive,
                        ..Default::default()
                    };
                    let r = c.create_cache(&spec).map(|_| ());
                    actions.push(act(
                        "create",
                        &w.name,
                        format!(
                            "{} bytes, {}{}",
                            w.size,
                            w.eviction,
                            if w.exclusive { ", exclusive" } else { "" }
                        ),
                        &r,
                    ));
                    r
                }
                (1, Some(h)) => {
                    let grow = (w.size > h.size_bytes).then_some(w.size);
                    let evict = (!h.stats.eviction.is_empty() && h.stats.eviction != w.eviction)
                        .then_some(w.eviction.as_str());
                    // A node that does not report the mode is left as it is.
                    let excl = (!h.stats.exclusive.is_empty()
                        && (h.stats.exclusive != "off") != w.exclusive)
                        .then_some(w.exclusive);
                    if grow.is_none() && evict.is_none() && excl.is_none() {
                        continue;
                    }
                    let patch = CachePatch {
                        size: grow.map(ByteSize),
                        eviction: evict.map(str::to_string),
                        exclusive: excl,
                        ..Default::default()
                    };
                    let r = c.configure_cache(&w.name, &patch).map(|_| ());
                    let mut what = Vec::new();
                    if let Some(g) = grow {
                        what.push(format!("{} -> {}", h.size_bytes, g));
                    }
                    if let Some(e) = evict {
                        what.push(format!("{} -> {}", h.stats.eviction, e));
                    }
                    if let Some(x) = excl {
                        what.push(format!("exclusive {} -> {x}", h.stats.exclusive));
                    }
                    let verb = if grow.is_some() {
                        "resize"
                    } else if evict.is_some() {
                        "policy"
                    } else {
                        "exclusive"
                    };
                    actions.push(act(verb, &w.name, what.join(", "), &r));
                    r
                }
                _ => continue,
            };
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
    }
    // Rules: every routed export's requests go to its cache.
    let rules = match c.rules() {
        Ok(v) => v,
        Err(e) => return Err((actions, e)),
    };
    let caches = c.caches().unwrap_or(caches);
    for w in &want.caches {
        let Some(id) = caches.iter().find(|x| x.name == w.name).map(|x| x.id) else {
            continue;
        };
        for export in &w.routes {
            let mine = rules
                .iter()
                .any(|r| &r.export == export && r.cache == id && r.client.is_none());
            if mine {
                continue;
            }
            // A whole-export rule to another cache would overlap: replace it.
            for r in rules
                .iter()
                .filter(|r| &r.export == export && r.cache != id && r.client.is_none())
            {
                let res = c.remove_rule(r.id).map(|_| ());
                actions.push(act("unrule", export, format!("rule {}", r.id), &res));
            }
            let rule = CreateRule {
                export: export.clone(),
                cache: w.name.clone(),
                ..Default::default()
            };
            let r = c.create_rule(&rule).map(|_| ());
            let r = match r {
                // A node that does not export the volume: nothing to route.
                Err(CallError::Status { status: 404, .. }) => continue,
                r => r,
            };
            actions.push(act(
                "rule",
                export,
                format!("export {export} -> cache {}", w.name),
                &r,
            ));
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
    }
    // Bandwidth proportions, every interval (the learners may change them every time),
    // sent when they differ from the node's (or it does not say).
    let have: Option<Proportions> = c
        .get_json("/v1/proportions")
        .ok()
        .and_then(|v| serde_json::from_value(v["proportions"].clone()).ok());
    let same = |a: &Proportions, b: &Proportions| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|((ka, va), (kb, vb))| ka == kb && (va - vb).abs() < 1e-12)
    };
    if let Some(p) = want
        .proportions
        .as_ref()
        .filter(|p| !have.as_ref().is_some_and(|h| same(h, p)))
    {
        let r = c.set_proportions(p).map(|_| ());
        let detail = if p.is_empty() {
            "equal shares".to_string()
        } else {
            p.iter()
                .map(|(t, v)| format!("{t} {v:.4}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        actions.push(act("proportions", "", detail, &r));
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    match first_err {
        None => Ok(actions),
        Some(e) => Err((actions, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use control::{Layout, Partition, Reason, TenantPlan};

    #[test]
    fn zero_partitions_keep_a_block_within_capacity() {
        let topo = Topology {
            block_size: 4096,
            hosts: vec![control::Node {
                name: "h".into(),
                capacity: 10,
                hot_tier: false,
            }],
            servers: vec![control::Node {
                name: "s".into(),
                capacity: 10,
                hot_tier: false,
            }],
            levels: Default::default(),
            service: control::ServiceTimes {
                l1_hit_ms: 0.1,
                l2_hit_ms: 1.0,
                miss_ms: 5.0,
            },
            tenants: vec![],
        };
        let tp = |name: &str, l1: u64| TenantPlan {
            tenant: name.into(),
            l1: Partition {
                node: 0,
                size: l1,
                reason: Reason::FairShare,
            },
            l2: vec![Partition {
                node: 0,
                size: 5,
                reason: Reason::FairShare,
            }],
            eviction: "lru".into(),
            eviction_reason: String::new(),
            admission: "demand".into(),
            predicted_latency_ms: 1.0,
            target_latency_ms: None,
            slo_met: None,
            interval_target_ms: None,
        };
        let plan = Plan {
            interval: 1,
            time: 0.0,
            layout: Layout::Partitioned,
            tenants: vec![tp("a", 10), tp("b", 0)],
            bandwidth: vec![],
            boost: vec![],
            infeasible: vec![],
            predicted_fair_speedup: 1.0,
        };
        let vols: Vec<Volume> = ["a", "b"]
            .iter()
            .map(|n| Volume {
                name: n.to_string(),
                cache: n.to_string(),
                owner: n.to_string(),
                host: "h".into(),
                servers: vec!["s".into()],
                exclusive: false,
            })
            .collect();
        let e = NodeEntry {
            name: "h".into(),
            level: 1,
            cache_size: 10 * 4096,
            up: true,
            ..Default::default()
        };
        let d = desired(&topo, &plan, &vols, &e, 4096);
        let sizes: Vec<u64> = d.caches.iter().map(|c| c.size / 4096).collect();
        assert_eq!(sizes, vec![9, 1]);
        let e2 = NodeEntry {
            name: "s".into(),
            level: 2,
            cache_size: 10 * 4096,
            ..e.clone()
        };
        let d = desired(&topo, &plan, &vols, &e2, 4096);
        assert_eq!(d.caches.len(), 2);
        assert!(d.caches.iter().all(|c| c.size == 5 * 4096));
        // Shared: one cache of the node's whole memory, both volumes routed to it.
        let shared = Plan {
            layout: Layout::Shared,
            ..plan
        };
        for node in [&e, &e2] {
            let d = desired(&topo, &shared, &vols, node, 4096);
            assert_eq!(d.caches.len(), 1);
            assert_eq!(d.caches[0].name, SHARED_CACHE);
            assert_eq!(d.caches[0].size, 10 * 4096);
            assert_eq!(d.caches[0].routes, vec!["a".to_string(), "b".to_string()]);
        }
    }
}
