//! The controller's HTTP API and console.
//!
//! | verb | path | body / answer |
//! |---|---|---|
//! | GET | `/` | the operator's console (static page; polls the endpoints below) |
//! | GET | `/healthz` | `{"status":"ok"}` |
//! | GET | `/v1/status` | scheme, store, interval, whether this replica leads and who does (`replica`: `{me, leading, leader, leader_api}`, `null` for a sole controller), the last interval's table |
//! | GET, POST | `/v1/tenants` | list (with status) / create a tenant (`TenantConfig`) |
//! | GET, PUT, DELETE | `/v1/tenants/{t}` | one / replace / remove |
//! | PUT | `/v1/tenants/{t}/slo` | `{"slo": {"latency_ms": 2.0} or {"p99_ms": 5} or null, "class": "gold"}` |
//! | GET | `/v1/nodes` | the registry and each node's health (`up`, `suspect`: why its counters are not believed, `degraded`: the upstream links it reports down) |
//! | POST | `/v1/nodes/register` | a node's registration (see `registry`) |
//! | POST | `/v1/nodes/{n}/heartbeat` | `{"epoch","uptime_ms"}`; 404 = register again |
//! | GET | `/v1/plan` | the last plan with every reason |
//! | GET | `/v1/history?tenant=T&limit=N` | decisions kept in the store |
//! | GET | `/v1/explain/{t}` | a tenant's plan, measurements, curves and shortfall |
//! | GET | `/v1/series` | the intervals kept in memory (console charts) |
//! | GET | `/v1/curves` | per volume its curves and planned size |
//!
//! Every body a program sends or reads is the `api` crate's type ([`api::controller`]):
//! registration, heartbeat, SLO changes, rows, history, tenants, status, intervals, nodes,
//! the plan (by name), explanations and curves.
//!
//! Errors are `{"error": reason}` naming the field: 400 malformed or invalid, 404 unknown,
//! 409 conflicts (also: a change sent to a standby replica, naming the leader), 500 the
//! controller's own failures. A rejected change writes nothing.

use crate::config::TenantConfig;
use crate::service::{Service, ServiceError};
use ::api::auth::Token;
use api::controller::{Heartbeat, Registration, SetSlo};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde_json::json;
use std::sync::Arc;

type St = State<Arc<Service>>;

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let status = match &self {
            ServiceError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ServiceError::NotFound(_) => StatusCode::NOT_FOUND,
            ServiceError::Conflict(_) => StatusCode::CONFLICT,
            ServiceError::Store(_) | ServiceError::Control(_) | ServiceError::Internal(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        (status, Json(json!({ "error": self.to_string() }))).into_response()
    }
}

fn body<T: DeserializeOwned>(b: &Bytes) -> Result<T, ServiceError> {
    serde_json::from_slice(b).map_err(|e| ServiceError::BadRequest(format!("request body: {e}")))
}

/// The router over `svc`, guarded by `token`.
pub fn router(svc: Arc<Service>, token: Arc<Token>) -> Router {
    Router::new()
        .route("/", get(|| async { Html(crate::console::PAGE) }))
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/v1/status", get(status))
        .route("/v1/tenants", get(tenants).post(create_tenant))
        .route(
            "/v1/tenants/{t}",
            get(tenant).put(replace_tenant).delete(delete_tenant),
        )
        .route("/v1/tenants/{t}/slo", put(set_slo))
        .route("/v1/nodes", get(nodes))
        .route("/v1/nodes/register", post(register))
        .route("/v1/nodes/{n}/heartbeat", post(heartbeat))
        .route("/v1/plan", get(plan))
        .route("/v1/history", get(history))
        .route("/v1/explain/{t}", get(explain))
        .route("/v1/series", get(series))
        .route("/v1/curves", get(curves))
        .fallback(|| async { ServiceError::NotFound("no such endpoint".into()) })
        .with_state(svc)
        .layer(axum::middleware::from_fn_with_state(
            crate::auth::guard(token),
            ::api::auth::server::require,
        ))
}

async fn status(State(s): St) -> Json<api::controller::Status> {
    Json(s.status())
}

async fn tenants(State(s): St) -> impl IntoResponse {
    Json(s.tenants())
}

async fn tenant(State(s): St, Path(t): Path<String>) -> Result<impl IntoResponse, ServiceError> {
    Ok(Json(s.tenant(&t)?))
}

async fn create_tenant(State(s): St, b: Bytes) -> Result<impl IntoResponse, ServiceError> {
    let spec: TenantConfig = body(&b)?;
    let name = spec.name.clone();
    s.put_tenant(spec, true)?;
    Ok((StatusCode::CREATED, Json(s.tenant(&name)?)))
}

async fn replace_tenant(
    State(s): St,
    Path(t): Path<String>,
    b: Bytes,
) -> Result<impl IntoResponse, ServiceError> {
    let spec: TenantConfig = body(&b)?;
    if spec.name != t {
        return Err(ServiceError::BadRequest(format!(
            "name: the body names `{}`, the path `{t}`",
            spec.name
        )));
    }
    s.put_tenant(spec, false)?;
    Ok(Json(s.tenant(&t)?))
}

async fn delete_tenant(
    State(s): St,
    Path(t): Path<String>,
) -> Result<impl IntoResponse, ServiceError> {
    s.delete_tenant(&t)?;
    Ok(Json(json!({"removed": t})))
}

async fn set_slo(
    State(s): St,
    Path(t): Path<String>,
    b: Bytes,
) -> Result<impl IntoResponse, ServiceError> {
    let v: SetSlo<control::Slo> = body(&b)?;
    s.set_slo(&t, v.slo, v.class)?;
    Ok(Json(s.tenant(&t)?))
}

async fn nodes(State(s): St) -> Json<Vec<api::controller::NodeView>> {
    Json(s.nodes().iter().map(crate::wire::node_view).collect())
}

async fn register(State(s): St, b: Bytes) -> Result<impl IntoResponse, ServiceError> {
    let r: Registration = body(&b)?;
    Ok(Json(s.register(r)?))
}

async fn heartbeat(
    State(s): St,
    Path(n): Path<String>,
    b: Bytes,
) -> Result<impl IntoResponse, ServiceError> {
    let h: Heartbeat = body(&b)?;
    s.heartbeat(&n, h)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn plan(State(s): St) -> Result<impl IntoResponse, ServiceError> {
    s.plan_view().map(Json).ok_or_else(|| {
        ServiceError::NotFound("no plan yet: the first interval has not ended".into())
    })
}

#[derive(serde::Deserialize)]
struct HistoryQuery {
    tenant: Option<String>,
    limit: Option<usize>,
}

async fn history(
    State(s): St,
    Query(q): Query<HistoryQuery>,
) -> Result<impl IntoResponse, ServiceError> {
    let limit = q.limit.unwrap_or(100).min(10_000);
    Ok(Json(s.history(q.tenant.as_deref(), limit)?))
}

async fn explain(State(s): St, Path(t): Path<String>) -> Result<impl IntoResponse, ServiceError> {
    Ok(Json(s.explain(&t)?))
}

async fn series(State(s): St) -> impl IntoResponse {
    Json(s.series())
}

async fn curves(State(s): St) -> impl IntoResponse {
    Json(s.curves())
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::controller::{Row, TenantHead, TenantView};

    /// What `lachesis ctl` sends and reads is what this API reads and writes.
    #[test]
    fn ctl_and_the_controller_share_the_contract() {
        // `ctl slo T --set '{"latency_ms": 2.0}' --class gold`.
        let sent = SetSlo::<serde_json::Value> {
            slo: Some(serde_json::json!({"latency_ms": 2.0})),
            class: Some("gold".into()),
        };
        let got: SetSlo<control::Slo> =
            serde_json::from_value(serde_json::to_value(&sent).unwrap()).unwrap();
        assert_eq!(got.slo, Some(control::Slo::LatencyMs(2.0)));
        assert_eq!(got.class.as_deref(), Some("gold"));
        // A tail SLO, as `ctl slo T --set '{"p99_ms": 5}'` sends it.
        let got: SetSlo<control::Slo> =
            serde_json::from_value(serde_json::json!({"slo": {"p99_ms": 5}, "class": null}))
                .unwrap();
        assert_eq!(got.slo, Some(control::Slo::P99Ms(5.0)));
        // `--set null` without a class.
        let got: SetSlo<control::Slo> =
            serde_json::from_value(serde_json::json!({"slo": null, "class": null})).unwrap();
        assert_eq!((got.slo, got.class), (None, None));

        // A tenant as `GET /v1/tenants/{t}` writes it, read as `ctl` reads it.
        let spec: TenantConfig = serde_json::from_value(serde_json::json!({
            "name": "t1", "slo": {"latency_ms": 2.0}, "class": "gold",
            "volume": [{"name": "v1", "host": "h", "servers": ["a", "b"]}]
        }))
        .unwrap();
        let view = crate::service::TenantView {
            spec,
            status: vec![Row {
                tenant: "v1".into(),
                owner: "t1".into(),
                slo_met: Some(true),
                l1_size: 1 << 20,
                ..Default::default()
            }],
        };
        let text = serde_json::to_string(&view).unwrap();
        let read: TenantView<TenantHead> = serde_json::from_str(&text).unwrap();
        assert_eq!(read.spec.name, "t1");
        assert_eq!(read.spec.class.as_deref(), Some("gold"));
        assert_eq!(read.spec.slo, Some(serde_json::json!({"latency_ms": 2.0})));
        assert_eq!(read.status, view.status);
        // `--json` prints all of it.
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            serde_json::to_value(&view).unwrap()
        );
        // And the controller reads its own answer back (the store keeps tenants so).
        let back: crate::service::TenantView = serde_json::from_str(&text).unwrap();
        assert_eq!(back.spec, view.spec);
    }
}
