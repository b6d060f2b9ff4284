//! Quick throughput probe: `cargo run --release -p policy --example sim_speed -- lru,arc`.
//! Replays 10 M Zipf(0.9) keys over 1 M objects through a 100,000-object cache.
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::time::Instant;
use trace::{KeyMode, Request};

fn main() {
    let specs = std::env::args().nth(1).unwrap_or_else(|| "lru".into());
    let n: u64 = 1_000_000;
    // Inverse-CDF Zipf sampler over a precomputed table (probe only).
    let alpha = 0.9;
    let mut cdf = Vec::with_capacity(n as usize);
    let mut acc = 0.0;
    for i in 1..=n {
        acc += 1.0 / (i as f64).powf(alpha);
        cdf.push(acc);
    }
    let mut rng = StdRng::seed_from_u64(7);
    let keys: Vec<u64> = (0..10_000_000)
        .map(|_| {
            let u = rng.gen::<f64>() * acc;
            let r = cdf.partition_point(|&c| c < u) as u64;
            r.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20
        })
        .collect();
    for spec in specs.split(',') {
        let t = Instant::now();
        let reqs = keys.iter().map(|&k| Ok(Request::read(k * 512, 512)));
        let s = policy::sim::simulate(spec, 100_000, KeyMode::Object, reqs, &|_| {}).unwrap();
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{spec}: miss {:.4}  {:.2} M req/s",
            s.miss_ratio(),
            s.requests as f64 / secs / 1e6
        );
    }
}
