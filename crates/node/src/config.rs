//! The node's configuration file (`node.toml`): where it listens, how much memory it caches
//! in, its exports and their backends, and the caches and rules it starts with.
//!
//! Everything the file sets can also be changed later through the API, except the
//! listeners, the block size and the exports. Relative file paths are taken from
//! `data_dir` (itself relative to the working directory), which `--data-dir` overrides.
//! Sizes are bytes or strings with a unit (`"1GiB"`). Unknown keys are errors, so a typo
//! never silently falls back to a default; every error names the file and the field.
//!
//! ```toml
//! [node]
//! nbd = "127.0.0.1:10809"
//! api = "127.0.0.1:10810"
//! cache_size = "256MiB"
//!
//! [[export]]
//! name = "demo"
//! file = "demo.img"      # created sparse with `size` if missing
//! size = "1GiB"
//!
//! [[cache]]
//! name = "demo"
//! size = "128MiB"
//! write_policy = "write-back"
//!
//! [[rule]]
//! export = "demo"
//! cache = "demo"
//! ```
//!
//! A cache may keep a durable write log (`log = "PATH"` or `durable = true`, see
//! `cache::write_log`): without one, write-back data not yet flushed lives in the node's
//! memory only and a crash loses it.

use crate::error::NodeError;
use crate::units::ByteSize;
use cache::WritePolicy;
use policy::EvictionSpec;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A parsed, checked `node.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// Listeners and node-wide settings.
    pub node: NodeSection,
    /// Exports served over NBD.
    #[serde(default, rename = "export")]
    pub exports: Vec<ExportConfig>,
    /// Caches created at start.
    #[serde(default, rename = "cache")]
    pub caches: Vec<CacheSpec>,
    /// Rules created at start.
    #[serde(default, rename = "rule")]
    pub rules: Vec<RuleSpec>,
}

/// The `[node]` table.
#[derive(Clone, Debug, Deserialize)]
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
    /// The node's level in the hierarchy (1 = host cache, 2 = storage-server cache); a
    /// label on metrics.
    #[serde(default = "default_level")]
    pub level: u8,
    /// Calls in service at the backend at once (default 32, [`crate::bandwidth`]): when
    /// more want to go, they wait and start in the order that shares the backend's
    /// service time between tenants in proportion to their weights. 0: no limit (nothing
    /// waits; service times are still measured).
    #[serde(default = "default_backend_depth")]
    pub backend_depth: usize,
    /// Microseconds a connection's reader polls its socket for the next request before it
    /// blocks (adaptive; 0 turns polling off). Polling spends CPU to spare queue-depth-1
    /// clients the server thread's wake-up (default 100).
    #[serde(default = "default_busy_poll")]
    pub busy_poll_us: u64,
    /// A file holding the API's bearer token (relative to `data_dir`). Without it the
    /// token is generated into `DATA_DIR/api.token`, and the API must listen on a
    /// loopback address (see the `auth` module).
    #[serde(default)]
    pub api_token_file: Option<PathBuf>,
    /// Most NBD connections served at once, node-wide (default 512). When all are taken,
    /// the connection quiet longest is closed to admit a new client.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Seconds after which a negotiated NBD connection that sends no request is closed
    /// (default 300; 0: never).
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_secs: f64,
    /// The node's name for a controller (default: its API address).
    #[serde(default)]
    pub name: Option<String>,
    /// A controller to register with and send heartbeats to (`http://HOST:PORT`); none:
    /// the node is programmed by hand only.
    #[serde(default)]
    pub controller: Option<String>,
    /// A file holding the bearer token the controller expects (relative to `data_dir`).
    #[serde(default)]
    pub controller_token_file: Option<PathBuf>,
    /// Seconds between heartbeats to the controller (default 2).
    #[serde(default = "default_heartbeat")]
    pub heartbeat_secs: f64,
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
    pub stop_timeout: std::time::Duration,
    /// How long requests wait for a link to an upstream that went down before they fail
    /// (default 5 s): the link reconnects with backoff meanwhile; after this long down,
    /// requests fail at once until it is back (see the `upstream` module).
    #[serde(default = "default_upstream_wait", deserialize_with = "duration")]
    pub upstream_wait: std::time::Duration,
    /// Disk space held in the data directory for the recovery file (see the `reserve`
    /// module), so a full disk cannot make a stop drop dirty blocks; default: enough for
    /// the whole `cache_size` dirty; `"0"`: none.
    #[serde(default)]
    pub recovery_reserve: Option<ByteSize>,
    /// A connection whose WRITE payload makes no progress for this long is closed and the
    /// budget it held for the payload freed (default `"10s"`; `"0s"`: never).
    #[serde(default = "default_payload_timeout", deserialize_with = "duration")]
    pub payload_timeout: std::time::Duration,
    /// Serve NBD on an address other machines can reach although an export has no
    /// `allow` list and `tls` is off (default false: such a start is refused).
    #[serde(default)]
    pub allow_anyone: bool,
    /// Label `/metrics`' tenant series with each client's address (`client="10.0.0.7"`);
    /// default false: the series are summed over clients and carry no address, since
    /// `/metrics` is open to anyone who reaches the API.
    #[serde(default)]
    pub metrics_client_labels: bool,
}

fn default_payload_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(10)
}

fn default_upstream_wait() -> std::time::Duration {
    crate::upstream::DEFAULT_WAIT
}

fn default_stop_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(30)
}

/// A duration written as humantime does (`"30s"`, `"1m 30s"`, `"500ms"`).
fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<std::time::Duration, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s).map_err(|e| {
        serde::de::Error::custom(format!(
            "`{s}` is not a duration such as \"30s\" or \"2m\": {e}"
        ))
    })
}

fn default_tls() -> String {
    "off".into()
}

fn default_heartbeat() -> f64 {
    2.0
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
fn default_busy_poll() -> u64 {
    100
}
fn default_max_connections() -> usize {
    512
}
fn default_idle_timeout() -> f64 {
    300.0
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

/// One `[[export]]`: a name, the tenant that owns it, and exactly one backend.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    /// The NBD export name.
    pub name: String,
    /// The tenant owning the export (default: the export's name); bandwidth shares and
    /// per-tenant metrics use it.
    #[serde(default)]
    pub tenant: Option<String>,
    /// A local file or block device.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// With `file`: create the file sparse with this size if it is missing.
    #[serde(default)]
    pub size: Option<ByteSize>,
    /// With `file`: create the image anew (sparse, `size` bytes) even if an earlier start
    /// used a file there that is now missing (default false: that is an error naming the
    /// file; see `IMAGES_FILE`).
    #[serde(default)]
    pub recreate_missing: bool,
    /// Upstream NBD exports (`host:port/name`); several are striped by `stripe_unit`.
    #[serde(default)]
    pub upstream: Vec<String>,
    /// TLS to the upstreams (`NBD_OPT_STARTTLS`): `off` (the default), `optional`
    /// (upgrade when the upstream offers it) or `required` (never go on in clear; an
    /// upstream that refuses is an error at start).
    #[serde(default = "default_tls")]
    pub upstream_tls: String,
    /// With `upstream_tls`: the CA certificates (PEM) that must have signed the
    /// upstreams' certificates (relative to `data_dir`).
    #[serde(default)]
    pub upstream_tls_ca: Option<PathBuf>,
    /// With `upstream_tls`: a client certificate chain (PEM) to present, with
    /// `upstream_tls_key` (relative to `data_dir`).
    #[serde(default)]
    pub upstream_tls_cert: Option<PathBuf>,
    /// With `upstream_tls_cert`: its private key (PEM).
    #[serde(default)]
    pub upstream_tls_key: Option<PathBuf>,
    /// Stripe unit for several upstreams (default 1 MiB).
    #[serde(default)]
    pub stripe_unit: Option<ByteSize>,
    /// Refuse writes.
    #[serde(default)]
    pub read_only: bool,
    /// A SANCACHE hot-chunk tier on a fast file between the caches and the backend.
    #[serde(default)]
    pub hot_tier: Option<HotTierSpec>,
    /// The HTTP API of each upstream (one per `upstream`, same order): where the clean
    /// blocks an exclusive cache evicts are demoted (see `demote`). Empty: not demoted.
    #[serde(default)]
    pub upstream_api: Vec<UpstreamApi>,
    /// Clients allowed to use the export, as CIDR blocks (`"10.0.0.0/8"`, `"::1/128"`, a
    /// bare address for one host, `"unix"` for the Unix socket); absent: every client.
    /// Others are refused with `NBD_REP_ERR_POLICY` and logged.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
}

/// One `upstream_api` entry: a level-2 node's API and its token.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamApi {
    /// `http://HOST:PORT`.
    pub url: String,
    /// A file holding the level-2 node's API token (relative to `data_dir`).
    pub token_file: PathBuf,
}

/// `[export.hot_tier]`: hot chunks of the export kept on a fast file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HotTierSpec {
    /// The fast file (created with `size` if missing).
    pub file: PathBuf,
    /// Bytes of the fast file used for chunks.
    pub size: ByteSize,
    /// Chunk size (default 1 MiB).
    #[serde(default = "default_chunk")]
    pub chunk: ByteSize,
    /// Placement policy spec (default `adaptive`: MRFU with SANCACHE's adaptive threshold).
    #[serde(default = "default_tier_admission")]
    pub admission: String,
    /// Chunk migrations allowed per second (default 100; 0 = unlimited).
    #[serde(default = "default_migrations")]
    pub max_migrations_per_sec: u64,
}

fn default_chunk() -> ByteSize {
    ByteSize(1 << 20)
}
fn default_tier_admission() -> String {
    "adaptive".into()
}
fn default_migrations() -> u64 {
    100
}

impl ExportConfig {
    /// The owning tenant.
    pub fn tenant(&self) -> &str {
        self.tenant.as_deref().unwrap_or(&self.name)
    }
}

/// One `[[cache]]`; the API's create-cache body ([`api::node::CreateCache`]) becomes one.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSpec {
    /// Name, unique on the node.
    pub name: String,
    /// Capacity: bytes with a unit, or a plain number of bytes.
    pub size: ByteSize,
    /// Eviction policy (`lru`, `arc`, `lirs:hir=0.01`, ...; default `lru`), checked when
    /// the file or request is parsed.
    #[serde(default)]
    pub eviction: EvictionSpec,
    /// Write policy (default write-back).
    #[serde(default = "default_write_policy")]
    pub write_policy: String,
    /// Admission policy spec (`demand`, `mrfu`, `adaptive`, ...; default `demand`).
    #[serde(default)]
    pub admission: Option<String>,
    /// Keep an online hit-ratio curve (SHARDS) for this cache (default on).
    #[serde(default = "default_true")]
    pub profile: bool,
    /// Most dirty data as a fraction of the cache, in (0, 1] (default 1); background
    /// cleaning starts at half the limit, writers are throttled past three quarters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_ratio: Option<f64>,
    /// Most dirty bytes (default: the ratio alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_bytes: Option<ByteSize>,
    /// Exclusive levels (default false): on a level-1 node the cache demotes the clean
    /// blocks it evicts to level 2 (exports with `upstream_api`); on a level-2 node it
    /// drops the blocks it serves to reads (see `demote`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
    /// A durable write log at this path (relative to `data_dir`; files `PATH.1`, `PATH.2`,
    /// ...): every write is logged and synced before it is acknowledged and replayed at
    /// the next start. Without a log, write-back data not yet flushed lives in memory only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<PathBuf>,
    /// A durable write log at `DATA_DIR/cache-NAME.log` (the same as `log` with that path).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub durable: bool,
}

impl CacheSpec {
    /// Where the cache's durable write log lives, if it has one (relative to the data
    /// directory unless absolute).
    pub fn log_path(&self) -> Option<PathBuf> {
        match (&self.log, self.durable) {
            (Some(p), _) => Some(p.clone()),
            (None, true) => Some(PathBuf::from(format!("cache-{}.log", self.name))),
            (None, false) => None,
        }
    }
}

impl TryFrom<api::node::CreateCache> for CacheSpec {
    type Error = NodeError;

    /// The body of `POST /v1/caches` with the node's defaults filled in; a bad eviction
    /// spec is an error naming the field.
    fn try_from(c: api::node::CreateCache) -> Result<Self, NodeError> {
        let eviction = match c.eviction {
            Some(e) => e
                .parse::<EvictionSpec>()
                .map_err(|e| NodeError::Invalid(format!("request body: eviction: {e}")))?,
            None => EvictionSpec::default(),
        };
        Ok(CacheSpec {
            name: c.name,
            size: c.size,
            eviction,
            write_policy: c.write_policy.unwrap_or_else(default_write_policy),
            admission: c.admission,
            profile: c.profile.unwrap_or(true),
            dirty_ratio: c.dirty_ratio,
            dirty_bytes: c.dirty_bytes,
            exclusive: c.exclusive,
            log: c.log.map(PathBuf::from),
            durable: c.durable,
        })
    }
}

fn default_write_policy() -> String {
    "write-back".into()
}
fn default_true() -> bool {
    true
}

/// One `[[rule]]` (the API's [`api::node::CreateRule`] becomes one): requests of `client` doing `op` on `export` in `range` go to `cache`.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// The export.
    pub export: String,
    /// The cache, by name.
    pub cache: String,
    /// Client address (IP, without port) or `unix`; absent = every client.
    #[serde(default)]
    pub client: Option<String>,
    /// `read` or `write`; absent = both.
    #[serde(default)]
    pub op: Option<cache::Op>,
    /// Byte range `[start, end)`; absent = the whole export.
    #[serde(default)]
    pub range: Option<(u64, u64)>,
}

impl From<api::node::CreateRule> for RuleSpec {
    /// The body of `POST /v1/rules`.
    fn from(r: api::node::CreateRule) -> Self {
        RuleSpec {
            export: r.export,
            cache: r.cache,
            client: r.client,
            op: r.op.map(|o| match o {
                api::node::Op::Read => cache::Op::Read,
                api::node::Op::Write => cache::Op::Write,
            }),
            range: r.range,
        }
    }
}

impl NodeConfig {
    /// Reads and checks `path`; `data_dir` overrides the file's `data_dir`.
    pub fn load(path: &Path, data_dir: Option<&Path>) -> Result<Self, NodeError> {
        let text = std::fs::read_to_string(path).map_err(|e| NodeError::Config {
            file: path.display().to_string(),
            msg: e.to_string(),
        })?;
        let mut cfg = Self::parse(&text).map_err(|msg| NodeError::Config {
            file: path.display().to_string(),
            msg,
        })?;
        if let Some(d) = data_dir {
            cfg.node.data_dir = Some(d.to_path_buf());
        }
        Ok(cfg)
    }

    /// Parses and checks the text of a `node.toml`; the error names the field.
    pub fn parse(text: &str) -> Result<Self, String> {
        let cfg: NodeConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.check()?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), String> {
        let bs = self.node.block_size.0;
        if bs == 0 || !bs.is_power_of_two() || bs < 512 {
            return Err(format!(
                "node.block_size: {bs} must be a power of two of at least 512"
            ));
        }
        if self.node.max_connections == 0 {
            return Err("node.max_connections: must be at least 1".into());
        }
        if self.node.in_flight_budget.0 < 1 << 20 {
            return Err("node.in_flight_budget: must be at least 1MiB".into());
        }
        let idle = self.node.idle_timeout_secs;
        if !idle.is_finite() || !(0.0..=1e9).contains(&idle) {
            return Err(format!(
                "node.idle_timeout_secs: {idle} must be a number of seconds from 0 (never) to 1e9"
            ));
        }
        let hb = self.node.heartbeat_secs;
        if !hb.is_finite() || !(0.05..=3600.0).contains(&hb) {
            return Err(format!(
                "node.heartbeat_secs: {hb} must be a number of seconds from 0.05 to 3600"
            ));
        }
        if let Some(c) = &self.node.controller {
            if !(c.starts_with("http://") || c.starts_with("https://")) {
                return Err(format!(
                    "node.controller: `{c}` must be a URL such as http://HOST:PORT"
                ));
            }
        }
        let tls: nbd::TlsMode = self
            .node
            .tls
            .parse()
            .map_err(|e| format!("node.tls: {e}"))?;
        if tls != nbd::TlsMode::Off {
            if self.node.tls_cert.is_none() {
                return Err("node.tls_cert: required when node.tls is not `off`".into());
            }
            if self.node.tls_key.is_none() {
                return Err("node.tls_key: required when node.tls is not `off`".into());
            }
        }
        if self.node.stop_timeout.is_zero() {
            return Err("node.stop_timeout: must be longer than 0s".into());
        }
        if self.node.name.as_deref() == Some("") {
            return Err("node.name: must not be empty".into());
        }
        for (i, p) in self.node.phantom_policies.iter().enumerate() {
            policy::build(p).map_err(|e| format!("node.phantom_policies[{i}]: {e}"))?;
        }
        let mut names = std::collections::HashSet::new();
        for (i, e) in self.exports.iter().enumerate() {
            let at = format!("export[{i}] (`{}`)", e.name);
            api::names::check(&format!("export[{i}].name"), &e.name).map_err(|e| e.to_string())?;
            if let Some(t) = &e.tenant {
                api::names::check(&format!("{at}.tenant"), t).map_err(|e| e.to_string())?;
            }
            if !names.insert(e.name.as_str()) {
                return Err(format!("{at}: the name is used twice"));
            }
            match (&e.file, e.upstream.is_empty()) {
                (Some(_), true) => {}
                (None, false) => {
                    if e.size.is_some() {
                        return Err(format!("{at}.size: only a file backend takes a size"));
                    }
                }
                _ => return Err(format!("{at}: give exactly one of `file` or `upstream`")),
            }
            if let Some(h) = &e.hot_tier {
                if h.chunk.0 == 0 || h.chunk.0 % bs != 0 {
                    return Err(format!(
                        "{at}.hot_tier.chunk: {} must be a positive multiple of the block size {bs}",
                        h.chunk.0
                    ));
                }
                if h.size.0 < h.chunk.0 {
                    return Err(format!("{at}.hot_tier.size: smaller than one chunk"));
                }
            }
            let tls: nbd::TlsMode = e
                .upstream_tls
                .parse()
                .map_err(|m| format!("{at}.upstream_tls: {m}"))?;
            if tls != nbd::TlsMode::Off {
                if e.upstream.is_empty() {
                    return Err(format!("{at}.upstream_tls: only upstream exports use TLS"));
                }
                if e.upstream_tls_ca.is_none() {
                    return Err(format!(
                        "{at}.upstream_tls_ca: `upstream_tls = \"{}\"` needs the CA file that signed the upstreams' certificates",
                        e.upstream_tls
                    ));
                }
            }
            if e.upstream_tls_cert.is_some() != e.upstream_tls_key.is_some() {
                return Err(format!(
                    "{at}.upstream_tls_cert: give both `upstream_tls_cert` and `upstream_tls_key`, or neither"
                ));
            }
            if !e.upstream_api.is_empty() && e.upstream_api.len() != e.upstream.len() {
                return Err(format!(
                    "{at}.upstream_api: {} entries for {} upstreams; give one per upstream, in the same order",
                    e.upstream_api.len(),
                    e.upstream.len()
                ));
            }
            for (j, a) in e.upstream_api.iter().enumerate() {
                if !a.url.starts_with("http://") {
                    return Err(format!(
                        "{at}.upstream_api[{j}].url: `{}` must be a URL such as http://HOST:PORT",
                        a.url
                    ));
                }
            }
            if let Some(allow) = &e.allow {
                nbd::server::allow::AllowList::parse(allow)
                    .map_err(|m| format!("export[{i}].allow{m}"))?;
            }
            if let Some(u) = e.stripe_unit {
                if u.0 == 0 || u.0 % bs != 0 {
                    return Err(format!(
                        "{at}.stripe_unit: {} must be a positive multiple of the block size {bs}",
                        u.0
                    ));
                }
            }
        }
        let mut caches = std::collections::HashSet::new();
        for (i, c) in self.caches.iter().enumerate() {
            api::names::check(&format!("cache[{i}].name"), &c.name).map_err(|e| e.to_string())?;
            if !caches.insert(c.name.as_str()) {
                return Err(format!("cache[{i}] (`{}`): the name is used twice", c.name));
            }
            c.write_policy
                .parse::<WritePolicy>()
                .map_err(|e| format!("cache[{i}].write_policy: {e}"))?;
            if let Some(p) = &c.log {
                if p.as_os_str().is_empty() || p.file_name().is_none() {
                    return Err(format!(
                        "cache[{i}].log: `{}` is not a file path",
                        p.display()
                    ));
                }
            }
        }
        for (i, r) in self.rules.iter().enumerate() {
            if !names.contains(r.export.as_str()) {
                return Err(format!(
                    "rule[{i}].export: no export is called `{}`",
                    r.export
                ));
            }
            if !caches.contains(r.cache.as_str()) {
                return Err(format!("rule[{i}].cache: no cache is called `{}`", r.cache));
            }
        }
        Ok(())
    }

    /// The NBD server's TLS setting with its certificate and key read, or `None` when TLS
    /// is off; the error names the field and the file.
    pub fn nbd_tls(&self) -> Result<Option<nbd::Tls>, String> {
        let mode: nbd::TlsMode = self
            .node
            .tls
            .parse()
            .map_err(|e| format!("node.tls: {e}"))?;
        if mode == nbd::TlsMode::Off {
            return Ok(None);
        }
        let (Some(cert), Some(key)) = (&self.node.tls_cert, &self.node.tls_key) else {
            return Err("node.tls_cert and node.tls_key: required with node.tls".into());
        };
        nbd::Tls::from_pem_files(mode, &self.path(cert), &self.path(key))
            .map(Some)
            .map_err(|e| format!("node.tls_cert / node.tls_key: {e}"))
    }

    /// Resolves a configured path against the data directory.
    pub fn path(&self, p: &Path) -> PathBuf {
        match &self.node.data_dir {
            Some(d) if p.is_relative() => d.join(p),
            _ => p.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[node]
cache_size = "64MiB"
[[export]]
name = "demo"
file = "demo.img"
size = "1GiB"
[[cache]]
name = "c"
size = "32MiB"
eviction = "arc"
[[rule]]
export = "demo"
cache = "c"
op = "read"
"#;

    #[test]
    fn parses_defaults() {
        let c = NodeConfig::parse(GOOD).unwrap();
        assert_eq!(c.node.nbd, "127.0.0.1:10809");
        assert_eq!(c.node.api, "127.0.0.1:10810");
        assert_eq!(c.node.cache_size.0, 64 << 20);
        assert_eq!(c.node.block_size.0, 4096);
        assert_eq!(c.exports[0].size, Some(ByteSize(1 << 30)));
        assert_eq!(c.caches[0].write_policy, "write-back");
        assert_eq!(c.rules[0].op, Some(cache::Op::Read));
    }

    #[test]
    fn errors_name_the_field() {
        let bad = GOOD.replace("cache = \"c\"", "cache = \"nope\"");
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .contains("rule[0].cache"));
        let bad = GOOD.replace(
            "eviction = \"arc\"",
            "eviction = \"arc\"\nwrite_policy = \"sometimes\"",
        );
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .contains("cache[0].write_policy"));
        let bad = GOOD.replace("cache_size", "cache_sise");
        assert!(NodeConfig::parse(&bad).unwrap_err().contains("cache_sise"));
        let bad = GOOD.replace(
            "file = \"demo.img\"",
            "upstream = [\"x:1/y\"]\nfile = \"a\"",
        );
        assert!(NodeConfig::parse(&bad).unwrap_err().contains("exactly one"));
        let bad = GOOD.replace(
            "size = \"1GiB\"",
            "size = \"1GiB\"\nallow = [\"127.0.0.1/32\", \"10.0.0.0/40\"]",
        );
        let e = NodeConfig::parse(&bad).unwrap_err();
        assert!(
            e.contains("export[0].allow[1]") && e.contains("0 to 32"),
            "{e}"
        );
        let ok = GOOD.replace(
            "size = \"1GiB\"",
            "size = \"1GiB\"\nallow = [\"127.0.0.1\", \"::1/128\"]",
        );
        assert!(NodeConfig::parse(&ok).is_ok());
        let bad = GOOD.replace("cache_size = ", "tls = \"maybe\"\ncache_size = ");
        assert!(NodeConfig::parse(&bad).unwrap_err().contains("node.tls"));
        let bad = GOOD.replace("cache_size = ", "tls = \"required\"\ncache_size = ");
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .contains("node.tls_cert"));
        let ok = GOOD.replace("cache_size = ", "stop_timeout = \"1m 30s\"\ncache_size = ");
        assert_eq!(
            NodeConfig::parse(&ok).unwrap().node.stop_timeout,
            std::time::Duration::from_secs(90)
        );
        assert_eq!(
            NodeConfig::parse(GOOD).unwrap().node.stop_timeout,
            std::time::Duration::from_secs(30)
        );
        let example = NodeConfig::parse(include_str!("../../../examples/node.toml")).unwrap();
        assert_eq!(
            example.node.stop_timeout,
            std::time::Duration::from_secs(30)
        );
        let bad = GOOD.replace("cache_size = ", "stop_timeout = \"soon\"\ncache_size = ");
        let e = NodeConfig::parse(&bad).unwrap_err();
        assert!(e.contains("stop_timeout") && e.contains("soon"), "{e}");
        let bad = GOOD.replace("cache_size = ", "stop_timeout = \"0s\"\ncache_size = ");
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .contains("node.stop_timeout"));
        let bad = GOOD.replace("size = \"32MiB\"", "size = -3");
        assert!(NodeConfig::parse(&bad).unwrap_err().contains("negative"));
    }
}
