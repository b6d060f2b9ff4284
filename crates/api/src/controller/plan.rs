//! The plan as the controller shows it (`GET /v1/plan`, `GET /v1/explain/{t}`): every
//! field of `control::Plan` with nodes and tenants by name, sizes in blocks and bytes,
//! and each reason in words. The controller writes it; `ctl` and the console read it.

use super::Shortfall;
use serde::{Deserialize, Serialize};

/// One partition of a volume on one node.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PartitionView {
    /// The node.
    pub node: String,
    /// Blocks.
    pub size: u64,
    /// Bytes.
    pub bytes: u64,
    /// Why, in words.
    pub reason: String,
}

/// One volume's part of the plan.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TenantPlanView {
    /// The volume (a `control` tenant).
    pub tenant: String,
    /// Its level-1 partition.
    pub l1: PartitionView,
    /// Its level-2 partitions, one per server.
    pub l2: Vec<PartitionView>,
    /// Eviction policy.
    pub eviction: String,
    /// Why that policy.
    pub eviction_reason: String,
    /// Admission policy.
    pub admission: String,
    /// The mean latency predicted at these sizes (ms).
    pub predicted_latency_ms: f64,
    /// The latency its SLO allows (ms).
    pub target_latency_ms: Option<f64>,
    /// Whether the prediction meets it.
    pub slo_met: Option<bool>,
}

/// Bandwidth proportions of one node's backend.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SharesView {
    /// The node.
    pub node: String,
    /// `host` or `server`.
    pub level: String,
    /// Per volume, its proportion (summing to one).
    pub shares: Vec<(String, f64)>,
}

/// A storage node's hot-tier setting.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BoostView {
    /// The node.
    pub node: String,
    /// Accesses a chunk needs before it is placed.
    pub threshold: u32,
    /// The bar on hits per migration.
    pub justify: f64,
}

/// One volume scaled out over its host and servers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScaleOutView {
    /// The volume.
    pub tenant: String,
    /// Blocks in all.
    pub total: u64,
    /// Blocks at the host.
    pub host: u64,
    /// Blocks at its servers.
    pub storage: u64,
    /// `host / total`.
    pub alpha: f64,
    /// The predicted mean latency (ms).
    pub predicted_ms: f64,
}

/// The consolidated cache of one read-only image on one storage server (Moirai §3.4).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConsolidatedView {
    /// The image (its export and its cache on the server).
    pub image: String,
    /// The storage node.
    pub server: String,
    /// Blocks.
    pub size: u64,
    /// Bytes.
    pub bytes: u64,
    /// The volumes reading it.
    pub readers: Vec<String>,
    /// The hit ratio its curve predicts at this size (`None`: no curve yet).
    pub predicted_hit_ratio: Option<f64>,
    /// The mean latency predicted for a read reaching the server (ms).
    pub predicted_ms: Option<f64>,
    /// Why this size, in words.
    pub reason: String,
    /// Bytes the server held for it after the last interval's reconcile (`None`: not
    /// known, e.g. a plan reloaded from the store before any interval ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<u64>,
}

/// The answer of `GET /v1/plan`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlanView {
    /// Interval number.
    pub interval: u64,
    /// When the step was taken (s, the controller's clock).
    pub time: f64,
    /// `partitioned`, `shared`, `partitioned-level1`, `partitioned-level2`.
    pub layout: String,
    /// Per volume.
    pub tenants: Vec<TenantPlanView>,
    /// Backend proportions per node (empty: equal shares).
    pub bandwidth: Vec<SharesView>,
    /// Hot-tier thresholds per storage node (empty: none tuned).
    pub boost: Vec<BoostView>,
    /// Volumes scaled out.
    pub scale_out: Vec<ScaleOutView>,
    /// Consolidated caches of shared read-only images (empty: none).
    // Default: a controller from before consolidated caches leaves it out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consolidated: Vec<ConsolidatedView>,
    /// SLOs the plan does not meet.
    pub infeasible: Vec<Shortfall>,
    /// Fair speedup the model predicts.
    pub predicted_fair_speedup: f64,
}
