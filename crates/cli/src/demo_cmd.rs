//! `lachesis demo`: a controller, six cache nodes and four tenants on loopback in one
//! process, three times over (see the `loadgen` crate's `demo` module for what runs). It
//! runs the same workload on three fresh clusters at the same time: under a static fair
//! split (the reference that degradation SLOs are judged against), under one shared cache
//! per node (`uncontrolled`), and under the chosen scheme (default `lachesis`). While they
//! run it prints `db`'s p99 in each arm per interval; then every interval's table of the
//! scheme's arm (or, with `--json`, one object per tenant per interval), and ends with the
//! three arms side by side (`loadgen::demo::DemoSummary`):
//! per tenant the share of judged intervals after the warm-up in which its SLO held, its
//! clients' mean and p99 latency, the intervals the plan called infeasible; per arm the
//! throughput. With `--json` that is the last line, `{"summary": ...}`.

use anyhow::{bail, Context};
use clap::Args;
use controller::IntervalReport;
use loadgen::demo::{judge, run_arms, DemoOptions, DemoSummary, WARMUP_INTERVALS};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `lachesis demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// How long the arms (fair share, a shared cache, the scheme) run and are counted;
    /// they run half as long again, uncounted, as the fair reference's extension.
    #[arg(long, default_value = "70s")]
    duration: String,
    /// Enforcement interval.
    #[arg(long, default_value = "2s")]
    interval: String,
    /// One JSON object per tenant per interval, then `{"summary": ...}`.
    #[arg(long)]
    json: bool,
    /// The control scheme under test (compared with `fair` and `uncontrolled`).
    #[arg(long, default_value = "lachesis")]
    scheme: String,
    /// Exclusive levels: the controller plans both levels as one LRU stack and creates the
    /// caches exclusive; level-1 nodes demote the clean blocks they evict to level 2.
    #[arg(long)]
    exclusive: bool,
    /// Print the baseline arms' intervals too (tables, or JSON lines with `"arm": "fair"`
    /// or `"uncontrolled"`; the scheme's lines carry `"arm": "main"`).
    #[arg(long)]
    show_baselines: bool,
    /// The CloudPhysics trace (default: `shared/traces/cloudPhysicsIO.csv` above the
    /// working directory).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// The controller's listen address.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Keep the controller and nodes of the scheme's arm serving this long after it ends
    /// (to look at the console).
    #[arg(long, default_value = "0s")]
    linger: String,
}

/// Parses `30s`, `1m`, `500ms` or plain seconds.
pub fn parse_duration(s: &str) -> anyhow::Result<Duration> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .with_context(|| format!("`{s}`: expected a duration such as 30s, 2m or 500ms"))?;
    if !(v.is_finite() && v >= 0.0) {
        bail!("`{s}`: a duration must be a positive number");
    }
    Ok(Duration::from_secs_f64(v * mult))
}

fn row_json(r: &IntervalReport) -> Vec<serde_json::Value> {
    r.rows
        .iter()
        .map(|row| {
            json!({"interval": r.interval, "tenant": row.tenant, "slo": row.slo,
                "latency_ms": row.latency_ms, "p99_ms": row.p99_ms,
                "l1_hit_ratio": row.l1_hit_ratio,
                "l2_hit_ratio": row.l2_hit_ratio, "l1_size": row.l1_size,
                "l2_size": row.l2_size, "slo_met": row.slo_met,
                "target_ms": row.target_ms, "l1_applied": row.l1_applied,
                "l2_applied": row.l2_applied, "iops": row.iops, "seconds": r.seconds})
        })
        .collect()
}

fn print_table(r: &IntervalReport) {
    println!(
        "\ninterval {} ({:.1} s){}",
        r.interval,
        r.seconds,
        if r.infeasible.is_empty() {
            String::new()
        } else {
            format!(
                " · infeasible: {}",
                r.infeasible
                    .iter()
                    .map(|s| format!(
                        "{} (needs {:.2} ms, best {:.2} ms)",
                        s.tenant, s.target_ms, s.predicted_ms
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    println!(
        "{:<7} {:<22} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>8} {:>6}  {:<4}",
        "tenant",
        "SLO",
        "lat ms",
        "p99 ms",
        "target",
        "L1 hit",
        "L2 hit",
        "L1 MiB",
        "L2 MiB",
        "IOPS",
        "met"
    );
    for row in &r.rows {
        let met = match row.slo_met {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        let ms = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.3}"));
        println!(
            "{:<7} {:<22} {:>8} {:>8} {:>8} {:>7.3} {:>7.3} {:>8.1} {:>8.1} {:>6.0}  {:<4}",
            row.tenant,
            row.slo.as_deref().unwrap_or("-"),
            ms(row.latency_ms),
            ms(row.p99_ms),
            ms(row.target_ms),
            row.l1_hit_ratio,
            row.l2_hit_ratio,
            // What the nodes hold after the interval's reconcile, not what was planned.
            row.l1_applied as f64 / 1048576.0,
            row.l2_applied as f64 / 1048576.0,
            row.iops,
            met
        );
    }
    for refused in &r.refused {
        println!("  REFUSED {}", refused.describe());
    }
}

/// Runs `lachesis demo`.
pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    let duration = parse_duration(&a.duration).context("--duration")?;
    let interval = parse_duration(&a.interval).context("--interval")?;
    let linger = parse_duration(&a.linger).context("--linger")?;
    if interval.is_zero() || duration < interval {
        bail!("--duration must be at least one --interval, and --interval above 0");
    }
    control::Scheme::named(&a.scheme).map_err(|e| anyhow::anyhow!("--scheme: {e}"))?;
    if a.scheme == "fair" || a.scheme == "uncontrolled" {
        bail!("--scheme: `{}` is one of the demo's baseline arms; name the scheme to compare with them", a.scheme);
    }
    let trace = match a.trace {
        Some(t) => Some(t),
        None => std::env::current_dir()
            .ok()
            .and_then(|d| trace::find_shared_trace("cloudPhysicsIO.csv", &d)),
    };
    if trace.is_none() && !a.json {
        eprintln!(
            "demo: shared/traces/cloudPhysicsIO.csv not found; `cloud` reads a Zipf set instead"
        );
    }
    let opts = DemoOptions {
        duration,
        interval,
        trace,
        listen: a.listen.clone(),
        exclusive: a.exclusive,
        // The fair arm is the reference: every arm runs on, uncounted, until its clients
        // have had time to reach the requests a faster arm completed.
        extend: duration / 2,
        ..DemoOptions::default()
    };
    let dir = tempfile::tempdir().context("creating the demo's temporary directory")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let json_out = a.json;
    let scheme = a.scheme.clone();
    let secs = duration.as_secs_f64();
    if !json_out {
        println!(
            "lachesis demo: the same workload on three fresh clusters at once, {secs} s counted (then {} s \
             more as the reference's extension), every {} s, the first {WARMUP_INTERVALS} intervals of each \
             arm not counted:\n  1. static fair share (the reference for degradation SLOs), 2. one shared \
             cache per node (uncontrolled), 3. {scheme}",
            opts.extend.as_secs_f64(),
            interval.as_secs_f64()
        );
    }
    // While it runs: db's p99 in every arm, per interval.
    let mut p99s: BTreeMap<String, Option<f64>> = BTreeMap::new();
    let schemes = ["fair", "uncontrolled", scheme.as_str()];
    let mut arms = rt.block_on(run_arms(
        &opts,
        &schemes,
        dir.path(),
        |arm, url| {
            if arm == scheme {
                if json_out {
                    eprintln!("console: {url}");
                } else {
                    println!(
                        "{scheme}: controller + 2 level-1 and 4 level-2 nodes + 4 tenants on loopback; console: {url}"
                    );
                }
            }
        },
        |arm, r| {
            let db = r.rows.iter().find(|x| x.tenant == "db").and_then(|x| x.p99_ms);
            p99s.insert(arm.to_string(), db);
            if arm == scheme && !json_out {
                let ms = |a: &str| {
                    p99s.get(a)
                        .copied()
                        .flatten()
                        .map_or("-".to_string(), |v| format!("{v:.2}"))
                };
                println!(
                    "interval {:>3}: db p99 ms: shared {:>7} · fair {:>7} · {scheme} {:>7}",
                    r.interval,
                    ms("uncontrolled"),
                    ms("fair"),
                    ms(&scheme)
                );
            }
        },
        linger,
    ))?;
    judge(&mut arms, &opts);
    let slos = demo_slos(&opts);
    for arm in &arms {
        let main = arm.scheme == scheme;
        if !(main || a.show_baselines) {
            continue;
        }
        let label = if main { "main" } else { arm.scheme.as_str() };
        if json_out {
            for r in &arm.reports {
                for mut v in row_json(r) {
                    v["arm"] = json!(label);
                    println!("{v}");
                }
            }
        } else {
            println!(
                "\n== {} (every interval, degradation SLOs judged against the fair arm)",
                arm.scheme
            );
            for r in &arm.reports {
                print_table(r);
            }
        }
    }
    let by: Vec<(&str, &loadgen::demo::ArmResult)> =
        arms.iter().map(|a| (a.scheme.as_str(), a)).collect();
    let s = DemoSummary::of(&by, &scheme, &slos);
    if json_out {
        println!("{}", json!({ "summary": s }));
    } else {
        print_summary(&s, &scheme);
    }
    Ok(())
}

/// Each demo tenant's SLO as text.
fn demo_slos(opts: &DemoOptions) -> BTreeMap<String, Option<String>> {
    loadgen::demo::tenant_slos(opts)
        .into_iter()
        .map(|(t, s)| (t, s.map(|s| s.to_string())))
        .collect()
}

/// The three arms side by side, and what each got wrong.
fn print_summary(s: &DemoSummary, scheme: &str) {
    let arms = ["uncontrolled", "fair", scheme];
    let titles = ["shared cache", "static fair split", scheme];
    let pct = |v: Option<f64>| v.map_or("-".into(), |x| format!("{:.0} %", 100.0 * x));
    let ms = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.2}"));
    let mut rows: Vec<[String; 5]> = vec![
        ["tenant", "SLO", titles[0], titles[1], titles[2]].map(String::from),
        [
            "",
            "",
            "met · mean/p99 ms",
            "met · mean/p99 ms",
            "met · mean/p99 ms",
        ]
        .map(String::from),
    ];
    let names: Vec<&String> = s
        .arms
        .get(scheme)
        .map_or(Vec::new(), |a| a.tenants.keys().collect());
    for t in &names {
        let cell = |arm: &str| {
            s.arms
                .get(arm)
                .and_then(|a| a.tenants.get(*t))
                .map_or("-".to_string(), |r| {
                    let inf = if r.infeasible_intervals > 0 {
                        format!(" ({} infeasible)", r.infeasible_intervals)
                    } else {
                        String::new()
                    };
                    format!(
                        "{}{inf} · {}/{}",
                        pct(r.slo_met_share),
                        ms(r.mean_ms),
                        ms(r.p99_ms)
                    )
                })
        };
        let slo = s.arms[scheme].tenants[*t].slo.clone().unwrap_or("-".into());
        rows.push([
            t.to_string(),
            slo,
            cell(arms[0]),
            cell(arms[1]),
            cell(arms[2]),
        ]);
    }
    let tput = |arm: &str| s.arms.get(arm).map_or(0.0, |a| a.throughput);
    rows.push([
        "all".into(),
        "throughput (req/s)".into(),
        format!("{:.0}", tput(arms[0])),
        format!("{:.0}", tput(arms[1])),
        format!("{:.0}", tput(arms[2])),
    ]);
    // Columns as wide as their widest cell (counted in characters: `·`, `≤`).
    let width = |c: usize| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..5).map(width).collect();
    let pad = |text: &str, w: usize, right: bool| {
        let fill = " ".repeat(w.saturating_sub(text.chars().count()));
        if right {
            format!("{fill}{text}")
        } else {
            format!("{text}{fill}")
        }
    };
    println!("\nsummary (after the warm-up; SLO share = intervals the SLO held of those judged):");
    for r in &rows {
        let cells: Vec<String> = (0..5).map(|c| pad(&r[c], widths[c], c >= 2)).collect();
        println!("{}", cells.join("   ").trim_end());
    }
    println!(
        "\n{scheme}: SLOs met in {} of judged tenant-intervals; throughput {} × fair share's, {} × the shared cache's",
        pct(s.slo_met_share),
        s.throughput_vs_fair.map_or("-".into(), |r| format!("{r:.2}")),
        if tput(arms[0]) > 0.0 {
            format!("{:.2}", tput(arms[2]) / tput(arms[0]))
        } else {
            "-".into()
        }
    );
    println!("what each arm got wrong (an SLO held in under 95 % of its judged intervals):");
    let title_width = titles.iter().map(|t| t.chars().count()).max().unwrap_or(0);
    for (arm, title) in arms.iter().zip(titles) {
        let missed: Vec<String> = names
            .iter()
            .filter_map(|t| {
                let r = s.arms.get(*arm)?.tenants.get(*t)?;
                let share = r.slo_met_share?;
                (share < 0.95).then(|| format!("{t} {}", pct(Some(share))))
            })
            .collect();
        let what = if missed.is_empty() {
            "nothing: every judged SLO held".to_string()
        } else {
            missed.join(", ")
        };
        println!("  {}   {what}", pad(title, title_width, false));
    }
}
