//! The do-no-harm guard through the whole step: a tenant with a degradation or latency
//! SLO is never planned below its proven sizes less one probe step at either level
//! (its fair share while unreferenced), and runs the fair scheme's policy while its nodes
//! fall back, whatever the observations say; a probe measured to miss is reverted at once;
//! and once referenced, the scheme still moves space.

mod common;

use common::{curve, interval, node, observed, topology};
use control::guard::{GuardSizes, REFERENCE_SAMPLES};
use control::*;
use proptest::prelude::*;

fn topo(tenants: Vec<Tenant>) -> Topology {
    topology(
        vec![node("h1", 1000), node("h2", 600)],
        vec![node("s1", 2000), node("s2", 1500)],
        tenants,
    )
}

/// One tenant's interval: `requests`, a mean latency of `ms`, `hit` of its lookups hits at
/// either level, and the LRU and ARC curves of `footprint` blocks.
fn seen(requests: u64, ms: f64, hit: f64, footprint: u64) -> TenantObservation {
    let curves = ["lru", "arc"]
        .iter()
        .map(|p| PolicyCurve {
            policy: p.to_string(),
            curve: curve(footprint),
        })
        .collect();
    let mut o = observed(requests, curves);
    o.mean_latency_ms = ms;
    o.l1.hits = (requests as f64 * hit / 2.0) as u64;
    o.l2.lookups = requests - o.l1.hits;
    o.l2.hits = (requests as f64 * hit) as u64 - o.l1.hits;
    o
}

/// The fair scheme's sizes: level 1, and level 2 per server, per tenant.
fn fair_sizes(t: &Topology) -> Vec<(u64, Vec<u64>)> {
    let fair = Controller::new(t.clone(), Scheme::named("fair").unwrap()).unwrap();
    fair.initial_plan()
        .tenants
        .iter()
        .map(|tp| (tp.l1.size, tp.l2.iter().map(|p| p.size).collect()))
        .collect()
}

/// The least sizes the guard allows tenant `i` after this step, whatever its verdict: its
/// proven sizes (from its state after the step) less one probe step of its fair share.
fn least(c: &Controller, i: usize, fair: &(u64, Vec<u64>)) -> (u64, Vec<u64>) {
    let g = &c.state().tenants[i].guard;
    let f = GuardSizes {
        l1: fair.0,
        l2: fair.1.clone(),
    };
    let p = g.proven(&f);
    let step = if g.step > 0.0 {
        g.step
    } else {
        control::guard::FIRST_STEP
    };
    let down = |p: u64, f: u64| p.saturating_sub((step * f as f64).ceil() as u64);
    (
        down(p.l1, f.l1),
        p.l2.iter().zip(&f.l2).map(|(&p, &f)| down(p, f)).collect(),
    )
}

/// Whether tenant `i`'s nodes certainly fall back this step (unreferenced or penalised).
fn falls_back(c: &Controller, i: usize) -> bool {
    let g = &c.state().tenants[i].guard;
    g.penalty > 0 || g.samples.len() < REFERENCE_SAMPLES
}

type Spec = (usize, usize, u64, u8);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn a_guarded_tenant_is_never_planned_below_its_floor_and_runs_fairs_policy_while_held(
        specs in proptest::collection::vec((0usize..2, 0usize..3, 50u64..5000, 0u8..3), 1..6),
        rounds in proptest::collection::vec(
            proptest::collection::vec((0.1f64..50.0, 0.0f64..1.0), 6), 1..10),
    ) {
        let tenants: Vec<Tenant> = specs
            .iter()
            .enumerate()
            .map(|(i, &(h, s, _, slo)): (usize, &Spec)| Tenant {
                slo: match slo {
                    0 => None,
                    1 => Some(Slo::Degradation(0.05)),
                    _ => Some(Slo::LatencyMs(2.0)),
                },
                ..common::tenant(
                    &format!("t{i}"),
                    h,
                    match s {
                        0 => vec![0],
                        1 => vec![1],
                        _ => vec![0, 1],
                    },
                )
            })
            .collect();
        let t = topo(tenants);
        let fair = fair_sizes(&t);
        let mut c = Controller::new(t.clone(), Scheme::named("lachesis").unwrap()).unwrap();
        let mut was: Vec<(u64, Vec<u64>)> = fair.clone();
        for (k, round) in rounds.iter().enumerate() {
            let obs = interval(
                specs
                    .iter()
                    .zip(round)
                    .map(|(s, &(ms, hit))| seen(1000, ms, hit, s.2))
                    .collect(),
            );
            let plan = c.step(10.0 * (k + 1) as f64, &obs).unwrap();
            for (i, tp) in plan.tenants.iter().enumerate() {
                if t.tenants[i].slo.is_none() {
                    continue;
                }
                // Never below its floor, or the smaller of that and what it held (it grows
                // back as its neighbours' space drains); at fair share while it falls back.
                let (l1, l2) = &was[i];
                let (g1, g2) = if falls_back(&c, i) {
                    fair[i].clone()
                } else {
                    least(&c, i, &fair[i])
                };
                let floor1 = g1.min(*l1);
                prop_assert!(tp.l1.size >= floor1, "{} l1 {} < {}", tp.tenant, tp.l1.size, floor1);
                for ((p, &f), &h) in tp.l2.iter().zip(&g2).zip(l2) {
                    prop_assert!(p.size >= f.min(h), "{} l2 {} < {}", tp.tenant, p.size, f.min(h));
                }
                if falls_back(&c, i) {
                    prop_assert_eq!(&tp.eviction, "lru");
                }
            }
            was = plan
                .tenants
                .iter()
                .map(|tp| (tp.l1.size, tp.l2.iter().map(|p| p.size).collect()))
                .collect();
        }
    }
}

/// Two tenants on one host and server, both with degradation SLOs and steady latency:
/// once their references are measured, the scheme moves space to the one that gains, one
/// probe step at a time; when the one that gave it up then runs ten times slower, the
/// next plan heads back to its proven (fair) share and it probes no more for a while.
#[test]
fn proven_tenants_move_and_a_measured_harm_reverts_them_at_once() {
    let t = topo(vec![
        Tenant {
            slo: Some(Slo::Degradation(0.05)),
            ..common::tenant("small", 0, vec![0])
        },
        Tenant {
            slo: Some(Slo::Degradation(0.05)),
            ..common::tenant("big", 0, vec![0])
        },
    ]);
    let fair = fair_sizes(&t);
    let mut c = Controller::new(t, Scheme::named("lachesis").unwrap()).unwrap();
    // `small` reuses 200 blocks, `big` 20,000: its curve predicts its hit ratio at the
    // 500 + 1000 blocks of its fair share; `small` hits everything.
    let big_hit = 1.0 - (1.0 - (1500.0f64 / 20000.0).sqrt());
    let steady = |small_ms: f64| {
        interval(vec![
            seen(1000, small_ms, 1.0, 200),
            seen(1000, 5.0, big_hit, 20000),
        ])
    };
    let mut moved = None;
    for k in 0..12 {
        let plan = c.step(10.0 * (k + 1) as f64, &steady(0.1)).unwrap();
        if plan.tenants[0].l1.size < fair[0].0 || plan.tenants[0].l2[0].size < fair[0].1[0] {
            moved = Some((k, plan));
            break;
        }
    }
    let (k, plan) = moved.expect("space moves once both tenants are referenced");
    assert!(
        k + 1 >= REFERENCE_SAMPLES,
        "not before the reference: step {k}"
    );
    assert!(plan.tenants[1].l1.size + plan.tenants[1].l2[0].size > fair[1].0 + fair[1].1[0]);
    // `small`, shrunk, now measures ten times its reference: it heads back to its fair
    // share at once (as far as the move limit allows), and stays there for the penalty.
    let before = (plan.tenants[0].l1.size, plan.tenants[0].l2[0].size);
    let back = c.step(1000.0, &steady(1.0)).unwrap();
    let now = (back.tenants[0].l1.size, back.tenants[0].l2[0].size);
    assert!(now.0 + now.1 > before.0 + before.1, "{before:?} -> {now:?}");
    assert!(now.0 <= fair[0].0 && now.1 <= fair[0].1[0]);
    assert!(c.state().tenants[0].guard.probe_penalty > 0);
    // Within the penalty it is back at its fair share (its proven size).
    let mut at_fair = false;
    for k in 0..3 {
        let p = c.step(1010.0 + 10.0 * k as f64, &steady(0.1)).unwrap();
        at_fair |= (p.tenants[0].l1.size, p.tenants[0].l2[0].size) == (fair[0].0, fair[0].1[0]);
    }
    assert!(at_fair, "back at fair share within the penalty");
}
