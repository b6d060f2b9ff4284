//! SANCACHE's adaptive boosting threshold (Figure 6) as a reusable step function.
//!
//! The rule lives once, in `policy::admission::adaptive` (the fast tier's admission policy
//! runs it every period); the controller uses the same pure function to plan or replay a
//! tier's threshold from observed hits and migrations: raise the threshold when a period's
//! placements did not pay (fewer hits than migrations); on a paying period, lower it only
//! when the number of migrations changed by more than JUSTIFY, then raise JUSTIFY; else
//! hold it.

pub use policy::admission::adaptive::{step, LastMove, PeriodObservation, ThresholdState};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_of_poor_migrations_raises_the_threshold() {
        let s = ThresholdState {
            threshold: 2,
            max_threshold: 8,
            last: LastMove::None,
            ..ThresholdState::default()
        };
        let n = step(
            s,
            PeriodObservation {
                hits: 3,
                migrations: 10,
            },
        );
        assert_eq!((n.threshold, n.last), (3, LastMove::RaisedThreshold));
    }
}
