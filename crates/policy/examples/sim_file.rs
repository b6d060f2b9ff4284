//! What `lachesis sim --ignore-obj-size --threads 1` does, without the rest of the CLI:
//! `cargo run --release -p policy --example sim_file -- TRACE lru[,fifo,...] [SIZE]`
//! replays TRACE (any format `trace::open` reads) in object mode through a cache of SIZE
//! objects (default 100,000) per policy and prints the miss ratio and requests per second
//! of the replay. For profiling the replay loop (`perf record`) with a fast build.
use std::path::Path;
use trace::KeyMode;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: sim_file TRACE POLICIES [SIZE]");
    let specs = args.next().unwrap_or_else(|| "lru".into());
    let size: usize = args.next().map_or(100_000, |s| s.parse().expect("SIZE"));
    for spec in specs.split(',') {
        let reqs = trace::open(Path::new(&path), None).expect("trace opens");
        let s = policy::sim::simulate_stream(spec, size, KeyMode::Object, reqs, &|_| {})
            .expect("simulation runs");
        println!(
            "{spec}: miss {:.4}  {:.2} M req/s  ({} requests, {:.3} s)",
            s.miss_ratio(),
            s.requests_per_sec() / 1e6,
            s.requests,
            s.seconds
        );
    }
}
