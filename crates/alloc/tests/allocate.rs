//! Crate-level behaviour: the entry point on good and bad input, and the fast method held
//! to the exact DP on random small instances.

use lachesis_alloc::utility::{exact, fast, water_fill, FixUp, UtilityProblem, UtilityTenant};
use lachesis_alloc::{
    allocate, AllocError, AllocInput, Objective, Slo, SloFile, SloKind, TenantInput, TenantSpec,
};
use mrc::HitRatioCurve;
use proptest::prelude::*;

fn curve(p: &[(u64, f64)]) -> HitRatioCurve {
    HitRatioCurve::from_pairs(p.iter().copied()).unwrap()
}

fn spec(name: &str) -> TenantSpec {
    TenantSpec {
        name: name.into(),
        weight: 1.0,
        slo: None,
        min: None,
        max: None,
        priority: None,
    }
}

fn input(tenants: Vec<TenantInput>, capacity: u64, objective: Objective) -> AllocInput {
    AllocInput {
        tenants,
        capacity,
        step: 10,
        objective,
        repair_curves: false,
        mlms: None,
    }
}

fn linear(top: u64, floor: f64) -> HitRatioCurve {
    curve(&[(0, 1.0), (top, floor)])
}

#[test]
fn priority_fair_and_utility() {
    let mut a = spec("a");
    a.priority = Some(100);
    let t = vec![
        TenantInput {
            spec: a,
            curve: linear(1000, 0.0),
        },
        TenantInput {
            spec: spec("b"),
            curve: linear(100, 0.0),
        },
        TenantInput {
            spec: spec("c"),
            curve: linear(1000, 0.5),
        },
    ];
    let fair = allocate(&input(t.clone(), 400, Objective::Fair)).unwrap();
    let sizes: Vec<u64> = fair.tenants.iter().map(|r| r.size).collect();
    // b's curve is flat past 100 blocks: it is capped there and c gets the rest (issue 18:
    // it used to get 150 while c waited).
    assert_eq!(sizes, vec![100, 100, 200]);
    assert_eq!(
        fair.tenants[1].reason.as_deref(),
        Some("fair share capped at the curve's footprint (100 blocks)")
    );
    assert_eq!(fair.tenants[2].reason, None);
    assert_eq!(
        fair.tenants[0].reason.as_deref(),
        Some("dedicated priority partition")
    );
    let util = allocate(&input(t, 400, Objective::Utility)).unwrap();
    let sizes: Vec<u64> = util.tenants.iter().map(|r| r.size).collect();
    // b gains 1 % per block up to 100 blocks, c only 0.05 %: b is filled first.
    assert_eq!(sizes, vec![100, 100, 200]);
    assert_eq!(util.tenants[1].predicted_hit_ratio, 1.0);
    assert!((util.tenants[2].predicted_hit_ratio - 0.1).abs() < 1e-12);
    assert_eq!(util.seconds, None);
}

#[test]
fn fair_never_exceeds_a_footprint_while_another_waits() {
    // a can use 50 blocks, b 2,000, c 120: of 1,000, a gets 50, c 120 and b the rest.
    let t = vec![
        TenantInput {
            spec: spec("a"),
            curve: linear(50, 0.2),
        },
        TenantInput {
            spec: spec("b"),
            curve: linear(2000, 0.0),
        },
        TenantInput {
            spec: spec("c"),
            curve: curve(&[(0, 1.0), (120, 0.3), (500, 0.3)]),
        },
    ];
    let out = allocate(&input(t.clone(), 1000, Objective::Fair)).unwrap();
    let sizes: Vec<u64> = out.tenants.iter().map(|r| r.size).collect();
    assert_eq!(sizes, vec![50, 830, 120]);
    assert_eq!(lachesis_alloc::footprint(&t[2].curve), 120);
    // When everyone is capped, the rest stays unallocated.
    let out = allocate(&input(t[..1].to_vec(), 1000, Objective::Fair)).unwrap();
    assert_eq!(out.tenants[0].size, 50);
}

#[test]
fn slo_objective_reports_every_outcome() {
    let bw = |target| Slo {
        kind: SloKind::Bandwidth,
        target,
        cache: 1000.0,
        storage: 200.0,
    };
    let lat = Slo {
        kind: SloKind::Latency,
        target: 5.5,
        cache: 1.0,
        storage: 10.0,
    }; // hit 0.5
    let mut a = spec("a");
    a.slo = Some(bw(600.0)); // hit 0.5 → 100 blocks on linear(200, 0)
    let mut b = spec("b");
    b.slo = Some(lat); // hit 0.5 → 200 blocks on linear(400, 0)
    let mut c = spec("c");
    c.slo = Some(bw(990.0)); // hit 0.9875: unreachable on linear(100, 0.5)
    let t = vec![
        TenantInput {
            spec: a,
            curve: linear(200, 0.0),
        },
        TenantInput {
            spec: b,
            curve: linear(400, 0.0),
        },
        TenantInput {
            spec: c,
            curve: linear(100, 0.5),
        },
    ];
    let out = allocate(&input(t, 250, Objective::Slo)).unwrap();
    let r = &out.tenants;
    // a (need 100) admitted first; b (need 200) does not fit in the 150 left.
    assert_eq!(r[0].slo_met, Some(true));
    assert!(r[0].size >= 100);
    assert_eq!(r[1].slo_met, Some(false));
    assert!(
        r[1].reason
            .as_deref()
            .unwrap()
            .contains("cannot all be met"),
        "{:?}",
        r[1].reason
    );
    assert!(r[1].predicted_latency.unwrap() > 5.5);
    assert_eq!(r[2].slo_met, Some(false));
    assert!(
        r[2].reason.as_deref().unwrap().contains("unreachable"),
        "{:?}",
        r[2].reason
    );
    assert!(r.iter().map(|x| x.size).sum::<u64>() <= 250);
    // JSON field names are the documented ones.
    let v: serde_json::Value = serde_json::to_value(&out).unwrap();
    let row = v["tenants"][0].as_object().unwrap();
    let mut keys: Vec<&str> = row.keys().map(|k| k.as_str()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "predicted_hit_ratio",
            "predicted_latency",
            "reason",
            "size",
            "slo_met",
            "tenant"
        ]
    );
    assert_eq!(v["objective"], "slo");
}

#[test]
fn bad_input_is_a_clear_error() {
    let bumpy = curve(&[(0, 1.0), (10, 0.4), (20, 0.6), (30, 0.2)]);
    let t = vec![TenantInput {
        spec: spec("bumpy"),
        curve: bumpy,
    }];
    let mut inp = input(t, 100, Objective::Utility);
    assert_eq!(
        allocate(&inp).unwrap_err(),
        AllocError::NonMonotoneCurve {
            tenant: "bumpy".into(),
            size: 20
        }
    );
    inp.repair_curves = true;
    let out = allocate(&inp).unwrap();
    assert_eq!(out.tenants[0].size, 30);
    assert!((out.tenants[0].predicted_hit_ratio - 0.8).abs() < 1e-12);
    inp.capacity = 0;
    assert_eq!(allocate(&inp).unwrap_err(), AllocError::ZeroCapacity);
    inp.capacity = 100;
    inp.step = 0;
    assert_eq!(allocate(&inp).unwrap_err(), AllocError::ZeroStep);
    inp.step = 10;
    inp.tenants.push(inp.tenants[0].clone());
    assert_eq!(
        allocate(&inp).unwrap_err(),
        AllocError::DuplicateTenant("bumpy".into())
    );
    inp.tenants.pop();
    inp.tenants[0].spec.slo = Some(Slo {
        kind: SloKind::Latency,
        target: 1.0,
        cache: 9.0,
        storage: 2.0,
    });
    assert!(matches!(allocate(&inp), Err(AllocError::BadSlo { .. })));
    inp.tenants[0].spec.slo = None;
    inp.tenants[0].spec.min = Some(200);
    assert!(matches!(
        allocate(&inp),
        Err(AllocError::MinimumsExceedCapacity {
            need: 200,
            capacity: 100
        })
    ));
    inp.tenants[0].spec.min = None;
    inp.tenants[0].spec.priority = Some(101);
    assert!(matches!(
        allocate(&inp),
        Err(AllocError::PriorityExceedsCapacity { .. })
    ));
    inp.tenants[0].spec.priority = None;
    inp.step = 101;
    assert_eq!(
        allocate(&inp).unwrap_err(),
        AllocError::StepAboveCapacity {
            step: 101,
            capacity: 100
        }
    );
    inp.step = 10;
    inp.objective = Objective::Mlms;
    assert!(matches!(allocate(&inp), Err(AllocError::BadInput(_))));
}

#[test]
fn slo_file_from_toml_and_mlms_entry() {
    let text = r#"
        capacity = 100
        objective = "mlms"
        [mlms]
        servers = [100, 100]
        grid = 100
        latencies = { lat1 = 0.1, lat2 = 1.0, lat_disk = 10.0 }
        connect = { small = [0] }
        [[tenants]]
        name = "small"
        [[tenants]]
        name = "large"
        weight = 2.0
        slo = { kind = "latency", target = 8.0, cache = 0.1, storage = 10.0 }
    "#;
    let f: SloFile = toml::from_str(text).unwrap();
    assert_eq!(f.tenants[1].slo.as_ref().unwrap().kind, SloKind::Latency);
    let curves = [linear(40, 0.0), linear(400, 0.0)];
    let tenants = f
        .tenants
        .iter()
        .cloned()
        .zip(curves)
        .map(|(spec, curve)| TenantInput { spec, curve })
        .collect();
    let inp = AllocInput {
        tenants,
        capacity: f.capacity.unwrap(),
        step: 1,
        objective: f.objective.unwrap(),
        repair_curves: false,
        mlms: f.mlms,
    };
    let out = allocate(&inp).unwrap();
    assert!(
        out.tenants.iter().all(|r| r.slo_met == Some(true)),
        "{out:?}"
    );
    assert_eq!(
        out.tenants[0].size + out.tenants[0].level2_size.unwrap(),
        40
    );
    assert!(out.tenants[1].predicted_latency.unwrap() <= 8.0);
    // A tenant connected to no server cannot hold level-2 space.
    let mut bad = inp.clone();
    bad.mlms
        .as_mut()
        .unwrap()
        .connect
        .insert("large".into(), vec![]);
    assert_eq!(
        allocate(&bad).unwrap_err(),
        AllocError::NoConnectedServer("large".into())
    );
    // A connection for a tenant that does not exist is a typo, not a no-op.
    let mut bad = inp.clone();
    bad.mlms
        .as_mut()
        .unwrap()
        .connect
        .insert("lagre".into(), vec![1]);
    assert_eq!(
        allocate(&bad).unwrap_err(),
        AllocError::BadInput("mlms.connect names tenant `lagre`, which is not a tenant".into())
    );
}

/// Random monotone curves on sizes 0..=40: concave ones (decreasing gains) or arbitrary.
fn arb_curve(concave: bool) -> impl Strategy<Value = HitRatioCurve> {
    prop::collection::vec(0.0f64..1.0, 2..8).prop_map(move |mut gains| {
        if concave {
            gains.sort_by(|a, b| b.total_cmp(a));
        }
        let total: f64 = gains.iter().sum::<f64>() + 0.5;
        let mut miss = 1.0;
        let step = 40 / gains.len() as u64;
        let mut pts = vec![(0, 1.0)];
        for (i, g) in gains.iter().enumerate() {
            miss -= g / total;
            pts.push(((i as u64 + 1) * step, miss.max(0.0)));
        }
        HitRatioCurve::from_pairs(pts).unwrap()
    })
}

fn problem<'a>(
    curves: &'a [HitRatioCurve],
    weights: &[f64],
    cap: u64,
    step: u64,
) -> UtilityProblem<'a> {
    UtilityProblem {
        tenants: curves
            .iter()
            .zip(weights)
            .map(|(c, &w)| UtilityTenant {
                curve: c,
                weight: w,
                min_steps: 0,
                max_steps: u64::MAX,
            })
            .collect(),
        step,
        capacity_steps: cap,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn fast_is_exact_on_concave_curves(
        curves in prop::collection::vec(arb_curve(true), 1..5),
        w in prop::collection::vec(0.5f64..3.0, 5),
        cap in 0u64..30,
        step in 1u64..4,
    ) {
        let p = problem(&curves, &w, cap, step);
        let best = p.value(&exact(&p).unwrap());
        let f = fast(&p, FixUp::Round).unwrap();
        prop_assert!((f.value - best).abs() < 1e-9, "fast {} exact {}", f.value, best);
        prop_assert!((p.value(&water_fill(&p).unwrap()) - best).abs() < 1e-9);
        prop_assert!(f.steps.iter().sum::<u64>() <= cap);
    }

    #[test]
    fn fast_is_bounded_by_the_hull_on_any_curve(
        curves in prop::collection::vec(arb_curve(false), 1..5),
        w in prop::collection::vec(0.5f64..3.0, 5),
        cap in 0u64..30,
        step in 1u64..4,
    ) {
        let p = problem(&curves, &w, cap, step);
        let best = p.value(&exact(&p).unwrap());
        let f = fast(&p, FixUp::Round).unwrap();
        // fast <= exact <= hull optimum, and fast's value is what its steps earn.
        prop_assert!(f.value <= best + 1e-9);
        prop_assert!(best <= f.hull_value + 1e-9, "exact {} hull {}", best, f.hull_value);
        prop_assert!((p.value(&f.steps) - f.value).abs() < 1e-12);
        prop_assert!(f.steps.iter().sum::<u64>() <= cap);
        // The gap is at most one hull segment of one tenant: the largest single-tenant
        // hull gain over the capacity.
        let seg = p.tenants.iter().map(|t| t.weight * t.curve.hit_ratio((cap * step) as f64)).fold(0.0, f64::max);
        prop_assert!(best - f.value <= seg + 1e-9);
        let t = fast(&p, FixUp::Talus).unwrap();
        prop_assert!((t.value - t.hull_value).abs() < 1e-9);
    }
}
