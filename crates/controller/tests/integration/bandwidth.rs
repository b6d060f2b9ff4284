//! Issue 37 item 2, the controller's half: under every bandwidth scheme it can run live
//! (`[controller.bandwidth] mode`), the proportions each node reports back in its
//! observations are the plan's, interval after interval.

use crate::common::{registration, runtime, two_level};
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
        let mut cfg = ControllerConfig::parse(&config(mode)).unwrap();
        cfg.controller.data_dir = dir.path().join(format!("ctl{k}"));
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join(format!("ctl{k}.db"))).unwrap());
        let svc = Service::open(&cfg, store).unwrap();
        for (name, level, n, size) in nodes {
            svc.register(registration(name, level, n, size)).unwrap();
        }
        let mut seen = Vec::new();
        for _ in 0..4 {
            let r = svc.tick().unwrap();
            assert!(
                r.actions.iter().all(|a| a.result == "ok"),
                "{mode}: {:?}",
                r.actions
            );
            let plan = svc.plan().unwrap();
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
