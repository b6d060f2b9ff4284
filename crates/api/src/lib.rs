//! # api
//!
//! The wire contract between Lachesis cache nodes, the controller and `lachesis ctl`: the
//! request and response bodies of both HTTP APIs, declared once, and the typed blocking
//! client that speaks them. The node serialises these types and the controller and `ctl`
//! deserialise the same ones, so a field renamed on one side is a compile error on the
//! other, not a silent zero.
//!
//! | module | owns |
//! |---|---|
//! | [`node`] | the node API (`/v1/...` on a node): observations for a controller, cache and rule requests and rows, node and tenant counters, curves, bandwidth proportions, demote and removal answers |
//! | [`bandwidth`] | each tenant's use of a node's backend (service time, queueing delay) and the proportions' rules |
//! | [`controller`] | the controller API (`/v1/...` on a controller): a node's registration and heartbeat, SLO changes, interval rows, history entries, tenants with their status |
//! | [`auth`] | the bearer token both APIs require: read or generated, checked in constant time, and (feature `server`) the middleware answering 401 |
//! | [`names`] | the one rule for tenant, volume, cache, export and node names, checked where a name comes in |
//! | [`client`] | [`client::NodeClient`] (a node's API, with timeouts and retries, used by the controller and `ctl`) and [`client::ControllerClient`] (the controller's API, used by the node's registration and by `ctl`); their errors |
//!
//! Version: both APIs are version [`API_VERSION`], served under `/v1/`. The node's
//! observations carry the version they were written in. Within a version, a field may be
//! added only with an explicit `#[serde(default)]` on the reading side (documented with
//! the reason an older peer omits it); every other mismatch is a bug and is refused by
//! `#[serde(deny_unknown_fields)]`, which names the field.
//!
//! This crate depends on nothing of ours but [`units`] (byte sizes written by people), so
//! `node`, `controller` and `cli` all sit above it; its `server` feature adds `axum` for
//! the middleware the node and the controller share.

pub mod auth;
pub mod bandwidth;
pub mod client;
pub mod controller;
pub mod names;
pub mod node;

/// The version of the node and controller APIs: paths are `/v1/...`, and
/// [`node::NodeObservations::version`] carries it.
pub const API_VERSION: u32 = 1;

pub use client::{CallError, ControllerClient, NodeClient};
