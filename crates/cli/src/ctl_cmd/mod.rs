//! `lachesis ctl`: a thin client of a node's HTTP API (see the `node` crate's `api`
//! module for the verbs), through the `api` crate's typed [`NodeClient`] (each call tried
//! once). Prints the API's JSON, pretty; `status` prints a summary table. A 4xx answer is
//! shown with the node's reason and makes the command fail.
//!
//! The API's bearer token is taken from `--token-file FILE`, else from the
//! `LACHESIS_TOKEN` environment variable, else from `lachesis-data/api.token` (the file a
//! node started from `examples/node.toml` in the same directory generates).
//!
//! The controller's verbs (`tenants` with `--controller`, `slo`, `plan`, `history`,
//! `explain`) talk to `lachesis controller` at `--controller` (default `127.0.0.1:7070`)
//! with the token from `--controller-token-file`, else `LACHESIS_CONTROLLER_TOKEN`, else
//! `controller-data/controller.token`, through the `api` crate's [`ControllerClient`];
//! they print a table, or the API's JSON with `--json`.

//!
//! `args` holds the arguments, `call` the tokens and how a call fails, `node_verbs` and
//! `controller_verbs` one side's verbs each.

mod args;
mod call;
mod controller_verbs;
mod node_verbs;

pub use args::CtlArgs;

use api::client::{ControllerClient, NodeClient};
use args::Verb;
use call::{controller_token, token, CALL_TIMEOUT};

/// Runs `lachesis ctl`.
pub fn run(a: CtlArgs) -> anyhow::Result<()> {
    let for_controller = matches!(
        a.verb,
        Verb::Slo { .. } | Verb::Plan | Verb::History { .. } | Verb::Explain { .. }
    ) || (matches!(a.verb, Verb::Tenants) && a.controller.is_some());
    if for_controller {
        let addr = a
            .controller
            .clone()
            .unwrap_or_else(|| "127.0.0.1:7070".into());
        let token = controller_token(a.controller_token_file.clone())?;
        let api = ControllerClient::new(&addr, token.as_deref(), CALL_TIMEOUT);
        return controller_verbs::run(&a, &api);
    }
    let token = token(a.token_file)?;
    let api = NodeClient::new(&a.api, token.as_deref(), CALL_TIMEOUT).once();
    node_verbs::run(a.verb, &api)
}
