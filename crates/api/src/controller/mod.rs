//! The controller API's bodies: what `lachesis controller` answers and accepts under
//! `/v1/`.
//!
//! | verb | path | request | answer |
//! |---|---|---|---|
//! | POST | `/v1/nodes/register` | [`Registration`] | the node's entry |
//! | POST | `/v1/nodes/{n}/heartbeat` | [`Heartbeat`] | 204; 404 = register again |
//! | GET | `/v1/tenants`, `/v1/tenants/{t}` | | [`TenantView`]s |
//! | PUT | `/v1/tenants/{t}/slo` | [`SetSlo`] | [`TenantView`] |
//! | GET | `/v1/history?tenant=T&limit=N` | | `[`[`HistoryEntry`]`]` |
//! | GET | `/v1/status` | | [`Status`] |
//! | GET | `/v1/series` | | `[`[`IntervalReport`]`]` |
//! | GET | `/v1/nodes` | | `[`[`NodeView`]`]` |
//! | GET | `/v1/plan` | | [`PlanView`] |
//! | GET | `/v1/explain/{t}` | | [`Explanation`] |
//! | GET | `/v1/curves` | | `{volume: `[`VolumeCurves`]`}` |
//!
//! A tenant's specification and its SLO are built from `control`'s types, which this
//! crate does not depend on: [`TenantView`], [`SetSlo`] and [`Explanation`] are generic
//! over them (the controller fills in its own, a client reads a [`TenantHead`] or plain
//! JSON). The plan is declared here in the form the controller shows it ([`PlanView`]:
//! nodes and tenants by name, reasons in words).

mod interval;
mod plan;

pub use interval::{
    Action, ConsolidatedRow, CurveView, IntervalReport, LeaderView, NodeView, Refusal, Shortfall,
    Status, VolumeCurves,
};
pub use plan::{
    BoostView, ConsolidatedView, PartitionView, PlanView, ScaleOutView, SharesView, TenantPlanView,
};

use serde::{Deserialize, Serialize};

/// One volume in an [`Explanation`]: where it lives, its part of the plan, what was
/// measured, its curves and its shortfall.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VolumeExplanation {
    /// The volume.
    pub volume: String,
    /// Its level-1 node.
    pub host: String,
    /// Further level-1 nodes exporting it.
    pub hosts: Vec<String>,
    /// Its level-2 nodes.
    pub servers: Vec<String>,
    /// Its part of the last plan.
    pub plan: Option<TenantPlanView>,
    /// Its last row.
    pub measured: Option<Row>,
    /// Its shortfall, if the plan does not meet its SLO.
    pub shortfall: Option<Shortfall>,
    /// Its curves of the last interval.
    pub curves: Option<Vec<CurveView>>,
}

/// The answer of `GET /v1/explain/{t}`: why a tenant's volumes have the sizes they have,
/// over the SLO type `S` (as [`SetSlo`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Explanation<S = serde_json::Value> {
    /// The tenant.
    pub tenant: String,
    /// Its SLO.
    pub slo: Option<S>,
    /// Its class.
    pub class: Option<String>,
    /// The scheme planning it.
    pub scheme: String,
    /// Its volumes.
    pub volumes: Vec<VolumeExplanation>,
}

/// An export a node reports at registration.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExportRef {
    /// Export name.
    pub name: String,
    /// Owning tenant.
    pub tenant: String,
    /// Size (bytes).
    pub size: u64,
}

/// The body of `POST /v1/nodes/register`: what a controller needs to drive the node.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    /// Node name.
    pub name: String,
    /// 1 or 2.
    pub level: u8,
    /// `http://host:port` of its API.
    pub api: String,
    /// `host:port` of its NBD listener.
    // Default: a peer registered only for its API (tests, tools) may leave it out.
    #[serde(default)]
    pub nbd: Option<String>,
    /// Cache memory (bytes).
    pub cache_size: u64,
    /// Block size (bytes).
    pub block_size: u64,
    /// Its current epoch (chosen at start; changes on restart).
    pub epoch: String,
    /// Its exports.
    // Default: a node without exports may leave the list out.
    #[serde(default)]
    pub exports: Vec<ExportRef>,
    /// Its own API token (the controller programs it with this).
    pub token: String,
}

/// The body of `POST /v1/nodes/{name}/heartbeat`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// The node's epoch.
    pub epoch: String,
    /// Milliseconds since it started.
    // Default: a beat that only proves the epoch is alive may leave it out.
    #[serde(default)]
    pub uptime_ms: u64,
}

/// The body of `PUT /v1/tenants/{t}/slo`, over the SLO type `S` (the controller's is
/// `control::Slo`; a client may send any JSON value, `null` for none).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SetSlo<S = serde_json::Value> {
    /// The new objective (`{"latency_ms": 2.0}`, `{"iops": 5000}`, ...), `None` for
    /// none.
    pub slo: Option<S>,
    /// The new class (`gold`, `silver`, `best-effort`); absent keeps the current one.
    #[serde(default)]
    pub class: Option<String>,
}

/// One volume's row of an interval (`/v1/tenants`' status, `/v1/status`' last interval).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// The volume (a `control` tenant).
    pub tenant: String,
    /// Its owner.
    pub owner: String,
    /// Its SLO as text (`≤2 ms`), if any.
    pub slo: Option<String>,
    /// The latency its SLO allows this interval (ms).
    pub target_ms: Option<f64>,
    /// Measured mean latency (ms).
    pub latency_ms: Option<f64>,
    /// Measured 99th percentile of this interval's requests (ms).
    // Default: a controller from before the field leaves it out.
    #[serde(default)]
    pub p99_ms: Option<f64>,
    /// For a tail SLO, the interval's measured latency at the SLO's quantile (ms).
    #[serde(default)]
    pub tail_ms: Option<f64>,
    /// Measured level-1 hit ratio.
    pub l1_hit_ratio: f64,
    /// Measured level-2 hit ratio (of level-1 misses).
    pub l2_hit_ratio: f64,
    /// Planned level-1 size (bytes).
    pub l1_size: u64,
    /// Planned level-2 size over its servers (bytes).
    pub l2_size: u64,
    /// Level-1 size its host holds after this interval's reconcile, as read back from it
    /// (bytes; a host that could not be reconciled: what it reported at the poll). Where
    /// it differs from `l1_size`, the host refused part of the plan.
    // Default: a controller from before the field leaves it out.
    #[serde(default)]
    pub l1_applied: u64,
    /// Level-2 size its servers hold after this interval's reconcile, summed (bytes; as
    /// `l1_applied`).
    // Default: as `l1_applied`.
    #[serde(default)]
    pub l2_applied: u64,
    /// Whether the SLO held this interval: the measured mean within the target, or for a
    /// tail SLO the measured quantile within its bound; never while any request failed
    /// (`None`: no SLO, or no request at all).
    pub slo_met: Option<bool>,
    /// Requests this interval answered with an error at level 1 (not in the latencies).
    // Default: a controller from before the field leaves it out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_requests: u64,
    /// Latency the model predicts at the planned sizes (ms).
    pub predicted_ms: f64,
    /// Why the level-1 size.
    pub l1_reason: String,
    /// Why the level-2 size.
    pub l2_reason: String,
    /// Eviction policy and why.
    pub eviction: String,
    /// Why the volume is failing, as its nodes report it (a node down, or an upstream link
    /// of its export away: the node's `/healthz` says `degraded`); `None` while it is not.
    // Default: a controller from before the field leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing: Option<String>,
    /// Requests this interval.
    pub requests: u64,
    /// Requests per second.
    pub iops: f64,
    /// MB/s.
    pub mbps: f64,
}

/// A tenant as `GET /v1/tenants` shows it: its specification `T` (the controller's
/// `config::TenantConfig`; a client may read a [`TenantHead`]) and its volumes' last rows.
/// (serde cannot refuse unknown fields of a flattened struct: `T` decides what it takes.)
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TenantView<T> {
    /// Its configuration.
    #[serde(flatten)]
    pub spec: T,
    /// Its volumes' last rows.
    pub status: Vec<Row>,
}

/// The part of a tenant's specification a client shows; the rest (its volumes, depth,
/// ...) is kept as JSON, so a view read and written again loses nothing.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TenantHead {
    /// Its name.
    pub name: String,
    /// Its objective as JSON (`{"latency_ms": 2.0}`), if any.
    // Default: the controller writes `null` for none, an older one may leave it out.
    #[serde(default)]
    pub slo: Option<serde_json::Value>,
    /// Its class, if set.
    // Default: as `slo`.
    #[serde(default)]
    pub class: Option<String>,
    /// The specification's other fields.
    #[serde(flatten)]
    pub more: serde_json::Map<String, serde_json::Value>,
}

/// One decision kept in the history: a tenant's allocation at one interval and why.
///
/// Unknown fields are let through: entries are also read back from the controller's
/// store (etcd keeps them as this JSON), which any version of the controller may have
/// written.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HistoryEntry {
    /// The interval number.
    pub interval: u64,
    /// Seconds since the Unix epoch.
    pub time: f64,
    /// The tenant (volume) it concerns, or `*` for the whole plan.
    pub tenant: String,
    /// The numbers and reasons (JSON, as the controller's step wrote them).
    pub detail: serde_json::Value,
}

/// Whether a count is zero (left out of a row when it is).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_round_trips_and_refuses_unknown_fields() {
        let r = Registration {
            name: "l1-a".into(),
            level: 1,
            api: "http://127.0.0.1:1".into(),
            nbd: Some("127.0.0.1:2".into()),
            cache_size: 1 << 20,
            block_size: 4096,
            epoch: "e1".into(),
            exports: vec![ExportRef {
                name: "v".into(),
                tenant: "t".into(),
                size: 8 << 20,
            }],
            token: "secret".into(),
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Registration>(&text).unwrap(), r);
        let mut v = serde_json::to_value(&r).unwrap();
        v["colour"] = "red".into();
        let e = serde_json::from_value::<Registration>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("colour"), "{e}");
        let e = serde_json::from_str::<Heartbeat>(r#"{"epoch":"e","uptime":1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("uptime"), "{e}");
    }

    #[test]
    fn optional_fields_may_be_left_out() {
        let r: Registration = serde_json::from_str(
            r#"{"name":"a","level":2,"api":"http://x","cache_size":1,"block_size":4096,
                "epoch":"e","token":"t"}"#,
        )
        .unwrap();
        assert_eq!(r.nbd, None);
        assert!(r.exports.is_empty());
        let h: Heartbeat = serde_json::from_str(r#"{"epoch":"e"}"#).unwrap();
        assert_eq!(h.uptime_ms, 0);
        let s: SetSlo = serde_json::from_str(r#"{"slo":null}"#).unwrap();
        assert_eq!(s.slo, None);
        assert_eq!(s.class, None);
    }

    #[test]
    fn a_tenant_view_reads_the_head_of_a_full_spec() {
        let text = r#"{"name":"t1","slo":{"latency_ms":2.0},"class":"gold","depth":null,
            "volume":[{"name":"v","host":"h"}],"status":[]}"#;
        let t: TenantView<TenantHead> = serde_json::from_str(text).unwrap();
        assert_eq!(t.spec.name, "t1");
        assert_eq!(t.spec.class.as_deref(), Some("gold"));
        assert_eq!(t.spec.slo.as_ref().unwrap()["latency_ms"], 2.0);
        assert!(t.status.is_empty());
        let again: serde_json::Value = serde_json::to_value(&t).unwrap();
        let orig: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(again, orig, "nothing lost");
    }
}
