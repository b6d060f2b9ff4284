//! Per-tenant latency models over (level-1 size, level-2 size) for MLMS.
//!
//! * [`Regression`] — MLMS's own: fitted by least squares from (allocation, observed
//!   latency) samples and refitted every enforcement interval (keep a sliding window of
//!   samples in a [`SampleWindow`]). Form:
//!   `lat = θ0 + θ1 · g(c1 / κ1) + θ2 · g(c2 / κ2)` with `g(x) = 1 / (1 + x)`,
//!   where κ1, κ2 are scales (e.g. the fair shares). Why this form: latency falls with
//!   diminishing returns in each level's size and flattens at large sizes (a quadratic
//!   turns back up outside the sampled range and would send spare space the wrong way);
//!   three parameters can be identified from three intervals with distinct allocations;
//!   features lie in `(0, 1]`, so the 3×3 normal equations are reasonably conditioned and a
//!   hand-written Gaussian elimination with partial pivoting (falling back to a tiny
//!   ridge, `1e-9 · trace`, only when the samples are collinear) is enough — no linear-algebra
//!   dependency for a 3×3 solve.
//! * [`TenantModel::Curve`] — beyond the paper: predict from the tenant's hit-ratio curve
//!   with exclusive levels, `lat = h1·lat1 + (h2 − h1)·lat2 + (1 − h2)·lat_disk` where
//!   `h1 = H(c1)` and `h2 = H(c1 + c2)` (level 2 extends level 1's LRU stack), so the first
//!   interval is already good, before any samples exist.

use crate::AllocError;
use mrc::HitRatioCurve;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// One observation: the allocation a tenant had and the mean latency it saw.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Level-1 blocks.
    pub c1: f64,
    /// Level-2 blocks.
    pub c2: f64,
    /// Observed mean latency.
    pub latency: f64,
}

/// A fitted regression model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    /// `θ0, θ1, θ2`.
    pub theta: [f64; 3],
    /// Scale κ1 of the level-1 size (blocks, > 0).
    pub scale1: f64,
    /// Scale κ2 of the level-2 size (blocks, > 0).
    pub scale2: f64,
}

fn features(c1: f64, c2: f64, k1: f64, k2: f64) -> [f64; 3] {
    [1.0, 1.0 / (1.0 + c1 / k1), 1.0 / (1.0 + c2 / k2)]
}

impl Regression {
    /// Fits the model to `samples` by least squares. Needs at least three samples and
    /// positive scales.
    pub fn fit(samples: &[Sample], scale1: f64, scale2: f64) -> Result<Regression, AllocError> {
        if samples.len() < 3 {
            return Err(AllocError::BadInput(format!(
                "a regression model needs at least 3 samples, got {}",
                samples.len()
            )));
        }
        if !(scale1 > 0.0 && scale2 > 0.0) {
            return Err(AllocError::BadInput(
                "regression scales must be positive".into(),
            ));
        }
        let mut a = [[0.0f64; 3]; 3];
        let mut b = [0.0f64; 3];
        for s in samples {
            if !(s.latency.is_finite() && s.c1 >= 0.0 && s.c2 >= 0.0) {
                return Err(AllocError::BadInput(format!("bad sample {s:?}")));
            }
            let x = features(s.c1, s.c2, scale1, scale2);
            for r in 0..3 {
                for c in 0..3 {
                    a[r][c] += x[r] * x[c];
                }
                b[r] += x[r] * s.latency;
            }
        }
        let trace = a[0][0] + a[1][1] + a[2][2];
        let theta = match solve3(a, b, 1e-12 * trace) {
            Some(t) => t,
            None => {
                // Exactly collinear samples: a tiny ridge picks one of the fits.
                let mut r = a;
                for (i, row) in r.iter_mut().enumerate() {
                    row[i] += 1e-9 * trace;
                }
                solve3(r, b, 0.0).ok_or_else(|| {
                    AllocError::BadInput("samples do not determine the model".into())
                })?
            }
        };
        Ok(Regression {
            theta,
            scale1,
            scale2,
        })
    }

    /// Predicted latency at `(c1, c2)` blocks.
    pub fn latency(&self, c1: f64, c2: f64) -> f64 {
        let x = features(c1, c2, self.scale1, self.scale2);
        self.theta.iter().zip(x).map(|(t, x)| t * x).sum()
    }
}

/// Solves a 3×3 system by Gaussian elimination with partial pivoting.
/// `None` if a pivot falls to `tiny` or below.
#[allow(clippy::needless_range_loop)] // index arithmetic over parallel arrays reads clearer
fn solve3(mut a: [[f64; 3]; 3], mut b: [f64; 3], tiny: f64) -> Option<[f64; 3]> {
    for col in 0..3 {
        let piv = (col..3).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() <= tiny.max(1e-300) {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        for r in col + 1..3 {
            let f = a[r][col] / a[col][col];
            for c in col..3 {
                a[r][c] -= f * a[col][c];
            }
            b[r] -= f * b[col];
        }
    }
    let mut x = [0.0; 3];
    for r in (0..3).rev() {
        let s: f64 = (r + 1..3).map(|c| a[r][c] * x[c]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// Latencies of the levels for the curve model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelLatencies {
    /// A level-1 hit.
    pub lat1: f64,
    /// A level-2 hit.
    pub lat2: f64,
    /// A miss in both (disk).
    pub lat_disk: f64,
}

/// A tenant's latency model.
#[derive(Clone, Debug, PartialEq)]
pub enum TenantModel {
    /// Fitted from samples.
    Regression(Regression),
    /// Predicted from the hit-ratio curve with exclusive levels.
    Curve {
        /// The curve (monotone).
        curve: HitRatioCurve,
        /// The levels' latencies.
        lat: LevelLatencies,
    },
}

impl TenantModel {
    /// Predicted mean latency at `(c1, c2)` blocks.
    pub fn latency(&self, c1: f64, c2: f64) -> f64 {
        match self {
            TenantModel::Regression(r) => r.latency(c1, c2),
            TenantModel::Curve { curve, lat } => {
                let h1 = curve.hit_ratio(c1);
                let h2 = curve.hit_ratio(c1 + c2);
                h1 * lat.lat1 + (h2 - h1) * lat.lat2 + (1.0 - h2) * lat.lat_disk
            }
        }
    }

    /// Hit ratio of both levels together, if the model knows it (curve model only).
    pub fn hit_ratio(&self, c1: f64, c2: f64) -> Option<f64> {
        match self {
            TenantModel::Regression(_) => None,
            TenantModel::Curve { curve, .. } => Some(curve.hit_ratio(c1 + c2)),
        }
    }
}

/// The last `capacity` samples of one tenant, refitted on demand each interval.
#[derive(Clone, Debug)]
pub struct SampleWindow {
    samples: VecDeque<Sample>,
    capacity: usize,
}

impl SampleWindow {
    /// A window keeping at most `capacity` samples (at least 3).
    pub fn new(capacity: usize) -> Self {
        SampleWindow {
            samples: VecDeque::new(),
            capacity: capacity.max(3),
        }
    }

    /// Records one interval's observation, dropping the oldest beyond the capacity.
    pub fn push(&mut self, s: Sample) {
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(s);
    }

    /// Refits on the window.
    pub fn fit(&self, scale1: f64, scale2: f64) -> Result<Regression, AllocError> {
        let v: Vec<Sample> = self.samples.iter().copied().collect();
        Regression::fit(&v, scale1, scale2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_exact_parameters() {
        let truth = Regression {
            theta: [0.5, 4.0, 2.0],
            scale1: 100.0,
            scale2: 400.0,
        };
        let pts = [
            (0.0, 0.0),
            (100.0, 0.0),
            (0.0, 400.0),
            (300.0, 800.0),
            (50.0, 50.0),
        ];
        let s: Vec<Sample> = pts
            .iter()
            .map(|&(c1, c2)| Sample {
                c1,
                c2,
                latency: truth.latency(c1, c2),
            })
            .collect();
        let m = Regression::fit(&s, 100.0, 400.0).unwrap();
        for (a, b) in m.theta.iter().zip(truth.theta) {
            assert!((a - b).abs() < 1e-6, "{:?}", m.theta);
        }
        // lat(100, 400) = 0.5 + 4/2 + 2/2 = 3.5
        assert!((m.latency(100.0, 400.0) - 3.5).abs() < 1e-6);
    }

    #[test]
    fn too_few_samples_and_refit_window() {
        let s = Sample {
            c1: 1.0,
            c2: 1.0,
            latency: 1.0,
        };
        assert!(Regression::fit(&[s, s], 1.0, 1.0).is_err());
        let mut w = SampleWindow::new(3);
        for i in 0..5 {
            let c = i as f64 * 10.0;
            w.push(Sample {
                c1: c,
                c2: 2.0 * c + 5.0,
                latency: 1.0 + 2.0 / (1.0 + c / 10.0),
            });
        }
        // The window holds the last three; they fit exactly (θ2 absorbs nothing).
        let m = w.fit(10.0, 10.0).unwrap();
        assert!((m.latency(40.0, 85.0) - (1.0 + 2.0 / 5.0)).abs() < 1e-6);
    }

    #[test]
    fn curve_model_with_exclusive_levels() {
        let curve = HitRatioCurve::from_pairs([(0, 1.0), (100, 0.5), (300, 0.1)]).unwrap();
        let m = TenantModel::Curve {
            curve,
            lat: LevelLatencies {
                lat1: 0.1,
                lat2: 1.0,
                lat_disk: 10.0,
            },
        };
        // h1 = H(100) = 0.5, h2 = H(300) = 0.9: 0.05 + 0.4 + 1.0
        assert!((m.latency(100.0, 200.0) - 1.45).abs() < 1e-12);
        assert_eq!(m.hit_ratio(100.0, 200.0), Some(0.9));
    }
}
