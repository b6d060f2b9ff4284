//! MAE of fixed-rate SHARDS over several hash salts on one trace, in object mode or with
//! `block` in 4 KiB-block mode: `salts <spec or trace file> <rate> <n> [block|object]
//! [min_keys]` (`min_keys`: the floor on the sample, default `MIN_SAMPLE`; 0 for the
//! plain fixed rate). Shows how
//! much of a sampled curve's error is the luck of the sample: a small trace at a low rate
//! has few sampled keys, and no implementation can do better than the spread this prints.
use mrc::shards::{ShardsFixedRate, MIN_SAMPLE};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let rate: f64 = a[1].parse().expect("rate");
    let n: u64 = a[2].parse().expect("n");
    let mode = if a.get(3).is_some_and(|m| m == "block") {
        trace::KeyMode::Block { block_size: 4096 }
    } else {
        trace::KeyMode::Object
    };
    let min_keys: usize = a
        .get(4)
        .map_or(MIN_SAMPLE, |m| m.parse().expect("min_keys"));
    let keys: Vec<u64> = if std::path::Path::new(&a[0]).is_file() {
        let mut keys = Vec::new();
        for r in trace::open(std::path::Path::new(&a[0]), None).expect("trace") {
            r.expect("record").for_each_key(mode, |k| keys.push(k));
        }
        keys
    } else {
        let w = trace::synth::parse(&a[0]).expect("spec");
        w.iter().map(|r| r.object_key()).collect()
    };
    let mut e = mrc::exact::ExactStack::new();
    keys.iter().for_each(|&k| {
        e.access(k);
    });
    let sizes = mrc::spread_sizes(40, e.unique());
    let ec = e.histogram.curve(&sizes);
    let mut maes = Vec::new();
    for salt in 0..n {
        let mut s = ShardsFixedRate::with_options(
            rate,
            min_keys,
            salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ mrc::shards::SALT,
        );
        keys.iter().for_each(|&k| s.access(k));
        maes.push(mrc::mean_absolute_error(
            &ec,
            &s.histogram().curve(&sizes),
            &sizes,
        ));
    }
    let default_salt = maes[0];
    maes.sort_by(f64::total_cmp);
    println!(
        "min_keys {min_keys}: MAE over {n} salts: default {default_salt:.4} min {:.4} median {:.4} mean {:.4} max {:.4}",
        maes[0],
        maes[maes.len() / 2],
        maes.iter().sum::<f64>() / n as f64,
        maes[maes.len() - 1]
    );
}
