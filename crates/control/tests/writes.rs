//! Writes in the latency model: a tenant whose writes are observed apart from its reads is
//! modelled as `(1 − w)·reads + w·W`, so space goes where reads need it; MLMS's samples
//! hold the reads' latency; observations and states written before these fields load.

mod common;

use common::{node, tenant, topology};
use control::model::LatencyModel;
use control::*;
use mrc::HitRatioCurve;

fn topo() -> Topology {
    let t = |name: &str| Tenant {
        class: Class::BestEffort,
        ..tenant(name, 0, vec![0])
    };
    topology(
        vec![node("h", 1000)],
        vec![node("s", 400)],
        vec![t("reader"), t("writer")],
    )
}

/// Both tenants have the same curve (footprint 2,000 blocks); `writes` of 1,000 requests
/// were writes, each taking 0.1 ms, reads taking 4 ms on average.
fn obs(writes: u64) -> TenantObservation {
    let curve =
        HitRatioCurve::from_pairs((0..=10).map(|k| (k * 200, 1.0 - k as f64 / 10.0))).unwrap();
    TenantObservation {
        requests: 1000,
        bytes: 1000 * 4096,
        l1: LevelCount {
            lookups: 1000,
            hits: 300,
        },
        l2: LevelCount {
            lookups: 700,
            hits: 100,
        },
        mean_latency_ms: (1000 - writes) as f64 / 1000.0 * 4.0 + writes as f64 / 1000.0 * 0.1,
        p99_latency_ms: 9.0,
        service: ObservedService {
            l1_hit_ms: Some(0.05),
            l2_hit_ms: Some(0.5),
            miss_ms: Some(8.0),
        },
        curves: vec![PolicyCurve {
            policy: "lru".into(),
            curve,
        }],
        writes,
        read_latency_ms: Some(4.0),
        write_latency_ms: Some(0.1),
        write_back: false,
        dirty_share: None,
        latency_quantiles: None,
        miss_quantiles: None,
    }
}

/// A model over a straight curve (footprint 100 blocks): hits at 0.1 ms, level-2 hits at
/// 1 ms, misses at 10 ms.
fn straight(writes: Option<WriteMix>) -> LatencyModel {
    LatencyModel {
        curve: HitRatioCurve::from_pairs([(0, 1.0), (100, 0.0)]).unwrap(),
        service: ServiceTimes {
            l1_hit_ms: 0.1,
            l2_hit_ms: 1.0,
            miss_ms: 10.0,
        },
        levels: Levels::Exclusive,
        writes,
    }
}

#[test]
fn the_model_weighs_reads_by_their_share() {
    let m = straight(None);
    // Reads alone at (20, 30): h1 = 0.2, h12 = 0.5: 0.02 + 0.3 + 5.0.
    assert!((m.latency(20.0, 30.0) - 5.32).abs() < 1e-9);
    let w = LatencyModel {
        writes: Some(WriteMix {
            share: 0.75,
            ms: 0.2,
            per_miss_ms: None,
        }),
        ..m.clone()
    };
    // A quarter reads at 5.32, three quarters writes at 0.2.
    assert!((w.latency(20.0, 30.0) - (0.25 * 5.32 + 0.75 * 0.2)).abs() < 1e-9);
    // Space changes only the reads' part: the same gain, a quarter as large.
    let gain = |m: &LatencyModel| m.latency(0.0, 0.0) - m.latency(50.0, 0.0);
    assert!((gain(&w) - 0.25 * gain(&m)).abs() < 1e-9);
}

#[test]
fn space_goes_to_the_reads_that_need_it() {
    let mut c = Controller::new(topo(), Scheme::named("lachesis").unwrap()).unwrap();
    let o = Observations {
        seconds: 1.0,
        tenants: vec![obs(0), obs(900)],
        tiers: vec![],
        servers: Vec::new(),
    };
    let mut plan = c.step(0.0, &o).unwrap();
    for k in 1..4 {
        plan = c.step(k as f64, &o).unwrap();
    }
    let st = c.state();
    let w = st.tenants[1].writes.expect("the writer's mix is known");
    assert!((w.share - 0.9).abs() < 1e-9, "{w:?}");
    assert!((w.ms - 0.1).abs() < 1e-9, "{w:?}");
    assert_eq!(st.tenants[0].writes.map(|w| w.share), Some(0.0));
    // Same curves, same reads' latency: the reader, all of whose requests the cache can
    // speed up, gets more of the host than the writer, nine tenths of whose requests it
    // cannot.
    let (r, wr) = (&plan.tenants[0], &plan.tenants[1]);
    assert!(
        r.l1.size + r.l2_total() > wr.l1.size + wr.l2_total(),
        "reader {} + {}, writer {} + {}",
        r.l1.size,
        r.l2_total(),
        wr.l1.size,
        wr.l2_total()
    );
    // MLMS's samples hold the reads' latency (4 ms), not the mean (0.49 ms).
    let s = st.tenants[1].samples.last().expect("samples");
    assert!((s.latency - 4.0).abs() < 1e-9, "{s:?}");
    // The writer's predicted latency is mostly its writes'.
    assert!(wr.predicted_latency_ms < 0.1 * 0.9 + 8.0 * 0.1 + 1e-9);
}

#[test]
fn observations_and_states_without_the_write_fields_load() {
    // An observation as written before the write fields.
    let mut v = serde_json::to_value(obs(500)).unwrap();
    for k in ["writes", "read_latency_ms", "write_latency_ms"] {
        v.as_object_mut().unwrap().remove(k);
    }
    let o: TenantObservation = serde_json::from_value(v).unwrap();
    assert_eq!(o.writes, 0);
    assert_eq!(o.read_latency_ms, None);
    // A state as written before: no `writes` per tenant, no `levels` per tenant.
    let mut c = Controller::new(topo(), Scheme::named("mlms").unwrap()).unwrap();
    let obs2 = Observations {
        seconds: 1.0,
        tenants: vec![o.clone(), o],
        tiers: vec![],
        servers: Vec::new(),
    };
    c.step(0.0, &obs2).unwrap();
    let mut s = serde_json::to_value(c.state()).unwrap();
    for t in s["tenants"].as_array_mut().unwrap() {
        t.as_object_mut().unwrap().remove("writes");
    }
    let old: ControlState = serde_json::from_value(s).unwrap();
    assert!(old.tenants.iter().all(|t| t.writes.is_none()));
    let mut again = Controller::resume(topo(), Scheme::named("mlms").unwrap(), old).unwrap();
    let p = again.step(1.0, &obs2).unwrap();
    assert_eq!(p.tenants.len(), 2);
    // Without a split the mean latency is the sample, as before.
    let s = again.state().tenants[0].samples.last().unwrap();
    assert!((s.latency - obs2.tenants[0].mean_latency_ms).abs() < 1e-9);
}

#[test]
fn a_write_back_cache_makes_writes_cheaper_as_more_find_their_block() {
    let m = straight(Some(WriteMix {
        share: 1.0,
        ms: 99.0,
        per_miss_ms: Some(20.0),
    }));
    // All writes: 0.1 + 20 × (1 − H(c1)); level 2 does not change what a write pays.
    assert!((m.latency(0.0, 0.0) - 20.1).abs() < 1e-9);
    assert!((m.latency(40.0, 0.0) - (0.1 + 20.0 * 0.6)).abs() < 1e-9);
    assert!((m.latency(40.0, 50.0) - m.latency(40.0, 0.0)).abs() < 1e-9);
    assert!((m.latency(100.0, 0.0) - 0.1).abs() < 1e-9);
}

/// `reader` as in [`obs`], and `writer` with 990 writes of 1,000 taking 20 ms each
/// (waiting for the backend), through a write-back level 1 or not, with `curve` if given.
fn waiting_writer(write_back: bool, curve: Option<HitRatioCurve>) -> Observations {
    let mut w = obs(990);
    if let Some(c) = curve {
        w.curves[0].curve = c;
    }
    w.write_latency_ms = Some(20.0);
    w.mean_latency_ms = 0.01 * 4.0 + 0.99 * 20.0;
    w.write_back = write_back;
    Observations {
        seconds: 1.0,
        tenants: vec![obs(0), w],
        tiers: vec![],
        servers: Vec::new(),
    }
}

#[test]
fn a_writer_waiting_for_write_back_is_modelled_per_write_miss() {
    // The writer's writes wait for the backend (20 ms each: its write-back cache is full
    // of dirty blocks). Through a write-through cache sizes change nothing of that;
    // through a write-back one the controller learns what a write that misses pays, so
    // the plan's model has writes cheaper with more level-1 space.
    let learn = |write_back: bool| {
        let mut c = Controller::new(topo(), Scheme::named("fair").unwrap()).unwrap();
        let o = waiting_writer(write_back, None);
        let mut plan = c.step(0.0, &o).unwrap();
        for k in 1..4 {
            plan = c.step(k as f64, &o).unwrap();
        }
        let held = plan.tenants[1].l1.size;
        (c.state().tenants[1].writes.expect("the writer's mix"), held)
    };
    let (wt, _) = learn(false);
    assert_eq!(wt.per_miss_ms, None, "{wt:?}");
    let (wb, held) = learn(true);
    // Fair share: 500 blocks of level 1, where the curve (footprint 2,000) misses 75 %;
    // a level-1 hit took 0.05 ms.
    assert_eq!(held, 500);
    let p = wb.per_miss_ms.expect("learned");
    assert!((p - (20.0 - 0.05) / 0.75).abs() < 1e-6, "{wb:?}");
    let m = |writes| LatencyModel {
        curve: obs(0).curves[0].curve.clone(),
        service: ServiceTimes {
            l1_hit_ms: 0.05,
            l2_hit_ms: 0.5,
            miss_ms: 8.0,
        },
        levels: Levels::Exclusive,
        writes: Some(writes),
    };
    // At the size it was seen at the model gives back what was seen; with twice the
    // space, writes cost what the misses left cost.
    let seen = m(wb).latency(500.0, 0.0) - m(wt).latency(500.0, 0.0);
    assert!(seen.abs() < 1e-6, "{seen}");
    let (at_500, at_1000) = (m(wb).latency(500.0, 0.0), m(wb).latency(1000.0, 0.0));
    let reads = |c1: f64| {
        m(WriteMix {
            share: 0.0,
            ms: 0.0,
            per_miss_ms: None,
        })
        .latency(c1, 0.0)
    };
    assert!((at_1000 - (0.01 * reads(1000.0) + 0.99 * (0.05 + p * 0.5))).abs() < 1e-6);
    assert!(at_1000 < 0.7 * at_500, "{at_500} → {at_1000}");
    assert!((m(wt).latency(1000.0, 0.0) - (0.01 * reads(1000.0) + 0.99 * 20.0)).abs() < 1e-6);
}

#[test]
fn a_write_back_level_2_that_absorbs_waiting_writes_is_kept() {
    // The writer's curve is flat (it reuses nothing), so its curve prices its level 2 at
    // nothing; but its writes wait for write-back (20 ms, above a 0.5 ms level-2 hit)
    // through a write-back level 1, and level 2 absorbs those write-backs: under
    // `lachesis` it keeps the 200 blocks of level 2 it held at fair share. Through a
    // write-through level 1 nothing is learned per write miss and the space goes.
    let t = topo();
    let run = |write_back: bool| {
        let scheme = Scheme::named("lachesis").unwrap();
        let fresh = Controller::new(t.clone(), scheme.clone()).unwrap();
        let mut state = fresh.state().clone();
        state.previous = Some(fresh.initial_plan());
        let mut c = Controller::resume(t.clone(), scheme, state).unwrap();
        let flat = HitRatioCurve::from_pairs([(0, 1.0), (2000, 1.0)]).unwrap();
        let o = waiting_writer(write_back, Some(flat));
        (1..=4)
            .map(|k| c.step(k as f64, &o).unwrap())
            .collect::<Vec<Plan>>()
    };
    for plan in run(true) {
        let writer = &plan.tenants[1];
        assert_eq!(writer.l2[0].size, 200, "{:?}", writer.l2);
        assert_eq!(writer.l2[0].reason, Reason::WriteBuffer { write_ms: 20.0 });
    }
    let last = run(false).pop().unwrap();
    assert!(last.tenants[1].l2[0].size < 200, "{:?}", last.tenants[1].l2);
}
