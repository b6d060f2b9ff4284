//! SANCACHE's adaptive boosting threshold (Figure 6) as one pure step function.
//!
//! A chunk is placed on the fast tier only after `threshold` accesses. Every period the
//! controller looks at what the migrations of that period bought: the benefit/cost ratio
//! `hits / migrations` (fast-tier hits per chunk migrated). Rule of [`next_threshold`]:
//! * no migrations in the period: the threshold is too strict for the workload — lower it
//!   by `step` (so boosting can start);
//! * `hits / migrations < justify`: migrations are not paying for themselves — raise it
//!   by `step`;
//! * `hits / migrations >= justify * relax`: migrations pay well — lower it by `step`
//!   to boost more chunks;
//! * otherwise keep it.
//!
//! The result stays within `[min, max]`. `relax > 1` leaves a dead band so the threshold
//! does not oscillate between two values. The `policy` crate's
//! `policy::admission::adaptive` (written concurrently by another helper) applies the
//! same kind of rule inside an admission policy; it was not available in this worktree,
//! so this thin version stands on its own and can be replaced by a call to it.

/// Parameters of the threshold rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoostParams {
    /// Hits per migration that justify a migration (SANCACHE's `JUSTIFY`).
    pub justify: f64,
    /// Factor over `justify` above which the threshold is lowered (>= 1).
    pub relax: f64,
    /// Change per period.
    pub step: u32,
    /// Lowest threshold.
    pub min: u32,
    /// Highest threshold.
    pub max: u32,
}

impl Default for BoostParams {
    fn default() -> Self {
        BoostParams {
            justify: 2.0,
            relax: 2.0,
            step: 1,
            min: 1,
            max: 64,
        }
    }
}

/// The threshold for the next period, from this period's fast-tier `hits` and `migrations`.
pub fn next_threshold(current: u32, hits: u64, migrations: u64, p: &BoostParams) -> u32 {
    let next = if migrations == 0 {
        current.saturating_sub(p.step)
    } else {
        let ratio = hits as f64 / migrations as f64;
        if ratio < p.justify {
            current.saturating_add(p.step)
        } else if ratio >= p.justify * p.relax {
            current.saturating_sub(p.step)
        } else {
            current
        }
    };
    next.clamp(p.min, p.max.max(p.min))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule() {
        let p = BoostParams::default(); // justify 2, dead band [2, 4)
        assert_eq!(next_threshold(4, 10, 10, &p), 5); // 1 hit per migration: stricter
        assert_eq!(next_threshold(4, 30, 10, &p), 4); // 3: keep
        assert_eq!(next_threshold(4, 40, 10, &p), 3); // 4: looser
        assert_eq!(next_threshold(4, 0, 0, &p), 3); // nothing migrated: looser
        assert_eq!(next_threshold(1, 0, 0, &p), 1); // floor
        assert_eq!(next_threshold(64, 0, 5, &p), 64); // ceiling
    }
}
