//! Tests of what the plan wants on a node.

use super::*;
use crate::config::ImageSpec;
use control::{Layout, Partition, Reason, TenantPlan};

#[test]
fn zero_partitions_keep_a_block_within_capacity() {
    let topo = Topology {
        block_size: 4096,
        hosts: vec![control::Node {
            name: "h".into(),
            capacity: 10,
            hot_tier: false,
        }],
        servers: vec![control::Node {
            name: "s".into(),
            capacity: 10,
            hot_tier: false,
        }],
        levels: Default::default(),
        service: control::ServiceTimes {
            l1_hit_ms: 0.1,
            l2_hit_ms: 1.0,
            miss_ms: 5.0,
        },
        tenants: vec![],
    };
    let tp = |name: &str, l1: u64| TenantPlan {
        tenant: name.into(),
        l1: Partition {
            node: 0,
            size: l1,
            reason: Reason::FairShare,
        },
        l2: vec![Partition {
            node: 0,
            size: 5,
            reason: Reason::FairShare,
        }],
        eviction: "lru".into(),
        eviction_reason: String::new(),
        admission: "demand".into(),
        predicted_latency_ms: 1.0,
        target_latency_ms: None,
        slo_met: None,
        interval_target_ms: None,
    };
    let plan = Plan {
        interval: 1,
        time: 0.0,
        layout: Layout::Partitioned,
        tenants: vec![tp("a", 10), tp("b", 0)],
        bandwidth: vec![],
        boost: vec![],
        scale_out: vec![],
        consolidated: vec![],
        infeasible: vec![],
        predicted_fair_speedup: 1.0,
    };
    let vols: Vec<PlacedVolume> = ["a", "b"]
        .iter()
        .map(|n| PlacedVolume {
            name: n.to_string(),
            cache: n.to_string(),
            owner: n.to_string(),
            host: "h".into(),
            servers: vec!["s".into()],
            exclusive: false,
            ..Default::default()
        })
        .collect();
    let e = NodeEntry {
        name: "h".into(),
        level: 1,
        cache_size: 10 * 4096,
        up: true,
        ..Default::default()
    };
    let d = desired(
        &topo,
        &plan,
        &vols,
        &[],
        &e,
        4096,
        &Members::of(&topo, &plan),
    );
    let sizes: Vec<u64> = d.caches.iter().map(|c| c.size / 4096).collect();
    assert_eq!(sizes, vec![9, 1]);
    let e2 = NodeEntry {
        name: "s".into(),
        level: 2,
        cache_size: 10 * 4096,
        ..e.clone()
    };
    let d = desired(
        &topo,
        &plan,
        &vols,
        &[],
        &e2,
        4096,
        &Members::of(&topo, &plan),
    );
    assert_eq!(d.caches.len(), 2);
    assert!(d.caches.iter().all(|c| c.size == 5 * 4096));
    // Shared: one cache of the node's whole memory, both volumes routed to it.
    let shared = Plan {
        layout: Layout::Shared,
        ..plan
    };
    for node in [&e, &e2] {
        let d = desired(
            &topo,
            &shared,
            &vols,
            &[],
            node,
            4096,
            &Members::of(&topo, &shared),
        );
        assert_eq!(d.caches.len(), 1);
        assert_eq!(d.caches[0].name, SHARED_CACHE);
        assert_eq!(d.caches[0].size, 10 * 4096);
        assert_eq!(d.caches[0].routes, vec!["a".to_string(), "b".to_string()]);
    }
}

#[test]
fn an_images_readers_share_its_consolidated_cache_on_the_server_and_keep_their_own_on_hosts() {
    let node = |name: &str| control::Node {
        name: name.into(),
        capacity: 20,
        hot_tier: false,
    };
    let topo = Topology {
        block_size: 4096,
        hosts: vec![node("h")],
        servers: vec![node("s")],
        levels: Default::default(),
        service: control::ServiceTimes {
            l1_hit_ms: 0.1,
            l2_hit_ms: 1.0,
            miss_ms: 5.0,
        },
        tenants: vec![],
    };
    let part = |size| Partition {
        node: 0,
        size,
        reason: Reason::FairShare,
    };
    let tp = |name: &str| TenantPlan {
        tenant: name.into(),
        l1: part(4),
        l2: vec![part(6)],
        eviction: "lru".into(),
        eviction_reason: String::new(),
        admission: "demand".into(),
        predicted_latency_ms: 1.0,
        target_latency_ms: None,
        slo_met: None,
        interval_target_ms: None,
    };
    let mut plan = Plan {
        interval: 1,
        time: 0.0,
        layout: Layout::Partitioned,
        tenants: vec![tp("a"), tp("b"), tp("db")],
        bandwidth: vec![],
        boost: vec![],
        scale_out: vec![],
        consolidated: vec![],
        infeasible: vec![],
        predicted_fair_speedup: 1.0,
    };
    let vols: Vec<PlacedVolume> = ["a", "b", "db"]
        .iter()
        .map(|n| PlacedVolume {
            name: n.to_string(),
            cache: n.to_string(),
            owner: n.to_string(),
            host: "h".into(),
            servers: vec!["s".into()],
            image: (*n != "db").then(|| "img".to_string()),
            write_policy: (*n != "db").then(|| "read-only".to_string()),
            ..Default::default()
        })
        .collect();
    let images = vec![ImageSpec {
        name: "img".into(),
        servers: vec!["s".into()],
        size: Some(units::ByteSize(10 * 4096)),
    }];
    // No curve yet: the room db's 6 blocks leave (14), at most the image's 10 blocks.
    crate::consolidate::fill(&images, &topo, &vols, &[], &mut plan);
    assert_eq!(plan.consolidated.len(), 1);
    let c = &plan.consolidated[0];
    assert_eq!((c.size, c.readers.clone()), (10, vec![0, 1]));
    assert_eq!(
        (plan.tenants[0].l2_total(), plan.tenants[1].l2_total()),
        (0, 0)
    );
    assert_eq!(plan.server_used(0), 16);
    let e = NodeEntry {
        name: "s".into(),
        level: 2,
        cache_size: 20 * 4096,
        up: true,
        ..Default::default()
    };
    let d = desired(
        &topo,
        &plan,
        &vols,
        &images,
        &e,
        4096,
        &Members::of(&topo, &plan),
    );
    let names: Vec<&str> = d.caches.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["db", "img"],
        "no reader has a cache of its own on the server"
    );
    let img = &d.caches[1];
    assert_eq!(img.size, 10 * 4096);
    assert_eq!(img.routes, ["img"]);
    assert_eq!(img.range, Some((0, 10 * 4096)));
    assert_eq!(img.write_policy.as_deref(), Some("read-only"));
    assert!(!img.exclusive && img.image);
    let h = NodeEntry {
        name: "h".into(),
        level: 1,
        ..e.clone()
    };
    let d = desired(
        &topo,
        &plan,
        &vols,
        &images,
        &h,
        4096,
        &Members::of(&topo, &plan),
    );
    let wp: Vec<_> = d.caches.iter().map(|c| c.write_policy.as_deref()).collect();
    assert_eq!(wp, [Some("read-only"), Some("read-only"), None]);
}

#[test]
fn a_node_is_left_alone_only_while_it_holds_what_was_applied() {
    let want = Desired {
        caches: vec![WantCache {
            name: "db".into(),
            size: 8 * 4096,
            eviction: "lru".into(),
            admission: "demand".into(),
            routes: vec!["db".into()],
            exclusive: false,
            write_policy: None,
            range: None,
            image: false,
        }],
        proportions: Some(Default::default()),
        tiers: Vec::new(),
    };
    let held = CacheInfo {
        name: "db".into(),
        size_bytes: 8 * 4096,
        stats: api::node::CacheStats {
            eviction: "lru".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let r = Reconciled {
        epoch: "e1".into(),
        want: want.clone(),
        outcome: NodeOutcome {
            node: "h".into(),
            applied: Some(vec![held]),
            ..Default::default()
        },
    };
    let polled = |size: u64, eviction: &str| {
        std::collections::HashMap::from([(
            "db".to_string(),
            api::node::TenantObservations {
                tenant: "db".into(),
                cache: Some("db".into()),
                size,
                eviction: Some(eviction.into()),
                ..Default::default()
            },
        )])
    };
    assert!(r.holds("e1", &want, Some(&polled(8 * 4096, "lru"))));
    assert_eq!(r.unchanged().applied.unwrap()[0].size_bytes, 8 * 4096);
    // Restarted, a new part of the plan, a cache resized or re-policied by hand, a
    // cache made by hand, or no poll answer: called.
    assert!(!r.holds("e2", &want, Some(&polled(8 * 4096, "lru"))));
    let mut bigger = want.clone();
    bigger.caches[0].size = 9 * 4096;
    assert!(!r.holds("e1", &bigger, Some(&polled(8 * 4096, "lru"))));
    assert!(!r.holds("e1", &want, Some(&polled(4 * 4096, "lru"))));
    assert!(!r.holds("e1", &want, Some(&polled(8 * 4096, "arc"))));
    let mut extra = polled(8 * 4096, "lru");
    extra.insert(
        "mine".into(),
        api::node::TenantObservations {
            cache: Some("mine".into()),
            ..Default::default()
        },
    );
    assert!(!r.holds("e1", &want, Some(&extra)));
    assert!(!r.holds("e1", &want, None));
}
