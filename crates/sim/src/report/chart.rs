//! Line charts as PNG files, drawn with `plotters`, made to be read at a glance:
//! * a line breaks where a series has no point (a tenant idle for a while): nothing is
//!   interpolated across an idle window (a point with a `NaN` y is such a break);
//! * the y axis ends at a robust top — 1.5 times the 95th percentile of the values when
//!   the largest is more than three times that — so one outlier interval does not
//!   flatten every other line; the points above the axis are drawn as triangles on its
//!   top edge and the caption says how many there are;
//! * dashed lines for targets and references, solid ones for what was measured; the
//!   first series (the one the chart is about) drawn on top and widest, so a series equal
//!   to it still shows; at most [`MAX_SERIES`] series in one chart or panel (the callers
//!   split into panels, [`panels`]);
//! * the axes have titles, and the x axis ends at the last point, labelled there.

use crate::SimError;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// The most series one chart or panel holds; beyond it lines cannot be told apart.
pub const MAX_SERIES: usize = 6;

/// One named line of a chart.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// `(x, y)` points in increasing x; a `NaN` y breaks the line there.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (targets, references) rather than solid (what was measured).
    pub dashed: bool,
    /// Its colour's index in the palette (`None`: its position in the chart), so a
    /// scheme split over panels keeps one colour.
    pub color: Option<usize>,
}

impl Series {
    /// A solid series.
    pub fn solid(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            points,
            dashed: false,
            color: None,
        }
    }

    /// A dashed series.
    pub fn dashed(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            points,
            dashed: true,
            color: None,
        }
    }
}

/// One panel of a figure: a title and its series.
pub struct Panel {
    /// Its title.
    pub title: String,
    /// Its series (at most [`MAX_SERIES`] are drawn).
    pub series: Vec<Series>,
}

fn out_err(path: &Path, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SimError {
    SimError::Output {
        path: path.display().to_string(),
        error: e.into(),
    }
}

/// Draws `series` on one chart (y from 0 to a robust top) and writes a PNG.
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
        draw_panel(&root, title, x_label, y_label, series, cap)?;
        root.present()?;
        Ok(())
    };
    // The drawing backend's errors are not `Send`: their message is the source.
    draw().map_err(|e| out_err(path, e.to_string()))
}

/// Draws `panels` as a grid of charts (two columns) in one PNG, each with the same axis
/// titles; `title` heads the figure.
pub fn panels(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    panels: &[Panel],
) -> Result<(), SimError> {
    if panels.is_empty() {
        return Ok(());
    }
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let cols = if panels.len() == 1 { 1 } else { 2 };
        let rows = panels.len().div_ceil(cols);
        let (w, h) = (1000u32, (60 + 420 * rows) as u32);
        let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        let (head, body) = root.split_vertically(60);
        head.titled(title, ("sans-serif", 26))?;
        let areas = body.split_evenly((rows, cols));
        for (area, p) in areas.iter().zip(panels) {
            draw_panel(area, &p.title, x_label, y_label, &p.series, None)?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| out_err(path, e.to_string()))
}

/// The y axis's top for `values`: their largest, or 1.5 times their 95th percentile when
/// the largest is more than three times that (an outlier would flatten the rest).
pub fn robust_top(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 1.0;
    }
    v.sort_by(f64::total_cmp);
    let max = *v.last().expect("not empty");
    let p95 = v[((v.len() - 1) as f64 * 0.95).round() as usize];
    if p95 > 0.0 && max > 3.0 * p95 {
        1.5 * p95
    } else {
        max
    }
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    cap: Option<f64>,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let series = &series[..series.len().min(MAX_SERIES)];
    let pts = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| p.1.is_finite())
    };
    let x_max = pts().map(|p| p.0).fold(1e-9f64, f64::max);
    let ys: Vec<f64> = pts().map(|p| p.1).collect();
    let top = robust_top(&ys).max(1e-9);
    let y_max = cap.map_or(top, |c| top.min(c)) * 1.06;
    let above = ys.iter().filter(|&&y| y > y_max).count();
    let caption = if above > 0 {
        format!("{title} ({above} points above the axis, shown on its top edge)")
    } else {
        title.to_string()
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
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
    // The first series is drawn last, on top, and widest: it is the one a chart is about,
    // and a series equal to it still shows beside it.
    for (i, s) in series.iter().enumerate().rev() {
        let color = Palette99::pick(s.color.unwrap_or(i)).to_rgba();
        let width = if i == 0 { 3 } else { 2 };
        let style = color.stroke_width(width);
        // Each run of points without a break is its own line.
        let runs: Vec<Vec<(f64, f64)>> = s
            .points
            .split(|p| !p.1.is_finite())
            .filter(|r| !r.is_empty())
            .map(|r| r.iter().map(|&(x, y)| (x, y.min(y_max))).collect())
            .collect();
        let mut first = true;
        for run in runs {
            let anno = if s.dashed {
                chart.draw_series(DashedLineSeries::new(run, 8, 5, style))?
            } else {
                chart.draw_series(LineSeries::new(run, style))?
            };
            if first {
                let dashed = s.dashed;
                anno.label(s.label.clone()).legend(move |(x, y)| {
                    if dashed {
                        PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(2))
                    } else {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    }
                });
                first = false;
            }
        }
        let clipped: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| p.1.is_finite() && p.1 > y_max)
            .map(|&(x, _)| (x, y_max))
            .collect();
        chart.draw_series(
            clipped
                .into_iter()
                .map(|p| TriangleMarker::new(p, 6, color.filled())),
        )?;
    }
    if series.iter().any(|s| !s.points.is_empty()) {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_outlier_does_not_set_the_axis() {
        let mut v: Vec<f64> = (0..100).map(|k| 1.0 + (k % 10) as f64 * 0.1).collect();
        assert!(
            (robust_top(&v) - 1.9).abs() < 1e-9,
            "no outlier: the largest"
        );
        v.push(500.0);
        let t = robust_top(&v);
        assert!(t < 3.0 && t > 1.5, "{t}");
        assert_eq!(robust_top(&[]), 1.0);
        assert_eq!(robust_top(&[f64::NAN, 2.0]), 2.0);
    }

    #[test]
    fn panels_with_gaps_and_outliers_are_drawn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.png");
        let pts: Vec<(f64, f64)> = (0..20)
            .map(|k| {
                let y = match k {
                    5..=8 => f64::NAN,
                    12 => 1000.0,
                    _ => 1.0 + k as f64 * 0.1,
                };
                (k as f64, y)
            })
            .collect();
        let p = |t: &str| Panel {
            title: t.into(),
            series: vec![
                Series::solid("measured", pts.clone()),
                Series::dashed("target", pts.iter().map(|&(x, _)| (x, 2.0)).collect()),
            ],
        };
        panels(&path, "figure", "s", "ms", &[p("a"), p("b"), p("c")]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }
}
