//! Request generation: a [`Workload`] tree becomes a tree of generator nodes (leaves
//! with their own seeded RNG, random picks by weight, sequences), streamed by
//! [`Generator`]. The same workload and seed always give the same requests.

use super::{Kind, Leaf, Workload, ZipfSampler};
use crate::{Op, Request};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Region size in blocks given to each part of a `mix` (2^36 blocks: disjoint for any
/// realistic object count).
const REGION: u64 = 1 << 36;

impl Workload {
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
