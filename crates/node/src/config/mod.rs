//! The node's configuration file (`node.toml`): where it listens, how much memory it caches
//! in, its exports and their backends, and the caches and rules it starts with.
//!
//! Everything the file sets can also be changed later through the API, except the
//! listeners, the block size and the exports. Relative file paths are taken from
//! `data_dir` (itself relative to the working directory), which `--data-dir` overrides.
//! Sizes are bytes or strings with a unit (`"1GiB"`); durations are strings with a unit
//! (`"30s"`, `"100us"`, see `duration`). Unknown keys are errors, so a typo
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

//!
//! `section` holds the `[node]` table, `export` an `[[export]]`, `caches` the caches and
//! rules, `duration` how durations are written; this file the whole file, its checks
//! across tables, and paths.

mod caches;
pub mod duration;
mod export;
mod section;

pub use caches::{CacheSpec, RuleSpec};
pub use export::{ExportConfig, HotTierSpec, UpstreamApi};
pub use section::NodeSection;

use crate::error::NodeError;
use cache::WritePolicy;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A parsed, checked `node.toml`.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
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

/// Why a configuration text was refused; the message names the field (or the line and
/// column where TOML could not be read).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A key that was renamed, still used.
    #[error(transparent)]
    Renamed(#[from] duration::RenamedKey),
    /// Not TOML, or a key or value the configuration does not take.
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// Read, but a value is out of range or the parts do not fit together.
    #[error("{0}")]
    Invalid(String),
}

impl NodeConfig {
    /// Reads and checks `path`; `data_dir` overrides the file's `data_dir`.
    pub fn load(path: &Path, data_dir: Option<&Path>) -> Result<Self, NodeError> {
        let text = std::fs::read_to_string(path).map_err(|e| NodeError::Config {
            file: path.display().to_string(),
            msg: e.to_string(),
        })?;
        let mut cfg = Self::parse(&text).map_err(|e| NodeError::Config {
            file: path.display().to_string(),
            msg: e.to_string(),
        })?;
        if let Some(d) = data_dir {
            cfg.node.data_dir = Some(d.to_path_buf());
        }
        Ok(cfg)
    }

    /// Parses and checks the text of a `node.toml`; the error names the field.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        duration::refuse_renamed(text, &section::RENAMED)?;
        let cfg: NodeConfig = toml::from_str(text)?;
        cfg.check().map_err(ConfigError::Invalid)?;
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
        let idle = self.node.idle_timeout;
        if idle > Duration::from_secs(1_000_000_000) {
            return Err(format!(
                "node.idle_timeout: {} must be from 0s (never) to 1e9 s",
                humantime::format_duration(idle)
            ));
        }
        let hb = self.node.heartbeat;
        if !(Duration::from_millis(50)..=Duration::from_secs(3600)).contains(&hb) {
            return Err(format!(
                "node.heartbeat: {} must be from 50ms to 1h",
                humantime::format_duration(hb)
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
        if let Some(n) = &self.node.name {
            api::names::check("node.name", n).map_err(|e| e.to_string())?;
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
    pub(crate) fn nbd_tls(&self) -> Result<Option<nbd::Tls>, String> {
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
    use crate::units::ByteSize;

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
            .to_string()
            .contains("rule[0].cache"));
        let bad = GOOD.replace(
            "eviction = \"arc\"",
            "eviction = \"arc\"\nwrite_policy = \"sometimes\"",
        );
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("cache[0].write_policy"));
        let bad = GOOD.replace("cache_size", "cache_sise");
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("cache_sise"));
        let bad = GOOD.replace(
            "file = \"demo.img\"",
            "upstream = [\"x:1/y\"]\nfile = \"a\"",
        );
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("exactly one"));
        let bad = GOOD.replace(
            "size = \"1GiB\"",
            "size = \"1GiB\"\nallow = [\"127.0.0.1/32\", \"10.0.0.0/40\"]",
        );
        let e = NodeConfig::parse(&bad).unwrap_err().to_string();
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
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("node.tls"));
        let bad = GOOD.replace("cache_size = ", "tls = \"required\"\ncache_size = ");
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .to_string()
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
        let example = NodeConfig::parse(include_str!("../../../../examples/node.toml")).unwrap();
        assert_eq!(
            example.node.stop_timeout,
            std::time::Duration::from_secs(30)
        );
        let bad = GOOD.replace("cache_size = ", "stop_timeout = \"soon\"\ncache_size = ");
        let e = NodeConfig::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("stop_timeout") && e.contains("soon"), "{e}");
        let bad = GOOD.replace("cache_size = ", "stop_timeout = \"0s\"\ncache_size = ");
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("node.stop_timeout"));
        let bad = GOOD.replace("size = \"32MiB\"", "size = -3");
        assert!(NodeConfig::parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("negative"));
    }
}
