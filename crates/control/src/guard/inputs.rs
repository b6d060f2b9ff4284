//! What one interval of the guard is given: the SLO as the guard keeps it ([`Limit`], with
//! the bounds it allows against a reference), the sizes a tenant held beside its fair point
//! ([`Held`]), and the latency the guard judges from an observation ([`measured_ms`]).

use super::state::GuardSizes;
use crate::observe::TenantObservation;

/// The sizes a tenant held and its fair point, both as `(level 1, level 2 per server)`.
pub struct Held<'a> {
    /// Held last interval.
    pub held: (u64, &'a [u64]),
    /// Its fair share.
    pub fair: (u64, &'a [u64]),
    /// It ran the fair scheme's eviction policy.
    pub fair_policy: bool,
    /// Every other tenant on its nodes held its fair share there too: a measurement then
    /// is one of what the fair scheme gives it.
    pub neighbours_at_fair: bool,
    /// The hit ratio its curve of the fair scheme's policy, as observed this interval,
    /// gives at its fair share (both levels), if observed.
    pub fair_hit: Option<f64>,
    /// The interval's length (s), for IOPS and bandwidth SLOs.
    pub seconds: f64,
}

impl Held<'_> {
    /// At least the fair share at both levels, on the fair scheme's policy.
    pub(super) fn at_or_above_fair(&self) -> bool {
        self.fair_policy && self.at_or_above(self.fair.0, self.fair.1)
    }

    /// At least `(l1, l2)` at every level and server.
    pub(super) fn at_or_above(&self, l1: u64, l2: &[u64]) -> bool {
        self.held.0 >= l1
            && self.held.1.len() == l2.len()
            && self.held.1.iter().zip(l2).all(|(h, f)| h >= f)
    }

    pub(super) fn sizes(&self) -> GuardSizes {
        GuardSizes {
            l1: self.held.0,
            l2: self.held.1.to_vec(),
        }
    }

    pub(super) fn fair_sizes(&self) -> GuardSizes {
        GuardSizes {
            l1: self.fair.0,
            l2: self.fair.1.to_vec(),
        }
    }
}

/// The SLOs the guard keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// Mean latency within `1 +` this of the measured fair-share reference.
    Degradation(f64),
    /// Mean latency within this many milliseconds.
    LatencyMs(f64),
    /// The `quantile` of an interval's latencies within `ms` milliseconds: the guard's
    /// samples and measurements are that quantile, not the mean.
    Tail {
        /// 0.95, 0.99 or 0.999.
        quantile: f64,
        /// The bound.
        ms: f64,
    },
    /// An IOPS or bandwidth SLO, judged as its inverse: the interval's milliseconds per
    /// request (or per megabyte) within `ms`, so that, like a latency, less is better and
    /// fair share's figure is a reference not to be made worse.
    PerUnit {
        /// The bound: 1000 / IOPS, or 1000 / MB/s.
        ms: f64,
        /// Per megabyte (a bandwidth SLO) rather than per request.
        bytes: bool,
    },
}

impl Limit {
    /// The limit of an SLO the guard keeps (every kind; `None` for a target that is not
    /// positive).
    pub fn of(slo: &crate::topology::Slo) -> Option<Limit> {
        use crate::topology::Slo;
        match *slo {
            Slo::Degradation(x) => Some(Limit::Degradation(x)),
            Slo::LatencyMs(ms) => Some(Limit::LatencyMs(ms)),
            Slo::Iops(v) => (v > 0.0).then(|| Limit::PerUnit {
                ms: 1000.0 / v,
                bytes: false,
            }),
            Slo::Mbps(m) => (m > 0.0).then(|| Limit::PerUnit {
                ms: 1000.0 / m,
                bytes: true,
            }),
            Slo::P95Ms(_) | Slo::P99Ms(_) | Slo::P999Ms(_) => {
                let (quantile, ms) = slo.tail()?;
                Some(Limit::Tail { quantile, ms })
            }
        }
    }

    /// How much slower, relative to `measured` (its latency as the guard judges it, see
    /// [`measured_ms`]), the tenant may get before it passes what its SLO allows against
    /// its reference (the accept bound); the SLO's own tolerance while there is no
    /// reference (none for a latency or tail SLO already missed). Never negative.
    pub fn headroom(self, measured: Option<f64>, reference: Option<f64>) -> f64 {
        let bound = match (self, reference) {
            (_, Some(r)) => self.allows(r, 0.0),
            (Limit::Degradation(x), None) => return x,
            (
                Limit::LatencyMs(t) | Limit::Tail { ms: t, .. } | Limit::PerUnit { ms: t, .. },
                None,
            ) => t,
        };
        match measured {
            Some(m) if m > 0.0 => ((bound - m) / m).max(0.0),
            _ => match self {
                Limit::Degradation(x) => x,
                _ => 0.0,
            },
        }
    }

    /// The slowdown the SLO tolerates against fair share: `x` for a degradation SLO, none
    /// for a latency, tail, IOPS or bandwidth bound.
    pub(super) fn tolerance(self) -> f64 {
        match self {
            Limit::Degradation(x) => x,
            Limit::LatencyMs(_) | Limit::Tail { .. } | Limit::PerUnit { .. } => 0.0,
        }
    }

    /// What the SLO allows against reference `r` when a measurement's noise is `noise`
    /// (relative): `(1 + x) · r · (1 + noise)`, or the larger of the SLO's number and
    /// `r · (1 + noise)`.
    pub(super) fn allows(self, r: f64, noise: f64) -> f64 {
        let beyond_noise = r * (1.0 + noise);
        match self {
            Limit::Degradation(x) => (1.0 + x) * beyond_noise,
            Limit::LatencyMs(t) | Limit::Tail { ms: t, .. } | Limit::PerUnit { ms: t, .. } => {
                t.max(beyond_noise)
            }
        }
    }
}

/// The latency the guard judges: of the tenant's reads where writes are observed apart
/// (what its sizes change), else of all its requests; the interval's quantile for a tail
/// SLO; milliseconds per request or per megabyte over the interval of `seconds` for an
/// IOPS or bandwidth SLO; `None` without requests.
pub fn measured_ms(o: &TenantObservation, limit: Limit, seconds: f64) -> Option<f64> {
    if o.requests == 0 {
        return None;
    }
    if let Limit::PerUnit { bytes, .. } = limit {
        let units = if bytes {
            o.bytes as f64 / 1e6
        } else {
            o.requests as f64
        };
        return (units > 0.0 && seconds > 0.0).then(|| 1000.0 * seconds / units);
    }
    if let Limit::Tail { quantile, .. } = limit {
        let m = o.latency_quantiles.and_then(|q| q.at(quantile));
        let m = m.or_else(|| ((quantile - 0.99).abs() < 1e-9).then_some(o.p99_latency_ms))?;
        return (m.is_finite() && m > 0.0).then_some(m);
    }
    let m = match o.read_latency_ms {
        Some(r) if o.requests > o.writes => r,
        _ => o.mean_latency_ms,
    };
    (m.is_finite() && m > 0.0).then_some(m)
}
