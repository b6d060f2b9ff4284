//! Do no harm: the guarantee the `lachesis` scheme keeps for every tenant with a
//! degradation, mean-latency or tail-latency SLO, on evidence rather than on its model.
//!
//! A degradation SLO is defined against the tenant's latency at a fair share, so the fair
//! point meets it by definition and is always a safe place to fall back to; and a latency
//! SLO is not made worse by a plan that gives the tenant what the fair scheme would. The
//! guard therefore never lets the model take a tenant below sizes that were *measured* to
//! meet its SLO, and explores below them only a step at a time:
//!
//! 1. **A reference, measured.** While the tenant and every other tenant on its nodes hold
//!    their fair shares there, and the tenant runs the fair scheme's policy, its measured
//!    latency (of its reads, where writes are observed apart) is a sample of what the fair
//!    scheme gives it now. Holding more than fair (its neighbours at fair), the sample is
//!    carried to the fair point by the model's ratio `latency(fair) / latency(held)`,
//!    which can only make it laxer. The reference is the mean of the last
//!    [`REFERENCE_SAMPLES`] samples, and the samples' spread `(max − min) / mean` is the
//!    noise of a measurement in the harm and accept bounds. The noise that decides
//!    whether the tenant can be judged at all ([`GuardState::noise`]) is the widest
//!    scatter of settled samples about their trend (the spread of their residuals from a
//!    least-squares line, so that caches still warming do not count) seen since the
//!    reference was first measured. Until there are that many samples, and while the
//!    newest still falls below the others by more than the SLO's tolerance (as it does
//!    while caches warm), the tenant is *unreferenced*: every tenant on its nodes is held at its
//!    fair share, so that the samples are taken.
//! 2. **Too noisy to judge.** The guard weighs at most [`MOVED_SAMPLES`] intervals
//!    together, and the mean of `k` intervals is as noisy as one over `√k`. A tenant with
//!    a degradation SLO `x` whose noise exceeds `x · √MOVED_SAMPLES` (0.2 for a 5 % SLO)
//!    cannot be shown by any measurement the guard takes to be within its SLO away from
//!    fair share, nor to be harmed by a move until long after: no probe is allowed, and
//!    its SLO is held by not moving what serves it ([`Verdict::TooNoisy`]). Its nodes fall
//!    back to fair share, and so does every node of every tenant striped over one of its
//!    servers, on the fair scheme's policy: what its disks serve it in an interval
//!    depends on every request queued there (an open-loop tenant on a saturated disk is
//!    the case: its latency moves by multiples from one interval to the next, and a
//!    perturbation anywhere on its disks shifts its backlog), and the SLO is judged
//!    against the fair scheme interval by interval. The threshold is the SLO's own
//!    tolerance scaled by the guard's evidence horizon, not a number fitted to a run.
//! 3. **Proven floors, explored a step at a time.** The tenant's *proven* sizes (fair
//!    share at first) are the least, per level and server, at which its latency was
//!    measured to meet its SLO. The plan may give it anything at or above its proven sizes
//!    less one *probe step* (a share of its fair share at each level: [`FIRST_STEP`] at
//!    first). Held below its proven sizes, it is on probation, judged each interval:
//!    * an interval beyond the *harm bound* — `(1 + degradation) · reference ·
//!      (1 + spread)`, or for a latency or tail SLO the larger of its number and
//!      `reference · (1 + spread)` — fails the probe at once;
//!    * the mean of its intervals at the probe's sizes within the *accept bound* proves
//!      those sizes, and the next step is twice as large (at most its whole fair share).
//!      The accept bound leaves room for the noise on the other side: `(1 + degradation) ·
//!      reference / (1 + spread)`, or the larger of the SLO's number and the reference
//!      over `1 + spread`. An SLO is judged interval by interval, and a tenant held at a
//!      size whose mean sits at its bound would miss it in about half of them; held at
//!      the accept bound, an interval as noisy as the reference's samples stays within it;
//!    * [`PROBE_INTERVALS`] intervals neither failing nor proving end the probe
//!      undecided.
//!
//!    A failed or undecided probe puts the floor back at the proven sizes from the next
//!    plan on (the move is reverted, measured, whatever the model said), halves the step
//!    (at least [`LEAST_STEP`]) and, after a failure, forbids probing for a penalty that
//!    doubles with each failure ([`BASE_PENALTY`] intervals, at most [`MAX_PENALTY`]).
//!    So model error can cost a tenant at most one probe step for one interval, never its
//!    SLO for long: the guard, not the model, decides how far below fair it may go.
//! 4. **A workload, or an environment, that changed.** The reference is what fair share
//!    gave the workload as it was, on disks as loaded as they were. Each interval the
//!    tenant's curve of the fair scheme's policy says what hit ratio its fair share would
//!    give now, and its observed service time of a miss says how loaded its disks are
//!    now. When, [`CHANGED_INTERVALS`] intervals in a row, the hit ratio lies further
//!    from the mean of what the curve said at the reference's samples than
//!    [`HIT_RATIO_TOLERANCE`] plus those values' own spread (a curve as noisy as the
//!    workload is no evidence of change), or (for a degradation SLO `x`) the miss time
//!    lies further, relatively, from its mean at the reference's samples than `x` plus
//!    those times' spread (a neighbour finished or started: fair share's latency moved
//!    with the disks, and a reference measured before would judge the tenant against a
//!    fair share that no longer exists — a lax one when the disks got faster), the
//!    reference and every size proven against it are forgotten, and the tenant is
//!    unreferenced again (its nodes at fair share until it is measured anew).
//! 5. **Harm it did not choose.** A tenant at or above its proven sizes can still be hurt:
//!    by a neighbour's move (the disk and links are shared), by another eviction policy,
//!    or by its workload changing. If one interval passes its harm bound, or the intervals
//!    since it last stood at fair share beside neighbours at theirs (the last
//!    [`MOVED_SAMPLES`], from [`REFERENCE_SAMPLES`] on) pass it together — their mean
//!    against the harm bound with the noise of a mean of `k` intervals, `spread / √k`, in
//!    place of the spread — every tenant on its nodes heads back to its fair share, on the
//!    fair scheme's policy, for a penalty that doubles with each harm; its proven sizes
//!    are forgotten (fair share again). The way back keeps the per-interval move limit and
//!    the write-back budget for the other tenants' shrinks (shrinking a tenant that holds
//!    much dirty data at once floods the disk with its write-backs, which hurts whoever
//!    shares it far more than the move being undone), but not for the guarded tenant's
//!    own floor: the controller gives every guarded tenant its floor in the next plan
//!    whatever hysteresis and pacing would do, taking the room first from what others
//!    grow by, then from what their paced shrinks still hold (the controller's
//!    `damping::honour_guard_floors`). A move measured to hurt is undone at the next
//!    interval, not over the dozen a damped return took.
//!
//! What the guard does not promise: it acts on what was measured, so the interval in
//! which a move first hurts is a miss before the guard sees it (a probe step bounds how
//! large that miss can be), and a workload that changes between two intervals can look
//! like harm (the tenant then spends a penalty at fair share, which costs efficiency, not
//! its SLO). Tenants with IOPS or bandwidth SLOs, and tenants without an SLO, are not
//! guarded.
//!
//! Plain data ([`GuardState`], in each tenant's controller state); the decision is
//! [`step`], a pure function of the state, what was held, the fair point and what was
//! measured, and the floor it allows is [`floor`]. The controller turns verdicts into
//! floors and node fallbacks.

use crate::model::LatencyModel;
use crate::observe::TenantObservation;
use serde::{Deserialize, Serialize};

/// Intervals in a row the curve must predict the measured hit ratio to count as trusted
/// (shown in the state; the guard's floors rest on measurements, not on this).
pub const TRUSTED_INTERVALS: u32 = 3;

/// Absolute difference between the predicted and the measured hit ratio (both levels)
/// within which an interval counts towards trust.
pub const HIT_RATIO_TOLERANCE: f64 = 0.05;

/// Intervals at fair share after the first measured harm (of a probe, or from outside).
pub const BASE_PENALTY: u32 = 4;

/// The longest penalty (intervals).
pub const MAX_PENALTY: u32 = 64;

/// Samples of the latency at fair share the reference is the mean of.
pub const REFERENCE_SAMPLES: usize = 4;

/// Intervals of latency measured away from the fair point that the guard weighs together.
pub const MOVED_SAMPLES: usize = 16;

/// The first probe step, as a share of the tenant's fair share at each level.
pub const FIRST_STEP: f64 = 0.125;

/// The least probe step (a share of the fair share).
pub const LEAST_STEP: f64 = 1.0 / 64.0;

/// Intervals a probe may stay undecided (neither failed nor proven) before it ends.
pub const PROBE_INTERVALS: usize = 3;

/// Intervals in a row a tenant's curve must be away from what it was when its reference
/// was measured before the workload counts as changed.
pub const CHANGED_INTERVALS: u32 = 2;

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

    fn step_share(&self) -> f64 {
        if self.step > 0.0 {
            self.step
        } else {
            FIRST_STEP
        }
    }
}

/// What the guard decided for one tenant this interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// At or above its proven sizes; the plan may take it one probe step below them.
    Proven,
    /// Mid-probe: the plan keeps it at least at the probe's sizes until they are decided.
    Probing,
    /// A probe failed or ended undecided: the floor is its proven sizes again, and (after
    /// a failure) no probe for `intervals` more.
    ProbeEnded {
        /// Intervals before it may probe again.
        intervals: u32,
    },
    /// Its nodes at fair share for every tenant on them: its latency at fair share has
    /// not been measured (or is still falling as caches warm).
    Unreferenced,
    /// Its nodes at fair share for a measured harm (`intervals` left).
    Penalised {
        /// Intervals of the penalty left after this one.
        intervals: u32,
    },
    /// Harmed last interval at or above its proven sizes: its nodes head back to fair
    /// share from the next plan.
    Reverted,
    /// Its nodes at fair share for every tenant on them: its latency at fair share is so
    /// noisy (`noise`, the relative spread of its reference samples) that no mean of the
    /// intervals the guard weighs could tell a harm as large as its SLO allows from
    /// chance, so no move that touches it can be shown safe.
    TooNoisy {
        /// The spread that rules moves out.
        noise: f64,
    },
}

impl Verdict {
    /// Why the tenant's floor is what it is, in words.
    pub fn why(self) -> String {
        match self {
            Verdict::Proven => "measured to meet its SLO at this size or one probe step above \
                it"
            .into(),
            Verdict::Probing => "on probation: a probe below its proven size is being \
                measured"
                .into(),
            Verdict::ProbeEnded { intervals: 0 } => "a probe below its proven size did not \
                prove itself; back at the proven size"
                .into(),
            Verdict::ProbeEnded { intervals } => format!(
                "a probe below its proven size was measured to miss its SLO; back at the \
                 proven size, no probe for {intervals} more intervals"
            ),
            Verdict::Unreferenced => "its latency at fair share is not yet measured \
                (or still falling as caches warm)"
                .into(),
            Verdict::Penalised { intervals } => {
                format!("a move was measured to miss its SLO ({intervals} more intervals)")
            }
            Verdict::Reverted => "the last move was measured to miss its SLO".into(),
            Verdict::TooNoisy { noise } => format!(
                "its latency at fair share spreads {:.0} % between intervals, too noisy for \
                 a measurement to show a move safe",
                100.0 * noise
            ),
        }
    }

    /// Whether the tenant's nodes fall back to fair share for every tenant on them (and
    /// the tenant to the fair scheme's policy).
    pub fn falls_back(self) -> bool {
        matches!(
            self,
            Verdict::Unreferenced
                | Verdict::Penalised { .. }
                | Verdict::Reverted
                | Verdict::TooNoisy { .. }
        )
    }
}

/// The least sizes the plan may give a tenant after `verdict`: its fair share while its
/// nodes fall back, its probe's sizes mid-probe (its proven sizes where the probe lies
/// above them), its proven sizes after a probe ended, and its proven sizes less one probe
/// step otherwise. Never above its fair share, so the floors of a node's tenants fit it
/// together.
pub fn floor(st: &GuardState, verdict: Verdict, fair: &GuardSizes) -> GuardSizes {
    let proven = st.proven(fair);
    match verdict {
        v if v.falls_back() => fair.clone(),
        // Where the probe's sizes lie above the proven ones (it grew there), the proven
        // size is the floor: a floor is never above the fair share.
        Verdict::Probing => match &st.probe {
            Some((p, _)) => GuardSizes {
                l1: p.l1.min(proven.l1),
                l2: p
                    .l2
                    .iter()
                    .zip(&proven.l2)
                    .map(|(&a, &b)| a.min(b))
                    .collect(),
            },
            None => proven,
        },
        Verdict::ProbeEnded { .. } => proven,
        _ => {
            let s = st.step_share();
            let down = |p: u64, f: u64| p.saturating_sub((s * f as f64).ceil() as u64);
            GuardSizes {
                l1: down(proven.l1, fair.l1),
                l2: proven
                    .l2
                    .iter()
                    .zip(fair.l2.iter().chain(std::iter::repeat(&0)))
                    .map(|(&p, &f)| down(p, f))
                    .collect(),
            }
        }
    }
}

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
    fn at_or_above_fair(&self) -> bool {
        self.fair_policy && self.at_or_above(self.fair.0, self.fair.1)
    }

    /// At least `(l1, l2)` at every level and server.
    fn at_or_above(&self, l1: u64, l2: &[u64]) -> bool {
        self.held.0 >= l1
            && self.held.1.len() == l2.len()
            && self.held.1.iter().zip(l2).all(|(h, f)| h >= f)
    }

    fn sizes(&self) -> GuardSizes {
        GuardSizes {
            l1: self.held.0,
            l2: self.held.1.to_vec(),
        }
    }

    fn fair_sizes(&self) -> GuardSizes {
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
    fn tolerance(self) -> f64 {
        match self {
            Limit::Degradation(x) => x,
            Limit::LatencyMs(_) | Limit::Tail { .. } | Limit::PerUnit { .. } => 0.0,
        }
    }

    /// What the SLO allows against reference `r` when a measurement's noise is `noise`
    /// (relative): `(1 + x) · r · (1 + noise)`, or the larger of the SLO's number and
    /// `r · (1 + noise)`.
    fn allows(self, r: f64, noise: f64) -> f64 {
        let beyond_noise = r * (1.0 + noise);
        match self {
            Limit::Degradation(x) => (1.0 + x) * beyond_noise,
            Limit::LatencyMs(t) | Limit::Tail { ms: t, .. } | Limit::PerUnit { ms: t, .. } => {
                t.max(beyond_noise)
            }
        }
    }
}

/// One interval of the guard for a tenant with the SLO `limit`: updates `st` from what
/// was measured at `sizes` (`None` for `sizes`: nothing held yet, as before the first
/// plan) and returns the verdict ([`floor`] turns it into the least sizes allowed).
pub fn step(
    st: &mut GuardState,
    limit: Limit,
    model: &LatencyModel,
    sizes: Option<Held<'_>>,
    o: &TenantObservation,
) -> Verdict {
    let measured = measured_ms(o, limit, sizes.as_ref().map_or(0.0, |h| h.seconds));
    let mut harmed = false;
    let mut probe_outcome: Option<bool> = None; // Some(true): proven; Some(false): failed
    let mut probe_undecided_end = false;
    if let (Some(h), Some(m)) = (&sizes, measured) {
        let n = h.held.1.len().max(1) as f64;
        let lat = |c1: u64, x: &[u64]| -> f64 {
            if x.is_empty() {
                return model.latency(c1 as f64, 0.0);
            }
            x.iter()
                .map(|&v| model.latency(c1 as f64, n * v as f64))
                .sum::<f64>()
                / n
        };
        let noise = spread(&st.samples);
        let harm_bound = st.reference_ms.map(|r| limit.allows(r, noise));
        let accept_bound = st
            .reference_ms
            .map(|r| limit.allows(r, 0.0) / (1.0 + noise));
        let fair = h.fair_sizes();
        // A workload that changed since the reference was measured: its curve no longer
        // predicts what it did at fair share. The reference, and every size proven
        // against it, are forgotten, and it is measured at fair share again.
        let curve_moved = match (st.reference_hits.is_empty(), h.fair_hit) {
            (false, Some(now)) => {
                let hits = &st.reference_hits;
                let mean = hits.iter().sum::<f64>() / hits.len() as f64;
                let (lo, hi) = hits
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                        (a.min(v), b.max(v))
                    });
                Some((now - mean).abs() > HIT_RATIO_TOLERANCE + (hi - lo))
            }
            _ => None,
        };
        // The environment that changed: the disks it misses to now serve a miss in a
        // time further (relatively) from what they took while the reference was measured
        // than the SLO's tolerance plus those times' own spread. Fair share's latency
        // moved with them (a neighbour finished, or started), and a reference measured
        // before would judge the tenant against a fair share that no longer exists: when
        // the disks got faster, a lax one.
        let env_moved = match (
            limit,
            st.reference_miss.is_empty(),
            o.service.miss_ms.filter(|v| v.is_finite() && *v > 0.0),
        ) {
            (Limit::Degradation(x), false, Some(now)) => {
                let v = &st.reference_miss;
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                Some(mean > 0.0 && (now - mean).abs() / mean > x + spread(v))
            }
            _ => None,
        };
        if curve_moved.is_some() || env_moved.is_some() {
            if curve_moved == Some(true) || env_moved == Some(true) {
                st.changed = st.changed.saturating_add(1);
            } else {
                st.changed = 0;
            }
            if st.changed >= CHANGED_INTERVALS {
                st.samples.clear();
                st.reference_ms = None;
                st.reference_hits.clear();
                st.reference_miss.clear();
                st.noise = 0.0;
                st.changed = 0;
                st.proven = None;
                st.probe = None;
                st.moved.clear();
                st.step = FIRST_STEP;
                return Verdict::Unreferenced;
            }
        }
        let proven = st.proven(&fair);
        if h.at_or_above_fair() && h.neighbours_at_fair {
            let (at_fair, at_held) = (lat(h.fair.0, h.fair.1), lat(h.held.0, h.held.1));
            let carry = if at_held > 0.0 && at_fair.is_finite() {
                (at_fair / at_held).max(1.0)
            } else {
                1.0
            };
            if st.samples.len() == REFERENCE_SAMPLES {
                st.samples.remove(0);
            }
            st.samples.push(m * carry);
            st.reference_ms = Some(st.samples.iter().sum::<f64>() / st.samples.len() as f64);
            if let Some(hit) = h.fair_hit {
                if st.reference_hits.len() == REFERENCE_SAMPLES {
                    st.reference_hits.remove(0);
                }
                st.reference_hits.push(hit);
            }
            if let Some(miss) = o.service.miss_ms.filter(|v| v.is_finite() && *v > 0.0) {
                if st.reference_miss.len() == REFERENCE_SAMPLES {
                    st.reference_miss.remove(0);
                }
                st.reference_miss.push(miss);
            }
            // (Only once settled: samples still falling as caches warm spread by the
            // trend, not by the noise of a measurement.)
            if settled(&st.samples, limit.tolerance()) {
                st.noise = st.noise.max(scatter(&st.samples));
            }
            st.moved.clear();
            st.probe = None;
        } else {
            if st.moved.len() == MOVED_SAMPLES {
                st.moved.remove(0);
            }
            st.moved.push(m);
            let k = st.moved.len();
            let mean = st.moved.iter().sum::<f64>() / k as f64;
            let accumulated = k >= REFERENCE_SAMPLES
                && st
                    .reference_ms
                    .is_some_and(|r| mean > limit.allows(r, noise / (k as f64).sqrt()));
            let beyond = harm_bound.is_some_and(|b| m > b);
            if st.reference_ms.is_some() && !h.at_or_above(proven.l1, &proven.l2) {
                // On probation below its proven sizes.
                let here = h.sizes();
                let runs = match st.probe.take() {
                    Some((p, mut v)) if p == here => {
                        v.push(m);
                        v
                    }
                    _ => vec![m],
                };
                let probe_mean = runs.iter().sum::<f64>() / runs.len() as f64;
                // A probe that ends unproven was judged (and is undone) on its own
                // intervals: they are no evidence against the sizes it returns to.
                let forget = |moved: &mut Vec<f64>| {
                    let keep = moved.len().saturating_sub(runs.len());
                    moved.truncate(keep);
                };
                if beyond {
                    forget(&mut st.moved);
                    probe_outcome = Some(false);
                } else if accept_bound.is_some_and(|a| probe_mean <= a) {
                    probe_outcome = Some(true);
                    let merged = GuardSizes {
                        l1: proven.l1.min(here.l1),
                        l2: proven
                            .l2
                            .iter()
                            .zip(&here.l2)
                            .map(|(&a, &b)| a.min(b))
                            .collect(),
                    };
                    st.proven = Some((merged, fair.clone()));
                } else if runs.len() >= PROBE_INTERVALS {
                    forget(&mut st.moved);
                    probe_undecided_end = true;
                } else {
                    st.probe = Some((here, runs));
                }
                harmed = accumulated && probe_outcome != Some(false);
            } else {
                st.probe = None;
                harmed = beyond || accumulated;
            }
        }
        // Trust: the curve's hit ratio at the sizes held against the measured one.
        let predicted = {
            let total: u64 = h.held.1.iter().sum();
            model.hit_ratios(h.held.0 as f64, total as f64).1
        };
        let seen = o.combined_hit_ratio();
        if o.l1.lookups > 0 && predicted - seen <= HIT_RATIO_TOLERANCE {
            st.trusted = st.trusted.saturating_add(1);
        } else {
            st.trusted = 0;
        }
    }
    if harmed {
        st.moved.clear();
        st.probe = None;
        st.proven = None;
        st.harms = st.harms.saturating_add(1);
        st.penalty = doubling(st.harms);
        st.step = FIRST_STEP;
        return Verdict::Reverted;
    }
    if st.penalty > 0 {
        st.penalty -= 1;
        return Verdict::Penalised {
            intervals: st.penalty,
        };
    }
    if !settled(&st.samples, limit.tolerance()) {
        return Verdict::Unreferenced;
    }
    // The guard weighs at most MOVED_SAMPLES intervals together; a mean of k intervals
    // is as noisy as one over sqrt(k). When even that cannot resolve the harm the SLO
    // allows, no measurement can show a move safe (nor a probe proven except by luck).
    if let Limit::Degradation(x) = limit {
        if st.noise > x * (MOVED_SAMPLES as f64).sqrt() {
            st.probe = None;
            return Verdict::TooNoisy { noise: st.noise };
        }
    }
    match probe_outcome {
        Some(true) => {
            st.step = (st.step_share() * 2.0).min(1.0);
            st.probe_failures = 0;
        }
        Some(false) => {
            st.step = (st.step_share() / 2.0).max(LEAST_STEP);
            st.probe_failures = st.probe_failures.saturating_add(1);
            st.probe_penalty = doubling(st.probe_failures);
            return Verdict::ProbeEnded {
                intervals: st.probe_penalty,
            };
        }
        None if probe_undecided_end => {
            st.step = (st.step_share() / 2.0).max(LEAST_STEP);
            return Verdict::ProbeEnded {
                intervals: st.probe_penalty,
            };
        }
        None => {}
    }
    if st.probe.is_some() {
        return Verdict::Probing;
    }
    if st.probe_penalty > 0 {
        st.probe_penalty -= 1;
        return Verdict::ProbeEnded {
            intervals: st.probe_penalty,
        };
    }
    Verdict::Proven
}

/// [`BASE_PENALTY`] doubled for each of `count − 1` earlier failures, at most
/// [`MAX_PENALTY`].
fn doubling(count: u32) -> u32 {
    let doubling = 1u32
        .checked_shl(count.saturating_sub(1))
        .unwrap_or(u32::MAX);
    BASE_PENALTY.saturating_mul(doubling).min(MAX_PENALTY)
}

/// The relative spread of the samples, `(max − min) / mean`: how far apart intervals at
/// the same fair share measure. A difference within it is not evidence of harm.
fn spread(samples: &[f64]) -> f64 {
    let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    let (lo, hi) = samples
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    if mean > 0.0 && hi >= lo {
        (hi - lo) / mean
    } else {
        0.0
    }
}

/// How far the samples scatter about their trend, relative to their mean: the spread of
/// their residuals from the least-squares line through them (in the order taken). Caches
/// that still warm, or a load that drifts, move every sample the same way; that is not
/// the noise of one measurement, and [`spread`] would count it.
fn scatter(samples: &[f64]) -> f64 {
    let n = samples.len();
    let mean = samples.iter().sum::<f64>() / n.max(1) as f64;
    if n < 3 || mean.is_nan() || mean <= 0.0 {
        return spread(samples);
    }
    let mid = (n - 1) as f64 / 2.0;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (k, &v) in samples.iter().enumerate() {
        let dx = k as f64 - mid;
        sxy += dx * (v - mean);
        sxx += dx * dx;
    }
    let slope = sxy / sxx;
    let (lo, hi) = samples
        .iter()
        .enumerate()
        .map(|(k, &v)| v - (mean + slope * (k as f64 - mid)))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), r| {
            (a.min(r), b.max(r))
        });
    (hi - lo) / mean
}

/// Whether the samples of the latency at fair share make a reference: there are
/// [`REFERENCE_SAMPLES`] of them and the newest is no longer falling below the others by
/// more than the SLO's own tolerance `x` (caches still warming make every sample better
/// than the last, and the reference would lag what a fair share gives by the time the
/// floor is lifted).
fn settled(samples: &[f64], x: f64) -> bool {
    let Some((&last, earlier)) = samples.split_last() else {
        return false;
    };
    let least = earlier.iter().copied().fold(f64::INFINITY, f64::min);
    samples.len() >= REFERENCE_SAMPLES && last >= (1.0 - x) * least
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

#[cfg(test)]
mod tests;
