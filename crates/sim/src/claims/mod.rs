//! Claims: a scenario's statements about its own results, written as rules and checked
//! against the run's summary.
//!
//! A scenario file states each claim as
//! ```toml
//! [[claim]]
//! name = "MLMS meets every SLO and beats fair share"
//! paper = "fair speedup +5.8 % (HPC), no SLO violated"
//! rule = "mlms.fair_speedup >= 1.058 and mlms.slo_violations == 0"
//! explain = "why it may not hold here"   # optional, shown when it does not hold
//! ci = true                              # optional: the quick CI run asserts it
//! kind = "paper"                         # paper (default) | ours | sanity
//! ```
//! A claim's kind says whose it is: `paper` — a result the paper reports, in its metric;
//! `ours` — something we claim of our own scheme (beside fair share, a shared cache and the
//! paper's scheme); `sanity` — a check that the simulation behaves (an upper bound holds,
//! exclusive levels hold more than inclusive ones), kept out of the count of claims.
//! and `summary.json` gets `"claims": [{"name", "paper", "rule", "ours", "holds", ...}]`.
//!
//! The rule language:
//! ```text
//! rule    := and ("or" and)*
//! and     := cmp ("and" cmp)*
//! cmp     := "not" cmp | "(" rule ")" | expr OP expr     OP: <= >= < > == !=
//! expr    := term (("+" | "-") term)*
//! term    := factor (("*" | "/") factor)*
//! factor  := NUMBER | PATH | FUNC "(" expr ("," expr)* ")" | "(" expr ")" | "-" factor
//! FUNC    := min | max | abs
//! PATH    := NAME ("." NAME)*        e.g. mlms.fair_speedup, fair.tenants.db.iops,
//!                                    sopa.phase_hit_ratio.1
//! ```
//! A path starts with a scheme name and walks the scheme's summary (a number at the end;
//! `mean_latency` finds `mean_latency_ms`); a path whose first name is not a scheme walks
//! the top of the summary. A `*` in a path stands for every tenant: the comparison holds
//! when it holds for each, and `ours` shows the tenant with the least margin. Names may
//! contain `-` (`first-only`), so a binary minus needs spaces around it.
//!
//! `ours` is the rule with every comparison's two sides replaced by the numbers measured,
//! so the table shows what was compared. A rule that does not parse is a scenario error
//! naming the file, the claim and the reason; a path that names a scheme which was not run
//! leaves the claim unevaluated (`holds = false`, `ours` says so); any other path that does
//! not resolve is an error naming the claim and the path.
//!
//! This module owns claims (as stated, as checked) and [`check`]; the rule language is
//! read in `parse` and evaluated in `eval`.

mod eval;
mod parse;

pub use eval::{Context, NotRun};
pub use parse::Rule;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How `ours` starts for a claim that names a scheme which was not run.
pub const NOT_EVALUATED: &str = "not evaluated: ";

/// A claim as the scenario states it.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimSpec {
    /// What is claimed.
    pub name: String,
    /// The paper's number or statement.
    pub paper: String,
    /// The rule checked against the run.
    pub rule: String,
    /// Why it may not hold here (shown when it does not).
    #[serde(default)]
    pub explain: Option<String>,
    /// Whether the quick CI run asserts it.
    #[serde(default)]
    pub ci: bool,
    /// Whose claim it is.
    #[serde(default)]
    pub kind: ClaimKind,
}

/// Whose claim a claim is (see the module doc).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ClaimKind {
    /// A result the paper reports.
    #[default]
    Paper,
    /// A claim of ours about our scheme.
    Ours,
    /// A check that the simulation behaves, not a claim.
    Sanity,
}

impl ClaimKind {
    /// Its name as written in scenario files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimKind::Paper => "paper",
            ClaimKind::Ours => "ours",
            ClaimKind::Sanity => "sanity",
        }
    }
}

/// A claim checked against a run (`summary.json`'s `claims`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// What is claimed.
    pub name: String,
    /// The paper's number or statement.
    pub paper: String,
    /// The rule.
    pub rule: String,
    /// The rule with our measured numbers.
    pub ours: String,
    /// Whether it holds in this run.
    pub holds: bool,
    /// The scenario's explanation, when it does not hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<String>,
    /// Whether the quick CI run asserts it.
    pub ci: bool,
    /// Whose claim it is.
    #[serde(default)]
    pub kind: ClaimKind,
}

/// A rule that does not parse or evaluate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("rule `{rule}`: {reason}")]
pub struct RuleError {
    /// The rule text.
    pub rule: String,
    /// What is wrong.
    pub reason: String,
}

/// Checks every claim against `summary` (as JSON); errors name the claim.
pub fn check(
    specs: &[ClaimSpec],
    summary: &Value,
    tenants: &[String],
) -> Result<Vec<Claim>, RuleError> {
    let ctx = Context { summary, tenants };
    specs
        .iter()
        .map(|s| {
            let rule = Rule::parse(&s.rule).map_err(|e| RuleError {
                rule: e.rule,
                reason: format!("claim \"{}\": {}", s.name, e.reason),
            })?;
            let r = rule.eval(&ctx).map_err(|e| RuleError {
                rule: e.rule,
                reason: format!("claim \"{}\": {}", s.name, e.reason),
            })?;
            let (holds, ours) = r.unwrap_or_else(|why| (false, format!("{NOT_EVALUATED}{why}")));
            Ok(Claim {
                name: s.name.clone(),
                paper: s.paper.clone(),
                rule: s.rule.clone(),
                ours,
                holds,
                explain: if holds { None } else { s.explain.clone() },
                ci: s.ci,
                kind: s.kind,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary() -> Value {
        json!({
            "scenario": "x",
            "schemes": {
                "fair": {"fair_speedup": 1.0, "mean_latency_ms": 4.0, "slo_violations": 1,
                         "phase_hit_ratio": [0.5, 0.25],
                         "tenants": {"a": {"iops": 100.0}, "b": {"iops": 50.0}}},
                "mlms": {"fair_speedup": 1.07, "mean_latency_ms": 3.0, "slo_violations": 0,
                         "phase_hit_ratio": [0.6, 0.2],
                         "tenants": {"a": {"iops": 120.0}, "b": {"iops": 49.0}}},
                "first-only": {"fair_speedup": 1.01}
            }
        })
    }

    fn eval(rule: &str) -> Result<(bool, String), String> {
        let s = summary();
        let t = vec!["a".to_string(), "b".to_string()];
        Rule::parse(rule)
            .unwrap()
            .eval(&Context {
                summary: &s,
                tenants: &t,
            })
            .unwrap()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn comparisons_arithmetic_and_logic() {
        let (ok, ours) = eval("mlms.fair_speedup >= 1.058 and mlms.slo_violations == 0").unwrap();
        assert!(ok);
        assert_eq!(ours, "1.070 >= 1.058 and 0 == 0");
        assert!(
            eval("mlms.mean_latency <= 0.8 * fair.mean_latency")
                .unwrap()
                .0
        );
        assert!(
            !eval("mlms.mean_latency <= 0.7 * fair.mean_latency")
                .unwrap()
                .0
        );
        assert!(eval("first-only.fair_speedup - 1 < 0.02").unwrap().0);
        assert!(eval("not (fair.slo_violations == 0) or 1 > 2").unwrap().0);
        assert!(eval("(mlms.fair_speedup - 1) * 100 >= 5.8").unwrap().0);
        assert!(
            eval("mlms.phase_hit_ratio.0 >= max(fair.phase_hit_ratio.0, 0.55)")
                .unwrap()
                .0
        );
        assert!(eval("abs(-2) == 2 and min(3, 1, 2) == 1").unwrap().0);
    }

    #[test]
    fn a_star_means_every_tenant_and_ours_names_the_worst() {
        let (ok, ours) = eval("mlms.tenants.*.iops >= 0.95 * fair.tenants.*.iops").unwrap();
        assert!(ok, "{ours}");
        assert!(ours.contains("(b)"), "{ours}");
        let (ok, _) = eval("mlms.tenants.*.iops >= fair.tenants.*.iops").unwrap();
        assert!(!ok);
    }

    #[test]
    fn a_scheme_not_run_leaves_the_claim_unevaluated() {
        assert!(eval("lachesis.fair_speedup >= 1")
            .unwrap_err()
            .contains("lachesis"));
    }

    #[test]
    fn errors_name_the_rule_and_reason() {
        for (rule, reason) in [
            ("mlms.fair_speedup >=", "end"),
            ("mlms.fair_speedup 1", "comparison"),
            ("mlms.fair_speedup >= 1 junk", "after the rule"),
            ("pow(2) > 1", "unknown function"),
            ("mlms.fair_speedup >= 1 ; 2", "unexpected `;`"),
        ] {
            let e = Rule::parse(rule).unwrap_err().to_string();
            assert!(e.contains(rule) && e.contains(reason), "{e}");
        }
        let s = summary();
        let e = Rule::parse("mlms.nonsense >= 1")
            .unwrap()
            .eval(&Context {
                summary: &s,
                tenants: &[],
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("nonsense"), "{e}");
    }

    #[test]
    fn check_fills_the_claims() {
        let specs = vec![ClaimSpec {
            name: "c".into(),
            paper: "+5.8 %".into(),
            rule: "mlms.fair_speedup >= 1.1".into(),
            explain: Some("smaller gap here".into()),
            ci: false,
            kind: ClaimKind::Paper,
        }];
        let c = check(&specs, &summary(), &[]).unwrap();
        assert!(!c[0].holds);
        assert_eq!(c[0].ours, "1.070 >= 1.100");
        assert_eq!(c[0].explain.as_deref(), Some("smaller gap here"));
    }
}
