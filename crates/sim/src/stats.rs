//! What the simulator counts: per tenant per interval, and the rows and summaries a run
//! reports.

use control::Slo;
use hdrhistogram::Histogram;
use serde::Serialize;

/// A latency histogram in microseconds (2 significant digits, up to an hour).
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("valid bounds")
}

/// How a request was served, by its slowest part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// Every block from level 1.
    Level1 = 0,
    /// Some block from level 2 (or the hot tier), none from a disk.
    Level2 = 1,
    /// Some block from a disk.
    Disk = 2,
}

/// One tenant's counters for one interval.
#[derive(Clone, Debug)]
pub struct Counters {
    /// Data requests completed.
    pub requests: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// Level-1 block lookups.
    pub l1_lookups: u64,
    /// Level-1 block hits.
    pub l1_hits: u64,
    /// Level-2 block lookups.
    pub l2_lookups: u64,
    /// Level-2 block hits.
    pub l2_hits: u64,
    /// Sum of latencies (seconds).
    pub latency_sum: f64,
    /// Per way of service, of the reads: (count, latency sum in seconds). Writes are
    /// left out as the live node leaves them out of its hit/miss split: how a write-back
    /// cache absorbs a write says nothing of what a read at that level costs.
    pub by_kind: [(u64, f64); 3],
    /// Of `requests`, the writes.
    pub writes: u64,
    /// Sum of the writes' latencies (seconds).
    pub write_latency_sum: f64,
    /// Latencies.
    hist: Latencies,
    /// Latencies of the reads served by a disk (what a tail SLO's sizing needs).
    miss_hist: Latencies,
    /// Blocks read from a hot tier.
    pub tier_hits: u64,
    /// Chunks placed in a hot tier (migrations).
    pub migrations: u64,
    /// Blocks read from a disk by requests (not background work).
    pub disk_blocks: u64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            requests: 0,
            bytes: 0,
            l1_lookups: 0,
            l1_hits: 0,
            l2_lookups: 0,
            l2_hits: 0,
            latency_sum: 0.0,
            by_kind: [(0, 0.0); 3],
            writes: 0,
            write_latency_sum: 0.0,
            hist: Latencies::new(),
            miss_hist: Latencies::new(),
            tier_hits: 0,
            migrations: 0,
            disk_blocks: 0,
        }
    }
}

impl Counters {
    /// Records one request's latency (seconds), whether it wrote, and how it was served.
    pub fn record(&mut self, latency: f64, write: bool, served: Served) {
        self.requests += 1;
        self.latency_sum += latency;
        if write {
            self.writes += 1;
            self.write_latency_sum += latency;
        } else {
            let k = &mut self.by_kind[served as usize];
            k.0 += 1;
            k.1 += latency;
        }
        let us = ((latency * 1e6).round() as u64).max(1);
        let _ = self.hist.live().record(us);
        if !write && served == Served::Disk {
            let _ = self.miss_hist.live().record(us);
        }
    }

    /// Mean latency in ms (0 without requests).
    pub fn mean_ms(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.latency_sum / self.requests as f64 * 1e3
        }
    }

    /// Mean latency in ms of the reads and of the writes, as the live node's observer
    /// reports them: none without a read (the interval tells nothing apart), a write mean
    /// of 0 without a write.
    pub fn read_write_ms(&self) -> Option<(f64, f64)> {
        let reads = self.requests - self.writes;
        (reads > 0).then(|| {
            let read_sum = (self.latency_sum - self.write_latency_sum).max(0.0);
            let write_ms = if self.writes == 0 {
                0.0
            } else {
                self.write_latency_sum / self.writes as f64 * 1e3
            };
            (read_sum / reads as f64 * 1e3, write_ms)
        })
    }

    /// Mean latency in ms of the reads served one way, if any read was served that way.
    pub fn kind_ms(&self, s: Served) -> Option<f64> {
        let (n, sum) = self.by_kind[s as usize];
        (n > 0).then(|| sum / n as f64 * 1e3)
    }

    /// Adds another interval's counters.
    pub fn merge(&mut self, o: &Counters) {
        self.requests += o.requests;
        self.bytes += o.bytes;
        self.l1_lookups += o.l1_lookups;
        self.l1_hits += o.l1_hits;
        self.l2_lookups += o.l2_lookups;
        self.l2_hits += o.l2_hits;
        self.latency_sum += o.latency_sum;
        self.writes += o.writes;
        self.write_latency_sum += o.write_latency_sum;
        for k in 0..3 {
            self.by_kind[k].0 += o.by_kind[k].0;
            self.by_kind[k].1 += o.by_kind[k].1;
        }
        self.hist.merge(&o.hist);
        self.miss_hist.merge(&o.miss_hist);
        self.tier_hits += o.tier_hits;
        self.migrations += o.migrations;
        self.disk_blocks += o.disk_blocks;
    }

    /// Level-1 hit ratio.
    pub fn l1_hit_ratio(&self) -> f64 {
        ratio(self.l1_hits, self.l1_lookups)
    }

    /// Level-2 hit ratio (of the lookups that reached level 2).
    pub fn l2_hit_ratio(&self) -> f64 {
        ratio(self.l2_hits, self.l2_lookups)
    }

    /// 99th percentile latency in ms.
    pub fn p99_ms(&self) -> f64 {
        self.quantile_ms(0.99)
    }

    /// The latency (ms) at quantile `q` of every request (0 without requests).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        self.hist.quantiles_ms(&[q])[0]
    }

    /// The quantiles the control step reads, of every request (`None` without one).
    pub fn quantiles(&self) -> Option<control::Quantiles> {
        self.hist.quantiles()
    }

    /// The quantiles of the reads a disk served (`None` without one).
    pub fn miss_quantiles(&self) -> Option<control::Quantiles> {
        self.miss_hist.quantiles()
    }

    /// Keeps the latencies in a compact form from here on: a closed interval's counters
    /// are kept for the whole run (the summary merges those after the warm-up), and a
    /// histogram of every bucket is some 26 KB, so an hour of 10 s intervals held a
    /// hundred MB for two schemes of four tenants. Merging and percentiles give exactly
    /// what they gave before sealing; recording again restores the full histogram.
    pub fn seal(&mut self) {
        self.hist.seal();
        self.miss_hist.seal();
    }
}

/// A tenant's latencies in one interval: the full histogram while it records, then only
/// the recorded buckets ([`Counters::seal`]).
#[derive(Clone, Debug)]
struct Latencies {
    /// The full histogram, `None` once sealed.
    full: Option<Box<Histogram<u64>>>,
    /// Sealed: `(highest value of the bucket, count)` of every bucket that holds a count.
    sealed: Vec<(u64, u64)>,
}

impl Latencies {
    fn new() -> Self {
        Latencies {
            full: Some(Box::new(histogram())),
            sealed: Vec::new(),
        }
    }

    /// The full histogram, rebuilt first if sealed.
    fn live(&mut self) -> &mut Histogram<u64> {
        let sealed = &mut self.sealed;
        self.full
            .get_or_insert_with(|| Box::new(rebuilt(&std::mem::take(sealed))))
    }

    /// Adds another interval's latencies.
    fn merge(&mut self, o: &Latencies) {
        match &o.full {
            Some(h) => {
                let _ = self.live().add(&**h);
            }
            None => {
                let live = self.live();
                for &(v, n) in &o.sealed {
                    let _ = live.record_n(v, n);
                }
            }
        }
    }

    /// Keeps only the recorded buckets.
    fn seal(&mut self) {
        if let Some(h) = self.full.take() {
            self.sealed = h
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect();
        }
    }

    /// The latencies (ms) at quantiles `qs` (zeros when empty).
    fn quantiles_ms<const N: usize>(&self, qs: &[f64; N]) -> [f64; N] {
        let of = |h: &Histogram<u64>| {
            qs.map(|q| {
                if h.is_empty() {
                    0.0
                } else {
                    h.value_at_quantile(q) as f64 / 1e3
                }
            })
        };
        match &self.full {
            Some(h) => of(h),
            None if self.sealed.is_empty() => [0.0; N],
            None => of(&rebuilt(&self.sealed)),
        }
    }

    /// The control step's quantiles, `None` when empty.
    fn quantiles(&self) -> Option<control::Quantiles> {
        let empty = match &self.full {
            Some(h) => h.is_empty(),
            None => self.sealed.is_empty(),
        };
        if empty {
            return None;
        }
        let [p50, p90, p95, p99, p999] = self.quantiles_ms(&[0.5, 0.9, 0.95, 0.99, 0.999]);
        Some(control::Quantiles {
            p50,
            p90,
            p95,
            p99,
            p999,
        })
    }
}

/// A full histogram of sealed counts: each bucket's highest value lands in the same bucket
/// again, so counts and percentiles are those before sealing.
fn rebuilt(counts: &[(u64, u64)]) -> Histogram<u64> {
    let mut h = histogram();
    for &(v, n) in counts {
        let _ = h.record_n(v, n);
    }
    h
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// One tenant's row for one interval (`intervals.csv`).
#[derive(Clone, Debug, Serialize)]
pub struct IntervalRow {
    /// Scheme.
    pub scheme: String,
    /// Interval number from 0.
    pub interval: u64,
    /// End of the interval (simulated seconds).
    pub time_s: f64,
    /// Tenant.
    pub tenant: String,
    /// Requests completed.
    pub requests: u64,
    /// Requests per second.
    pub iops: f64,
    /// Mean latency (ms).
    pub mean_latency_ms: f64,
    /// 99th percentile (ms).
    pub p99_latency_ms: f64,
    /// Level-1 hit ratio.
    pub l1_hit_ratio: f64,
    /// Level-2 hit ratio.
    pub l2_hit_ratio: f64,
    /// Level-1 blocks during the interval.
    pub l1_size: u64,
    /// Level-2 blocks during the interval (all servers).
    pub l2_size: u64,
    /// The latency its SLO allowed in this interval (ms), when the run knows it.
    pub target_ms: Option<f64>,
    /// Whether the interval met the SLO (`None` without one).
    pub slo_met: Option<bool>,
    /// Eviction policy during the interval.
    pub eviction: String,
    /// Why the level-1 size.
    pub l1_reason: String,
    /// Why the level-2 size.
    pub l2_reason: String,
    /// Deviance from its SLO target (below 0: short; see `run::deviance`).
    pub deviance: Option<f64>,
    /// Hot-tier placements (chunks) its reads caused.
    pub migrations: u64,
    /// Blocks its requests read from a disk.
    pub disk_blocks: u64,
    /// Of its requests, the writes.
    pub writes: u64,
    /// Mean latency of its reads (ms), as the control step saw it (none without a read).
    pub read_latency_ms: Option<f64>,
    /// Mean latency of its writes (ms; 0 without a write, none without a read).
    pub write_latency_ms: Option<f64>,
    /// Its proportion of its host's link in force during the interval (none where the
    /// plan sets no proportions there).
    pub host_share: Option<f64>,
    /// Its proportion of its first storage server's disk in force during the interval
    /// (with volumes, its volume's share times its part of it).
    pub disk_share: Option<f64>,
}

/// Deviance from target of one tenant's interval, signed so that below 0 is short of the
/// target: `(observed − target) / target` for IOPS and bandwidth, `(target − observed) /
/// target` for latency (`fair_ms`: the fair scheme's latency, for degradation SLOs).
pub fn deviance(slo: &Slo, c: &Counters, secs: f64, fair_ms: Option<f64>) -> Option<f64> {
    if c.requests == 0 && !matches!(slo, Slo::Iops(_) | Slo::Mbps(_)) {
        return None;
    }
    Some(match *slo {
        Slo::LatencyMs(t) => (t - c.mean_ms()) / t,
        Slo::Degradation(x) => {
            let t = (1.0 + x) * fair_ms.filter(|f| *f > 0.0)?;
            (t - c.mean_ms()) / t
        }
        Slo::Iops(v) => (c.requests as f64 / secs - v) / v,
        Slo::Mbps(m) => (c.bytes as f64 / secs / 1e6 - m) / m,
        Slo::P95Ms(_) | Slo::P99Ms(_) | Slo::P999Ms(_) => {
            let (q, t) = slo.tail()?;
            (t - c.quantile_ms(q)) / t
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_are_timed_apart_and_service_times_count_reads() {
        let mut c = Counters::default();
        assert_eq!(c.read_write_ms(), None);
        c.record(0.004, true, Served::Level1);
        // Writes alone tell nothing apart: no read was timed.
        assert_eq!(c.read_write_ms(), None);
        assert_eq!(c.kind_ms(Served::Level1), None);
        c.record(0.001, false, Served::Level1);
        c.record(0.010, false, Served::Disk);
        let (r, w) = c.read_write_ms().unwrap();
        assert!((r - 5.5).abs() < 1e-9 && (w - 4.0).abs() < 1e-9, "{r} {w}");
        assert!((c.kind_ms(Served::Level1).unwrap() - 1.0).abs() < 1e-9);
        assert!((c.mean_ms() - 5.0).abs() < 1e-9);
        let mut reads_only = Counters::default();
        reads_only.record(0.002, false, Served::Level2);
        assert_eq!(reads_only.read_write_ms(), Some((2.0, 0.0)));
        c.merge(&reads_only);
        assert_eq!((c.requests, c.writes), (4, 1));
    }

    #[test]
    fn sealed_intervals_merge_and_report_as_full_ones_in_a_fraction_of_the_memory() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut full_total = Counters::default();
        let mut sealed_total = Counters::default();
        for interval in 0..20 {
            let mut c = Counters::default();
            for _ in 0..5_000 {
                // An interval of a tenant: cache hits near 0.2 ms, disk reads of 5-50 ms.
                let latency = if rng.gen_bool(0.7) {
                    rng.gen_range(0.00018..0.00025)
                } else {
                    rng.gen_range(0.005..0.05)
                };
                c.record(latency, interval % 3 == 0, Served::Disk);
            }
            let mut sealed = c.clone();
            sealed.seal();
            assert_eq!(sealed.p99_ms(), c.p99_ms());
            let kept = sealed.hist.sealed.len() * 16;
            let full = c.hist.full.as_ref().unwrap().distinct_values() * 8;
            assert!(kept * 3 < full, "{kept} bytes sealed against {full}");
            full_total.merge(&c);
            sealed_total.merge(&sealed);
        }
        assert_eq!(sealed_total.p99_ms(), full_total.p99_ms());
        assert_eq!(
            sealed_total.hist.live().iter_recorded().count(),
            full_total.hist.live().iter_recorded().count()
        );
        assert_eq!(sealed_total.requests, 100_000);
        // Recording into a sealed interval restores the histogram, losing nothing.
        let mut c = Counters::default();
        c.record(0.5, false, Served::Disk);
        c.seal();
        c.record(0.001, false, Served::Level1);
        assert_eq!(c.hist.live().len(), 2);
        assert!((c.p99_ms() - 500.0).abs() < 5.0, "{}", c.p99_ms());
    }
}
