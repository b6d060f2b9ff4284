//! What the controller controls: level-1 hosts, level-2 storage servers, how the levels
//! relate, and the tenants with their placement and service-level objectives.
//!
//! Sizes are whole blocks of [`Topology::block_size`] bytes. A tenant runs on one host
//! (its level-1 partition lives there) and stripes its data over one or more storage
//! servers (a level-2 partition on each). [`Topology::validate`] checks every reference
//! and number once, in time linear in tenants and nodes, so the enforcement step can index
//! without checks; its errors name the tenant or node and the field.

use crate::ControlError;
use serde::{Deserialize, Serialize};

/// A cache node of either level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Its name (unique within its level).
    pub name: String,
    /// Cache capacity in blocks.
    pub capacity: u64,
    /// Whether it has a SANCACHE hot-chunk tier whose threshold the controller sets.
    #[serde(default)]
    pub hot_tier: bool,
}

/// How level 2 relates to level 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Levels {
    /// A block lives in one level at a time: level-1 evictions are demoted to level 2 and
    /// a level-2 hit moves the block up (DEMOTE), so the two act as one LRU stack.
    #[default]
    Exclusive,
    /// Level 2 keeps what it reads for level 1; a block may be in both.
    Inclusive,
}

/// A tenant's service-level objective.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Slo {
    /// MLMS: mean latency at most `(1 + degradation)` times what a fair share would give.
    Degradation(f64),
    /// Mean latency at most this many milliseconds.
    LatencyMs(f64),
    /// At least this many operations per second.
    Iops(f64),
    /// At least this many megabytes (10^6 bytes) per second.
    Mbps(f64),
    /// 95 % of the requests of every interval within this many milliseconds.
    P95Ms(f64),
    /// 99 % of the requests of every interval within this many milliseconds.
    P99Ms(f64),
    /// 99.9 % of the requests of every interval within this many milliseconds.
    P999Ms(f64),
}

/// An SLO whose number is out of range: the message names the kind and the number.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{kind} = {value} must be a finite number above 0")]
pub struct SloError {
    /// The SLO's key (`latency_ms`, `degradation`, ...).
    pub kind: &'static str,
    /// The number given.
    pub value: f64,
}

impl Slo {
    /// Checks the number; the error names what is wrong.
    pub fn check(&self) -> Result<(), SloError> {
        let (v, what) = match *self {
            Slo::Degradation(v) => (v, "degradation"),
            Slo::LatencyMs(v) => (v, "latency_ms"),
            Slo::Iops(v) => (v, "iops"),
            Slo::Mbps(v) => (v, "mbps"),
            Slo::P95Ms(v) => (v, "p95_ms"),
            Slo::P99Ms(v) => (v, "p99_ms"),
            Slo::P999Ms(v) => (v, "p999_ms"),
        };
        let ok = v.is_finite()
            && match self {
                Slo::Degradation(_) => v >= 0.0,
                _ => v > 0.0,
            };
        if ok {
            Ok(())
        } else {
            Err(SloError {
                kind: what,
                value: v,
            })
        }
    }
}

impl Slo {
    /// A tail SLO as `(quantile, milliseconds)`: the share of an interval's requests that
    /// must finish within the bound; `None` for the other kinds.
    pub fn tail(&self) -> Option<(f64, f64)> {
        match *self {
            Slo::P95Ms(ms) => Some((0.95, ms)),
            Slo::P99Ms(ms) => Some((0.99, ms)),
            Slo::P999Ms(ms) => Some((0.999, ms)),
            _ => None,
        }
    }
}

impl std::fmt::Display for Slo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Slo::Degradation(d) => write!(f, "≤{:.0}% slower than fair", d * 100.0),
            Slo::LatencyMs(l) => write!(f, "≤{l} ms"),
            Slo::Iops(i) => write!(f, "≥{i} IOPS"),
            Slo::Mbps(m) => write!(f, "≥{m} MB/s"),
            Slo::P95Ms(l) => write!(f, "p95 ≤{l} ms"),
            Slo::P99Ms(l) => write!(f, "p99 ≤{l} ms"),
            Slo::P999Ms(l) => write!(f, "p99.9 ≤{l} ms"),
        }
    }
}

/// A tenant's priority class: which SLOs are admitted first when they cannot all be met,
/// and how much a unit of its speedup is worth when spare space is shared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Fixed partitions taken off the top before anything else is decided.
    Dedicated {
        /// Level-1 blocks on its host.
        l1: u64,
        /// Level-2 blocks in all, spread evenly over its servers.
        l2: u64,
    },
    /// Admitted before silver and best effort; weight 4.
    Gold,
    /// Weight 2.
    Silver,
    /// No SLO admission priority; weight 1. Its SLO, if any, is met only with what is left.
    #[default]
    BestEffort,
}

impl Class {
    /// Admission rank: lower is admitted first.
    pub fn rank(&self) -> u8 {
        match self {
            Class::Dedicated { .. } => 0,
            Class::Gold => 1,
            Class::Silver => 2,
            Class::BestEffort => 3,
        }
    }

    /// What a unit of this class's speedup is worth.
    pub fn weight(&self) -> f64 {
        match self {
            Class::Dedicated { .. } | Class::Gold => 4.0,
            Class::Silver => 2.0,
            Class::BestEffort => 1.0,
        }
    }
}

/// One tenant (a volume of one client).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    /// Its name (unique).
    pub name: String,
    /// Index of its level-1 host.
    pub host: usize,
    /// Indices of the storage servers its data is striped over (at least one).
    pub servers: Vec<usize>,
    /// Stripe unit in blocks.
    pub stripe_unit: u64,
    /// Its objective, if any.
    pub slo: Option<Slo>,
    /// Its priority class.
    #[serde(default)]
    pub class: Class,
    /// Requests it keeps outstanding, if it is a closed loop (turns an IOPS or bandwidth
    /// objective into a latency one by Little's law; measured when absent).
    #[serde(default)]
    pub depth: Option<f64>,
    /// How its two levels relate, where it differs from the topology's
    /// [`Topology::levels`] (absent: the topology's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Levels>,
}

/// Mean latency of each way a request can be served, in milliseconds: the device figures
/// the controller assumes before it has observed a tenant.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceTimes {
    /// A level-1 hit.
    pub l1_hit_ms: f64,
    /// A level-2 hit (network plus level-2 memory).
    pub l2_hit_ms: f64,
    /// A miss in both levels (network plus disk).
    pub miss_ms: f64,
}

/// Node-to-tenant index of a topology ([`Topology::placement`]); tenants in topology order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// Per host, the tenants with a level-1 partition there.
    pub hosts: Vec<Vec<usize>>,
    /// Per server, `(tenant, k)`: the tenants striped over it, `k` the server's position in
    /// the tenant's `servers`.
    pub servers: Vec<Vec<(usize, usize)>>,
}

/// Everything the controller controls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Bytes per block.
    pub block_size: u64,
    /// Level-1 hosts.
    pub hosts: Vec<Node>,
    /// Level-2 storage servers.
    pub servers: Vec<Node>,
    /// Exclusive or inclusive levels.
    #[serde(default)]
    pub levels: Levels,
    /// Service times assumed until observed.
    pub service: ServiceTimes,
    /// The tenants.
    pub tenants: Vec<Tenant>,
}

impl Topology {
    /// Checks references, names and numbers; the error names the tenant or node.
    pub fn validate(&self) -> Result<(), ControlError> {
        let bad = |what: String, reason: String| Err(ControlError::Topology { what, reason });
        if self.block_size == 0 {
            return bad("block_size".into(), "must be above 0".into());
        }
        if self.hosts.is_empty() {
            return bad("hosts".into(), "no level-1 host".into());
        }
        if self.servers.is_empty() {
            return bad("servers".into(), "no level-2 server".into());
        }
        // Names are checked against a set, so the whole check is linear in nodes and
        // tenants (each tenant's own servers are a short list, checked pairwise).
        for (level, nodes) in [("host", &self.hosts), ("server", &self.servers)] {
            let mut seen = std::collections::HashSet::with_capacity(nodes.len());
            for n in nodes.iter() {
                if !seen.insert(n.name.as_str()) {
                    return bad(format!("{level} `{}`", n.name), "appears twice".into());
                }
            }
        }
        let s = &self.service;
        if ![s.l1_hit_ms, s.l2_hit_ms, s.miss_ms]
            .iter()
            .all(|v| v.is_finite() && *v > 0.0)
        {
            return bad(
                "service".into(),
                "service times must be finite and above 0".into(),
            );
        }
        let mut names = std::collections::HashSet::with_capacity(self.tenants.len());
        for t in &self.tenants {
            let what = || format!("tenant `{}`", t.name);
            if !names.insert(t.name.as_str()) {
                return bad(what(), "appears twice".into());
            }
            if t.host >= self.hosts.len() {
                return bad(what(), format!("unknown host index {}", t.host));
            }
            if t.servers.is_empty() {
                return bad(what(), "is on no storage server".into());
            }
            for (k, &sv) in t.servers.iter().enumerate() {
                if sv >= self.servers.len() {
                    return bad(what(), format!("unknown server index {sv}"));
                }
                if t.servers[..k].contains(&sv) {
                    return bad(
                        what(),
                        format!("server `{}` listed twice", self.servers[sv].name),
                    );
                }
            }
            if t.stripe_unit == 0 {
                return bad(what(), "stripe_unit must be at least one block".into());
            }
            if let Some(slo) = &t.slo {
                slo.check().or_else(|r| bad(what(), format!("slo: {r}")))?;
            }
            if let Some(d) = t.depth {
                if !(d.is_finite() && d > 0.0) {
                    return bad(what(), format!("depth {d} must be above 0"));
                }
            }
        }
        // Dedicated partitions must fit on every node they touch.
        let mut l1 = vec![0u64; self.hosts.len()];
        let mut l2 = vec![0u64; self.servers.len()];
        for t in &self.tenants {
            if let Class::Dedicated { l1: a, l2: b } = t.class {
                l1[t.host] += a;
                let n = t.servers.len() as u64;
                for &sv in &t.servers {
                    l2[sv] += b.div_ceil(n);
                }
            }
        }
        for (i, &u) in l1.iter().enumerate() {
            if u > self.hosts[i].capacity {
                return bad(
                    format!("host `{}`", self.hosts[i].name),
                    format!(
                        "dedicated partitions need {u} blocks, capacity is {}",
                        self.hosts[i].capacity
                    ),
                );
            }
        }
        for (i, &u) in l2.iter().enumerate() {
            if u > self.servers[i].capacity {
                return bad(
                    format!("server `{}`", self.servers[i].name),
                    format!(
                        "dedicated partitions need {u} blocks, capacity is {}",
                        self.servers[i].capacity
                    ),
                );
            }
        }
        Ok(())
    }

    /// Which tenants use each node, built in one pass over the tenants (the enforcement
    /// step's allocators look members up here rather than scanning every tenant per node).
    pub fn placement(&self) -> Placement {
        let mut hosts = vec![Vec::new(); self.hosts.len()];
        let mut servers = vec![Vec::new(); self.servers.len()];
        for (i, t) in self.tenants.iter().enumerate() {
            if let Some(h) = hosts.get_mut(t.host) {
                h.push(i);
            }
            for (k, &s) in t.servers.iter().enumerate() {
                if let Some(v) = servers.get_mut(s) {
                    v.push((i, k));
                }
            }
        }
        Placement { hosts, servers }
    }

    /// Indices of the tenants on host `h`.
    pub fn on_host(&self, h: usize) -> Vec<usize> {
        (0..self.tenants.len())
            .filter(|&i| self.tenants[i].host == h)
            .collect()
    }

    /// Indices of the tenants striped over server `s`.
    pub fn on_server(&self, s: usize) -> Vec<usize> {
        (0..self.tenants.len())
            .filter(|&i| self.tenants[i].servers.contains(&s))
            .collect()
    }

    /// Level-2 blocks tenant `i` could reach if it had its servers to itself.
    pub fn reach(&self, i: usize) -> u64 {
        self.tenants[i]
            .servers
            .iter()
            .map(|&s| self.servers[s].capacity)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(tenants: usize, nodes: usize) -> Topology {
        let node = |p: &str, i: usize| Node {
            name: format!("{p}{i}"),
            capacity: 1024,
            hot_tier: false,
        };
        Topology {
            block_size: 4096,
            hosts: (0..nodes).map(|i| node("h", i)).collect(),
            servers: (0..nodes).map(|i| node("s", i)).collect(),
            levels: Levels::Exclusive,
            service: ServiceTimes {
                l1_hit_ms: 0.05,
                l2_hit_ms: 0.5,
                miss_ms: 5.0,
            },
            tenants: (0..tenants)
                .map(|i| Tenant {
                    name: format!("t{i}"),
                    host: i % nodes,
                    servers: vec![i % nodes, (i + 1) % nodes],
                    stripe_unit: 16,
                    ..Default::default()
                })
                .collect(),
        }
    }

    #[test]
    fn duplicates_are_named_and_the_check_is_linear() {
        // 100,000 tenants over 10,000 nodes: the scan of earlier entries took 29 s here;
        // a set takes milliseconds (a wide margin for a loaded machine and a debug build).
        let mut t = topo(100_000, 5_000);
        let start = std::time::Instant::now();
        t.validate().unwrap();
        assert!(
            start.elapsed().as_secs_f64() < 10.0,
            "{:?}",
            start.elapsed()
        );
        t.tenants[99_999].name = "t5".into();
        let e = t.validate().unwrap_err().to_string();
        assert!(
            e.contains("tenant `t5`") && e.contains("appears twice"),
            "{e}"
        );
        let mut t = topo(10, 3);
        t.servers[2].name = "s0".into();
        let e = t.validate().unwrap_err().to_string();
        assert!(
            e.contains("server `s0`") && e.contains("appears twice"),
            "{e}"
        );
        let mut t = topo(10, 3);
        t.tenants[4].servers = vec![1, 1];
        let e = t.validate().unwrap_err().to_string();
        assert!(
            e.contains("tenant `t4`") && e.contains("listed twice"),
            "{e}"
        );
    }
}
