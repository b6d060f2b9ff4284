//! The hit-ratio curve type: miss ratio as a function of cache size in blocks, as a list
//! of points with increasing sizes, linearly interpolated between them and flat past the
//! last one. The hit ratio is `1 - miss_ratio`.
//!
//! Operations allocators need: interpolation, marginal gain per block, and the concave
//! hull of the hit ratio (the lower convex hull of the miss ratio), which turns any curve
//! into one that greedy water-filling optimises exactly.
//!
//! A curve says what its miss ratio counts ([`Weighting`]: lookups or bytes), and travels
//! as JSON (`{"points": [...], "weighting": "requests"}`) or CSV (`cache_size,miss_ratio`;
//! CSV does not carry the weighting, which the reader sets with
//! [`HitRatioCurve::with_weighting`]).

use serde::{Deserialize, Serialize};

/// What a curve's miss ratio counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Weighting {
    /// Each lookup counts one (the request miss ratio).
    #[default]
    Requests,
    /// Each lookup counts its bytes (the byte miss ratio: what the backend must serve).
    Bytes,
}

/// One point of a curve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Cache size in blocks (objects in object mode).
    pub cache_size: u64,
    /// Miss ratio at that size, in `[0, 1]`.
    pub miss_ratio: f64,
}

/// A curve that is not well formed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CurveError {
    /// No points at all.
    #[error("the curve has no points")]
    Empty,
    /// Sizes do not strictly increase.
    #[error("point {index}: cache_size {size} does not increase over the previous point")]
    NotIncreasing {
        /// Index of the offending point.
        index: usize,
        /// Its size.
        size: u64,
    },
    /// A CSV line that is not `cache_size,miss_ratio`.
    #[error("line {line}: {message}")]
    Csv {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// JSON that is not a curve.
    #[error("JSON: {0}")]
    Json(String),
    /// A miss ratio outside `[0, 1]` or not finite.
    #[error("point {index}: miss_ratio {value} is not in [0, 1]")]
    BadRatio {
        /// Index of the offending point.
        index: usize,
        /// Its value.
        value: f64,
    },
}

/// Miss ratio against cache size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HitRatioCurve {
    points: Vec<CurvePoint>,
    #[serde(default)]
    weighting: Weighting,
}

impl HitRatioCurve {
    /// A curve from points with strictly increasing sizes and ratios in `[0, 1]`.
    /// A curve that does not start at size 0 is taken to have miss ratio 1 at size 0.
    pub fn new(mut points: Vec<CurvePoint>) -> Result<Self, CurveError> {
        if points.is_empty() {
            return Err(CurveError::Empty);
        }
        for (i, p) in points.iter().enumerate() {
            if !(0.0..=1.0).contains(&p.miss_ratio) {
                return Err(CurveError::BadRatio {
                    index: i,
                    value: p.miss_ratio,
                });
            }
            if i > 0 && p.cache_size <= points[i - 1].cache_size {
                return Err(CurveError::NotIncreasing {
                    index: i,
                    size: p.cache_size,
                });
            }
        }
        if points[0].cache_size > 0 {
            points.insert(
                0,
                CurvePoint {
                    cache_size: 0,
                    miss_ratio: 1.0,
                },
            );
        }
        Ok(HitRatioCurve {
            points,
            weighting: Weighting::Requests,
        })
    }

    /// The same curve, marked as counting `weighting`.
    pub fn with_weighting(mut self, weighting: Weighting) -> Self {
        self.weighting = weighting;
        self
    }

    /// What the miss ratio counts (requests unless said otherwise).
    pub fn weighting(&self) -> Weighting {
        self.weighting
    }

    /// The curve as JSON: `{"points":[{"cache_size":..,"miss_ratio":..},..],"weighting":..}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a curve always serialises")
    }

    /// Parses [`HitRatioCurve::to_json`]'s output (a missing `weighting` means requests),
    /// checking the points as [`HitRatioCurve::new`] does.
    pub fn from_json(text: &str) -> Result<Self, CurveError> {
        let raw: HitRatioCurve =
            serde_json::from_str(text).map_err(|e| CurveError::Json(e.to_string()))?;
        Ok(Self::new(raw.points)?.with_weighting(raw.weighting))
    }

    /// A curve from `(size, miss_ratio)` pairs.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u64, f64)>) -> Result<Self, CurveError> {
        Self::new(
            pairs
                .into_iter()
                .map(|(cache_size, miss_ratio)| CurvePoint {
                    cache_size,
                    miss_ratio,
                })
                .collect(),
        )
    }

    /// The points, sizes increasing, the first at size 0.
    pub fn points(&self) -> &[CurvePoint] {
        &self.points
    }

    /// The largest size with a point.
    pub fn max_size(&self) -> u64 {
        self.points.last().map_or(0, |p| p.cache_size)
    }

    /// Miss ratio at `size` blocks, linearly interpolated; flat past the last point.
    pub fn miss_ratio(&self, size: f64) -> f64 {
        let pts = &self.points;
        if size <= pts[0].cache_size as f64 {
            return pts[0].miss_ratio;
        }
        let last = pts[pts.len() - 1];
        if size >= last.cache_size as f64 {
            return last.miss_ratio;
        }
        // First point with cache_size > size: guessed from where `size` lies between the
        // ends (the profilers' curves are on near-even grids, where the guess is that
        // point or next to it), walked to from there, and binary-searched if the guess
        // is more than a few points off. `pts[0] < size < last` bounds the walk.
        let n = pts.len();
        let (first, end) = (pts[0].cache_size as f64, last.cache_size as f64);
        let guess = ((size - first) / (end - first) * (n - 1) as f64) as usize + 1;
        let mut i = guess.clamp(1, n - 1);
        let mut steps = 0;
        while steps < 4 && pts[i - 1].cache_size as f64 > size {
            i -= 1;
            steps += 1;
        }
        while steps < 4 && pts[i].cache_size as f64 <= size {
            i += 1;
            steps += 1;
        }
        if !(pts[i - 1].cache_size as f64 <= size && size < pts[i].cache_size as f64) {
            i = pts.partition_point(|p| (p.cache_size as f64) <= size);
        }
        let (a, b) = (pts[i - 1], pts[i]);
        let t = (size - a.cache_size as f64) / (b.cache_size - a.cache_size) as f64;
        a.miss_ratio + t * (b.miss_ratio - a.miss_ratio)
    }

    /// Hit ratio at `size` blocks.
    pub fn hit_ratio(&self, size: f64) -> f64 {
        1.0 - self.miss_ratio(size)
    }

    /// Hit ratio gained per block when growing from `size` by `step` blocks.
    pub fn marginal_gain(&self, size: f64, step: f64) -> f64 {
        if step <= 0.0 {
            return 0.0;
        }
        (self.miss_ratio(size) - self.miss_ratio(size + step)) / step
    }

    /// The lower convex hull of the miss ratio (concave hull of the hit ratio), through
    /// the first and last points. Monotone non-increasing if the curve's end is not above
    /// its start.
    pub fn concave_hull(&self) -> HitRatioCurve {
        let mut hull: Vec<CurvePoint> = Vec::with_capacity(self.points.len());
        for &p in &self.points {
            while hull.len() >= 2 {
                let a = hull[hull.len() - 2];
                let b = hull[hull.len() - 1];
                // Keep b only if it lies strictly below the segment a-p.
                let cross = (b.cache_size as f64 - a.cache_size as f64)
                    * (p.miss_ratio - a.miss_ratio)
                    - (b.miss_ratio - a.miss_ratio) * (p.cache_size as f64 - a.cache_size as f64);
                if cross <= 0.0 {
                    hull.pop();
                } else {
                    break;
                }
            }
            hull.push(p);
        }
        HitRatioCurve {
            points: hull,
            weighting: self.weighting,
        }
    }

    /// The curve as CSV with the header `cache_size,miss_ratio`.
    pub fn to_csv(&self) -> String {
        let mut s = String::from("cache_size,miss_ratio\n");
        for p in &self.points {
            s.push_str(&format!("{},{}\n", p.cache_size, p.miss_ratio));
        }
        s
    }

    /// Parses CSV as [`HitRatioCurve::to_csv`] writes it (the header is optional).
    pub fn from_csv(text: &str) -> Result<Self, CurveError> {
        let mut pts = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || (i == 0 && l.starts_with("cache_size")) {
                continue;
            }
            let bad = |m: &str| CurveError::Csv {
                line: i + 1,
                message: m.to_string(),
            };
            let (a, b) = l
                .split_once(',')
                .ok_or_else(|| bad("expected cache_size,miss_ratio"))?;
            let cache_size = a
                .trim()
                .parse()
                .map_err(|_| bad("cache_size is not a non-negative integer"))?;
            let miss_ratio = b
                .trim()
                .parse()
                .map_err(|_| bad("miss_ratio is not a number"))?;
            pts.push(CurvePoint {
                cache_size,
                miss_ratio,
            });
        }
        Self::new(pts)
    }

    /// The curve at the given sizes (interpolated), starting at 0.
    pub fn resample(&self, sizes: &[u64]) -> HitRatioCurve {
        let mut s: Vec<u64> = sizes.to_vec();
        s.push(0);
        s.sort_unstable();
        s.dedup();
        HitRatioCurve {
            points: s
                .into_iter()
                .map(|c| CurvePoint {
                    cache_size: c,
                    miss_ratio: self.miss_ratio(c as f64),
                })
                .collect(),
            weighting: self.weighting,
        }
    }

    /// Whether the miss ratio never rises with size.
    pub fn is_monotone(&self) -> bool {
        self.points
            .windows(2)
            .all(|w| w[1].miss_ratio <= w[0].miss_ratio + 1e-12)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The guessed-then-walked bracket of `miss_ratio` is the binary search's, on
        /// curves of any spacing (even grids, where the guess lands, and uneven ones).
        #[test]
        fn miss_ratio_brackets_as_a_binary_search_does(
            gaps in proptest::collection::vec(1u64..5_000, 1..80),
            skew in 0u32..3,
            probes in proptest::collection::vec(0.0f64..1.2, 1..40),
        ) {
            let mut size = 0u64;
            let mut pairs = vec![(0u64, 1.0f64)];
            for (k, g) in gaps.iter().enumerate() {
                size += g.pow(skew + 1) / 100u64.pow(skew) + 1;
                pairs.push((size, 1.0 / (k as f64 + 2.0)));
            }
            let curve = HitRatioCurve::from_pairs(pairs).unwrap();
            let pts = curve.points();
            for p in probes {
                let s = p * size as f64;
                let expect = if s <= 0.0 {
                    pts[0].miss_ratio
                } else if s >= size as f64 {
                    pts[pts.len() - 1].miss_ratio
                } else {
                    let i = pts.partition_point(|q| (q.cache_size as f64) <= s);
                    let (a, b) = (pts[i - 1], pts[i]);
                    let t = (s - a.cache_size as f64) / (b.cache_size - a.cache_size) as f64;
                    a.miss_ratio + t * (b.miss_ratio - a.miss_ratio)
                };
                prop_assert_eq!(curve.miss_ratio(s).to_bits(), expect.to_bits(), "size {}", s);
            }
        }
    }

    fn c(p: &[(u64, f64)]) -> HitRatioCurve {
        HitRatioCurve::from_pairs(p.iter().copied()).unwrap()
    }

    #[test]
    fn interpolates_and_clamps() {
        let k = c(&[(0, 1.0), (10, 0.5), (20, 0.3)]);
        assert!((k.miss_ratio(5.0) - 0.75).abs() < 1e-12);
        assert!((k.miss_ratio(15.0) - 0.4).abs() < 1e-12);
        assert_eq!(k.miss_ratio(100.0), 0.3);
        assert!((k.marginal_gain(0.0, 10.0) - 0.05).abs() < 1e-12);
    }

    #[test]
    fn hull_removes_cliffs() {
        // A cliff at 20: the hull goes straight from 0 to 20.
        let k = c(&[(0, 1.0), (10, 0.95), (20, 0.2), (30, 0.15)]);
        let h = k.concave_hull();
        let sizes: Vec<u64> = h.points().iter().map(|p| p.cache_size).collect();
        assert_eq!(sizes, vec![0, 20, 30]);
        assert!((h.miss_ratio(10.0) - 0.6).abs() < 1e-12);
    }

    #[test]
    fn csv_round_trip_and_errors() {
        let k = c(&[(0, 1.0), (10, 0.5), (20, 0.25)]);
        assert_eq!(HitRatioCurve::from_csv(&k.to_csv()).unwrap(), k);
        let e = HitRatioCurve::from_csv("cache_size,miss_ratio\n0,1\n5,x\n").unwrap_err();
        assert_eq!(e.to_string(), "line 3: miss_ratio is not a number");
        assert_eq!(k.resample(&[15]).points().len(), 2);
        assert!((k.resample(&[15]).miss_ratio(15.0) - 0.375).abs() < 1e-12);
        // Resampling past the last point stays flat and finite.
        let r = k.resample(&[5, 1_000_000]);
        assert_eq!(r.points().len(), 3);
        assert_eq!(r.miss_ratio(1e6), 0.25);
    }

    #[test]
    fn json_round_trip_keeps_weighting() {
        let k = c(&[(0, 1.0), (10, 0.5)]).with_weighting(Weighting::Bytes);
        let j = k.to_json();
        assert_eq!(
            j,
            r#"{"points":[{"cache_size":0,"miss_ratio":1.0},{"cache_size":10,"miss_ratio":0.5}],"weighting":"bytes"}"#
        );
        assert_eq!(HitRatioCurve::from_json(&j).unwrap(), k);
        // No weighting: requests. Bad points are refused as by `new`.
        let r =
            HitRatioCurve::from_json(r#"{"points":[{"cache_size":4,"miss_ratio":0.5}]}"#).unwrap();
        assert_eq!(r.weighting(), Weighting::Requests);
        assert_eq!(r.points().len(), 2);
        assert!(matches!(
            HitRatioCurve::from_json(r#"{"points":[{"cache_size":4,"miss_ratio":1.5}]}"#),
            Err(CurveError::BadRatio { .. })
        ));
        assert!(matches!(
            HitRatioCurve::from_json("[1,2]"),
            Err(CurveError::Json(_))
        ));
    }

    #[test]
    fn rejects_bad_curves() {
        assert_eq!(HitRatioCurve::new(vec![]), Err(CurveError::Empty));
        assert!(matches!(
            HitRatioCurve::from_pairs([(0, 1.0), (0, 0.5)]),
            Err(CurveError::NotIncreasing { index: 1, .. })
        ));
        assert!(matches!(
            HitRatioCurve::from_pairs([(0, f64::NAN)]),
            Err(CurveError::BadRatio { .. })
        ));
    }
}
