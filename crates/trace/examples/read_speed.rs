//! Reader and generator throughput probe (run with `--release`):
//! * `read_speed FILE`: read every record of FILE (any format) and report records/s;
//! * `read_speed gen SPEC`: draw every request of a synthetic spec and report requests/s.
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let t = Instant::now();
    let (mut n, mut sum) = (0u64, 0u64);
    if args.first().map(String::as_str) == Some("gen") {
        let spec = args.get(1).expect("usage: read_speed gen SPEC");
        for r in trace::synth::parse(spec).expect("spec").iter() {
            n += 1;
            sum = sum.wrapping_add(r.offset);
        }
    } else {
        let path = args.first().expect("usage: read_speed FILE | gen SPEC");
        for r in trace::open(std::path::Path::new(path), None).expect("open") {
            let r = r.expect("record");
            n += 1;
            sum = sum.wrapping_add(r.offset);
        }
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "{n} records in {s:.3} s: {:.1} M records/s (checksum {sum})",
        n as f64 / s / 1e6
    );
}
