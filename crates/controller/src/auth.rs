//! The controller API's bearer token: read from `[controller] token_file`, or generated
//! (32 random bytes from the kernel, hex, mode 0600) into `DATA_DIR/controller.token` on
//! first start and reused after. Every request but `GET /` (the console's static page,
//! which sends the token from its `#token=` fragment), `GET /healthz` and the console's
//! script needs `Authorization: Bearer TOKEN`; a missing or wrong one is answered 401 with
//! `{"error": reason}`. Tokens are compared in constant time (the check and the 401 are
//! `api::auth`'s, shared with the node).

use api::auth::server::Guard;
use api::auth::Token;
use std::path::Path;
use std::sync::Arc;

/// Paths served without a token.
const OPEN: &[&str] = &["/", "/healthz"];

/// The generated token's file name in the data directory.
pub const TOKEN_FILE: &str = "controller.token";

/// Reads `file`, or `data_dir/controller.token` (generating it if missing), the file and
/// its directory made private (see [`crate::private`]).
pub fn load(file: Option<&Path>, data_dir: &Path) -> std::io::Result<Token> {
    if let Some(f) = file {
        return Ok(Token::read(f)?);
    }
    let f = data_dir.join(TOKEN_FILE);
    crate::private::create_dir(data_dir)?;
    if f.exists() {
        crate::private::tighten(&f)?;
        crate::private::tighten_dir_of(&f)?;
        return Ok(Token::read(&f)?);
    }
    let token = Token::generate(&f)?;
    crate::private::tighten_dir_of(&f)?;
    tracing::info!(file = %f.display(), "generated the controller's API token");
    Ok(token)
}

/// What the API's middleware (`api::auth::server::require`) guards with.
pub fn guard(token: Arc<Token>) -> Arc<Guard> {
    Arc::new(Guard {
        token,
        open: OPEN,
        missing: "missing credentials: send `Authorization: Bearer TOKEN`",
    })
}
