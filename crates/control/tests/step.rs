//! The enforcement step as the simulator and the live controller use it: plans within
//! every node's capacity for every scheme, state that persists and resumes exactly, idle
//! tenants reclaimed and returned, hysteresis, and bad input named.

mod common;

use common::{curve, interval, node, observed, topology};
use control::*;
use mrc::HitRatioCurve;
use proptest::prelude::*;

fn topo(tenants: Vec<Tenant>) -> Topology {
    topology(
        vec![node("h1", 1000), node("h2", 600)],
        vec![node("s1", 2000), node("s2", 1500)],
        tenants,
    )
}

fn tenant(name: &str, host: usize, servers: Vec<usize>, slo: Option<Slo>) -> Tenant {
    Tenant {
        slo,
        ..common::tenant(name, host, servers)
    }
}

fn obs_of(requests: &[u64], footprints: &[u64]) -> Observations {
    interval(
        requests
            .iter()
            .zip(footprints)
            .map(|(&r, &f)| {
                let curves = ["lru", "arc"]
                    .iter()
                    .map(|p| PolicyCurve {
                        policy: p.to_string(),
                        curve: curve(f),
                    })
                    .collect();
                observed(r, curves)
            })
            .collect(),
    )
}

fn within_capacity(t: &Topology, p: &Plan) -> Result<(), TestCaseError> {
    prop_assert_eq!(p.tenants.len(), t.tenants.len());
    if p.layout != Layout::Partitioned {
        return Ok(());
    }
    for h in 0..t.hosts.len() {
        prop_assert!(
            p.host_used(h) <= t.hosts[h].capacity,
            "host {} holds {} > {}",
            h,
            p.host_used(h),
            t.hosts[h].capacity
        );
    }
    for s in 0..t.servers.len() {
        prop_assert!(
            p.server_used(s) <= t.servers[s].capacity,
            "server {} holds {}",
            s,
            p.server_used(s)
        );
    }
    Ok(())
}

type Spec = (usize, usize, u64, u64, u8);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn every_scheme_plans_within_every_node(
        specs in proptest::collection::vec((0usize..2, 0usize..3, 50u64..5000, 0u64..5000, 0u8..4), 1..6),
    ) {
        plans_within_every_node(&specs)?;
    }
}

/// Found by the property test: the hull optimiser's threshold search once counted a
/// segment past the capacity (slopes equal to within rounding).
#[test]
fn the_case_that_overflowed_the_threshold_search() {
    plans_within_every_node(&[(1, 1, 1476, 948, 1), (1, 2, 3045, 0, 0), (1, 0, 3868, 0, 3)])
        .unwrap();
}

fn plans_within_every_node(specs: &[Spec]) -> Result<(), TestCaseError> {
    {
        let tenants: Vec<Tenant> = specs
            .iter()
            .enumerate()
            .map(|(i, &(h, s, _, _, slo))| {
                let servers = match s {
                    0 => vec![0],
                    1 => vec![1],
                    _ => vec![0, 1],
                };
                let slo = match slo {
                    0 => None,
                    1 => Some(Slo::Degradation(0.05)),
                    2 => Some(Slo::LatencyMs(1.0 + i as f64)),
                    _ => Some(Slo::Iops(500.0)),
                };
                tenant(&format!("t{i}"), h, servers, slo)
            })
            .collect();
        let t = topo(tenants);
        let footprints: Vec<u64> = specs.iter().map(|s| s.2).collect();
        for name in SCHEME_NAMES {
            let mut c = Controller::new(t.clone(), Scheme::named(name).unwrap()).unwrap();
            within_capacity(&t, &c.initial_plan())?;
            for round in 0..3u64 {
                let requests: Vec<u64> = specs.iter().map(|s| (s.3 + round * 7) % 5000).collect();
                let plan = c
                    .step(10.0 * (round + 1) as f64, &obs_of(&requests, &footprints))
                    .unwrap();
                within_capacity(&t, &plan)?;
            }
        }
    }
    Ok(())
}

#[test]
fn state_persists_and_resumes_to_the_same_plan() {
    let t = topo(vec![
        tenant("a", 0, vec![0, 1], Some(Slo::LatencyMs(1.0))),
        tenant("b", 0, vec![0], Some(Slo::Degradation(0.1))),
        tenant("c", 1, vec![1], None),
    ]);
    let fp = [800, 3000, 400];
    let mut c = Controller::new(t.clone(), Scheme::named("lachesis").unwrap()).unwrap();
    for k in 0..3 {
        c.step(10.0 * (k + 1) as f64, &obs_of(&[1000, 2000, 500], &fp))
            .unwrap();
    }
    let saved = serde_json::to_string(c.state()).unwrap();
    let state: ControlState = serde_json::from_str(&saved).unwrap();
    let mut resumed = Controller::resume(t, Scheme::named("lachesis").unwrap(), state).unwrap();
    let next = obs_of(&[1200, 1800, 0], &fp);
    assert_eq!(
        c.step(40.0, &next).unwrap(),
        resumed.step(40.0, &next).unwrap()
    );
}

#[test]
fn idle_tenants_shrink_to_the_floor_and_come_back() {
    let t = topo(vec![
        tenant("busy", 0, vec![0], None),
        tenant("sleepy", 0, vec![0], None),
    ]);
    let fp = [5000, 5000];
    let mut c = Controller::new(t, Scheme::named("moirai-utility").unwrap()).unwrap();
    let p = c.step(10.0, &obs_of(&[1000, 1000], &fp)).unwrap();
    assert!(p.tenants[1].l1.size > 300, "{:?}", p.tenants[1].l1);
    c.step(20.0, &obs_of(&[1000, 0], &fp)).unwrap();
    let p = c.step(30.0, &obs_of(&[1000, 0], &fp)).unwrap();
    // Idle for two intervals: the floor (0), and its space goes to the busy tenant.
    assert_eq!(p.tenants[1].l1.size, 0);
    assert!(matches!(
        p.tenants[1].l1.reason,
        Reason::Idle { intervals: 2 }
    ));
    assert_eq!(p.tenants[0].l1.size, 1000);
    assert_eq!(p.tenants[0].l2[0].size, 2000);
    let p = c.step(40.0, &obs_of(&[1000, 1000], &fp)).unwrap();
    assert!(p.tenants[1].l1.size > 300, "back: {:?}", p.tenants[1].l1);
}

#[test]
fn hysteresis_holds_a_plan_that_would_gain_little_and_limits_big_moves() {
    let t = topo(vec![
        tenant("x", 0, vec![0], None),
        tenant("y", 0, vec![0], None),
    ]);
    let mut c = Controller::new(t, Scheme::named("lachesis").unwrap()).unwrap();
    let first = c.step(10.0, &obs_of(&[1000, 1000], &[2000, 2000])).unwrap();
    // A one-percent change in one curve: not worth moving for.
    let second = c.step(20.0, &obs_of(&[1000, 1000], &[2020, 2000])).unwrap();
    assert_eq!(first.tenants[0].l1.size, second.tenants[0].l1.size);
    assert_eq!(first.tenants[1].l1.size, second.tenants[1].l1.size);
    // A big change moves at most a quarter of the host (250 blocks) in one interval.
    let third = c.step(30.0, &obs_of(&[1000, 1000], &[100, 20000])).unwrap();
    let moved = first.tenants[0].l1.size.abs_diff(third.tenants[0].l1.size);
    assert!(moved > 0 && moved <= 250, "moved {moved}");
    assert!(
        matches!(third.tenants[0].l1.reason, Reason::MoveLimited { .. }),
        "{:?}",
        third.tenants[0].l1.reason
    );
}

#[test]
fn an_slo_no_allocation_can_meet_is_reported_with_its_shortfall() {
    let t = topo(vec![
        tenant("greedy", 0, vec![0], Some(Slo::LatencyMs(0.01))),
        tenant("other", 0, vec![0], None),
    ]);
    let mut c = Controller::new(t, Scheme::named("lachesis").unwrap()).unwrap();
    let p = c.step(10.0, &obs_of(&[1000, 1000], &[500, 500])).unwrap();
    let s = p
        .infeasible
        .iter()
        .find(|s| s.tenant == "greedy")
        .expect("reported");
    assert_eq!(s.target_ms, 0.01);
    assert!(s.predicted_ms > 0.01);
    assert_eq!(p.tenants[0].slo_met, Some(false));
}

#[test]
fn bad_input_is_named() {
    let t = topo(vec![tenant("a", 0, vec![0], None)]);
    let mut c = Controller::new(t.clone(), Scheme::named("fair").unwrap()).unwrap();
    let e = c
        .step(1.0, &obs_of(&[1, 2], &[10, 10]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 tenants observed") && e.contains("1"), "{e}");
    let e = Scheme::named("fastest").unwrap_err().to_string();
    assert!(e.contains("fastest") && e.contains("lachesis"), "{e}");
    let mut bad = t.clone();
    bad.tenants[0].servers = vec![];
    assert!(Controller::new(bad, Scheme::named("fair").unwrap())
        .unwrap_err()
        .to_string()
        .contains("tenant `a`"));
    let mut bad = t;
    bad.tenants[0].host = 7;
    assert!(Controller::new(bad, Scheme::named("fair").unwrap())
        .unwrap_err()
        .to_string()
        .contains("host index 7"));
}

#[test]
fn a_warming_tenant_keeps_its_space_until_its_footprint_stops_growing() {
    // Two tenants on host h1 (1,000 blocks) and server s1 (2,000): `young`'s curve has
    // seen 100, then 120, 140 blocks reused (a cold cache filling), far below the 1,500
    // it holds at fair share; `big`'s curve covers 20,000.
    let t = topo(vec![
        tenant("young", 0, vec![0], None),
        tenant("big", 0, vec![0], None),
    ]);
    let step = |c: &mut Controller, k: u64, young: u64| {
        c.step(10.0 * k as f64, &obs_of(&[1000, 1000], &[young, 20_000]))
            .unwrap()
    };
    // Started from fair share, as the simulator starts its caches.
    let from_fair = |scheme: Scheme| {
        let fresh = Controller::new(t.clone(), scheme.clone()).unwrap();
        let mut state = fresh.state().clone();
        state.previous = Some(fresh.initial_plan());
        Controller::resume(t.clone(), scheme, state).unwrap()
    };
    let mut c = from_fair(Scheme::named("lachesis").unwrap());
    for (k, f) in [100, 120, 140].into_iter().enumerate() {
        let p = step(&mut c, k as u64 + 1, f);
        assert_eq!(
            p.tenants[0].l1.size, 500,
            "interval {k}: {:?}",
            p.tenants[0].l1
        );
        assert_eq!(p.tenants[0].l2[0].size, 1000);
        assert_eq!(
            p.tenants[0].l1.reason,
            Reason::Warming { footprint: f },
            "interval {k}"
        );
    }
    // Its footprint stands still: two more intervals it is held, the third it is priced
    // on its curve and gives space to `big`, a quarter of the host at most per interval.
    for k in 4..=5 {
        let p = step(&mut c, k, 140);
        assert_eq!(p.tenants[0].l1.size, 500, "interval {k}");
    }
    let p = step(&mut c, 6, 140);
    assert_eq!(p.tenants[0].l1.size, 250, "{:?}", p.tenants[0].l1);
    assert_eq!(p.tenants[1].l1.size, 750);
    assert!(p.tenants[0].l2[0].size < 1000);

    // Without the hold, the first interval already takes its space.
    let mut scheme = Scheme::named("lachesis").unwrap();
    scheme.hysteresis.as_mut().unwrap().hold_floors = false;
    let mut c = from_fair(scheme);
    let p = step(&mut c, 1, 100);
    assert_eq!(p.tenants[0].l1.size, 250, "{:?}", p.tenants[0].l1);
}

#[test]
fn a_footprint_is_where_the_curve_stops_falling() {
    assert_eq!(footprint(&curve(300)), 300);
    let scan = HitRatioCurve::from_pairs([(0, 1.0), (100, 1.0), (200, 1.0)]).unwrap();
    assert_eq!(footprint(&scan), 0);
    let tail = HitRatioCurve::from_pairs([(0, 1.0), (100, 0.5), (200, 0.3), (300, 0.298)]).unwrap();
    assert_eq!(footprint(&tail), 200);
}
