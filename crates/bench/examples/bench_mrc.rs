//! Runs [`bench::curve_methods::bench_report`]: `cargo run --release -p bench --example bench_mrc -- [requests] [seed] [minisim]`.

fn main() {
    let mut a = std::env::args().skip(1);
    let requests: u64 = a
        .next()
        .map_or(10_000_000, |s| s.parse().expect("requests"));
    let seed: u64 = a.next().map_or(42, |s| s.parse().expect("seed"));
    let minisim = a.next().is_some_and(|s| s == "minisim");
    let r = bench::curve_methods::bench_report(requests, seed).expect("benchmark");
    print!("{r}");
    if minisim {
        let keys = bench::curve_methods::bench_keys(requests, seed).expect("trace");
        for m in bench::curve_methods::minisim_report(&keys, &["lru", "arc", "lirs"], 0.01)
            .expect("minisim")
        {
            println!(
                "miniSim {} rate {}: MAE {:.4} at {} sizes ({:.2} s miniSim, {:.2} s full)",
                m.policy,
                m.rate,
                m.mae,
                m.points.len(),
                m.minisim_seconds,
                m.full_seconds
            );
        }
    }
}
