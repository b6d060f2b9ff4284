//! How `ctl` calls: the tokens (flag, environment, default file), one call named by its
//! method and path when it fails (with what to do about a 401 or a peer not running), and
//! JSON printed pretty.

use anyhow::{anyhow, Context};
use api::client::{CallError, ControllerClient, NodeClient};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// Where `ctl` looks for the token when neither `--token-file` nor `LACHESIS_TOKEN` gives it.
pub(super) const DEFAULT_TOKEN_FILE: &str = "lachesis-data/api.token";

/// The token from `--token-file`, `LACHESIS_TOKEN` or the default file, if any.
pub(super) fn token(file: Option<PathBuf>) -> anyhow::Result<Option<String>> {
    let read = |f: &PathBuf| -> anyhow::Result<String> {
        let t = std::fs::read_to_string(f)
            .with_context(|| format!("reading the API token from {}", f.display()))?;
        Ok(t.trim().to_string())
    };
    if let Some(f) = file {
        return read(&f).map(Some);
    }
    if let Ok(t) = std::env::var("LACHESIS_TOKEN") {
        return Ok(Some(t.trim().to_string()));
    }
    let f = PathBuf::from(DEFAULT_TOKEN_FILE);
    if f.exists() {
        return read(&f).map(Some);
    }
    Ok(None)
}

/// The controller's token from the flag, `LACHESIS_CONTROLLER_TOKEN` or the default file.
pub(super) fn controller_token(file: Option<PathBuf>) -> anyhow::Result<Option<String>> {
    if let Some(f) = file {
        let t = std::fs::read_to_string(&f)
            .with_context(|| format!("reading the controller token from {}", f.display()))?;
        return Ok(Some(t.trim().to_string()));
    }
    if let Ok(t) = std::env::var("LACHESIS_CONTROLLER_TOKEN") {
        return Ok(Some(t.trim().to_string()));
    }
    let f = PathBuf::from("controller-data/controller.token");
    Ok(std::fs::read_to_string(&f)
        .ok()
        .map(|t| t.trim().to_string()))
}

/// How long one call may take: long, since a removal or a resize writes dirty blocks back
/// before the node answers, and a person can interrupt.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(3600);

/// A failed call as `ctl` reports it: the verb, the path and the peer's reason.
fn failed(method: &str, base: &str, path: &str, e: CallError) -> anyhow::Error {
    match &e {
        CallError::Status { status: 401, .. } => anyhow!(
            "{method} {path}: 401: {} (give the node's api.token with --token-file FILE or \
             LACHESIS_TOKEN)",
            e.reason()
        ),
        CallError::Status { status, .. } => anyhow!("{method} {path}: {status}: {}", e.reason()),
        CallError::Transport(m) => {
            anyhow!("{method} {base}{path}: {m} (is `lachesis serve` running?)")
        }
        CallError::Contract { .. } => anyhow!("{method} {base}{path}: reading the answer: {e}"),
    }
}

/// Runs one node call, naming `method path` if it fails.
pub(super) fn node_call<T>(
    c: &NodeClient,
    method: &str,
    path: &str,
    f: impl FnOnce(&NodeClient) -> Result<T, CallError>,
) -> anyhow::Result<T> {
    f(c).map_err(|e| failed(method, &c.base, path, e))
}

/// Runs one controller call, naming `method path` if it fails.
pub(super) fn controller_call<T>(
    c: &ControllerClient,
    method: &str,
    path: &str,
    f: impl FnOnce(&ControllerClient) -> Result<T, CallError>,
) -> anyhow::Result<T> {
    f(c).map_err(|e| failed(method, &c.base, path, e))
}

pub(super) fn print(v: &impl Serialize) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}
