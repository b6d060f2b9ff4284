//! What one demo arm measured ([`ArmResult`]): every interval's report, the requests
//! each tenant completed, each client connection's latency log ([`DriverLog`]) and how
//! far each had got at the end of every interval.

use controller::views::IntervalReport;
use std::collections::HashMap;

/// What one arm measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ArmResult {
    /// The scheme.
    pub scheme: String,
    /// Every interval's report.
    pub reports: Vec<IntervalReport>,
    /// Requests completed per tenant, counted by the clients.
    pub completed: HashMap<String, u64>,
    /// Seconds the workload ran.
    pub seconds: f64,
    /// What each client connection saw: the latency of every request, in order.
    #[serde(skip)]
    pub drivers: Vec<DriverLog>,
    /// How many requests each client connection had logged when the warm-up
    /// ([`WARMUP_INTERVALS`](crate::demo::WARMUP_INTERVALS)) ended (empty if the arm ended before).
    #[serde(skip)]
    pub warm: Vec<usize>,
    /// After each interval (the counted ones, then those of the extension), how many
    /// requests each client connection had logged: `marks[i]` ends `reports[i]`.
    #[serde(skip)]
    pub marks: Vec<Vec<usize>>,
}

/// One client connection of a tenant: the latency (ms) of each request it completed, in
/// order. Its requests are the same sequence in every arm (deterministic generators), so
/// request `k` of one arm is request `k` of another.
#[derive(Clone, Debug, Default)]
pub struct DriverLog {
    /// The tenant.
    pub tenant: String,
    /// Latency of each completed request (ms).
    pub latencies_ms: Vec<f32>,
}

/// Sum of latencies and count of requests `from..to` (clamped to what was logged).
pub(crate) fn span(l: &[f32], from: usize, to: usize) -> (f64, usize) {
    let to = to.min(l.len());
    let from = from.min(to);
    (l[from..to].iter().map(|&x| f64::from(x)).sum(), to - from)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// One client's log (shared with `judge`'s and `summary`'s tests).
    pub(in crate::demo) fn log(tenant: &str, ms: &[f32]) -> DriverLog {
        DriverLog {
            tenant: tenant.into(),
            latencies_ms: ms.to_vec(),
        }
    }

    /// An arm of those logs and no reports (shared with `judge`'s and `summary`'s tests).
    pub(in crate::demo) fn arm(drivers: Vec<DriverLog>) -> ArmResult {
        ArmResult {
            scheme: "fair".into(),
            reports: Vec::new(),
            completed: HashMap::new(),
            seconds: 1.0,
            drivers,
            warm: Vec::new(),
            marks: Vec::new(),
        }
    }
}
