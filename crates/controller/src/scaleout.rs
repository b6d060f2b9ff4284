//! Moirai's scale-out live (§3.5): a volume whose spec asks for it (`scale_out = true`)
//! has one cache over its host and its storage servers, used as one global LRU (its
//! levels are exclusive: the host's clean victims are demoted to the servers, a server's
//! hit moves up), of the size the plan gives it in all (`a`), split by
//! `lachesis_alloc::scaleout::best_split` (`alpha`, the host's share) on its curve and
//! its measured service times, with the host part allowed to grow into the room its host
//! has left and the storage part into its servers' ([`fill`]).
//!
//! This runs after the `control` step, as the static bandwidth shares do, and changes
//! only the scaled-out volumes' sizes (each node's sum stays within its capacity); the
//! split is recorded in `plan.scale_out`. The step itself does not yet know scale-out: its
//! next plan starts from the sizes it planned, and the split is taken again on them.

use crate::placement::PlacedVolume;
use control::{Observations, Plan, ScaleOutPlan, Topology};
use lachesis_alloc::scaleout::{best_split, ScaleOutParams};

/// Host parts are scanned in this many steps at most.
const STEPS: u64 = 256;

/// Splits each scaled-out volume's planned total over its host and servers (see the
/// module doc) and records the split in `plan.scale_out`. A volume without a curve yet
/// keeps the step's sizes (and no split is recorded).
pub fn fill(topo: &Topology, vols: &[PlacedVolume], obs: &Observations, plan: &mut Plan) {
    for (i, v) in vols.iter().enumerate() {
        if !v.scale_out || i >= plan.tenants.len() {
            continue;
        }
        let Some(o) = obs.tenants.get(i) else {
            continue;
        };
        let Some(curve) = o.curve("lru").or(o.curves.first().map(|c| &c.curve)) else {
            continue;
        };
        let tp = &plan.tenants[i];
        let total = tp.l1.size + tp.l2_total();
        let host = tp.l1.node;
        let host_room = topo.hosts[host]
            .capacity
            .saturating_sub(plan.host_used(host));
        let server_room: Vec<u64> = tp
            .l2
            .iter()
            .map(|p| {
                topo.servers[p.node]
                    .capacity
                    .saturating_sub(plan.server_used(p.node))
            })
            .collect();
        let s = topo.service;
        let params = ScaleOutParams {
            lat_host: o.service.l1_hit_ms.unwrap_or(s.l1_hit_ms),
            lat_storage_cache: o.service.l2_hit_ms.unwrap_or(s.l2_hit_ms),
            lat_disk: o.service.miss_ms.unwrap_or(s.miss_ms),
            host_cap: Some(tp.l1.size + host_room),
            storage_cap: Some(tp.l2_total() + server_room.iter().sum::<u64>()),
        };
        let Ok(split) = best_split(curve, &params, total, (total / STEPS).max(1)) else {
            continue;
        };
        let tp = &mut plan.tenants[i];
        tp.l1.size = split.host;
        spread(&mut tp.l2, &server_room, split.storage);
        plan.scale_out.push(ScaleOutPlan {
            tenant: i,
            total: split.total,
            host: split.host,
            storage: split.storage,
            alpha: split.alpha,
            predicted_ms: split.latency,
        });
    }
}

/// `storage` blocks over the partitions `l2`, each at most its size plus its server's
/// `room`: evenly, what a full one cannot take going to the others.
fn spread(l2: &mut [control::Partition], room: &[u64], storage: u64) {
    let caps: Vec<u64> = l2.iter().zip(room).map(|(p, r)| p.size + r).collect();
    let mut left = storage;
    let mut sizes = vec![0u64; l2.len()];
    let mut open: Vec<usize> = (0..l2.len()).collect();
    while left > 0 && !open.is_empty() {
        let each = (left / open.len() as u64).max(1);
        for &k in &open {
            let take = each.min(caps[k] - sizes[k]).min(left);
            sizes[k] += take;
            left -= take;
        }
        open.retain(|&k| sizes[k] < caps[k]);
    }
    for (p, s) in l2.iter_mut().zip(sizes) {
        p.size = s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use control::{Partition, Reason};

    #[test]
    fn storage_is_spread_evenly_within_each_servers_room() {
        let part = |size| Partition {
            node: 0,
            size,
            reason: Reason::FairShare,
        };
        let mut l2 = vec![part(10), part(10), part(10)];
        // Room for 2 more on the first, 50 on the others: 60 blocks give 12, 24, 24.
        spread(&mut l2, &[2, 50, 50], 60);
        let sizes: Vec<u64> = l2.iter().map(|p| p.size).collect();
        assert_eq!(sizes, vec![12, 24, 24]);
        assert_eq!(sizes.iter().sum::<u64>(), 60);
        spread(&mut l2, &[0, 0, 0], 7);
        assert_eq!(l2.iter().map(|p| p.size).sum::<u64>(), 7);
    }
}
