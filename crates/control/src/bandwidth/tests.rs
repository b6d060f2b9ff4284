//! Tests of the bandwidth learners' set-up: the resources and their members (hosts by
//! tenant, storage servers by volume), each tenant's dft in its SLO's metric, and the
//! proportions a plan carries.

use super::*;
use crate::observe::{Quantiles, TenantObservation};
use crate::topology::{Levels, Node, ServiceTimes, Tenant};

fn node(name: &str) -> Node {
    Node {
        name: name.into(),
        capacity: 1000,
        hot_tier: false,
    }
}

/// The paper's Fig. 3: apps a0, a1 on host A, b0, b1 on host B, one storage server.
fn fig3(slos: [Option<Slo>; 4]) -> Topology {
    let names = ["a0", "a1", "b0", "b1"];
    Topology {
        block_size: 4096,
        hosts: vec![node("A"), node("B")],
        servers: vec![node("S")],
        levels: Levels::default(),
        service: ServiceTimes {
            l1_hit_ms: 0.01,
            l2_hit_ms: 0.1,
            miss_ms: 8.0,
        },
        tenants: (0..4)
            .map(|i| Tenant {
                name: names[i].into(),
                host: i / 2,
                servers: vec![0],
                stripe_unit: 16,
                slo: slos[i],
                ..Tenant::default()
            })
            .collect(),
    }
}

fn observed(requests: &[u64], seconds: f64) -> Observations {
    Observations {
        seconds,
        tenants: requests
            .iter()
            .map(|&r| TenantObservation {
                requests: r,
                bytes: r * 16384,
                mean_latency_ms: 10.0,
                ..TenantObservation::default()
            })
            .collect(),
        tiers: Vec::new(),
        servers: Vec::new(),
    }
}

#[test]
fn compositions_cover_every_split_with_one_unit_each() {
    let c = compositions(2, 4);
    assert_eq!(c, vec![vec![0.25, 0.75], vec![0.5, 0.5], vec![0.75, 0.25]]);
    // 3 parts of 8 units, each at least one: C(7, 2) = 21
    let c3 = compositions(3, 8);
    assert_eq!(c3.len(), 21);
    assert!(c3
        .iter()
        .all(|v| (v.iter().sum::<f64>() - 1.0).abs() < 1e-12));
    // Two members get the paper's five actions.
    let a = actions(2, 8);
    let first: Vec<f64> = a.iter().map(|v| v[0]).collect();
    assert_eq!(first, vec![0.1, 0.3, 0.5, 0.7, 0.9]);
}

#[test]
fn each_tenant_is_judged_in_its_slos_metric() {
    let o = TenantObservation {
        requests: 300,
        bytes: 300 * 65536,
        mean_latency_ms: 12.0,
        p99_latency_ms: 40.0,
        latency_quantiles: Some(Quantiles {
            p50: 5.0,
            p90: 20.0,
            p95: 25.0,
            p99: 40.0,
            p999: 90.0,
        }),
        ..TenantObservation::default()
    };
    let d = |slo: Slo, target: Option<f64>| tenant_dft(Some(&slo), &o, 10.0, target);
    // 30 IOPS against 40: a quarter short.
    assert!((d(Slo::Iops(40.0), None) + 0.25).abs() < 1e-12);
    // 1.966 MB/s against 1.5: above target.
    assert!((d(Slo::Mbps(1.5), None) - (300.0 * 65536.0 / 10.0 / 1e6 - 1.5) / 1.5).abs() < 1e-12);
    // 12 ms mean against 10 ms allowed: a fifth short.
    assert!((d(Slo::LatencyMs(10.0), None) + 0.2).abs() < 1e-12);
    // The interval's p95 (25 ms) against 50 ms: half better.
    assert!((d(Slo::P95Ms(50.0), None) - 0.5).abs() < 1e-12);
    // A degradation SLO is judged against the mean latency the controller allows.
    assert!((d(Slo::Degradation(0.1), Some(24.0)) - 0.5).abs() < 1e-12);
    // Best effort is always 0, whatever was measured.
    assert_eq!(tenant_dft(None, &o, 10.0, None), 0.0);
    // A latency SLO with nothing measured says nothing; an IOPS SLO with no requests is
    // a full miss.
    let idle = TenantObservation::default();
    assert_eq!(
        tenant_dft(Some(&Slo::LatencyMs(5.0)), &idle, 10.0, None),
        0.0
    );
    assert_eq!(tenant_dft(Some(&Slo::Iops(5.0)), &idle, 10.0, None), -1.0);
}

#[test]
fn hosts_divide_between_tenants_and_the_server_between_volumes() {
    let topo = fig3([Some(Slo::Iops(25.0)); 4]);
    let cfg = Automata::default();
    let mut st = BandwidthState::default();
    let plan = st.step(&cfg, &topo, &[None; 4], &observed(&[250; 4], 10.0), 0);
    let levels: Vec<(&str, usize)> = plan.iter().map(|r| (r.level.as_str(), r.node)).collect();
    assert_eq!(levels, vec![("host", 0), ("host", 1), ("server", 0)]);
    assert_eq!(
        st.resources()[2].members,
        vec![vec![0, 1], vec![2, 3]],
        "the server's members are the two hosts' volumes"
    );
    // Before anything is learned every resource holds the even split, and a tenant's
    // share of the server is its volume's half split as its host splits.
    let server = &plan[2];
    assert_eq!(server.volumes, vec![0, 0, 1, 1]);
    for &(_, p) in &server.shares {
        assert!((p - 0.25).abs() < 1e-12, "{:?}", server.shares);
    }
    assert!(plan[0].volumes.is_empty());
    // A single storage learner has no host learners, and still divides by volume.
    let single = Automata {
        servers_only: true,
        ..Automata::default()
    };
    let mut st = BandwidthState::default();
    let plan = st.step(&single, &topo, &[None; 4], &observed(&[250; 4], 10.0), 0);
    assert_eq!(plan.len(), 1);
    assert_eq!(plan[0].level, "server");
    assert_eq!(st.automata()[0].actions().len(), 5);
}

#[test]
fn a_servers_share_multiplies_the_volumes_and_the_hosts_proportions() {
    // Drive the automata to known actions through their state: host A 90/10, host B
    // 30/70, the server 70/30 over the volumes.
    let topo = fig3([Some(Slo::Iops(25.0)), None, None, None]);
    let mut st = BandwidthState::default();
    st.step(
        &Automata::default(),
        &topo,
        &[None; 4],
        &observed(&[1; 4], 10.0),
        0,
    );
    st.chosen = vec![4, 1, 3];
    let plan = st.shares(4);
    let server: Vec<f64> = plan[2].shares.iter().map(|s| s.1).collect();
    let want = [0.7 * 0.9, 0.7 * 0.1, 0.3 * 0.3, 0.3 * 0.7];
    for (g, w) in server.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{server:?}");
    }
    assert!((server.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    let host: Vec<(usize, f64)> = plan[0].shares.clone();
    assert_eq!((host[0].0, host[1].0), (0, 1));
    assert!((host[0].1 - 0.9).abs() < 1e-12 && (host[1].1 - 0.1).abs() < 1e-12);
}
