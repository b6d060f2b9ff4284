//! One scenario run at several seeds, summarised as a spread: per scheme and per tenant
//! the median and range of each figure over the seeds, and per claim at how many seeds it
//! held. A figure from one seed can be luck; the spread says how much.
//!
//! Pure: built from the runs' [`Summary`]s; `lachesis sim run --seeds` prints and writes
//! it (`spread.json`).

use crate::run::{Summary, TenantSummary};
use serde::Serialize;
use std::collections::BTreeMap;

/// The median and range of one figure over the seeds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Range {
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    /// Least.
    pub min: f64,
    /// Greatest.
    pub max: f64,
}

impl Range {
    /// The range of `values`; `None` for none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Range> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Range {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = f.precision().unwrap_or(3);
        write!(
            f,
            "{:.p$} [{:.p$}, {:.p$}]",
            self.median,
            self.min,
            self.max,
            p = p
        )
    }
}

/// One tenant under one scheme over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct TenantSpread {
    /// Mean latency (ms).
    pub mean_latency_ms: Option<Range>,
    /// Its mean latency over the fair scheme's at the same seed.
    pub vs_fair: Option<Range>,
    /// Share of its counted intervals that met its SLO (seeds where it was judged).
    pub slo_met_share: Option<Range>,
    /// Seeds at which it had an SLO and no counted interval.
    pub unjudged_seeds: usize,
}

/// One scheme over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct SchemeSpread {
    /// Fair speedup.
    pub fair_speedup: Option<Range>,
    /// Mean latency over all counted requests (ms).
    pub mean_latency_ms: Option<Range>,
    /// Tenants whose SLO failed (see [`crate::run::SLO_COMPLIANCE`]).
    pub slo_violations: Option<Range>,
    /// Share of (tenant, interval) pairs that met their SLO.
    pub slo_met_share: Option<Range>,
    /// Summed IOPS.
    pub iops: Option<Range>,
    /// Per tenant.
    pub tenants: BTreeMap<String, TenantSpread>,
}

/// One claim over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimSpread {
    /// What is claimed.
    pub name: String,
    /// The paper's number or statement.
    pub paper: String,
    /// The rule.
    pub rule: String,
    /// Seeds at which it held.
    pub holds_at: Vec<u64>,
    /// Seeds at which it was evaluated (a claim naming a scheme that was not run is not).
    pub of: usize,
    /// The rule with our numbers, per seed, in seed order.
    pub ours: Vec<String>,
    /// Whose claim it is.
    pub kind: crate::claims::ClaimKind,
}

/// A scenario over several seeds (`spread.json`).
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    /// Scenario name.
    pub scenario: String,
    /// The seeds, in the order run.
    pub seeds: Vec<u64>,
    /// Per scheme.
    pub schemes: BTreeMap<String, SchemeSpread>,
    /// Per claim, in the scenario's order.
    pub claims: Vec<ClaimSpread>,
}

/// Tenant `tenant`'s summary under `scheme` in one run, if both were run.
fn tenant_of<'a>(s: &'a Summary, scheme: &str, tenant: &str) -> Option<&'a TenantSummary> {
    s.schemes.get(scheme)?.tenants.get(tenant)
}

/// The spread of `runs`, each a seed and that seed's summary of the same scenario.
pub fn spread(runs: &[(u64, Summary)]) -> Spread {
    let scenario = runs
        .first()
        .map_or(String::new(), |(_, s)| s.scenario.clone());
    let mut names: Vec<&String> = runs.iter().flat_map(|(_, s)| s.schemes.keys()).collect();
    names.sort();
    names.dedup();
    let mut schemes = BTreeMap::new();
    for name in names {
        let of = |f: &dyn Fn(&crate::run::SchemeSummary) -> f64| {
            Range::of(runs.iter().filter_map(|(_, s)| s.schemes.get(name)).map(f))
        };
        let mut tenants = BTreeMap::new();
        let tenant_names: Vec<String> = runs
            .iter()
            .filter_map(|(_, s)| s.schemes.get(name))
            .flat_map(|s| s.tenants.keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for t in tenant_names {
            let mine = |s| tenant_of(s, name, &t);
            let fair = |s| tenant_of(s, "fair", &t);
            tenants.insert(
                t.clone(),
                TenantSpread {
                    mean_latency_ms: Range::of(
                        runs.iter()
                            .filter_map(|(_, s)| mine(s))
                            .filter(|x| x.requests > 0)
                            .map(|x| x.mean_latency_ms),
                    ),
                    vs_fair: Range::of(runs.iter().filter_map(|(_, s)| {
                        let (m, f) = (mine(s)?, fair(s)?);
                        (m.requests > 0 && f.requests > 0 && f.mean_latency_ms > 0.0)
                            .then(|| m.mean_latency_ms / f.mean_latency_ms)
                    })),
                    slo_met_share: Range::of(
                        runs.iter().filter_map(|(_, s)| mine(s)?.slo_met_share),
                    ),
                    unjudged_seeds: runs
                        .iter()
                        .filter(|(_, s)| mine(s).is_some_and(|x| x.slo_unjudged))
                        .count(),
                },
            );
        }
        schemes.insert(
            name.clone(),
            SchemeSpread {
                fair_speedup: of(&|s| s.fair_speedup),
                mean_latency_ms: of(&|s| s.mean_latency_ms),
                slo_violations: of(&|s| s.slo_violations as f64),
                slo_met_share: of(&|s| s.slo_met_share),
                iops: of(&|s| s.iops),
                tenants,
            },
        );
    }
    let mut claims: Vec<ClaimSpread> = Vec::new();
    for (seed, s) in runs {
        for c in &s.claims {
            let k = match claims.iter().position(|x| x.name == c.name) {
                Some(k) => k,
                None => {
                    claims.push(ClaimSpread {
                        name: c.name.clone(),
                        paper: c.paper.clone(),
                        rule: c.rule.clone(),
                        holds_at: Vec::new(),
                        of: 0,
                        ours: Vec::new(),
                        kind: c.kind,
                    });
                    claims.len() - 1
                }
            };
            let x = &mut claims[k];
            x.ours.push(c.ours.clone());
            if c.ours.starts_with(crate::claims::NOT_EVALUATED) {
                continue;
            }
            x.of += 1;
            if c.holds {
                x.holds_at.push(*seed);
            }
        }
    }
    Spread {
        scenario,
        seeds: runs.iter().map(|(s, _)| *s).collect(),
        schemes,
        claims,
    }
}

/// Seeds that do not parse: the text and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("--seeds `{text}`: {why} (write `1..5` or `1,7,9`)")]
pub struct SeedsError {
    /// The text given.
    pub text: String,
    /// What is wrong.
    pub why: &'static str,
}

/// Seeds from `A..B` (inclusive, as `1..5` for five seeds) or a comma-separated list.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>, SeedsError> {
    let bad = |why: &'static str| SeedsError {
        text: text.to_string(),
        why,
    };
    let seeds: Vec<u64> = if let Some((a, b)) = text.split_once("..") {
        let a: u64 = a
            .trim()
            .parse()
            .map_err(|_| bad("the start is not a number"))?;
        let b: u64 = b
            .trim()
            .trim_start_matches('=')
            .parse()
            .map_err(|_| bad("the end is not a number"))?;
        if b < a {
            return Err(bad("the end is below the start"));
        }
        if b - a >= 1000 {
            return Err(bad("more than 1000 seeds"));
        }
        (a..=b).collect()
    } else {
        text.split(',')
            .map(|s| s.trim().parse::<u64>().map_err(|_| bad("not a number")))
            .collect::<Result<_, _>>()?
    };
    if seeds.is_empty() {
        return Err(bad("no seed"));
    }
    Ok(seeds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_range() {
        let r = Range::of([3.0, 1.0, 2.0, f64::NAN]).unwrap();
        assert_eq!((r.median, r.min, r.max), (2.0, 1.0, 3.0));
        let r = Range::of([4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(r.median, 2.5);
        assert!(Range::of([]).is_none());
        assert_eq!(
            format!("{:.1}", Range::of([1.0, 2.0, 4.0]).unwrap()),
            "2.0 [1.0, 4.0]"
        );
    }

    #[test]
    fn seeds_from_a_range_or_a_list_and_bad_ones_named() {
        assert_eq!(parse_seeds("1..5").unwrap(), vec![1, 2, 3, 4, 5]);
        assert_eq!(parse_seeds("1..=3").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse_seeds("7, 9").unwrap(), vec![7, 9]);
        let e = parse_seeds("5..1").unwrap_err().to_string();
        assert!(e.contains("below the start"), "{e}");
        assert!(parse_seeds("x")
            .unwrap_err()
            .to_string()
            .contains("not a number"));
    }
}
