//! A run's files: `intervals.csv` (one row per scheme, interval and tenant),
//! `summary.json`, and PNG plots drawn with `plotters`:
//! * `latency.png` — mean latency per scheme over time (all tenants' requests);
//! * `hit_ratio.png` — level-1 and level-2 hit ratio per scheme over time;
//! * `allocation.png` — each tenant's level-1 and level-2 blocks over time under the most
//!   controlled scheme of the run (`lachesis`, else the last one asked for);
//! * `tenant_latency.png` — each tenant's mean latency and SLO target over time under that
//!   scheme;
//! * `deviance.png` — per scheme, the sum of the tenants' squared deviances from target
//!   per interval (when some tenant has an SLO);
//! * `migrations.png` — per scheme, hot-tier placements per interval (when there are any).

use crate::run::RunOutput;
use crate::stats::IntervalRow;
use crate::SimError;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One named line of a chart.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// `(x, y)` points in increasing x.
    pub points: Vec<(f64, f64)>,
}

fn out_err(path: &Path, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SimError {
    SimError::Output {
        path: path.display().to_string(),
        error: e.into(),
    }
}

/// Draws `series` on one chart (y from 0 to the largest value) and writes a PNG.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), SimError> {
    line_chart_capped(path, title, x_label, y_label, series, None)
}

/// [`line_chart`] with the y axis ending at `cap` at most (1 for ratios).
pub fn line_chart_capped(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    cap: Option<f64>,
) -> Result<(), SimError> {
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
        root.fill(&WHITE)?;
        let pts = || series.iter().flat_map(|s| s.points.iter());
        let x_max = pts().map(|p| p.0).fold(1e-9f64, f64::max);
        let top = pts()
            .map(|p| p.1)
            .filter(|v| v.is_finite())
            .fold(1e-9f64, f64::max);
        let y_max = cap.map_or(top, |c| top.min(c)) * 1.06;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 24))
            .margin(16)
            .x_label_area_size(52)
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .label_style(("sans-serif", 15))
            .draw()?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))?
                .label(s.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
        root.present()?;
        Ok(())
    };
    // The drawing backend's errors are not `Send`: their message is the source.
    draw().map_err(|e| out_err(path, e.to_string()))
}

/// Writes `intervals.csv`, `summary.json` and the plots into `dir` (created if needed).
pub fn write_dir(dir: &Path, out: &RunOutput) -> Result<(), SimError> {
    std::fs::create_dir_all(dir).map_err(|e| out_err(dir, e))?;
    let csv = dir.join("intervals.csv");
    std::fs::write(&csv, intervals_csv(&out.rows)).map_err(|e| out_err(&csv, e))?;
    let json = dir.join("summary.json");
    let text = serde_json::to_string_pretty(&out.summary).map_err(|e| out_err(&json, e))?;
    std::fs::write(&json, text + "\n").map_err(|e| out_err(&json, e))?;
    plots(dir, out)
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

/// Per scheme and interval: (end time, Σ latency·requests, requests, Σ L1 hit·requests,
/// Σ L2 hit·requests).
type Point = (f64, f64, u64, f64, f64);

fn plots(dir: &Path, out: &RunOutput) -> Result<(), SimError> {
    // Per scheme and interval: request-weighted latency and hit ratios over tenants.
    let mut per: BTreeMap<(usize, u64), Point> = BTreeMap::new();
    for r in &out.rows {
        let k = out.order.iter().position(|s| *s == r.scheme).unwrap_or(0);
        let e = per
            .entry((k, r.interval))
            .or_insert((r.time_s, 0.0, 0, 0.0, 0.0));
        let w = r.requests as f64;
        e.1 += r.mean_latency_ms * w;
        e.2 += r.requests;
        e.3 += r.l1_hit_ratio * w;
        e.4 += r.l2_hit_ratio * w;
    }
    let series = |f: &dyn Fn(&Point) -> f64, suffix: &str| -> Vec<Series> {
        out.order
            .iter()
            .enumerate()
            .map(|(k, name)| Series {
                label: format!("{name}{suffix}"),
                points: per
                    .range((k, 0)..(k + 1, 0))
                    .filter(|(_, v)| v.2 > 0)
                    .map(|(_, v)| (v.0, f(v)))
                    .collect(),
            })
            .collect()
    };
    line_chart(
        &dir.join("latency.png"),
        "Mean latency per scheme",
        "simulated seconds",
        "mean latency (ms)",
        &series(&|v| v.1 / v.2 as f64, ""),
    )?;
    let mut hits = series(&|v| v.3 / v.2 as f64, " L1");
    hits.extend(series(&|v| v.4 / v.2 as f64, " L2"));
    line_chart(
        &dir.join("hit_ratio.png"),
        "Hit ratio per level",
        "simulated seconds",
        "hit ratio",
        &hits,
    )?;
    let focus = out
        .order
        .iter()
        .find(|s| *s == "lachesis")
        .or_else(|| out.order.iter().rev().find(|s| *s != "fair"))
        .or(out.order.first())
        .cloned()
        .unwrap_or_default();
    let mut tenants: Vec<String> = Vec::new();
    for r in out.rows.iter().filter(|r| r.scheme == focus) {
        if !tenants.contains(&r.tenant) {
            tenants.push(r.tenant.clone());
        }
    }
    let focus_ref = focus.as_str();
    let rows_of = |t: &str| -> Vec<&IntervalRow> {
        out.rows
            .iter()
            .filter(|r| r.scheme == focus_ref && r.tenant == t)
            .collect()
    };
    let mut alloc = Vec::new();
    let mut lat = Vec::new();
    for t in &tenants {
        alloc.push(Series {
            label: format!("{t} L1"),
            points: rows_of(t)
                .into_iter()
                .map(|r| (r.time_s, r.l1_size as f64))
                .collect(),
        });
        alloc.push(Series {
            label: format!("{t} L2"),
            points: rows_of(t)
                .into_iter()
                .map(|r| (r.time_s, r.l2_size as f64))
                .collect(),
        });
        lat.push(Series {
            label: t.clone(),
            points: rows_of(t)
                .into_iter()
                .filter(|r| r.requests > 0)
                .map(|r| (r.time_s, r.mean_latency_ms))
                .collect(),
        });
        let targets: Vec<(f64, f64)> = rows_of(t)
            .into_iter()
            .filter_map(|r| r.target_ms.map(|x| (r.time_s, x)))
            .collect();
        if !targets.is_empty() {
            lat.push(Series {
                label: format!("{t} target"),
                points: targets,
            });
        }
    }
    line_chart(
        &dir.join("allocation.png"),
        &format!("Allocation under {focus}"),
        "simulated seconds",
        "blocks",
        &alloc,
    )?;
    line_chart(
        &dir.join("tenant_latency.png"),
        &format!("Latency against target under {focus}"),
        "simulated seconds",
        "mean latency (ms)",
        &lat,
    )?;
    // Σ dft² per scheme over time (tenants with an SLO), and hot-tier placements.
    let mut dev: BTreeMap<(usize, u64), (f64, f64)> = BTreeMap::new();
    let mut mig: BTreeMap<(usize, u64), (f64, f64)> = BTreeMap::new();
    for r in &out.rows {
        let k = out.order.iter().position(|s| *s == r.scheme).unwrap_or(0);
        if let Some(d) = r.deviance {
            let e = dev.entry((k, r.interval)).or_insert((r.time_s, 0.0));
            e.1 += d * d;
        }
        let e = mig.entry((k, r.interval)).or_insert((r.time_s, 0.0));
        e.1 += r.migrations as f64;
    }
    let by_scheme = |m: &BTreeMap<(usize, u64), (f64, f64)>| -> Vec<Series> {
        out.order
            .iter()
            .enumerate()
            .map(|(k, name)| Series {
                label: name.clone(),
                points: m.range((k, 0)..(k + 1, 0)).map(|(_, v)| *v).collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    if !dev.is_empty() {
        line_chart(
            &dir.join("deviance.png"),
            "Deviance from targets: sum of squared dft per interval",
            "simulated seconds",
            "sum of dft^2",
            &by_scheme(&dev),
        )?;
    }
    if mig.values().any(|v| v.1 > 0.0) {
        line_chart(
            &dir.join("migrations.png"),
            "Hot-tier placements (chunks) per interval",
            "simulated seconds",
            "migrations",
            &by_scheme(&mig),
        )?;
    }
    Ok(())
}
