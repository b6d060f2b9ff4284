//! The node's one latency recorder, one per export and client ([`Latency`]), fed once per
//! request by the NBD adapter: a histogram of reads and one of writes (HdrHistogram,
//! microseconds, 3 significant digits) and exact sums of every request and of reads
//! served from this node's memory (hits) and from below it (misses), by [`LatencyClass`]. A
//! tenant's observations (`observe`) take their percentiles from these histograms merged
//! over the tenant's exports and clients, and their means and hit/miss split from these
//! sums; `/v1/tenants` and `/metrics` show them per export and client. A request answered
//! with an error is counted apart ([`Latency::fail`]) and never timed: a request that
//! failed at once is no fast request.

use api::node::LatencySum;
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Largest latency recorded exactly (larger values are clamped): one minute.
pub(crate) const MAX_MICROS: u64 = 60_000_000;

/// How a request was served, for the latency split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyClass {
    /// A read whose every block was in this node's memory.
    Hit,
    /// A read with at least one block from below this node.
    Miss,
    /// Not a read (writes, flushes, trims): counted in the latency, not in the split.
    Other,
}

/// Count and total latency of a class of requests.
#[derive(Default)]
struct Sum {
    count: AtomicU64,
    nanos: AtomicU64,
}

impl Sum {
    fn add(&self, took: Duration) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    fn snapshot(&self) -> LatencySum {
        LatencySum {
            count: self.count.load(Ordering::Relaxed),
            sum_ms: self.nanos.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

/// The exact sums of a recorder: every request, hits and misses.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sums {
    /// Every request.
    pub all: LatencySum,
    /// Reads served wholly from memory.
    pub hit: LatencySum,
    /// Reads with a block from below.
    pub miss: LatencySum,
    /// Requests answered with an error (in none of the others).
    pub failed: u64,
}

impl Sums {
    /// `self` plus `o`.
    pub fn add(&mut self, o: Sums) {
        for (a, b) in [
            (&mut self.all, o.all),
            (&mut self.hit, o.hit),
            (&mut self.miss, o.miss),
        ] {
            a.count += b.count;
            a.sum_ms += b.sum_ms;
        }
        self.failed += o.failed;
    }
}

/// Read and write latency of one export's client, and its exact sums.
pub struct Latency {
    reads: Mutex<Histogram<u64>>,
    writes: Mutex<Histogram<u64>>,
    all: Sum,
    hit: Sum,
    miss: Sum,
    failed: AtomicU64,
}

impl Default for Latency {
    fn default() -> Self {
        let h = || Mutex::new(Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid bounds"));
        Latency {
            reads: h(),
            writes: h(),
            all: Sum::default(),
            hit: Sum::default(),
            miss: Sum::default(),
            failed: AtomicU64::new(0),
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
    /// Records one request that took `took`: into the writes' histogram (`write`) or the
    /// reads', and into the sums as `service` says.
    pub fn record(&self, write: bool, service: LatencyClass, took: Duration) {
        let us = (took.as_micros() as u64).clamp(1, MAX_MICROS);
        let h = if write { &self.writes } else { &self.reads };
        lock(h).saturating_record(us);
        self.all.add(took);
        match service {
            LatencyClass::Hit => self.hit.add(took),
            LatencyClass::Miss => self.miss.add(took),
            LatencyClass::Other => {}
        }
    }

    /// Counts one request answered with an error: in no histogram and no sum.
    pub fn fail(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// The exact sums now.
    pub fn sums(&self) -> Sums {
        Sums {
            all: self.all.snapshot(),
            hit: self.hit.snapshot(),
            miss: self.miss.snapshot(),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }

    /// Reads and writes in one histogram.
    pub fn merged(&self) -> Histogram<u64> {
        let mut h = lock(&self.reads).clone();
        self.merge_writes_into(&mut h);
        h
    }

    /// Adds the reads and writes to `h` (of the same bounds).
    pub fn merge_into(&self, h: &mut Histogram<u64>) {
        let reads = lock(&self.reads);
        if !reads.is_empty() {
            h.add(&*reads).expect("same bounds");
        }
        drop(reads);
        self.merge_writes_into(h);
    }

    /// Adds the writes to `h`; an empty histogram adds nothing and costs no scan of its
    /// buckets.
    fn merge_writes_into(&self, h: &mut Histogram<u64>) {
        let writes = lock(&self.writes);
        if !writes.is_empty() {
            h.add(&*writes).expect("same bounds");
        }
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
            l.record(false, LatencyClass::Hit, Duration::from_micros(us));
        }
        l.record(true, LatencyClass::Other, Duration::from_millis(5));
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
        // The exact sums: 1,001 requests, the 1,000 reads hits, 500.5 + 5 ms in all.
        let sums = l.sums();
        assert_eq!(
            (sums.all.count, sums.hit.count, sums.miss.count),
            (1001, 1000, 0)
        );
        assert!((sums.all.sum_ms - 505.5).abs() < 1e-6, "{sums:?}");
        // A failed request is counted apart, timed nowhere.
        l.fail();
        let after = l.sums();
        assert_eq!((after.failed, after.all.count), (1, 1001));
        assert_eq!(l.summary().read.count, 1000);
    }
}
