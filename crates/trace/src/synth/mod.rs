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

//!
//! Layout: this file holds the workload types and the builder API; [`spec`] parses the
//! text form into them; `generate` turns a [`Workload`] into requests ([`Generator`]);
//! `zipf` is the Zipf sampler.

use crate::TraceError;

mod generate;
pub mod spec;
#[cfg(test)]
mod tests;
mod zipf;

pub use generate::Generator;
pub use spec::parse;
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

pub(crate) fn usage(m: String) -> TraceError {
    TraceError::Usage(m)
}

/// A leaf's parameter out of range ([`Leaf::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeafError {
    /// No objects.
    #[error("`objects` must be positive")]
    ZeroObjects,
    /// A block of no bytes.
    #[error("`block` must be positive")]
    ZeroBlock,
    /// A read share outside [0, 1].
    #[error("`read` must be in [0, 1]")]
    ReadShare,
    /// A Zipf exponent that is not a positive number.
    #[error("`alpha` must be positive")]
    Alpha,
}

/// The spec parser reports a bad leaf as its message.
impl From<LeafError> for String {
    fn from(e: LeafError) -> String {
        e.to_string()
    }
}

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
    pub fn check(&self) -> Result<(), LeafError> {
        if self.objects == 0 {
            return Err(LeafError::ZeroObjects);
        }
        if self.block == 0 {
            return Err(LeafError::ZeroBlock);
        }
        if !(0.0..=1.0).contains(&self.read) {
            return Err(LeafError::ReadShare);
        }
        if self.kind == Kind::Zipf && !(self.alpha > 0.0 && self.alpha.is_finite()) {
            return Err(LeafError::Alpha);
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
            Workload::Leaf(l) => Ok(l.check()?),
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
}
