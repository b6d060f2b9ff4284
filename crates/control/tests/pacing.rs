//! Shrinks paced to the write-backs the disks can take: a shrink evicts a tenant's least
//! recently used blocks at once, and the dirty ones go to the disk ahead of everyone
//! queued there, so under `lachesis` the dirty blocks a plan takes from a tenant fit in a
//! share of each interval's disk time, and the space not yet freed is taken from the
//! others' growth. What share of a tenant's blocks is dirty: the share of its requests
//! that write, where the observer tells writes apart; where it does not, all of an idle
//! tenant's (its reclaim), none of an active one's.

mod common;

use common::*;
use control::*;

/// Host `h` (1,000 blocks) and server `s` (2,000); a miss costs 8 ms.
fn topo() -> Topology {
    let t = |name: &str| tenant(name, 0, vec![0]);
    topology(
        vec![node("h", 1000)],
        vec![node("s", 2000)],
        vec![t("small"), t("big")],
    )
}

const SECONDS: f64 = 10.0;

/// 1,000 requests with the curve of `footprint` blocks; `writes`: `None` when the
/// observer does not tell reads from writes, else how many of them wrote.
fn tenant_obs(footprint: u64, writes: Option<u64>) -> TenantObservation {
    TenantObservation {
        writes: writes.unwrap_or(0),
        read_latency_ms: writes.map(|_| 2.0),
        write_latency_ms: writes.map(|_| 2.0),
        ..observed(1000, lru_curve(footprint))
    }
}

/// `small` (footprint 100 blocks: it needs little of its fair share) and `big` (20,000:
/// it gains from all of it), `small`'s writes as `writes`.
fn obs(writes: Option<u64>) -> Observations {
    Observations {
        seconds: SECONDS,
        tenants: vec![tenant_obs(100, writes), tenant_obs(20_000, Some(0))],
        tiers: vec![],
        servers: Vec::new(),
    }
}

/// `lachesis` without floors (so `small` is not held while its curve is young), started
/// from fair share as the simulator starts its caches: 500 + 1,000 blocks each.
fn from_fair() -> (Controller, f64) {
    let t = topo();
    let mut scheme = Scheme::named("lachesis").unwrap();
    let h = scheme.hysteresis.as_mut().unwrap();
    h.hold_floors = false;
    // Dirty blocks the disk writes back in the budgeted share of an interval.
    let budget = h.write_back_share * SECONDS / (t.service.miss_ms / 1e3);
    let fresh = Controller::new(t.clone(), scheme.clone()).unwrap();
    let mut state = fresh.state().clone();
    state.previous = Some(fresh.initial_plan());
    (Controller::resume(t, scheme, state).unwrap(), budget)
}

fn total(tp: &TenantPlan) -> u64 {
    tp.l1.size + tp.l2_total()
}

#[test]
fn a_shrink_evicts_no_more_dirty_blocks_than_the_disk_takes_per_interval() {
    let (mut c, budget) = from_fair();
    assert!(budget >= 1.0, "{budget}");
    let mut held = 1500u64;
    let mut shrank = 0;
    for k in 1..=6 {
        let p = c.step(SECONDS * k as f64, &obs(Some(1000))).unwrap();
        let (small, big) = (&p.tenants[0], &p.tenants[1]);
        // All its requests write: every block it gives up may be dirty. Level 1's victims
        // are demoted into a level 2 that has not grown yet, so what leaves either level
        // is what the disk must take.
        let given = held - total(small);
        assert!(
            given as f64 <= budget,
            "interval {k}: gave {given} > {budget}"
        );
        assert!(given > 0, "interval {k}: it must still move");
        shrank += given;
        held = total(small);
        // Still on its way, and said so.
        for reason in std::iter::once(&small.l1.reason).chain(small.l2.iter().map(|p| &p.reason)) {
            assert!(
                matches!(reason, Reason::Draining { target } if *target < 1000),
                "interval {k}: {reason:?}"
            );
        }
        // Nothing lies unused and nothing is over: `big` grows by what `small` freed.
        assert_eq!(small.l1.size + big.l1.size, 1000, "interval {k}");
        assert_eq!(small.l2[0].size + big.l2[0].size, 2000, "interval {k}");
        assert!(
            matches!(big.l1.reason, Reason::MoveLimited { .. }),
            "{:?}",
            big.l1.reason
        );
    }
    assert!(shrank as f64 >= 5.0 * (budget - 2.0), "{shrank}");
}

#[test]
fn a_writer_drains_as_fast_as_its_dirty_share_allows_and_a_reader_is_not_paced() {
    let first = |writes: Option<u64>| {
        let (mut c, budget) = from_fair();
        let p = c.step(SECONDS, &obs(writes)).unwrap();
        (1500 - total(&p.tenants[0]), p, budget)
    };
    let (all, _, budget) = first(Some(1000));
    // A quarter of its requests write: about a quarter of what it gives up is dirty, so
    // it may give up four times as much.
    let (quarter, p, _) = first(Some(250));
    assert!(
        quarter as f64 <= 4.0 * budget + 1.0,
        "{quarter} vs {budget}"
    );
    assert!(
        quarter as f64 >= 4.0 * budget - 4.0,
        "{quarter} vs {budget}"
    );
    assert!(quarter > all);
    assert!(matches!(p.tenants[0].l1.reason, Reason::Draining { .. }));
    // Seen not to write, or active with its writes not told apart: its shrink is not paced,
    // and it moves as far as the hysteresis limit (a quarter of each node per interval).
    for writes in [Some(0), None] {
        let (given, p, _) = first(writes);
        assert_eq!(
            p.tenants[0].l1.size, 250,
            "{writes:?}: {:?}",
            p.tenants[0].l1
        );
        assert_eq!(
            p.tenants[0].l2[0].size, 500,
            "{writes:?}: {:?}",
            p.tenants[0].l2
        );
        assert_eq!(given, 750);
        assert!(!matches!(p.tenants[0].l1.reason, Reason::Draining { .. }));
    }
}

#[test]
fn an_idle_tenant_whose_writes_are_not_told_apart_is_reclaimed_at_the_disks_pace() {
    // Both busy for a step, then `small` sends nothing. Its writes were never told apart,
    // so once it counts as idle (two intervals without a request) all it holds is taken
    // to be dirty: its reclaim (to the idle floor, 0) gives up at most the budget per
    // interval (its reason stays the idle one, or the move limit's towards 0), and its
    // space goes to `big` as it is freed.
    let (mut c, budget) = from_fair();
    // While busy, `small` gains from its space as much as `big` does.
    let mut busy = obs(None);
    busy.tenants[0] = tenant_obs(20_000, None);
    c.step(SECONDS, &busy).unwrap();
    let mut quiet = busy.clone();
    quiet.tenants[0].requests = 0;
    quiet.tenants[0].bytes = 0;
    let p = c.step(2.0 * SECONDS, &quiet).unwrap();
    let start = total(&p.tenants[0]);
    let mut held = start;
    for k in 3..=7 {
        let p = c.step(SECONDS * k as f64, &quiet).unwrap();
        let small = &p.tenants[0];
        // (Hysteresis may hold it an interval, when what is left to move gains little.)
        let given = held - total(small);
        assert!(
            given as f64 <= budget,
            "interval {k}: gave {given} (budget {budget})"
        );
        held = total(small);
        assert!(
            matches!(
                small.l1.reason,
                Reason::Idle { .. } | Reason::MoveLimited { target: 0 }
            ),
            "{:?}",
            small.l1.reason
        );
        assert_eq!(p.host_used(0), 1000, "interval {k}");
        assert_eq!(p.server_used(0), 2000, "interval {k}");
    }
    assert!(start >= 1000, "held at idle=1: {start}");
    assert!(held < start && held > 0, "draining: {start} → {held}");
}

#[test]
fn pacing_can_be_turned_off() {
    let t = topo();
    let mut scheme = Scheme::named("lachesis").unwrap();
    let h = scheme.hysteresis.as_mut().unwrap();
    h.hold_floors = false;
    h.write_back_share = 0.0;
    let fresh = Controller::new(t.clone(), scheme.clone()).unwrap();
    let mut state = fresh.state().clone();
    state.previous = Some(fresh.initial_plan());
    let mut c = Controller::resume(t, scheme, state).unwrap();
    let p = c.step(SECONDS, &obs(None)).unwrap();
    assert_eq!(p.tenants[0].l1.size, 250, "{:?}", p.tenants[0].l1);
}
