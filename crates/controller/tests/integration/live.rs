//! The controller against real nodes in-process: programming them from the plan,
//! idempotent reconcile, bad input refused with nothing changed, a restart resuming from
//! SQLite, a node marked down and re-programmed when it returns empty, a deleted tenant's
//! caches removed from the nodes.

use crate::common::node_toml;
use controller::config::ControllerConfig;
use controller::registry::Registration;
use controller::{Service, SqliteStore, Store};
use serde_json::{json, Value};
use std::sync::Arc;

const CONFIG: &str = r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "lachesis"
exclusive = false
[[tenant]]
name = "db"
class = "gold"
slo = { latency_ms = 5.0 }
[[tenant.volume]]
name = "db"
host = "h"
servers = ["s1", "s2"]
stripe_unit = "64KiB"
[[tenant]]
name = "web"
[[tenant.volume]]
name = "web"
host = "h"
servers = ["s1"]
"#;

struct Http {
    base: String,
    token: String,
}

impl Http {
    fn call(&self, method: &str, path: &str, body: Option<Value>, auth: bool) -> (u16, Value) {
        let token = auth.then_some(self.token.as_str());
        crate::common::call(&self.base, token, method, path, body)
    }
}

#[test]
fn programs_nodes_refuses_bad_input_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Two level-2 nodes with file exports, one level-1 node striping over them.
    let mut nodes = Vec::new();
    for s in ["s1", "s2"] {
        let mut ex = String::new();
        for v in ["db", "web"] {
            ex += &format!("[[export]]\nname = \"{v}\"\nfile = \"{v}.img\"\nsize = \"8MiB\"\n");
        }
        let cfg = node::config::NodeConfig::parse(&node_toml(&dir.path().join(s), 2, "4MiB", &ex))
            .unwrap();
        nodes.push((s, 2u8, rt.block_on(node::start(&cfg)).unwrap()));
    }
    let ex = format!(
        "[[export]]\nname = \"db\"\nupstream = [\"{}/db\", \"{}/db\"]\nstripe_unit = \"64KiB\"\n\
         [[export]]\nname = \"web\"\nupstream = [\"{}/web\"]\n",
        nodes[0].2.nbd_addr, nodes[1].2.nbd_addr, nodes[0].2.nbd_addr
    );
    let cfg =
        node::config::NodeConfig::parse(&node_toml(&dir.path().join("h"), 1, "4MiB", &ex)).unwrap();
    nodes.push(("h", 1u8, rt.block_on(node::start(&cfg)).unwrap()));

    let mut cfg = ControllerConfig::parse(CONFIG).unwrap();
    cfg.controller.data_dir = dir.path().join("ctl");
    let db = dir.path().join("ctl.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).unwrap());
    let ctl = rt.block_on(controller::start(&cfg, store, false)).unwrap();
    let svc = ctl.service.clone();
    let http = Http {
        base: format!("http://{}", ctl.addr),
        token: ctl.token.secret().to_string(),
    };
    for (name, level, n) in &nodes {
        let r = Registration {
            name: name.to_string(),
            level: *level,
            api: format!("http://{}", n.api_addr),
            nbd: Some(n.nbd_addr.to_string()),
            cache_size: 4 << 20,
            block_size: 4096,
            epoch: "e0".into(),
            exports: vec![],
            token: n.api_token.secret().to_string(),
        };
        let (st, _) = http.call(
            "POST",
            "/v1/nodes/register",
            Some(serde_json::to_value(&r).unwrap()),
            true,
        );
        assert_eq!(st, 200);
    }

    // Open endpoints and the token.
    assert_eq!(http.call("GET", "/healthz", None, false).0, 200);
    assert_eq!(http.call("GET", "/", None, false).0, 200);
    assert_eq!(http.call("GET", "/v1/tenants", None, false).0, 401);

    // The first interval programs every node: a cache per volume and a rule per export.
    let r = svc.tick().unwrap();
    assert!(
        r.actions.iter().all(|a| a.result == "ok"),
        "{:?}",
        r.actions
    );
    let host = &nodes[2].2;
    let caches = host.state.caches();
    let names: Vec<&str> = caches.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"db") && names.contains(&"web"));
    let total: u64 = caches.iter().map(|c| c.size_bytes).sum();
    assert!(
        total <= 4 << 20,
        "the host's partitions fit its memory: {total}"
    );
    assert_eq!(host.state.rules().len(), 2);
    // s2 holds only db's stripe.
    assert_eq!(nodes[1].2.state.caches().len(), 1);
    // Applying the same plan again changes nothing.
    let r2 = svc.tick().unwrap();
    assert!(
        r2.actions.iter().all(|a| a.verb == "resize"),
        "only sizes may move between intervals: {:?}",
        r2.actions
    );
    let r3 = svc.tick().unwrap();
    assert!(
        r3.actions.len() <= r2.actions.len(),
        "reconcile settles: {:?}",
        r3.actions
    );

    // I/O through the level-1 export reaches the data.
    let got = rt.block_on(async {
        let c = nbd::NbdClient::connect(host.nbd_addr, "db").await.unwrap();
        c.write(65536, vec![7u8; 8192], false).await.unwrap();
        c.flush().await.unwrap();
        c.read(65536, 8192).await.unwrap()
    });
    assert!(got.iter().all(|&b| b == 7));

    // Bad input: 4xx naming the field, and nothing changes.
    let before = http.call("GET", "/v1/tenants", None, true).1;
    let caches_before = host.state.caches().len();
    let (st, v) = http.call(
        "POST",
        "/v1/tenants",
        Some(json!({"name": "x", "volume": [{"name": "x", "host": "h", "servers": ["nowhere"]}]})),
        true,
    );
    assert_eq!(st, 400);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("servers: unknown node `nowhere`"),
        "{v}"
    );
    let (st, v) = http.call(
        "POST",
        "/v1/tenants",
        Some(json!({"name": "x", "colour": 1, "volume": []})),
        true,
    );
    assert_eq!(st, 400);
    assert!(v["error"].as_str().unwrap().contains("colour"), "{v}");
    let (st, v) = http.call(
        "POST",
        "/v1/tenants",
        Some(json!({"name": "x", "volume": []})),
        true,
    );
    assert_eq!(st, 400);
    assert!(
        v["error"].as_str().unwrap().contains("tenant \"x\".volume"),
        "{v}"
    );
    let (st, v) = http.call(
        "PUT",
        "/v1/tenants/db/slo",
        Some(json!({"slo": {"latency_ms": -1.0}})),
        true,
    );
    assert_eq!(st, 400);
    assert!(
        v["error"].as_str().unwrap().contains("tenant \"db\".slo"),
        "{v}"
    );
    let (st, _) = http.call(
        "PUT",
        "/v1/tenants/nobody/slo",
        Some(json!({"slo": null})),
        true,
    );
    assert_eq!(st, 404);
    assert_eq!(http.call("GET", "/v1/explain/nobody", None, true).0, 404);
    let (st, _) = http.call(
        "POST",
        "/v1/tenants",
        Some(json!({"name": "db", "volume": [{"name": "db", "host": "h", "servers": ["s1"]}]})),
        true,
    );
    assert_eq!(st, 409);
    assert_eq!(http.call("GET", "/v1/tenants", None, true).1, before);
    assert_eq!(host.state.caches().len(), caches_before, "no node touched");

    // A good change takes effect.
    let (st, v) = http.call(
        "PUT",
        "/v1/tenants/web/slo",
        Some(json!({"slo": {"degradation": 0.5}, "class": "silver"})),
        true,
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["slo"]["degradation"], 0.5);
    let plan = http.call("GET", "/v1/plan", None, true).1;
    assert_eq!(plan["tenants"].as_array().unwrap().len(), 2);
    let ex = http.call("GET", "/v1/explain/db", None, true).1;
    assert_eq!(ex["volumes"][0]["volume"], "db");
    assert!(ex["volumes"][0]["plan"]["l1"]["reason"].is_string());
    assert_eq!(ex["volumes"][0]["plan"]["l1"]["node"], "h");
    let hist = http
        .call("GET", "/v1/history?tenant=db&limit=10", None, true)
        .1;
    assert_eq!(
        hist.as_array().unwrap().len(),
        3,
        "one decision per interval"
    );

    // A restart resumes from the store: tenants, the change, the state's interval.
    let interval = svc.plan().unwrap().interval;
    rt.block_on(ctl.shutdown());
    drop(svc);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).unwrap());
    let svc = Service::open(&cfg, store).unwrap();
    let web = svc.tenant("web").unwrap();
    assert_eq!(web.spec.slo, Some(control::Slo::Degradation(0.5)));
    assert_eq!(svc.nodes().len(), 3);
    let r = svc.tick().unwrap();
    assert_eq!(r.interval, interval + 1, "the control state resumed");
    assert_eq!(svc.history(Some("db"), 100).unwrap().len(), 4);

    // A level-2 node that stops answering is marked down after three failed polls.
    let s2 = nodes.remove(1);
    rt.block_on(s2.2.shutdown()).unwrap();
    for _ in 0..3 {
        svc.tick().unwrap();
    }
    let down = svc.nodes().into_iter().find(|n| n.name == "s2").unwrap();
    assert!(!down.up, "{down:?}");
    let plan = svc.plan().unwrap();
    let db_plan = plan.tenants.iter().find(|t| t.tenant == "db").unwrap();
    assert!(
        db_plan.l2.iter().any(|p| p.size == 0),
        "planned without it: {db_plan:?}"
    );

    // Deleting a tenant removes its caches (and their rules) from the nodes at the next
    // interval; the other tenant's stay.
    let web_rule = nodes[1]
        .2
        .state
        .rules()
        .iter()
        .filter(|r| r.export == "web")
        .count();
    assert_eq!(web_rule, 1);
    svc.delete_tenant("web").unwrap();
    let r = svc.tick().unwrap();
    let removed: Vec<(&str, &str)> = r
        .actions
        .iter()
        .filter(|a| a.verb == "remove")
        .map(|a| (a.node.as_str(), a.cache.as_str()))
        .collect();
    assert!(
        removed.contains(&("h", "web")) && removed.contains(&("s1", "web")),
        "{:?}",
        r.actions
    );
    assert!(
        r.actions.iter().all(|a| a.result == "ok"),
        "{:?}",
        r.actions
    );
    for (name, _, n) in &nodes {
        let names: Vec<String> = n.state.caches().into_iter().map(|c| c.name).collect();
        assert_eq!(names, vec!["db".to_string()], "{name}");
        assert!(n.state.rules().iter().all(|r| r.export != "web"), "{name}");
    }
    // Reconciling again changes nothing more.
    let r = svc.tick().unwrap();
    assert!(
        r.actions.iter().all(|a| a.verb != "remove"),
        "{:?}",
        r.actions
    );
    for (_, _, n) in nodes {
        rt.block_on(n.shutdown()).unwrap();
    }
}
