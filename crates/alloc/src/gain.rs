//! [`Gain`]: a total order on `f64` gains, so greedy allocators can keep them in a
//! `BinaryHeap` (ties and NaN ordered by `f64::total_cmp`).

use std::cmp::Ordering;

/// A gain ordered by `f64::total_cmp`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Gain(pub(crate) f64);

impl Eq for Gain {}

impl PartialOrd for Gain {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Gain {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}
