//! What one demo arm is run with ([`DemoOptions`]): its length and interval, the trace,
//! the modelled disks' seek, the caches per level, the db tenant's SLO, exclusive levels,
//! and how long a reference arm keeps running past its end.

use std::path::PathBuf;
use std::time::Duration;

/// Options of one demo arm.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Length of the run.
    pub duration: Duration,
    /// Enforcement interval.
    pub interval: Duration,
    /// The shared CloudPhysics trace (the `cloud` tenant replays it; without it `cloud`
    /// reads a synthetic mixed set).
    pub trace: Option<PathBuf>,
    /// The controller's listen address (`127.0.0.1:0`: any port).
    pub listen: String,
    /// Mean seek of the modelled disks (ms).
    pub seek_ms: f64,
    /// Level-1 cache per node.
    pub l1_cache: u64,
    /// Level-2 cache per node.
    pub l2_cache: u64,
    /// The db tenant's p99 latency SLO (ms).
    pub db_slo_ms: f64,
    /// Exclusive levels: the controller plans both levels as one LRU stack and creates
    /// the caches exclusive; each level-1 export names its level-2 nodes' APIs
    /// (`upstream_api`), where its cache demotes the clean blocks it evicts.
    pub exclusive: bool,
    /// Keep the workload running this much longer after `duration`, logging each
    /// request's latency but reporting nothing: a reference (fair) arm is extended so that
    /// a scheme that gets further through the same requests still finds them there.
    pub extend: Duration,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            duration: Duration::from_secs(30),
            interval: Duration::from_secs(2),
            trace: None,
            listen: "127.0.0.1:0".into(),
            seek_ms: 2.0,
            l1_cache: 24 << 20,
            l2_cache: 32 << 20,
            db_slo_ms: 0.5,
            exclusive: false,
            extend: Duration::ZERO,
        }
    }
}
