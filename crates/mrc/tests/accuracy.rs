//! Accuracy of every curve method, against full simulation with the `policy` crate.

use mrc::{build_curve, mean_absolute_error, spread_sizes, Method, MrcError};
use policy::sim::simulate;
use proptest::prelude::*;
use trace::{KeyMode, Request};

fn shared_trace() -> Vec<Request> {
    let path = trace::find_shared_trace(
        "cloudPhysicsIO.oracleGeneral.bin",
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
    )
    .expect("shared/traces not found");
    trace::open(&path, None)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn synthetic(spec: &str) -> Vec<Request> {
    trace::synth::parse(spec).unwrap().iter().collect()
}

fn curve(m: &Method, mode: KeyMode, sizes: &[u64], reqs: &[Request]) -> mrc::HitRatioCurve {
    build_curve(m, mode, sizes, reqs.iter().copied().map(Ok))
        .unwrap()
        .curve()
}

fn sim_miss(spec: &str, size: u64, mode: KeyMode, reqs: &[Request]) -> f64 {
    simulate(
        spec,
        size as usize,
        mode,
        reqs.iter().copied().map(Ok),
        &|_| {},
    )
    .unwrap()
    .miss_ratio()
}

#[test]
fn exact_equals_lru_simulation_on_the_shared_trace() {
    let reqs = shared_trace();
    for mode in [KeyMode::Object, KeyMode::Block { block_size: 4096 }] {
        let sizes = [1, 10, 100, 500, 1000, 2000, 5000, 10000, 20000, 50000];
        let c = curve(&Method::Exact, mode, &sizes, &reqs);
        for s in sizes {
            let want = sim_miss("lru", s, mode, &reqs);
            assert!(
                (c.miss_ratio(s as f64) - want).abs() < 1e-12,
                "{mode:?} at {s}: {} vs {want}",
                c.miss_ratio(s as f64)
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn exact_equals_lru_on_random_traces(keys in prop::collection::vec(0u64..300, 1..3000), size in 1u64..320) {
        let reqs: Vec<Request> = keys.iter().map(|&k| Request::read(k * 512, 512)).collect();
        let c = curve(&Method::Exact, KeyMode::Object, &[size], &reqs);
        let want = sim_miss("lru", size, KeyMode::Object, &reqs);
        prop_assert!((c.miss_ratio(size as f64) - want).abs() < 1e-12);
    }
}

/// MAE of a SHARDS method against the exact curve at 40 sizes up to the footprint.
fn shards_mae(m: &Method, reqs: &[Request]) -> f64 {
    shards_mae_in(m, KeyMode::Object, reqs)
}

/// [`shards_mae`] with keys taken in `mode`.
fn shards_mae_in(m: &Method, mode: KeyMode, reqs: &[Request]) -> f64 {
    let unique = {
        let mut s = std::collections::HashSet::new();
        reqs.iter().for_each(|r| {
            r.for_each_key(mode, |k| {
                s.insert(k);
            })
        });
        s.len() as u64
    };
    let sizes = spread_sizes(40, unique);
    let e = curve(&Method::Exact, mode, &sizes, reqs);
    let a = curve(m, mode, &sizes, reqs);
    mean_absolute_error(&e, &a, &sizes)
}

/// Fixed-rate SHARDS MAEs (sorted) over `n` independent samples (hash salts), with a
/// floor of `min_keys` sampled keys (0: the plain fixed rate).
fn rate_maes_over_salts(reqs: &[Request], rate: f64, min_keys: usize, n: u64) -> Vec<f64> {
    rate_maes_over_salts_in(reqs, KeyMode::Object, rate, min_keys, n)
}

/// [`rate_maes_over_salts`] with keys taken in `mode`.
fn rate_maes_over_salts_in(
    reqs: &[Request],
    mode: KeyMode,
    rate: f64,
    min_keys: usize,
    n: u64,
) -> Vec<f64> {
    let mut keys: Vec<u64> = Vec::new();
    reqs.iter()
        .for_each(|r| r.for_each_key(mode, |k| keys.push(k)));
    let mut e = mrc::exact::ExactStack::new();
    keys.iter().for_each(|&k| {
        e.access(k);
    });
    let sizes = spread_sizes(40, e.unique());
    let ec = e.histogram.curve(&sizes);
    let mut maes: Vec<f64> = (0..n)
        .map(|i| {
            let salt = mrc::shards::SALT ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut s = mrc::shards::ShardsFixedRate::with_options(rate, min_keys, salt);
            keys.iter().for_each(|&k| s.access(k));
            mean_absolute_error(&ec, &s.histogram().curve(&sizes), &sizes)
        })
        .collect();
    maes.sort_by(f64::total_cmp);
    maes
}

#[test]
fn shards_error_on_the_shared_trace() {
    let reqs = shared_trace();
    // 4 KiB-block mode, what `lachesis mrc` does with this trace by default: ~265 k blocks,
    // so a plain 1 % sample holds ~2,650 keys (the default floor holds 16,384).
    let block = KeyMode::Block { block_size: 4096 };
    let block_size = shards_mae_in(&Method::ShardsSize(8192), block, &reqs);
    let block_rate = shards_mae_in(&Method::shards_rate(0.01), block, &reqs);
    println!("shared trace, 4 KiB blocks, MAE: fixed-size 8192 {block_size:.4}, rate 0.01 {block_rate:.4}");
    assert!(block_size <= 0.01, "{block_size}");
    assert!(block_rate <= 0.006, "{block_rate}");
    let maes = rate_maes_over_salts_in(&reqs, block, 0.01, 0, 15);
    println!(
        "shared trace, 4 KiB blocks, plain rate 0.01 over 15 salts: min {:.4} median {:.4} max {:.4}",
        maes[0], maes[7], maes[14]
    );
    assert!(maes[7] <= 0.008, "{maes:?}");
    assert!(maes[14] <= 0.013, "{maes:?}");

    // Object mode (libCacheSim's `--ignore-obj-size`): 49 k objects.
    let fixed_size = shards_mae(&Method::ShardsSize(8192), &reqs);
    let fixed_rate = shards_mae(&Method::shards_rate(0.01), &reqs);
    let rate_tenth = shards_mae(&Method::shards_rate(0.1), &reqs);
    println!("shared trace, objects, MAE: fixed-size 8192 {fixed_size:.4}, rate 0.01 {fixed_rate:.4}, rate 0.1 {rate_tenth:.4}");
    assert!(fixed_size <= 0.01, "{fixed_size}");
    assert!(rate_tenth <= 0.01, "{rate_tenth}");
    assert!(fixed_rate <= 0.005, "{fixed_rate}");
    // Plain rate 0.01 leaves this 113,872-request trace about 1,100 sampled accesses of
    // ~490 keys: where a sampled scan's reuse distance lands (±5 %) and which hot keys
    // fall in are luck. Over 15 independent samples (hash salts) the median was 0.030
    // with no correction, 0.017 with cold misses alone rescaled, 0.013 with the key
    // weighting and 0.009 with the counter stack's distances, the worst 0.022. The floor
    // of 16,384 keys (rate about 1/3 here) takes the worst to about 0.003.
    let plain = rate_maes_over_salts(&reqs, 0.01, 0, 15);
    println!(
        "shared trace, objects, plain rate 0.01 over 15 salts: min {:.4} median {:.4} max {:.4}",
        plain[0], plain[7], plain[14]
    );
    assert!(plain[7] <= 0.012, "{plain:?}");
    let floored = rate_maes_over_salts(&reqs, 0.01, mrc::shards::MIN_SAMPLE, 15);
    println!(
        "shared trace, objects, rate 0.01 with the floor over 15 salts: min {:.4} median {:.4} max {:.4}",
        floored[0], floored[7], floored[14]
    );
    assert!(floored[14] <= 0.006, "{floored:?}");
}

/// Asserts fixed-rate SHARDS at 0.01 (default floor) is within `bound` of the exact curve
/// for 6 salts on the workload `spec`, and returns the sorted MAEs.
fn floored_rate_within(spec: &str, bound: f64) -> Vec<f64> {
    let reqs = synthetic(spec);
    let maes = rate_maes_over_salts(&reqs, 0.01, mrc::shards::MIN_SAMPLE, 6);
    println!(
        "{spec}: rate 0.01 over 6 salts: min {:.4} median {:.4} max {:.4}",
        maes[0], maes[3], maes[5]
    );
    assert!(maes[5] <= bound, "{spec}: {maes:?}");
    maes
}

#[test]
fn shards_rate_meets_the_target_on_100k_object_traces() {
    // Traces of about 100 k distinct objects, none of them tuned for: a plain 1 % sample
    // holds ~1,000 keys, and on the loop mix its error over 10 salts reached 0.014 (median
    // 0.011); with the floor of 16,384 keys every salt stays well inside 0.01.
    floored_rate_within(
        "zipf:alpha=0.7,objects=100000,requests=1000000,seed=21",
        0.008,
    );
    floored_rate_within(
        "mix(zipf:alpha=0.9,objects=70000,requests=950000,seed=22@19;scan:requests=30000,start=1000000@1)",
        0.008,
    );
    floored_rate_within(
        "mix(zipf:alpha=0.8,objects=80000,requests=750000,seed=23@3;loop:objects=20000,start=1000000,requests=250000@1)",
        0.008,
    );
}

#[test]
fn shards_error_on_a_synthetic_trace() {
    // 430 k keys: the floor is below the asked rate's sample (4,300 keys) for most of it.
    let reqs = synthetic("mix(zipf:alpha=0.8,objects=400000,requests=1500000,seed=7@3;loop:objects=30000,requests=500000@1)");
    let fixed_size = shards_mae(&Method::ShardsSize(8192), &reqs);
    let fixed_rate = shards_mae(&Method::shards_rate(0.01), &reqs);
    println!("synthetic MAE: fixed-size 8192 {fixed_size:.4}, rate 0.01 {fixed_rate:.4}");
    assert!(fixed_size <= 0.01, "{fixed_size}");
    // One sample's error is a random variable (its hottest keys fall in or out): the
    // target is met by the typical sample, so assert the median over 15 independent
    // samples (hash salts) and a looser bound on every one.
    let maes = rate_maes_over_salts(&reqs, 0.01, 0, 15);
    println!(
        "synthetic, plain rate 0.01 over 15 salts: min {:.4} median {:.4} max {:.4}",
        maes[0], maes[7], maes[14]
    );
    assert!(maes[7] <= 0.006, "{maes:?}");
    assert!(maes[14] <= 0.011, "{maes:?}");
    assert!(fixed_rate <= 0.008, "{fixed_rate}");
}

#[test]
fn minisim_error_for_arc_and_lirs() {
    let reqs = synthetic(
        "mix(zipf:alpha=0.9,objects=200000,requests=1000000,seed=3@3;scan:requests=300000@1)",
    );
    let sizes = spread_sizes(10, 100_000);
    for policy in ["arc", "lirs", "lru"] {
        let m = Method::MiniSim {
            policy: policy.into(),
            rate: 0.05,
        };
        let c = curve(&m, KeyMode::Object, &sizes, &reqs);
        let mae = sizes
            .iter()
            .map(|&s| (c.miss_ratio(s as f64) - sim_miss(policy, s, KeyMode::Object, &reqs)).abs())
            .sum::<f64>()
            / sizes.len() as f64;
        println!("miniSim {policy} at rate 0.05: MAE {mae:.4}");
        assert!(mae <= 0.02, "{policy}: {mae}");
    }
}

#[test]
fn bad_input_is_an_error_or_a_defined_curve() {
    let empty: Vec<Request> = Vec::new();
    assert!(matches!(
        build_curve(
            &Method::Exact,
            KeyMode::Object,
            &[10],
            empty.into_iter().map(Ok)
        ),
        Err(MrcError::EmptyTrace)
    ));
    for m in [
        Method::shards_rate(0.0),
        Method::shards_rate(-1.0),
        Method::shards_rate(1.5),
        Method::ShardsSize(0),
    ] {
        let r = build_curve(
            &m,
            KeyMode::Object,
            &[10],
            std::iter::once(Ok(Request::read(0, 512))),
        );
        assert!(matches!(r, Err(MrcError::BadParameter(_))), "{m:?}");
    }
    // Sizes past the footprint: flat, finite, no NaN.
    let reqs: Vec<Request> = (0..100u64)
        .map(|i| Request::read((i % 10) * 512, 512))
        .collect();
    for m in [Method::ShardsSize(4), Method::shards_rate(0.5)] {
        let c = curve(&m, KeyMode::Object, &[5, 1_000_000], &reqs);
        for p in c.points() {
            assert!(p.miss_ratio.is_finite() && (0.0..=1.0).contains(&p.miss_ratio));
        }
    }
    let e = curve(&Method::Exact, KeyMode::Object, &[10, 1_000_000], &reqs);
    assert!((e.miss_ratio(1e6) - 0.1).abs() < 1e-12);
}

#[test]
fn byte_weighted_exact_equals_lru_byte_miss_ratio() {
    let reqs = shared_trace();
    let sizes = [100, 1000, 10000];
    let c = mrc::build_curve_weighted(
        &Method::Exact,
        KeyMode::Object,
        mrc::Weighting::Bytes,
        &sizes,
        reqs.iter().copied().map(Ok),
    )
    .unwrap()
    .curve();
    for s in sizes {
        let want = simulate(
            "lru",
            s as usize,
            KeyMode::Object,
            reqs.iter().copied().map(Ok),
            &|_| {},
        )
        .unwrap()
        .byte_miss_ratio();
        assert!(
            (c.miss_ratio(s as f64) - want).abs() < 1e-9,
            "{s}: {} vs {want}",
            c.miss_ratio(s as f64)
        );
        // Requests of different sizes: the byte curve is not the request curve.
        assert!((want - sim_miss("lru", s, KeyMode::Object, &reqs)).abs() > 1e-4);
    }
}
