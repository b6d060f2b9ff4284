//! The controller's configuration file (`controller.toml`): where it listens, how often it
//! steps, which objective pipeline (a `control` scheme name) it runs, the nodes it expects,
//! and the tenants with their volumes and SLOs.
//!
//! A volume is exported on one level-1 node (`host`) and striped over one or more level-2
//! nodes (`servers`); each volume is one tenant of the `control` step (its SLO and class
//! are its owner's). On every node the volume's cache and the NBD export it serves are both
//! called by the volume's name. Unknown keys are errors; every error names the file and
//! the field (`tenant "db".volume "db".servers`).
//!
//! A read-only image several volumes read (the golden-image case) is an `[[image]]`: the
//! storage servers that export it read-only under its name, and optionally its size (the
//! consolidated cache's rule then covers `[0, size)` and a node whose export is smaller
//! refuses it, naming `range`). A volume reading it says `image = "NAME"`: its host's
//! export is served by the servers' image export (the volume names the image's servers,
//! no others), its caches are read-only and inclusive, and at level 2 it has no partition
//! of its own: every reader goes through the image's one consolidated cache on each
//! server ([`crate::consolidate`]). Image names share the namespace of volume names (the
//! cache on the server is called by the image's name).
//!
//! ```toml
//! [controller]
//! listen = "127.0.0.1:7070"
//! interval = "5s"
//! scheme = "lachesis"
//!
//! [[node]]
//! name = "l1-a"
//! level = 1
//!
//! [[tenant]]
//! name = "db"
//! class = "gold"
//! slo = { latency_ms = 2.0 }
//! [[tenant.volume]]
//! name = "db"
//! host = "l1-a"
//! servers = ["l2-a", "l2-b"]
//!
//! [[image]]
//! name = "golden"
//! servers = ["l2-a"]
//! size = "8GiB"
//!
//! [[tenant]]
//! name = "vdi"
//! [[tenant.volume]]
//! name = "vm1"
//! host = "l1-a"
//! servers = ["l2-a"]
//! image = "golden"
//! ```

use control::{Class, Slo};
use node::config::duration::{self, Renamed};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use units::ByteSize;

/// A parsed, checked `controller.toml`.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    /// The `[controller]` table.
    pub controller: ControllerSection,
    /// Nodes expected (they may also register themselves).
    #[serde(default, rename = "node")]
    pub nodes: Vec<NodeSpec>,
    /// Tenants at first start (later the store's copy wins).
    #[serde(default, rename = "tenant")]
    pub tenants: Vec<TenantConfig>,
    /// Read-only images shared by several volumes, each with a consolidated cache on
    /// its servers ([`crate::consolidate`]).
    #[serde(default, rename = "image")]
    pub images: Vec<ImageSpec>,
}

/// `[[image]]`: a read-only image that several volumes read (the golden-image case).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    /// Its name: the read-only export on each of its servers and the consolidated cache
    /// there (unique over images and volumes).
    pub name: String,
    /// The level-2 nodes that export it (a volume reading it is striped over them).
    pub servers: Vec<String>,
    /// Its size: the consolidated cache's rule covers `[0, size)` of the export, and the
    /// cache is never planned larger (absent: the rule covers the whole export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<ByteSize>,
}

/// `[controller]`.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ControllerSection {
    /// HTTP listen address (API and console).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Directory of the SQLite store and the generated token (default `controller-data`).
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// Time between enforcement steps (default `"5s"`).
    #[serde(
        default = "default_interval",
        deserialize_with = "duration::deserialize"
    )]
    #[schemars(with = "duration::DurationText")]
    pub interval: Duration,
    /// The objective pipeline, a `control` scheme name (`lachesis`, `mlms`, `fair`, ...).
    #[serde(default = "default_scheme")]
    pub scheme: String,
    /// Block size every node must use.
    #[serde(default = "default_block")]
    pub block_size: ByteSize,
    /// File with the controller's API token (else generated 0600 in the data dir).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Intervals without a heartbeat or a successful poll before a node is marked down.
    #[serde(default = "default_down_after")]
    pub down_after: u32,
    /// Mean service times assumed before any is observed: level-1 hit, level-2 hit, miss
    /// to disk (default `["50us", "500us", "5ms"]`).
    #[serde(default = "default_service", deserialize_with = "three_durations")]
    #[schemars(with = "[duration::DurationText; 3]")]
    pub service: [Duration; 3],
    /// Exclusive (`true`, default) or inclusive levels, for volumes that do not say
    /// (`[[tenant.volume]] exclusive`).
    #[serde(default = "default_true")]
    pub exclusive: bool,
    /// Which scheme chooses bandwidth proportions (`[controller.bandwidth]`, see
    /// [`crate::bandwidth`]).
    #[serde(default)]
    pub bandwidth: BandwidthSpec,
    /// Tune the storage nodes' hot tiers' thresholds (SANCACHE's rule, `plan.boost`)
    /// under any scheme (`true`), or never (`false`); absent: as the scheme does
    /// (`lachesis` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost: Option<bool>,
    /// Choose each partition's eviction policy online (SOPA) under any scheme (`true`),
    /// or never (`false`); absent: as the scheme does (`lachesis` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_choice: Option<bool>,
}

/// Which scheme chooses bandwidth proportions (see [`crate::bandwidth`]).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The control scheme's own setting.
    #[default]
    Scheme,
    /// No proportions: equal shares.
    Off,
    /// Static shares per tenant.
    Shares,
    /// A single level of learners, at the storage servers.
    #[serde(alias = "single")]
    Server,
    /// Learners at every resource, learning at once.
    Uncoordinated,
    /// Learners at every resource, coordinated by a token.
    Coordinated,
}

/// `[controller.bandwidth]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BandwidthSpec {
    /// The scheme.
    #[serde(default)]
    pub mode: Mode,
    /// With `shares`: weight per tenant name (1 for a tenant not named).
    #[serde(default)]
    pub shares: BTreeMap<String, f64>,
}

/// What is wrong with a `[controller.bandwidth]`.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpecError {
    /// A share that is not a positive finite number.
    #[error("controller.bandwidth.shares.{tenant}: {value} must be a positive finite number")]
    Share {
        /// The tenant.
        tenant: String,
        /// Its share.
        value: f64,
    },
    /// Shares given without `mode = "shares"`.
    #[error("controller.bandwidth.shares: given, but mode is not \"shares\"")]
    Unused,
}

impl BandwidthSpec {
    /// Checks the shares.
    pub fn check(&self) -> Result<(), SpecError> {
        if !self.shares.is_empty() && self.mode != Mode::Shares {
            return Err(SpecError::Unused);
        }
        for (tenant, &value) in &self.shares {
            if !(value.is_finite() && value > 0.0) {
                return Err(SpecError::Share {
                    tenant: tenant.clone(),
                    value,
                });
            }
        }
        Ok(())
    }
}

fn default_listen() -> String {
    "127.0.0.1:7070".into()
}
fn default_data_dir() -> PathBuf {
    "controller-data".into()
}
fn default_interval() -> Duration {
    Duration::from_secs(5)
}
fn default_scheme() -> String {
    "lachesis".into()
}
fn default_block() -> ByteSize {
    ByteSize(4096)
}
fn default_down_after() -> u32 {
    3
}
fn default_service() -> [Duration; 3] {
    [
        Duration::from_micros(50),
        Duration::from_micros(500),
        Duration::from_millis(5),
    ]
}

/// Three durations, each written as humantime does.
fn three_durations<'de, D: serde::Deserializer<'de>>(d: D) -> Result<[Duration; 3], D::Error> {
    let [a, b, c] = <[String; 3]>::deserialize(d)?;
    let p = |s: &str| duration::parse(s).map_err(serde::de::Error::custom);
    Ok([p(&a)?, p(&b)?, p(&c)?])
}

/// The keys of `[controller]` that were numbers of seconds or milliseconds.
const RENAMED: [Renamed; 2] = [
    Renamed {
        table: "controller",
        old: "interval_secs",
        new: "interval",
        example: "\"5s\"",
    },
    Renamed {
        table: "controller",
        old: "service_ms",
        new: "service",
        example: "[\"50us\", \"500us\", \"5ms\"]",
    },
];
fn default_true() -> bool {
    true
}

/// `[[node]]`: a node the controller expects; its address and token may also come from
/// its registration.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Its name (unique).
    pub name: String,
    /// 1 (host cache) or 2 (storage-server cache).
    pub level: u8,
    /// Its API (`http://host:port`), if known before it registers.
    #[serde(default)]
    pub api: Option<String>,
    /// File holding its API token, if known before it registers.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Its cache size, if known before it registers.
    #[serde(default)]
    pub cache_size: Option<ByteSize>,
}

/// `[[tenant]]`: an owner of volumes with one SLO and class.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Its name (unique).
    pub name: String,
    /// Its objective: `{ latency_ms = 2.0 }`, `{ p99_ms = 5 }` (or `p95_ms`, `p999_ms`),
    /// `{ iops = 5000 }`, `{ mbps = 40 }` or `{ degradation = 0.05 }`.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, f64>>")]
    pub slo: Option<Slo>,
    /// `gold`, `silver` or `best-effort` (default).
    #[serde(default)]
    pub class: Option<String>,
    /// Requests it keeps in flight (turns IOPS or bandwidth SLOs into latency).
    #[serde(default)]
    pub depth: Option<f64>,
    /// Its volumes.
    #[serde(default, rename = "volume")]
    pub volumes: Vec<VolumeSpec>,
}

/// `[[tenant.volume]]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VolumeSpec {
    /// Its name: the export and the cache on every node (unique over all tenants).
    pub name: String,
    /// The level-1 node that exports it.
    pub host: String,
    /// Further level-1 nodes that export it too (a volume used from several hosts): each
    /// host has its own level-1 partition of it, planned as a `control` tenant of its own
    /// named `VOLUME@HOST`, and the level-2 partition on each server serves them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The level-2 nodes it is striped over.
    pub servers: Vec<String>,
    /// Stripe unit (default 1 MiB).
    #[serde(default)]
    pub stripe_unit: Option<ByteSize>,
    /// Exclusive levels for this volume (default: `[controller] exclusive`): the controller
    /// plans its two levels as one LRU stack and creates its caches exclusive (the level-1
    /// cache demotes its clean victims to level 2, which needs the host's export to name
    /// its servers' APIs in `upstream_api`; each level-2 cache drops what it serves up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive: Option<bool>,
    /// Boosting for this volume (default on): where a server of the volume's has a hot
    /// tier on its export, the tier places chunks at the plan's threshold (`plan.boost`,
    /// under a scheme that tunes tiers) or its own; off, the tier places none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost: Option<bool>,
    /// Its caches' write policy on every node (`write-back`, `write-through`,
    /// `write-around`, `read-only`; default: the node's, `write-back`). Changed on a
    /// running volume, each cache is switched in place (leaving write-back writes its
    /// dirty blocks back first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_policy: Option<String>,
    /// Moirai's scale-out (default off): one cache over its host and its servers used as
    /// one global LRU (its levels exclusive), its planned total split between them by
    /// `alloc::scaleout` ([`crate::scaleout`]). Needs what exclusive levels need (the
    /// host's export names its servers' APIs in `upstream_api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_out: Option<bool>,
    /// The `[[image]]` this volume reads (absent: its own data): its host's export is
    /// served by the image's read-only exports, and its level 2 is the image's
    /// consolidated cache ([`crate::consolidate`]). Its caches are read-only and inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

impl TenantConfig {
    /// The priority class named by `class`.
    pub(crate) fn class(&self) -> Result<Class, String> {
        match self.class.as_deref() {
            None | Some("best-effort") => Ok(Class::BestEffort),
            Some("gold") => Ok(Class::Gold),
            Some("silver") => Ok(Class::Silver),
            Some(c) => Err(format!(
                "class: unknown class `{c}` (gold, silver, best-effort)"
            )),
        }
    }
}

/// A configuration or request error; the message names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {msg}")]
pub struct ConfigError {
    /// The file (or `request`).
    pub file: String,
    /// What is wrong, naming the field.
    pub msg: String,
}

/// Why a configuration text was refused (a file's, [`ConfigError`] adds its name): the
/// node's type, the two configurations being read alike.
pub use node::config::ConfigError as ConfigTextError;

impl ControllerConfig {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            msg: e.to_string(),
        })?;
        Self::parse(&text).map_err(|e| ConfigError {
            file,
            msg: e.to_string(),
        })
    }

    /// Parses and checks a configuration text; the error names the field.
    pub fn parse(text: &str) -> Result<Self, ConfigTextError> {
        duration::refuse_renamed(text, &RENAMED)?;
        let cfg: ControllerConfig = toml::from_str(text)?;
        cfg.check().map_err(ConfigTextError::Invalid)?;
        Ok(cfg)
    }
}

mod check;
pub(crate) use check::{check_images, check_tenants};

#[cfg(test)]
mod tests;
