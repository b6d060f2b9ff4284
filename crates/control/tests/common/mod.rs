//! Fixtures shared by the control crate's integration tests: nodes, tenants and a topology
//! with the usual service times, the square-root curve, and one interval's observation of
//! a tenant. Each test file uses some of them.
#![allow(dead_code)]

use control::*;
use mrc::HitRatioCurve;

pub fn node(name: &str, capacity: u64) -> Node {
    Node {
        name: name.into(),
        capacity,
        hot_tier: false,
    }
}

/// A silver tenant without an SLO, striped by 16 blocks.
pub fn tenant(name: &str, host: usize, servers: Vec<usize>) -> Tenant {
    Tenant {
        name: name.into(),
        host,
        servers,
        stripe_unit: 16,
        slo: None,
        class: Class::Silver,
        depth: None,
        levels: None,
    }
}

/// Exclusive levels of 4 KiB blocks; a level-1 hit costs 0.05 ms, a level-2 hit 0.5 ms
/// and a miss 8 ms.
pub fn topology(hosts: Vec<Node>, servers: Vec<Node>, tenants: Vec<Tenant>) -> Topology {
    Topology {
        block_size: 4096,
        hosts,
        servers,
        levels: Levels::Exclusive,
        service: ServiceTimes {
            l1_hit_ms: 0.05,
            l2_hit_ms: 0.5,
            miss_ms: 8.0,
        },
        tenants,
    }
}

/// Miss ratio `1 − √(x / footprint)`, sampled at tenths of the footprint up to twice it.
pub fn curve(footprint: u64) -> HitRatioCurve {
    HitRatioCurve::from_pairs((0..=20).map(|k| {
        let x = footprint * k / 10;
        (x, (1.0 - (k as f64 / 10.0).sqrt()).max(0.0))
    }))
    .unwrap()
}

/// `requests` requests of 4 KiB in an interval, half of them level-1 hits and a quarter
/// level-2 hits, at 2 ms on average (p99 9 ms), with `curves`.
pub fn observed(requests: u64, curves: Vec<PolicyCurve>) -> TenantObservation {
    TenantObservation {
        requests,
        bytes: requests * 4096,
        l1: LevelCount {
            lookups: requests,
            hits: requests / 2,
        },
        l2: LevelCount {
            lookups: requests / 2,
            hits: requests / 4,
        },
        mean_latency_ms: 2.0,
        p99_latency_ms: 9.0,
        service: ObservedService {
            l1_hit_ms: Some(0.05),
            l2_hit_ms: Some(0.6),
            miss_ms: Some(7.5),
        },
        curves,
        ..Default::default()
    }
}

/// The LRU curve of `footprint` blocks, as an observation carries it.
pub fn lru_curve(footprint: u64) -> Vec<PolicyCurve> {
    vec![PolicyCurve {
        policy: "lru".into(),
        curve: curve(footprint),
    }]
}

/// A 10-second interval of `tenants`, without a hot tier.
pub fn interval(tenants: Vec<TenantObservation>) -> Observations {
    Observations {
        seconds: 10.0,
        tenants,
        tiers: vec![],
        servers: Vec::new(),
    }
}
