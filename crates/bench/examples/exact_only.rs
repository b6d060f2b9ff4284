//! Times the exact method alone: `exact_only <requests> <runs>` (runs = 0: generation only).

fn main() {
    let mut a = std::env::args().skip(1);
    let n: u64 = a
        .next()
        .map_or(10_000_000, |s| s.parse().expect("requests"));
    let runs: u32 = a.next().map_or(1, |s| s.parse().expect("runs"));
    let keys = bench::curve_methods::bench_keys(n, 42).expect("trace");
    for _ in 0..runs {
        let t = std::time::Instant::now();
        let mut s = mrc::exact::ExactStack::new();
        if std::env::var_os("PERKEY").is_some() {
            for &k in &keys {
                s.access(k);
            }
        } else {
            s.access_all(&keys);
        }
        let secs = t.elapsed().as_secs_f64();
        println!("{:.2} M/s ({} keys)", n as f64 / secs / 1e6, s.unique());
    }
}
