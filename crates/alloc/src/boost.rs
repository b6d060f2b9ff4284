//! SANCACHE's adaptive boosting threshold (Figure 6) as a reusable step function.
//!
//! The rule lives once, in `policy::admission::adaptive` (the fast tier's admission policy
//! runs it every period); the controller uses the same pure function to plan or replay a
//! tier's threshold from observed hits and migrations. Each period: if there were more
//! migrations than JUSTIFY, a period whose hits per migration fall short of JUSTIFY raises
//! the threshold and one that clears it raises JUSTIFY by one; otherwise (too few
//! migrations) both come down by one. No cap on either; floors at 1 and 0.

pub use policy::admission::adaptive::{
    step, JustifyRule, LastMove, PeriodObservation, ThresholdState,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controller_sees_figure6() {
        // Per interval (hits, migrations) -> (threshold, JUSTIFY).
        let mut s = ThresholdState::default();
        let mut got = Vec::new();
        for (hits, migrations) in [(30, 10), (30, 10), (5, 10), (0, 0), (200, 2)] {
            s = step(s, PeriodObservation { hits, migrations });
            got.push((s.threshold, s.justify));
        }
        // 3 >= 0: bar 1; 3 >= 1: bar 2; 0.5 < 2: threshold 3; 0 migrations: both down;
        // 2 migrations > 1 and 100 >= 1: bar 2.
        assert_eq!(got, [(2, 1.0), (2, 2.0), (3, 2.0), (2, 1.0), (2, 2.0)]);
    }
}
