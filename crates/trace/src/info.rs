//! [`TraceInfo`]: a one-pass summary of a trace. Unique counts keep a hash set of keys, so
//! memory grows with the footprint, not the trace length.

use crate::{KeyMode, Op, Request, TraceError};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

/// Summary of a trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TraceInfo {
    /// All requests.
    pub requests: u64,
    /// Reads.
    pub reads: u64,
    /// Writes.
    pub writes: u64,
    /// Trims.
    pub trims: u64,
    /// Flushes.
    pub flushes: u64,
    /// Distinct object-mode keys among reads and writes.
    pub unique_objects: u64,
    /// Distinct blocks among reads and writes.
    pub unique_blocks: u64,
    /// Block size used for `unique_blocks`.
    pub block_size: u32,
    /// `unique_blocks * block_size`.
    pub footprint_bytes: u64,
    /// Bytes read plus bytes written.
    pub data_bytes: u64,
    /// Mean length of reads and writes in bytes.
    pub mean_request_bytes: f64,
    /// Last timestamp minus first, in microseconds.
    pub time_span_us: u64,
    /// Share of reads and writes that start where the previous data request of the same
    /// volume ended.
    pub sequentiality: f64,
    /// Distinct tenants.
    pub tenants: u64,
    /// Distinct (tenant, volume) pairs.
    pub volumes: u64,
}

impl TraceInfo {
    /// Summarises `requests`, counting blocks of `block_size` bytes.
    pub fn compute<I>(requests: I, block_size: u32) -> Result<TraceInfo, TraceError>
    where
        I: IntoIterator<Item = Result<Request, TraceError>>,
    {
        let mut s = TraceInfo {
            block_size,
            ..Default::default()
        };
        let mode = KeyMode::Block { block_size };
        let mut objects = FxHashSet::default();
        let mut blocks = FxHashSet::default();
        let mut last_end: FxHashMap<(u32, u32), u64> = FxHashMap::default();
        let mut tenants = FxHashSet::default();
        let (mut first_t, mut last_t) = (u64::MAX, 0u64);
        let mut sequential = 0u64;
        for r in requests {
            let r = r?;
            s.requests += 1;
            first_t = first_t.min(r.time_us);
            last_t = last_t.max(r.time_us);
            tenants.insert(r.tenant);
            match r.op {
                Op::Read => s.reads += 1,
                Op::Write => s.writes += 1,
                Op::Trim => s.trims += 1,
                Op::Flush => s.flushes += 1,
            }
            if !r.op.is_data() {
                continue;
            }
            s.data_bytes += r.len as u64;
            objects.insert(r.object_key());
            r.for_each_key(mode, |k| {
                blocks.insert(k);
            });
            let vol = (r.tenant, r.volume);
            if last_end.get(&vol) == Some(&r.offset) {
                sequential += 1;
            }
            last_end.insert(vol, r.offset + r.len as u64);
        }
        let data = s.reads + s.writes;
        s.unique_objects = objects.len() as u64;
        s.unique_blocks = blocks.len() as u64;
        s.footprint_bytes = s.unique_blocks * block_size as u64;
        s.mean_request_bytes = if data > 0 {
            s.data_bytes as f64 / data as f64
        } else {
            0.0
        };
        s.time_span_us = if s.requests > 0 { last_t - first_t } else { 0 };
        s.sequentiality = if data > 0 {
            sequential as f64 / data as f64
        } else {
            0.0
        };
        s.tenants = tenants.len() as u64;
        s.volumes = last_end.len() as u64;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_a_small_trace() {
        let mut w = Request::read(4096, 4096);
        w.op = Op::Write;
        w.time_us = 50;
        let reqs = vec![Request::read(0, 4096), w, Request::read(0, 8192)];
        let i = TraceInfo::compute(reqs.into_iter().map(Ok), 4096).unwrap();
        assert_eq!((i.requests, i.reads, i.writes), (3, 2, 1));
        assert_eq!(
            (i.unique_objects, i.unique_blocks, i.footprint_bytes),
            (2, 2, 8192)
        );
        assert_eq!(i.time_span_us, 50);
        assert!((i.sequentiality - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(i.data_bytes, 16384);
    }
}
