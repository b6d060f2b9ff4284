//! The `[node]` table: listeners, memory, block size, the node's level, the NBD server's
//! limits, TLS, the controller it registers with, profiling, and how long a stop may take.

use super::duration::Renamed;
use crate::units::ByteSize;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// The `[node]` table.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// NBD listen address (`host:port`).
    #[serde(default = "default_nbd")]
    pub nbd: String,
    /// HTTP API listen address (`host:port`).
    #[serde(default = "default_api")]
    pub api: String,
    /// Memory for all caches of the node.
    pub cache_size: ByteSize,
    /// Cache block size in bytes (default 4096).
    #[serde(default = "default_block")]
    pub block_size: ByteSize,
    /// Directory for relative file paths (default: the working directory).
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    /// The node's level in the hierarchy (1 = host cache, 2 = storage-server cache): it
    /// decides what an exclusive cache does (level 1 demotes its clean victims to level 2,
    /// level 2 keeps nothing it serves to reads) and labels the metrics.
    #[serde(default = "default_level")]
    pub level: u8,
    /// Calls in service at the backend at once (default 32, [`crate::bandwidth`]): when
    /// more want to go, they wait and start in the order that shares the backend's
    /// service time between tenants in proportion to their weights. 0: no limit (nothing
    /// waits; service times are still measured).
    #[serde(default = "default_backend_depth")]
    pub backend_depth: usize,
    /// How long a connection's reader polls its socket for the next request before it
    /// blocks (adaptive; `"0s"` turns polling off). Polling spends CPU to spare
    /// queue-depth-1 clients the server thread's wake-up (default `"100us"`).
    #[serde(default = "default_busy_poll", deserialize_with = "duration")]
    #[schemars(with = "super::duration::DurationText")]
    pub busy_poll: Duration,
    /// A file holding the API's bearer token (relative to `data_dir`). Without it the
    /// token is generated into `DATA_DIR/api.token`, and the API must listen on a
    /// loopback address (see the `auth` module).
    #[serde(default)]
    pub api_token_file: Option<PathBuf>,
    /// Most NBD connections served at once, node-wide (default 512). When all are taken,
    /// the connection quiet longest is closed to admit a new client.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// How long a negotiated NBD connection may send no request before it is closed
    /// (default `"5m"`; `"0s"`: never).
    #[serde(default = "default_idle_timeout", deserialize_with = "duration")]
    #[schemars(with = "super::duration::DurationText")]
    pub idle_timeout: Duration,
    /// The node's name for a controller (default: the host name and the API's port,
    /// `HOST-PORT`, see `register::default_name`); it follows the rule of `api::names`.
    #[serde(default)]
    pub name: Option<String>,
    /// A controller to register with and send heartbeats to (`http://HOST:PORT`); none:
    /// the node is programmed by hand only.
    #[serde(default)]
    pub controller: Option<String>,
    /// A file holding the bearer token the controller expects (relative to `data_dir`).
    #[serde(default)]
    pub controller_token_file: Option<PathBuf>,
    /// Time between heartbeats to the controller (default `"2s"`).
    #[serde(default = "default_heartbeat", deserialize_with = "duration")]
    #[schemars(with = "super::duration::DurationText")]
    pub heartbeat: Duration,
    /// Candidate eviction policies profiled by phantom caches besides LRU (default
    /// `["arc", "lirs", "s3fifo"]`, the control crate's candidates).
    #[serde(default = "default_phantoms")]
    pub phantom_policies: Vec<String>,
    /// Request and reply bytes in flight on the NBD server, node-wide, shared fairly
    /// between connections (default 128 MiB; a connection holding nothing may also use a
    /// reserve of a quarter of it).
    #[serde(default = "default_in_flight_budget")]
    pub in_flight_budget: ByteSize,
    /// Worker threads of the NBD server beyond each connection's own, node-wide, shared
    /// fairly between connections (default 256).
    #[serde(default = "default_max_workers")]
    pub max_workers: usize,
    /// NBD connections served on threads of their own while at most this many are
    /// connected; beyond, every connection is an async task on the runtime's workers,
    /// which share the cores between clients more evenly (default: the cores the node
    /// may use; 0 serves every connection async).
    #[serde(default)]
    pub threaded_connections: Option<usize>,
    /// NBD TLS (`NBD_OPT_STARTTLS`): `off` (the default), `optional` or `required` (every
    /// client must upgrade before it may list or open an export).
    #[serde(default = "default_tls")]
    pub tls: String,
    /// With `tls`: the server's certificate chain, PEM (relative to `data_dir`).
    #[serde(default)]
    pub tls_cert: Option<PathBuf>,
    /// With `tls`: the server's private key, PEM (relative to `data_dir`).
    #[serde(default)]
    pub tls_key: Option<PathBuf>,
    /// The longest a stop may take, as a duration such as `"30s"` or `"2m"` (default 30
    /// s): draining in-flight requests and writing dirty blocks back (in parallel). What is
    /// not on the backends by then is kept in the recovery file and the node exits
    /// non-zero, naming the count; a hung backend ends the same way.
    #[serde(default = "default_stop_timeout", deserialize_with = "duration")]
    #[schemars(with = "super::duration::DurationText")]
    pub stop_timeout: Duration,
    /// How long requests wait for a link to an upstream that went down before they fail
    /// (default 5 s): the link reconnects with backoff meanwhile; after this long down,
    /// requests fail at once until it is back (see the `upstream` module).
    #[serde(default = "default_upstream_wait", deserialize_with = "duration")]
    #[schemars(with = "super::duration::DurationText")]
    pub upstream_wait: Duration,
    /// Disk space held in the data directory for the recovery file (see the `reserve`
    /// module), so a full disk cannot make a stop drop dirty blocks; default: enough for
    /// the whole `cache_size` dirty; `"0"`: none.
    #[serde(default)]
    pub recovery_reserve: Option<ByteSize>,
    /// A connection whose WRITE payload makes no progress for this long is closed and the
    /// budget it held for the payload freed (default `"10s"`; `"0s"`: never).
    #[serde(default = "default_payload_timeout", deserialize_with = "duration")]
    #[schemars(with = "super::duration::DurationText")]
    pub payload_timeout: Duration,
    /// Serve NBD on an address other machines can reach although an export has no
    /// `allow` list and `tls` is off (default false: such a start is refused).
    #[serde(default)]
    pub allow_anyone: bool,
    /// Label `/metrics`' tenant series with each client's address (`client="10.0.0.7"`);
    /// default false: the series are summed over clients and carry no address, since
    /// `/metrics` is open to anyone who reaches the API.
    #[serde(default)]
    pub metrics_client_labels: bool,
    /// Let a stop drop acknowledged dirty blocks that can be neither written back nor kept
    /// in the data directory, instead of waiting for them (see the `risk` module). Not a
    /// key of the file: only `lachesis serve --discard-dirty` sets it, for one run.
    #[serde(skip)]
    pub discard_dirty: bool,
}

fn default_payload_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_upstream_wait() -> Duration {
    crate::upstream::DEFAULT_WAIT
}

fn default_stop_timeout() -> Duration {
    Duration::from_secs(30)
}

use super::duration::deserialize as duration;

/// The keys of `[node]` that were numbers of seconds or microseconds.
pub(super) const RENAMED: [Renamed; 3] = [
    Renamed {
        table: "node",
        old: "busy_poll_us",
        new: "busy_poll",
        example: "\"100us\"",
    },
    Renamed {
        table: "node",
        old: "idle_timeout_secs",
        new: "idle_timeout",
        example: "\"5m\"",
    },
    Renamed {
        table: "node",
        old: "heartbeat_secs",
        new: "heartbeat",
        example: "\"2s\"",
    },
];

pub(super) fn default_tls() -> String {
    "off".into()
}

fn default_heartbeat() -> Duration {
    Duration::from_secs(2)
}
fn default_phantoms() -> Vec<String> {
    crate::observe::DEFAULT_PHANTOM_POLICIES
        .iter()
        .map(|p| p.to_string())
        .collect()
}

fn default_nbd() -> String {
    "127.0.0.1:10809".into()
}
fn default_api() -> String {
    "127.0.0.1:10810".into()
}
fn default_block() -> ByteSize {
    ByteSize(4096)
}
fn default_level() -> u8 {
    1
}
fn default_busy_poll() -> Duration {
    Duration::from_micros(100)
}
fn default_max_connections() -> usize {
    512
}
fn default_idle_timeout() -> Duration {
    Duration::from_secs(300)
}
fn default_in_flight_budget() -> ByteSize {
    ByteSize(128 << 20)
}
fn default_backend_depth() -> usize {
    crate::bandwidth::DEFAULT_DEPTH
}
fn default_max_workers() -> usize {
    256
}
