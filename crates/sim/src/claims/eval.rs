//! A parsed rule evaluated against a run's summary: paths looked up (a scheme's object,
//! the top of the summary, `*` over every tenant), arithmetic, comparisons and logic, and
//! `ours`, the rule with the measured numbers in place of each comparison's sides.
//!
//! Does not own: reading rules (`parse`), claims (`claims`).

use super::parse::{Cond, Expr, Rule};
use super::RuleError;
use serde_json::Value;

/// What a rule is evaluated against: the summary as JSON.
pub struct Context<'a> {
    /// The summary (`schemes` holds one object per scheme).
    pub summary: &'a Value,
    /// Tenant names, for `*`.
    pub tenants: &'a [String],
}

/// A rule that names a scheme which was not run: left unevaluated, not wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("scheme `{scheme}` was not run")]
pub struct NotRun {
    /// The scheme.
    pub scheme: String,
}

enum EvalErr {
    NotRun(NotRun),
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
                return Err(EvalErr::NotRun(NotRun {
                    scheme: path[0].clone(),
                }));
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
    /// Evaluates against `ctx`: `Ok(Err(why))` when a scheme it names was not run, else
    /// whether it holds and the rule with the measured numbers.
    pub fn eval(&self, ctx: &Context) -> Result<Result<(bool, String), NotRun>, RuleError> {
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
