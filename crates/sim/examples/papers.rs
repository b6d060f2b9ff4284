//! Runs scenario files and writes each one's results as `lachesis sim run --out` does
//! (`DIR/<scenario>/{intervals.csv,summary.json,*.png,scenario.toml}`), with only the
//! `sim` crate built: `cargo run -p sim --example papers --profile test -- [--quick]
//! --out results/ scenarios/*.toml`. The same calls as the `lachesis` binary's
//! `sim run`, without its progress bars and tables. `--scheme a,b` runs only those schemes
//! (plus `fair`), `--threads N` caps the worker threads; each scheme's simulated requests
//! per CPU second of its thread is printed.

use std::path::PathBuf;

fn main() {
    let mut out = PathBuf::from("results");
    let mut quick = false;
    let mut schemes: Option<Vec<String>> = None;
    let mut threads = 0;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--out" => out = PathBuf::from(args.next().expect("--out DIR")),
            "--scheme" => {
                let list = args.next().expect("--scheme a,b");
                schemes = Some(list.split(',').map(str::to_string).collect());
            }
            "--threads" => {
                threads = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--threads N");
            }
            _ => files.push(PathBuf::from(a)),
        }
    }
    let all = std::time::Instant::now();
    for path in &files {
        let started = std::time::Instant::now();
        let mut sc = sim::Scenario::load(path).unwrap_or_else(|e| panic!("{e}"));
        if quick {
            sc.quick();
        }
        let opts = sim::RunOptions {
            schemes: schemes.clone(),
            threads,
        };
        let res = sim::run(&sc, &opts, &|_, _, _| {}).unwrap_or_else(|e| panic!("{e}"));
        let dir = out.join(&sc.name);
        sim::report::write_dir(&dir, &res).unwrap_or_else(|e| panic!("{e}"));
        std::fs::copy(path, dir.join("scenario.toml")).expect("copy the scenario");
        let holds = res.summary.claims.iter().filter(|c| c.holds).count();
        println!(
            "{}: {holds}/{} claims hold, {:.1} s",
            sc.name,
            res.summary.claims.len(),
            started.elapsed().as_secs_f64()
        );
        for (name, s) in &res.summary.schemes {
            println!(
                "  {name}: {:.3} M req/cpu-s ({} requests, {:.1} cpu-s)",
                s.requests_per_cpu_second / 1e6,
                s.requests,
                s.cpu_seconds
            );
        }
        for c in &res.summary.claims {
            println!(
                "  [{}] {}: {}",
                if c.holds { "holds" } else { "FAILS" },
                c.name,
                c.ours
            );
        }
    }
    println!("all: {:.1} s", all.elapsed().as_secs_f64());
}
