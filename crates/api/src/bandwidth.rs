//! The bandwidth part of the node API: what a node reports of each tenant's use of its
//! backend, and the proportions a controller sets.
//!
//! A node enforces proportions of its backend's *service time* (not of bytes): every
//! call to the disk or upstream it owns waits in one queue that starts calls in the
//! order that shares that time by the tenants' weights. It reports, per tenant and
//! cumulative since it started, the calls it made, their bytes, their service time and
//! the time they waited in the queue ([`BackendView`], the learning automata's feedback),
//! and the proportion set for the tenant, if any.
//!
//! `GET /v1/proportions` answers [`ProportionsView`]. `PUT /v1/proportions` takes [`crate::node::Proportions`]: `{"tenant": proportion}`,
//! every value positive and finite, their sum one within [`SUM_TOLERANCE`] (an empty
//! map restores equal shares); an unknown tenant is a 404 and a bad value a 400, both
//! naming the field (`proportions.TENANT`), and the node is unchanged.

use serde::{Deserialize, Serialize};

/// How far from one the sum of proportions may be.
pub const SUM_TOLERANCE: f64 = 1e-3;

/// One tenant's use of the node's backend, cumulative since the node started (in
/// [`crate::node::TenantObservations::backend`]).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackendView {
    /// Backend calls completed (reads, writes, flushes, trims).
    pub requests: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// Their total service time at the backend (ms).
    pub service_ms: f64,
    /// Their total wait in the node's backend queue before they started (ms).
    pub queue_ms: f64,
    /// The proportion of the backend set for the tenant (`None`: none set; tenants
    /// share equally, or the tenant weighs as the smallest share set).
    pub proportion: Option<f64>,
}

/// The answer of `GET /v1/proportions`: the proportions set, how many backend calls run
/// at once, and each tenant's use of the backend (the same sums the observations carry).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProportionsView {
    /// The proportions set (empty: equal shares).
    pub proportions: crate::node::Proportions,
    /// Backend calls in flight at most (`[node] backend_depth`).
    pub backend_depth: usize,
    /// Per tenant, its use of the backend (`proportion` as in `proportions`).
    pub backend: std::collections::BTreeMap<String, BackendView>,
}
