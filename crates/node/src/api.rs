//! The HTTP control API: Moirai's programmable-cache verbs as JSON over HTTP, the
//! Prometheus endpoint, and an operator's page.
//!
//! | verb | path | body / answer |
//! |---|---|---|
//! | GET | `/` | the operator's page (refreshes itself) |
//! | GET | `/metrics` | Prometheus text |
//! | GET | `/healthz` | `{"status":"ok"}` while the node serves; 503 `{"status":"degraded","upstreams_down":[...]}` while a link to an upstream reconnects; 503 `{"status":"at-risk","dirty_at_risk":{"exports","blocks","backend_error","room_error","disk_full","since_secs","stop_waiting"}}` while acknowledged dirty blocks can be neither written back nor kept ([`crate::risk`]) |
//! | GET | `/v1/node` | block size, capacity, allocation, level, uptime |
//! | GET | `/v1/exports` | exports, tenants, sizes, backends, hot tiers |
//! | PATCH | `/v1/exports/{export}/hot_tier` | `{"enabled","threshold"}`: placing on or off, the threshold set in place (candidates keep their counts; below one: 400 naming `hot_tier.threshold`; no tier: 409) |
//! | GET, POST | `/v1/caches` | list / create `{"name","size","eviction","write_policy","admission","profile","exclusive","dirty_ratio","dirty_bytes","log","durable"}` (201; 200 if it exists with the same settings, 409 naming what differs) |
//! | PATCH | `/v1/caches` | `{"caches": [{"cache", "patch"}, ...]}`: each entry as the single `PATCH` below, applied in order on one blocking task; answers 200 with `{"caches": [{"cache","status","info"|"error"}]}`, one per entry (a refused entry leaves its cache as it was, the others still apply; more than [`MAX_BATCH`] entries: 400) |
//! | GET, PATCH, DELETE | `/v1/caches/{id or name}` | stats / configure `{"size","eviction","write_policy","admission","exclusive","dirty_ratio","dirty_bytes"}` / remove |
//! | GET | `/v1/caches/{id or name}/curve?window=true&points=N` | online hit-ratio curve of the tenant the cache serves (`"status": "no data"` and no points before any access; 409 for a cache several tenants share) |
//! | GET, POST | `/v1/rules` | list / create `{"export","cache","client","op","range"}` |
//! | DELETE | `/v1/rules/{id}` | remove |
//! | GET | `/v1/tenants` | per (export, client) counters and latency percentiles |
//! | GET, PUT | `/v1/proportions` | proportions of the backend's service time `{"tenant": p, ...}` summing to one (unknown tenant: 404, bad value or sum: 400, naming `proportions.TENANT`) |
//! | GET | `/v1/observations` | per-tenant counters, latency and curves for a controller (see [`crate::observe`]) |
//! | POST | `/v1/demote/{export}` | demoted blocks from level 1, inserted clean without a disk write: records `offset u64 LE, length u32 LE, bytes` ([`crate::demote`]); answers `{"inserted","refreshed","skipped"}` |
//!
//! Every body is the `api` crate's type ([`api::node`], [`api::bandwidth`]).
//!
//! Every request but `/`, `/metrics` and `/healthz` needs `Authorization: Bearer TOKEN`
//! (see [`crate::auth`]); without it the answer is 401.
//!
//! A cache is named by its name or, if no cache has that name, by its id.
//!
//! Every error, a wrong method (405) and an unknown path (404) included, is a JSON object
//! `{"error": reason}` with a 4xx status for the caller's
//! mistakes (400 malformed or invalid, 404 unknown, 409 conflicts such as overlapping rules
//! or a size that does not fit) and 500 for the node's own failures. Verbs that may write
//! dirty blocks back (a patch leaving write-back, remove) run on the blocking pool.

use crate::config::{CacheSpec, RuleSpec};
use crate::error::NodeError;
use crate::state::ControlPlane;
use api::auth::Token;
use api::node::{
    CacheCurve, CachePatch, CachePatchEntry, CachePatchOutcome, CachesPatch, CachesPatched,
    CreateCache, CreateRule, CurvePoint, DemoteOutcome, NodeInfo, Proportions, Removed,
};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use cache::CacheError;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

type St = State<Arc<ControlPlane>>;

/// Most entries one `PATCH /v1/caches` may carry: the request's work on the node's
/// blocking pool is bounded like its body.
pub const MAX_BATCH: usize = 4096;

/// The status an error answers with.
fn status_of(e: &NodeError) -> StatusCode {
    match e {
        NodeError::NotFound(_) => StatusCode::NOT_FOUND,
        NodeError::Invalid(_) | NodeError::Config { .. } => StatusCode::BAD_REQUEST,
        NodeError::Conflict(_) => StatusCode::CONFLICT,
        NodeError::Cache(e) => match e {
            CacheError::UnknownCache(_)
            | CacheError::UnknownRule(_)
            | CacheError::UnknownExport(_) => StatusCode::NOT_FOUND,
            CacheError::Oversized { .. }
            | CacheError::RuleOverlap { .. }
            | CacheError::ExportExists(_)
            | CacheError::ExportInUse { .. }
            | CacheError::DirtyUnwritable { .. } => StatusCode::CONFLICT,
            CacheError::Io { .. } | CacheError::Log { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        },
        NodeError::Io(_) | NodeError::Listen { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for NodeError {
    fn into_response(self) -> Response {
        let status = status_of(&self);
        (status, Json(json!({ "error": self.to_string() }))).into_response()
    }
}

/// Parses a JSON body; the error names the line, column and field. serde names the
/// field of an unknown or missing key but not of a bad value (`"dirty_bytes": "lots"`),
/// so then each key is tried alone to find the one whose value is refused.
fn body<T: DeserializeOwned>(b: &Bytes) -> Result<T, NodeError> {
    serde_json::from_slice(b).map_err(|e| {
        let msg = e.to_string();
        let culprit = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(b)
            .ok()
            .and_then(|m| {
                m.into_iter().find_map(|(k, v)| {
                    let one = serde_json::Value::Object([(k.clone(), v)].into_iter().collect());
                    match serde_json::from_value::<T>(one) {
                        Err(e) if !e.to_string().starts_with("missing field") => Some(k),
                        _ => None,
                    }
                })
            });
        match culprit {
            Some(k) if !msg.contains(&format!("`{k}`")) => {
                NodeError::Invalid(format!("request body: {k}: {msg}"))
            }
            _ => NodeError::Invalid(format!("request body: {msg}")),
        }
    })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, NodeError> + Send + 'static,
) -> Result<T, NodeError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| NodeError::Io(std::io::Error::other(e)))?
}

/// The API's router over `state`, guarded by `token`.
pub fn router(state: Arc<ControlPlane>, token: Arc<Token>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/v1/node", get(node))
        .route("/v1/exports", get(exports))
        .route(
            "/v1/exports/{export}/hot_tier",
            axum::routing::patch(configure_hot_tier),
        )
        .route(
            "/v1/caches",
            get(list_caches)
                .post(create_cache)
                .patch(configure_caches),
        )
        .route(
            "/v1/caches/{cache}",
            get(get_cache).patch(configure_cache).delete(remove_cache),
        )
        .route("/v1/caches/{cache}/curve", get(curve))
        .route("/v1/rules", get(list_rules).post(create_rule))
        .route("/v1/rules/{id}", axum::routing::delete(remove_rule))
        .route("/v1/tenants", get(tenants))
        .route("/v1/proportions", get(get_proportions).put(set_proportions))
        .route("/v1/observations", get(observations))
        .route("/v1/demote/{export}", axum::routing::post(demote))
        .fallback(|| async {
            NodeError::NotFound("no such endpoint; see GET / for the API".into())
        })
        .method_not_allowed_fallback(|method: axum::http::Method, uri: axum::http::Uri| async move {
            (
                StatusCode::METHOD_NOT_ALLOWED,
                Json(json!({
                    "error": format!("{method} is not a verb of {}; see GET / for the API", uri.path())
                })),
            )
        })
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            crate::auth::guard(token),
            api::auth::server::require,
        ))
}

/// `ok` while every upstream link is up; `degraded` (503, naming the links that are
/// down) while one reconnects.
async fn healthz(State(s): St) -> impl IntoResponse {
    let down: Vec<serde_json::Value> = s
        .upstreams()
        .status()
        .into_iter()
        .filter(|(_, l)| !l.up)
        .map(|(export, l)| {
            json!({
                "export": export,
                "upstream": l.upstream,
                "down_secs": l.down_secs,
                "error": l.last_error,
            })
        })
        .collect();
    if let Some(r) = s.risk().status() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "at-risk", "dirty_at_risk": r, "upstreams_down": down })),
        );
    }
    if down.is_empty() {
        (StatusCode::OK, Json(json!({ "status": "ok" })))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "degraded", "upstreams_down": down })),
        )
    }
}

async fn page() -> Html<&'static str> {
    Html(crate::page::PAGE)
}

async fn metrics(State(s): St) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::metrics::render(&s),
    )
}

async fn node(State(s): St) -> Json<NodeInfo> {
    Json(NodeInfo {
        level: s.level(),
        block_size: s.cache_node().block_size() as u64,
        total_blocks: s.cache_node().total_blocks() as u64,
        allocated_blocks: s.cache_node().allocated_blocks() as u64,
        uptime_seconds: s.started().elapsed().as_secs_f64(),
        // Proportions are of the backend's service time, not of a byte budget.
        bandwidth_bytes_per_sec: 0,
        demote: s.demoter().counters(),
    })
}

async fn exports(State(s): St) -> Json<Vec<api::node::ExportInfo>> {
    Json(s.export_infos())
}

async fn configure_hot_tier(
    State(s): St,
    Path(export): Path<String>,
    b: Bytes,
) -> Result<impl IntoResponse, NodeError> {
    let patch: api::node::HotTierPatch = body(&b)?;
    Ok(Json(s.configure_hot_tier(&export, &patch)?))
}

async fn list_caches(State(s): St) -> impl IntoResponse {
    Json(s.caches())
}

async fn create_cache(State(s): St, b: Bytes) -> Result<impl IntoResponse, NodeError> {
    let spec = CacheSpec::try_from(body::<CreateCache>(&b)?)?;
    let st = s.clone();
    // A durable cache replays its write log first (backend I/O): on the blocking pool.
    let (id, created) = blocking(move || st.ensure_cache(&spec)).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(s.cache(id)?)))
}

async fn get_cache(State(s): St, Path(key): Path<String>) -> Result<impl IntoResponse, NodeError> {
    let id = s.resolve_cache(&key)?;
    Ok(Json(s.cache(id)?))
}

async fn configure_cache(
    State(s): St,
    Path(key): Path<String>,
    b: Bytes,
) -> Result<impl IntoResponse, NodeError> {
    let id = s.resolve_cache(&key)?;
    let patch: CachePatch = body(&b)?;
    let st = s.clone();
    blocking(move || st.configure_cache(id, &patch)).await?;
    Ok(Json(s.cache(id)?))
}

async fn configure_caches(State(s): St, b: Bytes) -> Result<impl IntoResponse, NodeError> {
    let batch: CachesPatch = body(&b)?;
    if batch.caches.len() > MAX_BATCH {
        return Err(NodeError::Invalid(format!(
            "caches: {} entries, at most {MAX_BATCH} in one request",
            batch.caches.len()
        )));
    }
    let outcomes = blocking(move || {
        let one = |e: &CachePatchEntry| {
            let id = s.resolve_cache(&e.cache)?;
            s.configure_cache(id, &e.patch)?;
            s.cache(id)
        };
        Ok(batch
            .caches
            .iter()
            .map(|e| match one(e) {
                Ok(info) => CachePatchOutcome {
                    cache: e.cache.clone(),
                    status: StatusCode::OK.as_u16(),
                    info: Some(info),
                    error: None,
                },
                Err(err) => CachePatchOutcome {
                    cache: e.cache.clone(),
                    status: status_of(&err).as_u16(),
                    info: None,
                    error: Some(err.to_string()),
                },
            })
            .collect())
    })
    .await?;
    Ok(Json(CachesPatched { caches: outcomes }))
}

async fn remove_cache(
    State(s): St,
    Path(key): Path<String>,
) -> Result<impl IntoResponse, NodeError> {
    let id = s.resolve_cache(&key)?;
    blocking(move || s.remove_cache(id)).await?;
    Ok(Json(Removed { removed: id }))
}

/// Parses the curve's query (`window=true|false`, `points=N`); a bad value is a 400
/// naming the parameter.
fn curve_query(q: &BTreeMap<String, String>) -> Result<(bool, usize), NodeError> {
    let mut window = false;
    let mut points = 40;
    for (k, v) in q {
        match k.as_str() {
            "window" => {
                window = v.parse().map_err(|_| {
                    NodeError::Invalid(format!("window: `{v}` is not true or false"))
                })?
            }
            "points" => {
                points = v.parse().map_err(|_| {
                    NodeError::Invalid(format!("points: `{v}` is not a number of points"))
                })?
            }
            other => {
                return Err(NodeError::Invalid(format!(
                    "unknown query parameter `{other}` (window, points)"
                )))
            }
        }
    }
    Ok((window, points))
}

async fn curve(
    State(s): St,
    Path(key): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<impl IntoResponse, NodeError> {
    let (window, points) = curve_query(&q)?;
    let id = s.resolve_cache(&key)?;
    let c = s.curve(id, window, points)?;
    Ok(Json(CacheCurve {
        cache: id,
        windowed: window,
        block_size: s.cache_node().block_size() as u64,
        status: if c.is_some() { "ok" } else { "no data" }.into(),
        points: c.map_or_else(Vec::new, |c| {
            c.points()
                .iter()
                .map(|p| CurvePoint {
                    cache_size: p.cache_size,
                    miss_ratio: p.miss_ratio,
                })
                .collect()
        }),
    }))
}

async fn list_rules(State(s): St) -> impl IntoResponse {
    Json(s.rules())
}

async fn create_rule(State(s): St, b: Bytes) -> Result<impl IntoResponse, NodeError> {
    let spec = RuleSpec::from(body::<CreateRule>(&b)?);
    let st = s.clone();
    let id = blocking(move || st.create_rule(&spec)).await?;
    let rule = s.rules().into_iter().find(|r| r.id == id);
    Ok((StatusCode::CREATED, Json(rule)))
}

async fn remove_rule(State(s): St, Path(id): Path<String>) -> Result<impl IntoResponse, NodeError> {
    let id: u64 = id
        .parse()
        .map_err(|_| NodeError::Invalid(format!("rule id `{id}` is not a number")))?;
    blocking(move || s.remove_rule(id)).await?;
    Ok(Json(Removed { removed: id }))
}

async fn observations(State(s): St) -> impl IntoResponse {
    Json(s.observations())
}

async fn tenants(State(s): St) -> impl IntoResponse {
    Json(s.tenants())
}

async fn get_proportions(State(s): St) -> Json<api::bandwidth::ProportionsView> {
    let b = s.bandwidth();
    let proportions = b.proportions();
    Json(api::bandwidth::ProportionsView {
        backend_depth: b.depth(),
        backend: b
            .stats()
            .into_iter()
            .map(|(t, u)| {
                let view = api::bandwidth::BackendView {
                    requests: u.requests,
                    bytes: u.bytes,
                    service_ms: u.service_ns as f64 / 1e6,
                    queue_ms: u.queue_ns as f64 / 1e6,
                    proportion: proportions.get(&t).copied(),
                };
                (t, view)
            })
            .collect(),
        proportions,
    })
}

async fn set_proportions(State(s): St, b: Bytes) -> Result<impl IntoResponse, NodeError> {
    let p: Proportions = body(&b)?;
    let known = s.tenant_names();
    if let Some(t) = p.keys().find(|t| !known.contains(t)) {
        return Err(NodeError::NotFound(format!(
            "proportions.{t}: no export of this node belongs to tenant `{t}`; known tenants: {}",
            known.join(", ")
        )));
    }
    s.bandwidth()
        .set_proportions(p)
        .map_err(|e| NodeError::Invalid(e.to_string()))?;
    Ok(Json(s.bandwidth().proportions()))
}

/// Whether `export` of this node takes demoted blocks: only on a level-2 node, and only
/// when every cache its rules route to is an exclusive lower cache (elsewhere a demoted
/// block would be served as data the backend never held). An unknown export is left to
/// the insert, which names it (404).
fn demotable(s: &ControlPlane, export: &str) -> Result<(), NodeError> {
    if !s.exports().any(|e| e.name == export) {
        return Ok(());
    }
    if s.level() < 2 {
        return Err(NodeError::Conflict(format!(
            "this node is level {}: it takes no demoted blocks (only a level-2 node below an \
             exclusive level 1 does)",
            s.level()
        )));
    }
    let caches = s.caches();
    let routed: Vec<&api::node::CacheInfo> = s
        .rules()
        .into_iter()
        .filter(|r| r.export == export)
        .filter_map(|r| caches.iter().find(|c| c.id == r.cache))
        .collect();
    let not_lower: Vec<&str> = routed
        .iter()
        .filter(|c| c.stats.exclusive != "lower")
        .map(|c| c.name.as_str())
        .collect();
    if routed.is_empty() || !not_lower.is_empty() {
        return Err(NodeError::Conflict(format!(
            "export `{export}` takes no demoted blocks: its cache(s) {} are not exclusive \
             (`exclusive = true` on a level-2 node)",
            if routed.is_empty() {
                "(none)".to_string()
            } else {
                not_lower.join(", ")
            }
        )));
    }
    Ok(())
}

async fn demote(
    State(s): St,
    Path(export): Path<String>,
    b: Bytes,
) -> Result<impl IntoResponse, NodeError> {
    demotable(&s, &export)?;
    let out = blocking(move || {
        let records = crate::demote::decode(&b)
            .map_err(|e| NodeError::Invalid(format!("demote body: {e}")))?;
        let mut out = cache::DemoteOutcome::default();
        for (i, (offset, data)) in records.into_iter().enumerate() {
            let o = s
                .cache_node()
                .insert_clean(&export, offset, data)
                .map_err(|e| match e {
                    CacheError::OutOfRange { .. } => {
                        NodeError::Invalid(format!("demote body: record {i}: {e}"))
                    }
                    e => NodeError::Cache(e),
                })?;
            out.inserted += o.inserted;
            out.refreshed += o.refreshed;
            out.skipped += o.skipped;
        }
        Ok(out)
    })
    .await?;
    Ok(Json(DemoteOutcome {
        inserted: out.inserted,
        refreshed: out.refreshed,
        skipped: out.skipped,
    }))
}
