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
#[derive(Clone, Debug, Deserialize)]
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
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
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
#[derive(Clone, Debug, Deserialize)]
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
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
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Its name (unique).
    pub name: String,
    /// Its objective: `{ latency_ms = 2.0 }`, `{ p99_ms = 5 }` (or `p95_ms`, `p999_ms`),
    /// `{ iops = 5000 }`, `{ mbps = 40 }` or `{ degradation = 0.05 }`.
    #[serde(default)]
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
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
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

    /// Checks numbers, names and references.
    pub(crate) fn check(&self) -> Result<(), String> {
        let c = &self.controller;
        if c.interval.is_zero() {
            return Err("controller.interval = \"0s\" must be above 0".into());
        }
        let scheme =
            control::Scheme::named(&c.scheme).map_err(|e| format!("controller.scheme: {e}"))?;
        if scheme.allocation == control::Allocation::Alone {
            return Err(format!(
                "controller.scheme = \"{}\" is a simulator baseline (each tenant alone on \
                 every node it uses, as if it had the hardware to itself), which real nodes \
                 shared by several tenants cannot run; use \"fair\" or \"uncontrolled\"",
                c.scheme
            ));
        }
        c.bandwidth.check().map_err(|e| e.to_string())?;
        if c.block_size.0 == 0 || !c.block_size.0.is_power_of_two() {
            return Err(format!(
                "controller.block_size = {} must be a power of two",
                c.block_size.0
            ));
        }
        if c.down_after == 0 {
            return Err("controller.down_after must be at least 1".into());
        }
        if c.service.iter().any(Duration::is_zero) {
            return Err("controller.service: three times above 0".into());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            api::names::check(&format!("node[{i}].name"), &n.name).map_err(|e| e.to_string())?;
            if self.nodes[..i].iter().any(|m| m.name == n.name) {
                return Err(format!("node \"{}\": appears twice", n.name));
            }
            if n.level != 1 && n.level != 2 {
                return Err(format!(
                    "node \"{}\".level = {} must be 1 or 2",
                    n.name, n.level
                ));
            }
        }
        check_images(&self.images, &self.tenants, None)?;
        check_tenants(&self.tenants, &self.images, None)
    }
}

/// Checks the images on their own, against the volumes' names and, given the known nodes
/// (`name`, `level`), their servers; the error names the image and the field.
pub(crate) fn check_images(
    images: &[ImageSpec],
    tenants: &[TenantConfig],
    nodes: Option<&[(String, u8)]>,
) -> Result<(), String> {
    for (i, m) in images.iter().enumerate() {
        let at = format!("image \"{}\"", m.name);
        api::names::check(&format!("image[{i}].name"), &m.name).map_err(|e| e.to_string())?;
        if images[..i].iter().any(|n| n.name == m.name) {
            return Err(format!("{at}: appears twice"));
        }
        if let Some(t) = tenants
            .iter()
            .find(|t| t.volumes.iter().any(|v| v.name == m.name))
        {
            return Err(format!(
                "{at}.name: tenant \"{}\" has a volume of that name (images and volumes \
                 share the nodes' cache names)",
                t.name
            ));
        }
        if m.servers.is_empty() {
            return Err(format!("{at}.servers: the image is on no level-2 node"));
        }
        for (k, s) in m.servers.iter().enumerate() {
            if m.servers[..k].contains(s) {
                return Err(format!("{at}.servers: `{s}` listed twice"));
            }
            if let Some(level) = nodes.map(|n| n.iter().find(|(x, _)| x == s).map(|(_, l)| *l)) {
                match level {
                    None => return Err(format!("{at}.servers: unknown node `{s}`")),
                    Some(2) => {}
                    Some(l) => return Err(format!("{at}.servers: node `{s}` is level {l}, not 2")),
                }
            }
        }
        if m.size.is_some_and(|s| s.0 == 0) {
            return Err(format!("{at}.size must be above 0"));
        }
    }
    Ok(())
}

/// Checks what a volume reading an image must be: the image known, on exactly the
/// volume's servers, and the volume read-only, inclusive and not scaled out.
fn check_reader(vat: &str, v: &VolumeSpec, images: &[ImageSpec]) -> Result<(), String> {
    let Some(name) = v.image.as_deref() else {
        return Ok(());
    };
    let Some(m) = images.iter().find(|m| m.name == name) else {
        let known: Vec<&str> = images.iter().map(|m| m.name.as_str()).collect();
        return Err(format!(
            "{vat}.image: unknown image `{name}` (images: {})",
            if known.is_empty() {
                "none declared".to_string()
            } else {
                known.join(", ")
            }
        ));
    };
    if let Some(s) = m.servers.iter().find(|s| !v.servers.contains(s)) {
        return Err(format!(
            "{vat}.image: image `{name}` is on server `{s}`, which the volume does not use \
             (servers = {:?})",
            v.servers
        ));
    }
    if let Some(s) = v.servers.iter().find(|s| !m.servers.contains(s)) {
        return Err(format!(
            "{vat}.servers: server `{s}` does not hold image `{name}` (its servers: {:?})",
            m.servers
        ));
    }
    if v.write_policy
        .as_deref()
        .is_some_and(|wp| wp != "read-only")
    {
        return Err(format!(
            "{vat}.write_policy: a volume reading image `{name}` is read-only; drop it or \
             say \"read-only\""
        ));
    }
    if v.scale_out == Some(true) {
        return Err(format!(
            "{vat}.scale_out: a volume reading image `{name}` has its level 2 in the \
             image's consolidated cache, not a scale-out of its own"
        ));
    }
    if v.exclusive == Some(true) {
        return Err(format!(
            "{vat}.exclusive: a volume reading image `{name}` is inclusive (the \
             consolidated cache keeps what it serves for the other readers)"
        ));
    }
    Ok(())
}

/// Checks tenants on their own and, given the known nodes (`name`, `level`), their
/// references; the error names the tenant, the volume and the field.
pub(crate) fn check_tenants(
    tenants: &[TenantConfig],
    images: &[ImageSpec],
    nodes: Option<&[(String, u8)]>,
) -> Result<(), String> {
    for (i, t) in tenants.iter().enumerate() {
        let at = format!("tenant \"{}\"", t.name);
        api::names::check(&format!("tenant[{i}].name"), &t.name).map_err(|e| e.to_string())?;
        if tenants[..i].iter().any(|u| u.name == t.name) {
            return Err(format!("{at}: appears twice"));
        }
        t.class().map_err(|e| format!("{at}.{e}"))?;
        if let Some(slo) = &t.slo {
            slo.check().map_err(|e| format!("{at}.slo: {e}"))?;
        }
        if let Some(d) = t.depth {
            if !(d.is_finite() && d > 0.0) {
                return Err(format!("{at}.depth = {d} must be above 0"));
            }
        }
        if t.volumes.is_empty() {
            return Err(format!("{at}.volume: a tenant needs at least one volume"));
        }
        for (k, v) in t.volumes.iter().enumerate() {
            let vat = format!("{at}.volume \"{}\"", v.name);
            api::names::check(&format!("{at}.volume[{k}].name"), &v.name)
                .map_err(|e| e.to_string())?;
            let dup = tenants
                .iter()
                .flat_map(|u| &u.volumes)
                .filter(|w| w.name == v.name)
                .count();
            if dup > 1 {
                return Err(format!("{vat}: the volume name is used twice"));
            }
            if v.servers.is_empty() {
                return Err(format!("{vat}.servers: the volume is on no level-2 node"));
            }
            for (k, h) in v.hosts.iter().enumerate() {
                if *h == v.host || v.hosts[..k].contains(h) {
                    return Err(format!("{vat}.hosts: node `{h}` is listed twice"));
                }
            }
            if v.stripe_unit.is_some_and(|s| s.0 == 0) {
                return Err(format!("{vat}.stripe_unit must be above 0"));
            }
            if v.scale_out == Some(true) && v.exclusive == Some(false) {
                return Err(format!(
                    "{vat}.scale_out: a scaled-out volume's levels are one global LRU, so \
                     exclusive; drop `exclusive = false`"
                ));
            }
            check_reader(&vat, v, images)?;
            if let Some(wp) = v
                .write_policy
                .as_deref()
                .filter(|wp| !api::node::WRITE_POLICIES.contains(wp))
            {
                return Err(format!(
                    "{vat}.write_policy: unknown policy `{wp}` ({})",
                    api::node::WRITE_POLICIES.join(", ")
                ));
            }
            if let Some(nodes) = nodes {
                let level = |n: &str| nodes.iter().find(|(m, _)| m == n).map(|(_, l)| *l);
                match level(&v.host) {
                    None => return Err(format!("{vat}.host: unknown node `{}`", v.host)),
                    Some(1) => {}
                    Some(l) => {
                        return Err(format!("{vat}.host: node `{}` is level {l}, not 1", v.host))
                    }
                }
                for h in &v.hosts {
                    match level(h) {
                        None => return Err(format!("{vat}.hosts: unknown node `{h}`")),
                        Some(1) => {}
                        Some(l) => {
                            return Err(format!("{vat}.hosts: node `{h}` is level {l}, not 1"))
                        }
                    }
                }
                for (k, s) in v.servers.iter().enumerate() {
                    match level(s) {
                        None => return Err(format!("{vat}.servers: unknown node `{s}`")),
                        Some(2) => {}
                        Some(l) => {
                            return Err(format!("{vat}.servers: node `{s}` is level {l}, not 2"))
                        }
                    }
                    if v.servers[..k].contains(s) {
                        return Err(format!("{vat}.servers: `{s}` listed twice"));
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[controller]
interval = "2s"
scheme = "lachesis"
[[node]]
name = "l1"
level = 1
[[node]]
name = "l2"
level = 2
[[tenant]]
name = "db"
class = "gold"
slo = { latency_ms = 2.0 }
[[tenant.volume]]
name = "db"
host = "l1"
servers = ["l2"]
"#;

    #[test]
    fn parses_a_good_file() {
        let c = ControllerConfig::parse(GOOD).unwrap();
        assert_eq!(c.controller.interval, Duration::from_secs(2));
        assert_eq!(c.tenants[0].slo, Some(Slo::LatencyMs(2.0)));
        assert_eq!(c.tenants[0].class().unwrap(), Class::Gold);
        assert_eq!(c.tenants[0].volumes[0].servers, vec!["l2".to_string()]);
    }

    #[test]
    fn errors_name_the_field() {
        let bad = GOOD.replace("scheme = \"lachesis\"", "scheme = \"nope\"");
        let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("controller.scheme"), "{e}");
        let bad = GOOD.replace("scheme = \"lachesis\"", "scheme = \"independent\"");
        let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("simulator baseline"), "{e}");
        let bad = GOOD.replace("servers = [\"l2\"]", "servers = []");
        let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("tenant \"db\".volume \"db\".servers"), "{e}");
        let bad = GOOD.replace("class = \"gold\"", "class = \"platinum\"");
        let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("tenant \"db\".class"), "{e}");
        let bad = GOOD.replace("latency_ms = 2.0", "latency_ms = -1.0");
        let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("tenant \"db\".slo"), "{e}");
        let bad = GOOD.replace("interval = \"2s\"", "interval = \"2s\"\ncolour = 1");
        let e = ControllerConfig::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("colour"), "{e}");
        let c = ControllerConfig::parse(GOOD).unwrap();
        let nodes = vec![("l1".to_string(), 1u8)];
        let e = check_tenants(&c.tenants, &[], Some(&nodes)).unwrap_err();
        assert!(e.contains("servers: unknown node `l2`"), "{e}");
    }

    const IMAGE: &str = r#"
[controller]
[[node]]
name = "h1"
level = 1
[[node]]
name = "h2"
level = 1
[[node]]
name = "s1"
level = 2
[[node]]
name = "s2"
level = 2
[[image]]
name = "golden"
servers = ["s1"]
size = "8MiB"
[[tenant]]
name = "vdi"
[[tenant.volume]]
name = "vm1"
host = "h1"
servers = ["s1"]
image = "golden"
[[tenant.volume]]
name = "vm2"
host = "h2"
servers = ["s1"]
image = "golden"
"#;

    #[test]
    fn an_image_and_its_readers_parse_and_bad_references_name_the_field() {
        let c = ControllerConfig::parse(IMAGE).unwrap();
        assert_eq!(c.images[0].name, "golden");
        assert_eq!(c.images[0].size, Some(ByteSize(8 << 20)));
        assert_eq!(c.tenants[0].volumes[1].image.as_deref(), Some("golden"));
        let nodes: Vec<(String, u8)> = c.nodes.iter().map(|n| (n.name.clone(), n.level)).collect();
        check_tenants(&c.tenants, &c.images, Some(&nodes)).unwrap();
        check_images(&c.images, &c.tenants, Some(&nodes)).unwrap();
        let err = |text: &str| ControllerConfig::parse(text).unwrap_err().to_string();
        // An unknown image.
        let e = err(&IMAGE.replacen("image = \"golden\"", "image = \"silver\"", 1));
        assert!(
            e.contains("tenant \"vdi\".volume \"vm1\".image: unknown image `silver`")
                && e.contains("images: golden"),
            "{e}"
        );
        // The image on a server the volume does not use, and a server without the image.
        let e = err(&IMAGE.replace(
            "servers = [\"s1\"]\nsize",
            "servers = [\"s1\", \"s2\"]\nsize",
        ));
        assert!(
            e.contains("volume \"vm1\".image: image `golden` is on server `s2`, which the volume does not use"),
            "{e}"
        );
        let e = err(&IMAGE.replacen(
            "servers = [\"s1\"]\nimage",
            "servers = [\"s1\", \"s2\"]\nimage",
            1,
        ));
        assert!(
            e.contains("volume \"vm1\".servers: server `s2` does not hold image `golden`"),
            "{e}"
        );
        // A reader that writes, is exclusive or scaled out.
        let reader = "image = \"golden\"\n[[tenant.volume]]";
        for (extra, field) in [
            ("write_policy = \"write-back\"", "write_policy"),
            ("exclusive = true", "exclusive"),
            ("scale_out = true", "scale_out"),
        ] {
            let e = err(&IMAGE.replacen(reader, &format!("{extra}\n{reader}"), 1));
            assert!(
                e.contains(&format!(
                    "volume \"vm1\".{field}: a volume reading image `golden`"
                )),
                "{e}"
            );
        }
        let ok = IMAGE.replacen(
            reader,
            &format!("write_policy = \"read-only\"\n{reader}"),
            1,
        );
        ControllerConfig::parse(&ok).unwrap();
        // The image's own fields.
        let e = err(&IMAGE.replace("size = \"8MiB\"", "size = 0"));
        assert!(e.contains("image \"golden\".size must be above 0"), "{e}");
        let e = err(&IMAGE.replace("servers = [\"s1\"]\nsize", "servers = []\nsize"));
        assert!(
            e.contains("image \"golden\".servers: the image is on no level-2 node"),
            "{e}"
        );
        let e = err(&IMAGE.replace("name = \"golden\"", "name = \"vm2\""));
        assert!(
            e.contains("image \"vm2\".name: tenant \"vdi\" has a volume of that name"),
            "{e}"
        );
        let e = err(&IMAGE.replace("size = \"8MiB\"", "size = \"8MiB\"\ncolour = 1"));
        assert!(e.contains("colour"), "{e}");
        let e = check_images(&c.images, &c.tenants, Some(&nodes[..2])).unwrap_err();
        assert!(
            e.contains("image \"golden\".servers: unknown node `s1`"),
            "{e}"
        );
        let levels = vec![("s1".to_string(), 1u8)];
        let e = check_images(&c.images, &c.tenants, Some(&levels)).unwrap_err();
        assert!(
            e.contains("image \"golden\".servers: node `s1` is level 1, not 2"),
            "{e}"
        );
    }
}
