//! What the guard remembers of a tenant between intervals: the sizes it speaks in
//! ([`GuardSizes`]) and the evidence it has gathered ([`GuardState`]): the reference and
//! its samples, proven sizes, the probe under way and the penalties.

use super::FIRST_STEP;
use serde::{Deserialize, Serialize};

/// Sizes as `(level 1, level 2 per server)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardSizes {
    /// Level-1 blocks.
    pub l1: u64,
    /// Level-2 blocks per server (aligned with the tenant's servers).
    pub l2: Vec<u64>,
}

/// What the guard remembers of one tenant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GuardState {
    /// Its latency at its fair share, as measured (ms): the mean of `samples`; `None`
    /// before any interval at fair share or above with requests.
    pub reference_ms: Option<f64>,
    /// The last [`REFERENCE_SAMPLES`] samples of its latency at fair share (ms).
    ///
    /// [`REFERENCE_SAMPLES`]: super::REFERENCE_SAMPLES
    #[serde(default)]
    pub samples: Vec<f64>,
    /// Intervals in a row its curve predicted its hit ratio within the tolerance.
    pub trusted: u32,
    /// Intervals it is still held at its fair share for a harm from outside its probes.
    pub penalty: u32,
    /// Harms measured so far (each doubles the next penalty).
    pub harms: u32,
    /// Its latency in the intervals since it was last at its fair share beside neighbours
    /// at theirs (ms; the last [`MOVED_SAMPLES`]): the evidence one interval alone is too
    /// noisy to give.
    ///
    /// [`MOVED_SAMPLES`]: super::MOVED_SAMPLES
    #[serde(default)]
    pub moved: Vec<f64>,
    /// The least sizes measured to meet its SLO, and the fair share they were measured
    /// against (`None`: its fair share, which meets it by definition).
    #[serde(default)]
    pub proven: Option<(GuardSizes, GuardSizes)>,
    /// The next probe step as a share of its fair share (0 before the first: [`FIRST_STEP`]).
    #[serde(default)]
    pub step: f64,
    /// The sizes of the probe under way and its measurements there (ms).
    #[serde(default)]
    pub probe: Option<(GuardSizes, Vec<f64>)>,
    /// Intervals before it may probe again after a failed probe.
    #[serde(default)]
    pub probe_penalty: u32,
    /// Failed probes in a row (each doubles the next probe penalty).
    #[serde(default)]
    pub probe_failures: u32,
    /// The hit ratios its curve (of the fair scheme's policy) predicted at its fair share
    /// when its reference samples were taken (one per sample): a workload that has moved
    /// away from them since makes the reference stale.
    #[serde(default)]
    pub reference_hits: Vec<f64>,
    /// Intervals in a row its curve has been away from `reference_hits`, or its disk
    /// service time away from `reference_miss`.
    #[serde(default)]
    pub changed: u32,
    /// Its observed service time of a miss (ms) in the intervals its reference samples
    /// were taken in (one per sample that observed one): the load on its disks then. A
    /// reference holds for the environment it was measured in.
    #[serde(default)]
    pub reference_miss: Vec<f64>,
    /// The widest spread of its reference samples seen since the reference was first
    /// measured: the noise of one measurement as far as the guard has seen it.
    #[serde(default)]
    pub noise: f64,
}

impl GuardState {
    /// Its proven sizes against fair share `fair`: the fair share itself when none were
    /// proven, or when they were proven against another fair share (the topology changed).
    pub fn proven(&self, fair: &GuardSizes) -> GuardSizes {
        match &self.proven {
            Some((p, f)) if f == fair => p.clone(),
            _ => fair.clone(),
        }
    }

    pub(super) fn step_share(&self) -> f64 {
        if self.step > 0.0 {
            self.step
        } else {
            FIRST_STEP
        }
    }
}
