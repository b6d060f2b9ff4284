//! `lachesis sim`: miss ratio, byte miss ratio and throughput for every (policy, size).
//! Placeholder until the trace readers land: runs on an in-memory Zipf-like sequence.
use clap::Args;

/// Arguments of `lachesis sim`.
#[derive(Args)]
pub struct SimArgs {
    /// Policies, comma-separated.
    #[arg(long, default_value = "lru")]
    policy: String,
}

/// Runs `lachesis sim`.
pub fn run(a: SimArgs) -> anyhow::Result<()> {
    for spec in a.policy.split(',') {
        let reqs = (0..100_000u64).map(|i| Ok(trace::Request::read((i * 7919 % 1000) * 512, 512)));
        let s = policy::sim::simulate(spec, 100, trace::KeyMode::Object, reqs, &|_| {})?;
        println!("{spec} {:.4}", s.miss_ratio());
    }
    Ok(())
}
