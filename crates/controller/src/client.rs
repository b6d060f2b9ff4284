//! The controller's side of the node contract: what a node reports on
//! `GET /v1/observations` (cumulative counters since the node started, with an `epoch`
//! that changes on restart), and the calls that read and program a node (caches, rules,
//! proportions) with a timeout and retries. Blocking (`ureq`); the service runs it on the
//! blocking pool.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A node's answer to `GET /v1/observations`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeObservations {
    /// The node's name.
    #[serde(default)]
    pub node: String,
    /// Its level.
    #[serde(default)]
    pub level: u8,
    /// Its block size (bytes).
    #[serde(default)]
    pub block_size: u64,
    /// Its cache memory (bytes).
    #[serde(default)]
    pub cache_size: u64,
    /// Milliseconds since it started.
    #[serde(default)]
    pub uptime_ms: u64,
    /// Changes whenever the node restarts.
    #[serde(default)]
    pub epoch: String,
    /// Per tenant cache, cumulative.
    #[serde(default)]
    pub tenants: Vec<TenantCounters>,
}

/// Mean-latency accumulator.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Acc {
    /// Requests.
    #[serde(default)]
    pub count: u64,
    /// Their summed latency (ms).
    #[serde(default)]
    pub sum_ms: f64,
}

/// A latency summary.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencyCounters {
    /// Requests.
    #[serde(default)]
    pub count: u64,
    /// Summed latency (ms).
    #[serde(default)]
    pub sum_ms: f64,
    /// Median (ms).
    #[serde(default)]
    pub p50_ms: f64,
    /// 99th percentile (ms).
    #[serde(default)]
    pub p99_ms: f64,
}

/// Latency of requests served from this level and from below it.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Served {
    /// Served from this level.
    #[serde(default)]
    pub hit: Acc,
    /// Served from below.
    #[serde(default)]
    pub miss: Acc,
}

/// A curve as the node reports it: `[size_bytes, miss_ratio]` ascending.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeCurve {
    /// Policy name.
    pub policy: String,
    /// Points.
    #[serde(default)]
    pub points: Vec<(u64, f64)>,
}

/// One tenant cache's cumulative counters on one node.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TenantCounters {
    /// Owning tenant of the export.
    #[serde(default)]
    pub tenant: String,
    /// The cache its requests go to (the volume's name under this controller); `None`
    /// before it has one.
    #[serde(default)]
    pub cache: Option<String>,
    /// Capacity (bytes).
    #[serde(default)]
    pub size: u64,
    /// Eviction policy.
    #[serde(default)]
    pub eviction: Option<String>,
    /// Write policy (`write-back`, ...), from nodes that report it.
    #[serde(default)]
    pub write_policy: Option<String>,
    /// Admission policy.
    #[serde(default)]
    pub admission: Option<String>,
    /// Requests.
    #[serde(default)]
    pub requests: u64,
    /// Bytes read.
    #[serde(default)]
    pub read_bytes: u64,
    /// Bytes written.
    #[serde(default)]
    pub write_bytes: u64,
    /// Block lookups.
    #[serde(default)]
    pub lookups: u64,
    /// Block hits.
    #[serde(default)]
    pub hits: u64,
    /// Latency of all requests.
    #[serde(default)]
    pub latency: LatencyCounters,
    /// Latency by where they were served.
    #[serde(default)]
    pub served: Served,
    /// Curves per candidate policy.
    #[serde(default)]
    pub curves: Vec<NodeCurve>,
}

impl TenantCounters {
    /// The key the controller knows it by: its cache's name, else the tenant's.
    pub fn key(&self) -> &str {
        self.cache.as_deref().unwrap_or(&self.tenant)
    }
}

/// A cache as `GET /v1/caches` lists it (the fields the controller reads).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct CacheRow {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Capacity (bytes).
    pub size_bytes: u64,
    /// Stats with the settings.
    pub stats: CacheStatsRow,
}

/// The settings part of a cache's stats.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct CacheStatsRow {
    /// Eviction policy.
    #[serde(default)]
    pub eviction: String,
    /// Admission policy.
    #[serde(default)]
    pub admission: String,
    /// Exclusive mode: `off`, `upper` or `lower` (empty from a node that does not say).
    #[serde(default)]
    pub exclusive: String,
}

/// A rule as `GET /v1/rules` lists it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct RuleRow {
    /// Id.
    pub id: u64,
    /// Cache id.
    pub cache: u64,
    /// Export.
    pub export: String,
    /// Client filter.
    #[serde(default)]
    pub client: Option<String>,
}

/// A node call that failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The node answered with an error status.
    #[error("{status}: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// Its body.
        body: String,
    },
    /// The node could not be reached or the answer did not parse.
    #[error("{0}")]
    Transport(String),
}

/// A node's API.
#[derive(Clone, Debug)]
pub struct NodeClient {
    /// `http://host:port`.
    pub base: String,
    token: String,
    agent: ureq::Agent,
    /// For calls that may write dirty blocks back first (remove; a resize of a node that
    /// still writes a shrink's victims back before answering): these wait
    /// [`WRITEBACK_TIMEOUT`].
    slow: ureq::Agent,
}

/// How long a removal may take on the node (it writes the dirty blocks that leave the
/// cache back to the level below before it answers); resizes get it too, for nodes that
/// still write a shrink's victims back before answering (this one leaves them to its
/// cleaner).
pub const WRITEBACK_TIMEOUT: Duration = Duration::from_secs(60);

impl NodeClient {
    /// A client of the API at `base` with `token`.
    pub fn new(base: &str, token: &str, timeout: Duration) -> Self {
        let base = if base.starts_with("http://") || base.starts_with("https://") {
            base.trim_end_matches('/').to_string()
        } else {
            format!("http://{}", base.trim_end_matches('/'))
        };
        NodeClient {
            base,
            token: token.to_string(),
            agent: ureq::AgentBuilder::new().timeout(timeout).build(),
            slow: ureq::AgentBuilder::new()
                .timeout_connect(timeout)
                .timeout(WRITEBACK_TIMEOUT)
                .build(),
        }
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, CallError> {
        self.call_on(&self.agent, method, path, body)
    }

    fn call_on(
        &self,
        agent: &ureq::Agent,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, CallError> {
        let req = agent
            .request(method, &format!("{}{path}", self.base))
            .set("Authorization", &format!("Bearer {}", self.token));
        let res = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        match res {
            Ok(r) => {
                let text = r
                    .into_string()
                    .map_err(|e| CallError::Transport(e.to_string()))?;
                if text.trim().is_empty() {
                    return Ok(serde_json::Value::Null);
                }
                serde_json::from_str(&text).map_err(|e| CallError::Transport(e.to_string()))
            }
            Err(ureq::Error::Status(status, r)) => Err(CallError::Status {
                status,
                body: r.into_string().unwrap_or_default(),
            }),
            Err(e) => Err(CallError::Transport(e.to_string())),
        }
    }

    fn typed<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, CallError> {
        serde_json::from_value(self.call("GET", path, None)?)
            .map_err(|e| CallError::Transport(format!("{path}: {e}")))
    }

    /// `GET /v1/observations`.
    pub fn observations(&self) -> Result<NodeObservations, CallError> {
        self.typed("/v1/observations")
    }

    /// `GET /v1/caches`.
    pub fn caches(&self) -> Result<Vec<CacheRow>, CallError> {
        self.typed("/v1/caches")
    }

    /// `GET /v1/rules`.
    pub fn rules(&self) -> Result<Vec<RuleRow>, CallError> {
        self.typed("/v1/rules")
    }

    /// `POST /v1/caches`.
    pub fn create_cache(
        &self,
        name: &str,
        size: u64,
        eviction: &str,
        admission: &str,
        exclusive: bool,
    ) -> Result<(), CallError> {
        let mut b = serde_json::json!({"name": name, "size": size, "eviction": eviction,
            "admission": admission});
        if exclusive {
            b["exclusive"] = true.into();
        }
        with_retries(|| self.call("POST", "/v1/caches", Some(&b))).map(|_| ())
    }

    /// `PATCH /v1/caches/{name}` with the fields given.
    pub fn configure_cache(
        &self,
        name: &str,
        size: Option<u64>,
        eviction: Option<&str>,
        admission: Option<&str>,
        exclusive: Option<bool>,
    ) -> Result<(), CallError> {
        let mut b = serde_json::Map::new();
        if let Some(x) = exclusive {
            b.insert("exclusive".into(), x.into());
        }
        if let Some(s) = size {
            b.insert("size".into(), s.into());
        }
        if let Some(e) = eviction {
            b.insert("eviction".into(), e.into());
        }
        if let Some(a) = admission {
            b.insert("admission".into(), a.into());
        }
        let b = serde_json::Value::Object(b);
        // A resize may write dirty blocks back before it answers.
        let agent = if size.is_some() {
            &self.slow
        } else {
            &self.agent
        };
        with_retries(|| self.call_on(agent, "PATCH", &format!("/v1/caches/{name}"), Some(&b)))
            .map(|_| ())
    }

    /// `DELETE /v1/caches/{name}` (the node writes its dirty blocks back first).
    pub fn remove_cache(&self, name: &str) -> Result<(), CallError> {
        with_retries(|| self.call_on(&self.slow, "DELETE", &format!("/v1/caches/{name}"), None))
            .map(|_| ())
    }

    /// `POST /v1/rules` sending every request of `export` to `cache`.
    pub fn create_rule(&self, export: &str, cache: &str) -> Result<(), CallError> {
        let b = serde_json::json!({"export": export, "cache": cache});
        with_retries(|| self.call("POST", "/v1/rules", Some(&b))).map(|_| ())
    }

    /// `DELETE /v1/rules/{id}`.
    pub fn remove_rule(&self, id: u64) -> Result<(), CallError> {
        with_retries(|| self.call("DELETE", &format!("/v1/rules/{id}"), None)).map(|_| ())
    }

    /// `PUT /v1/proportions`.
    pub fn set_proportions(
        &self,
        p: &std::collections::BTreeMap<String, f64>,
    ) -> Result<(), CallError> {
        let b = serde_json::to_value(p).unwrap_or_default();
        with_retries(|| self.call("PUT", "/v1/proportions", Some(&b))).map(|_| ())
    }
}

/// Runs `f` up to three times while it fails in transport or with a 5xx (a 4xx is the
/// node's final word).
fn with_retries<T>(mut f: impl FnMut() -> Result<T, CallError>) -> Result<T, CallError> {
    let mut last = None;
    for attempt in 0..3 {
        match f() {
            Ok(v) => return Ok(v),
            Err(e @ CallError::Status { status, .. }) if status < 500 => return Err(e),
            Err(e) => {
                tracing::debug!(attempt, %e, "node call failed; retrying");
                last = Some(e);
                std::thread::sleep(Duration::from_millis(50 << attempt));
            }
        }
    }
    Err(last.unwrap_or_else(|| CallError::Transport("no attempt".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_example_parses() {
        let text = r#"{"node": "l1-a", "level": 1, "block_size": 4096, "cache_size": 268435456,
    "uptime_ms": 12345, "epoch": "e1",
    "tenants": [{"tenant": "t1", "cache": "t1", "size": 67108864, "eviction": "lru",
       "admission": "demand", "requests": 1000, "read_bytes": 4096000, "write_bytes": 0,
       "lookups": 1000, "hits": 600,
       "latency": {"count": 1000, "sum_ms": 812.5, "p50_ms": 0.4, "p99_ms": 6.1},
       "served": {"hit": {"count": 600, "sum_ms": 60.0}, "miss": {"count": 400, "sum_ms": 752.5}},
       "curves": [{"policy": "lru", "points": [[0, 1.0], [4096, 0.5]]}]}]}"#;
        let o: NodeObservations = serde_json::from_str(text).unwrap();
        assert_eq!(o.tenants[0].hits, 600);
        assert_eq!(o.tenants[0].served.miss.sum_ms, 752.5);
        assert_eq!(o.tenants[0].curves[0].points[1], (4096, 0.5));
    }
}
