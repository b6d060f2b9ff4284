//! The observing stage of the step: what each tenant's observations teach the state
//! (smoothed service times, idleness, write mix, MLMS samples, footprint and curve), and the
//! models the later stages plan with: each tenant's latency model and MLMS's regression.

use super::previous::Previous;
use super::state::{footprint, SAMPLES};
use super::Controller;
use crate::model::{LatencyModel, WriteMix};
use crate::observe::Observations;
use lachesis_alloc::mlms::model::{Regression, Sample};
use lachesis_alloc::monotone_envelope;
use mrc::HitRatioCurve;

impl Controller {
    pub(super) fn observe(&mut self, obs: &Observations, was: Option<&Previous>) {
        for (i, o) in obs.tenants.iter().enumerate() {
            let prev = was.and_then(|w| w.tenant[i]);
            let st = &mut self.state.tenants[i];
            let s = st.service.get_or_insert(self.topology.service);
            let blend = |old: &mut f64, new: Option<f64>| {
                if let Some(v) = new.filter(|v| v.is_finite() && *v > 0.0) {
                    *old = 0.5 * *old + 0.5 * v;
                }
            };
            blend(&mut s.l1_hit_ms, o.service.l1_hit_ms);
            blend(&mut s.l2_hit_ms, o.service.l2_hit_ms);
            blend(&mut s.miss_ms, o.service.miss_ms);
            // Keep the levels ordered, so more space never predicts more latency.
            s.l2_hit_ms = s.l2_hit_ms.max(s.l1_hit_ms);
            s.miss_ms = s.miss_ms.max(s.l2_hit_ms);
            if let Some(q) = o.miss_quantiles.filter(|q| q.p999 > 0.0) {
                st.miss_quantiles = Some(q);
            }
            st.idle = if o.requests == 0 {
                st.idle.saturating_add(1)
            } else {
                0
            };
            // Writes observed apart from reads: the mix is smoothed as the service times
            // are, and the sample's latency is that of the reads (what the sizes change).
            let split = match (o.read_latency_ms, o.write_latency_ms) {
                (Some(r), Some(w)) if o.requests > 0 && r.is_finite() && w.is_finite() => {
                    Some((r, w))
                }
                _ => None,
            };
            if let Some((_, w)) = split {
                let share = (o.writes as f64 / o.requests as f64).clamp(0.0, 1.0);
                let m = st.writes.get_or_insert(WriteMix {
                    share,
                    ms: w,
                    per_miss_ms: None,
                });
                m.share = 0.5 * m.share + 0.5 * share;
                if o.writes > 0 && w > 0.0 {
                    m.ms = 0.5 * m.ms + 0.5 * w;
                }
                if !o.write_back {
                    m.per_miss_ms = None;
                }
            }
            if o.requests > 0 {
                if let Some(tp) = prev {
                    let v = &mut st.samples;
                    if v.len() == SAMPLES {
                        v.remove(0);
                    }
                    v.push(Sample {
                        c1: tp.l1.size as f64,
                        c2: tp.l2_total() as f64,
                        latency: split.map_or(o.mean_latency_ms, |(r, _)| r),
                    });
                }
            }
            let running = st.choice.active.as_deref();
            let curve = running
                .and_then(|p| o.curve(p))
                .or_else(|| o.curves.first().map(|c| &c.curve));
            if let Some(c) = curve {
                let f = footprint(c);
                if f > st.footprint {
                    st.footprint = f;
                    st.footprint_still = 0;
                } else {
                    st.footprint_still = st.footprint_still.saturating_add(1);
                }
                st.curve = Some(monotone_envelope(c));
            }
            // A write-back level 1: what this interval's writes paid beyond a level-1 hit,
            // per write that found its block not resident at the size the tenant held (its
            // curve at that size). Where the curve says nearly every block was resident,
            // misses cannot be what writes paid for: sizes are taken not to change it.
            if let (true, Some((_, w)), Some(tp), Some(c), Some(m)) = (
                o.write_back && o.writes > 0,
                split,
                prev,
                st.curve.as_ref(),
                st.writes.as_mut(),
            ) {
                let a = st
                    .service
                    .map_or(self.topology.service.l1_hit_ms, |s| s.l1_hit_ms);
                let missed = 1.0 - c.hit_ratio(tp.l1.size as f64);
                m.per_miss_ms = (missed >= 0.05).then(|| {
                    let p = (w - a).max(0.0) / missed;
                    m.per_miss_ms.map_or(p, |old| 0.5 * old + 0.5 * p)
                });
            }
        }
    }

    pub(super) fn models(&self) -> Vec<LatencyModel> {
        let flat = HitRatioCurve::from_pairs([(0, 1.0), (1, 1.0)]).expect("valid");
        (0..self.topology.tenants.len())
            .map(|i| LatencyModel {
                curve: self.state.tenants[i]
                    .curve
                    .clone()
                    .unwrap_or_else(|| flat.clone()),
                service: self.state.tenants[i]
                    .service
                    .unwrap_or(self.topology.service),
                levels: self.topology.tenants[i]
                    .levels
                    .unwrap_or(self.topology.levels),
                writes: self.state.tenants[i].writes,
            })
            .collect()
    }

    /// MLMS's regression for tenant `i`, once three distinct allocations were observed.
    /// A tenant whose writes are observed apart has samples of its reads' latency; they
    /// are restated at its current write mix (`(1 − w)·reads + w·W`), so the fit predicts
    /// its whole latency, as its target is.
    pub(super) fn regression(&self, i: usize, k1: u64, k2: u64) -> Option<Regression> {
        let st = &self.state.tenants[i];
        let restated: Vec<Sample>;
        let v = match st.writes {
            Some(w) => {
                let share = w.share.clamp(0.0, 1.0);
                restated = st
                    .samples
                    .iter()
                    .map(|s| Sample {
                        latency: (1.0 - share) * s.latency + share * w.ms,
                        ..*s
                    })
                    .collect();
                &restated
            }
            None => &st.samples,
        };
        let mut distinct: Vec<(u64, u64)> = v.iter().map(|s| (s.c1 as u64, s.c2 as u64)).collect();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() < 3 {
            return None;
        }
        let r = Regression::fit(v, k1.max(1) as f64, k2.max(1) as f64).ok()?;
        // A fit in which more space means more latency, or that misses its own samples by
        // more than a quarter on average (cold caches, phase changes), plans worse than
        // the curve model: keep the curve model until the samples support a regression.
        let err = v
            .iter()
            .map(|s| (r.latency(s.c1, s.c2) - s.latency).abs() / s.latency.max(1e-9))
            .sum::<f64>()
            / v.len() as f64;
        (r.theta[1] >= 0.0 && r.theta[2] >= 0.0 && err <= 0.25).then_some(r)
    }
}
