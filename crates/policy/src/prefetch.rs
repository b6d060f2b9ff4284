//! [`prefetch`]: start loading the cache line of a value without waiting for it.
//!
//! The simulator's replay is bound by memory latency (the directory, the keys and the
//! policy's per-slot metadata are random reads into tables larger than the core's caches).
//! A plain read ahead of use (`black_box(table[i])`) does not hide that latency once the
//! loop body is longer than the core's reorder window: the core cannot retire the read, nor
//! anything after it, until the line arrives, so the read ahead stalls for as long as the
//! access it meant to hide. The `prefetch` instruction retires at once; the line arrives
//! while the core serves earlier requests. `lachesis bench sim` measures the difference
//! (docs/measurements.md, "Where the time goes").
//!
//! On x86_64 this is `_mm_prefetch` (SSE, part of the target's baseline); rustc 1.95 still
//! makes calling it `unsafe` (it is a `#[target_feature(enable = "sse")]` function), so
//! this module is the policy crate's one exception to the workspace's `unsafe_code =
//! "deny"`, as `mrc::keytable` is the `mrc` crate's. Elsewhere it does nothing.

/// Hints that `*value` will be read soon: starts loading its cache line into all cache
/// levels and returns without waiting. Changes nothing and cannot fault.
#[inline(always)]
#[allow(unsafe_code)] // the workspace denies it; the one measured exception in this crate
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs only SSE, which every x86_64 CPU has (it is in the
    // target's baseline, so the `target_feature` requirement is met); a prefetch neither
    // faults nor changes memory, and `value` is a valid reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// [`prefetch`] of `slice[i]` if it exists (nothing otherwise).
#[inline(always)]
pub fn prefetch_at<T>(slice: &[T], i: usize) {
    if let Some(v) = slice.get(i) {
        prefetch(v);
    }
}
