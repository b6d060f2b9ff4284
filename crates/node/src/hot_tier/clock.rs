//! Time for the hot-chunk tier: the [`TimeSource`] it reads (injectable, so rate limits are
//! tested deterministically with a [`ManualClock`]) and the [`TokenBucket`] that limits
//! its migrations per second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A monotonic time source, injectable so rate limits can be tested deterministically.
pub trait TimeSource: Send + Sync {
    /// Time elapsed since an arbitrary fixed origin.
    fn now(&self) -> Duration;
}

/// The production clock: [`Instant`] since construction.
pub struct MonotonicClock {
    origin: Instant,
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }
}

impl TimeSource for MonotonicClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told to (tests, simulations).
#[derive(Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        Self::default()
    }
    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let n = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(n, Ordering::Relaxed);
    }
}

impl TimeSource for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
}

/// A token bucket of `rate` tokens per second with a burst of one second's worth, full
/// at the start; a rate of 0 means unlimited.
pub(crate) struct TokenBucket {
    rate: u64,
    tokens: f64,
    last: Duration,
}

impl TokenBucket {
    /// A full bucket at time `now`.
    pub(crate) fn new(rate: u64, now: Duration) -> Self {
        TokenBucket {
            rate,
            tokens: rate as f64,
            last: now,
        }
    }

    /// Takes one token at time `now`, if there is one.
    pub(crate) fn take(&mut self, now: Duration) -> bool {
        if self.rate == 0 {
            return true;
        }
        let burst = self.rate as f64;
        let dt = now.saturating_sub(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.rate as f64).min(burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}
