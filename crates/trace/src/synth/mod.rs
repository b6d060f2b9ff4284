//! Seeded synthetic workloads: the same spec and seed always give the same requests.
//!
//! Spec grammar (what `--synthetic` and `lachesis trace gen` take):
//!
//! ```text
//! workload := leaf | combinator "(" part (";" part)* ")"
//! part     := workload ["@" weight]
//! leaf     := kind [":" key=value ("," key=value)*]
//! kind     := zipf | uniform | scan | loop
//! ```
//!
//! Leaf keys: `objects` (distinct blocks, default 100000), `requests` (default 1000000),
//! `seed` (default 1), `alpha` (Zipf skew, default 0.9), `block` (bytes per object, default
//! 4096), `len` (bytes per request, default `block`), `read` (share of reads, default 1),
//! `start` (first object number, default 0).
//! * `zipf`: rank r drawn with probability proportional to r^-alpha ([`ZipfSampler`],
//!   rejection-inversion, O(1) per sample), ranks spread over the objects by a fixed
//!   permutation (rank × a unit modulo `objects`), so hot blocks are not all adjacent;
//! * `uniform`: every object equally likely;
//! * `scan`: sequential, never revisiting: passes over `objects` blocks, each pass in a
//!   fresh region;
//! * `loop`: sequential and cyclic over `objects` blocks.
//!
//! Combinators (weights after `@`, default 1):
//! * `mix(A@w;B@w)`: each request comes from a part chosen at random by weight; parts
//!   address disjoint regions; ends when every part is exhausted;
//! * `phases(A;B)`: all of A, then all of B (same region: a phase change of one tenant);
//! * `tenants(A@rate;B@rate)`: interleaves parts at the given rates, part i is tenant i.

use crate::{Op, Request, TraceError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
mod zipf;
pub use zipf::ZipfSampler;

/// The kind of a leaf generator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// Zipf(alpha) popularity.
    Zipf,
    /// Uniform popularity.
    Uniform,
    /// One-pass sequential scans.
    Scan,
    /// Cyclic sequential loop.
    Loop,
}

/// A leaf's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Leaf {
    /// What to generate.
    pub kind: Kind,
    /// Distinct objects (blocks).
    pub objects: u64,
    /// Requests to generate.
    pub requests: u64,
    /// Random seed.
    pub seed: u64,
    /// Zipf skew.
    pub alpha: f64,
    /// Bytes per object.
    pub block: u32,
    /// Bytes per request.
    pub len: u32,
    /// Share of reads in `[0, 1]`.
    pub read: f64,
    /// First object number.
    pub start: u64,
}

/// A synthetic workload: a tree of leaves and combinators.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// One generator.
    Leaf(Leaf),
    /// Random choice by weight per request; parts use disjoint regions.
    Mix(Vec<(Workload, f64)>),
    /// One part after another.
    Phases(Vec<Workload>),
    /// Interleaved tenants at rates; part i is tenant i.
    Tenants(Vec<(Workload, f64)>),
}

fn usage(m: String) -> TraceError {
    TraceError::Usage(m)
}

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
    let mut l = Leaf {
        kind,
        objects: 100_000,
        requests: 1_000_000,
        seed: 1,
        alpha: 0.9,
        block: 4096,
        len: 0,
        read: 1.0,
        start: 0,
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

/// Region size in blocks given to each part of a `mix` (2^36 blocks: disjoint for any
/// realistic object count).
const REGION: u64 = 1 << 36;

impl Leaf {
    /// A leaf of `kind` with the documented defaults.
    pub fn new(kind: Kind) -> Leaf {
        Leaf {
            kind,
            objects: 100_000,
            requests: 1_000_000,
            seed: 1,
            alpha: 0.9,
            block: 4096,
            len: 4096,
            read: 1.0,
            start: 0,
        }
    }

    /// Checks the parameters, naming the bad one.
    pub fn check(&self) -> Result<(), String> {
        if self.objects == 0 {
            return Err("`objects` must be positive".into());
        }
        if self.block == 0 {
            return Err("`block` must be positive".into());
        }
        if !(0.0..=1.0).contains(&self.read) {
            return Err("`read` must be in [0, 1]".into());
        }
        if self.kind == Kind::Zipf && !(self.alpha > 0.0 && self.alpha.is_finite()) {
            return Err("`alpha` must be positive".into());
        }
        Ok(())
    }
}

/// The builder API: constructors for leaves and combinators, and `with_*` setters that
/// apply to every leaf of the tree they are called on. The result is the same value the
/// spec parser gives, e.g.
/// `Workload::zipf(1_000_000, 0.9).with_requests(10_000_000).with_seed(42)` is
/// `zipf:alpha=0.9,objects=1000000,requests=10000000,seed=42`.
impl Workload {
    /// Zipf(`alpha`) popularity over `objects` blocks.
    pub fn zipf(objects: u64, alpha: f64) -> Workload {
        Workload::Leaf(Leaf {
            objects,
            alpha,
            ..Leaf::new(Kind::Zipf)
        })
    }

    /// Uniform popularity over `objects` blocks.
    pub fn uniform(objects: u64) -> Workload {
        Workload::Leaf(Leaf {
            objects,
            ..Leaf::new(Kind::Uniform)
        })
    }

    /// A sequential scan that never revisits a block.
    pub fn scan() -> Workload {
        Workload::Leaf(Leaf::new(Kind::Scan))
    }

    /// A cyclic sequential loop over `objects` blocks.
    pub fn looping(objects: u64) -> Workload {
        Workload::Leaf(Leaf {
            objects,
            ..Leaf::new(Kind::Loop)
        })
    }

    /// Per-request random choice among `parts` by weight (disjoint regions).
    pub fn mix(parts: Vec<(Workload, f64)>) -> Workload {
        Workload::Mix(parts)
    }

    /// `parts` one after another.
    pub fn phases(parts: Vec<Workload>) -> Workload {
        Workload::Phases(parts)
    }

    /// `parts` interleaved at the given rates, part i as tenant i.
    pub fn tenants(parts: Vec<(Workload, f64)>) -> Workload {
        Workload::Tenants(parts)
    }

    fn each_leaf(mut self, f: &impl Fn(&mut Leaf)) -> Workload {
        match &mut self {
            Workload::Leaf(l) => f(l),
            Workload::Mix(p) | Workload::Tenants(p) => {
                for (w, _) in p.iter_mut() {
                    *w = std::mem::replace(w, Workload::scan()).each_leaf(f);
                }
            }
            Workload::Phases(p) => {
                for w in p.iter_mut() {
                    *w = std::mem::replace(w, Workload::scan()).each_leaf(f);
                }
            }
        }
        self
    }

    /// Sets the request count of every leaf.
    pub fn with_requests(self, n: u64) -> Workload {
        self.each_leaf(&|l| l.requests = n)
    }

    /// Sets the seed of every leaf (parts of a combinator still differ: their seeds are
    /// salted by position).
    pub fn with_seed(self, seed: u64) -> Workload {
        self.each_leaf(&|l| l.seed = seed)
    }

    /// Sets the block size of every leaf, and the request length to it.
    pub fn with_block(self, block: u32) -> Workload {
        self.each_leaf(&|l| {
            l.block = block;
            l.len = block;
        })
    }

    /// Sets the request length of every leaf.
    pub fn with_len(self, len: u32) -> Workload {
        self.each_leaf(&|l| l.len = len)
    }

    /// Sets the share of reads of every leaf.
    pub fn with_read_ratio(self, read: f64) -> Workload {
        self.each_leaf(&|l| l.read = read)
    }

    /// Sets the first object number of every leaf.
    pub fn with_start(self, start: u64) -> Workload {
        self.each_leaf(&|l| l.start = start)
    }

    /// Checks every leaf (the parser does this; builders may not).
    pub fn check(&self) -> Result<(), TraceError> {
        match self {
            Workload::Leaf(l) => l.check().map_err(usage),
            Workload::Mix(p) | Workload::Tenants(p) => {
                if p.is_empty() {
                    return Err(usage("a combinator needs at least one part".into()));
                }
                for (w, wt) in p {
                    if !(*wt > 0.0 && wt.is_finite()) {
                        return Err(usage(format!("weight {wt} is not a positive number")));
                    }
                    w.check()?;
                }
                Ok(())
            }
            Workload::Phases(p) => p.iter().try_for_each(Workload::check),
        }
    }

    /// Total requests the workload generates.
    pub fn requests(&self) -> u64 {
        match self {
            Workload::Leaf(l) => l.requests,
            Workload::Mix(p) | Workload::Tenants(p) => p.iter().map(|(w, _)| w.requests()).sum(),
            Workload::Phases(p) => p.iter().map(Workload::requests).sum(),
        }
    }

    /// A fresh generator of the workload's requests.
    pub fn iter(&self) -> Generator {
        Generator {
            node: Node::build(self, 0, 0, 0),
            t: 0,
        }
    }
}

impl IntoIterator for Workload {
    type Item = Request;
    type IntoIter = Generator;
    fn into_iter(self) -> Generator {
        self.iter()
    }
}

impl IntoIterator for &Workload {
    type Item = Request;
    type IntoIter = Generator;
    fn into_iter(self) -> Generator {
        self.iter()
    }
}

/// Streams the requests of a [`Workload`].
pub struct Generator {
    node: Node,
    t: u64,
}

struct LeafGen {
    l: Leaf,
    left: u64,
    rng: StdRng,
    zipf: Option<ZipfSampler>,
    mult: u64,
    next_seq: u64,
    base: u64,
    tenant: u32,
}

enum Node {
    Leaf(Box<LeafGen>),
    Pick {
        parts: Vec<(Node, f64)>,
        rng: Box<StdRng>,
    },
    Seq(Vec<Node>, usize),
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Node {
    fn build(w: &Workload, base: u64, tenant: u32, salt: u64) -> Node {
        match w {
            Workload::Leaf(l) => {
                let mut mult = 0x9E37_79B9_7F4A_7C15u64 % l.objects.max(1);
                while l.objects > 1 && (mult == 0 || gcd(mult, l.objects) != 1) {
                    mult += 1;
                }
                Node::Leaf(Box::new(LeafGen {
                    // Unchecked builder values degrade instead of panicking.
                    l: Leaf {
                        objects: l.objects.max(1),
                        ..l.clone()
                    },
                    left: l.requests,
                    rng: StdRng::seed_from_u64(l.seed ^ salt.wrapping_mul(0x2545_F491_4F6C_DD1D)),
                    zipf: (l.kind == Kind::Zipf)
                        .then(|| ZipfSampler::new(l.objects.max(1), l.alpha))
                        .flatten(),
                    mult: mult.max(1),
                    next_seq: 0,
                    base,
                    tenant,
                }))
            }
            Workload::Mix(parts) => Node::Pick {
                parts: parts
                    .iter()
                    .enumerate()
                    .map(|(i, (p, wt))| {
                        (
                            Node::build(
                                p,
                                base + i as u64 * REGION,
                                tenant,
                                salt * 31 + i as u64 + 1,
                            ),
                            *wt,
                        )
                    })
                    .collect(),
                rng: Box::new(StdRng::seed_from_u64(salt ^ 0x5EED)),
            },
            Workload::Tenants(parts) => Node::Pick {
                parts: parts
                    .iter()
                    .enumerate()
                    .map(|(i, (p, wt))| {
                        (
                            Node::build(p, base, i as u32, salt * 31 + i as u64 + 1),
                            *wt,
                        )
                    })
                    .collect(),
                rng: Box::new(StdRng::seed_from_u64(salt ^ 0x7E4A)),
            },
            Workload::Phases(parts) => Node::Seq(
                parts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| Node::build(p, base, tenant, salt * 31 + i as u64 + 1))
                    .collect(),
                0,
            ),
        }
    }

    fn next(&mut self, t: u64) -> Option<Request> {
        match self {
            Node::Leaf(g) => g.next(t),
            Node::Pick { parts, rng } => loop {
                let total: f64 = parts
                    .iter()
                    .filter(|(n, _)| !n.done())
                    .map(|(_, w)| w)
                    .sum();
                if total <= 0.0 {
                    return None;
                }
                let mut x = rng.gen::<f64>() * total;
                let mut chosen = None;
                for (i, (n, w)) in parts.iter().enumerate() {
                    if n.done() {
                        continue;
                    }
                    chosen = Some(i);
                    if x < *w {
                        break;
                    }
                    x -= w;
                }
                if let Some(r) = chosen.and_then(|i| parts[i].0.next(t)) {
                    return Some(r);
                }
            },
            Node::Seq(parts, i) => {
                while *i < parts.len() {
                    if let Some(r) = parts[*i].next(t) {
                        return Some(r);
                    }
                    *i += 1;
                }
                None
            }
        }
    }

    fn done(&self) -> bool {
        match self {
            Node::Leaf(g) => g.left == 0,
            Node::Pick { parts, .. } => parts.iter().all(|(n, _)| n.done()),
            Node::Seq(parts, i) => parts[*i..].iter().all(Node::done),
        }
    }
}

impl LeafGen {
    fn next(&mut self, t: u64) -> Option<Request> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let l = &self.l;
        let obj = match l.kind {
            Kind::Zipf => {
                let rank = self.zipf.as_ref().map_or(1, |z| z.sample(&mut self.rng)) - 1;
                // rank -> object by a fixed permutation (multiplication by a unit mod n).
                match rank.checked_mul(self.mult) {
                    Some(p) => p % l.objects,
                    None => ((rank as u128 * self.mult as u128) % l.objects as u128) as u64,
                }
            }
            Kind::Uniform => self.rng.gen_range(0..l.objects),
            Kind::Scan => {
                let s = self.next_seq;
                self.next_seq += 1;
                s
            }
            Kind::Loop => {
                let s = self.next_seq % l.objects;
                self.next_seq += 1;
                s
            }
        };
        let op = if l.read >= 1.0 || self.rng.gen::<f64>() < l.read {
            Op::Read
        } else {
            Op::Write
        };
        Some(Request {
            time_us: t,
            tenant: self.tenant,
            volume: 0,
            op,
            offset: (self.base + l.start + obj) * l.block as u64,
            len: l.len,
        })
    }
}

impl Iterator for Generator {
    type Item = Request;
    #[inline]
    fn next(&mut self) -> Option<Request> {
        // One request every 100 microseconds of trace time.
        self.t += 100;
        self.node.next(self.t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn objs(spec: &str) -> Vec<u64> {
        parse(spec)
            .unwrap()
            .iter()
            .map(|r| r.offset / 4096)
            .collect()
    }

    #[test]
    fn same_seed_same_trace() {
        let a: Vec<Request> = parse("zipf:objects=1000,requests=5000,seed=9")
            .unwrap()
            .iter()
            .collect();
        let b: Vec<Request> = parse("zipf:objects=1000,requests=5000,seed=9")
            .unwrap()
            .iter()
            .collect();
        let c: Vec<Request> = parse("zipf:objects=1000,requests=5000,seed=10")
            .unwrap()
            .iter()
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 5000);
    }

    #[test]
    fn zipf_top_frequency_matches_theory() {
        let n = 1000u64;
        let alpha = 1.0;
        let v = objs(&format!(
            "zipf:alpha={alpha},objects={n},requests=200000,seed=3"
        ));
        let mut counts: HashMap<u64, u64> = HashMap::new();
        for o in &v {
            *counts.entry(*o).or_default() += 1;
        }
        let top = *counts.values().max().unwrap() as f64 / v.len() as f64;
        let h: f64 = (1..=n).map(|i| 1.0 / (i as f64).powf(alpha)).sum();
        let expect = 1.0 / h;
        assert!(
            (top - expect).abs() < 0.01,
            "top share {top}, theory {expect}"
        );
        assert!(v.iter().all(|&o| o < n));
    }

    #[test]
    fn scan_and_loop_patterns() {
        assert_eq!(objs("loop:objects=3,requests=7"), vec![0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(objs("scan:objects=3,requests=5"), vec![0, 1, 2, 3, 4]);
        assert_eq!(
            objs("phases(loop:objects=2,requests=3;scan:objects=9,requests=2,start=100)"),
            vec![0, 1, 0, 100, 101]
        );
    }

    #[test]
    fn mix_and_tenants() {
        let w = parse("mix(loop:objects=2,requests=1000@3;scan:requests=1000@1)").unwrap();
        let v: Vec<Request> = w.iter().collect();
        assert_eq!(v.len(), 2000);
        let first_half_loop = v[..1000].iter().filter(|r| r.offset / 4096 < 2).count();
        assert!((650..850).contains(&first_half_loop), "{first_half_loop}");
        let t: Vec<Request> = parse("tenants(loop:requests=100;loop:requests=300)")
            .unwrap()
            .iter()
            .collect();
        assert_eq!(t.iter().filter(|r| r.tenant == 1).count(), 300);
        // Both tenants loop over object 0 first, yet their keys differ.
        let a = t.iter().find(|r| r.tenant == 0 && r.offset == 0).unwrap();
        let b = t.iter().find(|r| r.tenant == 1 && r.offset == 0).unwrap();
        assert_ne!(a.object_key(), b.object_key());
    }

    #[test]
    fn parse_errors_are_clear() {
        for (spec, needle) in [
            ("zipf:alpha=x", "`alpha`"),
            ("zipf:objects=0", "objects"),
            ("mix(zipf;", "expected"),
            ("wobble", "unknown workload"),
            ("zipf:colour=red", "unknown key"),
            ("mix(zipf@-1)", "weight"),
        ] {
            let e = parse(spec).unwrap_err().to_string();
            assert!(e.contains(needle), "{spec}: {e}");
        }
    }

    #[test]
    fn builder_equals_spec() {
        let b = Workload::zipf(1_000_000, 0.9)
            .with_requests(10_000_000)
            .with_seed(42);
        assert_eq!(
            b,
            parse("zipf:alpha=0.9,objects=1000000,requests=10000000,seed=42").unwrap()
        );
        let m = Workload::mix(vec![
            (Workload::looping(2).with_requests(10), 3.0),
            (Workload::scan().with_requests(5), 1.0),
        ])
        .with_block(512);
        assert_eq!(
            m,
            parse("mix(loop:objects=2,requests=10,block=512@3;scan:requests=5,block=512)").unwrap()
        );
        assert!(Workload::zipf(0, 1.0).check().is_err());
        // An unchecked bad builder value degrades instead of panicking.
        assert_eq!(Workload::uniform(0).with_requests(3).iter().count(), 3);
    }

    #[test]
    fn read_ratio_and_alignment() {
        let v: Vec<Request> =
            parse("uniform:objects=100,requests=20000,read=0.25,block=8192,seed=5")
                .unwrap()
                .iter()
                .collect();
        let reads = v.iter().filter(|r| r.op == Op::Read).count();
        assert!((4500..5500).contains(&reads), "{reads}");
        assert!(v.iter().all(|r| r.offset % 8192 == 0 && r.len == 8192));
        assert!(v.iter().all(|r| r.offset / 8192 < 100));
    }

    #[test]
    fn tenants_interleave_at_their_rates() {
        let v: Vec<Request> = parse("tenants(uniform:requests=30000@3;uniform:requests=30000@1)")
            .unwrap()
            .iter()
            .collect();
        // While both run, tenant 0 issues three requests for each of tenant 1's.
        let first = &v[..20_000];
        let t0 = first.iter().filter(|r| r.tenant == 0).count();
        assert!((14_600..15_400).contains(&t0), "{t0}");
        assert_eq!(v.len(), 60_000);
    }
}
