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
//!
//! Its files: what is remembered of a tenant (`state`), what an interval is given and
//! judged by (`inputs`), the statistics of the samples at fair share (`samples`), the
//! verdict and the floor it allows (`verdict`), and the step that joins them (`interval`).

mod inputs;
mod interval;
mod samples;
mod state;
mod verdict;

pub use inputs::{measured_ms, Held, Limit};
pub use interval::step;
pub use state::{GuardSizes, GuardState};
pub use verdict::{floor, Verdict};

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

#[cfg(test)]
mod tests;
