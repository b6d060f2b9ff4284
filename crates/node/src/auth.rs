//! Credentials of the HTTP API: one bearer token per node.
//!
//! Every request must carry `Authorization: Bearer TOKEN`, except the ones an operator or
//! a scraper needs before it has the token and that reveal or change nothing that matters:
//! `GET /metrics` (Prometheus), `GET /healthz` (liveness) and the operator's page itself
//! (`GET /`, static HTML and JavaScript; the data it shows comes from the guarded
//! endpoints, and the page sends the token it was given in its `#token=` fragment).
//! A missing or wrong token is answered 401 with `{"error": reason}`; tokens are compared
//! in constant time so the answer's timing does not leak how much of a guess was right
//! (the check and the 401 are `api::auth`'s, shared with the controller).
//!
//! Where the token comes from ([`load`]):
//! * `[node] api_token_file` names a file holding it (surrounding whitespace ignored);
//! * otherwise `api.token` in the data directory, created on first start with 32 random
//!   bytes from the kernel in hex and mode 0600, and reused on every later start.
//!
//! A node whose API listens on anything but a loopback address must be given an explicit
//! `api_token_file` ([`check_exposure`]): a token generated into the data directory is
//! fine for one machine, but an API reachable from the network is a deliberate choice the
//! operator makes, with a token they manage.

use crate::config::NodeConfig;
use crate::error::NodeError;
use api::auth::server::Guard;
use api::auth::{Token, TokenError};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

/// Paths served without a token.
const OPEN: &[&str] = &["/", "/metrics", "/healthz"];

/// The name of the generated token file in the data directory.
pub const TOKEN_FILE: &str = "api.token";

/// The reason a request without credentials is given.
const MISSING: &str = "missing credentials: send `Authorization: Bearer TOKEN` (the token is in \
                       the node's api.token file)";

fn config_err(msg: String) -> NodeError {
    NodeError::Config {
        file: "node.toml".into(),
        msg,
    }
}

/// Reads the token from `[node] api_token_file`, or from the data directory's
/// `api.token`, generating that file (0600) if it does not exist.
pub fn load(cfg: &NodeConfig) -> Result<Token, NodeError> {
    if let Some(f) = &cfg.node.api_token_file {
        return Token::read(&cfg.path(f))
            .map_err(|e| config_err(format!("node.api_token_file: {e}")));
    }
    let file = cfg.path(Path::new(TOKEN_FILE));
    if file.exists() {
        return Token::read(&file).map_err(|e| config_err(e.to_string()));
    }
    let token = Token::generate(&file).map_err(|e| match e {
        TokenError::Io { .. } => NodeError::Io(e.into()),
        TokenError::Invalid { .. } => config_err(e.to_string()),
    })?;
    tracing::info!(file = %file.display(), "generated the API token");
    Ok(token)
}

/// The secret in token file `file` (an upstream's, the controller's).
pub(crate) fn read_token(file: &Path) -> Result<String, TokenError> {
    Token::read(file).map(|t| t.secret().to_string())
}

/// What the API's middleware (`api::auth::server::require`) guards with.
pub fn guard(token: Arc<Token>) -> Arc<Guard> {
    Arc::new(Guard {
        token,
        open: OPEN,
        missing: MISSING,
    })
}

/// Refuses an API listening on a non-loopback address unless the configuration names
/// its token file explicitly.
pub fn check_exposure(cfg: &NodeConfig, bound: SocketAddr) -> Result<(), NodeError> {
    if bound.ip().is_loopback() || cfg.node.api_token_file.is_some() {
        return Ok(());
    }
    Err(config_err(format!(
        "node.api = \"{}\" is reachable from other machines ({bound}); set \
         node.api_token_file to a token file you manage, or listen on 127.0.0.1",
        cfg.node.api
    )))
}

/// Refuses an NBD listener reachable from other machines (`bound` not loopback) while an
/// export has no allow-list and TLS is off, unless `[node] allow_anyone = true` says the
/// operator means it: otherwise anyone who can reach the port reads and writes the data.
pub fn check_nbd_exposure(cfg: &NodeConfig, bound: SocketAddr) -> Result<(), NodeError> {
    if bound.ip().is_loopback() || cfg.node.allow_anyone || cfg.node.tls != "off" {
        return Ok(());
    }
    let open: Vec<&str> = cfg
        .exports
        .iter()
        .filter(|e| e.allow.is_none())
        .map(|e| e.name.as_str())
        .collect();
    if open.is_empty() {
        return Ok(());
    }
    Err(config_err(format!(
        "node.nbd = \"{}\" is reachable from other machines ({bound}) and export(s) {} have \
         no allow-list, with node.tls off: anyone who reaches the port could read and write \
         them. Give each export an `allow` list, set node.tls, listen on 127.0.0.1, or set \
         node.allow_anyone = true if that is meant",
        cfg.node.nbd,
        open.join(", ")
    )))
}
