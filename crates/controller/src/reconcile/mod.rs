//! Reconciling a node to the plan, as a Kubernetes controller does: the desired caches,
//! rules, proportions and hot tiers of one node ([`desired`]) against what the node
//! reports ([`apply::apply`] reads them back first), changing only what differs, so
//! applying the same plan twice changes nothing the second time. A node whose part of
//! the plan is the one its last complete reconcile applied, at the same epoch, and whose
//! poll answer shows its caches as they were read back then, is not called at all
//! ([`Reconciled::holds`]), except on its turn to be checked in full, one interval in
//! [`CHECK_EVERY`]: a steady interval calls a few nodes, not every one.
//!
//! Order on a node: first the caches no plan wants (a deleted tenant's, freeing their
//! memory) with their rules go: a node registered with the controller is the
//! controller's, so a cache made on it by hand goes too. Then caches shrink (freeing
//! memory), then are created and grow and switch eviction, exclusive mode and write
//! policy (each a field of its own), then each exported volume's rule is added. A
//! storage server exporting a shared read-only image gets the image's consolidated cache
//! from `plan.consolidated` (read-only, LRU, inclusive) and one rule sending every client's
//! requests of the image's export (over `[0, size)` when the image's size is declared) to
//! it; the image's readers get no cache of their own there. The node
//! refuses a cache smaller than one block, so a partition planned at 0 keeps one block,
//! taken from the node's largest partition so the node's sum stays within its capacity.
//! Then the node's backend proportions are made the plan's `bandwidth`
//! ([`crate::bandwidth`]), every interval (read back first, and sent only when they
//! differ). Last, each hot tier of a volume is set to the plan's threshold for its server
//! (`plan.boost`, set in place: its candidates keep their counts), or turned off for a
//! volume whose spec turns boosting off. Every call is retried on transport errors and
//! 5xx answers (`api::client::NodeClient`); what still fails is tried again at the next
//! interval.
//!
//! A plan is never applied partly in silence: each field a node refuses is a
//! [`Refusal`] naming the node and the field (`caches.db.size`, `hot_tier.db.threshold`,
//! ...), marked `unsupported` when the node does not know the field or verb (an older
//! node), and everything else is still applied; each field is sent on its own, so one
//! refusal holds up nothing else. The caches are read back after the changes: what the
//! tables show as applied is what the node holds ([`NodeOutcome::applied`]).

use crate::config::ImageSpec;
use crate::placement::PlacedVolume;
use crate::registry::NodeEntry;
use api::client::{CallError, NodeClient};
use api::node::{CacheInfo, HotTierView, Proportions, SHARED_CACHE};
use control::{Plan, Topology};

pub mod apply;
#[cfg(test)]
mod tests;

pub use apply::apply;

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
    /// Write policy (`None`: the node's default, and a cache's is left as it is).
    pub write_policy: Option<String>,
    /// The byte range of each routed export its rule covers (`None`: the whole export).
    pub range: Option<(u64, u64)>,
    /// A consolidated image cache ([`crate::consolidate`]): a node without the export
    /// its rule routes is a refusal, not a node that does not serve the volume.
    pub image: bool,
}

/// One export's hot tier as the plan wants it.
#[derive(Clone, Debug, PartialEq)]
pub struct WantTier {
    /// The export (the volume's name).
    pub export: String,
    /// Placing chunks (the volume's `boost`).
    pub enabled: bool,
    /// The plan's threshold for the node (`None`: no scheme tunes it; the tier keeps its
    /// own).
    pub threshold: Option<u32>,
}

/// What the plan wants on one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Desired {
    /// The caches.
    pub caches: Vec<WantCache>,
    /// The backend proportions per tenant (empty: equal shares;
    /// [`crate::bandwidth::node_proportions`]); `None`: leave them as they are (no plan).
    pub proportions: Option<Proportions>,
    /// The hot tiers of the volumes it serves that it reported.
    pub tiers: Vec<WantTier>,
}

/// One change made on a node, and a field of the plan a node did not take: the
/// contract's types.
pub use api::controller::{Action, Refusal};

/// The caches the plan wants on node `e`: one per volume placed on it, or where the layout
/// shares the node's level ([`control::Layout::shared_at`]: every node under [`control::Layout::Shared`], the
/// `uncontrolled` scheme; the other level of MLMS's one-level baselines) one cache,
/// [`SHARED_CACHE`], of the node's whole memory, that every volume the node exports is
/// routed to.
pub fn desired(
    topo: &Topology,
    plan: &Plan,
    vols: &[PlacedVolume],
    images: &[ImageSpec],
    e: &NodeEntry,
    bs: u64,
    members: &Members,
) -> Desired {
    let mut caches: Vec<WantCache> = Vec::new();
    let exports =
        |v: &PlacedVolume| e.exports.is_empty() || e.exports.iter().any(|x| x.name == v.cache);
    for &i in members.on(e) {
        let (tp, v) = (&plan.tenants[i], &vols[i]);
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
        // A reader of a declared image reads the image's export at level 2: under a
        // shared layout that export goes to the shared cache (once), else the reader has
        // no cache there (its level 2 is the image's consolidated cache, added below).
        let image = v
            .image
            .as_ref()
            .filter(|i| e.level == 2 && images.iter().any(|m| &m.name == *i));
        if image.is_some() && !plan.layout.shared_at(e.level) {
            continue;
        }
        let route = match image {
            Some(i) => {
                (e.exports.is_empty() || e.exports.iter().any(|x| &x.name == i)).then(|| i.clone())
            }
            None => exports(v).then(|| v.cache.clone()),
        };
        if plan.layout.shared_at(e.level) {
            match caches.first_mut() {
                Some(c) => c.routes.extend(route.filter(|r| !c.routes.contains(r))),
                None => caches.push(WantCache {
                    name: SHARED_CACHE.to_string(),
                    size: e.cache_size / bs * bs,
                    eviction: tp.eviction.clone(),
                    admission: tp.admission.clone(),
                    routes: route.into_iter().collect(),
                    exclusive: v.exclusive,
                    write_policy: None,
                    range: None,
                    image: false,
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
            write_policy: v.write_policy.clone(),
            range: None,
            image: false,
        });
    }
    // The consolidated caches of the images this server exports: read-only, LRU,
    // inclusive, every client of the image's export routed to it.
    if e.level == 2 && !plan.layout.shared_at(2) {
        for c in plan
            .consolidated
            .iter()
            .filter(|c| topo.servers.get(c.server).is_some_and(|s| s.name == e.name))
        {
            let size = images
                .iter()
                .find(|m| m.name == c.image)
                .and_then(|m| m.size);
            caches.push(WantCache {
                name: c.image.clone(),
                size: c.size * bs,
                eviction: "lru".into(),
                admission: "demand".into(),
                routes: vec![c.image.clone()],
                exclusive: false,
                write_policy: Some("read-only".into()),
                range: size.map(|s| (0, s.0)),
                image: true,
            });
        }
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
        tiers: tiers(topo, plan, vols, e),
    }
}

/// The hot tiers node `e` reported, as the plan wants them: each volume's on (at the
/// plan's threshold for the node, if the scheme tunes tiers) or off as its spec says; a
/// tier of an export no volume names is left alone.
fn tiers(topo: &Topology, plan: &Plan, vols: &[PlacedVolume], e: &NodeEntry) -> Vec<WantTier> {
    let threshold = plan
        .boost
        .iter()
        .find(|b| topo.servers.get(b.server).is_some_and(|s| s.name == e.name))
        .map(|b| b.threshold);
    e.tiers
        .iter()
        .filter_map(|t| {
            let v = vols.iter().find(|v| v.cache == t.export)?;
            Some(WantTier {
                export: t.export.clone(),
                enabled: v.boost,
                threshold: threshold.filter(|_| v.boost),
            })
        })
        .collect()
}

/// Per node, the tenants the plan gives a partition there, in the plan's order: what
/// [`desired`] looks at for one node (so the desired state of every node is linear in
/// the tenants, not their product with the nodes).
#[derive(Clone, Debug, Default)]
pub struct Members {
    hosts: std::collections::HashMap<String, Vec<usize>>,
    servers: std::collections::HashMap<String, Vec<usize>>,
}

impl Members {
    /// The plan's partitions by node.
    pub fn of(topo: &Topology, plan: &Plan) -> Members {
        let mut m = Members::default();
        for (i, tp) in plan.tenants.iter().enumerate() {
            if let Some(h) = topo.hosts.get(tp.l1.node) {
                m.hosts.entry(h.name.clone()).or_default().push(i);
            }
            for p in &tp.l2 {
                if let Some(s) = topo.servers.get(p.node) {
                    let on = m.servers.entry(s.name.clone()).or_default();
                    if on.last() != Some(&i) {
                        on.push(i);
                    }
                }
            }
        }
        m
    }

    /// The tenants with a partition on node `e` (at its level).
    fn on(&self, e: &NodeEntry) -> &[usize] {
        let by = if e.level == 1 {
            &self.hosts
        } else {
            &self.servers
        };
        by.get(&e.name).map_or(&[], Vec::as_slice)
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

/// One node's reconcile: what it changed, what it refused, and what it holds after.
#[derive(Clone, Debug, Default)]
pub struct NodeOutcome {
    /// The node.
    pub node: String,
    /// The changes made (and tried).
    pub actions: Vec<Action>,
    /// The fields it did not take.
    pub refused: Vec<Refusal>,
    /// Its caches as read back after the changes (`None`: it could not be read).
    pub applied: Option<Vec<CacheInfo>>,
    /// Its hot tiers after the changes, where any was wanted.
    pub tiers: Vec<HotTierView>,
    /// The call that stopped the reconcile before it read the node (it could not be
    /// reached): nothing was applied.
    pub unreachable: Option<CallError>,
}

impl NodeOutcome {
    /// Whether the node now holds the whole plan's part for it.
    pub fn complete(&self) -> bool {
        self.unreachable.is_none() && self.refused.is_empty()
    }

    /// The first thing that kept it from holding the plan, in words.
    pub fn first_error(&self) -> Option<String> {
        match (&self.unreachable, self.refused.first()) {
            (Some(e), _) => Some(e.to_string()),
            (None, Some(r)) => Some(r.describe()),
            (None, None) => None,
        }
    }
}

/// One interval in this many a node whose part of the plan has not changed is called
/// anyway and checked field by field ([`Reconciled::holds`]); the nodes take turns, so
/// each interval checks about one node in this many.
pub const CHECK_EVERY: usize = 8;

/// What a node's last complete reconcile left on it: at its epoch then, the part of the
/// plan it was made to hold and what it held after (as read back).
#[derive(Clone, Debug)]
pub struct Reconciled {
    /// The node's epoch at that reconcile (a restarted node is programmed afresh).
    pub epoch: String,
    /// Its part of the plan then.
    pub want: Desired,
    /// Its caches and hot tiers as they were read back then (`actions` and `refused`
    /// empty: it held the whole part).
    pub outcome: NodeOutcome,
}

impl Reconciled {
    /// Whether the node still holds what this reconcile left, so it need not be called
    /// for `want`: the same epoch and the same part of the plan, and every cache its poll
    /// answer (`polled`: per cache, as [`crate::poll::absorb`] keeps them) names at the
    /// size and eviction policy that were read back (a cache resized, replaced or added
    /// by hand since is a change to undo). Rules, proportions and hot tiers are not in
    /// the poll answer: a change to them by hand is undone at the node's turn to be
    /// checked ([`CHECK_EVERY`]).
    pub fn holds(
        &self,
        epoch: &str,
        want: &Desired,
        polled: Option<&std::collections::HashMap<String, api::node::TenantObservations>>,
    ) -> bool {
        let Some(polled) = polled else {
            return false;
        };
        let Some(applied) = self.outcome.applied.as_ref() else {
            return false;
        };
        self.epoch == epoch
            && &self.want == want
            && polled.values().all(|t| match t.cache.as_deref() {
                None => true,
                Some(c) => applied.iter().any(|a| {
                    a.name == c
                        && a.size_bytes == t.size
                        && t.eviction
                            .as_deref()
                            .map_or(true, |e| e == a.stats.eviction)
                }),
            })
    }

    /// The outcome of an interval that left the node alone: what it held then.
    pub fn unchanged(&self) -> NodeOutcome {
        self.outcome.clone()
    }
}

/// Every node of `work` made to match its plan, all at once (bounded): a node busy
/// writing back what a shrink evicts holds up only its own reconcile.
pub fn apply_all(work: &[Work]) -> Vec<NodeOutcome> {
    crate::fanout::map_bounded(work, crate::fanout::MAX_CONCURRENT_NODE_CALLS, |w| {
        if w.fresh {
            tracing::info!(node = %w.node, "programming the node from the plan");
        }
        apply(&w.client, &w.node, &w.want)
    })
}
