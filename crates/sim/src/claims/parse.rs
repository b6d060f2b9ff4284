//! The rule language's reading: text to tokens to a parsed [`Rule`] (the grammar is in the
//! `claims` module doc); errors name the rule and what is wrong.
//!
//! Does not own: evaluating a rule against a summary (`eval`), claims (`claims`).

use super::RuleError;

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
pub(super) enum Expr {
    Num(f64),
    Path(Vec<String>),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

/// A condition.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Cond {
    Cmp(Expr, &'static str, Expr),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
}

/// A parsed rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub(super) text: String,
    pub(super) cond: Cond,
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
}
