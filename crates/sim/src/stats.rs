//! What the simulator counts: per tenant per interval, and the rows and summaries a run
//! reports.

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
    pub hist: Histogram<u64>,
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
            hist: histogram(),
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
        let _ = self.hist.record(((latency * 1e6).round() as u64).max(1));
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
        let _ = self.hist.add(&o.hist);
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
        if self.hist.is_empty() {
            0.0
        } else {
            self.hist.value_at_quantile(0.99) as f64 / 1e3
        }
    }
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
}
