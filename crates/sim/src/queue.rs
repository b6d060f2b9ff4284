//! Queues in front of devices: where tenants interfere through contention.
//!
//! A [`Station`] is one device with a single server. Requests are reserved in the order
//! the simulator issues them (time order of their arrival at the station, up to the small
//! reordering of requests that reach it by paths of different length): a request arriving
//! at `t` starts at the later of `t` and the time the server frees, so the queue is a FIFO
//! computed by Lindley's recursion without events of its own. Two schedulers:
//!
//! * FIFO: one queue for every tenant.
//! * Time-quanta proportional share (the coordinated-learning paper's enforcement): time
//!   is cut into rounds of `quantum` seconds, and tenant class `c` owns the slice
//!   `[offset_c, offset_c + share_c · quantum)` of every round. Each class has its own
//!   queue that advances only inside its own slices, so a class gets exactly its share of
//!   the device whatever the others do (and not more: the scheduler does not lend idle
//!   slices, which is what makes the proportions enforceable).

use crate::device::Device;

/// How a station orders its requests.
#[derive(Clone, Debug, PartialEq)]
pub enum Scheduler {
    /// First come, first served.
    Fifo,
    /// Time-quanta proportional share among classes.
    Quanta {
        /// Round length in seconds.
        quantum: f64,
        /// Share of each class (summing to 1).
        shares: Vec<f64>,
    },
}

/// A device with its queue.
#[derive(Clone, Debug)]
pub struct Station {
    device: Device,
    scheduler: Scheduler,
    /// FIFO: when the server frees. Quanta: per class, the class-local time its queue frees.
    free: Vec<f64>,
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
            busy: 0.0,
            ops: 0,
        }
    }

    /// Sets the scheduler (proportions from the controller); queues restart from `now`.
    pub fn set_scheduler(&mut self, scheduler: Scheduler, now: f64) {
        let latest = self.free.iter().copied().fold(now, f64::max);
        self.free = match &scheduler {
            Scheduler::Fifo => vec![latest],
            Scheduler::Quanta { shares, quantum } => shares
                .iter()
                .enumerate()
                .map(|(c, &s)| {
                    local_time(latest, offset(shares, c) * quantum, s * quantum, *quantum)
                })
                .collect(),
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
            Scheduler::Fifo => {
                let start = arrival.max(self.free[0]);
                self.free[0] = start + service;
                self.free[0]
            }
            Scheduler::Quanta { quantum, shares } => {
                let c = class.min(shares.len() - 1);
                let (q, len) = (*quantum, shares[c] * quantum);
                if len <= 0.0 {
                    return f64::INFINITY;
                }
                let off = offset(shares, c) * q;
                let start = local_time(arrival, off, len, q).max(self.free[c]);
                self.free[c] = start + service;
                wall_time(self.free[c], off, len, q)
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
    if within == 0.0 && round > 0.0 {
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
        let mut st = Station::new(Device::new(DeviceSpec::ram(), 0));
        st.set_scheduler(
            Scheduler::Quanta {
                quantum: 0.01,
                shares: vec![0.25, 0.75],
            },
            0.0,
        );
        // Both classes saturate the device with 1 ms jobs for one simulated second.
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
