//! Registration with a controller and the heartbeat that follows it.
//!
//! With `[node] controller = "http://HOST:PORT"` the node, once its listeners are up,
//! `POST`s `{controller}/v1/nodes/register` with what a controller needs to drive it
//! ([`Registration`]: name, level, API and NBD addresses, cache and block size, epoch,
//! exports, and the node's own API token), then every `heartbeat_secs`
//! `POST {controller}/v1/nodes/{name}/heartbeat` with `{"epoch", "uptime_ms"}`. Both carry
//! `Authorization: Bearer` the token read from `controller_token_file`, if one is given.
//!
//! A heartbeat answered 404 means the controller does not know the node (it restarted,
//! or forgot it): the node registers again at once. Any failure (no controller listening,
//! a timeout, a 5xx) is logged as a warning when it first happens or changes, and retried
//! at the next beat; it never stops or slows the node. HTTP calls are blocking (`ureq`,
//! with a timeout of the beat interval, at most 5 s) and run on the blocking pool.

use crate::state::NodeState;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// One export in the registration.
#[derive(Clone, Debug, Serialize)]
pub struct ExportEntry {
    /// NBD export name.
    pub name: String,
    /// Owning tenant.
    pub tenant: String,
    /// Size in bytes.
    pub size: u64,
}

/// The body of `POST /v1/nodes/register`.
#[derive(Clone, Debug, Serialize)]
pub struct Registration {
    /// The node's name.
    pub name: String,
    /// Its level.
    pub level: u8,
    /// `http://host:port` of its API.
    pub api: String,
    /// `host:port` of its NBD listener.
    pub nbd: String,
    /// Memory for all caches, bytes.
    pub cache_size: u64,
    /// Cache block size, bytes.
    pub block_size: u64,
    /// Chosen at start; changes on restart.
    pub epoch: String,
    /// Its exports.
    pub exports: Vec<ExportEntry>,
    /// The node's API token, for the controller's calls back.
    pub token: String,
}

/// Where and how to reach the controller.
#[derive(Clone, Debug)]
pub struct ControllerLink {
    /// `http://HOST:PORT`, without a trailing slash.
    pub url: String,
    /// The controller's bearer token, if it wants one.
    pub token: Option<String>,
    /// Time between heartbeats.
    pub every: Duration,
}

/// What registering or beating gave.
#[derive(Debug, PartialEq)]
enum Beat {
    Ok,
    Unknown,
    Failed(String),
}

fn post(link: &ControllerLink, path: &str, body: &impl Serialize) -> Beat {
    let timeout = link.every.min(Duration::from_secs(5));
    let agent = ureq::AgentBuilder::new().timeout(timeout).build();
    let mut req = agent.post(&format!("{}{path}", link.url));
    if let Some(t) = &link.token {
        req = req.set("authorization", &format!("Bearer {t}"));
    }
    match req.send_json(body) {
        Ok(_) => Beat::Ok,
        Err(ureq::Error::Status(404, _)) => Beat::Unknown,
        Err(ureq::Error::Status(code, r)) => {
            let text = r.into_string().unwrap_or_default();
            Beat::Failed(format!("{path}: HTTP {code} {}", text.trim()))
        }
        Err(e) => Beat::Failed(format!("{path}: {e}")),
    }
}

/// The registration of `state`, listening at `api` and `nbd`, known by `token`.
pub fn registration(
    state: &NodeState,
    api: std::net::SocketAddr,
    nbd: std::net::SocketAddr,
    token: &str,
) -> Registration {
    let bs = state.cache.block_size() as u64;
    Registration {
        name: state.name.clone(),
        level: state.level,
        api: format!("http://{api}"),
        nbd: nbd.to_string(),
        cache_size: state.cache.total_blocks() as u64 * bs,
        block_size: bs,
        epoch: state.epoch.clone(),
        exports: state
            .exports()
            .map(|e| ExportEntry {
                name: e.name.clone(),
                tenant: e.tenant.clone(),
                size: e.size,
            })
            .collect(),
        token: token.to_string(),
    }
}

/// Registers and beats until `stop` fires (or its sender is dropped).
pub fn spawn(
    state: Arc<NodeState>,
    link: ControllerLink,
    reg: Registration,
    mut stop: oneshot::Receiver<()>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let link = Arc::new(link);
        let reg = Arc::new(reg);
        let beat_path = format!("/v1/nodes/{}/heartbeat", reg.name);
        let mut registered = false;
        let mut last_error: Option<String> = None;
        loop {
            let (l, r, st, path) = (link.clone(), reg.clone(), state.clone(), beat_path.clone());
            let was_registered = registered;
            let outcome = tokio::task::spawn_blocking(move || {
                if was_registered {
                    let hb = serde_json::json!({
                        "epoch": st.epoch,
                        "uptime_ms": st.started.elapsed().as_millis() as u64,
                    });
                    match post(&l, &path, &hb) {
                        // Forgotten: register again at once.
                        Beat::Unknown => (false, post(&l, "/v1/nodes/register", &*r)),
                        b => (true, b),
                    }
                } else {
                    (false, post(&l, "/v1/nodes/register", &*r))
                }
            })
            .await
            .unwrap_or_else(|e| (false, Beat::Failed(e.to_string())));
            match outcome {
                (_, Beat::Ok) => {
                    if !was_registered || !outcome.0 {
                        tracing::info!(controller = %link.url, name = %reg.name, "registered with the controller");
                    }
                    if last_error.take().is_some() {
                        tracing::info!(controller = %link.url, "controller reachable again");
                    }
                    registered = true;
                }
                (_, Beat::Unknown) => {
                    registered = false;
                    let e = format!("{}: registration answered 404", link.url);
                    if last_error.as_deref() != Some(e.as_str()) {
                        tracing::warn!(error = %e, "controller refused the registration");
                    }
                    last_error = Some(e);
                }
                (still, Beat::Failed(e)) => {
                    registered = still;
                    if last_error.as_deref() != Some(e.as_str()) {
                        tracing::warn!(controller = %link.url, error = %e, "controller unreachable; retrying");
                    } else {
                        tracing::debug!(controller = %link.url, error = %e, "controller still unreachable");
                    }
                    last_error = Some(e);
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(link.every) => {}
                _ = &mut stop => return,
            }
        }
    })
}
