//! Request streams: what one client connection sends, request after request, without end.
//! Each is deterministic (seeded), so request `k` of one run is request `k` of another.
//!
//! * [`Stream::zipf`]: Zipf(`alpha`) popularity over `objects` 4 KiB blocks, from
//!   `trace::synth` (the one Zipf generator: rejection-inversion sampling, ranks spread
//!   over the blocks by a fixed permutation);
//! * [`Stream::scan`]: sequential reads of `len` bytes from `start`, from `trace::synth`'s
//!   scan (offsets past the end of the export wrap when sent, `node::replay::map_request`,
//!   so a scan loops over its volume);
//! * [`Stream::looped`]: a trace's requests ([`crate::trace_file`]) in order, from `from`,
//!   starting over at the end.

use std::sync::Arc;
use trace::synth::{Generator, Workload};
use trace::Request;

/// An endless, deterministic stream of requests.
pub struct Stream(Inner);

enum Inner {
    Synth(Box<Generator>),
    Looped {
        requests: Arc<Vec<Request>>,
        next: usize,
    },
}

impl Stream {
    /// Zipf(`alpha`) reads over `objects` blocks of 4 KiB, seeded by `seed`.
    pub fn zipf(objects: u64, alpha: f64, seed: u64) -> Stream {
        let w = Workload::zipf(objects, alpha)
            .with_seed(seed)
            .with_requests(u64::MAX);
        Stream(Inner::Synth(Box::new(w.iter())))
    }

    /// Sequential reads of `len` bytes, the first at byte `start` (rounded down to `len`).
    pub fn scan(len: u32, start: u64) -> Stream {
        let w = Workload::scan()
            .with_block(len.max(1))
            .with_start(start / u64::from(len.max(1)))
            .with_requests(u64::MAX);
        Stream(Inner::Synth(Box::new(w.iter())))
    }

    /// `requests` in order from the `from`-th (modulo their number), looped; an empty
    /// list gives nothing.
    pub fn looped(requests: Arc<Vec<Request>>, from: usize) -> Stream {
        let next = if requests.is_empty() {
            0
        } else {
            from % requests.len()
        };
        Stream(Inner::Looped { requests, next })
    }
}

impl Iterator for Stream {
    type Item = Request;
    fn next(&mut self) -> Option<Request> {
        match &mut self.0 {
            Inner::Synth(g) => g.next(),
            Inner::Looped { requests, next } => {
                let r = *requests.get(*next)?;
                *next = (*next + 1) % requests.len();
                Some(r)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::Op;

    #[test]
    fn zipf_is_seeded_skewed_and_within_its_set() {
        let a: Vec<Request> = Stream::zipf(1000, 0.9, 7).take(20_000).collect();
        let b: Vec<Request> = Stream::zipf(1000, 0.9, 7).take(20_000).collect();
        assert_eq!(a, b, "the same seed gives the same requests");
        let c: Vec<u64> = Stream::zipf(1000, 0.9, 8)
            .take(100)
            .map(|r| r.offset)
            .collect();
        assert_ne!(a[..100].iter().map(|r| r.offset).collect::<Vec<_>>(), c);
        assert!(a.iter().all(|r| r.op == Op::Read && r.len == 4096));
        assert!(a
            .iter()
            .all(|r| r.offset % 4096 == 0 && r.offset < 1000 * 4096));
        // Skew: the most popular block takes far more than 1/1000 of the requests.
        let mut counts = std::collections::HashMap::new();
        for r in &a {
            *counts.entry(r.offset).or_insert(0u32) += 1;
        }
        let top = *counts.values().max().unwrap();
        assert!(top > 20_000 / 1000 * 20, "top block {top} of 20000");
    }

    #[test]
    fn scans_are_sequential_from_their_start() {
        let s: Vec<Request> = Stream::scan(65536, 3 * 65536).take(4).collect();
        let offsets: Vec<u64> = s.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, [3, 4, 5, 6].map(|k| k * 65536));
        assert!(s.iter().all(|r| r.len == 65536));
    }

    #[test]
    fn a_looped_trace_starts_where_asked_and_starts_over() {
        let r = |offset| Request {
            time_us: 0,
            tenant: 0,
            volume: 0,
            op: Op::Write,
            offset,
            len: 4096,
        };
        let t = Arc::new(vec![r(0), r(4096), r(8192)]);
        let got: Vec<u64> = Stream::looped(t, 4).take(4).map(|q| q.offset).collect();
        assert_eq!(got, [4096, 8192, 0, 4096]);
        assert_eq!(Stream::looped(Arc::new(Vec::new()), 3).next(), None);
    }
}
