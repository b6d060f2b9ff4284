//! `lachesis demo`: the controller, six cache nodes and four tenants on loopback in one
//! process (see the `controller` crate's `demo` module for what runs). It runs the
//! workload under static fair share on fresh nodes first (the comparison), then under the
//! chosen scheme (default `lachesis`), printing every interval's table (or, with `--json`,
//! one object per tenant per interval), and ends with a summary line: the share of
//! intervals (after the first three) in which each feasible SLO held — a degradation SLO
//! judged on the interval's requests against the same requests under fair share — and
//! aggregate throughput against fair share.

use anyhow::{bail, Context};
use clap::Args;
use controller::demo::{run_arm, DemoOptions, Summary};
use controller::IntervalReport;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `lachesis demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// How long the workload runs under the scheme (and again under fair share).
    #[arg(long, default_value = "24s")]
    duration: String,
    /// Enforcement interval.
    #[arg(long, default_value = "2s")]
    interval: String,
    /// One JSON object per tenant per interval, then `{"summary": ...}`.
    #[arg(long)]
    json: bool,
    /// The control scheme under test.
    #[arg(long, default_value = "lachesis")]
    scheme: String,
    /// Skip the static fair-share arm (no `throughput_vs_fair`).
    #[arg(long)]
    no_fair: bool,
    /// Exclusive levels: the controller plans both levels as one LRU stack and creates the
    /// caches exclusive; level-1 nodes demote the clean blocks they evict to level 2.
    #[arg(long)]
    exclusive: bool,
    /// Print the fair-share arm's intervals too (tables, or JSON lines with `"arm": "fair"`).
    #[arg(long)]
    show_fair: bool,
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
                "latency_ms": row.latency_ms, "l1_hit_ratio": row.l1_hit_ratio,
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
        "{:<7} {:<22} {:>8} {:>8} {:>7} {:>7} {:>8} {:>8} {:>6}  {:<4}",
        "tenant", "SLO", "lat ms", "target", "L1 hit", "L2 hit", "L1 MiB", "L2 MiB", "IOPS", "met"
    );
    for row in &r.rows {
        let met = match row.slo_met {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        let ms = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.3}"));
        println!(
            "{:<7} {:<22} {:>8} {:>8} {:>7.3} {:>7.3} {:>8.1} {:>8.1} {:>6.0}  {:<4}",
            row.tenant,
            row.slo.as_deref().unwrap_or("-"),
            ms(row.latency_ms),
            ms(row.target_ms),
            row.l1_hit_ratio,
            row.l2_hit_ratio,
            row.l1_size as f64 / 1048576.0,
            row.l2_size as f64 / 1048576.0,
            row.iops,
            met
        );
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
        ..DemoOptions::default()
    };
    let dir = tempfile::tempdir().context("creating the demo's temporary directory")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let json_out = a.json;
    let scheme = a.scheme.clone();
    // The fair-share arm first, so the scheme's arm can judge each interval's degradation
    // SLOs against what the same requests took under fair share.
    let fair = if a.no_fair {
        None
    } else {
        if !json_out {
            println!(
                "lachesis demo: first the workload under static fair share (fresh nodes, {} s, and {} s more \
                 as the reference for degradation SLOs), for the comparison…",
                duration.as_secs_f64(),
                duration.as_secs_f64()
            );
        }
        let mut fo = opts.clone();
        fo.listen = "127.0.0.1:0".into();
        // Twice as long, the second half only logging: the scheme may get further through
        // the same requests than fair share does.
        fo.extend = duration;
        let show = a.show_fair;
        Some(rt.block_on(run_arm(
            &fo,
            "fair",
            &dir.path().join("fair"),
            |_| {},
            |r| match (show, json_out) {
                (false, _) => {}
                (true, true) => {
                    for mut v in row_json(r) {
                        v["arm"] = json!("fair");
                        println!("{v}");
                    }
                }
                (true, false) => print_table(r),
            },
            Duration::ZERO,
            None,
        ))?)
    };
    let main_arm = rt.block_on(run_arm(
        &opts,
        &scheme,
        &dir.path().join(&scheme),
        |url| {
            if json_out {
                eprintln!("console: {url}");
            } else {
                println!(
                    "\nlachesis demo: controller ({scheme}) + 2 level-1 and 4 level-2 nodes + 4 tenants on loopback, \
                     {} s every {} s\nconsole: {url}",
                    duration.as_secs_f64(),
                    interval.as_secs_f64()
                );
            }
        },
        |r| {
            if json_out {
                for v in row_json(r) {
                    println!("{v}");
                }
            } else {
                print_table(r);
            }
        },
        linger,
        fair.as_ref(),
    ))?;
    let s = Summary::of(&main_arm, fair.as_ref());
    if json_out {
        println!(
            "{}",
            json!({"summary": {"slo_met_share": s.slo_met_share,
                "throughput_vs_fair": s.throughput_vs_fair, "intervals": s.intervals,
                "slo_checks": s.slo_checks, "throughput": s.throughput,
                "fair_throughput": s.fair_throughput, "per_tenant": s.per_tenant,
                "latency_vs_fair": s.latency_vs_fair}})
        );
    } else {
        println!(
            "\nsummary: slo_met_share {:.3} ({} tenant-intervals with a feasible SLO after the first three; per tenant {}) · \
             throughput {:.0} req/s under {} vs {} under fair share: throughput_vs_fair {}",
            s.slo_met_share,
            s.slo_checks,
            s.per_tenant
                .iter()
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            s.throughput,
            a.scheme,
            s.fair_throughput
                .map_or("-".into(), |f| format!("{f:.0} req/s")),
            s.throughput_vs_fair
                .map_or("-".into(), |r| format!("{r:.3}"))
        );
        if !s.latency_vs_fair.is_empty() {
            println!(
                "mean latency over the run against fair share's: {}",
                s.latency_vs_fair
                    .iter()
                    .map(|(k, v)| format!("{k} {v:.2}×"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    Ok(())
}
