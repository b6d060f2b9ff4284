//! Every scheme of a scenario, run in parallel, then judged side by side.
//!
//! Each scheme is an independent [`Engine`](crate::engine::Engine) (the `independent`
//! baseline is one engine per tenant, each alone on the whole system). Every scheme
//! replays the same requests, so the intervals line up, and the `fair` scheme is always
//! run: it is the base of fair speedup and of degradation SLOs.
//!
//! After the runs, over the counted intervals (those after the warm-up share of the run
//! that served the tenant: a closed-loop tenant alone is served faster and its stream ends
//! sooner, so its `independent` run is shorter than the shared ones):
//! * a tenant's interval meets its SLO when its mean latency is within the target (or
//!   within `1 + degradation` of the fair scheme's mean latency in the same interval), or
//!   its IOPS / bandwidth reaches the target; `slo_met_share` is the share of its counted
//!   intervals with requests that met it (`null`, and the tenant *unjudged*, when none
//!   was counted: never reported as met). Intervals whose plan called the tenant's SLO
//!   infeasible are counted like any other, and their number is shown beside;
//! * `slo_violations` counts the tenants with an SLO that met it in fewer than
//!   [`SLO_COMPLIANCE`] of their counted intervals, or were never judged;
//! * `fair_speedup` is `T / Σ mean_latency(scheme) / mean_latency(fair)` over the tenants.
//!
//! Its parts: `jobs` (the engines on worker threads, merged per scheme), `summary` (the
//! summary types and figures), `judge` (SLOs judged per interval). This module owns the
//! options, the order of the steps and the claims' check.

mod jobs;
mod judge;
mod summary;

pub use crate::stats::deviance;
pub use summary::{SchemeSummary, Summary, TenantSummary};

use crate::scenario::Scenario;
use crate::stats::IntervalRow;
use crate::SimError;
use control::Scheme;

/// Share of its counted intervals a tenant must meet its SLO in for the scheme not to
/// count it as a violation.
pub const SLO_COMPLIANCE: f64 = 0.95;

/// How to run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Schemes to run (default: the scenario's).
    pub schemes: Option<Vec<String>>,
    /// Worker threads (0: one per core).
    pub threads: usize,
}

/// Everything a run produced.
pub struct RunOutput {
    /// The summary.
    pub summary: Summary,
    /// Every tenant's row per interval per scheme.
    pub rows: Vec<IntervalRow>,
    /// Schemes in the order they were asked for (plus `fair` if it was not).
    pub order: Vec<String>,
}

/// Runs the scenario's schemes; `progress(job, label, fraction)` is called from worker
/// threads as jobs advance.
pub fn run(
    sc: &Scenario,
    opts: &RunOptions,
    progress: &(dyn Fn(usize, &str, f64) + Sync),
) -> Result<RunOutput, SimError> {
    let mut order: Vec<String> = opts.schemes.clone().unwrap_or_else(|| sc.schemes.clone());
    if !order.iter().any(|s| s == "fair") {
        order.push("fair".into());
    }
    let resolved: Vec<(Scenario, Scheme)> = order
        .iter()
        .map(|n| sc.resolve(n))
        .collect::<Result<_, _>>()?;
    let mut runs = jobs::execute(sc, &order, &resolved, opts.threads, progress)?;
    let fair_k = order
        .iter()
        .position(|s| s == "fair")
        .expect("fair is always run");
    let mut schemes = summary::summarize(sc, &order, &runs, fair_k);
    let all_rows = judge::judge_slos(sc, &order, &mut runs, fair_k, &mut schemes);
    let fair = &runs[fair_k];
    let mut out = RunOutput {
        summary: Summary {
            scenario: sc.name.clone(),
            requests: fair.requests,
            seconds: fair.seconds,
            quick: sc.is_quick,
            schemes,
            claims: Vec::new(),
        },
        rows: all_rows,
        order,
    };
    check_claims(sc, &mut out)?;
    Ok(out)
}

/// Checks the scenario's claims against the run's summary and stores them in it; an
/// error names the scenario file's claim and rule.
pub fn check_claims(sc: &Scenario, out: &mut RunOutput) -> Result<(), SimError> {
    if sc.claims.is_empty() {
        return Ok(());
    }
    let value = serde_json::to_value(&out.summary).map_err(SimError::Summary)?;
    let tenants: Vec<String> = sc.tenants.iter().map(|t| t.name.clone()).collect();
    out.summary.claims =
        crate::claims::check(&sc.claims, &value, &tenants).map_err(|error| SimError::Claim {
            file: format!("{}.toml", sc.name),
            error,
        })?;
    Ok(())
}
