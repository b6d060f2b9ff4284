//! Reader throughput probe: `cargo run --release -p trace --example read_speed -- FILE`.
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: read_speed FILE");
    let t = Instant::now();
    let mut n = 0u64;
    let mut sum = 0u64;
    for r in trace::open(std::path::Path::new(&path), None).expect("open") {
        let r = r.expect("record");
        n += 1;
        sum = sum.wrapping_add(r.offset);
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "{n} records in {s:.3} s: {:.1} M records/s (checksum {sum})",
        n as f64 / s / 1e6
    );
}
