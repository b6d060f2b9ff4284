//! The controller API's bearer token: read from `[controller] token_file`, or generated
//! (32 random bytes from the kernel, hex, mode 0600) into `DATA_DIR/controller.token` on
//! first start and reused after. Every request but `GET /` (the console's static page,
//! which sends the token from its `#token=` fragment), `GET /healthz` and the console's
//! script needs `Authorization: Bearer TOKEN`; a missing or wrong one is answered 401 with
//! `{"error": reason}`. Tokens are compared in constant time.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Paths served without a token.
const OPEN: &[&str] = &["/", "/healthz"];

/// The generated token's file name in the data directory.
pub const TOKEN_FILE: &str = "controller.token";

/// The API's token.
#[derive(Clone)]
pub struct Token {
    secret: String,
    /// The file it came from.
    pub file: PathBuf,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token").field("file", &self.file).finish()
    }
}

impl Token {
    /// Reads `file`, or `data_dir/controller.token` (generating it if missing).
    pub fn load(file: Option<&Path>, data_dir: &Path) -> std::io::Result<Token> {
        if let Some(f) = file {
            return Ok(Token {
                secret: read(f)?,
                file: f.to_path_buf(),
            });
        }
        let f = data_dir.join(TOKEN_FILE);
        crate::private::create_dir(data_dir)?;
        if f.exists() {
            crate::private::tighten(&f)?;
            crate::private::tighten_dir_of(&f)?;
            return Ok(Token {
                secret: read(&f)?,
                file: f,
            });
        }
        use std::os::unix::fs::OpenOptionsExt;
        let mut raw = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut raw)?;
        let secret: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&f)?;
        writeln!(out, "{secret}")?;
        out.sync_all()?;
        crate::private::tighten_dir_of(&f)?;
        tracing::info!(file = %f.display(), "generated the controller's API token");
        Ok(Token { secret, file: f })
    }

    /// The token.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Whether `given` is the token, in time independent of where they differ.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.secret.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

fn read(f: &Path) -> std::io::Result<String> {
    let t = std::fs::read_to_string(f)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", f.display())))?;
    let t = t.trim();
    if t.len() < 16 || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: a token must be one word of at least 16 characters",
                f.display()
            ),
        ));
    }
    Ok(t.to_string())
}

fn unauthorized(reason: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        Json(serde_json::json!({ "error": reason })),
    )
        .into_response()
}

/// Middleware: lets a request through if it is open or carries the token.
pub async fn require(State(token): State<Arc<Token>>, req: Request, next: Next) -> Response {
    if OPEN.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let Some(v) = req.headers().get(header::AUTHORIZATION) else {
        return unauthorized("missing credentials: send `Authorization: Bearer TOKEN`");
    };
    match v
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
    {
        None => unauthorized("malformed Authorization header: expected `Bearer TOKEN`"),
        Some(t) if token.matches(t) => next.run(req).await,
        Some(_) => unauthorized("wrong token"),
    }
}
