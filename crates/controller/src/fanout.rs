//! One blocking call per node on a bounded number of threads: the controller polls and
//! reconciles its nodes concurrently, so an interval takes about the slowest node's answer
//! (each call bounded by its client's timeout) rather than the sum of all of them, and
//! a thousand nodes do not mean a thousand threads. Scoped threads pulling the next item
//! from a shared counter; written here because it is a dozen lines over `std::thread::scope`
//! and the calls are blocking HTTP (`ureq`), which an async runtime would only wrap.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Most node calls the controller has in flight at once.
pub const MAX_CONCURRENT_NODE_CALLS: usize = 64;

/// `f` of every item, at most `limit` at a time, results in the items' order.
pub fn map_bounded<T: Sync, R: Send>(
    items: &[T],
    limit: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let workers = limit.max(1).min(items.len());
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else {
                    break;
                };
                let r = f(item);
                out.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
            });
        }
    });
    out.into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.expect("every item was taken by a worker that finished"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn keeps_order_and_the_bound_and_overlaps_slow_calls() {
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let items: Vec<u64> = (0..40).collect();
        let t0 = Instant::now();
        let got = map_bounded(&items, 8, |&x| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            running.fetch_sub(1, Ordering::SeqCst);
            x * 2
        });
        assert_eq!(got, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        assert!(most.load(Ordering::SeqCst) <= 8);
        // 40 calls of 20 ms, 8 at a time: about 100 ms, far below the 800 ms of one by one.
        assert!(
            t0.elapsed() < Duration::from_millis(600),
            "{:?}",
            t0.elapsed()
        );
        assert!(map_bounded(&Vec::<u8>::new(), 4, |_| 1).is_empty());
    }
}
