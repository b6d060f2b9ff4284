//! # sim
//!
//! A discrete-event simulator of the Lachesis hierarchy: level-1 hosts and level-2 storage
//! servers with per-tenant partitions, devices with queues (RAM, network, SSD, HDD), a
//! hot-chunk tier, tenants replayed from traces or synthetic workloads, and the `control`
//! step called every enforcement interval — the same step the live controller runs.
//!
//! * [`scenario`] — the TOML scenario file, resolved and checked;
//! * [`device`], [`queue`] — service times and contention (a FIFO queue's busy periods in
//!   the private `calendar` module);
//! * [`engine`] — one scheme's run;
//! * [`stats`] — what is counted per tenant per interval, and the rows a run reports;
//! * [`run`](mod@run) — every scheme of a scenario in parallel, SLOs judged after the fact,
//!   the summary;
//! * [`report`] — `intervals.csv`, `summary.json` and PNG plots;
//! * [`claims`] — the scenario's claims (rules over the results), checked after a run;
//! * [`spread`] — one scenario at several seeds: median and range, claims held per seed.
//!
//! Owns: simulated time and devices. Does not own: decisions (`control`), eviction
//! (`policy`), curves (`mrc`). Deterministic for a seed: every random choice comes from a
//! generator seeded by the scenario, and schemes do not share state.

mod calendar;
pub mod claims;
pub mod device;
pub mod engine;
pub mod queue;
pub mod report;
pub mod run;
pub mod scenario;
pub mod spread;
pub mod stats;

pub use run::{check_claims, run, RunOptions, RunOutput, SchemeSummary, Summary, TenantSummary};
pub use scenario::Scenario;

/// Errors of the simulator; each names the file, key, tenant or scheme. An error from
/// another crate is kept as it is (`error`, typed) and is part of the message, not a
/// `source()`, so a report printing the error chain shows it once (as `trace::TraceError`
/// does with I/O errors).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario file is wrong.
    #[error("{file}: {key}: {reason}")]
    Scenario {
        /// The file.
        file: String,
        /// The key (or line).
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The scenario file could not be read.
    #[error("{file}: {error}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        error: std::io::Error,
    },
    /// A tenant's requests could not be read.
    #[error("tenant `{tenant}`: {error}")]
    Trace {
        /// The tenant.
        tenant: String,
        /// What went wrong (names the file and line).
        error: trace::TraceError,
    },
    /// A plan could not be applied: a policy or admission rule the cache does not build.
    #[error("plan: {0}")]
    Policy(policy::PolicyError),
    /// A plan's hot-tier threshold gave an admission rule the cache does not build.
    #[error("plan: hot tier `{spec}`: {error}")]
    HotTier {
        /// The admission spec.
        spec: String,
        /// Why.
        error: policy::PolicyError,
    },
    /// A candidate policy's phantom caches could not be built.
    #[error("plan: {0}")]
    Profiler(mrc::MrcError),
    /// The controller refused the topology, the scheme or a step.
    #[error("plan: {0}")]
    Control(control::ControlError),
    /// The summary could not be turned into JSON for the claims.
    #[error("summary: {0}")]
    Summary(serde_json::Error),
    /// A claim's rule could not be parsed or evaluated.
    #[error("{file}: claim: {error}")]
    Claim {
        /// The scenario file.
        file: String,
        /// Which claim and why.
        error: claims::RuleError,
    },
    /// Writing results failed.
    #[error("{path}: {error}")]
    Output {
        /// The file.
        path: String,
        /// What went wrong.
        error: Box<dyn std::error::Error + Send + Sync>,
    },
}
