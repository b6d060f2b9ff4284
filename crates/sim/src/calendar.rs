//! A FIFO station's calendar: its reserved busy periods, and the booking of a request into
//! the earliest idle gap at or after its arrival that fits its service
//! ([`crate::queue::Station`] owns one per FIFO device).
//!
//! Periods `(start, end)` are sorted, disjoint, and adjacent ones are merged. Nearly every
//! booking extends or follows the last period, so the periods sit in a flat vector whose
//! end is its tail (no ring's index arithmetic on the common path). The vector's front is
//! a window: periods that ended before the engine's clock are forgotten by moving the
//! window's start, not by moving the periods, and the space they leave takes bookings
//! that land near the front. Those come when the calendar is long: on an overloaded
//! server, data returning from disks is booked on the link up to minutes ahead, one
//! period per request, while a demotion at the current time lands before all of them. A
//! plain vector moved the whole calendar for each such booking (92 % of the run on an
//! open-loop scenario whose disks could not keep up); here a booking moves the shorter
//! side of the calendar, and the front side is short.

/// Reserved busy periods of one FIFO server (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Calendar {
    /// The periods are `buf[head..]`; `buf[..head]` is room left by forgotten periods.
    buf: Vec<(f64, f64)>,
    head: usize,
    /// At most the end of the first period, so that the periodic
    /// [`Calendar::forget_before`] reads the calendar's front (a cold cache line) only
    /// when a period may have ended.
    front_end: f64,
}

impl Default for Calendar {
    fn default() -> Self {
        Calendar {
            buf: Vec::new(),
            head: 0,
            front_end: f64::NEG_INFINITY,
        }
    }
}

impl Calendar {
    /// The periods held.
    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.head
    }

    /// Forgets every period.
    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.head = 0;
        self.front_end = f64::NEG_INFINITY;
    }

    /// Forgets every period, then holds only `(start, end)`.
    pub(crate) fn reset_to(&mut self, start: f64, end: f64) {
        self.clear();
        self.buf.push((start, end));
    }

    /// Books `service` seconds for a request arriving at `arrival` (at least 0) in the
    /// earliest idle gap at or after it that fits; returns the request's completion and
    /// the end of the busy period that now holds it.
    pub(crate) fn book(&mut self, arrival: f64, service: f64) -> (f64, f64) {
        self.book_aligned(arrival, service, |t| t)
    }

    /// Books `service` seconds at the earliest start `t` at or after `arrival` that is
    /// its own `align(t)` (a start a slice of time allows: `align` returns the earliest
    /// allowed start at or after its argument, and is the identity on allowed starts) and
    /// whose `[t, t + service)` is idle; returns the completion and the end of the busy
    /// period that now holds it.
    pub(crate) fn book_aligned(
        &mut self,
        arrival: f64,
        service: f64,
        align: impl Fn(f64) -> f64,
    ) -> (f64, f64) {
        // In order (the common case): no gap can open before the last busy period, so the
        // request starts at the later of its arrival and that period's end. The last
        // element of `buf` is the last period: the window never leaves `buf` empty of
        // periods once it holds one (forgetting keeps the last).
        match self.buf.last_mut() {
            Some(last) if last.0 <= arrival => {
                let start = align(arrival.max(last.1));
                let end = if start <= last.1 {
                    last.1 += service;
                    last.1
                } else {
                    self.buf.push((start, start + service));
                    start + service
                };
                return (end, end);
            }
            None => {
                self.front_end = f64::NEG_INFINITY;
                let start = align(arrival);
                self.buf.push((start, start + service));
                return (start + service, start + service);
            }
            Some(_) => {}
        }
        // Out of order: start after the period under way at `arrival`, then skip every
        // later period until a gap fits.
        let cal = &self.buf[self.head..];
        let first_after = first_starting_after(cal, arrival);
        let mut at = arrival;
        if first_after > 0 {
            at = at.max(cal[first_after - 1].1);
        }
        at = align(at);
        for &(s, end) in &cal[first_after..] {
            if s - at >= service {
                break;
            }
            at = align(at.max(end));
        }
        let (mut start, mut end) = (at, at + service);
        // Merge with the period ending at `start` and the one starting at `end`. Every
        // period before `first_after` starts at or before `arrival <= start`, so the first
        // one starting after `start` is found by walking on from there over the periods
        // the gap search just skipped.
        let mut k = first_after;
        while k < cal.len() && cal[k].0 <= start {
            k += 1;
        }
        let merge_before = k > 0 && cal[k - 1].1 >= start;
        if merge_before {
            start = cal[k - 1].0;
            end = end.max(cal[k - 1].1);
        }
        let merge_after = k < cal.len() && cal[k].0 <= end;
        if merge_after {
            end = end.max(cal[k].1);
        }
        let h = self.head;
        match (merge_before, merge_after) {
            (true, true) => {
                self.buf[h + k - 1] = (start, end);
                self.remove(k);
            }
            (true, false) => self.buf[h + k - 1] = (start, end),
            (false, true) => self.buf[h + k] = (start, end),
            (false, false) => {
                if k == 0 {
                    self.front_end = self.front_end.min(end);
                }
                self.insert(k, (start, end));
            }
        }
        (at + service, end)
    }

    /// Drops the busy periods that ended before `now`, keeping the last one (see
    /// [`crate::queue::Station::forget_before`]).
    pub(crate) fn forget_before(&mut self, now: f64) {
        if self.front_end >= now {
            return;
        }
        let cal = &self.buf[self.head..];
        let ended = cal.len().saturating_sub(1);
        self.head += cal[..ended].partition_point(|p| p.1 < now);
        // Keep at most as much room in front as there are periods, so memory stays within
        // twice the periods held (moving the few periods of a calendar that keeps up).
        if self.head > self.len() {
            self.buf.drain(..self.head);
            self.head = 0;
        }
        self.front_end = self.buf.get(self.head).map_or(f64::NEG_INFINITY, |p| p.1);
    }

    /// Inserts `p` as the `k`th period, moving the shorter side of the calendar.
    fn insert(&mut self, k: usize, p: (f64, f64)) {
        if k < self.len() / 2 {
            if self.head == 0 {
                // Room for this and the next bookings near the front: half the periods
                // held, so the move is paid back over as many front bookings.
                let room = (self.len() / 2).max(16);
                self.buf
                    .splice(0..0, std::iter::repeat((f64::NAN, f64::NAN)).take(room));
                self.head = room;
            }
            let h = self.head;
            self.buf.copy_within(h..h + k, h - 1);
            self.head = h - 1;
            self.buf[h - 1 + k] = p;
        } else {
            self.buf.insert(self.head + k, p);
        }
    }

    /// Removes the `k`th period, moving the shorter side of the calendar.
    fn remove(&mut self, k: usize) {
        let h = self.head;
        if k < self.len() / 2 {
            self.buf.copy_within(h..h + k, h + 1);
            self.head = h + 1;
        } else {
            self.buf.remove(h + k);
        }
    }

    #[cfg(test)]
    fn periods(&self) -> &[(f64, f64)] {
        &self.buf[self.head..]
    }
}

/// The index of the first busy period starting after `t` (`partition_point(|p| p.0 <= t)`),
/// found by galloping back from the end: out-of-order arrivals land near the end of the
/// calendar, so this reads a few periods there instead of binary-searching the whole
/// calendar (thousands of periods on a busy link, each probe a cache miss).
fn first_starting_after(cal: &[(f64, f64)], t: f64) -> usize {
    let mut hi = cal.len();
    let mut step = 1;
    let mut lo = 0;
    while step <= hi {
        let probe = hi - step;
        if cal[probe].0 > t {
            hi = probe;
            step *= 2;
        } else {
            lo = probe + 1;
            break;
        }
    }
    // Periods before `lo` start at or before `t`, those from `hi` on after it.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if cal[mid].0 <= t {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The plain reference: every period in one sorted vector, the gap search and merges
    /// done by scanning it whole.
    fn reference_book(cal: &mut Vec<(f64, f64)>, arrival: f64, service: f64) -> (f64, f64) {
        let mut at = arrival;
        for &(s, e) in cal.iter() {
            if e <= at {
                continue;
            }
            if s - at >= service {
                break;
            }
            at = at.max(e);
        }
        let (mut start, mut end) = (at, at + service);
        cal.retain(|&(s, e)| {
            if e >= start && s <= end {
                start = start.min(s);
                end = end.max(e);
                false
            } else {
                true
            }
        });
        let k = cal.partition_point(|p| p.0 < start);
        cal.insert(k, (start, end));
        (at + service, end)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Bookings in any order, some far ahead (data coming back from an overloaded
        /// disk) and many at the clock (demotions), with forgetting as the engine does it:
        /// the calendar gives each request the completion a plain sorted list gives, its
        /// periods stay sorted and disjoint, and its memory stays within twice its periods
        /// plus the room of one front move.
        #[test]
        fn books_as_a_plain_sorted_list_does(
            ops in proptest::collection::vec((0u8..4, 0.0f64..50.0, 0.001f64..0.5), 1..400)
        ) {
            let mut cal = Calendar::default();
            let mut plain: Vec<(f64, f64)> = Vec::new();
            let mut now = 0.0;
            for (i, &(kind, ahead, service)) in ops.iter().enumerate() {
                now += service / 3.0;
                let arrival = if kind == 0 { now + ahead } else { now };
                let got = cal.book(arrival, service);
                let want = reference_book(&mut plain, arrival, service);
                prop_assert_eq!(got, want);
                if i % 7 == 0 {
                    cal.forget_before(now);
                }
                let p = cal.periods();
                prop_assert!(p.windows(2).all(|w| w[0].1 < w[1].0), "{:?}", p);
                // What the calendar holds is the plain list's tail.
                prop_assert_eq!(p, &plain[plain.len() - p.len()..]);
                prop_assert!(cal.buf.len() <= 2 * p.len() + 16 + p.len() / 2);
            }
        }
    }

    #[test]
    fn bookings_at_the_front_of_a_long_calendar_move_little() {
        // 200,000 periods booked far ahead, then 200,000 bookings at a rising clock, which
        // all land at the front, forgotten as the engine forgets them: each moves the
        // front side only, the few periods still under way there.
        let mut cal = Calendar::default();
        for k in 0..200_000 {
            cal.book(1000.0 + k as f64, 0.5);
        }
        let started = std::time::Instant::now();
        for k in 0..200_000 {
            let now = k as f64 * 0.001;
            let (done, _) = cal.book(now, 0.0001);
            assert_eq!(done, now + 0.0001);
            if k % 64 == 0 {
                cal.forget_before(now);
            }
        }
        assert!(cal.len() <= 200_000 + 64, "{}", cal.len());
        assert!(cal.buf.len() < 2 * cal.len(), "{}", cal.buf.len());
        // A plain vector moves 3 MB per booking here: minutes, not this.
        assert!(
            started.elapsed().as_secs_f64() < 5.0,
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn galloping_search_matches_partition_point() {
        let cal: Vec<(f64, f64)> = (0..300).map(|k| (k as f64, k as f64 + 0.5)).collect();
        for len in [0, 1, 2, 3, 7, 64, 300] {
            let c = &cal[..len];
            for x in 0..700 {
                let t = x as f64 / 2.0 - 1.25;
                assert_eq!(
                    first_starting_after(c, t),
                    c.partition_point(|p| p.0 <= t),
                    "len {len} t {t}"
                );
            }
        }
    }
}
