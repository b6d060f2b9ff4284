//! The `uncontrolled` scheme live: one shared cache per node, every volume routed to it,
//! and each volume still observed (and judged) on its own, tail SLO included.

use crate::common::{registration, runtime, two_level};
use controller::config::ControllerConfig;
use controller::{SqliteStore, Store};
use std::sync::Arc;

const CONFIG: &str = r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "uncontrolled"
exclusive = false
[[tenant]]
name = "db"
slo = { p99_ms = 1000.0 }
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
"#;

#[test]
fn one_shared_cache_per_node_with_every_volume_routed_and_observed_apart() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let (s1, h) = two_level(&rt, dir.path(), &["db", "web"], "2MiB");

    let mut cfg = ControllerConfig::parse(CONFIG).unwrap();
    cfg.controller.data_dir = dir.path().join("ctl");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("ctl.db")).unwrap());
    let ctl = rt.block_on(controller::start(&cfg, store, false)).unwrap();
    let svc = ctl.service.clone();
    for (name, level, n, size) in [("s1", 2u8, &s1, 4u64 << 20), ("h", 1, &h, 2 << 20)] {
        svc.register(registration(name, level, n, size)).unwrap();
    }
    let r = svc.tick().unwrap();
    assert!(
        r.actions.iter().all(|a| a.result == "ok"),
        "{:?}",
        r.actions
    );
    for (n, size) in [(&h, 2u64 << 20), (&s1, 4 << 20)] {
        let caches = n.state.caches();
        assert_eq!(caches.len(), 1, "{caches:?}");
        assert_eq!(caches[0].name, "shared");
        assert_eq!(caches[0].size_bytes, size);
        let rules = n.state.cache_node().rules();
        let mut routed: Vec<&str> = rules.iter().map(|(_, r, _)| r.export.as_str()).collect();
        routed.sort_unstable();
        assert_eq!(routed, ["db", "web"]);
        assert!(rules.iter().all(|(_, _, c)| *c == caches[0].id));
    }
    // db reads 64 blocks twice, web 16 blocks once: each counted as its own.
    rt.block_on(async {
        let db = nbd::NbdClient::connect(h.nbd_addr, "db").await.unwrap();
        for _ in 0..2 {
            for k in 0..64u64 {
                db.read(k * 4096, 4096).await.unwrap();
            }
        }
        let web = nbd::NbdClient::connect(h.nbd_addr, "web").await.unwrap();
        for k in 0..16u64 {
            web.read(k * 4096, 4096).await.unwrap();
        }
    });
    let r = svc.tick().unwrap();
    let row = |t: &str| r.rows.iter().find(|x| x.tenant == t).unwrap().clone();
    let (db, web) = (row("db"), row("web"));
    assert_eq!((db.requests, web.requests), (128, 16));
    assert!((db.l1_hit_ratio - 0.5).abs() < 1e-9, "{db:?}");
    assert_eq!(web.l1_hit_ratio, 0.0);
    // Both see the whole shared cache as theirs.
    assert_eq!((db.l1_applied, web.l1_applied), (2 << 20, 2 << 20));
    // The tail SLO is judged on the interval's p99.
    let p99 = db.tail_ms.expect("db's p99 measured");
    assert!(p99 > 0.0 && Some(p99) == db.p99_ms, "{db:?}");
    assert_eq!(db.slo_met, Some(true));
    rt.block_on(async {
        let _ = ctl.shutdown().await;
        let _ = h.shutdown().await;
        let _ = s1.shutdown().await;
    });
}
