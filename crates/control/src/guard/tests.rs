//! Tests of the guard's step and floors: references measured and settled, probes proven,
//! failed or undecided, harm reverted with doubling penalties, each kind of SLO judged,
//! noise too wide to judge, and a workload or disks that changed since the reference.

use super::samples::{scatter, spread};
use super::*;
use crate::model::LatencyModel;
use crate::observe::{LevelCount, TenantObservation};
use crate::topology::{Levels, ServiceTimes};
use mrc::HitRatioCurve;

fn model() -> LatencyModel {
    LatencyModel {
        // Miss ratio 1 at 0 blocks, 0.5 at 100, 0 at 200.
        curve: HitRatioCurve::from_pairs([(0, 1.0), (100, 0.5), (200, 0.0)]).unwrap(),
        service: ServiceTimes {
            l1_hit_ms: 0.1,
            l2_hit_ms: 0.5,
            miss_ms: 10.0,
        },
        levels: Levels::Exclusive,
        writes: None,
    }
}

fn obs(latency: f64, hit_ratio: f64) -> TenantObservation {
    TenantObservation {
        requests: 1000,
        l1: LevelCount {
            lookups: 1000,
            hits: (hit_ratio * 1000.0) as u64,
        },
        mean_latency_ms: latency,
        ..Default::default()
    }
}

fn held<'a>(held: (u64, &'a [u64]), fair: (u64, &'a [u64])) -> Held<'a> {
    Held {
        held,
        fair,
        fair_policy: true,
        neighbours_at_fair: true,
        fair_hit: None,
        seconds: 10.0,
    }
}

/// A tenant whose reference is measured (the mean of `samples`), at its fair share.
fn referenced(samples: &[f64]) -> GuardState {
    GuardState {
        reference_ms: Some(samples.iter().sum::<f64>() / samples.len() as f64),
        samples: samples.to_vec(),
        trusted: TRUSTED_INTERVALS,
        ..Default::default()
    }
}

const DEG: Limit = Limit::Degradation(0.05);
const FAIR: [u64; 1] = [64];

fn fair_sizes() -> GuardSizes {
    GuardSizes {
        l1: 64,
        l2: FAIR.to_vec(),
    }
}

/// One step of the guard at `h` (over [`model`]) with `ms` measured and `hit` of the
/// lookups hitting.
fn judge(st: &mut GuardState, lim: Limit, h: Held, ms: f64, hit: f64) -> Verdict {
    step(st, lim, &model(), Some(h), &obs(ms, hit))
}

/// Held at `(l1, [l2])` against the fair share (64, [64]), neighbours moved.
fn at(l1: u64, l2: &[u64]) -> Held<'_> {
    let mut h = held((l1, l2), (64, &FAIR));
    h.neighbours_at_fair = false;
    h
}

#[test]
fn unreferenced_until_settled_then_proven_at_fair_share() {
    let (m, mut st) = (model(), GuardState::default());
    assert_eq!(
        step(&mut st, DEG, &m, None, &obs(5.0, 0.5)),
        Verdict::Unreferenced
    );
    // Latency at fair share falling as the cache warms: not settled.
    for ms in [8.0, 6.0, 5.0, 4.0] {
        let v = judge(&mut st, DEG, held((64, &FAIR), (64, &FAIR)), ms, 0.5);
        assert_eq!(v, Verdict::Unreferenced, "{ms}");
    }
    let v = judge(&mut st, DEG, held((64, &FAIR), (64, &FAIR)), 4.1, 0.5);
    assert_eq!(v, Verdict::Proven);
    assert_eq!(st.samples, vec![6.0, 5.0, 4.0, 4.1]);
    // Proven at its fair share: the plan may take it one first step (1/8 of fair) below.
    let f = floor(&st, v, &fair_sizes());
    assert_eq!((f.l1, f.l2), (56, vec![56]));
    // While its nodes fall back, the floor is the fair share itself.
    assert_eq!(
        floor(&st, Verdict::Unreferenced, &fair_sizes()),
        fair_sizes()
    );
}

#[test]
fn a_probe_within_the_slo_is_proven_and_the_next_step_doubles() {
    let mut st = referenced(&[2.0; REFERENCE_SAMPLES]);
    // 2.08 ms at (56, [56]): within 5 % of the 2 ms reference, proven at once.
    assert_eq!(
        judge(&mut st, DEG, at(56, &[56]), 2.08, 0.4),
        Verdict::Proven
    );
    assert_eq!(st.proven(&fair_sizes()).l1, 56);
    assert_eq!(st.step, 2.0 * FIRST_STEP);
    let f = floor(&st, Verdict::Proven, &fair_sizes());
    assert_eq!((f.l1, f.l2), (40, vec![40]));
    // A probe that is above the accept bound but within the noise: undecided; the plan
    // keeps it at the probe's sizes, and after PROBE_INTERVALS it ends, the step halved.
    let mut st = referenced(&[1.9, 2.0, 2.0, 2.1]);
    let v = judge(&mut st, DEG, at(56, &[56]), 2.2, 0.4);
    assert_eq!(v, Verdict::Probing);
    assert_eq!(floor(&st, v, &fair_sizes()).l1, 56);
    let v = judge(&mut st, DEG, at(56, &[56]), 2.2, 0.4);
    assert_eq!(v, Verdict::Probing);
    let v = judge(&mut st, DEG, at(56, &[56]), 2.2, 0.4);
    assert_eq!(v, Verdict::ProbeEnded { intervals: 0 });
    assert_eq!(floor(&st, v, &fair_sizes()), fair_sizes());
    assert_eq!(st.step, FIRST_STEP / 2.0);
    assert_eq!(st.proven(&fair_sizes()), fair_sizes());
}

#[test]
fn a_probe_measured_to_miss_is_reverted_and_probing_pauses() {
    let mut st = referenced(&[2.0; REFERENCE_SAMPLES]);
    // 3 ms at (56, [56]) is beyond 5 % and the (zero) noise: the probe failed.
    let v = judge(&mut st, DEG, at(56, &[56]), 3.0, 0.4);
    assert_eq!(
        v,
        Verdict::ProbeEnded {
            intervals: BASE_PENALTY
        }
    );
    assert!(
        !v.falls_back(),
        "a failed probe reverts the tenant, not its nodes"
    );
    assert_eq!(floor(&st, v, &fair_sizes()), fair_sizes());
    // Back at its proven size: no probe while the penalty runs.
    for left in (0..BASE_PENALTY).rev() {
        let v = judge(&mut st, DEG, at(64, &[64]), 2.0, 0.5);
        assert_eq!(v, Verdict::ProbeEnded { intervals: left });
    }
    assert_eq!(
        judge(&mut st, DEG, at(64, &[64]), 2.0, 0.5),
        Verdict::Proven
    );
    // A second failure in a row doubles the pause.
    let s = ((st.step * 64.0).ceil()) as u64;
    let v = judge(&mut st, DEG, at(64 - s, &[64 - s]), 3.0, 0.4);
    assert_eq!(
        v,
        Verdict::ProbeEnded {
            intervals: 2 * BASE_PENALTY
        }
    );
}

#[test]
fn a_harm_at_the_proven_size_sends_its_nodes_back_and_penalties_double() {
    let mut st = referenced(&[2.0; REFERENCE_SAMPLES]);
    // Proven down to (56, [56]).
    judge(&mut st, DEG, at(56, &[56]), 2.0, 0.4);
    assert_eq!(st.proven(&fair_sizes()).l1, 56);
    // Held there, a neighbour's move makes it 2.2 ms: harm from outside its probes.
    let v = judge(&mut st, DEG, at(56, &[56]), 2.2, 0.4);
    assert_eq!(v, Verdict::Reverted);
    assert!(v.falls_back());
    assert_eq!(
        st.proven(&fair_sizes()),
        fair_sizes(),
        "proven sizes forgotten"
    );
    assert_eq!((st.penalty, st.harms), (BASE_PENALTY, 1));
    for left in (0..BASE_PENALTY).rev() {
        let v = judge(&mut st, DEG, held((64, &FAIR), (64, &FAIR)), 2.0, 0.5);
        assert_eq!(v, Verdict::Penalised { intervals: left });
    }
    let v = judge(&mut st, DEG, at(64, &[64]), 3.0, 0.5);
    assert_eq!(v, Verdict::Reverted);
    assert_eq!(st.penalty, 2 * BASE_PENALTY);
}

#[test]
fn a_difference_within_the_noise_at_fair_share_is_no_evidence() {
    // Samples 10 to 13 ms: a spread of 3 / 11.5 of the mean.
    let mut st = referenced(&[10.0, 11.0, 12.0, 13.0]);
    assert_eq!(
        judge(&mut st, DEG, at(64, &[64]), 14.0, 0.5),
        Verdict::Proven
    );
    assert_eq!(
        judge(&mut st, DEG, at(64, &[64]), 16.0, 0.5),
        Verdict::Reverted
    );
}

#[test]
fn a_lasting_harm_within_one_intervals_noise_shows_in_the_mean_of_several() {
    // Samples 5 to 15 ms: a spread of 1.0, so one interval must pass 21 ms to count.
    let mut st = referenced(&[5.0, 8.0, 12.0, 15.0]);
    // 18 ms, interval after interval at fair sizes beside moved neighbours: each within
    // one interval's noise, but their mean is 1.8 times the reference; from the fourth
    // on, the bound is 1.05 · 10 · (1 + 1/√4) = 15.75 ms.
    for _ in 1..REFERENCE_SAMPLES {
        assert_eq!(
            judge(&mut st, DEG, at(64, &[64]), 18.0, 0.5),
            Verdict::Proven
        );
    }
    assert_eq!(
        judge(&mut st, DEG, at(64, &[64]), 18.0, 0.5),
        Verdict::Reverted
    );
    assert!(st.moved.is_empty());
    // Moved intervals whose mean stays within that bound are no evidence.
    let mut st = referenced(&[5.0, 8.0, 12.0, 15.0]);
    for ms in [14.0, 6.0, 15.0, 7.0, 14.0, 6.0, 15.0, 7.0] {
        assert_eq!(judge(&mut st, DEG, at(64, &[64]), ms, 0.5), Verdict::Proven);
    }
    assert_eq!(st.moved.len(), 8);
    // A return to the fair point beside neighbours at theirs starts the count afresh.
    judge(&mut st, DEG, held((64, &FAIR), (64, &FAIR)), 10.0, 0.5);
    assert!(st.moved.is_empty());
}

#[test]
fn a_neighbours_move_that_hurts_a_tenant_at_fair_share_falls_back_too() {
    let mut st = referenced(&[2.0; REFERENCE_SAMPLES]);
    let v = judge(&mut st, DEG, at(64, &FAIR), 3.0, 0.5);
    assert_eq!(v, Verdict::Reverted);
    assert!(v.falls_back());
    // Its latency then is no sample of fair share's.
    assert_eq!(st.samples, vec![2.0; REFERENCE_SAMPLES]);
}

#[test]
fn another_policy_than_fairs_is_a_move_the_guard_judges() {
    let mut st = referenced(&[2.0; REFERENCE_SAMPLES]);
    let mut h = held((64, &FAIR), (64, &FAIR));
    h.fair_policy = false;
    let v = judge(&mut st, DEG, h, 3.0, 0.5);
    assert_eq!(v, Verdict::Reverted);
    assert_eq!(st.samples, vec![2.0; REFERENCE_SAMPLES]);
}

#[test]
fn a_latency_slo_is_harmed_only_past_both_its_number_and_fair_shares() {
    let lim = Limit::LatencyMs(2.0);
    let mut st = referenced(&[1.0; REFERENCE_SAMPLES]);
    // Below its proven size: 1.9 ms meets the 2 ms SLO, so the probe is proven.
    assert_eq!(
        judge(&mut st, lim, at(56, &[56]), 1.9, 0.1),
        Verdict::Proven
    );
    assert_eq!(
        judge(&mut st, lim, at(56, &[56]), 2.1, 0.1),
        Verdict::Reverted
    );
    // Fair share gives 3 ms: a probe that keeps it at 2.5 ms does it no harm.
    let mut st = referenced(&[3.0; REFERENCE_SAMPLES]);
    assert_eq!(
        judge(&mut st, lim, at(56, &[56]), 2.5, 0.1),
        Verdict::Proven
    );
}

#[test]
fn a_tail_slo_is_judged_on_its_quantile_not_the_mean() {
    let lim = Limit::of(&crate::topology::Slo::P99Ms(5.0)).unwrap();
    assert_eq!(
        lim,
        Limit::Tail {
            quantile: 0.99,
            ms: 5.0
        }
    );
    let with = |mean: f64, p99: f64| {
        let mut o = obs(mean, 0.1);
        o.latency_quantiles = Some(crate::observe::Quantiles {
            p50: mean,
            p90: mean,
            p95: mean,
            p99,
            p999: p99,
        });
        o
    };
    // A mean of 1 ms with a p99 of 8 ms misses a 5 ms p99: the probe fails.
    let mut st = referenced(&[3.0; REFERENCE_SAMPLES]);
    let v = step(&mut st, lim, &model(), Some(at(56, &[56])), &with(1.0, 8.0));
    assert!(matches!(v, Verdict::ProbeEnded { intervals } if intervals > 0));
    // A mean of 6 ms with a p99 of 4.5 ms meets it.
    let mut st = referenced(&[3.0; REFERENCE_SAMPLES]);
    let v = step(&mut st, lim, &model(), Some(at(56, &[56])), &with(6.0, 4.5));
    assert_eq!(v, Verdict::Proven);
}

#[test]
fn holding_more_than_fair_never_makes_the_reference_stricter() {
    let mut st = GuardState::default();
    let big = [150u64];
    // At 64 + 150 blocks the model predicts far less latency than at fair share: the
    // measurement is carried up to the fair point by the model's ratio.
    judge(&mut st, DEG, held((64, &big), (64, &FAIR)), 1.0, 1.0);
    let r = st.reference_ms.unwrap();
    assert!(r > 1.0, "reference {r} carried to the fair point");
}

#[test]
fn proven_sizes_from_another_fair_share_are_forgotten() {
    let mut st = referenced(&[2.0; REFERENCE_SAMPLES]);
    judge(&mut st, DEG, at(56, &[56]), 2.0, 0.4);
    assert_eq!(st.proven(&fair_sizes()).l1, 56);
    let other = GuardSizes {
        l1: 32,
        l2: vec![32],
    };
    assert_eq!(st.proven(&other), other);
}

proptest::proptest! {
    /// Whatever is measured: the floor never exceeds the fair share, is the fair share
    /// whenever the nodes fall back, and the proven sizes fall only in an interval whose
    /// measurement (held at those sizes) was within the accept bound.
    #[test]
    fn floors_rest_on_measurements(
        runs in proptest::collection::vec((0u8..3, 1.5f64..3.0), 1..60),
    ) {
        let fair = fair_sizes();
        let mut st = referenced(&[2.0; REFERENCE_SAMPLES]);
        let mut verdict = Verdict::Proven;
        for (choice, ms) in runs {
            let f = floor(&st, verdict, &fair);
            proptest::prop_assert!(f.l1 <= fair.l1 && f.l2[0] <= fair.l2[0]);
            if verdict.falls_back() {
                proptest::prop_assert_eq!(&f, &fair);
            }
            // The plan holds the floor, its fair share, or halfway between.
            let l1 = match choice {
                0 => f.l1,
                1 => fair.l1,
                _ => (f.l1 + fair.l1) / 2,
            };
            let l2 = [l1];
            let before = st.proven(&fair);
            verdict = judge(&mut st, DEG, at(l1, &l2), ms, 0.4);
            let after = st.proven(&fair);
            if after.l1 < before.l1 {
                proptest::prop_assert_eq!(after.l1, l1);
                // (The reference's samples are equal, so the harm bound is the accept bound:
                // no interval beyond it can prove a size.)
                proptest::prop_assert!(ms <= 2.0 * 1.05 + 1e-9, "proven at {} after {} ms", l1, ms);
            }
        }
    }
}

#[test]
fn a_workload_that_moved_away_from_its_reference_is_measured_again() {
    let mut st = GuardState::default();
    for _ in 0..REFERENCE_SAMPLES {
        step(&mut st, DEG, &model(), Some(held_with(0.6)), &obs(2.0, 0.6));
    }
    assert_eq!(st.reference_hits, vec![0.6; REFERENCE_SAMPLES]);
    // Probed and proven below fair share.
    let mut p = at(56, &[56]);
    p.fair_hit = Some(0.62);
    assert_eq!(
        step(&mut st, DEG, &model(), Some(p), &obs(2.0, 0.5)),
        Verdict::Proven
    );
    assert_eq!(st.proven(&fair_sizes()).l1, 56);
    // Its curve now says fair share would give 0.8: once is no evidence, twice in a row
    // the workload changed.
    let mut p = at(56, &[56]);
    p.fair_hit = Some(0.8);
    let v = step(&mut st, DEG, &model(), Some(p), &obs(2.0, 0.7));
    assert_ne!(v, Verdict::Unreferenced);
    let mut p = at(56, &[56]);
    p.fair_hit = Some(0.8);
    let v = step(&mut st, DEG, &model(), Some(p), &obs(2.0, 0.7));
    assert_eq!(v, Verdict::Unreferenced);
    assert!(st.reference_ms.is_none() && st.samples.is_empty());
    assert_eq!(st.proven(&fair_sizes()), fair_sizes());
    assert_eq!(floor(&st, v, &fair_sizes()), fair_sizes());
}

fn held_with(fair_hit: f64) -> Held<'static> {
    Held {
        held: (64, &FAIR),
        fair: (64, &FAIR),
        fair_policy: true,
        neighbours_at_fair: true,
        fair_hit: Some(fair_hit),
        seconds: 10.0,
    }
}

#[test]
fn a_curve_as_noisy_as_the_workload_is_no_evidence_of_change() {
    let mut st = referenced(&[2.0; REFERENCE_SAMPLES]);
    st.reference_hits = vec![0.5, 0.7, 0.5, 0.7];
    for _ in 0..4 {
        let mut p = at(64, &[64]);
        p.fair_hit = Some(0.8);
        assert_eq!(
            step(&mut st, DEG, &model(), Some(p), &obs(2.0, 0.6)),
            Verdict::Proven
        );
    }
    assert!(st.reference_ms.is_some());
}

#[test]
fn an_iops_slo_is_judged_as_milliseconds_per_request() {
    let lim = Limit::of(&crate::topology::Slo::Iops(50.0)).unwrap();
    assert_eq!(
        lim,
        Limit::PerUnit {
            ms: 20.0,
            bytes: false
        }
    );
    // 1000 requests in 10 s: 10 ms a request, 100 IOPS. Fair share gave 100 IOPS too.
    let mut st = referenced(&[10.0; REFERENCE_SAMPLES]);
    // A probe that keeps 80 IOPS (12.5 ms a request) still meets the 50-IOPS SLO.
    let mut o = obs(3.0, 0.4);
    o.requests = 800;
    assert_eq!(
        step(&mut st, lim, &model(), Some(at(56, &[56])), &o),
        Verdict::Proven
    );
    // One that falls to 40 IOPS (25 ms) misses it: the probe fails.
    let mut st = referenced(&[10.0; REFERENCE_SAMPLES]);
    o.requests = 400;
    let v = step(&mut st, lim, &model(), Some(at(56, &[56])), &o);
    assert!(
        matches!(v, Verdict::ProbeEnded { intervals } if intervals > 0),
        "{v:?}"
    );
}

#[test]
fn a_reference_too_noisy_to_resolve_the_slo_keeps_its_nodes_at_fair_share() {
    // Samples 1 to 3 ms: a spread of 2 / 2 = 1.0, beyond 0.05 · √16 = 0.2. A mean of 16
    // intervals is still noisy by 0.25: no measurement can show a 5 % harm, so no move is
    // allowed, and the floor is the fair share.
    let mut st = referenced(&[1.0, 2.0, 2.0, 3.0]);
    st.noise = spread(&st.samples);
    assert!((st.noise - 1.0).abs() < 1e-12);
    // (About their trend, 1, 2, 2, 3 scatter by 0.6 / 2 = 0.3: residuals -0.1, 0.3, -0.3,
    // 0.1 from the line 1.1 + 0.6 k.)
    assert!(
        (scatter(&st.samples) - 0.3).abs() < 1e-9,
        "{}",
        scatter(&st.samples)
    );
    let v = judge(&mut st, DEG, held((64, &FAIR), (64, &FAIR)), 2.0, 0.5);
    assert_eq!(v, Verdict::TooNoisy { noise: 1.0 });
    assert!(v.falls_back());
    assert_eq!(floor(&st, v, &fair_sizes()), fair_sizes());
    // Quieter samples later do not make it judgeable: the widest spread seen is the noise.
    for _ in 0..REFERENCE_SAMPLES {
        let v = judge(&mut st, DEG, held((64, &FAIR), (64, &FAIR)), 2.0, 0.5);
        assert_eq!(v, Verdict::TooNoisy { noise: 1.0 });
    }
    assert_eq!(st.samples, vec![2.0; REFERENCE_SAMPLES]);
    // A spread the mean of 16 intervals resolves (0.15 / 2 = 0.075 ≤ 0.2) is judged.
    let mut st = referenced(&[1.925, 2.0, 2.0, 2.075]);
    st.noise = spread(&st.samples);
    let v = judge(&mut st, DEG, held((64, &FAIR), (64, &FAIR)), 2.0, 0.5);
    assert_eq!(v, Verdict::Proven);
    assert!((st.noise - 0.075).abs() < 1e-9, "{}", st.noise);
    // Samples falling as caches warm, in a line: no scatter about the trend, so no noise
    // however far they fall.
    assert!(scatter(&[4.0, 3.0, 2.0, 1.0]).abs() < 1e-12);
    // A 10 % SLO resolves twice the spread: samples spreading 0.3 are judged under it.
    let mut st = referenced(&[1.7, 2.0, 2.0, 2.3]);
    st.noise = spread(&st.samples);
    let v = judge(
        &mut st,
        Limit::Degradation(0.1),
        held((64, &FAIR), (64, &FAIR)),
        2.0,
        0.5,
    );
    assert_eq!(v, Verdict::Proven);
    let v = judge(&mut st, DEG, held((64, &FAIR), (64, &FAIR)), 2.0, 0.5);
    assert!(
        matches!(v, Verdict::TooNoisy { noise } if (noise - 0.3).abs() < 1e-9),
        "{v:?}"
    );
}

fn obs_miss(latency: f64, miss_ms: f64) -> TenantObservation {
    let mut o = obs(latency, 0.5);
    o.service.miss_ms = Some(miss_ms);
    o
}

#[test]
fn disks_that_got_faster_than_at_the_reference_make_it_stale() {
    // Measured at fair share while its misses took 10 ms (a neighbour loading the disk).
    let mut st = GuardState::default();
    for _ in 0..REFERENCE_SAMPLES {
        step(
            &mut st,
            DEG,
            &model(),
            Some(held((64, &FAIR), (64, &FAIR))),
            &obs_miss(18.0, 10.0),
        );
    }
    assert_eq!(st.reference_miss, vec![10.0; REFERENCE_SAMPLES]);
    assert_eq!(st.reference_ms, Some(18.0));
    // Proven below fair share at 18 ms.
    let v = step(
        &mut st,
        DEG,
        &model(),
        Some(at(56, &[56])),
        &obs_miss(18.0, 10.0),
    );
    assert_eq!(v, Verdict::Proven);
    assert_eq!(st.proven(&fair_sizes()).l1, 56);
    // The neighbour finished: misses take 8 ms, 20 % faster, beyond the 5 % tolerance and
    // the (zero) spread of the reference's miss times. Once is no evidence; twice in a row
    // the fair share it was judged against is gone (it would now give less than 18 ms),
    // and it is measured there again.
    let v = step(
        &mut st,
        DEG,
        &model(),
        Some(at(56, &[56])),
        &obs_miss(17.0, 8.0),
    );
    assert_ne!(v, Verdict::Unreferenced);
    let v = step(
        &mut st,
        DEG,
        &model(),
        Some(at(56, &[56])),
        &obs_miss(17.0, 8.0),
    );
    assert_eq!(v, Verdict::Unreferenced);
    assert!(st.reference_ms.is_none() && st.reference_miss.is_empty());
    assert_eq!(st.proven(&fair_sizes()), fair_sizes());
    // Within the tolerance (4 % faster) the reference stands.
    let mut st = GuardState::default();
    for _ in 0..REFERENCE_SAMPLES {
        step(
            &mut st,
            DEG,
            &model(),
            Some(held((64, &FAIR), (64, &FAIR))),
            &obs_miss(18.0, 10.0),
        );
    }
    for _ in 0..3 {
        let v = step(
            &mut st,
            DEG,
            &model(),
            Some(at(64, &[64])),
            &obs_miss(18.0, 9.6),
        );
        assert_eq!(v, Verdict::Proven);
    }
}

proptest::proptest! {
    /// Once its samples at fair share were seen spreading beyond what the mean of
    /// [`MOVED_SAMPLES`] intervals resolves, whatever is measured after: every verdict
    /// sends its nodes back to fair share and its floor is its fair share (until the
    /// reference is forgotten, which here nothing triggers).
    #[test]
    fn a_tenant_too_noisy_to_judge_is_never_moved(
        spread_ms in 0.45f64..3.0,
        runs in proptest::collection::vec((0u8..3, 0.5f64..6.0), 1..40),
    ) {
        let fair = fair_sizes();
        let mut st = referenced(&[2.0 - spread_ms / 2.0, 2.0, 2.0, 2.0 + spread_ms / 2.0]);
        st.noise = spread(&st.samples);
        let mut verdict = judge(&mut st, DEG, held((64, &FAIR), (64, &FAIR)), 2.0, 0.5);
        for (choice, ms) in runs {
            proptest::prop_assert!(verdict.falls_back(), "{:?}", verdict);
            let f = floor(&st, verdict, &fair);
            proptest::prop_assert_eq!(&f, &fair);
            // Whatever the plan did (the floor, fair share with a neighbour moved, or more).
            let h = match choice {
                0 => held((64, &FAIR), (64, &FAIR)),
                1 => at(64, &FAIR),
                _ => at(80, &[80]),
            };
            verdict = judge(&mut st, DEG, h, ms, 0.5);
        }
        proptest::prop_assert!(verdict.falls_back());
        proptest::prop_assert_eq!(st.proven(&fair), fair);
    }
}
