//! Scenario files: the hierarchy, the tenants and the schemes of one experiment, in TOML.
//!
//! ```toml
//! [sim]
//! block_size = "4KiB"
//! interval = "30s"            # enforcement interval, simulated time
//! warmup = 0.1                # share of the run not counted
//! schemes = ["fair", "mlms"]  # default: all
//! inclusive = false           # exclusive levels with demotion
//! eviction = "lru"            # default policy at both levels
//! duration = "1h"             # optional: stop at this simulated time
//! l1_write = "write-back"     # write-back | write-through | write-around
//! l2_write = "write-back"
//! quantum = "10ms"            # optional: enforce proportions by time quanta of this round
//!                             # (default: weighted fair sharing, see `queue`)
//! [[host]]
//! name = "h1"
//! cache = "512MiB"
//! [[server]]
//! name = "s1"
//! cache = "1GiB"
//! disk = "hdd"                # hdd | ssd | { kind = "hdd", rpm = 10045, seek_ms = 5.0 }
//! hot_tier = { size = "4GiB", chunk = "1MiB", admission = "adaptive" }   # optional
//! [[tenant]]
//! name = "db"
//! trace = "traces/db.csv"     # any format `lachesis sim` reads; or synthetic = "zipf:..."
//! host = "h1"
//! servers = ["s1"]
//! stripe_unit = "64KiB"
//! slo = { degradation = 0.05 }   # or { latency_ms = 2.0 } / { p99_ms = 5 } (p95_ms, p999_ms) / { iops = 5000 } / { mbps = 40 }
//! rate = 2000                 # optional: issue at this many requests/s (Poisson)
//! depth = 8                   # optional: closed loop with this many in flight
//! max_in_flight = 256         # optional, open loops (rate or timestamps): the client's
//!                             # queue depth; a request due while it is full waits
//! ```
//!
//! Sizes take any unit `units::parse_bytes` reads. Unknown keys are errors. [`Scenario::load`] resolves names to indices and checks every
//! number; each error names the file, the key (`tenant "db".host`, `server "s1".cache`) and
//! the reason. Trace paths are relative to the scenario file; a bare name that is not there
//! is also looked up in the shared trace folder (`trace::find_shared_trace`).

use crate::device::DeviceSpec;
use crate::SimError;
use control::{Class, Slo};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use units::ByteSize as Bytes;

/// A duration: seconds as a number, or a string `500ms`, `30s`, `2m`, `1h`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seconds(pub f64);

/// Parses `30s`, `500ms`, `2m`, `1h`, `0.5` (seconds).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 30s, 500ms)"))?;
    let mult = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        u => return Err(format!("`{s}`: unknown unit `{u}` (us, ms, s, m, h)")),
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    sim: SimSection,
    #[serde(default)]
    host: Vec<HostSection>,
    #[serde(default)]
    server: Vec<ServerSection>,
    #[serde(default)]
    tenant: Vec<TenantSection>,
    #[serde(default)]
    variant: Vec<VariantSection>,
    #[serde(default)]
    claim: Vec<crate::claims::ClaimSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VariantSection {
    name: String,
    base: String,
    #[serde(default)]
    eviction: Option<String>,
    #[serde(default)]
    hot_admission: Option<String>,
    #[serde(default)]
    hot_tier: Option<bool>,
    #[serde(default)]
    policy_choice: Option<bool>,
    #[serde(default)]
    automata: Option<String>,
    #[serde(default)]
    shares: Option<std::collections::BTreeMap<String, f64>>,
    #[serde(default)]
    boost: Option<bool>,
    #[serde(default)]
    inclusive: Option<bool>,
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SimSection {
    #[serde(default = "default_block")]
    block_size: Bytes,
    #[serde(default = "default_interval")]
    interval: Seconds,
    #[serde(default = "default_warmup")]
    warmup: f64,
    #[serde(default)]
    schemes: Option<Vec<String>>,
    #[serde(default)]
    inclusive: bool,
    #[serde(default = "default_eviction")]
    eviction: String,
    #[serde(default)]
    duration: Option<Seconds>,
    #[serde(default = "default_seed")]
    seed: u64,
    #[serde(default)]
    l1_write: WritePolicy,
    #[serde(default)]
    l2_write: WritePolicy,
    #[serde(default)]
    network: Option<DeviceSpec>,
    #[serde(default)]
    ram: Option<DeviceSpec>,
    #[serde(default)]
    candidates: Option<Vec<String>>,
    #[serde(default)]
    quantum: Option<Seconds>,
    #[serde(default)]
    phases: Vec<Seconds>,
    #[serde(default)]
    quick: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostSection {
    name: String,
    cache: Bytes,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DiskField {
    Name(String),
    Spec(DeviceSpec),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HotTierSection {
    size: Bytes,
    #[serde(default = "default_chunk")]
    chunk: Bytes,
    #[serde(default = "default_admission")]
    admission: String,
    #[serde(default)]
    device: Option<DiskField>,
    #[serde(default)]
    volumes: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerSection {
    name: String,
    cache: Bytes,
    #[serde(default)]
    disk: Option<DiskField>,
    #[serde(default)]
    hot_tier: Option<HotTierSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantSection {
    name: String,
    #[serde(default)]
    trace: Option<String>,
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    synthetic: Option<String>,
    host: String,
    servers: Vec<String>,
    #[serde(default = "default_stripe")]
    stripe_unit: Bytes,
    #[serde(default)]
    slo: Option<Slo>,
    #[serde(default)]
    class: Option<String>,
    #[serde(default)]
    dedicated: Option<(Bytes, Bytes)>,
    #[serde(default)]
    rate: Option<f64>,
    #[serde(default)]
    depth: Option<u32>,
    #[serde(default)]
    speed: Option<f64>,
    #[serde(default)]
    max_in_flight: Option<u32>,
    #[serde(default)]
    requests: Option<u64>,
    #[serde(default)]
    start: Option<Seconds>,
    #[serde(default)]
    idle: Option<(Seconds, Seconds)>,
}

/// Where a tenant's requests come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// A trace file and its format (detected when `None`).
    Trace {
        /// Resolved path.
        path: PathBuf,
        /// Format spec.
        format: Option<String>,
    },
    /// A synthetic workload spec (`trace::synth` grammar).
    Synthetic(String),
}

/// An open-loop tenant's queue depth when its scenario gives none (`max_in_flight`), as a
/// host's block layer queues a device's requests: an open loop the system cannot keep up
/// with waits at its client, instead of booking every device for minutes ahead (the
/// simulator's memory and time would then grow with the run's length).
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 256;

/// How a tenant paces its requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// At the trace's own timestamps, sped up by a factor.
    Timestamps {
        /// Speed-up factor (2 = twice as fast).
        speed: f64,
    },
    /// Poisson arrivals at this many requests per second.
    Rate(f64),
    /// A closed loop keeping this many requests in flight.
    Depth(u32),
}

/// A level-2 hot-chunk tier.
#[derive(Clone, Debug, PartialEq)]
pub struct HotTier {
    /// Capacity in chunks.
    pub chunks: u64,
    /// Blocks per chunk.
    pub chunk_blocks: u64,
    /// Admission spec (`policy::admission`): `threshold:n=N` (MFU), `mrfu`, `adaptive`.
    pub admission: String,
    /// Its device.
    pub device: DeviceSpec,
    /// Tenants whose data may be boosted (all when `None`).
    pub volumes: Option<Vec<usize>>,
}

/// A level-1 host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSpec {
    /// Name.
    pub name: String,
    /// Cache capacity in blocks.
    pub blocks: u64,
}

/// A storage server.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSpec {
    /// Name.
    pub name: String,
    /// Cache capacity in blocks.
    pub blocks: u64,
    /// Its disk.
    pub disk: DeviceSpec,
    /// Its hot tier, if any.
    pub hot_tier: Option<HotTier>,
}

/// A tenant.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantSpec {
    /// Name.
    pub name: String,
    /// Requests.
    pub workload: Workload,
    /// Host index.
    pub host: usize,
    /// Server indices.
    pub servers: Vec<usize>,
    /// Stripe unit in blocks.
    pub stripe_blocks: u64,
    /// SLO.
    pub slo: Option<Slo>,
    /// Priority class.
    pub class: Class,
    /// Pacing.
    pub pacing: Pacing,
    /// Open loops: at most this many requests in flight (the client's queue depth). A
    /// request due while that many are outstanding is issued when the earliest of them
    /// completes, and its latency counts from when it was due, so a client that falls
    /// behind sees its whole wait. A closed loop's is its depth.
    pub max_in_flight: u32,
    /// At most this many requests.
    pub requests: Option<u64>,
    /// Simulated time of its first request (seconds).
    pub start: f64,
    /// A window `[from, to)` (seconds) in which it issues nothing: requests due inside it
    /// are held to its end (an idle phase; Moirai's idle tenants).
    pub idle: Option<(f64, f64)>,
}

impl TenantSpec {
    /// The position in [`TenantSpec::servers`] of the server that block `b`'s stripe
    /// lives on (stripes of `stripe_blocks` blocks, round-robin over the servers).
    #[inline]
    pub fn stripe_of(&self, b: u64) -> usize {
        ((b / self.stripe_blocks) % self.servers.len() as u64) as usize
    }

    /// The index of the server that block `b`'s stripe lives on.
    #[inline]
    pub fn server_of(&self, b: u64) -> usize {
        self.servers[self.stripe_of(b)]
    }
}

/// A named variant of a scheme, defined in the scenario (`[[variant]]`): the base scheme
/// with some of the scenario's or the scheme's settings changed, so one experiment can run
/// "LRU alone", "MFU threshold 8" or "uncoordinated learners" beside the named schemes.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// Its name (used in `schemes` and in the results).
    pub name: String,
    /// The scheme it starts from (`control::Scheme::named`).
    pub base: String,
    /// Eviction policy at both levels (the scenario's `eviction`).
    pub eviction: Option<String>,
    /// Admission of every hot tier.
    pub hot_admission: Option<String>,
    /// `false`: the hot tiers are removed.
    pub hot_tier: Option<bool>,
    /// Turn SOPA's policy choice on or off.
    pub policy_choice: Option<bool>,
    /// Bandwidth learners: `coordinated`, `uncoordinated`, `server` (a single learner at
    /// the storage servers) or `off`.
    pub automata: Option<String>,
    /// Static bandwidth proportions per tenant (by tenant index; each resource divides
    /// between its tenants in these ratios).
    pub shares: Option<Vec<f64>>,
    /// Turn hot-tier threshold tuning on or off.
    pub boost: Option<bool>,
    /// Inclusive (`true`) or exclusive levels.
    pub inclusive: Option<bool>,
}

/// A resolved, checked scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Name (the file stem).
    pub name: String,
    /// Bytes per block.
    pub block_size: u64,
    /// Enforcement interval (seconds).
    pub interval: f64,
    /// Share of the run not counted.
    pub warmup: f64,
    /// Schemes to run.
    pub schemes: Vec<String>,
    /// Inclusive levels (exclusive with demotion otherwise).
    pub inclusive: bool,
    /// Default eviction policy.
    pub eviction: String,
    /// Stop at this simulated time.
    pub duration: Option<f64>,
    /// Seed of every random choice.
    pub seed: u64,
    /// Whether synthetic workloads take their seeds from `seed` (set by [`Scenario::reseed`])
    /// rather than from their own specs.
    pub reseeded: bool,
    /// Level-1 write policy.
    pub l1_write: WritePolicy,
    /// Level-2 write policy.
    pub l2_write: WritePolicy,
    /// Network links.
    pub network: DeviceSpec,
    /// Memory.
    pub ram: DeviceSpec,
    /// SOPA's candidates (default: `control`'s).
    pub candidates: Option<Vec<String>>,
    /// Bandwidth proportions are enforced by weighted fair sharing, or, with a round
    /// length in seconds (`sim.quantum`), by time quanta ([`crate::queue::Scheduler`]).
    pub quantum: Option<f64>,
    /// Hosts.
    pub hosts: Vec<HostSpec>,
    /// Servers.
    pub servers: Vec<ServerSpec>,
    /// Tenants.
    pub tenants: Vec<TenantSpec>,
    /// Scheme variants (`[[variant]]`).
    pub variants: Vec<Variant>,
    /// Claims checked against the run (`[[claim]]`, see [`crate::claims`]).
    pub claims: Vec<crate::claims::ClaimSpec>,
    /// Phase boundaries (seconds): hit ratios are also reported per phase.
    pub phases: Vec<f64>,
    /// Scale of the quick form ([`Scenario::quick`]): times and request counts times this.
    pub quick: f64,
    /// Static bandwidth proportions per tenant, applied at every storage server's disk
    /// (set by a variant's `shares`).
    pub shares: Option<Vec<f64>>,
    /// Whether [`Scenario::quick`] was applied.
    pub is_quick: bool,
}

/// The built-in scenario (`examples/hierarchy.toml`): four tenants on two hosts and two
/// storage servers, what `lachesis sim run` runs without a file.
pub const BUILTIN: &str = include_str!("../../../examples/hierarchy.toml");

impl Scenario {
    /// The built-in scenario, [`BUILTIN`].
    pub fn builtin() -> Scenario {
        Scenario::parse(BUILTIN, Path::new("hierarchy.toml"))
            .expect("the built-in scenario is valid")
    }

    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::Scenario {
            file: path.display().to_string(),
            key: "-".into(),
            reason: e.to_string(),
        })?;
        Scenario::parse(&text, path)
    }

    /// Parses and checks scenario `text` read from `path` (relative trace paths start
    /// from its folder).
    pub fn parse(text: &str, path: &Path) -> Result<Scenario, SimError> {
        let file_name = path.display().to_string();
        let err = |key: String, reason: String| SimError::Scenario {
            file: file_name.clone(),
            key,
            reason,
        };
        let f: File = toml::from_str(text).map_err(|e| {
            let key = e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].lines().count().max(1);
                    format!("line {line}")
                })
                .unwrap_or_else(|| "-".into());
            err(key, e.message().to_string())
        })?;
        let s = &f.sim;
        let bs = s.block_size.0;
        if bs == 0 {
            return Err(err("sim.block_size".into(), "must be above 0".into()));
        }
        if !(s.interval.0.is_finite() && s.interval.0 > 0.0) {
            return Err(err("sim.interval".into(), "must be above 0".into()));
        }
        if let Some(q) = s.quantum {
            if !(q.0.is_finite() && q.0 > 0.0) {
                return Err(err("sim.quantum".into(), "must be above 0".into()));
            }
        }
        if !(0.0..1.0).contains(&s.warmup) {
            return Err(err(
                "sim.warmup".into(),
                format!("{} must be in [0, 1)", s.warmup),
            ));
        }
        policy::build(&s.eviction).map_err(|e| err("sim.eviction".into(), e.to_string()))?;
        let schemes = match &s.schemes {
            Some(v) => {
                for n in v {
                    if f.variant.iter().any(|x| &x.name == n) {
                        continue;
                    }
                    control::Scheme::named(n)
                        .map_err(|e| err("sim.schemes".into(), e.to_string()))?;
                }
                v.clone()
            }
            None => control::SCHEME_NAMES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        };
        if let Some(c) = &s.candidates {
            for p in c {
                policy::build(p).map_err(|e| err("sim.candidates".into(), e.to_string()))?;
            }
        }
        let network = s.network.unwrap_or_else(DeviceSpec::net);
        network.check().map_err(|r| err("sim.network".into(), r))?;
        let ram = s.ram.unwrap_or_else(DeviceSpec::ram);
        ram.check().map_err(|r| err("sim.ram".into(), r))?;
        if f.host.is_empty() {
            return Err(err("host".into(), "no [[host]]".into()));
        }
        if f.server.is_empty() {
            return Err(err("server".into(), "no [[server]]".into()));
        }
        let blocks = |b: Bytes, key: String| -> Result<u64, SimError> {
            if b.0 % bs != 0 {
                return Err(err(
                    key,
                    format!("{} bytes is not a whole number of {bs}-byte blocks", b.0),
                ));
            }
            Ok(b.0 / bs)
        };
        let mut hosts = Vec::new();
        for h in &f.host {
            if hosts.iter().any(|x: &HostSpec| x.name == h.name) {
                return Err(err(format!("host \"{}\"", h.name), "appears twice".into()));
            }
            hosts.push(HostSpec {
                name: h.name.clone(),
                blocks: blocks(h.cache, format!("host \"{}\".cache", h.name))?,
            });
        }
        let disk = |d: &Option<DiskField>,
                    key: String,
                    default: DeviceSpec|
         -> Result<DeviceSpec, SimError> {
            let spec = match d {
                None => default,
                Some(DiskField::Name(n)) => match n.as_str() {
                    "hdd" => DeviceSpec::hdd(),
                    "ssd" => DeviceSpec::ssd(),
                    other => {
                        return Err(err(
                            key,
                            format!("unknown disk `{other}` (hdd, ssd, or a table)"),
                        ))
                    }
                },
                Some(DiskField::Spec(s)) => *s,
            };
            spec.check().map_err(|r| err(key, r))?;
            Ok(spec)
        };
        let mut servers = Vec::new();
        for sv in &f.server {
            let key = |k: &str| format!("server \"{}\".{k}", sv.name);
            if servers.iter().any(|x: &ServerSpec| x.name == sv.name) {
                return Err(err(
                    format!("server \"{}\"", sv.name),
                    "appears twice".into(),
                ));
            }
            let hot_tier = match &sv.hot_tier {
                None => None,
                Some(t) => {
                    let chunk_blocks = blocks(t.chunk, key("hot_tier.chunk"))?;
                    if chunk_blocks == 0 || t.size.0 % t.chunk.0.max(1) != 0 {
                        return Err(err(
                            key("hot_tier"),
                            "size must be a whole number of chunks of at least one block".into(),
                        ));
                    }
                    policy::admission::build_admission(&t.admission)
                        .map_err(|e| err(key("hot_tier.admission"), e.to_string()))?;
                    Some(HotTier {
                        chunks: t.size.0 / t.chunk.0,
                        chunk_blocks,
                        admission: t.admission.clone(),
                        device: disk(&t.device, key("hot_tier.device"), DeviceSpec::ssd())?,
                        volumes: None,
                    })
                }
            };
            servers.push(ServerSpec {
                name: sv.name.clone(),
                blocks: blocks(sv.cache, key("cache"))?,
                disk: disk(&sv.disk, key("disk"), DeviceSpec::hdd())?,
                hot_tier,
            });
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut tenants = Vec::new();
        for t in &f.tenant {
            let key = |k: &str| format!("tenant \"{}\".{k}", t.name);
            if tenants.iter().any(|x: &TenantSpec| x.name == t.name) {
                return Err(err(
                    format!("tenant \"{}\"", t.name),
                    "appears twice".into(),
                ));
            }
            let workload = match (&t.trace, &t.synthetic) {
                (Some(p), None) => {
                    let direct = dir.join(p);
                    let path = if direct.exists() {
                        direct
                    } else {
                        trace::find_shared_trace(p, dir)
                            .or_else(|| {
                                std::env::current_dir()
                                    .ok()
                                    .and_then(|c| trace::find_shared_trace(p, &c))
                            })
                            .ok_or_else(|| {
                                err(
                                    key("trace"),
                                    format!("`{}` does not exist", direct.display()),
                                )
                            })?
                    };
                    if let Some(fm) = &t.format {
                        fm.parse::<trace::Format>()
                            .map_err(|e| err(key("format"), e.to_string()))?;
                    }
                    Workload::Trace {
                        path,
                        format: t.format.clone(),
                    }
                }
                (None, Some(spec)) => {
                    trace::synth::parse(spec).map_err(|e| err(key("synthetic"), e.to_string()))?;
                    Workload::Synthetic(spec.clone())
                }
                _ => {
                    return Err(err(
                        key("trace"),
                        "give exactly one of `trace` and `synthetic`".into(),
                    ))
                }
            };
            let host = hosts
                .iter()
                .position(|h| h.name == t.host)
                .ok_or_else(|| err(key("host"), format!("`{}` is not a [[host]]", t.host)))?;
            if t.servers.is_empty() {
                return Err(err(
                    key("servers"),
                    "the tenant is on no storage server".into(),
                ));
            }
            let mut sv = Vec::new();
            for n in &t.servers {
                let i = servers
                    .iter()
                    .position(|s| &s.name == n)
                    .ok_or_else(|| err(key("servers"), format!("`{n}` is not a [[server]]")))?;
                if sv.contains(&i) {
                    return Err(err(key("servers"), format!("`{n}` listed twice")));
                }
                sv.push(i);
            }
            let stripe_blocks = blocks(t.stripe_unit, key("stripe_unit"))?;
            if stripe_blocks == 0 {
                return Err(err(key("stripe_unit"), "must be at least one block".into()));
            }
            if let Some(slo) = &t.slo {
                slo.check().map_err(|r| err(key("slo"), r))?;
            }
            let class = match (t.class.as_deref(), t.dedicated) {
                (_, Some((a, b))) => Class::Dedicated {
                    l1: blocks(a, key("dedicated"))?,
                    l2: blocks(b, key("dedicated"))?,
                },
                (None | Some("best-effort"), None) => Class::BestEffort,
                (Some("gold"), None) => Class::Gold,
                (Some("silver"), None) => Class::Silver,
                (Some(c), None) => {
                    return Err(err(
                        key("class"),
                        format!(
                            "unknown class `{c}` (gold, silver, best-effort; or set `dedicated`)"
                        ),
                    ))
                }
            };
            let pacing = match (t.rate, t.depth, t.speed) {
                (Some(r), None, None) if r.is_finite() && r > 0.0 => Pacing::Rate(r),
                (None, Some(d), None) if d > 0 => Pacing::Depth(d),
                (None, None, Some(s)) if s.is_finite() && s > 0.0 => {
                    Pacing::Timestamps { speed: s }
                }
                (None, None, None) => Pacing::Timestamps { speed: 1.0 },
                _ => {
                    return Err(err(
                        key("rate"),
                        "give at most one of rate (> 0), depth (> 0) and speed (> 0)".into(),
                    ))
                }
            };
            let max_in_flight = match (pacing, t.max_in_flight) {
                (Pacing::Depth(d), None) => d,
                (Pacing::Depth(_), Some(_)) => {
                    return Err(err(
                        key("max_in_flight"),
                        "a closed loop keeps `depth` requests in flight; give one of them".into(),
                    ))
                }
                (_, Some(0)) => return Err(err(key("max_in_flight"), "must be at least 1".into())),
                (_, m) => m.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
            };
            tenants.push(TenantSpec {
                name: t.name.clone(),
                workload,
                host,
                servers: sv,
                stripe_blocks,
                slo: t.slo,
                class,
                pacing,
                max_in_flight,
                requests: t.requests,
                start: t.start.map_or(0.0, |s| s.0),
                idle: match t.idle {
                    None => None,
                    Some((a, b)) if a.0 >= 0.0 && b.0 > a.0 => Some((a.0, b.0)),
                    Some(_) => {
                        return Err(err(
                            key("idle"),
                            "give [from, to] with 0 <= from < to".into(),
                        ))
                    }
                },
            });
        }
        if tenants.is_empty() {
            return Err(err("tenant".into(), "no [[tenant]]".into()));
        }
        let tenant_index = |n: &str, key: String| {
            tenants
                .iter()
                .position(|t: &TenantSpec| t.name == n)
                .ok_or_else(|| err(key, format!("`{n}` is not a [[tenant]]")))
        };
        for (sv, spec) in f.server.iter().zip(servers.iter_mut()) {
            if let (Some(v), Some(t)) = (
                sv.hot_tier.as_ref().and_then(|h| h.volumes.as_ref()),
                spec.hot_tier.as_mut(),
            ) {
                let mut ix = Vec::new();
                for n in v {
                    ix.push(tenant_index(
                        n,
                        format!("server \"{}\".hot_tier.volumes", sv.name),
                    )?);
                }
                t.volumes = Some(ix);
            }
        }
        let mut variants = Vec::new();
        for v in &f.variant {
            let key = |k: &str| format!("variant \"{}\".{k}", v.name);
            if control::Scheme::named(&v.name).is_ok()
                || variants.iter().any(|x: &Variant| x.name == v.name)
            {
                return Err(err(
                    key("name"),
                    "is a scheme's name or appears twice".into(),
                ));
            }
            control::Scheme::named(&v.base).map_err(|e| err(key("base"), e.to_string()))?;
            if let Some(e) = &v.eviction {
                policy::build(e).map_err(|x| err(key("eviction"), x.to_string()))?;
            }
            if let Some(a) = &v.hot_admission {
                policy::admission::build_admission(a)
                    .map_err(|x| err(key("hot_admission"), x.to_string()))?;
            }
            if let Some(a) = &v.automata {
                if !matches!(
                    a.as_str(),
                    "coordinated" | "uncoordinated" | "server" | "off"
                ) {
                    return Err(err(
                        key("automata"),
                        format!("`{a}`: coordinated, uncoordinated, server or off"),
                    ));
                }
            }
            let shares = match &v.shares {
                None => None,
                Some(m) => {
                    let mut w = vec![1.0; tenants.len()];
                    for (n, &x) in m {
                        if !(x.is_finite() && x > 0.0) {
                            return Err(err(key("shares"), format!("`{n}`: {x} must be above 0")));
                        }
                        w[tenant_index(n, key("shares"))?] = x;
                    }
                    Some(w)
                }
            };
            variants.push(Variant {
                name: v.name.clone(),
                base: v.base.clone(),
                eviction: v.eviction.clone(),
                hot_admission: v.hot_admission.clone(),
                hot_tier: v.hot_tier,
                policy_choice: v.policy_choice,
                automata: v.automata.clone(),
                shares,
                boost: v.boost,
                inclusive: v.inclusive,
            });
        }
        for c in &f.claim {
            crate::claims::Rule::parse(&c.rule)
                .map_err(|e| err(format!("claim \"{}\".rule", c.name), e.to_string()))?;
        }
        let quick = s.quick.unwrap_or(0.25);
        if !(quick > 0.0 && quick <= 1.0) {
            return Err(err(
                "sim.quick".into(),
                format!("{quick} must be in (0, 1]"),
            ));
        }
        let sc = Scenario {
            name: path
                .file_stem()
                .map_or("scenario".into(), |s| s.to_string_lossy().into_owned()),
            block_size: bs,
            interval: s.interval.0,
            warmup: s.warmup,
            schemes,
            inclusive: s.inclusive,
            eviction: s.eviction.clone(),
            duration: s.duration.map(|d| d.0),
            seed: s.seed,
            reseeded: false,
            l1_write: s.l1_write,
            l2_write: s.l2_write,
            network,
            ram,
            candidates: s.candidates.clone(),
            quantum: s.quantum.map(|q| q.0),
            hosts,
            servers,
            tenants,
            variants,
            claims: f.claim.clone(),
            phases: s.phases.iter().map(|p| p.0).collect(),
            quick,
            shares: None,
            is_quick: false,
        };
        sc.topology(&sc.tenants.iter().map(|_| None).collect::<Vec<_>>())
            .validate()
            .map_err(|e| err("tenant".into(), e.to_string()))?;
        Ok(sc)
    }

    /// Seeds every random choice from `seed`, synthetic workloads included (tenant `i`'s
    /// with `seed + i`).
    pub fn reseed(&mut self, seed: u64) {
        self.seed = seed;
        self.reseeded = true;
    }

    /// The quick form: the duration, every tenant's start, idle window and request limit,
    /// and the phase boundaries scaled by `quick` (the same experiment, shorter).
    pub fn quick(&mut self) {
        let q = self.quick;
        self.is_quick = true;
        self.duration = self.duration.map(|d| d * q);
        for t in &mut self.tenants {
            t.start *= q;
            t.idle = t.idle.map(|(a, b)| (a * q, b * q));
            t.requests = t.requests.map(|r| ((r as f64 * q).ceil() as u64).max(1));
        }
        for p in &mut self.phases {
            *p *= q;
        }
    }

    /// The scenario and scheme a scheme or variant name runs: a variant changes a copy of
    /// the scenario (eviction, hot tiers, static shares) and of its base scheme.
    pub fn resolve(&self, name: &str) -> Result<(Scenario, control::Scheme), SimError> {
        let plan = |e: control::ControlError| SimError::Plan(e.to_string());
        let Some(v) = self.variants.iter().find(|v| v.name == name) else {
            return Ok((self.clone(), control::Scheme::named(name).map_err(plan)?));
        };
        let mut sc = self.clone();
        let mut scheme = control::Scheme::named(&v.base).map_err(plan)?;
        scheme.name = v.name.clone();
        if let Some(e) = &v.eviction {
            sc.eviction = e.clone();
            if let Some(pc) = scheme.policy_choice.as_mut() {
                if !pc.candidates.contains(e) {
                    pc.candidates.insert(0, e.clone());
                }
            }
        }
        for s in &mut sc.servers {
            if v.hot_tier == Some(false) {
                s.hot_tier = None;
            }
            if let (Some(a), Some(t)) = (&v.hot_admission, s.hot_tier.as_mut()) {
                t.admission = a.clone();
            }
        }
        match v.policy_choice {
            Some(true) if scheme.policy_choice.is_none() => {
                scheme.policy_choice = Some(control::PolicyChoice::default())
            }
            Some(false) => scheme.policy_choice = None,
            _ => {}
        }
        if let Some(a) = &v.automata {
            scheme.automata = match a.as_str() {
                "off" => None,
                mode => Some(control::Automata {
                    coordinated: mode != "uncoordinated",
                    servers_only: mode == "server",
                    ..control::Automata::default()
                }),
            };
        }
        if let Some(b) = v.boost {
            scheme.boost = b;
        }
        sc.shares = v.shares.clone();
        if let Some(i) = v.inclusive {
            sc.inclusive = i;
        }
        Ok((sc, scheme))
    }

    /// The controller's view of this scenario; `depth` per tenant for closed loops.
    pub fn topology(&self, _depth: &[Option<f64>]) -> control::Topology {
        let bs = self.block_size;
        let net = self.network.expected(bs) * 2.0;
        let ram = self.ram.expected(bs);
        let disk = self
            .servers
            .iter()
            .map(|s| s.disk.expected(bs))
            .sum::<f64>()
            / self.servers.len() as f64;
        control::Topology {
            block_size: bs,
            hosts: self
                .hosts
                .iter()
                .map(|h| control::Node {
                    name: h.name.clone(),
                    capacity: h.blocks,
                    hot_tier: false,
                })
                .collect(),
            servers: self
                .servers
                .iter()
                .map(|s| control::Node {
                    name: s.name.clone(),
                    capacity: s.blocks,
                    hot_tier: s.hot_tier.is_some(),
                })
                .collect(),
            levels: if self.inclusive {
                control::Levels::Inclusive
            } else {
                control::Levels::Exclusive
            },
            service: control::ServiceTimes {
                l1_hit_ms: ram * 1e3,
                l2_hit_ms: (ram * 2.0 + net) * 1e3,
                miss_ms: (ram * 2.0 + net + disk) * 1e3,
            },
            tenants: self
                .tenants
                .iter()
                .map(|t| control::Tenant {
                    name: t.name.clone(),
                    host: t.host,
                    servers: t.servers.clone(),
                    stripe_unit: t.stripe_blocks,
                    slo: t.slo,
                    class: t.class,
                    depth: match t.pacing {
                        Pacing::Depth(d) => Some(d as f64),
                        _ => None,
                    },
                    ..Default::default()
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
[sim]
block_size = "4KiB"
interval = "30s"
schemes = ["fair", "mlms"]
[[host]]
name = "h1"
cache = "512MiB"
[[server]]
name = "s1"
cache = "1GiB"
disk = { kind = "hdd", rpm = 7200, seek_ms = 8.0 }
[[tenant]]
name = "db"
synthetic = "zipf:objects=1000,requests=100"
host = "h1"
servers = ["s1"]
slo = { degradation = 0.05 }
"#;

    fn parse(text: &str) -> Result<Scenario, SimError> {
        Scenario::parse(text, Path::new("/tmp/x.toml"))
    }

    #[test]
    fn a_good_file_resolves_names_and_units() {
        let s = parse(OK).unwrap();
        assert_eq!(s.hosts[0].blocks, 131072);
        assert_eq!(s.servers[0].blocks, 262144);
        assert_eq!(s.tenants[0].stripe_blocks, 16);
        assert_eq!(s.tenants[0].slo, Some(Slo::Degradation(0.05)));
        for (text, slo) in [
            ("{ p95_ms = 4 }", Slo::P95Ms(4.0)),
            ("{ p99_ms = 5 }", Slo::P99Ms(5.0)),
            ("{ p999_ms = 20.5 }", Slo::P999Ms(20.5)),
        ] {
            let t = parse(&OK.replace("{ degradation = 0.05 }", text)).unwrap();
            assert_eq!(t.tenants[0].slo, Some(slo), "{text}");
        }
        let bad = parse(&OK.replace("{ degradation = 0.05 }", "{ p99_ms = -1 }"));
        assert!(bad.unwrap_err().to_string().contains("p99_ms"));
        assert_eq!(s.interval, 30.0);
        assert!(matches!(s.servers[0].disk, DeviceSpec::Hdd { rpm, .. } if rpm == 7200.0));
        // An open loop (at the trace's timestamps here) gets the default queue depth.
        assert_eq!(s.tenants[0].max_in_flight, DEFAULT_MAX_IN_FLIGHT);
        let capped = OK.replace(
            "host = \"h1\"\nservers",
            "rate = 50\nmax_in_flight = 8\nhost = \"h1\"\nservers",
        );
        let s = parse(&capped).unwrap();
        assert_eq!(
            (s.tenants[0].pacing, s.tenants[0].max_in_flight),
            (Pacing::Rate(50.0), 8)
        );
    }

    #[test]
    fn errors_name_the_file_the_key_and_the_reason() {
        let cases = [
            (
                OK.replace("host = \"h1\"\nservers", "host = \"h9\"\nservers"),
                "tenant \"db\".host",
                "h9",
            ),
            (
                OK.replace("servers = [\"s1\"]", "servers = []"),
                "tenant \"db\".servers",
                "no storage server",
            ),
            (
                OK.replace("cache = \"512MiB\"", "cache = \"1000\""),
                "host \"h1\".cache",
                "whole number",
            ),
            (
                OK.replace("schemes = [\"fair\", \"mlms\"]", "schemes = [\"fast\"]"),
                "sim.schemes",
                "fast",
            ),
            (
                OK.replace("degradation = 0.05", "latency_ms = -1"),
                "tenant \"db\".slo",
                "latency_ms",
            ),
            (
                OK.replace("interval = \"30s\"", "interval = \"30s\"\nbogus = 1"),
                "line",
                "bogus",
            ),
            (
                OK.replace("rpm = 7200", "rpm = 0"),
                "server \"s1\".disk",
                "rpm",
            ),
            (
                OK.replace(
                    "host = \"h1\"\nservers",
                    "depth = 4\nmax_in_flight = 8\nhost = \"h1\"\nservers",
                ),
                "tenant \"db\".max_in_flight",
                "depth",
            ),
            (
                OK.replace(
                    "host = \"h1\"\nservers",
                    "rate = 100\nmax_in_flight = 0\nhost = \"h1\"\nservers",
                ),
                "tenant \"db\".max_in_flight",
                "at least 1",
            ),
        ];
        for (text, key, reason) in cases {
            let e = parse(&text).unwrap_err().to_string();
            assert!(
                e.contains("/tmp/x.toml") && e.contains(key) && e.contains(reason),
                "{e}"
            );
        }
    }

    #[test]
    fn dedicated_partitions_that_do_not_fit_are_refused() {
        let text = OK.replace(
            "slo = { degradation = 0.05 }",
            "dedicated = [\"1GiB\", \"4KiB\"]",
        );
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("dedicated") && e.contains("h1"), "{e}");
    }

    #[test]
    fn the_builtin_scenario_loads() {
        let s = Scenario::builtin();
        assert_eq!((s.hosts.len(), s.servers.len(), s.tenants.len()), (2, 2, 4));
    }

    #[test]
    fn units_parse() {
        assert_eq!(parse_seconds("500ms").unwrap(), 0.5);
        assert_eq!(parse_seconds("2m").unwrap(), 120.0);
    }
}
