//! Issue 37 item 2, the controller's half: under every bandwidth scheme it can run live
//! (`[controller.bandwidth] mode`), the proportions each node reports back in its
//! observations are the plan's, interval after interval.

use crate::common::{file_exports, registration, runtime, start_node, two_level, upstream_exports};
use api::client::NodeClient;
use controller::config::ControllerConfig;
use controller::{Service, SqliteStore, Store};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn config(bandwidth: &str) -> String {
    format!(
        r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "fair"
exclusive = false
[controller.bandwidth]
{bandwidth}
[[tenant]]
name = "db"
[[tenant.volume]]
name = "db"
host = "h"
servers = ["s1"]
[[tenant]]
name = "web"
[[tenant.volume]]
name = "web"
host = "h"
servers = ["s1"]
"#
    )
}

/// A controller of `cfg` with its data as run `k` in `dir`, and `nodes` (name, level,
/// node, cache bytes) registered with it.
fn service<'a>(
    mut cfg: ControllerConfig,
    dir: &std::path::Path,
    k: usize,
    nodes: impl Iterator<Item = (&'a str, u8, &'a node::RunningNode, u64)>,
) -> Arc<Service> {
    cfg.controller.data_dir = dir.join(format!("ctl{k}"));
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.join(format!("ctl{k}.db"))).unwrap());
    let svc = Service::open(&cfg, store).unwrap();
    for (name, level, n, size) in nodes {
        svc.register(registration(name, level, n, size)).unwrap();
    }
    svc
}

/// One interval of `svc`, every action of it ok (under bandwidth `mode`), and its plan.
fn tick_ok(svc: &Service, mode: &str) -> control::Plan {
    let r = svc.tick().unwrap();
    assert!(
        r.actions.iter().all(|a| a.result == "ok"),
        "{mode}: {:?}",
        r.actions
    );
    svc.plan().unwrap()
}

/// The proportion each tenant of `node` reports (`None`: none set).
fn reported(node: &node::RunningNode) -> BTreeMap<String, Option<f64>> {
    let c = NodeClient::new(
        &format!("http://{}", node.api_addr),
        Some(node.api_token.secret()),
        Duration::from_secs(5),
    );
    c.observations()
        .unwrap()
        .tenants
        .into_iter()
        .map(|t| (t.tenant, t.backend.proportion))
        .collect()
}

#[test]
fn every_bandwidth_scheme_reaches_the_nodes_as_planned() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let (s1, h) = two_level(&rt, dir.path(), &["db", "web"], "2MiB");
    let nodes = [("s1", 2u8, &s1, 4u64 << 20), ("h", 1, &h, 2 << 20)];

    for (k, mode) in [
        "mode = \"shares\"\nshares = { db = 3, web = 1 }",
        "mode = \"coordinated\"",
        "mode = \"uncoordinated\"",
        "mode = \"single\"",
        "mode = \"off\"",
    ]
    .into_iter()
    .enumerate()
    {
        let cfg = ControllerConfig::parse(&config(mode)).unwrap();
        let svc = service(cfg, dir.path(), k, nodes.iter().copied());
        let mut seen = Vec::new();
        for _ in 0..4 {
            let plan = tick_ok(&svc, mode);
            for (name, level, n, _) in nodes {
                let at = if level == 1 { "host" } else { "server" };
                // The plan's proportions of this node, by tenant (one node per level, and
                // each volume's export and tenant is its name).
                let mut want: BTreeMap<String, Option<f64>> =
                    [("db".to_string(), None), ("web".to_string(), None)].into();
                for r in plan.bandwidth.iter().filter(|r| r.level == at) {
                    for &(i, p) in &r.shares {
                        want.insert(plan.tenants[i].tenant.clone(), Some(p));
                    }
                }
                let got = reported(n);
                assert_eq!(got.len(), 2, "{mode} {name}: {got:?}");
                for (t, w) in &want {
                    match (w, got[t]) {
                        (None, None) => {}
                        (Some(w), Some(g)) if (w - g).abs() < 1e-9 => {}
                        _ => panic!("{mode} {name}: planned {want:?}, reported {got:?}"),
                    }
                }
                seen.push((name, got));
            }
        }
        let last = |node: &str| seen.iter().rev().find(|s| s.0 == node).unwrap().1.clone();
        let (on_server, on_host) = (last("s1"), last("h"));
        match k {
            // Static 3:1 at the storage server; the host shares equally.
            0 => {
                assert_eq!(on_server["db"], Some(0.75));
                assert_eq!(on_server["web"], Some(0.25));
                assert_eq!(on_host["db"], None);
            }
            // Learners at both levels, as the paper divides: a storage server's learner
            // between volumes (the tenants of one host), so at s1, where db and web are one
            // host's, there is nothing to divide and no proportion is set; the host's
            // learner divides between db and web.
            1 | 2 => {
                assert!(
                    on_server.values().all(Option::is_none),
                    "{mode}: {on_server:?}"
                );
                assert!(on_host.values().all(Option::is_some), "{mode}: {on_host:?}");
                let sum: f64 = on_host.values().map(|v| v.unwrap()).sum();
                assert!((sum - 1.0).abs() < 1e-9, "{mode}: {on_host:?}");
            }
            // One level of learners, at the server: one host's volume there, so none set.
            3 => {
                assert!(
                    on_server.values().all(Option::is_none),
                    "{mode}: {on_server:?}"
                );
                assert_eq!(on_host["db"], None);
            }
            // Off: equal shares everywhere.
            _ => {
                assert!(on_server
                    .values()
                    .chain(on_host.values())
                    .all(Option::is_none));
            }
        }
    }
    rt.block_on(async {
        let _ = h.shutdown().await;
        let _ = s1.shutdown().await;
    });
}

/// The configuration of [`a_storage_servers_learner_divides_between_two_hosts_volumes`]:
/// `db` on host `h1`, `web` on host `h2`, both over the storage server `s1`.
fn two_hosts_config(bandwidth: &str) -> String {
    config(bandwidth)
        .replacen("host = \"h\"", "host = \"h1\"", 1)
        .replacen("host = \"h\"", "host = \"h2\"", 1)
}

/// With two hosts over one storage server, the server's learner has two volumes to divide
/// between (the paper's storage-level automaton): under `coordinated`, `uncoordinated`
/// and `single`, `s1` reports proportions for both tenants that are the plan's and sum to
/// one, interval after interval, while each host, with one tenant, has nothing to divide.
#[test]
fn a_storage_servers_learner_divides_between_two_hosts_volumes() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let s1 = start_node(
        &rt,
        &dir.path().join("s1"),
        2,
        "4MiB",
        &file_exports(&["db", "web"], "8MiB"),
    );
    let h1 = start_node(
        &rt,
        &dir.path().join("h1"),
        1,
        "2MiB",
        &upstream_exports(s1.nbd_addr, &["db"]),
    );
    let h2 = start_node(
        &rt,
        &dir.path().join("h2"),
        1,
        "2MiB",
        &upstream_exports(s1.nbd_addr, &["web"]),
    );
    // Nodes are in name order per level: h1 is host 0, h2 host 1, s1 server 0.
    let nodes = [
        ("s1", 2u8, 0usize, &s1, 4u64 << 20),
        ("h1", 1, 0, &h1, 2 << 20),
        ("h2", 1, 1, &h2, 2 << 20),
    ];
    for (k, mode) in ["coordinated", "uncoordinated", "single"]
        .into_iter()
        .enumerate()
    {
        let cfg =
            ControllerConfig::parse(&two_hosts_config(&format!("mode = \"{mode}\""))).unwrap();
        let svc = service(
            cfg,
            dir.path(),
            k,
            nodes
                .iter()
                .map(|&(name, level, _, n, size)| (name, level, n, size)),
        );
        let mut server_shares = Vec::new();
        for _ in 0..4 {
            let plan = tick_ok(&svc, mode);
            for (name, level, index, n, _) in nodes {
                let at = if level == 1 { "host" } else { "server" };
                let mut want: BTreeMap<String, Option<f64>> = BTreeMap::new();
                for r in plan
                    .bandwidth
                    .iter()
                    .filter(|r| r.level == at && r.node == index)
                {
                    for &(i, p) in &r.shares {
                        want.insert(plan.tenants[i].tenant.clone(), Some(p));
                    }
                }
                let got = reported(n);
                for (t, g) in &got {
                    let w = want.get(t).copied().flatten();
                    match (w, g) {
                        (None, None) => {}
                        (Some(w), Some(g)) if (w - g).abs() < 1e-9 => {}
                        _ => panic!("{mode} {name}: planned {want:?}, reported {got:?}"),
                    }
                }
                if level == 1 {
                    // One tenant on each host: nothing to divide.
                    assert!(got.values().all(Option::is_none), "{mode} {name}: {got:?}");
                } else {
                    assert_eq!(got.len(), 2, "{mode} {name}: {got:?}");
                    server_shares.push(got);
                }
            }
        }
        // The server's learner set both tenants' proportions, summing to one, every
        // interval after its first decision.
        let last = server_shares.last().unwrap();
        assert!(last.values().all(Option::is_some), "{mode}: {last:?}");
        let sum: f64 = last.values().map(|v| v.unwrap()).sum();
        assert!((sum - 1.0).abs() < 1e-9, "{mode}: {last:?}");
        println!("{mode}: s1 proportions {last:?}");
    }
    rt.block_on(async {
        let _ = h1.shutdown().await;
        let _ = h2.shutdown().await;
        let _ = s1.shutdown().await;
    });
}
