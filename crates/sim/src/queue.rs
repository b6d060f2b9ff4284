//! Queues in front of devices: where tenants interfere through contention.
//!
//! A [`Station`] is one device with a single server. Requests are reserved in the order
//! the simulator issues them (time order of their arrival at the station, up to the small
//! reordering of requests that reach it by paths of different length), and each request's
//! completion is known when it is reserved, so a queue needs no events of its own. Classes
//! are tenant indices. Three schedulers:
//!
//! * FIFO: one queue for every tenant, served in order of arrival. Requests reach a station
//!   out of order when they come by paths of different length (a request that waited
//!   long at a disk reaches the network after one reserved later that did not), so the
//!   station keeps its reserved busy periods and a request takes the earliest idle gap
//!   at or after its arrival that fits its service (for requests that come in order this
//!   is Lindley's recursion: start at the later of arrival and the time the server
//!   frees). Without that, a request would wait behind every reservation made before it,
//!   whatever their times, and one slow queue upstream would pace every tenant alike.
//! * Weighted fair sharing (the default for bandwidth proportions): a fluid approximation
//!   of generalised processor sharing, the ideal that start-time and weighted fair queueing
//!   approximate packet by packet. Each class has its own queue; while a set `B` of classes
//!   is backlogged, class `c` is served at rate `w_c / Σ_{k∈B} w_k` of the device, so a
//!   request of service `s` takes `s / rate` from the later of its arrival and its class's
//!   queue end. A class alone gets the whole device (the scheduler is work-conserving), and
//!   classes that stay backlogged — closed loops whose time is spent at this device — get
//!   throughput in proportion to their weights. The rate is fixed when a request is
//!   reserved, so when a class joins or leaves, the others' requests already reserved keep
//!   their rate: the device is over- or under-booked by at most one reservation per class
//!   at each such change. A weight of 0 counts as a hundredth of the smallest positive one
//!   (no class is starved forever).
//! * Time quanta (the coordinated-learning paper's enforcement, §3.6 and §4.3, with
//!   `sim.quantum`): time is cut into rounds of `quantum` seconds (the paper's period of
//!   100 ms), and class `c` owns the slice `[offset_c, offset_c + share_c · quantum)` of
//!   every round, exclusively. Each class has its own queue that advances only inside its
//!   own slices, served by arrival as a FIFO station is (a request takes the earliest
//!   idle time of its class's slices at or after its arrival that fits it), so a class
//!   gets its share of the device whatever the others do, and not more: idle slices are
//!   not lent.
//!   A request is issued only if it completes within what is left of its class's slice;
//!   otherwise it waits for the class's next slice, and the rest of this one goes unused
//!   (as the paper's scheduler stops issuing when a request would overrun the quantum).
//!   A request longer than a whole slice starts at a slice's beginning and continues in
//!   the class's next slices. Classes may group tenants (a storage server's volumes: the
//!   tenants of one host share their volume's slice), given by a class per tenant.

use crate::calendar::Calendar;
use crate::device::Device;

/// How a station orders its requests.
#[derive(Clone, Debug, PartialEq)]
pub enum Scheduler {
    /// First come, first served.
    Fifo,
    /// Weighted fair sharing (fluid GPS) among classes.
    Weighted {
        /// Weight of each class (tenant index); need not sum to 1.
        weights: Vec<f64>,
    },
    /// Time-quanta proportional share among classes.
    Quanta {
        /// Round length in seconds.
        quantum: f64,
        /// Share of each class (summing to 1).
        shares: Vec<f64>,
        /// The class of each tenant index; empty: tenant `i` is class `i`.
        classes: Vec<usize>,
    },
}

/// A device with its queue.
#[derive(Clone, Debug)]
pub struct Station {
    device: Device,
    scheduler: Scheduler,
    /// FIFO: when the server frees. Weighted: per class, when its queue drains.
    free: Vec<f64>,
    /// FIFO: reserved busy periods, and the booking into them ([`Calendar`]).
    calendar: Calendar,
    /// Quanta: per class, its reserved busy periods in class-local time (the class's
    /// slices laid end to end), so a class serves its requests by arrival as FIFO does.
    slices: Vec<Calendar>,
    /// Quanta: per class, the latest completion reserved for it (wall time).
    class_done: Vec<f64>,
    busy: f64,
    ops: u64,
}

impl Station {
    /// A FIFO station.
    pub fn new(device: Device) -> Self {
        Station {
            device,
            scheduler: Scheduler::Fifo,
            free: vec![0.0],
            calendar: Calendar::default(),
            slices: Vec::new(),
            class_done: Vec::new(),
            busy: 0.0,
            ops: 0,
        }
    }

    /// Sets the scheduler (proportions from the controller); queues restart from `now`.
    pub fn set_scheduler(&mut self, scheduler: Scheduler, now: f64) {
        let was_quanta = matches!(self.scheduler, Scheduler::Quanta { .. });
        let class_done = std::mem::take(&mut self.class_done);
        let latest = self
            .free
            .iter()
            .chain(&class_done)
            .copied()
            .fold(now, f64::max);
        self.calendar.clear();
        self.slices.clear();
        self.free = match &scheduler {
            Scheduler::Fifo => {
                self.calendar.reset_to(now.max(0.0), latest);
                vec![latest]
            }
            Scheduler::Weighted { weights } => {
                // Work already reserved keeps its place: each class's queue continues.
                let mut f: Vec<f64> = vec![now; weights.len().max(1)];
                if matches!(self.scheduler, Scheduler::Weighted { .. }) {
                    for (k, x) in f.iter_mut().enumerate() {
                        *x = self.free.get(k).copied().unwrap_or(now).max(now);
                    }
                } else {
                    f.iter_mut().for_each(|x| *x = latest);
                }
                f
            }
            Scheduler::Quanta {
                shares, quantum, ..
            } => {
                // What a class had reserved stays ahead of its new requests (from time
                // quanta with the same classes; after another scheduler, everything
                // reserved finishes first); the other classes do not wait for it.
                let same = was_quanta && class_done.len() == shares.len();
                for (c, &x) in shares.iter().enumerate() {
                    let (off, len) = (offset(shares, c) * quantum, x * quantum);
                    let ahead = if same { class_done[c] } else { latest };
                    let mut cal = Calendar::default();
                    if len > 0.0 && ahead > now {
                        cal.reset_to(
                            local_time(now, off, len, *quantum),
                            local_time(ahead, off, len, *quantum),
                        );
                    }
                    self.slices.push(cal);
                    self.class_done.push(ahead.max(now));
                }
                Vec::new()
            }
        };
        let scheduler = match scheduler {
            Scheduler::Weighted { weights } => Scheduler::Weighted {
                weights: floor_weights(weights),
            },
            s => s,
        };
        self.scheduler = scheduler;
    }

    /// The current scheduler.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// Serves a request of `class` arriving at `arrival`; returns its completion time.
    pub fn serve(
        &mut self,
        class: usize,
        arrival: f64,
        offset_bytes: u64,
        len: u64,
        write: bool,
    ) -> f64 {
        let service = self.device.service(offset_bytes, len, write);
        self.reserve(class, arrival, service)
    }

    /// Reserves `service` seconds for `class` arriving at `arrival`; returns the completion.
    pub fn reserve(&mut self, class: usize, arrival: f64, service: f64) -> f64 {
        self.busy += service;
        self.ops += 1;
        match &self.scheduler {
            Scheduler::Fifo => self.fifo(arrival, service),
            Scheduler::Weighted { weights } => {
                let c = class.min(weights.len() - 1);
                let backlogged: f64 = weights
                    .iter()
                    .zip(&self.free)
                    .enumerate()
                    .filter(|&(k, (_, &f))| k == c || f > arrival)
                    .map(|(_, (&w, _))| w)
                    .sum();
                let rate = weights[c] / backlogged;
                let start = arrival.max(self.free[c]);
                self.free[c] = start + service / rate;
                self.free[c]
            }
            Scheduler::Quanta {
                quantum,
                shares,
                classes,
            } => {
                let c = classes
                    .get(class)
                    .copied()
                    .unwrap_or(class)
                    .min(shares.len() - 1);
                let (q, len) = (*quantum, shares[c] * quantum);
                if len <= 0.0 {
                    return f64::INFINITY;
                }
                let off = offset(shares, c) * q;
                // Issued only if it completes within what is left of the slice (one
                // longer than a slice starts at a slice's beginning).
                let fits = |t: f64| {
                    let within = t - (t / len).floor() * len;
                    // At a slice's boundary (up to rounding) a request may start.
                    let at_boundary = within <= len * 1e-9 || within >= len * (1.0 - 1e-9);
                    if !at_boundary && within + service > len * (1.0 + 1e-9) {
                        t + len - within
                    } else {
                        t
                    }
                };
                let local = local_time(arrival.max(0.0), off, len, q);
                let (done, _) = self.slices[c].book_aligned(local, service, fits);
                let t = wall_time(done, off, len, q);
                self.class_done[c] = self.class_done[c].max(t);
                t
            }
        }
    }

    /// FIFO by arrival: the earliest idle gap at or after `arrival` that fits `service`.
    fn fifo(&mut self, arrival: f64, service: f64) -> f64 {
        let (done, period_end) = self.calendar.book(arrival.max(0.0), service);
        self.free[0] = self.free[0].max(period_end);
        done
    }

    /// Drops the busy periods that ended before `now` (keeping the last one). The engine
    /// calls it with its clock every so many events: every arrival it books from then on
    /// is at or after the event being served, and a period that ended before that can no
    /// longer delay anyone. So the calendar holds only what is still ahead, and forgetting
    /// changes no result (a window behind each arrival did: a request held seconds at a
    /// busy disk arrives at the link after later requests, which then found the link's
    /// earlier periods forgotten).
    pub fn forget_before(&mut self, now: f64) {
        self.calendar.forget_before(now);
        if let Scheduler::Quanta {
            quantum, shares, ..
        } = &self.scheduler
        {
            for (c, cal) in self.slices.iter_mut().enumerate() {
                let len = shares[c] * quantum;
                if len > 0.0 {
                    cal.forget_before(local_time(now, offset(shares, c) * quantum, len, *quantum));
                }
            }
        }
    }

    /// Seconds of service reserved so far.
    pub fn busy(&self) -> f64 {
        self.busy
    }

    /// Operations served so far.
    pub fn ops(&self) -> u64 {
        self.ops
    }
}

/// Non-finite or non-positive weights become a hundredth of the smallest positive one.
fn floor_weights(mut w: Vec<f64>) -> Vec<f64> {
    let least = w
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x > 0.0)
        .fold(f64::INFINITY, f64::min);
    let least = if least.is_finite() { least } else { 1.0 };
    for x in &mut w {
        if !(x.is_finite() && *x > 0.0) {
            *x = least / 100.0;
        }
    }
    if w.is_empty() {
        w.push(1.0);
    }
    w
}

fn offset(shares: &[f64], c: usize) -> f64 {
    shares[..c].iter().sum()
}

/// Class-local time at wall time `t` for a slice `[off, off + len)` of every round `q`.
fn local_time(t: f64, off: f64, len: f64, q: f64) -> f64 {
    let round = (t / q).floor();
    let within = (t - round * q - off).clamp(0.0, len);
    round * len + within
}

/// Wall time at which class-local time `l` is reached (the inverse of [`local_time`]);
/// the end of a slice maps to the slice's end, not the next round's start.
fn wall_time(l: f64, off: f64, len: f64, q: f64) -> f64 {
    let mut round = (l / len).floor();
    let mut within = l - round * len;
    if within <= len * 1e-9 && round > 0.0 {
        round -= 1.0;
        within = len;
    }
    round * q + off + within
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceSpec;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp};

    /// A RAM station whose scheduler is time quanta of `quantum` s with `shares`
    /// (`classes`: the class of each tenant, empty for one class each), from time 0.
    fn ram_in_quanta(quantum: f64, shares: &[f64], classes: Vec<usize>) -> Station {
        let mut st = Station::new(Device::new(DeviceSpec::ram(), 0));
        st.set_scheduler(
            Scheduler::Quanta {
                quantum,
                shares: shares.to_vec(),
                classes,
            },
            0.0,
        );
        st
    }

    #[test]
    fn mm1_mean_response_matches_one_over_mu_minus_lambda() {
        let (lambda, mu) = (600.0, 1000.0);
        let mut st = Station::new(Device::new(DeviceSpec::ram(), 0));
        let mut rng = StdRng::seed_from_u64(11);
        let (arr, svc) = (Exp::new(lambda).unwrap(), Exp::new(mu).unwrap());
        let (mut t, mut total) = (0.0, 0.0);
        let n = 2_000_000;
        for _ in 0..n {
            t += arr.sample(&mut rng);
            let done = st.reserve(0, t, svc.sample(&mut rng));
            total += done - t;
        }
        let mean = total / n as f64;
        let expect = 1.0 / (mu - lambda);
        assert!(
            (mean / expect - 1.0).abs() < 0.03,
            "mean {mean} expected {expect}"
        );
    }

    #[test]
    fn quanta_give_each_class_its_share_whatever_the_other_does() {
        let mut st = ram_in_quanta(0.004, &[0.25, 0.75], Vec::new());
        // Both classes saturate the device with 1 ms jobs for one simulated second (one
        // fits each 1 ms slice of class 0, three each 3 ms slice of class 1).
        let (mut done0, mut done1) = (0u32, 0u32);
        for _ in 0..2000 {
            if st.reserve(0, 0.0, 0.001) <= 1.0 {
                done0 += 1;
            }
            if st.reserve(1, 0.0, 0.001) <= 1.0 {
                done1 += 1;
            }
        }
        assert!((done0 as i32 - 250).abs() <= 1, "{done0}");
        assert!((done1 as i32 - 750).abs() <= 1, "{done1}");
    }

    #[test]
    fn a_request_that_would_overrun_its_slice_waits_for_the_next() {
        // Slices of 5 ms in rounds of 10 ms; jobs of 2 ms: two fit in a slice, the third
        // would overrun it and starts at the next slice (1 ms of each slice goes unused).
        let mut st = ram_in_quanta(0.01, &[0.5, 0.5], Vec::new());
        let ends: Vec<f64> = (0..5).map(|_| st.reserve(0, 0.0, 0.002)).collect();
        for (e, want) in ends.iter().zip([0.002, 0.004, 0.012, 0.014, 0.022]) {
            assert!((e - want).abs() < 1e-12, "{ends:?}");
        }
        // Class 1's slice is [5, 10) ms of every round.
        assert!((st.reserve(1, 0.0, 0.002) - 0.007).abs() < 1e-12);
        // A job longer than a whole slice starts at a slice's beginning and goes on in
        // the class's next slice: 7 ms arriving at 11 ms waits for the slice at 20 ms,
        // runs 20-25 ms and 30-32 ms (class 0 owns [0, 5) ms of every 10 ms).
        let mut st = ram_in_quanta(0.01, &[0.5, 0.5], Vec::new());
        assert!((st.reserve(0, 0.011, 0.007) - 0.032).abs() < 1e-12);
        // Saturated with 2 ms jobs for a second: 200 done, not the 250 a split would give.
        let mut st = ram_in_quanta(0.01, &[0.5, 0.5], Vec::new());
        let done = (0..400)
            .filter(|_| st.reserve(0, 0.0, 0.002) <= 1.0)
            .count();
        assert_eq!(done, 200);
    }

    #[test]
    fn tenants_of_one_volume_share_its_slice() {
        // Tenants 0 and 1 are one volume (class 0, half the time); tenant 2 is the other.
        let mut st = ram_in_quanta(0.01, &[0.5, 0.5], vec![0, 0, 1]);
        let mut done = [0u32; 3];
        for _ in 0..1000 {
            for (t, d) in done.iter_mut().enumerate() {
                if st.reserve(t, 0.0, 0.001) <= 1.0 + 1e-9 {
                    *d += 1;
                }
            }
        }
        // The volume's 500 ms are shared in the order its requests came (alternating).
        assert_eq!(done, [250, 250, 500]);
        // By arrival, not by reservation: one reserved first that arrives at 22 ms runs
        // 22-24 ms; one reserved after it that arrives at 1 ms still runs 1-3 ms.
        let mut st = ram_in_quanta(0.01, &[0.5, 0.5], Vec::new());
        assert!((st.reserve(0, 0.022, 0.002) - 0.024).abs() < 1e-12);
        assert!((st.reserve(0, 0.001, 0.002) - 0.003).abs() < 1e-12);
        // One arriving at 21.5 ms fits neither before the booked 22-24 ms nor in the
        // slice's last millisecond after it: it runs at the next slice, 30-32 ms.
        assert!((st.reserve(0, 0.0215, 0.002) - 0.032).abs() < 1e-12);
    }

    /// Closed loops of `depth` requests per class on one HDD for `secs` simulated seconds;
    /// returns each class's completions.
    fn closed_loops(sched: Scheduler, classes: usize, depth: usize, secs: f64) -> Vec<u64> {
        use rand::Rng;
        let mut st = Station::new(Device::new(DeviceSpec::hdd(), 3));
        st.set_scheduler(sched, 0.0);
        let mut rng = StdRng::seed_from_u64(5);
        let mut next: Vec<(f64, usize)> = (0..classes)
            .flat_map(|c| (0..depth).map(move |_| (0.0, c)))
            .collect();
        let mut done = vec![0u64; classes];
        loop {
            // The earliest issue first (ties by class), as the engine's heap does.
            let k = (0..next.len())
                .min_by(|&a, &b| next[a].partial_cmp(&next[b]).unwrap())
                .unwrap();
            let (t, c) = next[k];
            if t >= secs {
                break;
            }
            let off = rng.gen_range(0..(1u64 << 28)) * 4096;
            let end = st.serve(c, t, off, 4096, false);
            if end <= secs {
                done[c] += 1;
            }
            next[k] = (end, c);
        }
        done
    }

    #[test]
    fn weighted_sharing_gives_closed_loops_throughput_in_proportion() {
        let w = Scheduler::Weighted {
            weights: vec![3.0, 1.0],
        };
        let d = closed_loops(w, 2, 4, 120.0);
        let ratio = d[0] as f64 / d[1] as f64;
        assert!((ratio / 3.0 - 1.0).abs() < 0.05, "{d:?} ratio {ratio}");
        // Work-conserving: together they get what the disk gives one class alone.
        let alone = closed_loops(Scheduler::Fifo, 1, 4, 120.0)[0];
        let both = (d[0] + d[1]) as f64;
        assert!(
            (both / alone as f64 - 1.0).abs() < 0.05,
            "{both} vs {alone}"
        );
        // Depth 1 too: each class is backlogged at the disk almost all the time.
        let w = Scheduler::Weighted {
            weights: vec![3.0, 1.0],
        };
        let d1 = closed_loops(w, 2, 1, 120.0);
        let r1 = d1[0] as f64 / d1[1] as f64;
        assert!((r1 / 3.0 - 1.0).abs() < 0.05, "{d1:?} ratio {r1}");
    }

    #[test]
    fn a_class_alone_gets_the_whole_device_under_weights() {
        let w = Scheduler::Weighted {
            weights: vec![1.0, 9.0],
        };
        let mut st = Station::new(Device::new(DeviceSpec::ram(), 0));
        st.set_scheduler(w, 0.0);
        // Class 0 alone: 1 ms jobs back to back finish at 1 ms intervals, not 10 ms.
        let mut end = 0.0;
        for _ in 0..100 {
            end = st.reserve(0, 0.0, 0.001);
        }
        assert!((end - 0.1).abs() < 1e-9, "{end}");
        // Class 1 arrives while class 0 is backlogged: it gets 90 % of the device.
        let e1 = st.reserve(1, 0.05, 0.009);
        assert!((e1 - 0.06).abs() < 1e-9, "{e1}");
        // A zero weight is floored, never infinite.
        st.set_scheduler(
            Scheduler::Weighted {
                weights: vec![0.0, 1.0],
            },
            1.0,
        );
        assert!(st.reserve(0, 1.0, 0.001).is_finite());
    }

    #[test]
    fn fifo_serves_by_arrival_when_reservations_come_out_of_order() {
        let mut st = Station::new(Device::new(DeviceSpec::ram(), 0));
        // Reserved first, arriving late: served at 1.0.
        assert!((st.reserve(0, 1.0, 0.001) - 1.001).abs() < 1e-12);
        // Reserved later, arriving earlier: it takes the idle time before, not 1.001.
        assert!((st.reserve(0, 0.5, 0.001) - 0.501).abs() < 1e-12);
        // One that would overlap the busy period at 1.0 waits for its end.
        assert!((st.reserve(0, 0.9995, 0.001) - 1.002).abs() < 1e-12);
        // In order, it is Lindley's recursion: back to back from the last end.
        assert!((st.reserve(0, 1.0015, 0.001) - 1.003).abs() < 1e-12);
    }

    #[test]
    fn forgetting_what_ended_before_the_clock_changes_no_completion() {
        // Events at a rising clock book arrivals at or after it, some far ahead (a
        // request held seconds at a disk reaches the link after later ones). A station
        // that forgets what ended before the clock serves each one as a station that
        // never forgets; the calendar stays short.
        let mut rng = StdRng::seed_from_u64(7);
        let service = Exp::new(2000.0).unwrap();
        let delay = Exp::new(0.5).unwrap();
        let mut forgets = Station::new(Device::new(DeviceSpec::ram(), 0));
        let mut keeps = forgets.clone();
        let mut now = 0.0;
        let mut longest = 0;
        for k in 0..200_000 {
            now += service.sample(&mut rng) * 0.9;
            let arrival = if k % 5 == 0 {
                now + delay.sample(&mut rng)
            } else {
                now
            };
            let s = service.sample(&mut rng);
            assert_eq!(forgets.reserve(0, arrival, s), keeps.reserve(0, arrival, s));
            if k % 64 == 0 {
                forgets.forget_before(now);
            }
            longest = longest.max(forgets.calendar.len());
        }
        assert!(keeps.calendar.len() > 5_000, "{}", keeps.calendar.len());
        assert!(longest < keeps.calendar.len() / 4, "{longest}");
    }

    #[test]
    fn local_and_wall_time_invert() {
        // Slice [2.5 ms, 7.5 ms) of every 10 ms round.
        for &l in &[0.0, 0.001, 0.005, 0.0123, 0.5] {
            let w = wall_time(l, 0.0025, 0.005, 0.01);
            assert!(
                (local_time(w, 0.0025, 0.005, 0.01) - l).abs() < 1e-12,
                "{l} {w}"
            );
        }
        // Inside a slice the two are inverse; outside, time waits for the next slice.
        let t = 0.0131;
        let back = wall_time(local_time(t, 0.0025, 0.005, 0.01), 0.0025, 0.005, 0.01);
        assert!((back - t).abs() < 1e-12);
        assert!(
            (wall_time(local_time(0.009, 0.0025, 0.005, 0.01), 0.0025, 0.005, 0.01) - 0.0075).abs()
                < 1e-12
        );
    }
}
