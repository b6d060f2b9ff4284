//! The scenario file's TOML schema as written: the sections and their keys with their
//! defaults, durations (`30s`) and write policies. Unknown keys are errors.
//!
//! Does not own: checking values and resolving names to indices (`check`), the resolved
//! [`Scenario`](super::Scenario) the simulator runs.

use crate::device::DeviceSpec;
use control::Slo;
use serde::Deserialize;
use units::ByteSize as Bytes;

/// A duration: seconds as a number, or a string `500ms`, `30s`, `2m`, `1h`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seconds(pub f64);

/// A duration [`parse_seconds`] cannot read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number in front of the unit.
    #[error("`{0}` is not a duration (e.g. 30s, 500ms)")]
    NotADuration(String),
    /// A unit other than us, ms, s, m, h.
    #[error("`{text}`: unknown unit `{unit}` (us, ms, s, m, h)")]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// Its unit.
        unit: String,
    },
}

/// Parses `30s`, `500ms`, `2m`, `1h`, `0.5` (seconds).
pub fn parse_seconds(s: &str) -> Result<f64, DurationError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| DurationError::NotADuration(s.to_string()))?;
    let mult = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        u => {
            return Err(DurationError::UnknownUnit {
                text: s.to_string(),
                unit: u.to_string(),
            })
        }
    };
    Ok(v * mult)
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(f64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Seconds(n)),
            Raw::S(s) => parse_seconds(&s)
                .map(Seconds)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// A level's write policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WritePolicy {
    /// Writes stay in the cache, dirty, until evicted.
    #[default]
    WriteBack,
    /// Writes go into the cache and through to the level below before they complete.
    WriteThrough,
    /// Writes bypass the cache (invalidating it) and go to the level below.
    WriteAround,
}

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub(super) sim: SimSection,
    #[serde(default)]
    pub(super) host: Vec<HostSection>,
    #[serde(default)]
    pub(super) server: Vec<ServerSection>,
    #[serde(default)]
    pub(super) tenant: Vec<TenantSection>,
    #[serde(default)]
    pub(super) variant: Vec<VariantSection>,
    #[serde(default)]
    pub(super) claim: Vec<crate::claims::ClaimSpec>,
}

/// `[[variant]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct VariantSection {
    pub(super) name: String,
    pub(super) base: String,
    #[serde(default)]
    pub(super) eviction: Option<String>,
    #[serde(default)]
    pub(super) l2_eviction: Option<String>,
    #[serde(default)]
    pub(super) hot_admission: Option<String>,
    #[serde(default)]
    pub(super) hot_tier: Option<bool>,
    #[serde(default)]
    pub(super) policy_choice: Option<bool>,
    #[serde(default)]
    pub(super) automata: Option<String>,
    #[serde(default)]
    pub(super) shares: Option<std::collections::BTreeMap<String, f64>>,
    #[serde(default)]
    pub(super) boost: Option<bool>,
    #[serde(default)]
    pub(super) inclusive: Option<bool>,
    #[serde(default)]
    pub(super) write_back_share: Option<f64>,
}

fn default_block() -> Bytes {
    Bytes(4096)
}
fn default_interval() -> Seconds {
    Seconds(30.0)
}
fn default_warmup() -> f64 {
    0.1
}
fn default_eviction() -> String {
    "lru".into()
}
fn default_stripe() -> Bytes {
    Bytes(65536)
}
fn default_chunk() -> Bytes {
    Bytes(1 << 20)
}
fn default_admission() -> String {
    "mrfu".into()
}
fn default_seed() -> u64 {
    1
}

/// `[sim]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SimSection {
    #[serde(default = "default_block")]
    pub(super) block_size: Bytes,
    #[serde(default = "default_interval")]
    pub(super) interval: Seconds,
    #[serde(default = "default_warmup")]
    pub(super) warmup: f64,
    #[serde(default)]
    pub(super) schemes: Option<Vec<String>>,
    #[serde(default)]
    pub(super) inclusive: bool,
    #[serde(default = "default_eviction")]
    pub(super) eviction: String,
    #[serde(default)]
    pub(super) l2_eviction: Option<String>,
    #[serde(default)]
    pub(super) duration: Option<Seconds>,
    #[serde(default = "default_seed")]
    pub(super) seed: u64,
    #[serde(default)]
    pub(super) l1_write: WritePolicy,
    #[serde(default)]
    pub(super) l2_write: WritePolicy,
    #[serde(default)]
    pub(super) network: Option<DeviceSpec>,
    #[serde(default)]
    pub(super) ram: Option<DeviceSpec>,
    #[serde(default)]
    pub(super) candidates: Option<Vec<String>>,
    #[serde(default)]
    pub(super) quantum: Option<Seconds>,
    #[serde(default)]
    pub(super) phases: Vec<Seconds>,
    #[serde(default)]
    pub(super) quick: Option<f64>,
}

/// `[[host]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HostSection {
    pub(super) name: String,
    pub(super) cache: Bytes,
    #[serde(default)]
    pub(super) link: Option<DeviceSpec>,
}

/// A device: `hdd`, `ssd`, or a table of its parameters.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum DiskField {
    Name(String),
    Spec(DeviceSpec),
}

/// `server.hot_tier`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HotTierSection {
    pub(super) size: Bytes,
    #[serde(default = "default_chunk")]
    pub(super) chunk: Bytes,
    #[serde(default = "default_admission")]
    pub(super) admission: String,
    #[serde(default)]
    pub(super) device: Option<DiskField>,
    #[serde(default)]
    pub(super) volumes: Option<Vec<String>>,
    #[serde(default = "default_migration_threads")]
    pub(super) migration_threads: u32,
}

fn default_migration_threads() -> u32 {
    1
}

/// `[[server]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ServerSection {
    pub(super) name: String,
    pub(super) cache: Bytes,
    #[serde(default)]
    pub(super) disk: Option<DiskField>,
    #[serde(default)]
    pub(super) hot_tier: Option<HotTierSection>,
}

/// `[[tenant]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TenantSection {
    pub(super) name: String,
    #[serde(default)]
    pub(super) trace: Option<String>,
    #[serde(default)]
    pub(super) format: Option<String>,
    #[serde(default)]
    pub(super) synthetic: Option<String>,
    pub(super) host: String,
    pub(super) servers: Vec<String>,
    #[serde(default = "default_stripe")]
    pub(super) stripe_unit: Bytes,
    #[serde(default)]
    pub(super) slo: Option<Slo>,
    #[serde(default)]
    pub(super) class: Option<String>,
    #[serde(default)]
    pub(super) dedicated: Option<(Bytes, Bytes)>,
    #[serde(default)]
    pub(super) rate: Option<f64>,
    #[serde(default)]
    pub(super) depth: Option<u32>,
    #[serde(default)]
    pub(super) speed: Option<f64>,
    #[serde(default)]
    pub(super) max_in_flight: Option<u32>,
    #[serde(default)]
    pub(super) requests: Option<u64>,
    #[serde(default)]
    pub(super) start: Option<Seconds>,
    #[serde(default)]
    pub(super) idle: Option<(Seconds, Seconds)>,
}
