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
//! ```
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

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How `ours` starts for a claim that names a scheme which was not run.
pub const NOT_EVALUATED: &str = "not evaluated: ";

/// A claim as the scenario states it.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
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

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Path(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    And,
    Or,
    Not,
}

fn lex(s: &str) -> Result<Vec<Tok>, String> {
    let c: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let name_char = |ch: char| ch.is_alphanumeric() || ch == '_' || ch == '.' || ch == '*';
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
            continue;
        }
        let two: String = c[i..(i + 2).min(c.len())].iter().collect();
        let op2 = match two.as_str() {
            "<=" => Some("<="),
            ">=" => Some(">="),
            "==" => Some("=="),
            "!=" => Some("!="),
            _ => None,
        };
        if let Some(o) = op2 {
            out.push(Tok::Op(o));
            i += 2;
            continue;
        }
        match ch {
            '<' => out.push(Tok::Op("<")),
            '>' => out.push(Tok::Op(">")),
            '(' => out.push(Tok::LParen),
            ')' => out.push(Tok::RParen),
            ',' => out.push(Tok::Comma),
            '+' => out.push(Tok::Plus),
            '-' => out.push(Tok::Minus),
            '*' => out.push(Tok::Star),
            '/' => out.push(Tok::Slash),
            _ if ch.is_ascii_digit() => {
                let start = i;
                while i < c.len()
                    && (c[i].is_ascii_digit()
                        || c[i] == '.'
                        || ((c[i] == 'e' || c[i] == 'E') && i + 1 < c.len())
                        || ((c[i] == '-' || c[i] == '+') && (c[i - 1] == 'e' || c[i - 1] == 'E')))
                {
                    i += 1;
                }
                let t: String = c[start..i].iter().collect();
                let v = t
                    .parse::<f64>()
                    .map_err(|_| format!("`{t}` is not a number"))?;
                out.push(Tok::Num(v));
                continue;
            }
            _ if ch.is_alphabetic() || ch == '_' => {
                let start = i;
                // A `-` joins a name when a name character follows it directly.
                while i < c.len()
                    && (name_char(c[i])
                        || (c[i] == '-' && i + 1 < c.len() && c[i + 1].is_alphanumeric()))
                {
                    i += 1;
                }
                let t: String = c[start..i].iter().collect();
                out.push(match t.as_str() {
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    _ => Tok::Path(t),
                });
                continue;
            }
            _ => return Err(format!("unexpected `{ch}` at character {}", i + 1)),
        }
        i += 1;
    }
    Ok(out)
}

/// An arithmetic expression.
#[derive(Clone, Debug, PartialEq)]
enum Expr {
    Num(f64),
    Path(Vec<String>),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

/// A condition.
#[derive(Clone, Debug, PartialEq)]
enum Cond {
    Cmp(Expr, &'static str, Expr),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
}

/// A parsed rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    text: String,
    cond: Cond,
}

struct Parser {
    t: Vec<Tok>,
    k: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.t.get(self.k)
    }
    fn next(&mut self) -> Option<Tok> {
        let x = self.t.get(self.k).cloned();
        self.k += 1;
        x
    }
    fn expect(&mut self, want: Tok, what: &str) -> Result<(), String> {
        match self.next() {
            Some(t) if t == want => Ok(()),
            Some(t) => Err(format!("expected {what}, found {t:?}")),
            None => Err(format!("expected {what}, found the end")),
        }
    }
    fn or(&mut self) -> Result<Cond, String> {
        let mut a = self.and()?;
        while self.peek() == Some(&Tok::Or) {
            self.k += 1;
            a = Cond::Or(Box::new(a), Box::new(self.and()?));
        }
        Ok(a)
    }
    fn and(&mut self) -> Result<Cond, String> {
        let mut a = self.cmp()?;
        while self.peek() == Some(&Tok::And) {
            self.k += 1;
            a = Cond::And(Box::new(a), Box::new(self.cmp()?));
        }
        Ok(a)
    }
    fn cmp(&mut self) -> Result<Cond, String> {
        if self.peek() == Some(&Tok::Not) {
            self.k += 1;
            return Ok(Cond::Not(Box::new(self.cmp()?)));
        }
        // A parenthesised condition, or an expression that starts with a parenthesis.
        if self.peek() == Some(&Tok::LParen) {
            let save = self.k;
            self.k += 1;
            if let Ok(c) = self.or() {
                if self.peek() == Some(&Tok::RParen) {
                    self.k += 1;
                    if !matches!(
                        self.peek(),
                        Some(Tok::Op(_) | Tok::Plus | Tok::Minus | Tok::Star | Tok::Slash)
                    ) {
                        return Ok(c);
                    }
                }
            }
            self.k = save;
        }
        let a = self.expr()?;
        let op = match self.next() {
            Some(Tok::Op(o)) => o,
            Some(t) => {
                return Err(format!(
                    "expected a comparison (<=, >=, ==, ...), found {t:?}"
                ))
            }
            None => return Err("expected a comparison (<=, >=, ==, ...), found the end".into()),
        };
        let b = self.expr()?;
        Ok(Cond::Cmp(a, op, b))
    }
    fn expr(&mut self) -> Result<Expr, String> {
        let mut a = self.term()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Plus) => '+',
                Some(Tok::Minus) => '-',
                _ => return Ok(a),
            };
            self.k += 1;
            a = Expr::Bin(op, Box::new(a), Box::new(self.term()?));
        }
    }
    fn term(&mut self) -> Result<Expr, String> {
        let mut a = self.factor()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Star) => '*',
                Some(Tok::Slash) => '/',
                _ => return Ok(a),
            };
            self.k += 1;
            a = Expr::Bin(op, Box::new(a), Box::new(self.factor()?));
        }
    }
    fn factor(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Tok::Num(v)) => Ok(Expr::Num(v)),
            Some(Tok::Minus) => Ok(Expr::Neg(Box::new(self.factor()?))),
            Some(Tok::LParen) => {
                let e = self.expr()?;
                self.expect(Tok::RParen, "`)`")?;
                Ok(e)
            }
            Some(Tok::Path(p)) => {
                if self.peek() == Some(&Tok::LParen) {
                    if !matches!(p.as_str(), "min" | "max" | "abs") {
                        return Err(format!("unknown function `{p}` (min, max, abs)"));
                    }
                    self.k += 1;
                    let mut args = vec![self.expr()?];
                    while self.peek() == Some(&Tok::Comma) {
                        self.k += 1;
                        args.push(self.expr()?);
                    }
                    self.expect(Tok::RParen, "`)`")?;
                    if p == "abs" && args.len() != 1 {
                        return Err("abs takes one argument".into());
                    }
                    return Ok(Expr::Call(p, args));
                }
                let parts: Vec<String> = p.split('.').map(str::to_string).collect();
                if parts.iter().any(|s| s.is_empty()) {
                    return Err(format!("`{p}` is not a path (names joined by dots)"));
                }
                Ok(Expr::Path(parts))
            }
            Some(t) => Err(format!("expected a number or a path, found {t:?}")),
            None => Err("expected a number or a path, found the end".into()),
        }
    }
}

/// What a rule is evaluated against: the summary as JSON.
pub struct Context<'a> {
    /// The summary (`schemes` holds one object per scheme).
    pub summary: &'a Value,
    /// Tenant names, for `*`.
    pub tenants: &'a [String],
}

enum EvalErr {
    NotRun(String),
    Bad(String),
}

fn lookup(ctx: &Context, path: &[String]) -> Result<f64, EvalErr> {
    let schemes = ctx.summary.get("schemes");
    let (mut v, rest): (&Value, &[String]) = match schemes.and_then(|s| s.get(&path[0])) {
        Some(s) => (s, &path[1..]),
        None => {
            if let Some(v) = ctx.summary.get(&path[0]) {
                (v, &path[1..])
            } else if path.len() >= 2 {
                return Err(EvalErr::NotRun(format!("scheme `{}` was not run", path[0])));
            } else {
                return Err(EvalErr::Bad(format!("`{}` is not a scheme", path[0])));
            }
        }
    };
    for (k, name) in rest.iter().enumerate() {
        let next = match v {
            Value::Object(m) => m.get(name).or_else(|| {
                if k + 1 == rest.len() {
                    m.get(&format!("{name}_ms"))
                } else {
                    None
                }
            }),
            Value::Array(a) => name.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        v = next.ok_or_else(|| EvalErr::Bad(format!("`{}`: no `{name}` there", path.join("."))))?;
    }
    match v {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| EvalErr::Bad(format!("`{}` is not a number", path.join(".")))),
        Value::Bool(b) => Ok(*b as u8 as f64),
        Value::Null => Err(EvalErr::Bad(format!("`{}` has no value", path.join(".")))),
        _ => Err(EvalErr::Bad(format!(
            "`{}` is not a number (give a longer path)",
            path.join(".")
        ))),
    }
}

fn eval_expr(ctx: &Context, e: &Expr, tenant: Option<&str>) -> Result<f64, EvalErr> {
    Ok(match e {
        Expr::Num(v) => *v,
        Expr::Path(p) => {
            let p: Vec<String> = p
                .iter()
                .map(|s| match (s.as_str(), tenant) {
                    ("*", Some(t)) => t.to_string(),
                    _ => s.clone(),
                })
                .collect();
            lookup(ctx, &p)?
        }
        Expr::Neg(a) => -eval_expr(ctx, a, tenant)?,
        Expr::Bin(op, a, b) => {
            let (x, y) = (eval_expr(ctx, a, tenant)?, eval_expr(ctx, b, tenant)?);
            match op {
                '+' => x + y,
                '-' => x - y,
                '*' => x * y,
                _ => x / y,
            }
        }
        Expr::Call(f, args) => {
            let v: Vec<f64> = args
                .iter()
                .map(|a| eval_expr(ctx, a, tenant))
                .collect::<Result<_, _>>()?;
            match f.as_str() {
                "min" => v.iter().copied().fold(f64::INFINITY, f64::min),
                "max" => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                _ => v[0].abs(),
            }
        }
    })
}

fn has_star(e: &Expr) -> bool {
    match e {
        Expr::Path(p) => p.iter().any(|s| s == "*"),
        Expr::Neg(a) => has_star(a),
        Expr::Bin(_, a, b) => has_star(a) || has_star(b),
        Expr::Call(_, v) => v.iter().any(has_star),
        Expr::Num(_) => false,
    }
}

fn fmt_num(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e12 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

fn compare(x: f64, op: &str, y: f64) -> bool {
    match op {
        "<=" => x <= y,
        ">=" => x >= y,
        "<" => x < y,
        ">" => x > y,
        "==" => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        _ => (x - y).abs() > 1e-9 * x.abs().max(y.abs()).max(1.0),
    }
}

fn eval_cond(ctx: &Context, c: &Cond) -> Result<(bool, String), EvalErr> {
    Ok(match c {
        Cond::Cmp(a, op, b) => {
            if has_star(a) || has_star(b) {
                let mut all = true;
                let mut worst: Option<(f64, String)> = None;
                for t in ctx.tenants {
                    let (x, y) = (eval_expr(ctx, a, Some(t))?, eval_expr(ctx, b, Some(t))?);
                    let ok = compare(x, op, y);
                    all &= ok;
                    // Margin: how far the comparison is from failing (negative: failed).
                    let margin = match *op {
                        "<=" | "<" => (y - x) / y.abs().max(1e-12),
                        ">=" | ">" => (x - y) / y.abs().max(1e-12),
                        _ => {
                            if ok {
                                1.0
                            } else {
                                -1.0
                            }
                        }
                    };
                    let s = format!("{} {op} {} ({t})", fmt_num(x), fmt_num(y));
                    if worst.as_ref().map_or(true, |w| margin < w.0) {
                        worst = Some((margin, s));
                    }
                }
                (
                    all,
                    format!(
                        "every tenant; least margin: {}",
                        worst.map_or("no tenant".into(), |w| w.1)
                    ),
                )
            } else {
                let (x, y) = (eval_expr(ctx, a, None)?, eval_expr(ctx, b, None)?);
                (
                    compare(x, op, y),
                    format!("{} {op} {}", fmt_num(x), fmt_num(y)),
                )
            }
        }
        Cond::And(a, b) => {
            let (x, s) = eval_cond(ctx, a)?;
            let (y, t) = eval_cond(ctx, b)?;
            (x && y, format!("{s} and {t}"))
        }
        Cond::Or(a, b) => {
            let (x, s) = eval_cond(ctx, a)?;
            let (y, t) = eval_cond(ctx, b)?;
            (x || y, format!("({s}) or ({t})"))
        }
        Cond::Not(a) => {
            let (x, s) = eval_cond(ctx, a)?;
            (!x, format!("not ({s})"))
        }
    })
}

impl Rule {
    /// Parses a rule (grammar in the module doc).
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let err = |reason: String| RuleError {
            rule: text.to_string(),
            reason,
        };
        let t = lex(text).map_err(err)?;
        if t.is_empty() {
            return Err(err("the rule is empty".into()));
        }
        let mut p = Parser { t, k: 0 };
        let cond = p.or().map_err(err)?;
        if let Some(extra) = p.peek() {
            return Err(err(format!("unexpected {extra:?} after the rule")));
        }
        Ok(Rule {
            text: text.to_string(),
            cond,
        })
    }

    /// Evaluates against `ctx`: `Ok(Err(why))` when a scheme it names was not run, else
    /// whether it holds and the rule with the measured numbers.
    pub fn eval(&self, ctx: &Context) -> Result<Result<(bool, String), String>, RuleError> {
        match eval_cond(ctx, &self.cond) {
            Ok(r) => Ok(Ok(r)),
            Err(EvalErr::NotRun(why)) => Ok(Err(why)),
            Err(EvalErr::Bad(reason)) => Err(RuleError {
                rule: self.text.clone(),
                reason,
            }),
        }
    }
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
        }];
        let c = check(&specs, &summary(), &[]).unwrap();
        assert!(!c[0].holds);
        assert_eq!(c[0].ours, "1.070 >= 1.100");
        assert_eq!(c[0].explain.as_deref(), Some("smaller gap here"));
    }
}
