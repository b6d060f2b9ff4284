//! `lachesis sim run SCENARIO.toml...`: the hierarchy simulator (`sim` crate) on scenario
//! files, every scheme in parallel, with progress bars, a table per scenario and, with
//! `--out`, `intervals.csv`, `summary.json` and PNG plots. `lachesis sim` without `run`
//! is the single-cache policy simulator (`sim_cmd`).

use crate::sim_cmd::SimArgs;
use anyhow::Context;
use clap::{Args, Subcommand};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::path::PathBuf;

/// `lachesis sim`: a subcommand, or the single-cache simulator's arguments.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimCommand {
    #[command(subcommand)]
    sub: Option<SimSub>,
    #[command(flatten)]
    args: SimArgs,
}

#[derive(Subcommand, Debug)]
enum SimSub {
    /// Simulate the whole I/O path (hosts, storage servers, disks, network) under each
    /// control scheme of a scenario file.
    Run(RunArgs),
}

/// Arguments of `lachesis sim run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario files (TOML; see the `sim` crate's `scenario` module for the keys).
    /// Without one, the built-in four-tenant scenario (`examples/hierarchy.toml`).
    scenarios: Vec<PathBuf>,
    /// Schemes to run, comma-separated (default: the scenario's `schemes`, or all).
    #[arg(long)]
    scheme: Option<String>,
    /// Write intervals.csv, summary.json and plots here (one folder per scenario when
    /// several are given).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print summary.json to stdout instead of the tables.
    #[arg(long)]
    json: bool,
    /// Seed every random choice (devices, arrivals, synthetic workloads) from this.
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Run each scenario at several seeds (`1..5`, or `1,7,9`) and print each figure as
    /// median and range and each claim as held at how many seeds; with `--out`, each
    /// seed's results go to `seed-N/` and the spread to `spread.json`.
    #[arg(long)]
    seeds: Option<String>,
    /// Worker threads (default: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Run each scenario's quick form: its duration, starts, idle windows, phases and
    /// request limits scaled by its `sim.quick` (default 0.25).
    #[arg(long)]
    quick: bool,
}

/// Runs `lachesis sim`.
pub fn run(c: SimCommand) -> anyhow::Result<()> {
    match c.sub {
        Some(SimSub::Run(a)) => run_scenarios(a),
        None => crate::sim_cmd::run(c.args),
    }
}

fn run_scenarios(a: RunArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let many = a.scenarios.len() > 1;
    let builtin = vec![PathBuf::from("(built-in) examples/hierarchy.toml")];
    let paths = if a.scenarios.is_empty() {
        &builtin
    } else {
        &a.scenarios
    };
    let seeds: Vec<Option<u64>> = match &a.seeds {
        Some(text) => sim::spread::parse_seeds(text)?
            .into_iter()
            .map(Some)
            .collect(),
        None => vec![a.seed],
    };
    for path in paths {
        let mut runs: Vec<(u64, sim::Summary)> = Vec::new();
        for &seed in &seeds {
            let mut sc = if a.scenarios.is_empty() {
                sim::Scenario::builtin()
            } else {
                sim::Scenario::load(path)?
            };
            if let Some(seed) = seed {
                sc.reseed(seed);
            }
            if a.quick {
                sc.quick();
            }
            let one = std::time::Instant::now();
            let opts = sim::RunOptions {
                schemes: a
                    .scheme
                    .as_ref()
                    .map(|s| s.split(',').map(|x| x.trim().to_string()).collect()),
                threads: a.threads,
            };
            let bars = MultiProgress::new();
            // Without a terminal the bars are hidden; a line per job and tenth done goes to
            // stderr instead, so a long run in a log still shows where it is.
            let lines = !a.json && !console_is_terminal();
            if a.json || !console_is_terminal() {
                bars.set_draw_target(indicatif::ProgressDrawTarget::hidden());
            }
            let tenths: std::sync::Mutex<Vec<i64>> = std::sync::Mutex::new(Vec::new());
            let style =
                ProgressStyle::with_template("{prefix:>24} [{bar:30}] {percent:>3}% {elapsed}")
                    .expect("static template")
                    .progress_chars("=> ");
            let made: std::sync::Mutex<Vec<Option<ProgressBar>>> =
                std::sync::Mutex::new(Vec::new());
            let progress = |job: usize, label: &str, f: f64| {
                let mut v = made.lock().expect("progress lock");
                if v.len() <= job {
                    v.resize(job + 1, None);
                }
                let b = v[job].get_or_insert_with(|| {
                    let b = bars.add(ProgressBar::new(1000));
                    b.set_style(style.clone());
                    b.set_prefix(label.to_string());
                    b
                });
                b.set_position((f * 1000.0) as u64);
                if lines {
                    let mut t = tenths.lock().expect("progress lock");
                    if t.len() <= job {
                        t.resize(job + 1, -1);
                    }
                    let tenth = (f * 10.0).floor() as i64;
                    if tenth > t[job] {
                        t[job] = tenth;
                        eprintln!(
                            "{}: {label} {}% ({:.0} s)",
                            sc.name,
                            tenth * 10,
                            one.elapsed().as_secs_f64()
                        );
                    }
                }
            };
            let out = sim::run(&sc, &opts, &progress)
                .with_context(|| format!("scenario {}", path.display()))?;
            for b in made
                .into_inner()
                .expect("progress lock")
                .into_iter()
                .flatten()
            {
                b.finish_and_clear();
            }
            if let Some(dir) = &a.out {
                let mut dir = if many {
                    dir.join(&sc.name)
                } else {
                    dir.clone()
                };
                if let (true, Some(seed)) = (a.seeds.is_some(), seed) {
                    dir = dir.join(format!("seed-{seed}"));
                }
                sim::report::write_dir(&dir, &out)?;
                if !a.scenarios.is_empty() {
                    // The scenario beside its results, for `lachesis report`.
                    std::fs::copy(path, dir.join("scenario.toml")).with_context(|| {
                        format!("copying {} into {}", path.display(), dir.display())
                    })?;
                } else {
                    std::fs::write(dir.join("scenario.toml"), sim::scenario::BUILTIN)?;
                }
                if !a.json {
                    eprintln!(
                        "wrote {}/{{intervals.csv,summary.json,*.png}}",
                        dir.display()
                    );
                }
            }
            if a.seeds.is_some() {
                if !a.json {
                    eprintln!(
                        "scenario {} seed {} took {:.1} s of wall-clock time",
                        sc.name,
                        seed.unwrap_or(0),
                        one.elapsed().as_secs_f64()
                    );
                }
                runs.push((seed.unwrap_or(0), out.summary));
            } else if a.json {
                println!("{}", serde_json::to_string_pretty(&out.summary)?);
            } else {
                print_tables(&out);
                print_claims(&out.summary.claims);
                println!(
                    "scenario {} took {:.1} s of wall-clock time{}\n",
                    sc.name,
                    one.elapsed().as_secs_f64(),
                    if a.quick { " (quick form)" } else { "" }
                );
            }
        }
        if a.seeds.is_some() {
            let spread = sim::spread::spread(&runs);
            if let Some(dir) = &a.out {
                let dir = if many {
                    dir.join(&spread.scenario)
                } else {
                    dir.clone()
                };
                let file = dir.join("spread.json");
                std::fs::write(&file, serde_json::to_string_pretty(&spread)?)
                    .with_context(|| format!("writing {}", file.display()))?;
            }
            if a.json {
                println!("{}", serde_json::to_string_pretty(&spread)?);
            } else {
                print_spread(&spread);
            }
        }
    }
    if !a.json && paths.len() > 1 {
        println!(
            "{} scenarios took {:.1} s of wall-clock time",
            paths.len(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// A scenario over several seeds: each figure as median [min, max].
fn print_spread(s: &sim::spread::Spread) {
    let show =
        |r: Option<sim::spread::Range>, p: usize| r.map_or("-".to_string(), |r| format!("{r:.p$}"));
    println!(
        "scenario {} at {} seeds ({}): median [min, max]",
        s.scenario,
        s.seeds.len(),
        s.seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "{:<16} {:>24} {:>24} {:>18} {:>22}",
        "scheme", "fair speedup", "mean ms", "SLO x", "SLO met"
    );
    for (name, r) in &s.schemes {
        println!(
            "{:<16} {:>24} {:>24} {:>18} {:>22}",
            name,
            show(r.fair_speedup, 3),
            show(r.mean_latency_ms, 3),
            show(r.slo_violations, 0),
            show(r.slo_met_share, 3)
        );
    }
    println!();
    println!(
        "{:<16} {:<12} {:>24} {:>22} {:>22}",
        "scheme", "tenant", "mean ms", "vs fair", "SLO met"
    );
    for (name, r) in &s.schemes {
        for (t, x) in &r.tenants {
            let met = match (x.slo_met_share, x.unjudged_seeds) {
                (m, 0) => show(m, 2),
                (m, u) => format!("{} ({u} unjudged)", show(m, 2)),
            };
            println!(
                "{:<16} {:<12} {:>24} {:>22} {:>22}",
                name,
                t,
                show(x.mean_latency_ms, 3),
                show(x.vs_fair, 3),
                met
            );
        }
    }
    let skipped = s.claims.iter().filter(|c| c.of == 0).count();
    if skipped > 0 {
        println!("({skipped} claims name schemes that were not run: not evaluated)");
    }
    if s.claims.iter().any(|c| c.of > 0) {
        println!("claims:");
        for c in s.claims.iter().filter(|c| c.of > 0) {
            println!(
                "  [holds at {} of {}] {} ({})\n        paper: {}\n        rule:  {}",
                c.holds_at.len(),
                c.of,
                c.name,
                c.kind.as_str(),
                c.paper,
                c.rule
            );
        }
    }
    println!();
}

fn print_claims(claims: &[sim::claims::Claim]) {
    if claims.is_empty() {
        return;
    }
    println!("claims:");
    for c in claims {
        println!(
            "  [{}] {} ({})\n        paper: {}\n        ours:  {}",
            if c.holds { "holds" } else { "FAILS" },
            c.name,
            c.kind.as_str(),
            c.paper,
            c.ours
        );
    }
}

fn console_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

fn print_tables(out: &sim::RunOutput) {
    let s = &out.summary;
    println!(
        "scenario {}: {} requests per scheme over {:.0} simulated seconds",
        s.scenario, s.requests, s.seconds
    );
    println!(
        "{:<16} {:>8} {:>10} {:>10} {:>7} {:>8} {:>7} {:>7} {:>11}",
        "scheme",
        "speedup",
        "mean ms",
        "p99 ms",
        "SLO x",
        "SLO met",
        "L1 hit",
        "L2 hit",
        "M req/cpu-s"
    );
    for name in &out.order {
        let r = &s.schemes[name];
        println!(
            "{:<16} {:>8.3} {:>10.3} {:>10.3} {:>7} {:>7.1}% {:>7.3} {:>7.3} {:>11.2}",
            name,
            r.fair_speedup,
            r.mean_latency_ms,
            r.p99_latency_ms,
            r.slo_violations,
            r.slo_met_share * 100.0,
            r.l1_hit_ratio,
            r.l2_hit_ratio,
            r.requests_per_cpu_second / 1e6
        );
    }
    println!();
    println!(
        "{:<16} {:<12} {:>10} {:>10} {:>7} {:>7} {:>9} {:>10}",
        "scheme", "tenant", "mean ms", "p99 ms", "L1 hit", "L2 hit", "SLO met", "infeasible"
    );
    for name in &out.order {
        for (t, r) in &s.schemes[name].tenants {
            println!(
                "{:<16} {:<12} {:>10.3} {:>10.3} {:>7.3} {:>7.3} {:>9} {:>10}",
                name,
                t,
                r.mean_latency_ms,
                r.p99_latency_ms,
                r.l1_hit_ratio,
                r.l2_hit_ratio,
                match (r.slo_met_share, r.slo_unjudged) {
                    (Some(x), _) => format!("{:.0}%", x * 100.0),
                    (None, true) => "unjudged".to_string(),
                    (None, false) => "-".to_string(),
                },
                r.infeasible_intervals
            );
        }
    }
}
