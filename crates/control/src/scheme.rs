//! Schemes: the objective pipeline configured by name.
//!
//! A scheme says how space is allocated ([`Allocation`]), whether eviction policies are
//! chosen online (SOPA), whether bandwidth proportions are learned (coordinated automata),
//! whether hot tiers are tuned (SANCACHE), and how much a plan may move per interval
//! (hysteresis) and what idle tenants keep. [`Scheme::named`] gives the baselines of the
//! papers and our combined scheme:
//!
//! | name | allocation | extras |
//! |---|---|---|
//! | `independent` | each tenant alone on the whole system | — |
//! | `uncontrolled` | one shared cache per node | — |
//! | `fair` | equal shares per node | — |
//! | `first-only` | MLMS on level 1, level 2 fair | — |
//! | `second-only` | MLMS on level 2, level 1 fair | — |
//! | `mlms` | MLMS on both levels, regression model | — |
//! | `moirai-utility` | hits maximised per node (hull optimiser) | idle reclamation |
//! | `moirai-slo` | SLO minimums on level 1, then utility | idle reclamation |
//! | `lachesis` | do-no-harm floors, SLO minimums on both levels, then fair speedup by the hull optimiser | SOPA, boosting, hysteresis, idle |

use crate::ControlError;
use lachesis_alloc::sopa::Costs;
use serde::{Deserialize, Serialize};

/// Which latency model MLMS plans with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MlmsModel {
    /// The paper's regression over (level-1 size, level-2 size), refitted every interval
    /// from the observed latencies; the curve model stands in until three distinct
    /// allocations have been seen, and whenever the fit says more space costs latency or
    /// misses its own samples by more than 25 % on average.
    Regression,
    /// Predicted from the hit-ratio curve and the observed service times.
    Curve,
}

/// Which levels MLMS controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MlmsLevels {
    /// Both.
    Both,
    /// Level 1 only; level 2 at fair share.
    First,
    /// Level 2 only; level 1 at fair share.
    Second,
}

/// How space is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum Allocation {
    /// Each tenant alone on the whole system.
    Alone,
    /// One cache per node shared by its tenants.
    Shared,
    /// Equal shares.
    Fair,
    /// MLMS (Prabhakar et al.).
    Mlms {
        /// Levels controlled.
        levels: MlmsLevels,
        /// Latency model.
        model: MlmsModel,
    },
    /// Moirai: per node, maximise hits (weights = request rates), optionally after SLO
    /// minimums on level 1.
    Moirai {
        /// Reserve SLO minimums first.
        slo_minimums: bool,
    },
    /// Ours: SLO minimums on both levels from the two-level curve model, admitted by class,
    /// then spare space by the concave-hull optimiser for fair speedup.
    Lachesis,
}

/// SOPA's online policy choice (rules in [`crate::policy_choice`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyChoice {
    /// Candidate policies (canonical names); curves for them must be observed.
    pub candidates: Vec<String>,
    /// Cost of a hit.
    pub hit_cost: f64,
    /// Cost of a miss placed in the cache.
    pub migration_cost: f64,
    /// Cost of a miss served from storage without placement (SOPA's third term).
    #[serde(default = "default_direct_cost")]
    pub direct_cost: f64,
    /// Absolute drop of an interval's live hit ratio below the previous round's that
    /// starts a new decision.
    pub retrigger_drop: f64,
    /// Requests per decision round (the paper's 1 M, scaled; see
    /// [`DEFAULT_ROUND_REQUESTS`]).
    #[serde(default = "default_round_requests")]
    pub round_requests: u64,
    /// Most candidates kept: beyond it, the one with the lowest usage ratio is dropped
    /// (never below two).
    #[serde(default = "default_max_candidates")]
    pub max_candidates: usize,
    /// Candidates whose observed curves are already windowed (the SHARDS profiler's
    /// `lru`); the others' curves are cumulative and are windowed to the round here.
    #[serde(default = "default_windowed")]
    pub windowed: Vec<String>,
}

/// Requests per SOPA decision round by default: the paper collects 1 M block requests per
/// round on traces of 1.1 M to 43 M references; our experiments run 1-2 M requests in
/// all, so the round is scaled by 1/10, still several passes over a 40,000-block loop.
pub const DEFAULT_ROUND_REQUESTS: u64 = 100_000;

/// SOPA's nine candidates as published (Sec. 4.1): LRU, ARC, MQ (8 queues, 4c history),
/// 2Q with Kin 0.2c and 0.3c (Kout 0.5c), LIRS with L_hir 0.01c, 0.1c, 0.2c, 0.3c.
pub const SOPA_PAPER_CANDIDATES: &[&str] = &[
    "lru",
    "arc",
    "mq:queues=8,history=4",
    "2q:kin=0.2,kout=0.5",
    "2q:kin=0.3,kout=0.5",
    "lirs:hir=0.01",
    "lirs:hir=0.1",
    "lirs:hir=0.2",
    "lirs:hir=0.3",
];

fn default_direct_cost() -> f64 {
    Costs::default().direct
}
fn default_round_requests() -> u64 {
    DEFAULT_ROUND_REQUESTS
}
fn default_max_candidates() -> usize {
    SOPA_PAPER_CANDIDATES.len()
}
fn default_windowed() -> Vec<String> {
    vec!["lru".into()]
}

impl Default for PolicyChoice {
    fn default() -> Self {
        let c = Costs::default();
        PolicyChoice {
            candidates: vec!["lru".into(), "arc".into(), "lirs".into(), "s3fifo".into()],
            hit_cost: c.hit,
            migration_cost: c.migration,
            direct_cost: c.direct,
            retrigger_drop: 0.1,
            round_requests: DEFAULT_ROUND_REQUESTS,
            max_candidates: default_max_candidates(),
            windowed: default_windowed(),
        }
    }
}

/// Learned bandwidth proportions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Automata {
    /// A token passed between the levels, hosts then storage servers (false: every
    /// controller learns at once).
    pub coordinated: bool,
    /// Units each proportion vector is made of (each tenant gets at least one).
    pub units: u32,
    /// Reward rate.
    pub alpha: f64,
    /// Penalty rate.
    pub beta: f64,
    /// Actions a level takes while it holds the token (after one measuring interval).
    pub turn: u32,
    /// Learn only at the storage servers (a single level of learners); hosts keep the
    /// FIFO scheduler. `false`: every resource with two or more tenants.
    #[serde(default)]
    pub servers_only: bool,
    /// Seed of the learners' random choices (with the interval number).
    #[serde(default)]
    pub seed: u64,
}

impl Default for Automata {
    fn default() -> Self {
        Automata {
            coordinated: true,
            units: 8,
            alpha: 0.2,
            beta: 0.02,
            turn: 10,
            servers_only: false,
            seed: 0,
        }
    }
}

/// Limits on how much a plan moves.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hysteresis {
    /// Relative predicted gain of the objective a move must bring, unless an SLO is at risk.
    pub min_gain: f64,
    /// Share of a node's capacity that may change hands per interval.
    pub max_move: f64,
    /// Keep floors where the allocation honours them (`allocate::Floor`): a warming
    /// tenant (its curve's footprint still growing, below the space it holds) keeps that
    /// space, and a tenant whose writes wait for write-back keeps its level 2.
    #[serde(default = "yes")]
    pub hold_floors: bool,
    /// Share of an interval's disk time on a storage server that the write-backs forced
    /// by one plan's shrinks may take there. A shrink evicts a tenant's least recently
    /// used blocks at once, and those that are dirty (written since they were read) go
    /// to the disk ahead of every request queued behind them; shrinks of tenants that
    /// write are paced to this budget (see `Controller::step`). `0`: no pacing.
    #[serde(default = "write_back_share")]
    pub write_back_share: f64,
}

fn yes() -> bool {
    true
}

fn write_back_share() -> f64 {
    0.1
}

impl Default for Hysteresis {
    fn default() -> Self {
        Hysteresis {
            min_gain: 0.01,
            max_move: 0.25,
            hold_floors: true,
            write_back_share: write_back_share(),
        }
    }
}

/// Idle-tenant reclamation (Moirai).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Idle {
    /// Intervals without a request before a tenant counts as idle.
    pub intervals: u32,
    /// Blocks an idle tenant keeps per partition.
    pub floor: u64,
}

impl Default for Idle {
    fn default() -> Self {
        Idle {
            intervals: 2,
            floor: 0,
        }
    }
}

/// A named control configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scheme {
    /// Its name.
    pub name: String,
    /// How space is allocated.
    pub allocation: Allocation,
    /// SOPA policy choice, if on.
    #[serde(default)]
    pub policy_choice: Option<PolicyChoice>,
    /// Learned bandwidth proportions, if on.
    #[serde(default)]
    pub automata: Option<Automata>,
    /// Tune hot-tier thresholds (SANCACHE), if on.
    #[serde(default)]
    pub boost: bool,
    /// Hysteresis, if on.
    #[serde(default)]
    pub hysteresis: Option<Hysteresis>,
    /// Idle reclamation, if on.
    #[serde(default)]
    pub idle: Option<Idle>,
    /// The do-no-harm guard ([`crate::guard`]): tenants with a degradation SLO keep
    /// their fair share until their curve has earned trust, and go back to it at once
    /// when a smaller size is measured to miss the SLO.
    #[serde(default)]
    pub guard: bool,
}

/// The names [`Scheme::named`] knows, in report order.
pub const SCHEME_NAMES: &[&str] = &[
    "independent",
    "uncontrolled",
    "fair",
    "first-only",
    "second-only",
    "mlms",
    "moirai-utility",
    "moirai-slo",
    "lachesis",
];

impl Scheme {
    fn plain(name: &str, allocation: Allocation) -> Scheme {
        Scheme {
            name: name.into(),
            allocation,
            policy_choice: None,
            automata: None,
            boost: false,
            hysteresis: None,
            idle: None,
            guard: false,
        }
    }

    /// The scheme called `name` (see the module doc).
    pub fn named(name: &str) -> Result<Scheme, ControlError> {
        let mlms = |levels| Allocation::Mlms {
            levels,
            model: MlmsModel::Regression,
        };
        Ok(match name {
            "independent" => Scheme::plain(name, Allocation::Alone),
            "uncontrolled" => Scheme::plain(name, Allocation::Shared),
            "fair" => Scheme::plain(name, Allocation::Fair),
            "first-only" => Scheme::plain(name, mlms(MlmsLevels::First)),
            "second-only" => Scheme::plain(name, mlms(MlmsLevels::Second)),
            "mlms" => Scheme::plain(name, mlms(MlmsLevels::Both)),
            "moirai-utility" | "moirai-slo" => Scheme {
                idle: Some(Idle::default()),
                ..Scheme::plain(
                    name,
                    Allocation::Moirai {
                        slo_minimums: name == "moirai-slo",
                    },
                )
            },
            "lachesis" => Scheme {
                policy_choice: Some(PolicyChoice::default()),
                // Proportions are enforced by time quanta, which lend no idle slice: worth
                // it only where bandwidth targets are the objective (the automata schemes).
                automata: None,
                boost: true,
                hysteresis: Some(Hysteresis::default()),
                idle: Some(Idle::default()),
                guard: true,
                ..Scheme::plain(name, Allocation::Lachesis)
            },
            _ => {
                return Err(ControlError::UnknownScheme {
                    name: name.into(),
                    known: SCHEME_NAMES.join(", "),
                })
            }
        })
    }

    /// Whether the layout is one partition per tenant and node.
    pub fn partitioned(&self) -> bool {
        !matches!(self.allocation, Allocation::Alone | Allocation::Shared)
    }
}
