//! One tenant's row of an allocation report ([`TenantAllocation`]): its size, predicted
//! hit ratio, and, when it has an SLO, the predicted metric, the verdict and why it is
//! not met. Shared by every objective (`entry` and `mlms`), so it sits below both.

use crate::slo;
use crate::TenantAllocation;

/// A report row: SLO verdict and latency from the linear model when the tenant has one.
pub(crate) fn row(
    name: &str,
    size: u64,
    hit: f64,
    slo: Option<&crate::Slo>,
    reason: Option<String>,
) -> TenantAllocation {
    let (latency, met) = match slo {
        Some(s) => {
            let v = slo::metric_at(s, hit);
            let lat = (s.kind == crate::SloKind::Latency).then_some(v);
            (lat, Some(slo::meets(s, v)))
        }
        None => (None, None),
    };
    let reason = reason.or_else(|| {
        (met == Some(false)).then(|| {
            let need = slo::required_hit_ratio(slo.expect("met is Some"));
            format!("predicted hit ratio {hit:.4} is below the {need:.4} the SLO needs")
        })
    });
    TenantAllocation {
        tenant: name.to_string(),
        size,
        predicted_hit_ratio: hit,
        predicted_latency: latency,
        slo_met: met,
        reason,
        level2_size: None,
    }
}
