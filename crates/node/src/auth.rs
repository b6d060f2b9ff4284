//! Credentials of the HTTP API: one bearer token per node.
//!
//! Every request must carry `Authorization: Bearer TOKEN`, except the ones an operator or
//! a scraper needs before it has the token and that reveal or change nothing that matters:
//! `GET /metrics` (Prometheus), `GET /healthz` (liveness) and the operator's page itself
//! (`GET /`, static HTML and JavaScript; the data it shows comes from the guarded
//! endpoints, and the page sends the token it was given in its `#token=` fragment).
//! A missing or wrong token is answered 401 with `{"error": reason}`; tokens are compared
//! in constant time so the answer's timing does not leak how much of a guess was right.
//!
//! Where the token comes from ([`ApiToken::load`]):
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
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Paths served without a token.
const OPEN: &[&str] = &["/", "/metrics", "/healthz"];

/// The name of the generated token file in the data directory.
pub const TOKEN_FILE: &str = "api.token";

/// The API's bearer token and the file it was read from.
#[derive(Clone)]
pub struct ApiToken {
    secret: String,
    /// The file holding the token.
    pub file: PathBuf,
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("file", &self.file)
            .finish()
    }
}

fn config_err(msg: String) -> NodeError {
    NodeError::Config {
        file: "node.toml".into(),
        msg,
    }
}

impl ApiToken {
    /// Reads the token from `[node] api_token_file`, or from the data directory's
    /// `api.token`, generating that file (0600) if it does not exist.
    pub fn load(cfg: &NodeConfig) -> Result<Self, NodeError> {
        if let Some(f) = &cfg.node.api_token_file {
            let file = cfg.path(f);
            let secret =
                read_token(&file).map_err(|e| config_err(format!("node.api_token_file: {e}")))?;
            return Ok(ApiToken { secret, file });
        }
        let file = cfg.path(Path::new(TOKEN_FILE));
        if file.exists() {
            let secret = read_token(&file).map_err(|e| config_err(e.to_string()))?;
            return Ok(ApiToken { secret, file });
        }
        let secret = generate(&file)?;
        tracing::info!(file = %file.display(), "generated the API token");
        Ok(ApiToken { secret, file })
    }

    /// The token itself (for in-process tests and clients).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Whether `given` is the token, in time independent of where they differ.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.secret.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

pub(crate) fn read_token(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let t = text.trim();
    if t.len() < 16 || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{}: a token must be one word of at least 16 characters",
            file.display()
        ));
    }
    Ok(t.to_string())
}

/// Writes a new token of 32 random bytes (hex) to `file`, readable by its owner only.
fn generate(file: &Path) -> Result<String, NodeError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut raw = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut raw)?;
    let secret: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .map_err(|e| {
            NodeError::Io(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", file.display()),
            ))
        })?;
    writeln!(f, "{secret}")?;
    f.sync_all()?;
    Ok(secret)
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

fn unauthorized(reason: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        Json(json!({ "error": reason })),
    )
        .into_response()
}

/// Middleware: lets a request through if it is open or carries the token.
pub async fn require_token(
    State(token): State<Arc<ApiToken>>,
    req: Request,
    next: Next,
) -> Response {
    if OPEN.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let Some(value) = req.headers().get(header::AUTHORIZATION) else {
        return unauthorized(
            "missing credentials: send `Authorization: Bearer TOKEN` (the token is in the \
             node's api.token file)",
        );
    };
    let given = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        None => unauthorized("malformed Authorization header: expected `Bearer TOKEN`"),
        Some(t) if token.matches(t) => next.run(req).await,
        Some(_) => unauthorized("wrong token"),
    }
}
