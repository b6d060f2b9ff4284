//! What the controller shows of its intervals and nodes: the interval's report
//! ([`IntervalReport`], the last in `/v1/status`, the kept ones in `/v1/series`), the
//! changes it made and the fields the nodes refused, the registry's nodes (`/v1/nodes`),
//! and each volume's curves (`/v1/curves`).

use super::{ExportRef, Row};
use crate::node::{HotTierView, UpstreamDown};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One change the reconcile made (or tried) on a node.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// The node.
    pub node: String,
    /// `create`, `resize`, `policy`, `exclusive`, `write_policy`, `rule`, `unrule`,
    /// `remove`, `proportions`, `boost`.
    pub verb: String,
    /// The cache (or export).
    pub cache: String,
    /// What changed (`1048576 -> 2097152`).
    pub detail: String,
    /// `ok` or the node's reason.
    pub result: String,
}

/// A field of the plan a node did not take.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// The node.
    pub node: String,
    /// The plan's field, as a path (`caches.db.size`, `rules.db`, `proportions`,
    /// `hot_tier.db.threshold`).
    pub field: String,
    /// What the plan wanted there.
    pub wanted: String,
    /// The node's reason.
    pub reason: String,
    /// The node does not know the field or the verb (an older node): the rest of the
    /// plan was applied without it.
    pub unsupported: bool,
}

impl Refusal {
    /// `node: field = wanted refused (or not supported): reason`.
    pub fn describe(&self) -> String {
        format!(
            "{}: {} = {} {}: {}",
            self.node,
            self.field,
            self.wanted,
            if self.unsupported {
                "not supported"
            } else {
                "refused"
            },
            self.reason
        )
    }
}

/// An SLO the plan does not meet, and by how much.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Shortfall {
    /// The volume (a `control` tenant).
    pub tenant: String,
    /// The latency its SLO allows (ms).
    pub target_ms: f64,
    /// The latency predicted at its allocation (ms).
    pub predicted_ms: f64,
    /// Why it is not met.
    pub reason: String,
}

/// One consolidated cache of a read-only image in an interval: planned against held, and
/// what it served (the interval's counters of the image's export on its server).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConsolidatedRow {
    /// The image.
    pub image: String,
    /// The storage node.
    pub server: String,
    /// The volumes reading it.
    pub readers: Vec<String>,
    /// Bytes planned.
    pub planned: u64,
    /// Bytes the node holds for it after the reconcile (0: no such cache).
    pub applied: u64,
    /// Blocks resident in it after the reconcile (one copy however many readers).
    pub resident: u64,
    /// Block lookups of the image at the server in the interval.
    pub lookups: u64,
    /// Of them, found in the consolidated cache.
    pub hits: u64,
}

/// One interval as the console, `ctl` and the demo show it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IntervalReport {
    /// Interval number.
    pub interval: u64,
    /// Unix seconds.
    pub time: f64,
    /// Length (s).
    pub seconds: f64,
    /// Per volume.
    pub rows: Vec<Row>,
    /// Planned sizes per node: `node -> volume -> bytes`.
    pub allocations: BTreeMap<String, BTreeMap<String, u64>>,
    /// SLOs the plan cannot meet, with the shortfall.
    pub infeasible: Vec<Shortfall>,
    /// What reconciling changed on the nodes.
    pub actions: Vec<Action>,
    /// The plan's fields the nodes did not take, per node and field (the rest was
    /// applied).
    // Default: a controller from before refusals were reported leaves it out.
    #[serde(default)]
    pub refused: Vec<Refusal>,
    /// Each storage node's hot tiers as they reported them after the reconcile.
    // Default: as `refused`.
    #[serde(default)]
    pub tiers: BTreeMap<String, Vec<HotTierView>>,
    /// The consolidated caches of shared read-only images (empty: none).
    // Default: a controller from before consolidated caches leaves it out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consolidated: Vec<ConsolidatedRow>,
}

/// Who leads a replicated controller (`/v1/status`' `replica`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LeaderView {
    /// This replica's id.
    pub me: String,
    /// Whether this replica leads.
    pub leading: bool,
    /// The leader's id, if any.
    pub leader: Option<String>,
    /// The leader's API, if any.
    pub leader_api: Option<String>,
}

/// The answer of `GET /v1/status`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Status {
    /// The scheme.
    pub scheme: String,
    /// Where the state is kept.
    pub store: String,
    /// The interval (s).
    pub interval_secs: f64,
    /// Whether this replica leads (a sole controller always does).
    pub leading: bool,
    /// Leadership of a replicated controller (`None`: a sole controller).
    pub replica: Option<LeaderView>,
    /// The last interval.
    pub last: Option<IntervalReport>,
}

/// One node as `GET /v1/nodes` shows it (without its token).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeView {
    /// Name.
    pub name: String,
    /// Level.
    pub level: u8,
    /// API base URL.
    pub api: Option<String>,
    /// NBD address.
    pub nbd: Option<String>,
    /// Cache memory (bytes; 0 unknown).
    pub cache_size: u64,
    /// Block size (bytes).
    pub block_size: u64,
    /// Epoch last seen.
    pub epoch: String,
    /// Exports it reported.
    pub exports: Vec<ExportRef>,
    /// Whether it answers.
    pub up: bool,
    /// Polls failed in a row.
    pub failures: u32,
    /// The epoch whose configuration matches the last plan (`None`: to be programmed).
    pub programmed: Option<String>,
    /// The last error talking to it (or the first field it refused).
    pub last_error: Option<String>,
    /// Unix seconds of the last heartbeat or successful poll.
    pub last_seen: f64,
    /// Why its counters are not believed; `None` while they are.
    // Default: left out while they are believed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspect: Option<String>,
    /// The upstream links its `/healthz` reports down.
    // Default: left out while it says `ok`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<UpstreamDown>,
    /// Its hot tiers as its last answer reported them.
    // Default: left out for a node without tiers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<HotTierView>,
}

/// One policy's curve of a volume: `(bytes, miss ratio)` points, sizes ascending.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CurveView {
    /// The policy.
    pub policy: String,
    /// `(bytes, miss ratio)`.
    pub points: Vec<(u64, f64)>,
}

/// One volume in `GET /v1/curves`: its curves and the size planned for it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VolumeCurves {
    /// Its curves of the last interval (`None`: not observed yet).
    pub curves: Option<Vec<CurveView>>,
    /// Bytes planned for it at both levels.
    pub chosen_bytes: Option<u64>,
}
