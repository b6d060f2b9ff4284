//! What the tools report, read back: the transaction latencies in `pgbench -l`'s logs
//! ([`Latencies`]), `pgbench`'s tps line, and the neighbour's read rate in fio's JSON.

use std::path::Path;

/// The transaction latencies of `pgbench -l`'s log files `dir/PREFIX*`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Latencies {
    /// Transactions logged.
    pub(super) n: usize,
    /// Mean, 99th percentile and maximum (ms).
    pub(super) mean_ms: f64,
    pub(super) p99_ms: f64,
    pub(super) max_ms: f64,
    /// From the earliest start to the latest end (s).
    pub(super) span_s: f64,
}

/// Reads the logs: each line is `client transaction latency_us script epoch_s epoch_us`,
/// the epoch being the transaction's end.
pub(super) fn latencies(dir: &Path, prefix: &str) -> Latencies {
    let mut v: Vec<f64> = Vec::new();
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if !e.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for l in text.lines() {
            let f: Vec<f64> = l
                .split_whitespace()
                .map(|x| x.parse::<f64>().unwrap_or(f64::NAN))
                .collect();
            let (Some(&us), Some(&sec), Some(&usec)) = (f.get(2), f.get(4), f.get(5)) else {
                continue;
            };
            if !(us.is_finite() && sec.is_finite() && usec.is_finite()) {
                continue;
            }
            let end = sec + usec / 1e6;
            first = first.min(end - us / 1e6);
            last = last.max(end);
            v.push(us / 1e3);
        }
    }
    if v.is_empty() {
        return Latencies::default();
    }
    let mean_ms = v.iter().sum::<f64>() / v.len() as f64;
    v.sort_unstable_by(f64::total_cmp);
    let rank = ((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Latencies {
        n: v.len(),
        mean_ms,
        p99_ms: v[rank - 1],
        max_ms: v[v.len() - 1],
        span_s: (last - first).max(0.0),
    }
}

/// `pgbench`'s "tps = X (without initial connection time)".
pub(super) fn tps_of(out: &str) -> Option<f64> {
    out.lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| l.trim_start_matches("tps = ").split_whitespace().next())
        .and_then(|x| x.parse().ok())
}

/// The read bandwidth (MB/s) in fio's JSON report.
pub(super) fn neighbour_mbps(path: &Path) -> f64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.find('{').unwrap_or(0);
    serde_json::from_str::<serde_json::Value>(&text[start..])
        .ok()
        .and_then(|v| v["jobs"][0]["read"]["bw_bytes"].as_f64())
        .map_or(0.0, |b| b / 1e6)
}
