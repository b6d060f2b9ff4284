//! What the guard decides for a tenant in an interval ([`Verdict`], with its reason in
//! words) and the least sizes that decision allows the plan to give it ([`floor`]).

use super::state::{GuardSizes, GuardState};

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
