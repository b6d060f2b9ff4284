//! From the nodes' cumulative counters to one interval's `control::Observations`.
//!
//! [`Deltas`] keeps each node's last answer and its `epoch`; the interval's numbers are the
//! differences, so a missed poll loses nothing (the next difference covers both intervals).
//! A node whose epoch changed (it restarted) or whose counters went backwards reports
//! everything since its start as the interval's numbers.
//!
//! [`build`] joins a volume's level-1 counters (its host) and level-2 counters (summed over
//! its servers; for a volume on several hosts, each host's share of them by its level-1
//! misses) into one `TenantObservation`: requests, bytes and mean latency as the
//! level-1 node saw them, with its reads timed apart from its writes ([`WriteSplit`]);
//! lookups and hits per level; service times per way of service
//! (a level-2 hit costs the level-2 node's hit time plus the network overhead the level-1
//! node measured on top of what the level-2 node did, a miss likewise); curves from the
//! level-1 node (it sees the volume's whole stream), sizes turned from bytes to blocks;
//! the interval's latency quantiles from the difference of two cumulative histograms
//! ([`quantiles`]): of all requests as the level-1 node saw them, and of the reads that
//! went to a disk as the level-2 nodes saw them. A volume reading a shared image has no
//! level-2 counters of its own: its level 2 is the image's consolidated cache, whose
//! counters and curve are the image's at its server ([`crate::consolidate::observed`]).

use crate::placement::PlacedVolume;
use api::node::{LatencySum, NodeObservations, TenantObservations};
use control::{LevelCount, Observations, ObservedService, PolicyCurve, TenantObservation};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The interval's numbers per node and cache: `by_node[node][cache]`.
pub type ByNode = HashMap<String, std::sync::Arc<HashMap<String, TenantObservations>>>;

/// Per node, the last cumulative answer.
#[derive(Default, Debug)]
pub struct Deltas {
    last: HashMap<String, NodeObservations>,
}

fn sub_acc(a: LatencySum, b: LatencySum) -> LatencySum {
    LatencySum {
        count: a.count.saturating_sub(b.count),
        sum_ms: (a.sum_ms - b.sum_ms).max(0.0),
    }
}

impl Deltas {
    /// The interval's counters of `now` against the node's previous answer, per cache;
    /// `now` becomes the next baseline.
    pub fn update(
        &mut self,
        node: &str,
        now: NodeObservations,
    ) -> HashMap<String, TenantObservations> {
        let prev = self.last.get(node).filter(|p| p.epoch == now.epoch);
        let earlier: HashMap<&str, &TenantObservations> = prev
            .map(|p| p.tenants.iter().map(|u| (u.key(), u)).collect())
            .unwrap_or_default();
        let mut out = HashMap::with_capacity(now.tenants.len());
        for t in &now.tenants {
            let before = earlier.get(t.key()).copied();
            let d = match before {
                Some(b) if b.requests <= t.requests && b.lookups <= t.lookups => {
                    let mut d = t.clone();
                    d.requests -= b.requests;
                    d.lookups -= b.lookups;
                    d.hits = t.hits.saturating_sub(b.hits);
                    d.read_bytes = t.read_bytes.saturating_sub(b.read_bytes);
                    d.write_bytes = t.write_bytes.saturating_sub(b.write_bytes);
                    d.latency.count = t.latency.count.saturating_sub(b.latency.count);
                    d.latency.failed = t.latency.failed.saturating_sub(b.latency.failed);
                    d.latency.sum_ms = (t.latency.sum_ms - b.latency.sum_ms).max(0.0);
                    d.served.hit = sub_acc(t.served.hit, b.served.hit);
                    d.served.miss = sub_acc(t.served.miss, b.served.miss);
                    d.latency.buckets = sub_buckets(&t.latency.buckets, &b.latency.buckets);
                    d.latency.miss_buckets =
                        sub_buckets(&t.latency.miss_buckets, &b.latency.miss_buckets);
                    d
                }
                _ => t.clone(),
            };
            out.insert(t.key().to_string(), d);
        }
        self.last.insert(node.to_string(), now);
        out
    }

    /// The node's last answer taken (the baseline of the next difference).
    pub fn last(&self, node: &str) -> Option<&NodeObservations> {
        self.last.get(node)
    }

    /// Takes `now` as the node's baseline without counting it as an interval (see
    /// [`crate::counters`]).
    pub fn rebase(&mut self, node: &str, now: &NodeObservations) {
        self.last.insert(node.to_string(), now.clone());
    }

    /// Forgets a node (it will be counted from its next answer on).
    pub fn forget(&mut self, node: &str) {
        self.last.remove(node);
    }
}

/// The interval's buckets: cumulative `now` less cumulative `before` (both ascending by
/// value), buckets left empty dropped.
fn sub_buckets(now: &[(u64, u64)], before: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(now.len());
    let mut b = before.iter().peekable();
    for &(v, n) in now {
        while b.peek().is_some_and(|x| x.0 < v) {
            b.next();
        }
        let earlier = match b.peek() {
            Some(&&(bv, bn)) if bv == v => bn,
            _ => 0,
        };
        if n > earlier {
            out.push((v, n - earlier));
        }
    }
    out
}

/// The quantiles of the requests in `buckets` (`(highest microseconds, count)`,
/// ascending), in milliseconds: at quantile `q`, the first bucket whose running count
/// reaches `q` of the total. `None` without a request.
pub fn quantiles(buckets: &[(u64, u64)]) -> Option<control::Quantiles> {
    let total: u64 = buckets.iter().map(|b| b.1).sum();
    if total == 0 {
        return None;
    }
    Some(control::Quantiles::from_fn(|q| {
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for &(v, n) in buckets {
            seen += n;
            if seen >= rank {
                return v as f64 / 1e3;
            }
        }
        buckets.last().map_or(0.0, |b| b.0 as f64 / 1e3)
    }))
}

/// The share of a volume's resident blocks that are dirty, over its level-1 cache and
/// its level-2 caches (a volume with nothing resident has nothing to write back: 0);
/// `None` when a node holding one of them does not report its blocks (an older node),
/// so the controller falls back on the share of its requests that write.
fn dirty_share(l1: &TenantObservations, l2: &[&TenantObservations]) -> Option<f64> {
    let (mut resident, mut dirty) = (0u64, 0u64);
    for c in std::iter::once(l1).chain(l2.iter().copied()) {
        if c.cache.is_none() {
            continue;
        }
        resident += c.resident_blocks?;
        dirty += c.dirty_blocks?;
    }
    Some(if resident == 0 {
        0.0
    } else {
        (dirty as f64 / resident as f64).min(1.0)
    })
}

/// The quantiles of a volume's reads that went to a disk: those its level-2 nodes sent
/// below them (their buckets merged), or without level-2 buckets its level-1 node's
/// misses. The level-2 nodes' times leave out the network between the levels: a tail
/// SLO's bound is far above it where a cache can meet it.
fn disk_misses(l1: &TenantObservations, l2: &[&TenantObservations]) -> Option<control::Quantiles> {
    let mut merged: Vec<(u64, u64)> = l2
        .iter()
        .flat_map(|c| c.latency.miss_buckets.iter().copied())
        .collect();
    if merged.is_empty() {
        return quantiles(&l1.latency.miss_buckets);
    }
    merged.sort_unstable();
    quantiles(&merged)
}

/// What was measured for one volume in one interval (what the demo and console show).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Measured {
    /// The volume (control tenant).
    pub tenant: String,
    /// Requests at level 1.
    pub requests: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Mean latency (ms), `None` without requests.
    pub latency_ms: Option<f64>,
    /// Quantiles of this interval's requests at level 1 (from the node's histogram),
    /// `None` without requests or from a node that ships no histogram.
    #[serde(default)]
    pub quantiles: Option<control::Quantiles>,
    /// 99th percentile of this interval's requests (from `quantiles`; else the level-1
    /// node's since its start).
    pub p99_ms: Option<f64>,
    /// Level-1 hit ratio (blocks).
    pub l1_hit_ratio: f64,
    /// Level-2 hit ratio of level-1 misses (blocks).
    pub l2_hit_ratio: f64,
    /// Level-1 cache size on its host (bytes, as the node reports it).
    pub l1_size: u64,
    /// Level-2 cache size over its servers (bytes).
    pub l2_size: u64,
    /// Requests per second.
    pub iops: f64,
    /// Megabytes (10^6) per second.
    pub mbps: f64,
    /// Requests at level 1 answered with an error (not in `latency_ms` or the
    /// quantiles).
    #[serde(default)]
    pub failed: u64,
}

fn mean(a: LatencySum) -> Option<f64> {
    (a.count > 0).then(|| a.sum_ms / a.count as f64)
}

/// One interval's observations, volumes in `placements` order (where each lives: its
/// host's name and its servers'), from the per-node deltas (`by_node[node][cache]`);
/// `block_size` turns curve sizes into blocks.
pub fn build(
    placements: &[PlacedVolume],
    by_node: &ByNode,
    block_size: u64,
    seconds: f64,
) -> (Observations, Vec<Measured>) {
    let mut obs = Observations {
        seconds,
        tenants: Vec::new(),
        tiers: Vec::new(),
        servers: Vec::new(),
    };
    let mut measured = Vec::new();
    let empty = TenantObservations::default();
    let l1_of = |p: &PlacedVolume| {
        by_node
            .get(&p.host)
            .and_then(|m| m.get(&p.cache))
            .unwrap_or(&empty)
    };
    // A volume on several hosts: its level-2 counters serve every host's misses, so each
    // host's tenant takes the share of them its level-1 misses make.
    let mut misses: HashMap<&str, (u64, usize)> = HashMap::new();
    for p in placements {
        let l1 = l1_of(p);
        let e = misses.entry(p.cache.as_str()).or_default();
        e.0 += l1.lookups.saturating_sub(l1.hits);
        e.1 += 1;
    }
    for p in placements {
        let l1 = l1_of(p);
        let share = match misses.get(p.cache.as_str()) {
            Some(&(_, 1)) | None => 1.0,
            Some(&(0, n)) => 1.0 / n as f64,
            Some(&(all, _)) => l1.lookups.saturating_sub(l1.hits) as f64 / all as f64,
        };
        let scale = |x: u64| (x as f64 * share).round() as u64;
        let l2: Vec<&TenantObservations> = p
            .servers
            .iter()
            .filter_map(|s| by_node.get(s).and_then(|m| m.get(&p.cache)))
            .collect();
        let l2_lookups: u64 = scale(l2.iter().map(|c| c.lookups).sum());
        let l2_hits: u64 = scale(l2.iter().map(|c| c.hits).sum());
        let sum = |f: &dyn Fn(&TenantObservations) -> LatencySum| {
            let a = l2.iter().fold(LatencySum::default(), |a, c| {
                let x = f(c);
                LatencySum {
                    count: a.count + x.count,
                    sum_ms: a.sum_ms + x.sum_ms,
                }
            });
            LatencySum {
                count: scale(a.count),
                sum_ms: a.sum_ms * share,
            }
        };
        let a2 = mean(sum(&|c| c.served.hit));
        let d2 = mean(sum(&|c| c.served.miss));
        let m1 = mean(l1.served.miss);
        // Network overhead: what level 1 waited for beyond what level 2 spent.
        let f = if l2_lookups > 0 {
            l2_hits as f64 / l2_lookups as f64
        } else {
            0.0
        };
        let inner = match (a2, d2) {
            (Some(a), Some(d)) => Some(f * a + (1.0 - f) * d),
            (Some(a), None) => Some(a),
            (None, Some(d)) => Some(d),
            (None, None) => None,
        };
        let overhead = match (m1, inner) {
            (Some(m), Some(i)) => (m - i).max(0.0),
            _ => 0.0,
        };
        let service = ObservedService {
            l1_hit_ms: mean(l1.served.hit),
            l2_hit_ms: a2.map(|a| a + overhead),
            miss_ms: d2
                .map(|d| d + overhead)
                .or(if a2.is_none() { m1 } else { None }),
        };
        let bs = block_size.max(1);
        let curves = l1
            .curves
            .iter()
            .filter_map(|c| {
                let mut pairs: Vec<(u64, f64)> = Vec::new();
                for &(bytes, miss) in &c.points {
                    let b = bytes / bs;
                    let miss = if miss.is_finite() {
                        miss.clamp(0.0, 1.0)
                    } else {
                        continue;
                    };
                    match pairs.last_mut() {
                        Some(last) if last.0 >= b => last.1 = last.1.min(miss),
                        _ => pairs.push((b, miss)),
                    }
                }
                let curve = mrc::HitRatioCurve::from_pairs(pairs).ok()?;
                Some(PolicyCurve {
                    policy: c.policy.clone(),
                    curve,
                })
            })
            .collect();
        let mean_ms = mean(LatencySum {
            count: l1.latency.count,
            sum_ms: l1.latency.sum_ms,
        });
        let bytes = l1.read_bytes + l1.write_bytes;
        let mix = WriteSplit::of(l1, bytes);
        let interval_quantiles = quantiles(&l1.latency.buckets);
        let p99 = interval_quantiles.map_or(l1.latency.p99_ms, |q| q.p99);
        obs.tenants.push(TenantObservation {
            requests: l1.requests,
            bytes,
            l1: LevelCount {
                lookups: l1.lookups,
                hits: l1.hits,
            },
            l2: LevelCount {
                lookups: l2_lookups,
                hits: l2_hits,
            },
            mean_latency_ms: mean_ms.unwrap_or(0.0),
            p99_latency_ms: p99,
            service,
            curves,
            writes: mix.writes,
            read_latency_ms: mix.read_ms,
            write_latency_ms: mix.write_ms,
            write_back: l1.write_policy.as_deref() == Some("write-back"),
            dirty_share: dirty_share(l1, &l2),
            latency_quantiles: interval_quantiles,
            miss_quantiles: disk_misses(l1, &l2),
        });
        measured.push(Measured {
            tenant: p.name.clone(),
            requests: l1.requests,
            bytes,
            latency_ms: mean_ms,
            quantiles: interval_quantiles,
            p99_ms: mean_ms.map(|_| p99),
            l1_hit_ratio: ratio(l1.hits, l1.lookups),
            l2_hit_ratio: ratio(l2_hits, l2_lookups),
            l1_size: l1.size,
            l2_size: l2.iter().map(|c| c.size).sum(),
            iops: l1.requests as f64 / seconds,
            mbps: bytes as f64 / seconds / 1e6,
            failed: l1.latency.failed,
        });
    }
    (obs, measured)
}

/// A volume's reads timed apart from its other requests, from its level-1 node's counters.
///
/// The node's hit/miss split (`served`) counts reads only, each timed from arrival to
/// reply; its `latency` counts every request. So the reads are `served.hit + served.miss`
/// and the rest (writes, and the few flushes and trims, all of which the cache sizes do
/// not speed up) is `latency` less the reads. With reads counted, `control` models the
/// volume as `(1 − w)·reads + w·W` and fits MLMS on its reads' latency alone, so a burst of
/// slow writes (a write-back cache waiting for its backend) is not taken for slow reads
/// that more cache would help. A node that sends no split (no reads timed) leaves the
/// latencies unknown and gives the write share of the bytes, as before: every request is
/// then modelled as a read.
struct WriteSplit {
    writes: u64,
    read_ms: Option<f64>,
    write_ms: Option<f64>,
}

impl WriteSplit {
    fn of(l1: &TenantObservations, bytes: u64) -> WriteSplit {
        let reads = LatencySum {
            count: l1.served.hit.count + l1.served.miss.count,
            sum_ms: l1.served.hit.sum_ms + l1.served.miss.sum_ms,
        };
        if reads.count == 0 || reads.count > l1.latency.count {
            return WriteSplit {
                writes: if bytes > 0 {
                    (l1.requests as f64 * l1.write_bytes as f64 / bytes as f64).round() as u64
                } else {
                    0
                },
                read_ms: None,
                write_ms: None,
            };
        }
        let others = LatencySum {
            count: l1.latency.count - reads.count,
            sum_ms: (l1.latency.sum_ms - reads.sum_ms).max(0.0),
        };
        // `requests` and `latency.count` are counted apart (a request still running at
        // the poll is in one, not yet the other): the share is taken of the timed ones.
        let share = others.count as f64 / l1.latency.count as f64;
        WriteSplit {
            writes: (l1.requests as f64 * share).round() as u64,
            read_ms: mean(reads),
            // No writes this interval: a write share of 0 (the model's mix decays).
            write_ms: Some(mean(others).unwrap_or(0.0)),
        }
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The poll's map of a node's numbers per cache, from plain maps.
    fn arcs(by: &HashMap<String, HashMap<String, TenantObservations>>) -> ByNode {
        by.iter()
            .map(|(k, v)| (k.clone(), std::sync::Arc::new(v.clone())))
            .collect()
    }
    use api::node::{LatencyView, PolicyPoints, ServedView};

    /// Volume `name` (cache `cache`) on `host` over `servers`.
    fn placed(name: &str, cache: &str, host: &str, servers: &[&str]) -> PlacedVolume {
        PlacedVolume {
            name: name.into(),
            cache: cache.into(),
            owner: cache.into(),
            host: host.into(),
            servers: servers.iter().map(|s| s.to_string()).collect(),
            exclusive: false,
            ..PlacedVolume::default()
        }
    }

    fn counters(
        cache: &str,
        requests: u64,
        hits: u64,
        hit_ms: f64,
        miss_ms: f64,
    ) -> TenantObservations {
        TenantObservations {
            cache: Some(cache.into()),
            requests,
            lookups: requests,
            hits,
            read_bytes: requests * 4096,
            latency: LatencyView {
                count: requests,
                sum_ms: hits as f64 * hit_ms + (requests - hits) as f64 * miss_ms,
                p50_ms: 0.0,
                p99_ms: miss_ms,
                ..Default::default()
            },
            served: ServedView {
                hit: LatencySum {
                    count: hits,
                    sum_ms: hits as f64 * hit_ms,
                },
                miss: LatencySum {
                    count: requests - hits,
                    sum_ms: (requests - hits) as f64 * miss_ms,
                },
            },
            size: 1 << 20,
            ..Default::default()
        }
    }

    #[test]
    fn deltas_difference_and_restart() {
        let mut d = Deltas::default();
        let mut o = NodeObservations {
            epoch: "a".into(),
            tenants: vec![counters("v", 100, 40, 0.1, 1.0)],
            ..Default::default()
        };
        assert_eq!(d.update("n", o.clone())["v"].requests, 100);
        o.tenants = vec![counters("v", 250, 100, 0.1, 1.0)];
        o.tenants[0].latency.failed = 7;
        let x = d.update("n", o.clone());
        assert_eq!(x["v"].requests, 150);
        assert_eq!(x["v"].latency.failed, 7);
        assert_eq!(x["v"].hits, 60);
        assert_eq!(x["v"].served.miss.count, 90);
        // Restarted: new epoch, counters from zero.
        o.epoch = "b".into();
        o.tenants = vec![counters("v", 10, 5, 0.1, 1.0)];
        assert_eq!(d.update("n", o.clone())["v"].requests, 10);
    }

    #[test]
    fn an_intervals_quantiles_are_those_of_its_own_requests() {
        let mut d = Deltas::default();
        // First interval: 1,000 requests at 100 µs.
        let mut t = counters("v", 1000, 1000, 0.1, 0.1);
        t.latency.buckets = vec![(100, 1000)];
        let mut o = NodeObservations {
            epoch: "a".into(),
            tenants: vec![t.clone()],
            ..Default::default()
        };
        let first = d.update("n", o.clone());
        assert_eq!(quantiles(&first["v"].latency.buckets).unwrap().p99, 0.1);
        // Second: 1,000 more, 20 of them (2 %) at 9 ms. Since the start the p99 is
        // still 100 µs; this interval's is 9 ms, its p95 100 µs.
        t.requests = 2000;
        t.lookups = 2000;
        t.latency.buckets = vec![(100, 1980), (9000, 20)];
        t.latency.miss_buckets = vec![(9000, 20)];
        o.tenants = vec![t];
        assert_eq!(quantiles(&o.tenants[0].latency.buckets).unwrap().p99, 0.1);
        let second = d.update("n", o.clone());
        let q = quantiles(&second["v"].latency.buckets).unwrap();
        assert_eq!((q.p95, q.p99, q.p999), (0.1, 9.0, 9.0));
        assert_eq!(second["v"].latency.miss_buckets, vec![(9000, 20)]);
        assert_eq!(sub_buckets(&[(5, 3), (7, 2)], &[(5, 3)]), vec![(7, 2)]);
        assert!(quantiles(&[]).is_none());
    }

    #[test]
    fn build_joins_levels_and_derives_service_times() {
        let mut l1 = counters("v", 1000, 600, 0.1, 3.0);
        l1.curves = vec![PolicyPoints {
            policy: "lru".into(),
            points: vec![(0, 1.0), (4096 * 100, 0.5), (4096 * 200, 0.2)],
        }];
        // 400 misses at level 1 went to two servers, 200 each, half hit.
        let s1 = counters("v", 200, 100, 0.5, 4.5);
        let s2 = counters("v", 200, 100, 0.5, 4.5);
        let mut by = HashMap::new();
        by.insert("h".to_string(), HashMap::from([("v".to_string(), l1)]));
        by.insert("a".to_string(), HashMap::from([("v".to_string(), s1)]));
        by.insert("b".to_string(), HashMap::from([("v".to_string(), s2)]));
        let p = [placed("v", "v", "h", &["a", "b"])];
        let (o, m) = build(&p, &arcs(&by), 4096, 2.0);
        let t = &o.tenants[0];
        assert_eq!(t.requests, 1000);
        assert_eq!(t.l2.lookups, 400);
        assert_eq!(t.l2.hits, 200);
        // inner mean at level 2: 0.5*0.5 + 0.5*4.5 = 2.5; level 1 waited 3.0: overhead 0.5.
        assert!((t.service.l2_hit_ms.unwrap() - 1.0).abs() < 1e-9);
        assert!((t.service.miss_ms.unwrap() - 5.0).abs() < 1e-9);
        assert!((t.service.l1_hit_ms.unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(t.curves[0].curve.points()[1].cache_size, 100);
        assert!((t.curves[0].curve.miss_ratio(200.0) - 0.2).abs() < 1e-9);
        assert!((m[0].l1_hit_ratio - 0.6).abs() < 1e-12);
        assert!((m[0].l2_hit_ratio - 0.5).abs() < 1e-12);
        assert_eq!(m[0].iops, 500.0);
        assert_eq!(m[0].l2_size, 2 << 20);
    }

    #[test]
    fn a_volumes_dirty_share_is_over_what_its_caches_hold() {
        let with = |resident: Option<u64>, dirty: Option<u64>| {
            let mut c = counters("v", 10, 5, 0.1, 3.0);
            c.resident_blocks = resident;
            c.dirty_blocks = dirty;
            c
        };
        let build_one = |l1: TenantObservations, s1: TenantObservations| {
            let mut by = HashMap::new();
            by.insert("h".to_string(), HashMap::from([("v".to_string(), l1)]));
            by.insert("a".to_string(), HashMap::from([("v".to_string(), s1)]));
            let p = [placed("v", "v", "h", &["a"])];
            build(&p, &arcs(&by), 4096, 1.0).0.tenants[0].dirty_share
        };
        // 300 of 1,000 resident blocks dirty at level 1, none of 1,000 at level 2.
        let share = build_one(with(Some(1000), Some(300)), with(Some(1000), Some(0)));
        assert!((share.unwrap() - 0.15).abs() < 1e-12, "{share:?}");
        // Nothing resident: nothing to write back, not "all dirty".
        assert_eq!(
            build_one(with(Some(0), Some(0)), with(Some(0), Some(0))),
            Some(0.0)
        );
        // A node that does not report its blocks: not known.
        assert_eq!(build_one(with(Some(10), Some(1)), with(None, None)), None);
    }

    #[test]
    fn reads_are_timed_apart_from_writes() {
        // 600 reads (400 hits at 0.1 ms, 200 misses at 3 ms) and 400 writes at 50 ms.
        let mut l1 = counters("v", 600, 400, 0.1, 3.0);
        l1.requests = 1000;
        l1.write_bytes = 400 * 4096;
        l1.latency.count = 1000;
        l1.latency.sum_ms += 400.0 * 50.0;
        let by = HashMap::from([("h".to_string(), HashMap::from([("v".to_string(), l1)]))]);
        let p = [placed("v", "v", "h", &[])];
        let (o, m) = build(&p, &arcs(&by), 4096, 1.0);
        let t = &o.tenants[0];
        assert_eq!(t.writes, 400);
        assert!((t.read_latency_ms.unwrap() - (40.0 + 600.0) / 600.0).abs() < 1e-9);
        assert!((t.write_latency_ms.unwrap() - 50.0).abs() < 1e-9);
        // The mean of every request is still what the volume measured.
        assert!((t.mean_latency_ms - (40.0 + 600.0 + 20_000.0) / 1000.0).abs() < 1e-9);
        assert!((m[0].latency_ms.unwrap() - t.mean_latency_ms).abs() < 1e-12);

        // Only reads: a write share of 0, reads' latency is the mean.
        let by = HashMap::from([(
            "h".to_string(),
            HashMap::from([("v".to_string(), counters("v", 500, 250, 0.2, 2.0))]),
        )]);
        let t = &build(&p, &arcs(&by), 4096, 1.0).0.tenants[0];
        assert_eq!(t.writes, 0);
        assert_eq!(t.write_latency_ms, Some(0.0));
        assert!((t.read_latency_ms.unwrap() - t.mean_latency_ms).abs() < 1e-9);

        // A node that sends no read split: the bytes' write share, latencies unknown.
        let mut old = counters("v", 100, 50, 0.2, 2.0);
        old.served = ServedView::default();
        old.write_bytes = old.read_bytes / 3;
        let by = HashMap::from([("h".to_string(), HashMap::from([("v".to_string(), old)]))]);
        let t = &build(&p, &arcs(&by), 4096, 1.0).0.tenants[0];
        assert_eq!(t.writes, 25);
        assert_eq!((t.read_latency_ms, t.write_latency_ms), (None, None));
    }

    #[test]
    fn a_volume_on_two_hosts_splits_level_2_by_level_1_misses() {
        // h1 missed 300 of 400, h2 100 of 400; the server saw the 400 misses, 200 hits.
        let mut by = HashMap::new();
        by.insert(
            "h1".to_string(),
            HashMap::from([("v".to_string(), counters("v", 400, 100, 0.1, 3.0))]),
        );
        by.insert(
            "h2".to_string(),
            HashMap::from([("v".to_string(), counters("v", 400, 300, 0.1, 3.0))]),
        );
        by.insert(
            "s".to_string(),
            HashMap::from([("v".to_string(), counters("v", 400, 200, 0.5, 4.5))]),
        );
        let p = [
            placed("v", "v", "h1", &["s"]),
            placed("v@h2", "v", "h2", &["s"]),
        ];
        let (o, m) = build(&p, &arcs(&by), 4096, 1.0);
        assert_eq!(o.tenants[0].l2.lookups, 300);
        assert_eq!(o.tenants[1].l2.lookups, 100);
        assert_eq!(o.tenants[0].l2.hits, 150);
        assert_eq!(o.tenants[1].l2.hits, 50);
        assert_eq!(m[0].requests, 400);
        assert_eq!(m[1].requests, 400);
        assert!((m[1].l1_hit_ratio - 0.75).abs() < 1e-12);
    }
}
