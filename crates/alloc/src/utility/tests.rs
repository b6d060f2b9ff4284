//! Tests of the utility allocators: the fast method against the exact DP and brute force,
//! hulls, fix-ups and water-filling.

use super::*;

fn curve(p: &[(u64, f64)]) -> HitRatioCurve {
    HitRatioCurve::from_pairs(p.iter().copied()).unwrap()
}
fn tenant(c: &HitRatioCurve) -> UtilityTenant<'_> {
    UtilityTenant {
        curve: c,
        weight: 1.0,
        min_steps: 0,
        max_steps: u64::MAX,
    }
}

#[test]
fn plain_stalls_on_a_plateau_fast_and_exact_cross_it() {
    // Tenant 0: a loop of 10 blocks — nothing until all 10 fit, then everything.
    let cliff = curve(&[(0, 1.0), (9, 1.0), (10, 0.0)]);
    // Tenant 1: steady small gains.
    let slope = curve(&[(0, 1.0), (20, 0.8)]);
    let p = UtilityProblem {
        tenants: vec![tenant(&cliff), tenant(&slope)],
        step: 1,
        capacity_steps: 12,
    };
    let plain = water_fill(&p).unwrap();
    assert_eq!(plain, vec![0, 12]);
    assert!((p.value(&plain) - 0.12).abs() < 1e-12);
    let ex = exact(&p).unwrap();
    assert_eq!(ex, vec![10, 2]);
    let f = fast(&p, FixUp::Round).unwrap();
    assert_eq!(f.steps, vec![10, 2]);
    assert!((f.value - 1.02).abs() < 1e-12);
    assert!((f.hull_value - 1.02).abs() < 1e-12);
}

#[test]
fn talus_split_for_the_tenant_inside_a_segment() {
    let cliff = curve(&[(0, 1.0), (9, 1.0), (10, 0.0)]);
    let p = UtilityProblem {
        tenants: vec![tenant(&cliff)],
        step: 1,
        capacity_steps: 4,
    };
    let f = fast(&p, FixUp::Talus).unwrap();
    assert_eq!(f.steps, vec![4]);
    let t = f.talus.unwrap();
    assert_eq!((t.tenant, t.size, t.low, t.high), (0, 4, 0, 10));
    assert!((t.rho - 0.6).abs() < 1e-12);
    assert!((f.value - 0.4).abs() < 1e-12);
    // Rounding instead: nothing better than keeping 4 steps (worth 0).
    let r = fast(&p, FixUp::Round).unwrap();
    assert_eq!(r.steps, vec![4]);
    assert_eq!(r.value, 0.0);
    assert!((r.hull_value - 0.4).abs() < 1e-12);
}

#[test]
fn minimums_maximums_weights_and_steps() {
    let a = curve(&[(0, 1.0), (100, 0.0)]);
    let b = curve(&[(0, 1.0), (100, 0.5)]);
    let mut ta = tenant(&a);
    ta.max_steps = 3; // 30 blocks at most
    let mut tb = tenant(&b);
    tb.min_steps = 2;
    tb.weight = 4.0; // 4 * 0.005 per block beats 0.01 per block
    let p = UtilityProblem {
        tenants: vec![ta, tb],
        step: 10,
        capacity_steps: 8,
    };
    for k in [
        water_fill(&p).unwrap(),
        exact(&p).unwrap(),
        fast(&p, FixUp::Round).unwrap().steps,
    ] {
        assert_eq!(k, vec![0, 8]);
    }
    let mut tb2 = tenant(&b);
    tb2.max_steps = 6;
    let p2 = UtilityProblem {
        tenants: vec![tenant(&a), tb2],
        step: 10,
        capacity_steps: 8,
    };
    assert_eq!(fast(&p2, FixUp::Round).unwrap().steps, vec![8, 0]);
    let too_much = UtilityProblem {
        tenants: vec![UtilityTenant {
            min_steps: 9,
            ..tenant(&a)
        }],
        step: 10,
        capacity_steps: 8,
    };
    assert!(matches!(
        fast(&too_much, FixUp::Round),
        Err(AllocError::MinimumsExceedCapacity {
            need: 90,
            capacity: 80
        })
    ));
}

#[test]
fn threshold_search_equals_the_heap() {
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(3);
    let curves: Vec<HitRatioCurve> = (0..60)
        .map(|i| crate::bench::synthetic_curve(&mut rng, 50, i % 2 == 0))
        .collect();
    for (cap, step) in [
        (0, 1),
        (1, 1),
        (500, 1),
        (5_000, 3),
        (20_000, 2),
        (200_000, 1),
    ] {
        let mut p = UtilityProblem {
            tenants: curves.iter().map(tenant).collect(),
            step,
            capacity_steps: cap,
        };
        p.tenants[0].min_steps = 1.min(cap);
        p.tenants[1].max_steps = 7;
        // Equal slopes across tenants: two copies of one curve.
        p.tenants[3].curve = p.tenants[2].curve;
        let hulls: Vec<Hull> = p.tenants.iter().map(|t| hull(t, step)).collect();
        let free = cap - p.tenants.iter().map(|t| t.min_steps).sum::<u64>();
        assert_eq!(
            greedy_heap(&hulls, free),
            greedy_threshold(&hulls, free),
            "cap {cap}"
        );
    }
}

#[test]
fn hull_uses_grid_points_around_off_grid_curve_points() {
    // Cliff at 15 blocks with step 10: on the grid f(1)=0.5*... check the hull vertices.
    let c = curve(&[(0, 1.0), (15, 0.0)]);
    let t = tenant(&c);
    let h = hull(&t, 10);
    let ks: Vec<u64> = h.iter().map(|v| v.0).collect();
    assert_eq!(ks, vec![0, 1, 2]);
    assert!((h[1].1 - 10.0 / 15.0).abs() < 1e-12);
    assert_eq!(h[2].1, 1.0);
}
