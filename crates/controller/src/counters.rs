//! Whether a node's counters can be believed, and what to plan with when they cannot.
//!
//! A node's `/v1/observations` are cumulative since its start (its `epoch`). Within one
//! epoch every counter only grows, and it cannot grow faster than a node can serve:
//! [`check`] holds an answer against the last answer the controller accepted from that
//! node, over the wall-clock time between the two (plus [`SLACK_SECS`]):
//!
//! - requests, bytes, lookups, hits, timed requests and their summed latency must not go
//!   backwards (nor be negative or not finite);
//! - requests may grow by at most [`MAX_REQUESTS_PER_SEC`] a second, timed requests too;
//!   bytes by at most [`MAX_BYTES_PER_SEC`]; lookups and hits by at most that many bytes'
//!   blocks;
//! - the node's uptime must not go backwards.
//!
//! A node's first answer, or the first of a new epoch (it restarted), and a cache it had
//! not reported before, are held against its uptime instead.
//!
//! [`Judge::judge`] turns an answer into the interval's per-cache numbers. An answer that
//! fails the check marks the node *suspect* (the reason is kept on its registry entry,
//! shown in `/v1/nodes` and the console, and logged once): its counters are not taken,
//! the baseline stays the last accepted answer, and its caches are planned at the last
//! interval the controller accepted from it. The node is honest again when an answer
//! passes against that baseline, or when [`RESYNC`] answers in a row pass against each
//! other (its counters restarted without a new epoch, or continue from a jump): those
//! become the new baseline.

use crate::observe::Deltas;
use api::node::{NodeObservations, TenantObservations};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The most requests a node may serve in a second (far above what one node can).
pub const MAX_REQUESTS_PER_SEC: f64 = 10_000_000.0;
/// The most bytes a node may move in a second (64 GiB).
pub const MAX_BYTES_PER_SEC: f64 = 64.0 * 1024.0 * 1024.0 * 1024.0;
/// Seconds added to every window (the two answers were taken at slightly other times
/// than the controller received them).
pub const SLACK_SECS: f64 = 1.0;
/// Answers in a row that agree with each other before they replace a baseline they do
/// not agree with.
pub const RESYNC: u32 = 3;

fn grow_u(what: &str, before: u64, now: u64, limit: f64) -> Result<(), String> {
    if now < before {
        return Err(format!("{what} went backwards ({before} -> {now})"));
    }
    let d = (now - before) as f64;
    if d > limit {
        return Err(format!(
            "{what} grew by {} in a window allowing at most {}",
            now - before,
            limit.floor() as u64
        ));
    }
    Ok(())
}

fn grow_f(what: &str, before: f64, now: f64) -> Result<(), String> {
    if !now.is_finite() || now < 0.0 {
        return Err(format!("{what} is {now}"));
    }
    // Sums of floats may round differently between two answers.
    if now < before - 1e-6 * before.abs().max(1.0) {
        return Err(format!("{what} went backwards ({before} -> {now})"));
    }
    Ok(())
}

fn check_tenant(
    t: &TenantObservations,
    before: &TenantObservations,
    secs: f64,
    block_size: u64,
) -> Result<(), String> {
    let at = |f: &str| format!("cache `{}` {f}", t.key());
    let requests = secs * MAX_REQUESTS_PER_SEC;
    let bytes = secs * MAX_BYTES_PER_SEC;
    let blocks = bytes / block_size.max(512) as f64 + requests;
    grow_u(&at("requests"), before.requests, t.requests, requests)?;
    grow_u(
        &at("bytes"),
        before.read_bytes.saturating_add(before.write_bytes),
        t.read_bytes.saturating_add(t.write_bytes),
        bytes,
    )?;
    grow_u(&at("read_bytes"), before.read_bytes, t.read_bytes, bytes)?;
    grow_u(&at("write_bytes"), before.write_bytes, t.write_bytes, bytes)?;
    grow_u(&at("lookups"), before.lookups, t.lookups, blocks)?;
    grow_u(&at("hits"), before.hits, t.hits, blocks)?;
    grow_u(
        &at("latency.count"),
        before.latency.count,
        t.latency.count,
        requests,
    )?;
    grow_f(
        &at("latency.sum_ms"),
        before.latency.sum_ms,
        t.latency.sum_ms,
    )?;
    for (name, b, n) in [
        ("served.hit", before.served.hit, t.served.hit),
        ("served.miss", before.served.miss, t.served.miss),
    ] {
        grow_u(&at(&format!("{name}.count")), b.count, n.count, requests)?;
        grow_f(&at(&format!("{name}.sum_ms")), b.sum_ms, n.sum_ms)?;
    }
    Ok(())
}

/// Why `now` cannot follow `prev` (the last accepted answer) `elapsed` seconds later;
/// `Ok` if it can. Without `prev`, or from another epoch, `now` is held against its
/// uptime.
pub(crate) fn check(
    prev: Option<&NodeObservations>,
    now: &NodeObservations,
    elapsed: f64,
) -> Result<(), String> {
    let prev = prev.filter(|p| p.epoch == now.epoch);
    let since_start = now.uptime_ms as f64 / 1e3 + SLACK_SECS;
    if let Some(p) = prev {
        if now.uptime_ms < p.uptime_ms {
            return Err(format!(
                "uptime went backwards ({} ms -> {} ms) within epoch {}",
                p.uptime_ms, now.uptime_ms, now.epoch
            ));
        }
    }
    let empty = TenantObservations::default();
    let earlier: HashMap<&str, &TenantObservations> = prev
        .map(|p| p.tenants.iter().map(|u| (u.key(), u)).collect())
        .unwrap_or_default();
    for t in &now.tenants {
        let before = earlier.get(t.key()).copied();
        let (before, secs) = match before {
            Some(b) => (b, elapsed.max(0.0) + SLACK_SECS),
            None => (&empty, since_start),
        };
        check_tenant(t, before, secs, now.block_size)?;
    }
    Ok(())
}

#[derive(Default)]
struct Record {
    /// When the baseline (the answer `Deltas` holds) was accepted.
    accepted: Option<Instant>,
    /// The last interval's numbers taken from the node.
    good: Arc<HashMap<String, TenantObservations>>,
    /// The last answer refused, and when it came.
    refused: Option<(NodeObservations, Instant)>,
    /// Refused answers in a row that agreed with the one before.
    agreeing: u32,
}

/// What the controller made of one answer.
#[derive(Debug, PartialEq)]
pub enum Judgement {
    /// Taken.
    Honest,
    /// Taken as the new baseline after [`RESYNC`] answers that agree with each other;
    /// this interval is planned at the last good numbers.
    Resynced,
    /// Refused, with the reason.
    Suspect(String),
}

/// The per-node records behind [`Judge::judge`].
#[derive(Default)]
pub struct Judge {
    nodes: HashMap<String, Record>,
}

impl Judge {
    /// The interval's per-cache numbers of node `node`'s answer `now`, and the verdict:
    /// the differences against the last accepted answer if it passes [`check`], else the
    /// last interval accepted from the node (empty if none).
    pub fn judge(
        &mut self,
        deltas: &mut Deltas,
        node: &str,
        now: NodeObservations,
        at: Instant,
    ) -> (Arc<HashMap<String, TenantObservations>>, Judgement) {
        let r = self.nodes.entry(node.to_string()).or_default();
        let elapsed = r
            .accepted
            .map_or(0.0, |t| at.saturating_duration_since(t).as_secs_f64());
        let reason = match check(deltas.last(node), &now, elapsed) {
            Ok(()) => {
                let d = Arc::new(deltas.update(node, now));
                r.accepted = Some(at);
                r.good = d.clone();
                r.refused = None;
                r.agreeing = 0;
                return (d, Judgement::Honest);
            }
            Err(reason) => reason,
        };
        let agrees = r.refused.as_ref().is_some_and(|(p, t)| {
            check(
                Some(p),
                &now,
                at.saturating_duration_since(*t).as_secs_f64(),
            )
            .is_ok()
        });
        r.agreeing = if agrees { r.agreeing + 1 } else { 0 };
        if r.agreeing + 1 >= RESYNC {
            deltas.rebase(node, &now);
            r.refused = None;
            r.accepted = Some(at);
            r.agreeing = 0;
            return (r.good.clone(), Judgement::Resynced);
        }
        r.refused = Some((now, at));
        (r.good.clone(), Judgement::Suspect(reason))
    }

    /// Forgets a node that stopped answering (its next answer starts a new baseline).
    pub fn forget(&mut self, node: &str) {
        if let Some(r) = self.nodes.get_mut(node) {
            r.accepted = None;
            r.refused = None;
            r.agreeing = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn obs(epoch: &str, uptime_ms: u64, requests: u64) -> NodeObservations {
        NodeObservations {
            version: 1,
            node: "n".into(),
            level: 1,
            block_size: 4096,
            cache_size: 1 << 20,
            uptime_ms,
            epoch: epoch.into(),
            tiers: Vec::new(),
            tenants: vec![TenantObservations {
                tenant: "t".into(),
                cache: Some("v".into()),
                requests,
                lookups: requests,
                hits: requests / 2,
                read_bytes: requests * 4096,
                ..Default::default()
            }],
        }
    }

    #[test]
    fn backwards_and_absurd_counters_are_refused() {
        let a = obs("e", 10_000, 1000);
        assert!(check(None, &a, 0.0).is_ok());
        assert!(check(Some(&a), &obs("e", 11_000, 2000), 1.0).is_ok());
        let e = check(Some(&a), &obs("e", 11_000, 500), 1.0).unwrap_err();
        assert!(e.contains("cache `v` requests went backwards"), "{e}");
        let e = check(Some(&a), &obs("e", 11_000, 1_000_000_000_000), 1.0).unwrap_err();
        assert!(e.contains("requests grew by"), "{e}");
        let e = check(Some(&a), &obs("e", 9_000, 2000), 1.0).unwrap_err();
        assert!(e.contains("uptime went backwards"), "{e}");
        // A restart starts again from 0, bounded by its uptime.
        assert!(check(Some(&a), &obs("f", 1_000, 10), 1.0).is_ok());
        assert!(check(Some(&a), &obs("f", 1_000, 1 << 40), 1.0).is_err());
        let mut nan = obs("e", 11_000, 2000);
        nan.tenants[0].latency.sum_ms = f64::NAN;
        assert!(check(Some(&a), &nan, 1.0).is_err());
    }

    #[test]
    fn a_suspect_node_is_planned_at_its_last_good_interval_and_recovers() {
        let mut j = Judge::default();
        let mut d = Deltas::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let (x, v) = j.judge(&mut d, "n", obs("e", 1_000, 100), at(0));
        assert_eq!((x["v"].requests, v), (100, Judgement::Honest));
        let (x, v) = j.judge(&mut d, "n", obs("e", 2_000, 300), at(1));
        assert_eq!((x["v"].requests, v), (200, Judgement::Honest));
        // Backwards, then a jump: refused, the last good interval stands.
        let (x, v) = j.judge(&mut d, "n", obs("e", 3_000, 50), at(2));
        assert!(matches!(v, Judgement::Suspect(_)));
        assert_eq!(x["v"].requests, 200);
        let (x, v) = j.judge(&mut d, "n", obs("e", 4_000, 1 << 50), at(3));
        assert!(matches!(v, Judgement::Suspect(_)));
        assert_eq!(x["v"].requests, 200);
        // Honest again: the difference against the last accepted answer.
        let (x, v) = j.judge(&mut d, "n", obs("e", 5_000, 700), at(4));
        assert_eq!((x["v"].requests, v), (400, Judgement::Honest));
        // Counters that restart without a new epoch and then agree with themselves
        // become the baseline after RESYNC answers.
        let (_, v) = j.judge(&mut d, "n", obs("e", 6_000, 10), at(5));
        assert!(matches!(v, Judgement::Suspect(_)));
        let (_, v) = j.judge(&mut d, "n", obs("e", 7_000, 20), at(6));
        assert!(matches!(v, Judgement::Suspect(_)));
        let (x, v) = j.judge(&mut d, "n", obs("e", 8_000, 30), at(7));
        assert_eq!((x["v"].requests, v), (400, Judgement::Resynced));
        let (x, v) = j.judge(&mut d, "n", obs("e", 9_000, 45), at(8));
        assert_eq!((x["v"].requests, v), (15, Judgement::Honest));
    }
}
