//! The controller crate's integration tests: the controller against real nodes started
//! in-process, over SQLite and over etcd, and its console in headless Chromium. One module
//! per area, `common` for the shared helpers.
//!
//! They are one test binary so the dependencies (tokio, axum, rusqlite, ...) are linked and
//! monomorphised once, not once per file. Run one area with a filter on its module, e.g.
//! `cargo test -p controller --test integration levels::`.

mod common;

mod bandwidth;
mod boost;
mod console_chromium;
mod crash;
mod etcd;
mod golden;
mod hostile;
mod levels;
mod live;
mod plans;
mod shared;
