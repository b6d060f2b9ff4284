//! The text form of a workload (the grammar is in the [parent module's docs](super)):
//! a small recursive-descent parser over the spec's bytes. Errors name the spec, the
//! character position and what was expected; a leaf's bad key names the key.

use super::{usage, Kind, Leaf, Workload};
use crate::TraceError;

/// Parses a workload spec (see the module doc for the grammar).
pub fn parse(spec: &str) -> Result<Workload, TraceError> {
    let mut p = Parser {
        s: spec.as_bytes(),
        i: 0,
        spec,
    };
    let w = p.workload()?;
    p.skip_ws();
    if p.i != p.s.len() {
        return Err(usage(format!(
            "workload `{spec}`: unexpected `{}` at character {}",
            &spec[p.i..],
            p.i + 1
        )));
    }
    Ok(w)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    spec: &'a str,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn err(&self, m: &str) -> TraceError {
        usage(format!(
            "workload `{}`: {m} at character {}",
            self.spec,
            self.i + 1
        ))
    }

    fn name(&mut self) -> String {
        self.skip_ws();
        let st = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
        {
            self.i += 1;
        }
        self.spec[st..self.i].to_ascii_lowercase()
    }

    fn until_delim(&mut self) -> &str {
        let st = self.i;
        while self.i < self.s.len() && !matches!(self.s[self.i], b';' | b')' | b'@') {
            self.i += 1;
        }
        &self.spec[st..self.i]
    }

    fn workload(&mut self) -> Result<Workload, TraceError> {
        let name = self.name();
        self.skip_ws();
        match name.as_str() {
            "mix" | "phases" | "tenants" => {
                if self.s.get(self.i) != Some(&b'(') {
                    return Err(self.err(&format!("`{name}` needs `(`")));
                }
                self.i += 1;
                let mut parts = Vec::new();
                loop {
                    let w = self.workload()?;
                    self.skip_ws();
                    let mut weight = 1.0;
                    if self.s.get(self.i) == Some(&b'@') {
                        self.i += 1;
                        let t = self.until_delim().trim().to_string();
                        weight = t
                            .parse::<f64>()
                            .ok()
                            .filter(|x| x.is_finite() && *x > 0.0)
                            .ok_or_else(|| {
                                self.err(&format!("weight `{t}` is not a positive number"))
                            })?;
                    }
                    parts.push((w, weight));
                    match self.s.get(self.i) {
                        Some(b';') => self.i += 1,
                        Some(b')') => {
                            self.i += 1;
                            break;
                        }
                        _ => return Err(self.err("expected `;` or `)`")),
                    }
                }
                Ok(match name.as_str() {
                    "mix" => Workload::Mix(parts),
                    "tenants" => Workload::Tenants(parts),
                    _ => Workload::Phases(parts.into_iter().map(|p| p.0).collect()),
                })
            }
            "zipf" | "uniform" | "scan" | "loop" => {
                let kind = match name.as_str() {
                    "zipf" => Kind::Zipf,
                    "uniform" => Kind::Uniform,
                    "scan" => Kind::Scan,
                    _ => Kind::Loop,
                };
                let params = if self.s.get(self.i) == Some(&b':') {
                    self.i += 1;
                    self.until_delim().to_string()
                } else {
                    String::new()
                };
                leaf(kind, &params)
                    .map_err(|m| usage(format!("workload `{}`: {name}: {m}", self.spec)))
            }
            "" => {
                Err(self
                    .err("expected a workload (zipf, uniform, scan, loop, mix, phases, tenants)"))
            }
            other => Err(self.err(&format!("unknown workload `{other}`"))),
        }
    }
}

fn leaf(kind: Kind, params: &str) -> Result<Workload, String> {
    // `len` 0 until given: it defaults to the final `block`.
    let mut l = Leaf {
        len: 0,
        ..Leaf::new(kind)
    };
    for kv in params.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("`{kv}` is not key=value"))?;
        let int = || {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("`{k}`: `{v}` is not a non-negative integer"))
        };
        let real = || {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("`{k}`: `{v}` is not a number"))
        };
        match k.trim() {
            "objects" => l.objects = int()?,
            "requests" => l.requests = int()?,
            "seed" => l.seed = int()?,
            "alpha" => l.alpha = real()?,
            "block" => {
                l.block = int()?
                    .try_into()
                    .map_err(|_| "`block` is too large".to_string())?
            }
            "len" => {
                l.len = int()?
                    .try_into()
                    .map_err(|_| "`len` is too large".to_string())?
            }
            "read" => l.read = real()?,
            "start" => l.start = int()?,
            other => return Err(format!("unknown key `{other}`")),
        }
    }
    l.check()?;
    if l.len == 0 {
        l.len = l.block;
    }
    Ok(Workload::Leaf(l))
}
