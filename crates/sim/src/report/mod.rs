//! A run's files: `intervals.csv` (one row per scheme, interval and tenant),
//! `summary.json`, and PNG plots (drawn by [`chart`], chosen in `plots`):
//! * `latency.png` — mean latency per scheme over time (all tenants' requests);
//! * `hit_ratio.png` — level-1 and level-2 hit ratio per scheme over time, a panel each;
//! * `allocation.png` — a panel per tenant: its level-1 and level-2 blocks over time
//!   under the most controlled scheme of the run (`lachesis`, else the last one asked
//!   for), its fair share dashed beside them;
//! * `tenant_latency.png` — a panel per tenant: its mean latency over time under that
//!   scheme, under fair share and under one shared cache (when they ran), and its SLO
//!   target dashed (for a degradation SLO, `(1 + x)` times fair share's latency in the
//!   same interval: what the SLO is judged against);
//! * `deviance.png` — per scheme, the sum of the tenants' squared deviances from target
//!   per interval (when some tenant has an SLO);
//! * `migrations.png` — per scheme, hot-tier placements per interval (when there are any).
//!
//! An interval in which a tenant issued nothing breaks its lines; at most six series
//! share a panel (more schemes are spread over panels).

pub mod chart;
mod plots;

pub use chart::{line_chart, line_chart_capped, panels, Panel, Series, MAX_SERIES};

use crate::run::RunOutput;
use crate::stats::IntervalRow;
use crate::SimError;
use std::fmt::Write as _;
use std::path::Path;

fn out_err(path: &Path, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SimError {
    SimError::Output {
        path: path.display().to_string(),
        error: e.into(),
    }
}

/// Writes `intervals.csv`, `summary.json` and the plots into `dir` (created if needed).
pub fn write_dir(dir: &Path, out: &RunOutput) -> Result<(), SimError> {
    std::fs::create_dir_all(dir).map_err(|e| out_err(dir, e))?;
    let csv = dir.join("intervals.csv");
    std::fs::write(&csv, intervals_csv(&out.rows)).map_err(|e| out_err(&csv, e))?;
    let json = dir.join("summary.json");
    let text = serde_json::to_string_pretty(&out.summary).map_err(|e| out_err(&json, e))?;
    std::fs::write(&json, text + "\n").map_err(|e| out_err(&json, e))?;
    plots::plots(dir, out)
}

/// The rows as CSV with a header.
pub fn intervals_csv(rows: &[IntervalRow]) -> String {
    let mut s = String::from(
        "scheme,interval,time_s,tenant,requests,iops,mean_latency_ms,p99_latency_ms,l1_hit_ratio,l2_hit_ratio,l1_size,l2_size,target_ms,slo_met,eviction,l1_reason,l2_reason,deviance,migrations,disk_blocks,writes,read_latency_ms,write_latency_ms,host_share,disk_share\n",
    );
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.6}"));
    let q = |v: &str| format!("\"{}\"", v.replace('"', "'"));
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{:.3},{},{},{:.3},{:.6},{:.6},{:.6},{:.6},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.scheme,
            r.interval,
            r.time_s,
            q(&r.tenant),
            r.requests,
            r.iops,
            r.mean_latency_ms,
            r.p99_latency_ms,
            r.l1_hit_ratio,
            r.l2_hit_ratio,
            r.l1_size,
            r.l2_size,
            opt(r.target_ms),
            r.slo_met.map_or(String::new(), |b| b.to_string()),
            r.eviction,
            q(&r.l1_reason),
            q(&r.l2_reason),
            opt(r.deviance),
            r.migrations,
            r.disk_blocks,
            r.writes,
            opt(r.read_latency_ms),
            opt(r.write_latency_ms),
            opt(r.host_share),
            opt(r.disk_share),
        );
    }
    s
}
