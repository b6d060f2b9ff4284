//! [`RequestStream`]: a request iterator that can also hand out requests in batches.
//!
//! Per-request iteration (`Iterator::next` returning `Option<Result<Request, TraceError>>`)
//! costs a consumer running at tens of millions of requests a second more than the
//! decoding itself: the item is a large enum, so the common `Some(Ok(request))` and the
//! rare `Some(Err(..))` meet in memory, and the request is stored and loaded back on every
//! call. [`RequestStream::next_batch`] instead appends a few thousand plain [`Request`]s
//! to a caller's vector — the oracle reader decodes them out of its read buffer in one
//! tight loop — and the consumer runs its own tight loop over the slice. Curve building
//! (`mrc`) and simulation (`policy::sim`) read this way.
//!
//! Every stream of `Result<Request, TraceError>` can be one: the default `next_batch` calls
//! `next`. [`TraceReader`] (the oracle arm), [`SkipBad`], boxes and [`Limit`] forward
//! batches; [`Plain`] makes any request iterator a stream.

use crate::{Request, SkipBad, TraceError, TraceReader};

/// Requests in a batch, as consumers ask for them: large enough that the per-batch cost
/// vanishes, small enough (160 KiB of requests) to stay in the L2 cache.
pub const BATCH: usize = 4096;

/// [`RequestStream::next_batch`] for any iterator of requests: `next` up to `max` times.
fn batch_one_by_one(
    it: &mut (impl Iterator<Item = Result<Request, TraceError>> + ?Sized),
    out: &mut Vec<Request>,
    max: usize,
) -> Result<(), TraceError> {
    for _ in 0..max {
        match it.next() {
            Some(Ok(r)) => out.push(r),
            Some(Err(e)) => return Err(e),
            None => break,
        }
    }
    Ok(())
}

/// A stream of requests that can be read in batches.
pub trait RequestStream: Iterator<Item = Result<Request, TraceError>> {
    /// Appends up to `max` requests to `out`. `Ok` with nothing appended means the stream
    /// has ended (with `max > 0`); an error is returned after the requests before it have
    /// been appended, exactly where `next` would have yielded it.
    fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        batch_one_by_one(self, out, max)
    }

    /// At most `n` requests of this stream (`Iterator::take`, keeping batches).
    fn limit(self, n: u64) -> Limit<Self>
    where
        Self: Sized,
    {
        Limit {
            inner: self,
            left: n,
        }
    }
}

impl RequestStream for TraceReader {
    #[inline]
    fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        match self {
            TraceReader::Oracle(r) => r.next_batch(out, max),
            TraceReader::Text(r) => batch_one_by_one(r, out, max),
        }
    }
}

impl<I: RequestStream> RequestStream for SkipBad<I> {
    fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        let start = out.len();
        loop {
            let want = max - (out.len() - start);
            match self.inner_mut().next_batch(out, want) {
                Err(e) if e.is_record_error() => self.note(&e),
                other => return other,
            }
        }
    }
}

impl<S: RequestStream + ?Sized> RequestStream for Box<S> {
    #[inline]
    fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        (**self).next_batch(out, max)
    }
}

/// At most a given number of requests of a stream: see [`RequestStream::limit`].
pub struct Limit<I> {
    inner: I,
    left: u64,
}

impl<I: Iterator<Item = Result<Request, TraceError>>> Iterator for Limit<I> {
    type Item = Result<Request, TraceError>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.inner.next()
    }
}

impl<I: RequestStream> RequestStream for Limit<I> {
    fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<(), TraceError> {
        let want = (max as u64).min(self.left) as usize;
        let before = out.len();
        let res = self.inner.next_batch(out, want);
        // An error counts as an item, as it does for `Iterator::take`.
        let got = (out.len() - before) as u64 + res.is_err() as u64;
        self.left -= got.min(self.left);
        res
    }
}

/// Any iterator of `Result<Request, TraceError>` as a [`RequestStream`] (batches through
/// `next`).
pub struct Plain<I>(pub I);

impl<I: Iterator<Item = Result<Request, TraceError>>> Iterator for Plain<I> {
    type Item = Result<Request, TraceError>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}

impl<I: Iterator<Item = Result<Request, TraceError>>> RequestStream for Plain<I> {}
