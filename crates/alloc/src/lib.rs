//! # lachesis-alloc
//!
//! Allocation and control algorithms of Lachesis: pure functions from hit-ratio curves,
//! latency models and objectives to allocations. No I/O, no clocks, no threads.
//!
//! The package is named `lachesis-alloc` and the library `lachesis_alloc`, because a crate
//! called `alloc` would collide with Rust's built-in `alloc` crate; its directory is
//! `crates/alloc`.
//!
//! Modules, one per algorithm:
//! * [`fair`] — fair share and priority partitions;
//! * [`slo`] — SLO minimums from bandwidth / IOPS / latency targets (Moirai §3.2);
//! * [`utility`] — water-filling (Moirai Algorithm 3.1), exact DP, and the fast
//!   concave-hull greedy with a Talus / rounding fix-up;
//! * [`scaleout`] — one tenant over a host and a storage cache as one LRU (Moirai §3.5);
//! * [`mlms`] — multi-level, multi-server allocation (Prabhakar et al., ICS'10) and the
//!   level-2 server LP;
//! * [`automata`] — linear reward-penalty learning automata coordinated by a token;
//! * [`sopa`] — SOPA's policy decision by replaying a window through candidates;
//! * [`boost`] — SANCACHE's adaptive boosting threshold as a step function;
//! * [`synthetic`] — seeded synthetic hit-ratio curves, shared by this crate's tests and
//!   the `bench` crate's allocation benchmark.
//!
//! The entry point for the command line is [`allocate`]: tenants with curves, weights,
//! optional SLOs, minimums, maximums and priority sizes, one capacity and step, and an
//! [`Objective`]. Bad curves are not repaired silently: a curve whose miss ratio rises
//! with size is an error naming the tenant unless the input asks for `repair_curves`,
//! in which case the curve is replaced by its monotone envelope (running minimum of the
//! miss ratio — what a larger cache could always achieve by using only part of itself).

pub mod automata;
pub mod boost;
mod entry;
pub mod fair;
mod gain;
pub mod mlms;
mod report;
pub mod scaleout;
pub mod slo;
pub mod sopa;
pub mod synthetic;
pub mod utility;

pub use entry::{allocate, footprint, monotone_envelope};

use mrc::HitRatioCurve;
use serde::{Deserialize, Serialize};

/// Errors of the allocators; each names what was wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AllocError {
    /// The capacity is zero.
    #[error("capacity is zero: nothing to allocate")]
    ZeroCapacity,
    /// The step (epsilon) is zero.
    #[error("step is zero: the allocation step must be at least one block")]
    ZeroStep,
    /// The step is larger than the capacity: not one step fits.
    #[error(
        "step is {step} blocks, larger than the capacity of {capacity} blocks: not one step fits"
    )]
    StepAboveCapacity {
        /// The step in blocks.
        step: u64,
        /// The capacity in blocks.
        capacity: u64,
    },
    /// Two tenants share a name.
    #[error("tenant `{0}` appears twice")]
    DuplicateTenant(String),
    /// A curve's miss ratio rises with size.
    #[error("tenant `{tenant}`: the curve's miss ratio rises at {size} blocks (not monotone); set repair_curves to use its monotone envelope")]
    NonMonotoneCurve {
        /// The tenant.
        tenant: String,
        /// The first size where it rises.
        size: u64,
    },
    /// A weight that is negative or not finite.
    #[error("tenant `{tenant}`: weight {weight} must be finite and >= 0")]
    BadWeight {
        /// The tenant.
        tenant: String,
        /// The weight.
        weight: f64,
    },
    /// A minimum above the maximum.
    #[error("tenant `{tenant}`: min is above max")]
    MinAboveMax {
        /// The tenant.
        tenant: String,
    },
    /// Explicit minimums do not fit.
    #[error("minimums need {need} blocks but only {capacity} are available")]
    MinimumsExceedCapacity {
        /// Blocks the minimums need.
        need: u64,
        /// Blocks available.
        capacity: u64,
    },
    /// Priority partitions do not fit.
    #[error("priority partitions need {need} blocks but the capacity is {capacity}")]
    PriorityExceedsCapacity {
        /// Blocks the priority partitions need.
        need: u64,
        /// The capacity.
        capacity: u64,
    },
    /// An SLO's numbers make no sense.
    #[error("tenant `{tenant}`: bad SLO: {reason}")]
    BadSlo {
        /// The tenant.
        tenant: String,
        /// What is wrong.
        reason: slo::SloError,
    },
    /// A tenant is connected to no level-2 server.
    #[error("tenant `{0}` is connected to no storage server")]
    NoConnectedServer(String),
    /// Some input is missing or malformed.
    #[error("bad input: {0}")]
    BadInput(String),
    /// The linear program could not be solved.
    #[error("linear program: {0}")]
    Lp(String),
    /// A policy spec was rejected (SOPA).
    #[error("policy: {0}")]
    Policy(String),
}

/// What an SLO constrains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SloKind {
    /// Throughput in bytes per second (at least `target`).
    Bandwidth,
    /// Operations per second (at least `target`).
    Iops,
    /// Mean latency (at most `target`).
    Latency,
}

/// A tenant's service-level objective with the device figures that turn it into a hit
/// ratio (see [`slo`]): `cache` and `storage` are the metric when every request hits,
/// respectively misses (same unit as `target`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Bandwidth, IOPS or latency.
    pub kind: SloKind,
    /// The target.
    pub target: f64,
    /// The metric when served from the cache.
    pub cache: f64,
    /// The metric when served from storage.
    pub storage: f64,
}

/// One tenant's line of an SLO file (TOML `[[tenants]]`), without its curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantSpec {
    /// The tenant's name.
    pub name: String,
    /// Its weight (default 1): what a unit of its hit ratio is worth.
    #[serde(default = "one")]
    pub weight: f64,
    /// Its SLO, if any.
    #[serde(default)]
    pub slo: Option<Slo>,
    /// Blocks it must get at least.
    #[serde(default)]
    pub min: Option<u64>,
    /// Blocks it may get at most.
    #[serde(default)]
    pub max: Option<u64>,
    /// A dedicated partition of this many blocks, taken off the top.
    #[serde(default)]
    pub priority: Option<u64>,
}

fn one() -> f64 {
    1.0
}
fn one_u64() -> u64 {
    1
}

/// An SLO file: the tenants' specs and optional defaults for the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SloFile {
    /// Capacity in blocks, if the file sets it.
    #[serde(default)]
    pub capacity: Option<u64>,
    /// Step in blocks, if the file sets it.
    #[serde(default)]
    pub step: Option<u64>,
    /// Objective, if the file sets it.
    #[serde(default)]
    pub objective: Option<Objective>,
    /// MLMS settings, if any.
    #[serde(default)]
    pub mlms: Option<mlms::MlmsConfig>,
    /// The tenants.
    #[serde(default)]
    pub tenants: Vec<TenantSpec>,
}

/// A tenant to allocate: its spec and its curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantInput {
    /// Name, weight, SLO, bounds, priority.
    #[serde(flatten)]
    pub spec: TenantSpec,
    /// Its hit-ratio curve (sizes in blocks).
    pub curve: HitRatioCurve,
}

/// What to optimise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// Weighted fair share within min/max.
    Fair,
    /// Maximise the weighted sum of hit ratios (fast method).
    Utility,
    /// SLO minimums first, then utility for the rest.
    Slo,
    /// MLMS over two levels, predicting latency from the curves.
    Mlms,
}

/// Input of [`allocate`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocInput {
    /// The tenants.
    pub tenants: Vec<TenantInput>,
    /// Capacity in blocks (level 1 for MLMS).
    pub capacity: u64,
    /// Step (epsilon) in blocks.
    #[serde(default = "one_u64")]
    pub step: u64,
    /// What to optimise.
    pub objective: Objective,
    /// Replace non-monotone curves by their monotone envelope instead of failing.
    #[serde(default)]
    pub repair_curves: bool,
    /// MLMS settings (required for [`Objective::Mlms`]).
    #[serde(default)]
    pub mlms: Option<mlms::MlmsConfig>,
}

/// One tenant's row of the result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantAllocation {
    /// The tenant's name.
    pub tenant: String,
    /// Blocks allocated (level 1 for MLMS).
    pub size: u64,
    /// Hit ratio the curve predicts at that size (both levels for MLMS).
    pub predicted_hit_ratio: f64,
    /// Predicted mean latency, when the input gives latency figures.
    pub predicted_latency: Option<f64>,
    /// Whether the SLO is met at the predicted hit ratio; `None` without an SLO.
    pub slo_met: Option<bool>,
    /// Why the tenant got what it got, when that needs saying.
    pub reason: Option<String>,
    /// MLMS only: level-2 blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level2_size: Option<u64>,
}

/// Output of [`allocate`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocOutput {
    /// The objective used.
    pub objective: Objective,
    /// The capacity in blocks.
    pub capacity: u64,
    /// Seconds the allocation took; `None` here (no clocks in alloc): the caller times it.
    pub seconds: Option<f64>,
    /// One row per tenant, in input order.
    pub tenants: Vec<TenantAllocation>,
}
