//! Tests of spec parsing and generation together.

use super::*;
use crate::{Op, Request};
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
    let v: Vec<Request> = parse("uniform:objects=100,requests=20000,read=0.25,block=8192,seed=5")
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
