//! Moirai's consolidated cache live (§3.4, "Consolidating Memory Over Fast Networks"): a
//! read-only image that several volumes read (the golden-image case, `[[image]]` and a
//! volume's `image`) has one cache on each storage server that exports it, called by the
//! image's name, that every reader goes through — Moirai's `createCache` then
//! `createRule(<VM1..N, *, DATA.file, *>, C)` — so the server holds one copy of the hot
//! blocks however many readers there are.
//!
//! Its curve is its own: the server's export of the image is owned by one tenant of that
//! node, so the node's observer for it sees exactly the merged stream of every reader (the
//! misses of their level-1 caches), and reports that stream's LRU curve, hits and lookups
//! under the consolidated cache's name ([`ImageSeen`]).
//!
//! Sizing, after the `control` step (as [`crate::scaleout`] does; the step itself does not
//! know images): the readers' own level-2 partitions on the image's servers are set to 0
//! ([`control::Reason::Consolidated`]): their level 2 *is* the consolidated cache. On each
//! server the cache may then take the room left there after the other tenants' level-2
//! partitions and the consolidated caches placed before it (`room`). It takes
//! - before its curve shows reuse (no read reached it yet, or every block was read once:
//!   the lowest miss ratio is above `1 - KNEE_SLACK`): the room, at most the image's size
//!   (a first reader's reads are all compulsory misses; what they bring in is what the
//!   next readers want);
//! - with a curve: the smallest size whose miss ratio is within [`KNEE_SLACK`] of the
//!   curve's lowest (its whole reuse footprint as far as the curve reaches: more space
//!   buys nothing), at most the room and the image's size, at least one block.
//!
//! What it does not take stays free on the server this interval (the step plans the
//! server's whole capacity for its tenants next time, and the readers' share of it is
//! taken again). Room 0 plans it at 0 blocks, and the node keeps one block of it, as a
//! partition planned at 0 does ([`crate::reconcile`]). The step does not know images: it
//! plans the readers' level 2 as any volume's (their level-2 counters are empty, so under
//! a scheme that spends by gain it may give their share to other tenants), and its next
//! plan starts from what it planned, not from the zeros written here. Departures from Moirai: the cache is LRU and read-only (Moirai's example
//! is an MRU write-back cache; an image that takes no writes needs no write-back, and the
//! curve the node builds is LRU's), and it is inclusive (it keeps what it serves, since
//! the next reader wants it too); the readers keep their level-1 caches (planned by the
//! step like any volume's, read-only) in front of it, which Moirai's figure leaves out.
//! Under a layout sharing each server's memory (the `uncontrolled` scheme) nothing is
//! planned here: the image's export is routed to the one shared cache like any volume's.
//! The rule routes every client of the image's export (a server's export of the image
//! serves only readers; Moirai's `VM1..N` is every client), over `[0, size)` when the
//! image's size is declared, else the whole export.

use crate::config::ImageSpec;
use crate::placement::PlacedVolume;
use crate::poll::ByNode;
use control::{ConsolidatedPlan, Plan, Reason, Topology};
use mrc::{CurvePoint, HitRatioCurve};

/// A size is at the curve's knee when its miss ratio is within this of the curve's lowest.
pub const KNEE_SLACK: f64 = 0.005;

/// What one server observed of one image in the interval.
#[derive(Clone, Debug)]
pub struct ImageSeen {
    /// The image.
    pub image: String,
    /// The server's name.
    pub server: String,
    /// Block lookups of the image at the server.
    pub lookups: u64,
    /// Of them, found in memory (in the consolidated cache).
    pub hits: u64,
    /// The LRU curve of the readers' merged stream (sizes in blocks), if any read came.
    pub curve: Option<HitRatioCurve>,
}

/// Each image's observations on each of its servers: the node's tenant known by the
/// image's name (its cache's, or its export's owner before the cache exists).
pub fn observed(images: &[ImageSpec], by_node: &ByNode, block_size: u64) -> Vec<ImageSeen> {
    let mut out = Vec::new();
    for m in images {
        for s in &m.servers {
            let o = by_node.get(s).and_then(|n| n.get(&m.name));
            let curve = o
                .and_then(|o| o.curves.iter().find(|c| c.policy == "lru"))
                .and_then(|c| {
                    let pts = c
                        .points
                        .iter()
                        .map(|&(bytes, miss_ratio)| CurvePoint {
                            cache_size: bytes / block_size.max(1),
                            miss_ratio,
                        })
                        .collect();
                    HitRatioCurve::new(pts).ok()
                });
            out.push(ImageSeen {
                image: m.name.clone(),
                server: s.clone(),
                lookups: o.map_or(0, |o| o.lookups),
                hits: o.map_or(0, |o| o.hits),
                curve,
            });
        }
    }
    out
}

/// The smallest size of `curve` (blocks) whose miss ratio is within [`KNEE_SLACK`] of its
/// lowest.
pub fn knee(curve: &HitRatioCurve) -> u64 {
    let pts = curve.points();
    let low = pts.iter().map(|p| p.miss_ratio).fold(1.0, f64::min);
    pts.iter()
        .find(|p| p.miss_ratio <= low + KNEE_SLACK)
        .map_or(curve.max_size(), |p| p.cache_size)
}

/// Sizes each image's consolidated cache on each of its servers and records it in
/// `plan.consolidated`, the readers' own level-2 partitions there set to 0 (see the module
/// doc). An image no volume reads, or on a server the topology does not know, gets no
/// cache.
pub fn fill(
    images: &[ImageSpec],
    topo: &Topology,
    vols: &[PlacedVolume],
    seen: &[ImageSeen],
    plan: &mut Plan,
) {
    let bs = topo.block_size.max(1);
    // One cache shared by every tenant of each server is already one copy of the image.
    if plan.layout.shared_at(2) {
        return;
    }
    for v in vols.iter().filter(|v| {
        v.image
            .as_ref()
            .is_some_and(|i| images.iter().all(|m| &m.name != i))
    }) {
        tracing::warn!(volume = %v.name, image = ?v.image,
            "volume reads an image the configuration does not declare; planned as its own data");
    }
    for m in images {
        let readers: Vec<usize> = vols
            .iter()
            .enumerate()
            .filter(|(i, v)| v.image.as_deref() == Some(&m.name) && *i < plan.tenants.len())
            .map(|(i, _)| i)
            .collect();
        if readers.is_empty() {
            continue;
        }
        for name in &m.servers {
            let Some(s) = topo.servers.iter().position(|x| &x.name == name) else {
                continue;
            };
            for &i in &readers {
                for p in plan.tenants[i].l2.iter_mut().filter(|p| p.node == s) {
                    p.size = 0;
                    p.reason = Reason::Consolidated {
                        image: m.name.clone(),
                    };
                }
            }
            let room = topo.servers[s].capacity.saturating_sub(plan.server_used(s));
            let image_blocks = m.size.map_or(u64::MAX, |b| b.0.div_ceil(bs));
            let curve = seen
                .iter()
                .find(|x| x.image == m.name && &x.server == name)
                .and_then(|x| x.curve.as_ref());
            let reused = curve.filter(|c| {
                c.points().iter().map(|p| p.miss_ratio).fold(1.0, f64::min) <= 1.0 - KNEE_SLACK
            });
            let (size, reason) = match reused {
                None if curve.is_some() => (
                    room.min(image_blocks),
                    "no reuse seen yet: the room the server has left".to_string(),
                ),
                None => (
                    room.min(image_blocks),
                    "no curve yet: the room the server has left".to_string(),
                ),
                Some(c) => {
                    let k = knee(c);
                    let size = k.min(room).min(image_blocks).max(1);
                    let why = if size == k {
                        format!("its curve's knee ({k} blocks)")
                    } else if size == room {
                        format!("the room the server has left (knee at {k} blocks)")
                    } else {
                        format!("the image's size (knee at {k} blocks)")
                    };
                    (size, why)
                }
            };
            let sv = topo.service;
            let hit = curve.map(|c| 1.0 - c.miss_ratio(size as f64));
            plan.consolidated.push(ConsolidatedPlan {
                image: m.name.clone(),
                server: s,
                size,
                readers: readers.clone(),
                predicted_hit_ratio: hit,
                predicted_ms: hit.map(|h| h * sv.l2_hit_ms + (1.0 - h) * sv.miss_ms),
                reason,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(points: &[(u64, f64)]) -> HitRatioCurve {
        HitRatioCurve::new(
            points
                .iter()
                .map(|&(cache_size, miss_ratio)| CurvePoint {
                    cache_size,
                    miss_ratio,
                })
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn the_knee_is_the_smallest_size_within_the_slack_of_the_lowest_miss_ratio() {
        // A second reader re-reading 64 blocks the first read: half the reads hit from 64
        // blocks on.
        let c = curve(&[(0, 1.0), (32, 0.9), (64, 0.503), (96, 0.5), (128, 0.5)]);
        assert_eq!(knee(&c), 64);
        let flat = curve(&[(0, 1.0), (32, 1.0), (64, 1.0)]);
        assert_eq!(knee(&flat), 0);
    }
}
