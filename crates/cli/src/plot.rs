//! PNG line charts for reports (`lachesis mrc --plot`, `lachesis sim --plot`): the
//! simulator's chart (`sim::report::line_chart_capped`) with the y axis capped at 1, since
//! these charts draw ratios.

use std::path::Path;

pub use sim::report::Series;

/// Draws `series` on one chart and writes it to `path` as a PNG.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> anyhow::Result<()> {
    sim::report::line_chart_capped(path, title, x_label, y_label, series, Some(1.0))?;
    Ok(())
}
