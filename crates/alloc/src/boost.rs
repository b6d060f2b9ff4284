//! SANCACHE's adaptive boosting threshold (Figure 6) as a reusable step function.
//!
//! The rule lives once, in `policy::admission::adaptive` (the fast tier's admission policy
//! runs it every period); the controller uses the same pure function to plan or replay a
//! tier's threshold from observed hits and migrations: raise the threshold when hits per
//! migration fall below JUSTIFY, raise JUSTIFY after a raise that paid, otherwise lower
//! both towards their minimums.

pub use policy::admission::adaptive::{step, LastMove, PeriodObservation, ThresholdState};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_of_poor_migrations_raises_the_threshold() {
        let s = ThresholdState {
            threshold: 2,
            justify: 1.0,
            min_threshold: 1,
            max_threshold: 8,
            min_justify: 0.5,
            max_justify: 4.0,
            justify_step: 0.5,
            last: LastMove::None,
            last_ratio: 0.0,
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
