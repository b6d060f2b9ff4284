//! What one enforcement step decides, and why: partition sizes per tenant per node and
//! level, eviction and admission per partition, bandwidth proportions per resource, hot-tier
//! thresholds, and the SLOs that cannot be met with each tenant's shortfall.
//!
//! Every size carries a [`Reason`], so the simulator's report and the live controller's
//! console can say why each number is what it is.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a partition has the size it has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reason {
    /// An equal share of the node among its tenants.
    FairShare,
    /// A dedicated partition (priority class).
    Dedicated,
    /// The smallest size that meets the tenant's SLO.
    SloMinimum {
        /// The latency the SLO allows (ms).
        target_ms: f64,
    },
    /// Spare space, given where it gains the most; `per_block` is the objective gained by
    /// the last block given.
    Gain {
        /// Marginal gain of the last block.
        per_block: f64,
    },
    /// Chosen by MLMS (fulfilment set, filter, fair speedup, server LP).
    Mlms,
    /// One of the sampled allocations MLMS enforces to bootstrap its latency model.
    MlmsBootstrap {
        /// Which sample (1, 2, ...).
        sample: u32,
    },
    /// Left as it was: the predicted gain of moving did not pass the threshold.
    Hysteresis {
        /// Predicted relative gain of the move that was not made.
        gain: f64,
    },
    /// Moved towards its target, but no further than the per-interval limit allows.
    MoveLimited {
        /// The size it is heading for.
        target: u64,
    },
    /// Shrinking towards its target no faster than the disks can take the write-backs
    /// of the dirty blocks a shrink evicts (a share of each interval's disk time).
    Draining {
        /// The size it is heading for.
        target: u64,
    },
    /// Kept at what it held: its curve's footprint is still growing and below that space,
    /// so the curve cannot yet tell what the space is worth.
    Warming {
        /// The footprint its curve shows so far (blocks).
        footprint: u64,
    },
    /// Level 2 kept at what it held: it is write-back and absorbs the tenant's level-1
    /// write-backs, and the tenant's writes wait for write-back (they cost more than a
    /// level-2 hit), a buffer its hit-ratio curve does not price.
    WriteBuffer {
        /// The tenant's mean write latency (ms).
        write_ms: f64,
    },
    /// Held at its fair share by the do-no-harm guard ([`crate::guard`]).
    Guarded {
        /// Why, in words: its curve has not earned trust, its latency at fair share is not
        /// yet measured, or a move was measured to hurt it or a neighbour.
        why: String,
    },
    /// No requests for a while: shrunk to its floor until it returns.
    Idle {
        /// Intervals without requests.
        intervals: u32,
    },
    /// One cache shared by every tenant of the node (no partitioning).
    Shared,
    /// Its level 2 on this server is the consolidated cache of the read-only image it
    /// reads (`Plan::consolidated`), shared with the image's other readers: no partition
    /// of its own.
    Consolidated {
        /// The image.
        image: String,
    },
    /// The tenant runs alone on the whole system (a baseline, not a product setting).
    Alone,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::FairShare => write!(f, "fair share"),
            Reason::Dedicated => write!(f, "dedicated"),
            Reason::Guarded { why } => write!(f, "fair share (do no harm): {why}"),
            Reason::SloMinimum { target_ms } => write!(f, "SLO minimum for {target_ms:.3} ms"),
            Reason::Gain { per_block } => write!(f, "gain {per_block:.3e} per block"),
            Reason::Mlms => write!(f, "MLMS"),
            Reason::MlmsBootstrap { sample } => {
                write!(f, "MLMS bootstrap sample {sample} (fitting its model)")
            }
            Reason::Hysteresis { gain } => {
                write!(
                    f,
                    "held: predicted gain {:.2}% below threshold",
                    gain * 100.0
                )
            }
            Reason::MoveLimited { target } => write!(f, "moving towards {target} blocks"),
            Reason::Draining { target } => {
                write!(f, "draining towards {target} blocks (write-backs paced)")
            }
            Reason::Warming { footprint } => {
                write!(
                    f,
                    "held while warming: {footprint} blocks seen reused so far"
                )
            }
            Reason::WriteBuffer { write_ms } => write!(
                f,
                "held: level 2 absorbs its write-backs (writes take {write_ms:.2} ms)"
            ),
            Reason::Idle { intervals } => write!(f, "idle for {intervals} intervals"),
            Reason::Shared => write!(f, "shared cache"),
            Reason::Consolidated { image } => {
                write!(f, "reads image `{image}` through its consolidated cache")
            }
            Reason::Alone => write!(f, "alone on the system"),
        }
    }
}

/// One partition: a tenant's share of one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Partition {
    /// Index of the node (host for level 1, server for level 2).
    pub node: usize,
    /// Blocks.
    pub size: u64,
    /// Why.
    pub reason: Reason,
}

/// A tenant's part of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantPlan {
    /// The tenant's name.
    pub tenant: String,
    /// Its level-1 partition on its host.
    pub l1: Partition,
    /// Its level-2 partitions, one per server it is striped over (topology order).
    pub l2: Vec<Partition>,
    /// Eviction policy of its partitions (canonical name).
    pub eviction: String,
    /// Why that policy.
    pub eviction_reason: String,
    /// Admission policy of its partitions.
    pub admission: String,
    /// The mean latency the controller's model predicts at this allocation (ms).
    pub predicted_latency_ms: f64,
    /// The latency its SLO allows this interval (ms), if it has one.
    pub target_latency_ms: Option<f64>,
    /// Whether the prediction meets the target (`None` without an SLO).
    pub slo_met: Option<bool>,
    /// What the mean latency measured over the interval just observed is held against
    /// (ms): `target_latency_ms` for an absolute SLO (latency, IOPS, bandwidth); for a
    /// degradation SLO `1 + x` times the fair-share latency estimated from that very
    /// measurement — the measured mean scaled by the model's latency at fair share over
    /// its latency at the sizes the tenant held — so a phase of the workload that would
    /// have been as slow under any allocation (a write burst the disks cannot absorb) does
    /// not read as degradation, and one the allocation made slower does. `None` without
    /// an SLO or without requests.
    #[serde(default)]
    pub interval_target_ms: Option<f64>,
}

impl TenantPlan {
    /// Level-2 blocks over all its servers.
    pub fn l2_total(&self) -> u64 {
        self.l2.iter().map(|p| p.size).sum()
    }
}

/// Bandwidth proportions of one scheduled resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResourceShares {
    /// `host` or `server`.
    pub level: String,
    /// Index of the node.
    pub node: usize,
    /// `(tenant index, proportion)`, proportions summing to 1.
    pub shares: Vec<(usize, f64)>,
    /// At a storage server scheduled by volume: the volume (an index) of each tenant in
    /// `shares`, in the same order. A scheduler by volume gives a volume the sum of its
    /// tenants' proportions and serves its tenants together in that time. Empty: each
    /// tenant is scheduled on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<usize>,
}

/// Hot-tier setting of one storage server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoostPlan {
    /// Index of the server.
    pub server: usize,
    /// Accesses a chunk needs before it is placed in the tier.
    pub threshold: u32,
    /// The benefit/cost ratio a period must reach to justify migrations.
    pub justify: f64,
}

/// Moirai's scale-out (§3.5) of one tenant: its cache of `total` blocks over its host and
/// its storage servers, used as one global LRU (exclusive levels, demotion), the host
/// holding `host` of them (`alpha = host / total`) and its servers the rest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleOutPlan {
    /// Index of the tenant.
    pub tenant: usize,
    /// Blocks in all (`a`).
    pub total: u64,
    /// Blocks at the host (its `l1` partition).
    pub host: u64,
    /// Blocks at its storage servers (its `l2` partitions together).
    pub storage: u64,
    /// `host / total`.
    pub alpha: f64,
    /// The mean latency the split is predicted to give (ms).
    pub predicted_ms: f64,
}

/// Moirai's consolidated cache (§3.4) of one read-only image on one storage server:
/// one cache that every reader of the image goes through (`createRule(<VM1..N, *,
/// DATA.file, *>, C)`), sized on the curve of the readers' merged stream at that server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConsolidatedPlan {
    /// The image (its export and its cache on the server are called by its name).
    pub image: String,
    /// Index of the server.
    pub server: usize,
    /// Blocks.
    pub size: u64,
    /// The tenants reading it (indices, topology order).
    pub readers: Vec<usize>,
    /// The hit ratio its curve predicts at `size` (`None`: no curve yet).
    pub predicted_hit_ratio: Option<f64>,
    /// The mean latency its curve predicts for a read reaching the server (ms; `None`:
    /// no curve yet).
    pub predicted_ms: Option<f64>,
    /// Why this size, in words.
    pub reason: String,
}

/// An SLO that this plan does not meet, and by how much.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shortfall {
    /// The tenant's name.
    pub tenant: String,
    /// The latency its SLO allows (ms).
    pub target_ms: f64,
    /// The latency predicted at its allocation (ms).
    pub predicted_ms: f64,
    /// Why it is not met.
    pub reason: String,
}

/// How the nodes are to be partitioned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// Each tenant has its own partition of every node it uses.
    #[default]
    Partitioned,
    /// One cache per node, shared by all its tenants (sizes are the node capacities).
    Shared,
    /// Each tenant alone on the whole system (a baseline: sizes are whole nodes).
    Alone,
    /// Level 1 partitioned per tenant, each level-2 node one cache shared by its tenants
    /// (MLMS's first-level-only baseline; level-2 sizes are the node capacities).
    #[serde(rename = "partitioned-level1")]
    PartitionedLevel1,
    /// Level 1 one shared cache per host, level 2 partitioned per tenant (MLMS's
    /// second-level-only baseline; level-1 sizes are the host capacities).
    #[serde(rename = "partitioned-level2")]
    PartitionedLevel2,
}

impl Layout {
    /// Whether the nodes of `level` (1: hosts, 2: storage servers) each hold one cache
    /// shared by all their tenants.
    pub fn shared_at(self, level: u8) -> bool {
        match self {
            Layout::Shared => true,
            Layout::Partitioned | Layout::Alone => false,
            Layout::PartitionedLevel1 => level != 1,
            Layout::PartitionedLevel2 => level == 1,
        }
    }
}

/// One enforcement step's output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Interval number (0 for the first step).
    pub interval: u64,
    /// The time the step was taken (seconds, the caller's clock).
    pub time: f64,
    /// How nodes are partitioned.
    pub layout: Layout,
    /// Per tenant, in topology order.
    pub tenants: Vec<TenantPlan>,
    /// Bandwidth proportions (empty: schedulers share by demand).
    pub bandwidth: Vec<ResourceShares>,
    /// Hot-tier thresholds (empty: no tier is controlled).
    pub boost: Vec<BoostPlan>,
    /// The tenants scaled out over their host and servers (empty: none). The step leaves
    /// it empty; the live controller fills it for the volumes whose spec asks for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scale_out: Vec<ScaleOutPlan>,
    /// The consolidated caches of read-only images shared by several tenants (empty:
    /// none). The step leaves it empty; the live controller fills it for the images its
    /// configuration declares (`controller::consolidate`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consolidated: Vec<ConsolidatedPlan>,
    /// SLOs predicted not to be met, with the shortfall.
    pub infeasible: Vec<Shortfall>,
    /// Fair speedup the model predicts (harmonic mean of fair-share latency over this
    /// plan's latency).
    pub predicted_fair_speedup: f64,
}

impl Plan {
    /// Level-1 blocks planned on host `h`.
    pub fn host_used(&self, h: usize) -> u64 {
        self.tenants
            .iter()
            .filter(|t| t.l1.node == h)
            .map(|t| t.l1.size)
            .sum()
    }

    /// Level-2 blocks planned on server `s`: the tenants' partitions and the
    /// consolidated caches.
    pub fn server_used(&self, s: usize) -> u64 {
        let partitions: u64 = self
            .tenants
            .iter()
            .flat_map(|t| &t.l2)
            .filter(|p| p.node == s)
            .map(|p| p.size)
            .sum();
        let consolidated: u64 = self
            .consolidated
            .iter()
            .filter(|c| c.server == s)
            .map(|c| c.size)
            .sum();
        partitions + consolidated
    }
}
