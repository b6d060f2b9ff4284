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
        .map(|i| crate::synthetic::synthetic_curve(&mut rng, 50, i % 2 == 0))
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
        let hulls = Hulls::new(&p.tenants, step);
        let free = cap - p.tenants.iter().map(|t| t.min_steps).sum::<u64>();
        assert_eq!(
            greedy::heap(&hulls, free),
            greedy::threshold(&hulls, free),
            "cap {cap}"
        );
    }
}

#[test]
fn hull_uses_grid_points_around_off_grid_curve_points() {
    // Cliff at 15 blocks with step 10: on the grid f(1)=0.5*... check the hull vertices.
    let c = curve(&[(0, 1.0), (15, 0.0)]);
    let t = tenant(&c);
    let mut h = Vec::new();
    hull::build(&mut h, &t, 10);
    // Size 10 is no curve point: the hull is stored as pairs.
    assert_eq!(
        h.iter().map(|v| v.2 == u32::MAX).collect::<Vec<_>>(),
        [false, true, true]
    );
    let ks: Vec<u64> = h.iter().map(|v| v.0).collect();
    assert_eq!(ks, vec![0, 1, 2]);
    assert!((h[1].1 - 10.0 / 15.0).abs() < 1e-12);
    assert_eq!(h[2].1, 1.0);
}

/// The Round fix-up as first written: one curve look-up pair per tenant for every gain,
/// the objective by [`UtilityProblem::value`]. The fast method's lazy version must agree.
fn eager_round(p: &UtilityProblem, hull_alloc: &FastAllocation) -> (Vec<u64>, f64) {
    let k = hull_alloc.steps.clone();
    let keep = p.value(&k);
    let Some(split) = &hull_alloc.talus else {
        return (k, keep);
    };
    let s = p.step;
    let mut r = k.clone();
    let mut free = r[split.tenant] - split.low;
    r[split.tenant] = split.low;
    let next = |i: usize, k: u64| -> Option<(Gain, Reverse<usize>)> {
        let t = &p.tenants[i];
        (k < t.top(s)).then(|| (Gain(t.f(k + 1, s) - t.f(k, s)), Reverse(i)))
    };
    let mut heap: BinaryHeap<_> = (0..r.len())
        .filter(|&i| i != split.tenant)
        .filter_map(|i| next(i, r[i]))
        .collect();
    while free > 0 {
        let Some((Gain(g), Reverse(i))) = heap.pop() else {
            break;
        };
        if g <= 0.0 {
            break;
        }
        r[i] += 1;
        free -= 1;
        heap.extend(next(i, r[i]));
    }
    let rounded = p.value(&r);
    if rounded > keep {
        (r, rounded)
    } else {
        (k, keep)
    }
}

/// A seeded instance of `n` synthetic tenants with mixed weights, minimums and maximums.
fn mixed_instance(curves: &[HitRatioCurve], seed: u64, step: u64) -> UtilityProblem<'_> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let tenants: Vec<UtilityTenant> = curves
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut t = tenant(c);
            if seed % 2 == 1 {
                t.weight = [0.0, 0.5, 1.0, 2.5, 1e-6][rng.gen_range(0..5)];
                if rng.gen_bool(0.3) {
                    t.min_steps = rng.gen_range(0..20);
                }
                if rng.gen_bool(0.3) {
                    t.max_steps = t.min_steps + rng.gen_range(0..300);
                }
            }
            // Some tenants share a curve: equal slopes across tenants.
            if seed.is_multiple_of(3) && i % 4 == 1 {
                t.curve = &curves[i - 1];
            }
            t
        })
        .collect();
    let mins: u64 = tenants.iter().map(|t| t.min_steps).sum();
    let tops: u64 = tenants.iter().map(|t| t.top(step)).sum();
    let capacity_steps = mins + rng.gen_range(0..=tops.saturating_sub(mins) + 10);
    UtilityProblem {
        tenants,
        step,
        capacity_steps,
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// Threshold search and heap agree, including instances big enough for several
    /// sampling rounds; the lazy Round fix-up and the bookkept objective agree with the
    /// eager fix-up and `value` to the bit.
    #[test]
    fn threshold_heap_and_fix_up_agree_with_the_references(
        seed in 0u64..1_000_000,
        n in 1usize..60,
        points in 2usize..200,
        step in proptest::sample::select(vec![1u64, 1, 2, 3, 7]),
    ) {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let curves: Vec<HitRatioCurve> = (0..n)
            .map(|i| crate::synthetic::synthetic_curve(&mut rng, points, !(i as u64 + seed).is_multiple_of(3)))
            .collect();
        let p = mixed_instance(&curves, seed, step);
        let hulls = Hulls::new(&p.tenants, step);
        let free = p.capacity_steps - p.tenants.iter().map(|t| t.min_steps).sum::<u64>();
        let th = greedy::threshold(&hulls, free);
        proptest::prop_assert_eq!(&greedy::heap(&hulls, free), &th);
        let talus = fast(&p, FixUp::Talus).unwrap();
        proptest::prop_assert_eq!(&talus.steps, &th.0);
        let round = fast(&p, FixUp::Round).unwrap();
        let (steps, value) = eager_round(&p, &talus);
        proptest::prop_assert_eq!(&round.steps, &steps);
        proptest::prop_assert_eq!(round.value.to_bits(), value.to_bits());
        proptest::prop_assert_eq!(round.value.to_bits(), p.value(&round.steps).to_bits());
    }
}

#[test]
fn fix_up_agrees_with_the_reference_on_the_bench_instance() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let curves: Vec<HitRatioCurve> = (0..400)
        .map(|i| crate::synthetic::synthetic_curve(&mut rng, 1000, i % 2 == 0))
        .collect();
    for cap in [20_000, 80_000, 150_000] {
        let p = UtilityProblem {
            tenants: curves.iter().map(tenant).collect(),
            step: 1,
            capacity_steps: cap,
        };
        let talus = fast(&p, FixUp::Talus).unwrap();
        let round = fast(&p, FixUp::Round).unwrap();
        let (steps, value) = eager_round(&p, &talus);
        assert_eq!(round.steps, steps, "cap {cap}");
        assert_eq!(round.value.to_bits(), value.to_bits(), "cap {cap}");
        let heap = fast_with(&p, FixUp::Round, Greedy::Heap).unwrap();
        assert_eq!(heap, round, "cap {cap}");
    }
}
