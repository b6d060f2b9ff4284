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
            if std::env::var("DENSE").is_ok() {
                (r * 0x9E37_79B9_7F4A_7C15 % n) % n
            } else {
                r.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20
            }
        })
        .collect();
    let scramble = std::env::var("SCRAMBLE").is_ok();
    if let Ok(f) = std::env::var("TRACE_FILE") {
        for spec in specs.split(',') {
            let t = Instant::now();
            let data = std::fs::read(&f).unwrap();
            let reqs = data.chunks_exact(24).map(|c| {
                let id = u64::from_le_bytes(c[4..12].try_into().unwrap());
                let id = if scramble {
                    id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20
                } else {
                    id
                };
                Ok(Request::read(id * 512, 512))
            });
            let s = policy::sim::simulate(spec, 100_000, KeyMode::Object, reqs, &|_| {}).unwrap();
            let secs = t.elapsed().as_secs_f64();
            println!(
                "file {spec}: miss {:.4}  {:.2} M req/s",
                s.miss_ratio(),
                s.requests as f64 / secs / 1e6
            );
        }
        return;
    }
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
