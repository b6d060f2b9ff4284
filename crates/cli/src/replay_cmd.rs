//! `lachesis replay TRACE nbd://HOST:PORT/EXPORT`: replays a trace's requests as NBD reads
//! and writes at the trace's own pace (or `--rate`), then prints achieved IOPS, latency
//! and bytes. The work is `node::replay`; this file parses flags and prints.

use anyhow::Context;
use clap::Args;
use node::replay::{replay, NbdTarget, ReplayConfig, ReplayStats};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `lachesis replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The trace (any format `lachesis trace` reads; detected unless `--format`).
    trace: PathBuf,
    /// The export: `nbd://HOST:PORT/EXPORT`.
    target: String,
    /// Trace format (default: detected).
    #[arg(long)]
    format: Option<String>,
    /// Requests per second instead of the trace's own pace.
    #[arg(long)]
    rate: Option<f64>,
    /// Replay the trace's times this many times faster (ignored with `--rate`).
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Stop after this long (`30s`, `2m`, `500ms`, or seconds).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Stop after this many requests.
    #[arg(long)]
    requests: Option<u64>,
    /// Only this tenant's requests (the trace's tenant number).
    #[arg(long)]
    tenant: Option<u32>,
    /// Connections, each with one request in flight.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `30s`, `2m`, `1h`, `500ms` or a plain number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration such as 30s, 2m or 500ms"))?;
    let secs = match unit {
        "ms" => n / 1e3,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("`{s}`: unit `{unit}` is not ms, s, m or h")),
    };
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("`{s}` must be a positive duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Runs `lachesis replay`.
pub fn run(a: ReplayArgs) -> anyhow::Result<()> {
    let target: NbdTarget = a.target.parse()?;
    let format = a
        .format
        .as_deref()
        .map(str::parse::<trace::Format>)
        .transpose()?;
    let reader = trace::open(&a.trace, format.as_ref())
        .with_context(|| format!("opening {}", a.trace.display()))?;
    let mut cfg = ReplayConfig::new(target.clone());
    cfg.rate = a.rate;
    cfg.speed = a.speed;
    cfg.duration = a.duration;
    cfg.max_requests = a.requests;
    cfg.tenant = a.tenant;
    cfg.threads = a.threads;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let report = rt.block_on(replay(reader, &cfg, Arc::new(ReplayStats::default())))?;
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "replayed {} requests ({} reads, {} writes) to {target} in {:.2} s: {:.0} IOPS, \
             latency mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms; read {} bytes, wrote {} bytes",
            report.requests,
            report.reads,
            report.writes,
            report.seconds,
            report.iops,
            report.mean_ms,
            report.p50_ms,
            report.p99_ms,
            report.read_bytes,
            report.write_bytes,
        );
        if let Some(rate) = a.rate {
            if report.iops < rate * 0.95 && a.requests.is_none() {
                println!(
                    "asked {rate:.0} IOPS, achieved {:.0}: every connection was busy (try more --threads)",
                    report.iops
                );
            }
        }
    }
    if report.errors > 0 {
        anyhow::bail!(
            "{} requests failed; the first: {}",
            report.errors,
            report.first_error.unwrap_or_default()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("3 days").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
