//! Steps 1 and 2 of an interval, up to the per-node deltas: every known node is asked at
//! once (bounded by [`crate::fanout`]) for its cumulative `/v1/observations` and, when it
//! answers, its `/healthz`; a node that cannot say whether it is healthy keeps what it said
//! last. [`absorb`] then writes what the answers say into the registry (answered, failed,
//! down after `down_after` failures in a row, suspect or believed again, degraded
//! upstreams) and turns each believed answer into the interval's numbers per cache
//! ([`crate::counters::Judge`] over [`crate::observe::Deltas`]), and each storage node's
//! hot tiers into the interval's period ([`TierPeriods`]).

use crate::counters::{Judge, Judgement};
use crate::observe::Deltas;
use crate::registry::NodeEntry;
use api::client::NodeClient;
use api::node::{Health, NodeObservations, UpstreamDown};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// One node's answer: its observations and, if it could say, its health.
pub type Polled = Result<(NodeObservations, Option<Health>), String>;

/// The interval's numbers per node and cache (declared with what reads them).
pub use crate::observe::ByNode;

/// The interval's hot-tier periods per storage node: its tiers' hits and migrations
/// since the previous answer, summed over its exports (SANCACHE's per-period feedback).
pub type TierPeriods = HashMap<String, control::TierObservation>;

/// A node's tiers' hits and migrations in `now` since `before` (the same epoch; else
/// since its start), summed over its exports.
fn tier_period(
    before: Option<&NodeObservations>,
    now: &NodeObservations,
) -> control::TierObservation {
    let before = before.filter(|b| b.epoch == now.epoch);
    let mut out = control::TierObservation::default();
    for t in &now.tiers {
        let b = before.and_then(|b| b.tiers.iter().find(|x| x.export == t.export));
        let (h, m) = b.map_or((0, 0), |b| (b.hits, b.migrations));
        // Counters that went backwards (a tier rebuilt): all of `now` counts.
        let (h, m) = if t.hits < h || t.migrations < m {
            (0, 0)
        } else {
            (h, m)
        };
        out.hits += t.hits - h;
        out.migrations += t.migrations - m;
    }
    out
}

/// Where a registered node is called: its API address and its token (its
/// registration's, else the configuration's `token_file`'s); `None` before it registered.
pub fn address<'a>(
    e: &'a NodeEntry,
    config_tokens: &'a HashMap<String, String>,
) -> Option<(&'a str, &'a str)> {
    let api = e.api.as_deref()?;
    let token = e
        .token
        .as_deref()
        .or_else(|| config_tokens.get(&e.name).map(String::as_str))?;
    Some((api, token))
}

/// The client of a registered node at its [`address`]. Each call is bounded by half the
/// interval (between 0.2 and 5 s).
pub fn client_for(
    e: &NodeEntry,
    config_tokens: &HashMap<String, String>,
    interval: Duration,
) -> Option<NodeClient> {
    let (api, token) = address(e, config_tokens)?;
    let timeout = Duration::from_secs_f64((interval.as_secs_f64() / 2.0).clamp(0.2, 5.0));
    Some(NodeClient::new(api, Some(token), timeout))
}

/// Every node at once (bounded): the poll takes the slowest answer, not the sum. A node
/// that answers is also asked whether it is healthy (`/healthz`: its upstream links).
pub fn poll(targets: &[(String, Option<NodeClient>)]) -> Vec<(String, Polled)> {
    crate::fanout::map_bounded(
        targets,
        crate::fanout::MAX_CONCURRENT_NODE_CALLS,
        |(name, c)| {
            let r = match c {
                Some(c) => c
                    .observations()
                    .map(|o| (o, c.health().ok()))
                    .map_err(|e| e.to_string()),
                None => Err("no API address or token yet (not registered)".into()),
            };
            (name.clone(), r)
        },
    )
}

/// What the poll's answers say, written into the registry, and the interval's numbers of
/// every node that answered with the controller's block size (a node that did not is
/// forgotten by the deltas and the judge, so its next answer starts a new baseline).
pub fn absorb(
    polled: Vec<(String, Polled)>,
    nodes: &mut BTreeMap<String, NodeEntry>,
    judge: &mut Judge,
    deltas: &mut Deltas,
    block_size: u64,
    down_after: u32,
    now: f64,
) -> (ByNode, TierPeriods) {
    let mut by_node = HashMap::new();
    let mut tiers = HashMap::new();
    for (name, r) in polled {
        match r {
            Ok((o, health)) => {
                if !o.tiers.is_empty() {
                    tiers.insert(name.clone(), tier_period(deltas.last(&name), &o));
                }
                let (epoch, cache_size, their_block) =
                    (o.epoch.clone(), o.cache_size, o.block_size);
                let tiers_seen = o.tiers.clone();
                let (d, verdict) = judge.judge(deltas, &name, o, Instant::now());
                if let Some(e) = nodes.get_mut(&name) {
                    if their_block != 0 && their_block != block_size {
                        e.failed(
                            &format!("block size {their_block} differs from the controller's"),
                            down_after,
                        );
                        continue;
                    }
                    e.answered(&epoch, cache_size, now);
                    e.tiers = tiers_seen;
                    note_verdict(e, verdict);
                    if let Some(h) = health {
                        note_health(e, h);
                    }
                }
                by_node.insert(name, d);
            }
            Err(err) => {
                deltas.forget(&name);
                judge.forget(&name);
                if let Some(e) = nodes.get_mut(&name) {
                    if e.failed(&err, down_after) {
                        tracing::warn!(node = %name, %err, "node marked down");
                    }
                }
            }
        }
    }
    (by_node, tiers)
}

/// Keeps a node's verdict on its registry entry, logging a change.
fn note_verdict(e: &mut NodeEntry, v: Judgement) {
    match v {
        Judgement::Suspect(reason) => {
            if e.suspect.is_none() {
                tracing::warn!(node = %e.name, %reason, "node suspect: its counters are not believed; its tenants are planned at their last good interval");
            }
            e.suspect = Some(reason);
        }
        Judgement::Honest | Judgement::Resynced => {
            if let Some(was) = e.suspect.take() {
                tracing::info!(node = %e.name, was = %was, resynced = (v == Judgement::Resynced), "node's counters believed again");
            }
        }
    }
}

/// Keeps what a node's `/healthz` said, logging a change.
fn note_health(e: &mut NodeEntry, h: Health) {
    let down = h.upstreams_down;
    let names = |d: &[UpstreamDown]| {
        d.iter()
            .map(|u| u.export.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !down.is_empty() && names(&down) != names(&e.degraded) {
        tracing::warn!(node = %e.name, exports = %names(&down), "node degraded: upstream links away; their volumes are failing");
    } else if down.is_empty() && !e.degraded.is_empty() {
        tracing::info!(node = %e.name, exports = %names(&e.degraded), "node healthy again");
    }
    e.degraded = down;
}
