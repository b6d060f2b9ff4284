//! Registration with a controller and the heartbeat that follows it.
//!
//! With `[node] controller = "http://HOST:PORT"` the node, once its listeners are up,
//! `POST`s `{controller}/v1/nodes/register` with what a controller needs to drive it
//! (`api::controller::Registration`: name, level, API and NBD addresses, cache and block
//! size, epoch, exports, and the node's own API token), then every `heartbeat`
//! `POST {controller}/v1/nodes/{name}/heartbeat` with `api::controller::Heartbeat`
//! (`{"epoch", "uptime_ms"}`), both through `api::client::ControllerClient`. Both carry
//! `Authorization: Bearer` the token read from `controller_token_file`, if one is given.
//!
//! A heartbeat answered 404 means the controller does not know the node (it restarted,
//! or forgot it): the node registers again at once. Any failure (no controller listening,
//! a timeout, a 5xx) is logged as a warning when it first happens or changes, and retried
//! at the next beat; it never stops or slows the node. HTTP calls are blocking (`ureq`,
//! with a timeout of the beat interval, at most 5 s) and run on the blocking pool.

use crate::state::ControlPlane;
use api::client::{CallError, ControllerClient};
use api::controller::{ExportRef, Heartbeat, Registration};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

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

/// One call to the controller, as a beat's outcome.
fn outcome(path: &str, r: Result<(), CallError>) -> Beat {
    match r {
        Ok(()) => Beat::Ok,
        Err(CallError::Status { status: 404, .. }) => Beat::Unknown,
        Err(CallError::Status { status, body }) => {
            Beat::Failed(format!("{path}: HTTP {status} {}", body.trim()))
        }
        Err(e) => Beat::Failed(format!("{path}: {e}")),
    }
}

fn client(link: &ControllerLink) -> ControllerClient {
    ControllerClient::new(
        &link.url,
        link.token.as_deref(),
        link.every.min(Duration::from_secs(5)),
    )
}

fn register(link: &ControllerLink, reg: &Registration) -> Beat {
    outcome("/v1/nodes/register", client(link).register(reg))
}

/// The name a node without `[node] name` goes by: this machine's host name and the API's
/// port (`db-host-10810`), made to follow the one rule for names ([`api::names`]: every
/// other character becomes `-`, a leading `.` goes, at most 64 bytes), so a controller
/// accepts it and two machines listening on the same port are told apart. A host name
/// that cannot be read is `node`.
pub fn default_name(api: std::net::SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    name_of(host.trim(), api.port())
}

/// `HOST-PORT` following the name rule (see [`default_name`]).
fn name_of(host: &str, port: u16) -> String {
    let port = format!("-{port}");
    let mut h: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    h = h.trim_start_matches('.').to_string();
    if h.is_empty() {
        h = "node".into();
    }
    h.truncate(api::names::MAX_LEN - port.len());
    h + &port
}

/// The registration of `state`, listening at `api` and `nbd`, known by `token`.
pub fn registration(
    state: &ControlPlane,
    api: std::net::SocketAddr,
    nbd: std::net::SocketAddr,
    token: &str,
) -> Registration {
    let bs = state.cache_node().block_size() as u64;
    Registration {
        name: state.name().to_string(),
        level: state.level(),
        api: format!("http://{api}"),
        nbd: Some(nbd.to_string()),
        cache_size: state.cache_node().total_blocks() as u64 * bs,
        block_size: bs,
        epoch: state.epoch().to_string(),
        exports: state
            .exports()
            .map(|e| ExportRef {
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
    state: Arc<ControlPlane>,
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
                    let hb = Heartbeat {
                        epoch: st.epoch().to_string(),
                        uptime_ms: st.started().elapsed().as_millis() as u64,
                    };
                    match outcome(&path, client(&l).heartbeat(&r.name, &hb)) {
                        // Forgotten: register again at once.
                        Beat::Unknown => (false, register(&l, &r)),
                        b => (true, b),
                    }
                } else {
                    (false, register(&l, &r))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_name_follows_the_name_rule() {
        for (host, port, want) in [
            ("db-host", 10810, "db-host-10810"),
            ("web.example.org", 1, "web.example.org-1"),
            (".hidden", 7, "hidden-7"),
            ("", 80, "node-80"),
            ("ünï cødé", 9, "-n--c-d--9"),
        ] {
            let n = name_of(host, port);
            assert_eq!(n, want);
            assert!(api::names::is_valid(&n), "{n}");
        }
        let long = name_of(&"h".repeat(100), 65535);
        assert!(long.len() == 64 && long.ends_with("-65535"), "{long}");
        let here = default_name("127.0.0.1:10810".parse().unwrap());
        assert!(
            api::names::is_valid(&here) && here.ends_with("-10810"),
            "{here}"
        );
        // What a node was named before: its API address, which the rule refuses.
        assert!(!api::names::is_valid("127.0.0.1:10810"));
    }
}
