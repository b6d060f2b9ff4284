//! Seeded synthetic hit-ratio curves: half concave-ish (exponential decay to a floor),
//! half with a cliff (a loop: flat, then a decay). Used by this crate's tests and by the
//! `bench` crate's allocation benchmark, so both work on the same shapes.

use mrc::HitRatioCurve;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A seeded synthetic curve with `points` points: concave-ish or with a cliff.
pub fn synthetic_curve(rng: &mut impl Rng, points: usize, concave: bool) -> HitRatioCurve {
    let top: f64 = rng.gen_range(100.0..2000.0);
    let floor: f64 = rng.gen_range(0.02..0.4);
    let tau = top * rng.gen_range(0.1..0.5);
    let cliff = if concave {
        0.0
    } else {
        top * rng.gen_range(0.1..0.6)
    };
    let pairs = (0..points).map(|j| {
        let s = (j as f64 + 1.0) * top / points as f64;
        let m = if s < cliff {
            0.95
        } else {
            floor + (0.95 - floor) * (-(s - cliff) / tau).exp()
        };
        ((s.round() as u64).max(j as u64 + 1), m)
    });
    let mut last = 0;
    let mut pts = Vec::with_capacity(points);
    for (s, m) in pairs {
        let s = s.max(last + 1);
        last = s;
        pts.push((s, m));
    }
    HitRatioCurve::from_pairs(pts).expect("sizes increase, ratios in [0, 1]")
}

/// `tenants` seeded synthetic curves of `points` points, every other one concave-ish.
pub fn bench_curves(tenants: usize, points: usize, seed: u64) -> Vec<HitRatioCurve> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..tenants)
        .map(|i| synthetic_curve(&mut rng, points, i % 2 == 0))
        .collect()
}
