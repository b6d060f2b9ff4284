//! # control
//!
//! The enforcement step of Lachesis: one interval's observations in, a plan and the reason
//! for every number out. Pure: no I/O, threads or clocks; the state carried between
//! intervals ([`ControlState`]) is plain serialisable data keyed by tenant and node name,
//! so a controller can be persisted and resumed, also into a topology that gained, lost or
//! reordered tenants and nodes. The hierarchy simulator (`sim`) calls [`Controller::step`] every
//! simulated interval.
//!
//! The pipeline of one step ([`Controller::step`]), each stage configured by the
//! [`Scheme`]:
//! 1. observed service times, idleness and MLMS samples update the state;
//! 2. each tenant's latency model ([`model`]) from its curve (of the policy it runs) and
//!    service times; its latency target from its SLO ([`model::latency_target`]);
//! 3. the do-no-harm guard ([`guard`], ours only): each tenant with a degradation, mean or tail
//!    latency SLO is held at its fair share (sizes and policy) until its latency there is
//!    measured and its curve has earned trust, and every tenant on its nodes goes back to
//!    fair share when a move is measured to hurt it;
//! 4. space ([`allocate`]): fair share, shared or alone baselines, MLMS, Moirai, or ours;
//!    idle tenants shrink to a floor and get space back when they return; with
//!    [`Hysteresis::hold_floors`], ours keeps floors ([`allocate::Floor`]): a tenant whose
//!    curve's footprint is still growing and below the space it holds keeps that space,
//!    and one whose writes wait for write-back keeps its level 2;
//! 5. hysteresis ([`hysteresis`]): move only for a real predicted gain or an SLO at risk,
//!    and at most a share of each node per interval; a node whose capacity or tenants
//!    changed since the previous plan is planned afresh at once; shrinks that evict dirty
//!    blocks are paced so their write-backs fit [`Hysteresis::write_back_share`] of each
//!    server's disk time per interval (a shrink's write-backs queue ahead of every
//!    tenant on that disk);
//! 6. eviction policy per partition by SOPA over the candidates' curves
//!    ([`policy_choice`]);
//! 7. bandwidth proportions by coordinated learning automata ([`bandwidth`]);
//! 8. hot-tier thresholds by SANCACHE's rule (`lachesis_alloc::boost`);
//! 9. SLOs predicted unmet are reported with each tenant's shortfall.
//!
//! Owns: decisions. Does not own: sockets, clocks, storage, or how observations are made.

pub mod allocate;
pub mod bandwidth;
mod controller;
pub mod guard;
pub mod hysteresis;
pub mod model;
pub mod observe;
pub mod plan;
pub mod policy_choice;
pub mod scheme;
pub mod topology;

pub use controller::{
    footprint, ControlState, Controller, NodeState, TenantState, STATE_VERSION, WARMING_INTERVALS,
};
pub use model::WriteMix;
pub use observe::{
    LevelCount, Observations, ObservedService, PolicyCurve, Quantiles, ServerObservation,
    TenantObservation, TierObservation,
};
pub use plan::{
    BoostPlan, ConsolidatedPlan, Layout, Partition, Plan, Reason, ResourceShares, ScaleOutPlan,
    Shortfall, TenantPlan,
};
pub use scheme::{Allocation, Automata, Hysteresis, PolicyChoice, Scheme, SCHEME_NAMES};
pub use topology::{Class, Levels, Node, Placement, ServiceTimes, Slo, SloError, Tenant, Topology};

/// Errors of the enforcement step; each names what was wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ControlError {
    /// The topology is inconsistent.
    #[error("{what}: {reason}")]
    Topology {
        /// The tenant, node or field.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// No scheme has this name.
    #[error("unknown scheme `{name}` (known: {known})")]
    UnknownScheme {
        /// The name given.
        name: String,
        /// The names that are known.
        known: String,
    },
    /// The observations do not fit the topology.
    #[error("observations: {0}")]
    Observations(String),
}

/// The step's phases timed, logged at debug level under the target `control::timing`
/// (`RUST_LOG=control::timing=debug`): where a step's time goes at scale.
pub(crate) struct Phases {
    last: std::time::Instant,
}

impl Phases {
    pub(crate) fn start() -> Phases {
        Phases {
            last: std::time::Instant::now(),
        }
    }

    pub(crate) fn mark(&mut self, phase: &str) {
        let now = std::time::Instant::now();
        tracing::debug!(
            target: "control::timing",
            phase,
            seconds = (now - self.last).as_secs_f64()
        );
        self.last = now;
    }
}
