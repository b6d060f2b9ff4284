//! Zipf sampling by rejection-inversion (W. Hörmann and G. Derflinger, "Rejection-inversion
//! to generate variates from monotone discrete distributions", ACM TOMACS 1996), the method
//! Apache Commons RNG also uses: O(1) time and memory per sample for any number of objects.
//!
//! Sketch: the weights `h(k) = k^-s` are bounded by the area under `h(x)` over
//! `[k - 1/2, k + 1/2]`. Draw a point uniformly in the total area `H(n + 1/2) - H(3/2) +
//! h(1)`, invert the integral `H` to get `x`, round to `k`. Most draws fall where the bound
//! is tight and are accepted at once (`k - x <= s_coef`); the rest are accepted when the
//! point lies under `h(k)`. Each sample costs about two logarithms or exponentials.

use rand::Rng;

/// A Zipf(s) distribution over ranks `1..=n`: `P(k) ∝ k^-s`.
#[derive(Clone, Debug)]
pub struct ZipfSampler {
    n: f64,
    n_int: u64,
    s: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s_coef: f64,
}

impl ZipfSampler {
    /// Ranks `1..=n` with exponent `s` (`n >= 1`, `s >= 0` and finite, else `None`).
    pub fn new(n: u64, s: f64) -> Option<ZipfSampler> {
        if n == 0 || !(s >= 0.0 && s.is_finite()) {
            return None;
        }
        let mut z = ZipfSampler {
            n: n as f64,
            n_int: n,
            s,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s_coef: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n + 0.5);
        z.s_coef = 2.0 - z.h_integral_inv(z.h_integral(2.5) - z.h(2.0));
        Some(z)
    }

    /// Draws a rank in `1..=n`.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        loop {
            let u: f64 =
                self.h_integral_n + rng.gen::<f64>() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inv(u);
            // x > 1/2, so truncation is floor (and avoids a libm call on older targets).
            let k = ((x + 0.5) as u64).clamp(1, self.n_int);
            let kf = k as f64;
            if kf - x <= self.s_coef || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k;
            }
        }
    }

    /// `h(x) = x^-s`.
    #[inline]
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// `H(x) = ∫ h`, written to stay exact as `s → 1`.
    #[inline]
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.s) * log_x) * log_x
    }

    #[inline]
    fn h_integral_inv(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, accurate near 0.
#[inline]
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, accurate near 0.
#[inline]
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    /// Empirical frequencies of ranks 1..=5 match `k^-s / H(n, s)` within 0.5 points.
    #[test]
    fn frequencies_match_the_pmf() {
        for (n, s) in [(10u64, 0.0), (50, 0.7), (1000, 1.0), (100, 1.5), (3, 2.5)] {
            let z = ZipfSampler::new(n, s).unwrap();
            let mut rng = StdRng::seed_from_u64(7);
            let draws = 200_000;
            let mut counts = vec![0u64; n as usize + 1];
            for _ in 0..draws {
                let k = z.sample(&mut rng);
                assert!((1..=n).contains(&k));
                counts[k as usize] += 1;
            }
            let norm: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
            for k in 1..=n.min(5) {
                let want = (k as f64).powf(-s) / norm;
                let got = counts[k as usize] as f64 / draws as f64;
                assert!(
                    (got - want).abs() < 0.005,
                    "n={n} s={s} k={k}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(ZipfSampler::new(0, 1.0).is_none());
        assert!(ZipfSampler::new(5, -0.1).is_none());
        assert!(ZipfSampler::new(5, f64::NAN).is_none());
        assert_eq!(
            ZipfSampler::new(1, 0.9)
                .unwrap()
                .sample(&mut StdRng::seed_from_u64(1)),
            1
        );
    }
}
