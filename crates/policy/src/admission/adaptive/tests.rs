//! Tests of Figure 6's rule, the running policy, cooling, the rate limit, and time.

use super::*;
use crate::admission::build_admission;
use proptest::prelude::*;

fn obs(hits: u64, migrations: u64) -> PeriodObservation {
    PeriodObservation { hits, migrations }
}

#[test]
fn figure6_trajectory() {
    use LastMove::*;
    let mut s = ThresholdState::default();
    let seq = [
        (obs(0, 0), (1, 0.0, Lowered)), // 0 migrations, not > 0: lower both
        (obs(50, 10), (1, 1.0, RaisedJustify)), // 10 > 0, 5/chunk >= 0
        (obs(5, 10), (2, 1.0, RaisedThreshold)), // 0.5/chunk < 1
        (obs(30, 10), (2, 2.0, RaisedJustify)), // 3 >= 1
        (obs(30, 10), (2, 3.0, RaisedJustify)), // 3 >= 2
        (obs(30, 10), (2, 4.0, RaisedJustify)), // 3 >= 3
        (obs(30, 10), (3, 4.0, RaisedThreshold)), // 3 < 4
        (obs(12, 3), (2, 3.0, Lowered)), // 3 migrations, not > 4
        (obs(40, 3), (1, 2.0, Lowered)), // 3, not > 3: lower, however good
        (obs(40, 3), (1, 3.0, RaisedJustify)), // 3 > 2, 13.3 >= 2
        (obs(0, 0), (1, 2.0, Lowered)), // floor at 1
    ];
    for (k, (o, want)) in seq.into_iter().enumerate() {
        s = step(s, o);
        assert_eq!((s.threshold, s.justify, s.last), want, "period {}", k + 1);
    }
}

#[test]
fn no_cap_on_the_threshold() {
    // A chunk that never pays: the threshold rises by one every period, past any cap
    // (the old rule stopped at 16).
    let mut s = ThresholdState {
        justify: 1.0,
        ..ThresholdState::default()
    };
    for _ in 0..200 {
        s = step(s, obs(0, 100));
    }
    assert_eq!((s.threshold, s.justify), (202, 1.0));
}

#[test]
fn the_bar_settles_at_what_placements_earn() {
    // Placements that earn 6 hits each, 100 migrations a period: JUSTIFY climbs by
    // one a period until it passes what placements earn (7 > 6), then the threshold
    // rises by one a period (this constant observation does not react to it).
    let mut s = ThresholdState::default();
    let mut bars = Vec::new();
    for _ in 0..10 {
        s = step(s, obs(600, 100));
        bars.push(s.justify);
    }
    assert_eq!(bars, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.0, 7.0, 7.0]);
    assert_eq!(s.threshold, 5);
}

#[test]
fn running_average_variant() {
    let mut s = ThresholdState {
        rule: JustifyRule::Average,
        ..ThresholdState::default()
    };
    s = step(s, obs(40, 10)); // ratio 4 >= 0; mean 4
    assert_eq!(
        (s.threshold, s.justify, s.last),
        (2, 4.0, LastMove::RaisedJustify)
    );
    s = step(s, obs(20, 10)); // ratio 2 < 4: raise; mean 3
    assert_eq!((s.threshold, s.justify), (3, 3.0));
    s = step(s, obs(90, 10)); // ratio 9 >= 3; mean 5
    assert_eq!((s.threshold, s.justify), (3, 5.0));
    s = step(s, obs(90, 5)); // 5 migrations, not > 5: lower; mean kept
    assert_eq!(
        (s.threshold, s.justify, s.last),
        (2, 5.0, LastMove::Lowered)
    );
}

#[test]
fn the_running_policy_follows_step() {
    let mut a = Adaptive::from_params(
        &Params::parse("adaptive", "period=10,sequential=0,cool-by=0").unwrap(),
    )
    .unwrap();
    let mut placed = Vec::new();
    // Period 1 (threshold 2): block 1 placed on its 2nd miss, 8 one-off misses:
    // 0 hits for 1 migration; 1 > 0 and 0 >= 0: JUSTIFY 1.
    placed.push(a.access(1, false));
    placed.push(a.access(1, false));
    for k in 0..8 {
        assert!(!a.access(1_000 + 2 * k, false));
    }
    // Period 2: block 2 placed on its 2nd miss, then 8 hits: 1 migration, not > 1:
    // lower both (threshold 1, JUSTIFY 0).
    placed.push(a.access(2, false));
    placed.push(a.access(2, false));
    for _ in 0..8 {
        a.access(2, true);
    }
    // Period 3 (threshold 1): block 3 placed on its first miss, 9 hits: JUSTIFY 1.
    placed.push(a.access(3, false));
    for _ in 0..9 {
        a.access(3, true);
    }
    // Period 4: 3 placements, 7 hits: 3 > 1, 2.3 >= 1: JUSTIFY 2.
    for k in 4..7 {
        placed.push(a.access(k, false));
    }
    for _ in 0..7 {
        a.access(3, true);
    }
    // Period 5: 4 placements, 6 hits: 4 > 2, 1.5 < 2: threshold 2.
    for k in 7..11 {
        placed.push(a.access(k, false));
    }
    for _ in 0..6 {
        a.access(3, true);
    }
    assert_eq!(
        placed,
        [false, true, false, true, true, true, true, true, true, true, true, true]
    );
    let trajectory: Vec<(u32, f64, LastMove)> = a
        .history()
        .map(|s| (s.threshold, s.justify, s.last))
        .collect();
    assert_eq!(
        trajectory,
        [
            (2, 1.0, LastMove::RaisedJustify),
            (1, 0.0, LastMove::Lowered),
            (1, 1.0, LastMove::RaisedJustify),
            (1, 2.0, LastMove::RaisedJustify),
            (2, 2.0, LastMove::RaisedThreshold),
        ]
    );
    assert_eq!(a.name(), "adaptive(threshold=2,justify=2)");
}

#[test]
fn cooling_subtracts_every_period() {
    // Threshold 3, cool-by 1 every 4 accesses: a block touched every other period
    // never reaches 3; touched twice per period it does.
    let mut a =
        build_admission("adaptive:threshold=3,min-threshold=3,period=4,sequential=0,cool-by=1")
            .unwrap();
    let mut placed = false;
    for k in 0..40u64 {
        let key = if k % 8 == 0 { 7 } else { 1000 + 3 * k };
        placed |= key == 7 && a.access(key, false);
        if key != 7 {
            a.access(key, false);
        }
    }
    assert!(!placed);
    let mut b =
        build_admission("adaptive:threshold=3,min-threshold=3,period=4,sequential=0,cool-by=1")
            .unwrap();
    let got: Vec<bool> = (0..6).map(|_| b.access(9, false)).collect();
    assert!(got.contains(&true), "{got:?}");
    // A block seen every 4th access: cooled every 4 accesses it never passes 1;
    // cooled every 8 (cool-period) its count goes 1, 2, (cooled) 2, 3: placed at its
    // 4th access.
    let mut c = build_admission(
        "adaptive:threshold=3,min-threshold=3,period=4,cool-period=8,sequential=0,cool-by=1",
    )
    .unwrap();
    let mut when = None;
    for k in 0..40u64 {
        let key = if k % 4 == 0 { 7 } else { 1000 + 3 * k };
        if c.access(key, false) && key == 7 {
            when = Some(k / 4 + 1);
            break;
        }
    }
    assert_eq!(when, Some(4));
}

#[test]
fn rate_limit_defers_placements() {
    // Threshold 1, at most 5 placements per period of 100 accesses, 300 distinct
    // misses (the indices placed are listed): period 1 places 5 (0 hits per migration clears the bar 0: JUSTIFY 1),
    // period 2 places 5 (0 < 1: threshold 2), period 3 places none (no key is seen
    // twice).
    let mut a = Adaptive::from_params(
        &Params::parse(
            "adaptive",
            "threshold=1,max-migrations=5,period=100,sequential=0",
        )
        .unwrap(),
    )
    .unwrap();
    let placed: Vec<u64> = (0..300u64).filter(|&i| a.access(i * 3, false)).collect();
    assert_eq!(placed, [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]);
    assert_eq!(a.deferred_count(), 190);
    // A deferred block keeps its count: placed at its next miss once the limit allows.
    let mut b = Adaptive::from_params(
        &Params::parse(
            "adaptive",
            "max-migrations=1,period=4,sequential=0,cool-by=0",
        )
        .unwrap(),
    )
    .unwrap();
    assert!(!b.access(10, false));
    assert!(b.access(10, false)); // count 2: placed
    assert!(!b.access(20, false));
    assert!(!b.access(20, false)); // count 2, deferred; period ends (JUSTIFY 1)
    assert_eq!(b.deferred_count(), 1);
    assert!(b.access(20, false)); // count 3 >= 2, new period: placed
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Figure 6's invariants on any sequence of periods: the threshold stays at or
    /// above its floor and moves by at most one; JUSTIFY stays non-negative and (by
    /// steps) moves by at most one; exactly the published branch is taken.
    #[test]
    fn figure6_invariants(
        start in 1u32..40,
        periods in prop::collection::vec((0u64..500, 0u64..60), 1..120),
    ) {
        let mut s = ThresholdState { threshold: start, ..ThresholdState::default() };
        for (hits, migrations) in periods {
            let n = step(s, obs(hits, migrations));
            prop_assert!(n.threshold >= n.min_threshold);
            prop_assert!(n.justify >= 0.0);
            prop_assert!(n.threshold.abs_diff(s.threshold) <= 1);
            prop_assert!((n.justify - s.justify).abs() <= 1.0);
            let judged = migrations as f64 > s.justify;
            if !judged {
                prop_assert_eq!(n.threshold, s.threshold.saturating_sub(1).max(1));
                prop_assert_eq!(n.justify, (s.justify - 1.0).max(0.0));
            } else if (hits as f64) < s.justify * migrations as f64 {
                prop_assert_eq!(n.threshold, s.threshold + 1);
                prop_assert_eq!(n.justify, s.justify);
            } else {
                prop_assert_eq!(n.threshold, s.threshold);
                prop_assert_eq!(n.justify, s.justify + 1.0);
            }
            s = n;
        }
    }

    /// The average variant keeps JUSTIFY at the mean ratio of the judged periods.
    #[test]
    fn average_is_the_mean_of_judged_ratios(
        periods in prop::collection::vec((0u64..500, 0u64..60), 1..80),
    ) {
        let mut s = ThresholdState { rule: JustifyRule::Average, ..ThresholdState::default() };
        let mut ratios = Vec::new();
        for (hits, migrations) in periods {
            if migrations as f64 > s.justify {
                ratios.push(hits as f64 / migrations as f64);
            }
            s = step(s, obs(hits, migrations));
            if !ratios.is_empty() {
                let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
                prop_assert!((s.justify - mean).abs() < 1e-9);
            } else {
                prop_assert_eq!(s.justify, 0.0);
            }
            prop_assert!(s.threshold >= 1);
        }
    }
}

#[test]
fn periods_and_cooling_are_of_time() {
    // The published defaults: Figure 6 every 15 s and cooling by 1 every 15 s, whatever
    // the number of accesses in between.
    let mut a = build_admission("adaptive:sequential=0").unwrap();
    assert_eq!(a.threshold(), Some(2));
    // t = 0..15 s: block 1 placed on its 2nd miss, then 20 hits: 1 migration > JUSTIFY 0
    // and 20 hits per migration >= 0, so JUSTIFY 1 when the first period ends at 15 s.
    a.tick(0.0);
    assert!(!a.access(1, false));
    assert!(a.access(1, false));
    for _ in 0..20 {
        a.access(1, true);
    }
    a.tick(14.9);
    assert_eq!(a.name(), "adaptive(threshold=2,justify=0)");
    a.tick(15.0);
    assert_eq!(a.name(), "adaptive(threshold=2,justify=1)");
    // Four idle periods (t = 15..75 s, no migrations): each lowers both, whatever the
    // accesses did not do.
    a.tick(75.0);
    assert_eq!(a.name(), "adaptive(threshold=1,justify=0)");
    // Cooling every 15 s: a block counted once at t = 80 s and again at t = 100 s has
    // been cooled in between (count 1 -> 0 at t = 90 s), so at threshold 2 it would not
    // be placed; counted twice within one period it is.
    let mut b = build_admission("adaptive:sequential=0,threshold=2,min-threshold=2").unwrap();
    b.tick(0.0);
    b.tick(80.0);
    assert!(!b.access(7, false));
    b.tick(100.0);
    assert!(!b.access(7, false));
    b.tick(101.0);
    assert!(b.access(7, false));
    // Without cooling (MFU counting, `cool-by=0`) the count survives the periods.
    let mut c =
        build_admission("adaptive:sequential=0,cool-by=0,threshold=3,min-threshold=3").unwrap();
    c.tick(0.0);
    assert!(!c.access(9, false));
    c.tick(500.0);
    assert!(!c.access(9, false));
    c.tick(1000.0);
    assert!(c.access(9, false));
}

#[test]
fn a_deferred_placement_keeps_its_count_and_counts_no_migration() {
    let mut a = Adaptive::from_params(
        &Params::parse(
            "adaptive",
            "threshold=3,min-threshold=3,sequential=0,cool-by=0",
        )
        .unwrap(),
    )
    .unwrap();
    a.tick(0.0);
    assert!(!a.access(5, false));
    assert!(!a.access(5, false));
    assert!(a.access(5, false)); // admitted at its 3rd miss
    a.deferred(5); // the owner had no room to copy it
    assert_eq!(a.deferred_count(), 1);
    // Its next miss places it at once (the count was kept), and only that counts as a
    // migration: one migration and its 4 hits in the period, 4 >= 0: JUSTIFY 1.
    assert!(a.access(5, false));
    for _ in 0..4 {
        a.access(5, true);
    }
    a.tick(15.0);
    let h: Vec<(u64, f64)> = a
        .history()
        .map(|s| (s.threshold as u64, s.justify))
        .collect();
    assert_eq!(h, [(3, 1.0)]);
    // MRFU and MFU keep a deferred key's count the same way.
    for spec in ["mrfu:threshold=2,sequential=0", "threshold:n=2"] {
        let mut m = build_admission(spec).unwrap();
        assert!(!m.access(8, false));
        assert!(m.access(8, false));
        m.deferred(8);
        assert!(m.access(8, false), "{spec}");
    }
}

#[test]
fn a_controller_sets_the_threshold_and_the_counts_stay() {
    let mut a = build_admission("adaptive:sequential=0,cool-by=0").unwrap();
    a.tick(0.0);
    assert!(!a.access(1, false)); // count 1 of 2
    assert!(a.set_threshold(4));
    assert_eq!(a.threshold(), Some(4));
    // The count survived the change: two more misses reach 3, the third 4.
    assert!(!a.access(1, false));
    assert!(!a.access(1, false));
    assert!(a.access(1, false));
    // The policy's own rule no longer moves the threshold (a period with no migrations
    // would lower it).
    a.tick(60.0);
    assert_eq!(a.threshold(), Some(4));
    let mut m = build_admission("mrfu:threshold=2,sequential=0").unwrap();
    assert!(!m.access(3, false));
    assert!(m.set_threshold(3));
    assert!(!m.access(3, false));
    assert!(m.access(3, false));
    assert!(!build_admission("demand").unwrap().set_threshold(3));
}
