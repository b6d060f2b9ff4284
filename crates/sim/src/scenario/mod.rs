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
//! l2_eviction = "lrfu"        # optional: level 2's policy where it differs (MLMS's DEMOTE)
//! duration = "1h"             # optional: stop at this simulated time
//! l1_write = "write-back"     # write-back | write-through | write-around
//! l2_write = "write-back"
//! quantum = "10ms"            # optional: enforce proportions by time quanta of this round
//!                             # (default: weighted fair sharing, see `queue`)
//! [[host]]
//! name = "h1"
//! cache = "512MiB"
//! link = { kind = "net", mbps = 25 }   # optional: its link, where not `sim.network`
//! [[server]]
//! name = "s1"
//! cache = "1GiB"
//! disk = "hdd"                # hdd | ssd | { kind = "hdd", rpm = 10045, seek_ms = 5.0 }
//! hot_tier = { size = "4GiB", chunk = "1MiB", admission = "adaptive" }   # optional;
//!                             # also volumes = ["db"], migration_threads = 1
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
//!
//! This module owns the resolved, checked types the simulator runs ([`Scenario`] and its
//! parts) and the built-in scenario. The TOML schema is in `file`, its checking and name
//! resolution in `check`, what a scheme or variant runs and the controller's topology in
//! `schemes`.

mod check;
mod file;
mod schemes;
#[cfg(test)]
mod tests;

use crate::device::DeviceSpec;
use crate::SimError;
use control::{Class, Slo};
use std::path::{Path, PathBuf};

pub use file::{parse_seconds, DurationError, Seconds, WritePolicy};

/// The JSON schema of a scenario file as written (every table and key with its type,
/// default and doc comment), from which `lachesis docs config` prints the scenario
/// files' reference.
pub fn file_schema() -> schemars::Schema {
    schemars::schema_for!(file::File)
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
    /// Copies to the tier that may run at once (the migration rate limit: an admitted
    /// miss that finds every copy busy is deferred).
    pub migration_threads: u32,
}

/// A level-1 host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSpec {
    /// Name.
    pub name: String,
    /// Cache capacity in blocks.
    pub blocks: u64,
    /// Its link to the storage servers, where it differs from `sim.network`.
    pub link: Option<DeviceSpec>,
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
    /// Eviction policy at both levels (the scenario's `eviction`; it also clears the
    /// scenario's `l2_eviction` unless the variant sets its own).
    pub eviction: Option<String>,
    /// Eviction policy at level 2 (the scenario's `l2_eviction`).
    pub l2_eviction: Option<String>,
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
    /// The share of each interval's disk time that paced shrinks' write-backs may take
    /// (`control::Hysteresis::write_back_share`; `0`: no pacing); only for a base scheme
    /// with hysteresis.
    pub write_back_share: Option<f64>,
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
    /// Default eviction policy (level 1, and level 2 unless `l2_eviction` is set).
    pub eviction: String,
    /// Level 2's policy where it differs from `eviction` (MLMS runs DEMOTE: LRU at
    /// level 1 over LRFU at level 2). Schemes that choose policies (SOPA) override both.
    pub l2_eviction: Option<String>,
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
pub const BUILTIN: &str = include_str!("../../../../examples/hierarchy.toml");

impl Scenario {
    /// The built-in scenario, [`BUILTIN`].
    pub fn builtin() -> Scenario {
        Scenario::parse(BUILTIN, Path::new("hierarchy.toml"))
            .expect("the built-in scenario is valid")
    }

    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, SimError> {
        let text = std::fs::read_to_string(path).map_err(|error| SimError::Read {
            file: path.display().to_string(),
            error,
        })?;
        Scenario::parse(&text, path)
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
}
