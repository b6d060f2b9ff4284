//! Device service-time models: memory, network, SSD and HDD.
//!
//! A device answers one question: how long does it take to serve `len` bytes at `offset`
//! once the request reaches the head of its queue ([`Device::service`]); queueing is the
//! [`crate::queue::Station`]'s. Times are seconds.
//!
//! * RAM and network: a fixed latency plus the bytes over the bandwidth.
//! * SSD: a fixed access latency per operation (reads and writes differ) plus transfer.
//! * HDD: seek + rotation + transfer. The seek time grows with the square root of the
//!   distance the head travels (the arm accelerates then coasts), with a settle time:
//!   `seek(f) = avg · (0.2 + 0.8 · sqrt(f) / (8/15))` for a move over a fraction `f` of the
//!   disk, so a uniformly random move (mean `sqrt(f)` of 8/15) averages `avg`. Rotational
//!   delay is uniform over one revolution (mean half a revolution) from a seeded generator.
//!   A request that starts where the previous one ended costs neither seek nor rotation,
//!   so sequential runs stream at the transfer rate.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// Mean of `sqrt(|U - V|)` for independent uniform `U`, `V` on `[0, 1]`.
const MEAN_SQRT_DISTANCE: f64 = 8.0 / 15.0;

/// A device's parameters (scenario files use this form).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum DeviceSpec {
    /// Memory.
    Ram {
        /// Access latency in microseconds.
        #[serde(default = "ram_us")]
        latency_us: f64,
        /// Bandwidth in MB/s (10^6 bytes).
        #[serde(default = "ram_mbps")]
        mbps: f64,
    },
    /// A network link.
    Net {
        /// One-way latency in microseconds.
        #[serde(default = "net_us")]
        latency_us: f64,
        /// Bandwidth in MB/s.
        #[serde(default = "net_mbps")]
        mbps: f64,
    },
    /// A flash drive.
    Ssd {
        /// Read latency in microseconds.
        #[serde(default = "ssd_read_us")]
        read_us: f64,
        /// Write latency in microseconds.
        #[serde(default = "ssd_write_us")]
        write_us: f64,
        /// Bandwidth in MB/s.
        #[serde(default = "ssd_mbps")]
        mbps: f64,
    },
    /// A spinning disk.
    Hdd {
        /// Rotation speed.
        #[serde(default = "hdd_rpm")]
        rpm: f64,
        /// Mean seek time of a random move, in milliseconds.
        #[serde(default = "hdd_seek_ms")]
        seek_ms: f64,
        /// Media transfer rate in MB/s.
        #[serde(default = "hdd_mbps")]
        mbps: f64,
        /// Addressable bytes (the span seeks are measured against).
        #[serde(default = "hdd_bytes")]
        bytes: u64,
    },
}

fn ram_us() -> f64 {
    1.0
}
fn ram_mbps() -> f64 {
    10_000.0
}
fn net_us() -> f64 {
    50.0
}
fn net_mbps() -> f64 {
    1_250.0
}
fn ssd_read_us() -> f64 {
    90.0
}
fn ssd_write_us() -> f64 {
    30.0
}
fn ssd_mbps() -> f64 {
    500.0
}
fn hdd_rpm() -> f64 {
    10_045.0
}
fn hdd_seek_ms() -> f64 {
    5.0
}
fn hdd_mbps() -> f64 {
    120.0
}
fn hdd_bytes() -> u64 {
    1 << 40
}

impl DeviceSpec {
    /// Default RAM.
    pub fn ram() -> Self {
        DeviceSpec::Ram {
            latency_us: ram_us(),
            mbps: ram_mbps(),
        }
    }
    /// Default 10 Gb/s network.
    pub fn net() -> Self {
        DeviceSpec::Net {
            latency_us: net_us(),
            mbps: net_mbps(),
        }
    }
    /// Default SSD.
    pub fn ssd() -> Self {
        DeviceSpec::Ssd {
            read_us: ssd_read_us(),
            write_us: ssd_write_us(),
            mbps: ssd_mbps(),
        }
    }
    /// Default HDD: 10,045 RPM, 5 ms average seek.
    pub fn hdd() -> Self {
        DeviceSpec::Hdd {
            rpm: hdd_rpm(),
            seek_ms: hdd_seek_ms(),
            mbps: hdd_mbps(),
            bytes: hdd_bytes(),
        }
    }

    /// Checks the numbers; the error names the field.
    pub fn check(&self) -> Result<(), DeviceError> {
        let pos = |value: f64, field: &'static str| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(DeviceError::NotPositive { field, value })
            }
        };
        match *self {
            DeviceSpec::Ram { latency_us, mbps } | DeviceSpec::Net { latency_us, mbps } => {
                pos(latency_us, "latency_us")?;
                pos(mbps, "mbps")
            }
            DeviceSpec::Ssd {
                read_us,
                write_us,
                mbps,
            } => {
                pos(read_us, "read_us")?;
                pos(write_us, "write_us")?;
                pos(mbps, "mbps")
            }
            DeviceSpec::Hdd {
                rpm,
                seek_ms,
                mbps,
                bytes,
            } => {
                pos(rpm, "rpm")?;
                pos(seek_ms, "seek_ms")?;
                pos(mbps, "mbps")?;
                if bytes == 0 {
                    return Err(DeviceError::ZeroBytes);
                }
                Ok(())
            }
        }
    }

    /// Expected service time (seconds) of a random `len`-byte read, for the controller's
    /// prior before anything is observed.
    pub fn expected(&self, len: u64) -> f64 {
        let b = len as f64;
        match *self {
            DeviceSpec::Ram { latency_us, mbps } | DeviceSpec::Net { latency_us, mbps } => {
                latency_us * 1e-6 + b / (mbps * 1e6)
            }
            DeviceSpec::Ssd { read_us, mbps, .. } => read_us * 1e-6 + b / (mbps * 1e6),
            DeviceSpec::Hdd {
                rpm, seek_ms, mbps, ..
            } => seek_ms * 1e-3 + 30.0 / rpm + b / (mbps * 1e6),
        }
    }
}

/// A device's numbers that make no sense ([`DeviceSpec::check`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DeviceError {
    /// A rate, latency or speed that is not a positive number.
    #[error("{field} = {value} must be above 0")]
    NotPositive {
        /// The field.
        field: &'static str,
        /// Its value.
        value: f64,
    },
    /// A disk of no bytes.
    #[error("bytes must be above 0")]
    ZeroBytes,
}

/// A device with its state (head position, rotation generator).
#[derive(Clone, Debug)]
pub struct Device {
    spec: DeviceSpec,
    head: u64,
    rng: StdRng,
    /// RAM, network and SSD: the last `(len, write, service time)` computed (a fixed cost
    /// plus a transfer, the same for the same length and kind), so the common 4 KiB
    /// transfers skip the division.
    last: (u64, bool, f64),
}

impl Device {
    /// A device; `seed` drives the HDD's rotational delays.
    pub fn new(spec: DeviceSpec, seed: u64) -> Self {
        Device {
            spec,
            head: u64::MAX,
            rng: StdRng::seed_from_u64(seed),
            last: (u64::MAX, false, 0.0),
        }
    }

    /// The device's parameters.
    pub fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    /// Seconds to serve `len` bytes at byte `offset` (a write if `write`), and move the head.
    #[inline]
    pub fn service(&mut self, offset: u64, len: u64, write: bool) -> f64 {
        let b = len as f64;
        match self.spec {
            DeviceSpec::Ram { latency_us, mbps } | DeviceSpec::Net { latency_us, mbps } => {
                if self.last.0 != len {
                    self.last = (len, false, latency_us * 1e-6 + b / (mbps * 1e6));
                }
                self.last.2
            }
            DeviceSpec::Ssd {
                read_us,
                write_us,
                mbps,
            } => {
                if self.last.0 != len || self.last.1 != write {
                    let fixed = if write { write_us } else { read_us };
                    self.last = (len, write, fixed * 1e-6 + b / (mbps * 1e6));
                }
                self.last.2
            }
            DeviceSpec::Hdd {
                rpm,
                seek_ms,
                mbps,
                bytes,
            } => {
                let transfer = b / (mbps * 1e6);
                let pos = offset % bytes;
                let t = if pos == self.head {
                    transfer
                } else {
                    let from = if self.head == u64::MAX { 0 } else { self.head };
                    let f = pos.abs_diff(from) as f64 / bytes as f64;
                    let seek = seek_ms * 1e-3 * (0.2 + 0.8 * f.sqrt() / MEAN_SQRT_DISTANCE);
                    let rotation = self.rng.gen::<f64>() * 60.0 / rpm;
                    seek + rotation + transfer
                };
                self.head = (pos + len) % bytes;
                t
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdd_random_read_is_seek_plus_half_a_rotation_plus_transfer() {
        let mut d = Device::new(DeviceSpec::hdd(), 7);
        let mut rng = StdRng::seed_from_u64(1);
        let n = 200_000;
        let bytes = 1u64 << 40;
        let total: f64 = (0..n)
            .map(|_| d.service(rng.gen_range(0..bytes / 4096) * 4096, 4096, false))
            .sum();
        let mean = total / n as f64;
        let expect = 5e-3 + 0.5 * 60.0 / 10_045.0 + 4096.0 / 120e6;
        assert!(
            (mean / expect - 1.0).abs() < 0.05,
            "mean {mean} expected {expect}"
        );
        assert!((DeviceSpec::hdd().expected(4096) - expect).abs() < 1e-12);
    }

    #[test]
    fn a_sequential_run_streams_at_the_transfer_rate() {
        let mut d = Device::new(DeviceSpec::hdd(), 7);
        d.service(1 << 30, 65536, false);
        let t = d.service((1 << 30) + 65536, 65536, false);
        assert!((t - 65536.0 / 120e6).abs() < 1e-12);
    }

    #[test]
    fn bad_numbers_name_their_field() {
        let e = DeviceSpec::Hdd {
            rpm: 0.0,
            seek_ms: 5.0,
            mbps: 1.0,
            bytes: 1,
        }
        .check()
        .unwrap_err()
        .to_string();
        assert!(e.contains("rpm"), "{e}");
    }
}
