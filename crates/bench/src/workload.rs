//! Benchmark traces: generated once from a synthetic workload spec into the bench
//! directory (oracleGeneral), then reused by later runs.

use crate::error::{Context, Result};
use std::path::Path;

/// Generates `path` from the workload `spec` unless it exists (a line on stderr says so).
pub fn ensure_trace(path: &Path, spec: &str) -> Result<()> {
    if !path.exists() {
        eprintln!("generating {} ({spec})", path.display());
        write_synthetic(spec, path)?;
    }
    Ok(())
}

/// Writes the synthetic workload `spec` to `path` in oracleGeneral format.
pub fn write_synthetic(spec: &str, path: &Path) -> Result<()> {
    let w = trace::synth::parse(spec).with_context(|| format!("synthetic workload `{spec}`"))?;
    trace::oracle::write(path, w.iter())?;
    Ok(())
}
