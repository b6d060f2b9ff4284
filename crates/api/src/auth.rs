//! The bearer token both APIs require, written once for the node and the controller.
//!
//! A [`Token`] is read from a file (one word of at least 16 characters, surrounding
//! whitespace ignored) or generated into one (32 random bytes from the kernel, hex, mode
//! 0600, never over an existing file). A request carries it as `Authorization: Bearer
//! TOKEN`; [`check`] compares it in constant time, so the answer's timing does not leak
//! how much of a guess was right, and says what is wrong ([`Denied`]). With the `server`
//! feature, [`server::require`] is the middleware both APIs put in front of their routes:
//! open paths pass, every other request without the token is answered 401 with
//! `WWW-Authenticate: Bearer` and `{"error": reason}`.
//!
//! Where a token file lives, who may skip it and which paths are open is each side's
//! (`node::auth`, `controller::auth`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// An API's bearer token and the file it came from.
#[derive(Clone)]
pub struct Token {
    secret: String,
    file: PathBuf,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token").field("file", &self.file).finish()
    }
}

/// A token file that cannot be read, is not a token, or cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Reading or writing the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no valid token.
    #[error("{}: a token must be one word of at least 16 characters", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
    },
}

impl From<TokenError> for std::io::Error {
    fn from(e: TokenError) -> Self {
        let kind = match &e {
            TokenError::Io { source, .. } => source.kind(),
            TokenError::Invalid { .. } => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, e)
    }
}

impl Token {
    /// Reads the token in `file`.
    pub fn read(file: &Path) -> Result<Token, TokenError> {
        let io = |source| TokenError::Io {
            path: file.to_path_buf(),
            source,
        };
        let text = std::fs::read_to_string(file).map_err(io)?;
        let t = text.trim();
        if t.len() < 16 || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(TokenError::Invalid {
                path: file.to_path_buf(),
            });
        }
        Ok(Token {
            secret: t.to_string(),
            file: file.to_path_buf(),
        })
    }

    /// Writes a new token of 32 random bytes (hex) to `file`, which must not exist,
    /// readable by its owner only.
    pub fn generate(file: &Path) -> Result<Token, TokenError> {
        use std::os::unix::fs::OpenOptionsExt;
        let io = |source| TokenError::Io {
            path: file.to_path_buf(),
            source,
        };
        let mut raw = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut r| r.read_exact(&mut raw))
            .map_err(|source| TokenError::Io {
                path: "/dev/urandom".into(),
                source,
            })?;
        let secret: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(file)
            .map_err(io)?;
        writeln!(f, "{secret}").map_err(io)?;
        f.sync_all().map_err(io)?;
        Ok(Token {
            secret,
            file: file.to_path_buf(),
        })
    }

    /// The token itself.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The file it came from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Whether `given` is the token, in time independent of where they differ.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.secret.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// No `Authorization` header.
    Missing,
    /// An `Authorization` header that is not `Bearer TOKEN`.
    Malformed,
    /// Another token.
    Wrong,
}

impl Denied {
    /// The reason an answer gives; `missing` is the reason for [`Denied::Missing`] (each
    /// side says where its token is).
    pub fn reason<'a>(&self, missing: &'a str) -> &'a str {
        match self {
            Denied::Missing => missing,
            Denied::Malformed => "malformed Authorization header: expected `Bearer TOKEN`",
            Denied::Wrong => "wrong token",
        }
    }
}

/// Whether an `Authorization` header's value (`None`: no header, or not text) carries
/// `token`.
pub fn check(token: &Token, authorization: Option<Result<&str, ()>>) -> Result<(), Denied> {
    let Some(value) = authorization else {
        return Err(Denied::Missing);
    };
    match value
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
    {
        None => Err(Denied::Malformed),
        Some(t) if token.matches(t) => Ok(()),
        Some(_) => Err(Denied::Wrong),
    }
}

/// The middleware both APIs use (feature `server`).
#[cfg(feature = "server")]
pub mod server {
    use super::{check, Token};
    use axum::extract::{Request, State};
    use axum::http::{header, StatusCode};
    use axum::middleware::Next;
    use axum::response::{IntoResponse, Response};
    use axum::Json;
    use std::sync::Arc;

    /// What [`require`] guards with: the token, the paths served without it, and the
    /// reason given for a request without credentials.
    pub struct Guard {
        /// The token.
        pub token: Arc<Token>,
        /// Paths served without a token.
        pub open: &'static [&'static str],
        /// The reason a request without an `Authorization` header is given.
        pub missing: &'static str,
    }

    /// A 401 with `WWW-Authenticate: Bearer` and `{"error": reason}`.
    pub fn unauthorized(reason: &str) -> Response {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            Json(serde_json::json!({ "error": reason })),
        )
            .into_response()
    }

    /// Middleware: lets a request through if its path is open or it carries the token.
    pub async fn require(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
        if guard.open.contains(&req.uri().path()) {
            return next.run(req).await;
        }
        let value = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().map_err(|_| ()));
        match check(&guard.token, value) {
            Ok(()) => next.run(req).await,
            Err(d) => unauthorized(d.reason(guard.missing)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_checked_whole_and_says_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("api-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("t");
        let _ = std::fs::remove_file(&f);
        let t = Token::generate(&f).unwrap();
        assert_eq!(t.secret().len(), 64);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(
            Token::generate(&f).is_err(),
            "an existing file is not overwritten"
        );
        let back = Token::read(&f).unwrap();
        assert_eq!(back.secret(), t.secret());
        let bearer = format!("Bearer {}", t.secret());
        assert_eq!(check(&t, Some(Ok(bearer.as_str()))), Ok(()));
        assert_eq!(check(&t, None), Err(Denied::Missing));
        assert_eq!(check(&t, Some(Err(()))), Err(Denied::Malformed));
        assert_eq!(check(&t, Some(Ok(t.secret()))), Err(Denied::Malformed));
        let short = format!("Bearer {}", &t.secret()[..63]);
        assert_eq!(check(&t, Some(Ok(short.as_str()))), Err(Denied::Wrong));
        assert_eq!(Denied::Wrong.reason("m"), "wrong token");
        std::fs::write(&f, "short\n").unwrap();
        let e = Token::read(&f).unwrap_err().to_string();
        assert!(
            e.ends_with("a token must be one word of at least 16 characters"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
