//! The plots of one run (listed in the module doc of `report`), from its interval rows.

use super::chart::{line_chart, panels, Panel, Series, MAX_SERIES};
use crate::run::RunOutput;
use crate::stats::IntervalRow;
use crate::SimError;
use std::collections::BTreeMap;
use std::path::Path;

/// Per scheme and interval: (end time, Σ latency·requests, requests, Σ L1 hit·requests,
/// Σ L2 hit·requests).
type Point = (f64, f64, u64, f64, f64);

/// `series` in panels of at most [`MAX_SERIES`], titled `title` (numbered when several).
fn chunked(title: &str, series: Vec<Series>) -> Vec<Panel> {
    let n = series.len().div_ceil(MAX_SERIES).max(1);
    let mut out: Vec<Panel> = Vec::new();
    let mut it = series
        .into_iter()
        .enumerate()
        .map(|(k, mut s)| {
            s.color = s.color.or(Some(k));
            s
        })
        .peekable();
    while it.peek().is_some() {
        let chunk: Vec<Series> = it.by_ref().take(MAX_SERIES).collect();
        let title = if n > 1 {
            format!("{title} ({} of {n})", out.len() + 1)
        } else {
            title.to_string()
        };
        out.push(Panel {
            title,
            series: chunk,
        });
    }
    out
}

/// A row's value, or a break in the line where the tenant issued nothing.
fn or_gap(r: &IntervalRow, v: f64) -> f64 {
    if r.requests > 0 {
        v
    } else {
        f64::NAN
    }
}

pub(super) fn plots(dir: &Path, out: &RunOutput) -> Result<(), SimError> {
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
    let series = |f: &dyn Fn(&Point) -> f64| -> Vec<Series> {
        out.order
            .iter()
            .enumerate()
            .map(|(k, name)| {
                Series::solid(
                    name.clone(),
                    per.range((k, 0)..(k + 1, 0))
                        .map(|(_, v)| (v.0, if v.2 > 0 { f(v) } else { f64::NAN }))
                        .collect(),
                )
            })
            .collect()
    };
    let latency = series(&|v| v.1 / v.2 as f64);
    if latency.len() <= MAX_SERIES {
        line_chart(
            &dir.join("latency.png"),
            "Mean latency per scheme",
            "simulated seconds",
            "mean latency (ms)",
            &latency,
        )?;
    } else {
        panels(
            &dir.join("latency.png"),
            "Mean latency per scheme",
            "simulated seconds",
            "mean latency (ms)",
            &chunked("schemes", latency),
        )?;
    }
    let mut hits = chunked("level 1", series(&|v| v.3 / v.2 as f64));
    hits.extend(chunked("level 2", series(&|v| v.4 / v.2 as f64)));
    panels(
        &dir.join("hit_ratio.png"),
        "Hit ratio per level and scheme",
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
    let rows_of = |scheme: &str, t: &str| -> Vec<&IntervalRow> {
        out.rows
            .iter()
            .filter(|r| r.scheme == scheme && r.tenant == t)
            .collect()
    };
    let ran = |s: &str| s != focus && out.order.iter().any(|x| x == s);
    let mut alloc = Vec::new();
    let mut lat = Vec::new();
    for t in &tenants {
        let mine = rows_of(&focus, t);
        let mut a = vec![
            Series::solid(
                format!("L1 ({focus})"),
                mine.iter().map(|r| (r.time_s, r.l1_size as f64)).collect(),
            ),
            Series::solid(
                format!("L2 ({focus})"),
                mine.iter().map(|r| (r.time_s, r.l2_size as f64)).collect(),
            ),
        ];
        if ran("fair") {
            let fair = rows_of("fair", t);
            a.push(Series::dashed(
                "L1 fair share",
                fair.iter().map(|r| (r.time_s, r.l1_size as f64)).collect(),
            ));
            a.push(Series::dashed(
                "L2 fair share",
                fair.iter().map(|r| (r.time_s, r.l2_size as f64)).collect(),
            ));
        }
        alloc.push(Panel {
            title: t.clone(),
            series: a,
        });
        let mut l = vec![Series::solid(
            focus.clone(),
            mine.iter()
                .map(|r| (r.time_s, or_gap(r, r.mean_latency_ms)))
                .collect(),
        )];
        for other in ["fair", "uncontrolled"] {
            if ran(other) {
                l.push(Series::solid(
                    other,
                    rows_of(other, t)
                        .iter()
                        .map(|r| (r.time_s, or_gap(r, r.mean_latency_ms)))
                        .collect(),
                ));
            }
        }
        let targets: Vec<(f64, f64)> = mine
            .iter()
            .map(|r| (r.time_s, r.target_ms.map_or(f64::NAN, |x| or_gap(r, x))))
            .collect();
        if targets.iter().any(|p| p.1.is_finite()) {
            l.push(Series::dashed("SLO target", targets));
        }
        lat.push(Panel {
            title: t.clone(),
            series: l,
        });
    }
    panels(
        &dir.join("allocation.png"),
        &format!("Allocation per tenant under {focus}"),
        "simulated seconds",
        "blocks",
        &alloc,
    )?;
    panels(
        &dir.join("tenant_latency.png"),
        &format!("Latency per tenant under {focus}, fair share and one shared cache"),
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
            .map(|(k, name)| {
                Series::solid(
                    name.clone(),
                    m.range((k, 0)..(k + 1, 0)).map(|(_, v)| *v).collect(),
                )
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    if !dev.is_empty() {
        panels(
            &dir.join("deviance.png"),
            "Deviance from targets: sum of squared dft per interval",
            "simulated seconds",
            "sum of dft^2",
            &chunked("schemes", by_scheme(&dev)),
        )?;
    }
    if mig.values().any(|v| v.1 > 0.0) {
        panels(
            &dir.join("migrations.png"),
            "Hot-tier placements (chunks) per interval",
            "simulated seconds",
            "migrations",
            &chunked("schemes", by_scheme(&mig)),
        )?;
    }
    Ok(())
}
