//! Issue 37 item 3, boosting live: a storage node's hot tiers report their per-period
//! hits, migrations and candidates; the controller's threshold (`plan.boost`) reaches
//! each tier in place, without resetting its candidates' counts; a volume whose spec
//! turns boosting off has its tier placing nothing. And a tier's bad input is a 4xx
//! naming the field, with the tier unchanged.

use crate::common::{call, registration, runtime, start_node, upstream_exports};
use api::node::HotTierView;
use controller::config::ControllerConfig;
use controller::{Service, SqliteStore, Store};
use std::sync::Arc;

const CONFIG: &str = r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "fair"
exclusive = false
boost = true
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
boost = false
"#;

/// `[[export]]` tables over 8 MiB files, each with a hot tier of 16 chunks of 64 KiB
/// placing at the fourth access (MRFU).
fn tiered_exports(volumes: &[&str]) -> String {
    volumes
        .iter()
        .map(|v| {
            format!(
                "[[export]]\nname = \"{v}\"\nfile = \"{v}.img\"\nsize = \"8MiB\"\n\
                 [export.hot_tier]\nfile = \"{v}.fast\"\nsize = \"1MiB\"\nchunk = \"64KiB\"\n\
                 admission = \"mrfu:threshold=4\"\nmax_migrations_per_sec = 0\n"
            )
        })
        .collect()
}

/// The tier of `export` as `node` reports it in `GET /v1/exports`.
fn tier(node: &node::RunningNode, export: &str) -> HotTierView {
    node.state
        .export_infos()
        .into_iter()
        .find(|e| e.name == export)
        .and_then(|e| e.hot_tier)
        .unwrap()
}

/// Reads block `block` of each of `chunks` (64 KiB chunks of 16 blocks) of `export`
/// through the host.
fn read_chunks(
    rt: &tokio::runtime::Runtime,
    h: &node::RunningNode,
    export: &str,
    chunks: &[u64],
    block: u64,
) {
    rt.block_on(async {
        let c = nbd::NbdClient::connect(h.nbd_addr, export).await.unwrap();
        for &k in chunks {
            c.read(k * 65536 + block * 4096, 4096).await.unwrap();
        }
    });
}

#[test]
fn the_plans_threshold_reaches_each_tier_in_place_and_boost_off_places_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let s1 = start_node(
        &rt,
        &dir.path().join("s1"),
        2,
        "4MiB",
        &tiered_exports(&["db", "web"]),
    );
    let h = start_node(
        &rt,
        &dir.path().join("h"),
        1,
        "2MiB",
        &upstream_exports(s1.nbd_addr, &["db", "web"]),
    );
    let mut cfg = ControllerConfig::parse(CONFIG).unwrap();
    cfg.controller.data_dir = dir.path().join("ctl");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("ctl.db")).unwrap());
    let svc = Service::open(&cfg, store).unwrap();
    for (name, level, n, size) in [("s1", 2u8, &s1, 4u64 << 20), ("h", 1, &h, 2 << 20)] {
        svc.register(registration(name, level, n, size)).unwrap();
    }

    // Before any plan: db's tier counts 8 chunks twice each (distinct blocks, so every
    // read misses both RAM caches and touches the tier), none placed at threshold 4.
    let chunks = [0u64, 2, 4, 6, 8, 10, 12, 14];
    read_chunks(&rt, &h, "db", &chunks, 0);
    read_chunks(&rt, &h, "db", &chunks, 1);
    let before = tier(&s1, "db");
    assert_eq!(
        (before.candidates, before.migrations),
        (Some(8), 0),
        "{before:?}"
    );
    assert!(!before.controlled);

    // First interval: no tier period yet had a migration, so SANCACHE's rule lowers the
    // threshold to 1. It reaches db's tier in place: the 8 candidates keep their counts.
    let r = svc.tick().unwrap();
    assert!(r.refused.is_empty(), "{:?}", r.refused);
    let plan = svc.plan().unwrap();
    assert_eq!(plan.boost.len(), 1, "{:?}", plan.boost);
    let planned = plan.boost[0].threshold;
    let db = tier(&s1, "db");
    assert_eq!(db.threshold, Some(planned), "{db:?}");
    assert!(db.controlled && db.enabled, "{db:?}");
    assert_eq!(
        db.candidates,
        Some(8),
        "the candidates' counts survived the change"
    );
    // web's spec turns boosting off: its tier places nothing and keeps its own threshold.
    let web = tier(&s1, "web");
    assert!(!web.enabled && !web.controlled, "{web:?}");
    assert_eq!(web.threshold, Some(4));
    // The report shows the tiers as the node holds them.
    assert_eq!(r.tiers["s1"].iter().find(|t| t.export == "db"), Some(&db));

    // At the plan's threshold a third access of a counted chunk places it; web's tier,
    // off, places nothing however often its chunks are read.
    read_chunks(&rt, &h, "db", &chunks[..4], 2);
    for b in 0..6 {
        read_chunks(&rt, &h, "web", &[1, 3], b);
    }
    let db = tier(&s1, "db");
    assert_eq!(db.migrations, 4, "{db:?}");
    assert_eq!(tier(&s1, "web").migrations, 0);

    // Further intervals: the period's hits and migrations feed the rule, and whatever
    // threshold it plans is what the node reports back.
    for k in 0..3u64 {
        read_chunks(&rt, &h, "db", &chunks[..4], 3 + k);
        let r = svc.tick().unwrap();
        assert!(r.refused.is_empty(), "{:?}", r.refused);
        let plan = svc.plan().unwrap();
        let db = tier(&s1, "db");
        assert_eq!(
            db.threshold,
            Some(plan.boost[0].threshold),
            "interval {k}: {db:?}"
        );
        assert!(!tier(&s1, "web").enabled);
    }

    // Bad input: each a 4xx naming the field, the tier unchanged.
    let base = format!("http://{}", s1.api_addr);
    let token = Some(s1.api_token.secret());
    let was = tier(&s1, "db");
    let path = "/v1/exports/db/hot_tier";
    let (st, v) = call(
        &base,
        token,
        "PATCH",
        path,
        Some(serde_json::json!({"threshold": 0, "enabled": false})),
    );
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("hot_tier.threshold"),
        "{v}"
    );
    let (st, v) = call(
        &base,
        token,
        "PATCH",
        path,
        Some(serde_json::json!({"thresold": 3})),
    );
    assert_eq!(st, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("thresold"), "{v}");
    let (st, v) = call(
        &base,
        token,
        "PATCH",
        "/v1/exports/nope/hot_tier",
        Some(serde_json::json!({"threshold": 3})),
    );
    assert_eq!(st, 404, "{v}");
    let now = tier(&s1, "db");
    assert_eq!((now.threshold, now.enabled), (was.threshold, was.enabled));
    // An export without a tier: 409 naming it.
    let (st, v) = call(
        &format!("http://{}", h.api_addr),
        Some(h.api_token.secret()),
        "PATCH",
        path,
        Some(serde_json::json!({"threshold": 3})),
    );
    assert_eq!(st, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains("db"), "{v}");

    rt.block_on(async {
        let _ = h.shutdown().await;
        let _ = s1.shutdown().await;
    });
}
