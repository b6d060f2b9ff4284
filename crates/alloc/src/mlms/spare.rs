//! MLMS's spare-space step (Sec. 3.2, step 1.4): once a candidate from the feasibility
//! set holds every tenant's SLO minimum, *all* the space left at each level is handed out
//! "in proportion to the projected gains that each application will exhibit in terms of
//! reducing the I/O latency per-unit allocation of cache at that level".
//!
//! Per level-1 host with `R` blocks left, tenant `i`'s projected gain is what the whole of
//! `R` would take off its latency, per block and relative to its fair-share latency
//! (the fair speedup's unit): `g_i = (lat(c) − lat(c + R)) / (R · lat_fair_i)`; each
//! tenant gets `R · g_i / Σ g` (rounding remainders to the largest gains), or an equal
//! split when no tenant is projected to gain. Level 2 is one pool, as the paper's step 1
//! sees it (the aggregate of the servers; step 2's LP places the totals): its `R` is
//! shared the same way, except that a tenant never takes more than the free room of the
//! servers it is connected to (taken from them in proportion to their room, so the
//! partition stays placeable); what a capped tenant cannot take goes round again to the
//! others, until the pool or every tenant's room is spent.
//!
//! Nothing is held back because its gain is zero: the paper's step ends "after utilizing
//! all the available cache space at each level".

use super::{lat, Ctx, Point};

impl Ctx<'_> {
    /// Hands out the spare space of the levels MLMS controls (`l1`, `l2`) to `pts`, in
    /// proportion to projected gains (see the module doc); `room` is each server's free
    /// level-2 room after placing `pts` (from [`Ctx::room`]) and is spent as level 2 is
    /// handed out.
    pub(super) fn spread_spare(&self, pts: &mut [Point], l1: bool, l2: bool, room: &mut [f64]) {
        if l1 {
            self.spread_level1(pts);
        }
        if l2 {
            self.spread_level2(pts, room);
        }
    }

    /// Projected gain of tenant `i` from `extra` more blocks at one level, per block and
    /// relative to its fair latency; never negative.
    fn projected_gain(&self, i: usize, at: Point, more: Point, extra: u64) -> f64 {
        if extra == 0 {
            return 0.0;
        }
        let drop = lat(self.p, i, at) - lat(self.p, i, more);
        (drop / (extra as f64 * self.lat_fair[i].max(1e-12))).max(0.0)
    }

    fn spread_level1(&self, pts: &mut [Point]) {
        let left = self.level1_left(pts);
        for (h, &r) in left.iter().enumerate() {
            let members: Vec<usize> = (0..pts.len())
                .filter(|&i| self.p.tenants[i].host == h)
                .collect();
            if r == 0 || members.is_empty() {
                continue;
            }
            let gains: Vec<f64> = members
                .iter()
                .map(|&i| self.projected_gain(i, pts[i], (pts[i].0 + r, pts[i].1), r))
                .collect();
            let caps = vec![u64::MAX; members.len()];
            for (k, share) in proportional(r, &gains, &caps).into_iter().enumerate() {
                pts[members[k]].0 += share;
            }
        }
    }

    fn spread_level2(&self, pts: &mut [Point], room: &mut [f64]) {
        let n = pts.len();
        let mut pool = self
            .c2_total
            .saturating_sub(pts.iter().map(|p| p.1).sum::<u64>());
        if pool == 0 {
            return;
        }
        // The gains are projected once, over the whole pool, as the step is one
        // distribution; rounds only re-share what capped tenants could not take.
        let r = pool;
        let gains: Vec<f64> = (0..n)
            .map(|i| self.projected_gain(i, pts[i], (pts[i].0, pts[i].1 + r), r))
            .collect();
        let mut open: Vec<bool> = vec![true; n];
        while pool > 0 {
            let caps: Vec<u64> = (0..n)
                .map(|i| {
                    if !open[i] {
                        return 0;
                    }
                    let avail: f64 = self.p.tenants[i].servers.iter().map(|&s| room[s]).sum();
                    let reach = self.reach[i].saturating_sub(pts[i].1);
                    (avail.max(0.0).floor() as u64).min(reach)
                })
                .collect();
            if caps.iter().all(|&c| c == 0) {
                break;
            }
            let g: Vec<f64> = (0..n)
                .map(|i| if caps[i] > 0 { gains[i] } else { 0.0 })
                .collect();
            let shares = proportional(pool, &g, &caps);
            let mut given = 0u64;
            for i in 0..n {
                let want = shares[i];
                if want == 0 {
                    continue;
                }
                let servers = &self.p.tenants[i].servers;
                let avail: f64 = servers.iter().map(|&s| room[s]).sum();
                let take = (want as f64).min(avail.floor()).max(0.0) as u64;
                if take == 0 {
                    open[i] = false;
                    continue;
                }
                for &s in servers {
                    room[s] -= take as f64 * room[s] / avail;
                }
                pts[i].1 += take;
                given += take;
                if take < want || caps[i] == take {
                    open[i] = false;
                }
            }
            if given == 0 {
                break;
            }
            pool -= given.min(pool);
        }
    }
}

/// Splits `total` blocks over items in proportion to `gains` (an equal split over the
/// items with room when every gain is zero), each item at most its cap: what a capped
/// item cannot take is shared again among the others. Rounding remainders go to the
/// largest gains first (the lowest index on ties), one block each. The result sums to
/// `total` unless the caps together hold less.
pub(super) fn proportional(total: u64, gains: &[f64], caps: &[u64]) -> Vec<u64> {
    let n = gains.len();
    let mut out = vec![0u64; n];
    let mut left = total;
    let mut open: Vec<bool> = (0..n).map(|i| caps[i] > 0).collect();
    while left > 0 && open.iter().any(|&o| o) {
        let weight = |i: usize| gains[i].max(0.0);
        let sum: f64 = (0..n).filter(|&i| open[i]).map(weight).sum();
        let count = open.iter().filter(|&&o| o).count() as f64;
        let share = |i: usize| -> f64 {
            if sum > 0.0 {
                left as f64 * weight(i) / sum
            } else {
                left as f64 / count
            }
        };
        let mut capped = false;
        let mut given = 0u64;
        let mut parts: Vec<(usize, u64, f64)> = Vec::new();
        let members: Vec<usize> = (0..n).filter(|&i| open[i]).collect();
        for i in members {
            let room = caps[i] - out[i];
            let s = share(i);
            if s >= room as f64 {
                out[i] += room;
                given += room;
                open[i] = false;
                capped = true;
            } else {
                parts.push((i, s.floor() as u64, s - s.floor()));
            }
        }
        if capped {
            // Re-share what is left among the uncapped, from scratch.
            left -= given.min(left);
            continue;
        }
        for &(i, whole, _) in &parts {
            out[i] += whole;
            given += whole;
        }
        left -= given.min(left);
        // Remainders: one block each, largest fraction (then gain) first.
        parts.sort_by(|a, b| {
            b.2.total_cmp(&a.2)
                .then(gains[b.0].total_cmp(&gains[a.0]))
                .then(a.0.cmp(&b.0))
        });
        for &(i, _, _) in &parts {
            if left == 0 {
                break;
            }
            if out[i] < caps[i] {
                out[i] += 1;
                left -= 1;
            }
        }
        if given == 0 && parts.iter().all(|&(i, _, _)| out[i] >= caps[i]) {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::proportional;

    #[test]
    fn shares_follow_the_gains_and_use_everything() {
        assert_eq!(proportional(100, &[3.0, 1.0], &[u64::MAX; 2]), vec![75, 25]);
        // Nobody gains: an equal split, still all of it.
        assert_eq!(
            proportional(10, &[0.0, 0.0, 0.0], &[u64::MAX; 3]),
            vec![4, 3, 3]
        );
        // A zero gain beside a positive one gets nothing.
        assert_eq!(proportional(9, &[0.0, 2.0], &[u64::MAX; 2]), vec![0, 9]);
    }

    #[test]
    fn a_capped_item_passes_its_excess_on() {
        assert_eq!(
            proportional(100, &[3.0, 1.0], &[10, u64::MAX]),
            vec![10, 90]
        );
        // Caps that hold less than the total: everything they hold, no more.
        assert_eq!(proportional(100, &[1.0, 1.0], &[10, 20]), vec![10, 20]);
        assert_eq!(proportional(0, &[1.0], &[5]), vec![0]);
    }

    proptest::proptest! {
        #[test]
        fn never_over_a_cap_and_sums_to_what_fits(
            total in 0u64..10_000,
            items in proptest::collection::vec((0.0f64..5.0, 0u64..3_000), 1..8),
        ) {
            let gains: Vec<f64> = items.iter().map(|x| x.0).collect();
            let caps: Vec<u64> = items.iter().map(|x| x.1).collect();
            let out = proportional(total, &gains, &caps);
            for (o, c) in out.iter().zip(&caps) {
                proptest::prop_assert!(o <= c);
            }
            let fits: u64 = caps.iter().sum::<u64>().min(total);
            proptest::prop_assert_eq!(out.iter().sum::<u64>(), fits);
        }
    }
}
