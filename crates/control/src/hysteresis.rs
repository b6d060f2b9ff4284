//! Hysteresis: a plan moves only when it pays, and never too far at once.
//!
//! A proposed allocation replaces the previous one only when the predicted objective
//! (the weighted sum of predicted latency over fair-share latency, the quantity fair
//! speedup inverts) improves by at least `min_gain`, or when an SLO is at risk (a tenant
//! with a target observed or predicted above it). Even then, at most `max_move` of a node's
//! capacity changes hands per interval: every partition of that node moves the same
//! fraction of the way, each move rounded down and growth trimmed so the node
//! never holds more than its capacity. A node whose capacity, or set of tenants, is not
//! the one the previous plan was made for is exempt: its partitions take the proposed
//! sizes at once, so a shrunk node fits its new capacity and a grown one's space is used.
//! After that, the controller paces shrinks to the write-backs the disks can take
//! ([`crate::scheme::Hysteresis::write_back_share`]; `Reason::Draining`).

use crate::plan::Reason;

/// One node's partitions: previous size, proposed size, capacity.
pub fn limit_moves(prev: &[u64], target: &[u64], capacity: u64, max_move: f64) -> (Vec<u64>, bool) {
    let moved: u64 = prev
        .iter()
        .zip(target)
        .map(|(&p, &t)| p.abs_diff(t))
        .sum::<u64>()
        / 2;
    let allowed = (max_move * capacity as f64).max(1.0) as u64;
    if moved <= allowed {
        return (target.to_vec(), false);
    }
    let f = allowed as f64 / moved as f64;
    let step = |p: u64, t: u64| ((p.abs_diff(t)) as f64 * f).floor() as u64;
    let mut out: Vec<u64> = prev
        .iter()
        .zip(target)
        .map(|(&p, &t)| {
            if t >= p {
                p + step(p, t)
            } else {
                p - step(p, t)
            }
        })
        .collect();
    // Rounding may leave the node over by a few blocks: growers give them back first,
    // then (for a capacity that shrank since) partitions above their target.
    let mut over = out.iter().sum::<u64>().saturating_sub(capacity);
    for pass in 0..2 {
        for k in 0..out.len() {
            if over == 0 {
                break;
            }
            let room = if pass == 0 {
                out[k].saturating_sub(prev[k])
            } else {
                out[k].saturating_sub(target[k])
            };
            let cut = room.min(over);
            out[k] -= cut;
            over -= cut;
        }
    }
    (out, true)
}

/// The reason for a partition that was held at `prev` while heading for `target`.
pub fn held(prev: u64, target: u64, gain: f64) -> Option<Reason> {
    (prev != target).then_some(Reason::Hysteresis { gain })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_large_move_is_spread_over_intervals() {
        let (out, limited) = limit_moves(&[100, 0], &[0, 100], 100, 0.25);
        assert!(limited);
        assert_eq!(out, vec![75, 25]);
    }

    proptest! {
        #[test]
        fn never_over_capacity_and_always_towards_the_target(
            sizes in proptest::collection::vec((0u64..1000, 0u64..1000), 1..8),
            max_move in 0.01f64..1.0,
        ) {
            let capacity: u64 = sizes.iter().map(|s| s.0).sum::<u64>()
                .max(sizes.iter().map(|s| s.1).sum::<u64>());
            let prev: Vec<u64> = sizes.iter().map(|s| s.0).collect();
            let target: Vec<u64> = sizes.iter().map(|s| s.1).collect();
            let (out, _) = limit_moves(&prev, &target, capacity, max_move);
            prop_assert!(out.iter().sum::<u64>() <= capacity);
            for k in 0..out.len() {
                let (lo, hi) = (prev[k].min(target[k]), prev[k].max(target[k]));
                prop_assert!(out[k] >= lo && out[k] <= hi);
            }
        }
    }
}
