//! Issue 37's "Measured": under every scheme that runs live, a controller and real nodes
//! run a few intervals with I/O between them, and after each one every field of the plan
//! is what the nodes report back: each volume's cache size at each level, its eviction
//! and admission policy, its write policy from the spec (changed on the fly), its rule,
//! the backend proportions; and the interval's rows print the sizes the nodes hold.

use crate::common::{registration, runtime, two_level};
use api::client::NodeClient;
use controller::config::ControllerConfig;
use controller::{IntervalReport, Service, SqliteStore, Store};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const BS: u64 = 4096;

fn config(scheme: &str, extra: &str) -> String {
    format!(
        r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "{scheme}"
exclusive = false
{extra}
[[tenant]]
name = "db"
slo = {{ latency_ms = 5.0 }}
[[tenant.volume]]
name = "db"
host = "h"
servers = ["s1"]
write_policy = "write-through"
[[tenant]]
name = "web"
[[tenant.volume]]
name = "web"
host = "h"
servers = ["s1"]
"#
    )
}

fn client(n: &node::RunningNode) -> NodeClient {
    NodeClient::new(
        &format!("http://{}", n.api_addr),
        Some(n.api_token.secret()),
        Duration::from_secs(5),
    )
}

/// Every field of the last plan against what `h` (the host) and `s1` (the server)
/// report, and the report's rows against the sizes they hold.
fn assert_applied(
    what: &str,
    svc: &Service,
    r: &IntervalReport,
    h: &node::RunningNode,
    s1: &node::RunningNode,
    write_policy: &BTreeMap<&str, &str>,
) {
    assert!(r.refused.is_empty(), "{what}: {:?}", r.refused);
    assert!(
        r.actions.iter().all(|a| a.result == "ok"),
        "{what}: {:?}",
        r.actions
    );
    let plan = svc.plan().expect("a plan");
    for (level, n) in [(1u8, h), (2, s1)] {
        let c = client(n);
        let caches = c.caches().unwrap();
        let rules = c.rules().unwrap();
        let props = c.proportions().unwrap().proportions;
        for tp in &plan.tenants {
            let v = tp.tenant.as_str();
            let planned = if level == 1 {
                tp.l1.size
            } else {
                tp.l2_total()
            };
            let got = caches
                .iter()
                .find(|x| x.name == v)
                .unwrap_or_else(|| panic!("{what}: no cache {v} on level {level}: {caches:?}"));
            // A partition planned at 0 keeps one block (the node refuses less), taken from
            // the node's largest partition so the node's sum stays within its memory.
            let zeros = plan
                .tenants
                .iter()
                .filter(|t| (if level == 1 { t.l1.size } else { t.l2_total() }) == 0)
                .count() as u64;
            let want = (planned * BS).max(BS);
            assert!(
                got.size_bytes == want || (zeros > 0 && want - got.size_bytes <= zeros * BS),
                "{what}: {v} level {level}: planned {want}, holds {}",
                got.size_bytes
            );
            assert_eq!(got.stats.eviction, tp.eviction, "{what}: {v} level {level}");
            assert_eq!(
                got.stats.admission, tp.admission,
                "{what}: {v} level {level}"
            );
            let wp = write_policy.get(v).copied().unwrap_or("write-back");
            assert_eq!(got.stats.write_policy, wp, "{what}: {v} level {level}");
            let routed: Vec<u64> = rules
                .iter()
                .filter(|x| x.export == v && x.client.is_none() && x.range.is_none())
                .map(|x| x.cache)
                .collect();
            assert_eq!(routed, vec![got.id], "{what}: {v}'s rule on level {level}");
            // Its row prints what the nodes hold.
            let row = r.rows.iter().find(|x| x.tenant == v).unwrap();
            let applied = if level == 1 {
                row.l1_applied
            } else {
                row.l2_applied
            };
            assert_eq!(applied, got.size_bytes, "{what}: {v}'s row, level {level}");
        }
        // The plan's proportions of this node (none: equal shares).
        let at = if level == 1 { "host" } else { "server" };
        let mut want = BTreeMap::new();
        for b in plan.bandwidth.iter().filter(|b| b.level == at) {
            for &(i, p) in &b.shares {
                want.insert(plan.tenants[i].tenant.clone(), p);
            }
        }
        assert_eq!(
            want.len(),
            props.len(),
            "{what} level {level}: {want:?} {props:?}"
        );
        for (t, p) in &want {
            assert!(
                (props[t] - p).abs() < 1e-9,
                "{what} level {level}: {want:?} {props:?}"
            );
        }
    }
}

/// Reads: db a 48-block set three times, web a scan of 64 new blocks (`round` moves it).
fn traffic(rt: &tokio::runtime::Runtime, h: &node::RunningNode, round: u64) {
    rt.block_on(async {
        let db = nbd::NbdClient::connect(h.nbd_addr, "db").await.unwrap();
        for _ in 0..3 {
            for k in 0..48u64 {
                db.read(k * BS, BS as u32).await.unwrap();
            }
        }
        db.write(0, vec![7u8; BS as usize], false).await.unwrap();
        let web = nbd::NbdClient::connect(h.nbd_addr, "web").await.unwrap();
        for k in 0..64u64 {
            web.read((round * 64 + k) * BS, BS as u32).await.unwrap();
        }
    });
}

#[test]
fn every_field_of_every_schemes_plan_is_what_the_nodes_report() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    for (k, (scheme, extra)) in [
        ("fair", ""),
        ("mlms", ""),
        ("moirai-utility", ""),
        // SOPA's policy choice on fair shares.
        ("fair", "policy_choice = true"),
        // The bandwidth learners.
        ("fair", "[controller.bandwidth]\nmode = \"coordinated\""),
        ("lachesis", ""),
    ]
    .into_iter()
    .enumerate()
    {
        let what = format!("{scheme} {extra}");
        let base = dir.path().join(format!("run{k}"));
        let (s1, h) = two_level(&rt, &base, &["db", "web"], "2MiB");
        let mut cfg = ControllerConfig::parse(&config(scheme, extra)).unwrap();
        cfg.controller.data_dir = base.join("ctl");
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&base.join("ctl.db")).unwrap());
        let svc = Service::open(&cfg, store).unwrap();
        for (name, level, n, size) in [("s1", 2u8, &s1, 4u64 << 20), ("h", 1, &h, 2 << 20)] {
            svc.register(registration(name, level, n, size)).unwrap();
        }
        let mut wp = BTreeMap::from([("db", "write-through")]);
        for round in 0..5u64 {
            if round == 3 {
                // The write policy changed on the fly: every cache of the volume follows.
                let mut spec = cfg.tenants[0].clone();
                spec.volumes[0].write_policy = Some("write-around".into());
                svc.put_tenant(spec, false).unwrap();
                wp.insert("db", "write-around");
            }
            let r = svc.tick().unwrap();
            assert_applied(&format!("{what}, interval {round}"), &svc, &r, &h, &s1, &wp);
            traffic(&rt, &h, round);
        }
        rt.block_on(async {
            let _ = h.shutdown().await;
            let _ = s1.shutdown().await;
        });
    }
}
