//! The controller against real nodes in-process: exclusive levels turned on per volume
//! (caches created `upper` at level 1 and `lower` at level 2, level-1 victims demoted
//! into level 2, a mode switched back when the configuration changes), a volume scaled
//! out over both levels (Moirai §3.5: one global LRU, its total split by
//! `alloc::scaleout`), and a tenant added while the controller runs keeping every other
//! volume's `control` state.

use crate::common::node_toml;
use controller::config::{ControllerConfig, TenantConfig};
use controller::{Service, SqliteStore, Store};
use std::sync::Arc;

const CONFIG: &str = r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "lachesis"
exclusive = false
[[tenant]]
name = "db"
[[tenant.volume]]
name = "db"
host = "h"
servers = ["s1"]
exclusive = true
[[tenant]]
name = "web"
[[tenant.volume]]
name = "web"
host = "h"
servers = ["s1"]
"#;

struct World {
    rt: tokio::runtime::Runtime,
    nodes: Vec<(&'static str, u8, node::RunningNode)>,
    svc: Arc<Service>,
    _ctl: controller::RunningController,
    _dir: tempfile::TempDir,
}

/// One level-2 node `s1` (file exports `db`, `web`) and one level-1 node `h` exporting
/// both over it, `db` with `upstream_api` (its demotions go to `s1`); a controller with
/// `CONFIG` to which both nodes are registered.
fn world() -> World {
    world_with(CONFIG)
}

/// [`world`] with another controller configuration.
fn world_with(config: &str) -> World {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut ex = String::new();
    for v in ["db", "web"] {
        ex += &format!("[[export]]\nname = \"{v}\"\nfile = \"{v}.img\"\nsize = \"8MiB\"\n");
    }
    let cfg = node::config::NodeConfig::parse(&node_toml(&dir.path().join("s1"), 2, "4MiB", &ex))
        .unwrap();
    let s1 = rt.block_on(node::start(&cfg)).unwrap();
    let token = dir.path().join("s1.token");
    std::fs::write(&token, s1.api_token.secret()).unwrap();
    let ex = format!(
        "[[export]]\nname = \"db\"\nupstream = [\"{0}/db\"]\n\
         [[export.upstream_api]]\nurl = \"http://{1}\"\ntoken_file = \"{2}\"\n\
         [[export]]\nname = \"web\"\nupstream = [\"{0}/web\"]\n",
        s1.nbd_addr,
        s1.api_addr,
        token.display()
    );
    let cfg =
        node::config::NodeConfig::parse(&node_toml(&dir.path().join("h"), 1, "1MiB", &ex)).unwrap();
    let h = rt.block_on(node::start(&cfg)).unwrap();
    let nodes = vec![("s1", 2u8, s1), ("h", 1u8, h)];
    let mut cfg = ControllerConfig::parse(config).unwrap();
    cfg.controller.data_dir = dir.path().join("ctl");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("ctl.db")).unwrap());
    let ctl = rt.block_on(controller::start(&cfg, store, false)).unwrap();
    let svc = ctl.service.clone();
    for (name, level, n) in &nodes {
        let size = if *level == 1 { 1 << 20 } else { 4 << 20 };
        svc.register(crate::common::registration(name, *level, n, size))
            .unwrap();
    }
    World {
        rt,
        nodes,
        svc,
        _ctl: ctl,
        _dir: dir,
    }
}

fn mode(n: &node::RunningNode, cache: &str) -> String {
    n.state
        .caches()
        .into_iter()
        .find(|c| c.name == cache)
        .map(|c| c.stats.exclusive)
        .unwrap_or_else(|| panic!("no cache `{cache}`"))
}

#[test]
fn exclusive_volumes_get_exclusive_caches_and_demote() {
    let w = world();
    let (s1, h) = (&w.nodes[0].2, &w.nodes[1].2);
    let r = w.svc.tick().unwrap();
    assert!(
        r.actions.iter().all(|a| a.result == "ok"),
        "{:?}",
        r.actions
    );
    assert_eq!(mode(h, "db"), "upper");
    assert_eq!(mode(s1, "db"), "lower");
    assert_eq!(mode(h, "web"), "off");
    assert_eq!(mode(s1, "web"), "off");
    // Re-applying the plan leaves the modes alone.
    let r = w.svc.tick().unwrap();
    assert!(
        !r.actions.iter().any(|a| a.verb == "exclusive"),
        "{:?}",
        r.actions
    );

    // Read 2 MiB of db through a level-1 cache of at most 1 MiB: level 1 evicts clean
    // blocks and demotes them into db's level-2 cache.
    let l1_size = h
        .state
        .caches()
        .into_iter()
        .find(|c| c.name == "db")
        .unwrap()
        .size_bytes;
    assert!(l1_size <= 1 << 20, "{l1_size}");
    w.rt.block_on(async {
        let c = nbd::NbdClient::connect(h.nbd_addr, "db").await.unwrap();
        for k in 0..32u64 {
            let got = c.read(k * 65536, 65536).await.unwrap();
            assert_eq!(got.len(), 65536);
        }
        let _ = c.disconnect().await;
    });
    let t0 = std::time::Instant::now();
    let (demoted, demoted_in) = loop {
        let up = h
            .state
            .caches()
            .into_iter()
            .find(|c| c.name == "db")
            .unwrap();
        let low = s1
            .state
            .caches()
            .into_iter()
            .find(|c| c.name == "db")
            .unwrap();
        if (low.stats.demoted_in > 0 && up.stats.demoted > 0)
            || t0.elapsed() > std::time::Duration::from_secs(5)
        {
            break (up.stats.demoted, low.stats.demoted_in);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // 512 blocks read into at most 256: at least 256 clean victims.
    assert!(demoted >= 256, "level 1 demoted {demoted} blocks");
    assert!(
        demoted_in > 0,
        "level 2 took in {demoted_in} demoted blocks"
    );

    // The volume's configuration turns exclusive off: the next interval switches both
    // caches back.
    let mut t: TenantConfig = w.svc.tenant("db").unwrap().spec;
    t.volumes[0].exclusive = Some(false);
    w.svc.put_tenant(t, false).unwrap();
    let r = w.svc.tick().unwrap();
    let switched: Vec<_> = r.actions.iter().filter(|a| a.cache == "db").collect();
    assert!(
        switched.iter().any(|a| a.detail.contains("exclusive")),
        "{switched:?}"
    );
    assert_eq!(mode(h, "db"), "off");
    assert_eq!(mode(s1, "db"), "off");
}

#[test]
fn a_tenant_added_while_running_keeps_the_others_state() {
    let w = world();
    let h = &w.nodes[1].2;
    // A few intervals with I/O on db, so its control state has samples and a curve.
    for _ in 0..3 {
        w.rt.block_on(async {
            let c = nbd::NbdClient::connect(h.nbd_addr, "db").await.unwrap();
            for k in 0..64u64 {
                c.read((k % 24) * 4096, 4096).await.unwrap();
            }
            let _ = c.disconnect().await;
        });
        w.svc.tick().unwrap();
    }
    let before = w.svc.control_state();
    let db_before = before
        .tenants
        .iter()
        .find(|t| t.name == "db")
        .unwrap()
        .clone();
    assert!(!db_before.samples.is_empty(), "db has latency samples");
    assert!(db_before.curve.is_some(), "db has a curve");
    let interval = before.interval;

    // A third tenant on the same nodes.
    let spec: TenantConfig = serde_json::from_value(serde_json::json!({
        "name": "new", "volume": [{"name": "web2", "host": "h", "servers": ["s1"]}]
    }))
    .unwrap();
    w.svc.put_tenant(spec, true).unwrap();
    let r = w.svc.tick().unwrap();
    assert_eq!(r.rows.len(), 3);
    let after = w.svc.control_state();
    assert_eq!(after.interval, interval + 1, "the interval count goes on");
    let db = after.tenants.iter().find(|t| t.name == "db").unwrap();
    // db's history survived: its old samples are still there, in order.
    let n = db_before.samples.len();
    assert!(db.samples.len() >= n, "{db:?}");
    assert_eq!(db.samples[..n], db_before.samples[..]);
    assert!(db.curve.is_some());
    // The previous plan (what hysteresis damps against) names every volume.
    let prev = after.previous.as_ref().expect("a previous plan");
    let names: Vec<&str> = prev.tenants.iter().map(|t| t.tenant.as_str()).collect();
    assert_eq!(names, ["db", "web", "web2"]);
    assert_eq!(db.service.is_some(), db_before.service.is_some());
    let new = after.tenants.iter().find(|t| t.name == "web2").unwrap();
    assert!(new.samples.is_empty(), "the new volume starts afresh");
    // explain finds the volumes by name.
    let e = w.svc.explain("db").unwrap();
    assert_eq!(e.volumes[0].volume, "db");
    assert_eq!(e.volumes[0].plan.as_ref().unwrap().tenant, "db");
}

#[test]
fn a_volume_on_two_hosts_is_planned_on_each_and_merged_at_level_2() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ex = "[[export]]\nname = \"db\"\nfile = \"db.img\"\nsize = \"8MiB\"\n";
    let cfg =
        node::config::NodeConfig::parse(&node_toml(&dir.path().join("s1"), 2, "4MiB", ex)).unwrap();
    let s1 = rt.block_on(node::start(&cfg)).unwrap();
    let mut nodes = vec![("s1", 2u8, s1)];
    for h in ["h1", "h2"] {
        let ex = format!(
            "[[export]]\nname = \"db\"\nupstream = [\"{}/db\"]\n",
            nodes[0].2.nbd_addr
        );
        let cfg = node::config::NodeConfig::parse(&node_toml(&dir.path().join(h), 1, "1MiB", &ex))
            .unwrap();
        nodes.push((h, 1, rt.block_on(node::start(&cfg)).unwrap()));
    }
    let mut cfg = ControllerConfig::parse(
        r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "lachesis"
exclusive = false
[[tenant]]
name = "db"
[[tenant.volume]]
name = "db"
host = "h1"
hosts = ["h2"]
servers = ["s1"]
"#,
    )
    .unwrap();
    cfg.controller.data_dir = dir.path().join("ctl");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("ctl.db")).unwrap());
    let ctl = rt.block_on(controller::start(&cfg, store, false)).unwrap();
    let svc = ctl.service.clone();
    for (name, level, n) in &nodes {
        let size = if *level == 1 { 1 << 20 } else { 4 << 20 };
        svc.register(crate::common::registration(name, *level, n, size))
            .unwrap();
    }
    let r = svc.tick().unwrap();
    assert!(
        r.actions.iter().all(|a| a.result == "ok"),
        "{:?}",
        r.actions
    );
    let names: Vec<&str> = r.rows.iter().map(|r| r.tenant.as_str()).collect();
    assert_eq!(names, ["db", "db@h2"]);
    // Each host has its level-1 partition; the server one cache holding both tenants'
    // level-2 partitions.
    let size = |n: &node::RunningNode| {
        let c = n.state.caches();
        assert_eq!(c.len(), 1, "one cache");
        assert_eq!(c[0].name, "db");
        c[0].size_bytes
    };
    let plan = svc.plan().unwrap();
    let bs = 4096;
    assert_eq!(size(&nodes[1].2), plan.tenants[0].l1.size * bs);
    assert_eq!(size(&nodes[2].2), plan.tenants[1].l1.size * bs);
    let l2_sum = (plan.tenants[0].l2_total() + plan.tenants[1].l2_total()) * bs;
    assert_eq!(size(&nodes[0].2), l2_sum.max(bs));
    assert_eq!(r.allocations["s1"]["db"], l2_sum);

    // I/O through h2 only: its tenant has the requests and all of level 2's lookups.
    rt.block_on(async {
        let c = nbd::NbdClient::connect(nodes[2].2.nbd_addr, "db")
            .await
            .unwrap();
        for k in 0..100u64 {
            c.read(k * 4096, 4096).await.unwrap();
        }
        let _ = c.disconnect().await;
    });
    let r = svc.tick().unwrap();
    let row = |t: &str| r.rows.iter().find(|r| r.tenant == t).unwrap().clone();
    assert_eq!(row("db").requests, 0);
    assert_eq!(row("db@h2").requests, 100);
    assert!(row("db@h2").l2_hit_ratio <= 1.0);
    let obs_names = svc.explain("db").unwrap();
    assert_eq!(obs_names.volumes[0].hosts, ["h2"]);
    drop(ctl);
}

#[test]
fn a_scaled_out_volume_is_split_by_alpha_and_the_nodes_hold_the_split() {
    let w = world_with(&CONFIG.replace("exclusive = true", "scale_out = true"));
    let (s1, h) = (&w.nodes[0].2, &w.nodes[1].2);
    let size = |n: &node::RunningNode, c: &str| {
        n.state
            .caches()
            .into_iter()
            .find(|x| x.name == c)
            .unwrap()
            .size_bytes
    };
    let mut split = None;
    for _ in 0..4 {
        // A 96-block loop: a curve for the split to be taken on.
        w.rt.block_on(async {
            let c = nbd::NbdClient::connect(h.nbd_addr, "db").await.unwrap();
            for k in 0..192u64 {
                c.read((k % 96) * 4096, 4096).await.unwrap();
            }
            let _ = c.disconnect().await;
        });
        let r = w.svc.tick().unwrap();
        assert!(r.refused.is_empty(), "{:?}", r.refused);
        let plan = w.svc.plan().unwrap();
        let i = plan.tenants.iter().position(|t| t.tenant == "db").unwrap();
        // Scaled out means exclusive: one global LRU over the two levels.
        assert_eq!(
            (mode(h, "db"), mode(s1, "db")),
            ("upper".into(), "lower".into())
        );
        if let Some(so) = plan.scale_out.iter().find(|s| s.tenant == i) {
            let tp = &plan.tenants[i];
            assert_eq!(so.host + so.storage, so.total);
            assert_eq!((tp.l1.size, tp.l2_total()), (so.host, so.storage));
            assert!((so.alpha - so.host as f64 / so.total as f64).abs() < 1e-12);
            // The nodes hold the split (a partition of 0 keeps one block).
            assert_eq!(size(h, "db"), (so.host * 4096).max(4096));
            assert_eq!(size(s1, "db"), (so.storage * 4096).max(4096));
            // Each node's caches stay within its memory.
            let used =
                |n: &node::RunningNode| n.state.caches().iter().map(|c| c.size_bytes).sum::<u64>();
            assert!(used(h) <= 1 << 20 && used(s1) <= 4 << 20);
            split = Some(so.clone());
        }
    }
    let so = split.expect("a split once db had a curve");
    // A host faster than the storage cache takes as much of the total as it has room for.
    assert!(so.alpha > 0.0, "{so:?}");
}
