//! The node crate's integration tests: real nodes started in-process (or, for the crash
//! harness, as child processes of this binary) and driven through real NBD clients, the
//! HTTP API and headless Chromium. One module per area, `common` for the shared helpers.
//!
//! They are one test binary so the dependencies (tokio, axum, ...) are linked and
//! monomorphised once, not once per file. Run one area with a filter on its module, e.g.
//! `cargo test -p node --test integration demote::`.

mod common;

mod bandwidth;
mod batch_patch;
mod block_status;
mod connections;
mod crash;
mod credentials;
mod demote;
mod dirty_api;
mod exposure;
mod full_backend;
mod hierarchy;
mod hostile;
mod image;
mod live;
mod misses;
mod nbd_tls;
mod observations;
mod page_chromium;
mod register;
mod replay;
mod usability;
