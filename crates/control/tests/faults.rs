//! Design faults the live controller found in the step, each pinned by a test that failed
//! before the fix: hysteresis across a change of a node's capacity, and state that
//! followed positions instead of names.

mod common;

use common::*;
use control::*;

fn topo(host_capacity: u64, tenants: Vec<Tenant>) -> Topology {
    topology(
        vec![node("h1", host_capacity), node("h2", 600)],
        vec![node("s1", 2000), node("s2", 1500)],
        tenants,
    )
}

fn one(requests: u64, footprint: u64) -> TenantObservation {
    observed(requests, lru_curve(footprint))
}

fn obs(tenants: Vec<TenantObservation>) -> Observations {
    interval(tenants)
}

/// Hysteresis used to hold the previous sizes whatever happened to the node: a shrunk
/// host was planned over its capacity, a grown one left its new space unused.
#[test]
fn a_node_whose_capacity_changes_is_replanned_at_once() {
    let tenants = vec![tenant("x", 0, vec![0]), tenant("y", 0, vec![1])];
    let o = obs(vec![one(1000, 3000), one(1000, 3000)]);
    let scheme = Scheme::named("lachesis").unwrap();
    let mut c = Controller::new(topo(1000, tenants.clone()), scheme.clone()).unwrap();
    for k in 0..3 {
        c.step(10.0 * (k + 1) as f64, &o).unwrap();
    }
    let before = c.state().previous.clone().unwrap();
    assert_eq!(before.host_used(0), 1000);
    // The same observations, the host shrunk to 400 blocks: the plan fits it now.
    let mut shrunk = Controller::resume(
        topo(400, tenants.clone()),
        scheme.clone(),
        c.state().clone(),
    )
    .unwrap();
    let p = shrunk.step(40.0, &o).unwrap();
    assert!(p.host_used(0) <= 400, "host holds {} > 400", p.host_used(0));
    assert_eq!(p.host_used(0), 400, "and all of it is used");
    // Grown to 3,000 blocks: the new space is given out in this very step.
    let mut grown = Controller::resume(topo(3000, tenants), scheme, c.state().clone()).unwrap();
    let p = grown.step(40.0, &o).unwrap();
    assert_eq!(p.host_used(0), 3000);
    // The other host did not change, and hysteresis still holds it.
    assert_eq!(p.tenants[0].l2[0].size, before.tenants[0].l2[0].size);
}

/// The state used to be a vector per tenant by position: a tenant added in front took the
/// first tenant's history, and everyone after it shifted by one.
#[test]
fn state_follows_tenants_by_name_when_one_is_added_or_removed() {
    let scheme = Scheme::named("moirai-utility").unwrap();
    let two = vec![tenant("busy", 0, vec![0]), tenant("sleepy", 0, vec![0])];
    let mut c = Controller::new(topo(1000, two), scheme.clone()).unwrap();
    for k in 0..3 {
        c.step(
            10.0 * (k + 1) as f64,
            &obs(vec![one(1000, 5000), one(0, 5000)]),
        )
        .unwrap();
    }
    assert!(matches!(
        c.state().previous.as_ref().unwrap().tenants[1].l1.reason,
        Reason::Idle { intervals: 3 }
    ));
    // Persisted, and resumed with a new tenant in front.
    let saved: ControlState =
        serde_json::from_str(&serde_json::to_string(c.state()).unwrap()).unwrap();
    let three = vec![
        tenant("newbie", 0, vec![0]),
        tenant("busy", 0, vec![0]),
        tenant("sleepy", 0, vec![0]),
    ];
    let mut c = Controller::resume(topo(1000, three), scheme.clone(), saved).unwrap();
    let p = c
        .step(
            40.0,
            &obs(vec![one(1000, 5000), one(1000, 5000), one(0, 5000)]),
        )
        .unwrap();
    assert_eq!(p.tenants[2].tenant, "sleepy");
    assert!(
        matches!(p.tenants[2].l1.reason, Reason::Idle { intervals: 4 }),
        "sleepy keeps its idle count: {:?}",
        p.tenants[2].l1.reason
    );
    assert_eq!(p.tenants[2].l1.size, 0);
    assert!(
        p.tenants[0].l1.size > 300,
        "newbie is active: {:?}",
        p.tenants[0]
    );
    // Removing `busy` leaves sleepy's and newbie's history where it was.
    let names: Vec<&str> = c.state().tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["newbie", "busy", "sleepy"]);
    let saved = c.state().clone();
    let two = vec![tenant("sleepy", 0, vec![0]), tenant("newbie", 0, vec![0])];
    let c = Controller::resume(topo(1000, two), scheme, saved.clone()).unwrap();
    assert_eq!(c.state().tenants[0].name, "sleepy");
    assert_eq!(c.state().tenants[0].idle, saved.tenants[2].idle);
    assert_eq!(
        c.state().tenants[1].curve.as_ref().unwrap(),
        saved.tenants[0].curve.as_ref().unwrap()
    );
    let prev = c.state().previous.as_ref().unwrap();
    assert_eq!(prev.tenants.len(), 2);
    assert_eq!(prev.tenants[0].tenant, "sleepy");
}

/// A node removed between steps: the partitions on the nodes that stay keep their
/// hysteresis, the state's node indices follow the names.
#[test]
fn a_removed_server_renumbers_the_previous_plan_by_name() {
    let scheme = Scheme::named("lachesis").unwrap();
    let tenants = vec![tenant("a", 0, vec![0, 1]), tenant("b", 0, vec![1])];
    let mut c = Controller::new(topo(1000, tenants), scheme.clone()).unwrap();
    let o = obs(vec![one(1000, 4000), one(1000, 4000)]);
    let p = c.step(10.0, &o).unwrap();
    let on_s2 = p.tenants[1].l2[0].size;
    // s1 goes away: s2 becomes server 0.
    let mut t = topo(1000, vec![tenant("a", 0, vec![0]), tenant("b", 0, vec![0])]);
    t.servers.remove(0);
    let c2 = Controller::resume(t, scheme, c.state().clone()).unwrap();
    let prev = c2.state().previous.as_ref().unwrap();
    assert_eq!(prev.tenants[1].l2.len(), 1);
    assert_eq!(prev.tenants[1].l2[0].node, 0);
    assert_eq!(prev.tenants[1].l2[0].size, on_s2);
    assert_eq!(c2.state().servers[0].name, "s2");
}

/// A state written by the positional layout (no `version`) is still read.
#[test]
fn a_positional_state_of_the_old_layout_resumes() {
    let old = r#"{"interval":5,"service":[],"idle":[0,4],"samples":[],"curves":[],
        "choice":[],"bandwidth":{"resources":[],"learners":null,"chosen":[]},
        "boost":[],"previous":null}"#;
    let state: ControlState = serde_json::from_str(old).unwrap();
    let two = vec![tenant("busy", 0, vec![0]), tenant("sleepy", 0, vec![0])];
    let mut c = Controller::resume(
        topo(1000, two),
        Scheme::named("moirai-utility").unwrap(),
        state,
    )
    .unwrap();
    assert_eq!(c.state().tenants[1].name, "sleepy");
    assert_eq!(c.state().tenants[1].idle, 4);
    let p = c
        .step(60.0, &obs(vec![one(1000, 5000), one(0, 5000)]))
        .unwrap();
    assert!(matches!(
        p.tenants[1].l1.reason,
        Reason::Idle { intervals: 5 }
    ));
    assert_eq!(p.interval, 6);
    let written = serde_json::to_value(c.state()).unwrap();
    assert_eq!(written["version"], 2);
    assert!(written.get("idle").is_none());
}
