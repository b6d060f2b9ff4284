//! Per-tenant latency histograms (HdrHistogram, microseconds, 3 significant digits), one for
//! reads and one for writes, recorded by the NBD adapter around each data request: the
//! node's one latency histogram per request. A tenant's observations (`observe`) take
//! their percentiles from these, merged over the tenant's exports and clients.

use hdrhistogram::Histogram;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Largest latency recorded exactly (larger values are clamped): one minute.
pub(crate) const MAX_MICROS: u64 = 60_000_000;

/// Read and write latency of one tenant.
pub struct Latency {
    reads: Mutex<Histogram<u64>>,
    writes: Mutex<Histogram<u64>>,
}

impl Default for Latency {
    fn default() -> Self {
        let h = || Mutex::new(Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid bounds"));
        Latency {
            reads: h(),
            writes: h(),
        }
    }
}

/// Percentiles of one histogram and a tenant's read and write percentiles (`GET
/// /v1/tenants`' `latency`): the contract's types.
pub use api::node::{LatencySummary, Percentiles};

fn lock(m: &Mutex<Histogram<u64>>) -> MutexGuard<'_, Histogram<u64>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn percentiles(h: &Histogram<u64>) -> Percentiles {
    Percentiles {
        count: h.len(),
        mean_us: if h.is_empty() { 0.0 } else { h.mean() },
        p50_us: h.value_at_quantile(0.5),
        p99_us: h.value_at_quantile(0.99),
        p999_us: h.value_at_quantile(0.999),
        max_us: h.max(),
    }
}

impl Latency {
    /// Records one request.
    pub fn record(&self, write: bool, took: Duration) {
        let us = (took.as_micros() as u64).clamp(1, MAX_MICROS);
        let h = if write { &self.writes } else { &self.reads };
        lock(h).saturating_record(us);
    }

    /// Reads and writes in one histogram.
    pub fn merged(&self) -> Histogram<u64> {
        let mut h = lock(&self.reads).clone();
        self.merge_writes_into(&mut h);
        h
    }

    /// Adds the reads and writes to `h` (of the same bounds).
    pub fn merge_into(&self, h: &mut Histogram<u64>) {
        h.add(&*lock(&self.reads)).expect("same bounds");
        self.merge_writes_into(h);
    }

    fn merge_writes_into(&self, h: &mut Histogram<u64>) {
        h.add(&*lock(&self.writes)).expect("same bounds");
    }

    /// An empty histogram of the recorders' bounds.
    pub fn empty() -> Histogram<u64> {
        Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid bounds")
    }

    /// The percentiles now.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            read: percentiles(&lock(&self.reads)),
            write: percentiles(&lock(&self.writes)),
        }
    }

    /// Cumulative bucket counts for Prometheus (`le` bounds in seconds) and the sum in
    /// seconds, for reads or writes.
    pub fn buckets(&self, write: bool, bounds_us: &[u64]) -> (Vec<u64>, u64, f64) {
        let h = lock(if write { &self.writes } else { &self.reads });
        let counts = bounds_us
            .iter()
            .map(|&b| {
                h.iter_recorded()
                    .filter(|v| v.value_iterated_to() <= b)
                    .map(|v| v.count_at_value())
                    .sum()
            })
            .collect();
        let sum = h
            .iter_recorded()
            .map(|v| v.value_iterated_to() as f64 * v.count_at_value() as f64)
            .sum::<f64>()
            / 1e6;
        (counts, h.len(), sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_latencies() {
        let l = Latency::default();
        for us in 1..=1000u64 {
            l.record(false, Duration::from_micros(us));
        }
        l.record(true, Duration::from_millis(5));
        let s = l.summary();
        assert_eq!(s.read.count, 1000);
        assert!((s.read.p50_us as i64 - 500).abs() <= 1, "{:?}", s.read);
        assert!((s.read.p99_us as i64 - 990).abs() <= 1, "{:?}", s.read);
        assert_eq!(s.write.count, 1);
        assert!((s.write.max_us as i64 - 5000).abs() <= 5);
        let (counts, n, sum) = l.buckets(false, &[100, 1000]);
        assert_eq!(n, 1000);
        assert_eq!(counts, vec![100, 1000]);
        assert!((sum - 0.5005).abs() < 0.001, "{sum}");
    }
}
