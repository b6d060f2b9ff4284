//! The typed blocking clients of both APIs (`ureq`): [`NodeClient`] for a node's API and
//! [`ControllerClient`] for the controller's.
//!
//! They live here, beside the types they send and receive, so that every program that
//! talks to a node or a controller (the controller's loop, the node's registration,
//! `lachesis ctl`) goes through one client typed on one contract, rather than each
//! building its own JSON. They block; async callers run them on the blocking pool.
//!
//! A node call that answers with a status of 500 or more, or fails in transport, is
//! tried up to three times ([`NodeClient::once`] turns that off); a 4xx is the node's
//! final word. Controller calls are tried once.

use crate::controller::{
    Explanation, Heartbeat, HistoryEntry, IntervalReport, NodeView, PlanView, Registration, SetSlo,
    Status, TenantHead, TenantView, VolumeCurves,
};
use crate::node::{
    CacheCurve, CacheInfo, CachePatch, CachesPatch, CachesPatched, CreateCache, CreateRule,
    ExportInfo, Health, HotTierPatch, HotTierView, NodeInfo, NodeObservations, Proportions,
    Removed, RuleInfo, TenantInfo,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::Duration;

/// A call that failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The peer answered with an error status.
    #[error("{status}: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// Its body (`{"error": reason}` from our peers).
        body: String,
    },
    /// The peer could not be reached, or its answer could not be read.
    #[error("{0}")]
    Transport(String),
    /// The answer was not the contract's type (a field missing, unknown or of another
    /// type): the peer speaks another version, or one side has a bug.
    #[error("{path}: {msg}")]
    Contract {
        /// The path called.
        path: String,
        /// What serde found.
        msg: String,
    },
}

impl CallError {
    /// The peer's reason: the `error` of a `{"error": reason}` body, else the body, else
    /// the whole error.
    pub fn reason(&self) -> String {
        match self {
            CallError::Status { body, .. } => serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or_else(|| body.trim().to_string()),
            e => e.to_string(),
        }
    }

    /// The HTTP status, if the peer answered with an error status.
    pub fn status(&self) -> Option<u16> {
        match self {
            CallError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// `http://host:port` from `host:port` or a URL, without a trailing slash.
fn base_url(base: &str) -> String {
    let b = base.trim_end_matches('/');
    if b.starts_with("http://") || b.starts_with("https://") {
        b.to_string()
    } else {
        format!("http://{b}")
    }
}

/// One HTTP peer: a base URL, a bearer token, an agent.
#[derive(Clone, Debug)]
struct Peer {
    base: String,
    token: Option<String>,
}

impl Peer {
    /// Sends `method path` with `body`; the answer's text (empty for 204).
    fn text(
        &self,
        agent: &ureq::Agent,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<String, CallError> {
        let mut req = agent.request(method, &format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        let res = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        match res {
            Ok(r) => r
                .into_string()
                .map_err(|e| CallError::Transport(e.to_string())),
            Err(ureq::Error::Status(status, r)) => Err(CallError::Status {
                status,
                body: r.into_string().unwrap_or_default(),
            }),
            Err(e) => Err(CallError::Transport(e.to_string())),
        }
    }
}

fn to_body(path: &str, b: &impl Serialize) -> Result<serde_json::Value, CallError> {
    serde_json::to_value(b).map_err(|e| CallError::Contract {
        path: path.to_string(),
        msg: e.to_string(),
    })
}

fn parse<T: DeserializeOwned>(path: &str, text: &str) -> Result<T, CallError> {
    serde_json::from_str(text).map_err(|e| CallError::Contract {
        path: path.to_string(),
        msg: e.to_string(),
    })
}

/// How long a removal may take on the node (it writes the dirty blocks that leave the
/// cache back to the level below before it answers); resizes get it too, for nodes that
/// still write a shrink's victims back before answering. A client with a longer timeout
/// keeps its own.
pub const WRITEBACK_TIMEOUT: Duration = Duration::from_secs(60);

/// A node's API.
#[derive(Clone, Debug)]
pub struct NodeClient {
    /// `http://host:port`.
    pub base: String,
    peer: Peer,
    agent: ureq::Agent,
    /// For calls that may write dirty blocks back first (remove; a resize): these wait
    /// [`WRITEBACK_TIMEOUT`] or the client's timeout, whichever is longer.
    slow: ureq::Agent,
    attempts: u32,
}

impl NodeClient {
    /// A client of the API at `base` (`host:port` or a URL) with `token`, if the node
    /// wants one; each call may take `timeout`.
    pub fn new(base: &str, token: Option<&str>, timeout: Duration) -> Self {
        let base = base_url(base);
        NodeClient {
            peer: Peer {
                base: base.clone(),
                token: token.map(str::to_string),
            },
            base,
            agent: ureq::AgentBuilder::new().timeout(timeout).build(),
            slow: ureq::AgentBuilder::new()
                .timeout_connect(timeout)
                .timeout(timeout.max(WRITEBACK_TIMEOUT))
                .build(),
            attempts: 3,
        }
    }

    /// The same client trying each call once (for a person at a command line, who sees
    /// the error and decides).
    pub fn once(mut self) -> Self {
        self.attempts = 1;
        self
    }

    fn call<T: DeserializeOwned>(
        &self,
        slow: bool,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<T, CallError> {
        let agent = if slow { &self.slow } else { &self.agent };
        let text = retried(self.attempts, || self.peer.text(agent, method, path, body))?;
        parse(path, &text)
    }

    fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, CallError> {
        self.call(false, "GET", path, None)
    }

    /// `GET /v1/proportions`: the proportions set and each tenant's use of the backend.
    pub fn proportions(&self) -> Result<crate::bandwidth::ProportionsView, CallError> {
        self.get("/v1/proportions")
    }

    /// `GET /healthz`, tried once: the node's [`Health`] whether it answers 200 (`ok`) or
    /// 503 (`degraded`); any other answer is an error.
    pub fn health(&self) -> Result<Health, CallError> {
        let path = "/healthz";
        match self.peer.text(&self.agent, "GET", path, None) {
            Ok(text) => parse(path, &text),
            Err(CallError::Status { status: 503, body }) => parse(path, &body),
            Err(e) => Err(e),
        }
    }

    /// `GET /v1/observations`.
    pub fn observations(&self) -> Result<NodeObservations, CallError> {
        self.get("/v1/observations")
    }

    /// `GET /v1/node`.
    pub fn node_info(&self) -> Result<NodeInfo, CallError> {
        self.get("/v1/node")
    }

    /// `GET /v1/tenants`.
    pub fn tenants(&self) -> Result<Vec<TenantInfo>, CallError> {
        self.get("/v1/tenants")
    }

    /// `GET /v1/caches/{id or name}/curve` with `points` points, of recent accesses only
    /// if `window`.
    pub fn curve(&self, cache: &str, window: bool, points: usize) -> Result<CacheCurve, CallError> {
        self.get(&format!(
            "/v1/caches/{cache}/curve?window={window}&points={points}"
        ))
    }

    /// `GET /v1/caches`.
    pub fn caches(&self) -> Result<Vec<CacheInfo>, CallError> {
        self.get("/v1/caches")
    }

    /// `GET /v1/caches/{id or name}`.
    pub fn cache(&self, cache: &str) -> Result<CacheInfo, CallError> {
        self.get(&format!("/v1/caches/{cache}"))
    }

    /// `GET /v1/rules`.
    pub fn rules(&self) -> Result<Vec<RuleInfo>, CallError> {
        self.get("/v1/rules")
    }

    /// `POST /v1/caches`.
    pub fn create_cache(&self, spec: &CreateCache) -> Result<CacheInfo, CallError> {
        let path = "/v1/caches";
        let b = to_body(path, spec)?;
        self.call(false, "POST", path, Some(&b))
    }

    /// `PATCH /v1/caches/{id or name}` with the fields `patch` gives (a resize may write
    /// dirty blocks back before it answers: it gets the longer timeout).
    pub fn configure_cache(&self, cache: &str, patch: &CachePatch) -> Result<CacheInfo, CallError> {
        let path = format!("/v1/caches/{cache}");
        let b = to_body(&path, patch)?;
        self.call(patch.size.is_some(), "PATCH", &path, Some(&b))
    }

    /// `PATCH /v1/caches`: the entries applied in order, one outcome each (a node from
    /// before the batch answers 405; see [`CallError::status`]). It gets the longer
    /// timeout when any entry resizes.
    pub fn configure_caches(&self, patch: &CachesPatch) -> Result<CachesPatched, CallError> {
        let path = "/v1/caches";
        let b = to_body(path, patch)?;
        let resizes = patch.caches.iter().any(|e| e.patch.size.is_some());
        self.call(resizes, "PATCH", path, Some(&b))
    }

    /// `DELETE /v1/caches/{id or name}` (the node writes its dirty blocks back first).
    pub fn remove_cache(&self, cache: &str) -> Result<Removed, CallError> {
        self.call(true, "DELETE", &format!("/v1/caches/{cache}"), None)
    }

    /// `POST /v1/rules`.
    pub fn create_rule(&self, rule: &CreateRule) -> Result<RuleInfo, CallError> {
        let path = "/v1/rules";
        let b = to_body(path, rule)?;
        self.call(false, "POST", path, Some(&b))
    }

    /// `DELETE /v1/rules/{id}`.
    pub fn remove_rule(&self, id: u64) -> Result<Removed, CallError> {
        self.call(false, "DELETE", &format!("/v1/rules/{id}"), None)
    }

    /// `GET /v1/exports`.
    pub fn exports(&self) -> Result<Vec<ExportInfo>, CallError> {
        self.get("/v1/exports")
    }

    /// `PATCH /v1/exports/{export}/hot_tier`: the tier's threshold (kept counts) or
    /// placing on or off; the tier now.
    pub fn configure_hot_tier(
        &self,
        export: &str,
        patch: &HotTierPatch,
    ) -> Result<HotTierView, CallError> {
        let path = format!("/v1/exports/{export}/hot_tier");
        let b = to_body(&path, patch)?;
        self.call(false, "PATCH", &path, Some(&b))
    }

    /// `PUT /v1/proportions`; the proportions now.
    pub fn set_proportions(&self, p: &Proportions) -> Result<Proportions, CallError> {
        let path = "/v1/proportions";
        let b = to_body(path, p)?;
        self.call(false, "PUT", path, Some(&b))
    }
}

/// Runs `f` up to `attempts` times while it fails in transport or with a 5xx.
fn retried<T>(attempts: u32, mut f: impl FnMut() -> Result<T, CallError>) -> Result<T, CallError> {
    let mut last = None;
    for attempt in 0..attempts.max(1) {
        match f() {
            Ok(v) => return Ok(v),
            Err(e @ CallError::Status { status, .. }) if status < 500 => return Err(e),
            Err(e) => {
                if attempt + 1 < attempts {
                    tracing::debug!(attempt, %e, "node call failed; retrying");
                    std::thread::sleep(Duration::from_millis(50 << attempt));
                }
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| CallError::Transport("no attempt".into())))
}

/// The controller's API. Each call is tried once.
#[derive(Clone, Debug)]
pub struct ControllerClient {
    /// `http://host:port`.
    pub base: String,
    peer: Peer,
    agent: ureq::Agent,
}

impl ControllerClient {
    /// A client of the controller at `base` (`host:port` or a URL) with `token`, if it
    /// wants one; each call may take `timeout`.
    pub fn new(base: &str, token: Option<&str>, timeout: Duration) -> Self {
        let base = base_url(base);
        ControllerClient {
            peer: Peer {
                base: base.clone(),
                token: token.map(str::to_string),
            },
            base,
            agent: ureq::AgentBuilder::new().timeout(timeout).build(),
        }
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<String, CallError> {
        self.peer.text(&self.agent, method, path, body)
    }

    fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, CallError> {
        parse(path, &self.call("GET", path, None)?)
    }

    /// `POST /v1/nodes/register`.
    pub fn register(&self, r: &Registration) -> Result<(), CallError> {
        let path = "/v1/nodes/register";
        self.call("POST", path, Some(&to_body(path, r)?))
            .map(|_| ())
    }

    /// `POST /v1/nodes/{name}/heartbeat`; a 404 means the controller does not know the
    /// node.
    pub fn heartbeat(&self, name: &str, h: &Heartbeat) -> Result<(), CallError> {
        let path = format!("/v1/nodes/{name}/heartbeat");
        self.call("POST", &path, Some(&to_body(&path, h)?))
            .map(|_| ())
    }

    /// `GET /v1/tenants`.
    pub fn tenants(&self) -> Result<Vec<TenantView<TenantHead>>, CallError> {
        self.get("/v1/tenants")
    }

    /// `GET /v1/tenants/{t}`.
    pub fn tenant(&self, tenant: &str) -> Result<TenantView<TenantHead>, CallError> {
        self.get(&format!("/v1/tenants/{tenant}"))
    }

    /// `PUT /v1/tenants/{t}/slo`.
    pub fn set_slo(&self, tenant: &str, s: &SetSlo) -> Result<TenantView<TenantHead>, CallError> {
        let path = format!("/v1/tenants/{tenant}/slo");
        parse(&path, &self.call("PUT", &path, Some(&to_body(&path, s)?))?)
    }

    /// `GET /v1/history`, of `tenant` (or all), at most `limit` entries.
    pub fn history(
        &self,
        tenant: Option<&str>,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, CallError> {
        self.get(&match tenant {
            Some(t) => format!("/v1/history?tenant={t}&limit={limit}"),
            None => format!("/v1/history?limit={limit}"),
        })
    }

    /// `GET /v1/plan`: the last plan, by name.
    pub fn plan(&self) -> Result<PlanView, CallError> {
        self.get("/v1/plan")
    }

    /// `GET /v1/explain/{t}`: why the tenant's volumes have the sizes they have.
    pub fn explain(&self, tenant: &str) -> Result<Explanation, CallError> {
        self.get(&format!("/v1/explain/{tenant}"))
    }

    /// `GET /v1/status`: scheme, store, leadership and the last interval.
    pub fn status(&self) -> Result<Status, CallError> {
        self.get("/v1/status")
    }

    /// `GET /v1/series`: the intervals kept in memory.
    pub fn series(&self) -> Result<Vec<IntervalReport>, CallError> {
        self.get("/v1/series")
    }

    /// `GET /v1/nodes`: the registry.
    pub fn nodes(&self) -> Result<Vec<NodeView>, CallError> {
        self.get("/v1/nodes")
    }

    /// `GET /v1/curves`: per volume its curves and planned size.
    pub fn curves(&self) -> Result<std::collections::BTreeMap<String, VolumeCurves>, CallError> {
        self.get("/v1/curves")
    }
}
