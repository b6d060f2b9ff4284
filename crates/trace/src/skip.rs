//! [`SkipBad`]: `--skip-bad` as an iterator adapter. Record errors (a malformed line or
//! record) are counted and skipped; I/O errors still end the stream. The count lives in a
//! shared cell so it can be read after the stream has been moved into a consumer.

use crate::{Request, TraceError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Skips and counts bad records of an inner request stream.
pub struct SkipBad<I> {
    inner: I,
    skipped: Arc<AtomicU64>,
    first: Option<String>,
}

impl<I> SkipBad<I> {
    /// Wraps `inner`.
    pub fn new(inner: I) -> Self {
        SkipBad {
            inner,
            skipped: Arc::new(AtomicU64::new(0)),
            first: None,
        }
    }

    /// Records skipped so far.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// A handle on the count that outlives the adapter.
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.skipped.clone()
    }

    /// The first skipped record's error, for a report.
    pub fn first_error(&self) -> Option<&str> {
        self.first.as_deref()
    }
}

impl<I> SkipBad<I> {
    /// The wrapped stream.
    pub(crate) fn inner_mut(&mut self) -> &mut I {
        &mut self.inner
    }

    /// Counts one skipped record error.
    pub(crate) fn note(&mut self, e: &TraceError) {
        if self.first.is_none() {
            self.first = Some(e.to_string());
        }
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }
}

impl<I: Iterator<Item = Result<Request, TraceError>>> Iterator for SkipBad<I> {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.inner.next()? {
                Err(e) if e.is_record_error() => self.note(&e),
                other => return Some(other),
            }
        }
    }
}
