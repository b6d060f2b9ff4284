//! The scenario file's TOML schema as written: the sections and their keys with their
//! defaults, durations (`30s`) and write policies. Unknown keys are errors.
//!
//! Does not own: checking values and resolving names to indices (`check`), the resolved
//! [`Scenario`](super::Scenario) the simulator runs.

use crate::device::DeviceSpec;
use control::Slo;
use serde::{Deserialize, Serialize};
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

/// Written as a number of seconds (the form a generated reference prints defaults in).
impl Serialize for Seconds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

/// How a reference describes a duration key: seconds as a number, or a string with a
/// unit (`format: seconds`).
impl schemars::JsonSchema for Seconds {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Seconds".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": ["number", "string"], "format": "seconds" })
    }
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
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
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
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    /// The `[sim]` table: block size, interval, schemes, levels and devices.
    pub(super) sim: SimSection,
    /// Level-1 hosts, each with its cache.
    #[serde(default)]
    pub(super) host: Vec<HostSection>,
    /// Level-2 storage servers, each with its cache and disk.
    #[serde(default)]
    pub(super) server: Vec<ServerSection>,
    /// Tenants: a workload on one host, striped over servers, with an SLO.
    #[serde(default)]
    pub(super) tenant: Vec<TenantSection>,
    /// Named variants of a scheme with some settings changed, run beside the named schemes.
    #[serde(default)]
    pub(super) variant: Vec<VariantSection>,
    /// Claims about the run's results, checked and reported in `summary.json` (rule grammar in `sim::claims`).
    #[serde(default)]
    pub(super) claim: Vec<crate::claims::ClaimSpec>,
}

/// `[[variant]]`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct VariantSection {
    /// Its name, as `schemes` and the results call it.
    pub(super) name: String,
    /// The scheme it starts from (`fair`, `mlms`, `lachesis`, ...).
    pub(super) base: String,
    /// Eviction policy at both levels (clears the scenario's `l2_eviction` unless `l2_eviction` is also given).
    #[serde(default)]
    pub(super) eviction: Option<String>,
    /// Eviction policy at level 2.
    #[serde(default)]
    pub(super) l2_eviction: Option<String>,
    /// Admission (placement) policy of every hot tier (`threshold:n=8`, `mrfu`, `adaptive`).
    #[serde(default)]
    pub(super) hot_admission: Option<String>,
    /// `false` removes every hot tier.
    #[serde(default)]
    pub(super) hot_tier: Option<bool>,
    /// Turns SOPA's online policy choice on or off.
    #[serde(default)]
    pub(super) policy_choice: Option<bool>,
    /// Bandwidth learners: `coordinated`, `uncoordinated`, `server` (one learner at the storage servers) or `off`.
    #[serde(default)]
    pub(super) automata: Option<String>,
    /// Static bandwidth weights per tenant name, applied at every storage server.
    #[serde(default)]
    pub(super) shares: Option<std::collections::BTreeMap<String, f64>>,
    /// Turns the tuning of the hot tiers' thresholds (SANCACHE's rule) on or off.
    #[serde(default)]
    pub(super) boost: Option<bool>,
    /// Inclusive (`true`) or exclusive levels.
    #[serde(default)]
    pub(super) inclusive: Option<bool>,
    /// The share of each interval's disk time that paced shrinks' write-backs may take (`0`: no pacing); only for a base scheme with hysteresis.
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
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SimSection {
    /// Bytes per block (default 4 KiB).
    #[serde(default = "default_block")]
    pub(super) block_size: Bytes,
    /// Enforcement interval, in simulated time (default 30 s).
    #[serde(default = "default_interval")]
    pub(super) interval: Seconds,
    /// Share of the run, in [0, 1), not counted in the results (default 0.1).
    #[serde(default = "default_warmup")]
    pub(super) warmup: f64,
    /// Schemes and variants to run (default: every named scheme).
    #[serde(default)]
    pub(super) schemes: Option<Vec<String>>,
    /// Inclusive levels (default false: exclusive levels with demotion).
    #[serde(default)]
    pub(super) inclusive: bool,
    /// Eviction policy at level 1, and at level 2 unless `l2_eviction` says otherwise (default `lru`).
    #[serde(default = "default_eviction")]
    pub(super) eviction: String,
    /// Level 2's policy where it differs from `eviction` (MLMS's DEMOTE: LRU over LRFU).
    #[serde(default)]
    pub(super) l2_eviction: Option<String>,
    /// Stop at this simulated time (default: when the workloads end).
    #[serde(default)]
    pub(super) duration: Option<Seconds>,
    /// Seed of every random choice (default 1); `--seed` and `--seeds` override it.
    #[serde(default = "default_seed")]
    pub(super) seed: u64,
    /// Level-1 write policy.
    #[serde(default)]
    pub(super) l1_write: WritePolicy,
    /// Level-2 write policy.
    #[serde(default)]
    pub(super) l2_write: WritePolicy,
    /// The links between hosts and servers (default: a network of the `net` defaults).
    #[serde(default)]
    pub(super) network: Option<DeviceSpec>,
    /// The caches' memory (default: the `ram` defaults).
    #[serde(default)]
    pub(super) ram: Option<DeviceSpec>,
    /// SOPA's candidate eviction policies (default: the `control` crate's).
    #[serde(default)]
    pub(super) candidates: Option<Vec<String>>,
    /// Enforce bandwidth proportions by time quanta with rounds of this length (default: weighted fair sharing).
    #[serde(default)]
    pub(super) quantum: Option<Seconds>,
    /// Phase boundaries: hit ratios are also reported per phase.
    #[serde(default)]
    pub(super) phases: Vec<Seconds>,
    /// Scale of the quick form (`--quick`), in (0, 1]: times and request counts are multiplied by it (default 0.25).
    #[serde(default)]
    pub(super) quick: Option<f64>,
}

/// `[[host]]`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HostSection {
    /// Its name (unique).
    pub(super) name: String,
    /// Its cache size.
    pub(super) cache: Bytes,
    /// Its link to the servers, where it differs from `sim.network`.
    #[serde(default)]
    pub(super) link: Option<DeviceSpec>,
}

/// A device: `hdd`, `ssd`, or a table of its parameters.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(super) enum DiskField {
    Name(String),
    Spec(DeviceSpec),
}

/// `server.hot_tier`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HotTierSection {
    /// Bytes of fast storage for chunks.
    pub(super) size: Bytes,
    /// Chunk size (default 1 MiB).
    #[serde(default = "default_chunk")]
    pub(super) chunk: Bytes,
    /// Placement policy (`threshold:n=N` for MFU, `mrfu`, `adaptive`; default `mrfu`).
    #[serde(default = "default_admission")]
    pub(super) admission: String,
    /// Its device: `hdd`, `ssd` (the default) or a device table.
    #[serde(default)]
    pub(super) device: Option<DiskField>,
    /// Tenants whose data may be boosted (default: all on the server).
    #[serde(default)]
    pub(super) volumes: Option<Vec<String>>,
    /// Copies to the tier that may run at once, the migration rate limit (default 1): an admitted miss that finds every copy busy is deferred.
    #[serde(default = "default_migration_threads")]
    pub(super) migration_threads: u32,
}

fn default_migration_threads() -> u32 {
    1
}

/// `[[server]]`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ServerSection {
    /// Its name (unique).
    pub(super) name: String,
    /// Its cache size.
    pub(super) cache: Bytes,
    /// Its disk: `hdd` (the default), `ssd` or a device table.
    #[serde(default)]
    pub(super) disk: Option<DiskField>,
    /// A SANCACHE hot-chunk tier in front of its disk.
    #[serde(default)]
    pub(super) hot_tier: Option<HotTierSection>,
}

/// `[[tenant]]`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TenantSection {
    /// Its name (unique).
    pub(super) name: String,
    /// A trace file in any format `lachesis sim` reads, relative to the scenario file or in the shared trace folder; or give `synthetic`.
    #[serde(default)]
    pub(super) trace: Option<String>,
    /// The trace's format where its name does not say.
    #[serde(default)]
    pub(super) format: Option<String>,
    /// A synthetic workload spec (`zipf:alpha=0.9,objects=100000`, see `lachesis trace gen`); or give `trace`.
    #[serde(default)]
    pub(super) synthetic: Option<String>,
    /// The `[[host]]` it runs on.
    pub(super) host: String,
    /// The `[[server]]`s its data is striped over.
    pub(super) servers: Vec<String>,
    /// Stripe unit over its servers (default 64 KiB).
    #[serde(default = "default_stripe")]
    pub(super) stripe_unit: Bytes,
    /// Its objective: `{ degradation = 0.05 }`, `{ latency_ms = 2 }`, `{ p99_ms = 5 }` (or `p95_ms`, `p999_ms`), `{ iops = 5000 }` or `{ mbps = 40 }`.
    #[serde(default)]
    #[schemars(with = "Option<std::collections::BTreeMap<String, f64>>")]
    pub(super) slo: Option<Slo>,
    /// `gold`, `silver` or `best-effort` (default).
    #[serde(default)]
    pub(super) class: Option<String>,
    /// Level-1 and level-2 sizes reserved for it whatever the scheme, instead of a class.
    #[serde(default)]
    pub(super) dedicated: Option<(Bytes, Bytes)>,
    /// Issue at this many requests per second (Poisson).
    #[serde(default)]
    pub(super) rate: Option<f64>,
    /// A closed loop keeping this many requests in flight.
    #[serde(default)]
    pub(super) depth: Option<u32>,
    /// Replay the trace's own timestamps this many times faster (the default pacing, at 1).
    #[serde(default)]
    pub(super) speed: Option<f64>,
    /// Open loops: the client's queue depth (default 256); a request due while it is full waits, and its latency counts from when it was due.
    #[serde(default)]
    pub(super) max_in_flight: Option<u32>,
    /// Stop after this many requests.
    #[serde(default)]
    pub(super) requests: Option<u64>,
    /// Simulated time of its first request.
    #[serde(default)]
    pub(super) start: Option<Seconds>,
    /// A window `[from, to)` in which it issues nothing; requests due in it wait to its end (Moirai's idle tenants).
    #[serde(default)]
    pub(super) idle: Option<(Seconds, Seconds)>,
}
