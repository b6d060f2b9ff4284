//! Statistics of a tenant's latency samples at fair share: their spread, their scatter
//! about a trend, and whether they have settled enough to make a reference.

use super::REFERENCE_SAMPLES;

/// The relative spread of the samples, `(max − min) / mean`: how far apart intervals at
/// the same fair share measure. A difference within it is not evidence of harm.
pub(super) fn spread(samples: &[f64]) -> f64 {
    let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    let (lo, hi) = samples
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    if mean > 0.0 && hi >= lo {
        (hi - lo) / mean
    } else {
        0.0
    }
}

/// How far the samples scatter about their trend, relative to their mean: the spread of
/// their residuals from the least-squares line through them (in the order taken). Caches
/// that still warm, or a load that drifts, move every sample the same way; that is not
/// the noise of one measurement, and [`spread`] would count it.
pub(super) fn scatter(samples: &[f64]) -> f64 {
    let n = samples.len();
    let mean = samples.iter().sum::<f64>() / n.max(1) as f64;
    if n < 3 || mean.is_nan() || mean <= 0.0 {
        return spread(samples);
    }
    let mid = (n - 1) as f64 / 2.0;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (k, &v) in samples.iter().enumerate() {
        let dx = k as f64 - mid;
        sxy += dx * (v - mean);
        sxx += dx * dx;
    }
    let slope = sxy / sxx;
    let (lo, hi) = samples
        .iter()
        .enumerate()
        .map(|(k, &v)| v - (mean + slope * (k as f64 - mid)))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), r| {
            (a.min(r), b.max(r))
        });
    (hi - lo) / mean
}

/// Whether the samples of the latency at fair share make a reference: there are
/// [`REFERENCE_SAMPLES`] of them and the newest is no longer falling below the others by
/// more than the SLO's own tolerance `x` (caches still warming make every sample better
/// than the last, and the reference would lag what a fair share gives by the time the
/// floor is lifted).
pub(super) fn settled(samples: &[f64], x: f64) -> bool {
    let Some((&last, earlier)) = samples.split_last() else {
        return false;
    };
    let least = earlier.iter().copied().fold(f64::INFINITY, f64::min);
    samples.len() >= REFERENCE_SAMPLES && last >= (1.0 - x) * least
}
