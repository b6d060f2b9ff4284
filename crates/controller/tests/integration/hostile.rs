//! Issue 35 on the controller's side: names outside the one rule refused with nothing
//! changed, a deleted tenant's caches gone from the nodes, a node whose counters lie
//! marked suspect and planned at its last good interval, a node reporting an upstream
//! away shown as its volumes failing.

use crate::common::{call, node_toml};
use controller::config::ControllerConfig;
use controller::registry::Registration;
use controller::{SqliteStore, Store};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Node `n`'s registration with a 4 MiB cache, its API reached at `api` (a proxy's, where
/// a test puts one in front of it).
fn registration(name: &str, level: u8, api: String, n: &node::RunningNode) -> Registration {
    Registration {
        api,
        ..crate::common::registration(name, level, n, 4 << 20)
    }
}

fn cache_names(n: &node::RunningNode) -> Vec<String> {
    let mut v: Vec<String> = n.state.caches().into_iter().map(|c| c.name).collect();
    v.sort();
    v
}

fn within(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const ONE_TENANT: &str = r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "lachesis"
exclusive = false
[[tenant]]
name = "db"
slo = { latency_ms = 5.0 }
[[tenant.volume]]
name = "db"
host = "h"
servers = ["s"]
"#;

/// A level-2 node `s` exporting `exports` from files, and a level-1 node `h` exporting
/// them from `upstream` (default: `s`).
fn two_levels(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    exports: &[&str],
    upstream: Option<std::net::SocketAddr>,
) -> (node::RunningNode, node::RunningNode) {
    let mut ex = String::new();
    for v in exports {
        ex += &format!("[[export]]\nname = \"{v}\"\nfile = \"{v}.img\"\nsize = \"8MiB\"\n");
    }
    let cfg = node::config::NodeConfig::parse(&node_toml(&dir.join("s"), 2, "4MiB", &ex)).unwrap();
    let s = rt.block_on(node::start(&cfg)).unwrap();
    let up = upstream.unwrap_or(s.nbd_addr);
    let mut ex = String::new();
    for v in exports {
        ex += &format!("[[export]]\nname = \"{v}\"\nupstream = [\"{up}/{v}\"]\n");
    }
    let cfg = node::config::NodeConfig::parse(&node_toml(&dir.join("h"), 1, "4MiB", &ex)).unwrap();
    let h = rt.block_on(node::start(&cfg)).unwrap();
    (s, h)
}

/// A volume named `..` (or any name outside the rule) is refused naming the field, and
/// nothing changes: the stored tenants, and no cache on any node. A tenant deleted through
/// the API loses its caches on every node within a few intervals of the running loop.
#[test]
fn names_outside_the_rule_change_nothing_and_a_deleted_tenants_caches_go() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (s, h) = two_levels(&rt, dir.path(), &["db", "web"], None);
    let mut cfg = ControllerConfig::parse(ONE_TENANT).unwrap();
    cfg.controller.data_dir = dir.path().join("ctl");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("ctl.db")).unwrap());
    let ctl = rt.block_on(controller::start(&cfg, store, true)).unwrap();
    let base = format!("http://{}", ctl.addr);
    let tok = ctl.token.secret().to_string();
    for (name, level, n) in [("s", 2, &s), ("h", 1, &h)] {
        let r = registration(name, level, format!("http://{}", n.api_addr), n);
        let (st, v) = call(
            &base,
            Some(&tok),
            "POST",
            "/v1/nodes/register",
            Some(serde_json::to_value(&r).unwrap()),
        );
        assert_eq!(st, 200, "{v}");
    }
    within(Duration::from_secs(10), "db's caches made", || {
        cache_names(&h) == ["db"] && cache_names(&s) == ["db"]
    });
    // The tenants as stored (their status moves every interval).
    let specs = || {
        let mut v = call(&base, Some(&tok), "GET", "/v1/tenants", None).1;
        for t in v.as_array_mut().unwrap() {
            t.as_object_mut().unwrap().remove("status");
        }
        v
    };
    let before = specs();

    // `..` as a volume, as a tenant, in a replacement; a hidden name; a long one.
    let vol = |name: &str| json!({"name": name, "host": "h", "servers": ["s"]});
    let cases = [
        (
            "POST",
            "/v1/tenants".to_string(),
            json!({"name": "x", "volume": [vol("..")]}),
            "tenant \"x\".volume[0].name: `..`",
        ),
        (
            "POST",
            "/v1/tenants".to_string(),
            json!({"name": "..", "volume": [vol("x")]}),
            "tenant[1].name: `..`",
        ),
        (
            "POST",
            "/v1/tenants".to_string(),
            json!({"name": "x", "volume": [vol(".x")]}),
            "volume[0].name: `.x`",
        ),
        (
            "POST",
            "/v1/tenants".to_string(),
            json!({"name": "x", "volume": [vol(&"v".repeat(65))]}),
            "volume[0].name",
        ),
        (
            "PUT",
            "/v1/tenants/db".to_string(),
            json!({"name": "db", "volume": [vol("..")]}),
            "tenant \"db\".volume[0].name: `..`",
        ),
    ];
    for (method, path, body, field) in cases {
        let (st, v) = call(&base, Some(&tok), method, &path, Some(body.clone()));
        assert_eq!(st, 400, "{method} {path} {body}: {v}");
        let e = v["error"].as_str().unwrap_or_default();
        assert!(
            e.contains(field) && e.contains("not starting with `.`"),
            "{e}"
        );
    }
    // A node refuses such a cache itself, naming the field.
    let (st, v) = call(
        &format!("http://{}", h.api_addr),
        Some(h.api_token.secret()),
        "POST",
        "/v1/caches",
        Some(json!({"name": "..", "size": "64KiB"})),
    );
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().starts_with("name: `..`"),
        "{v}"
    );
    // Nothing changed, here or on the nodes, intervals later.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(specs(), before);
    assert_eq!(cache_names(&h), ["db"]);
    assert_eq!(cache_names(&s), ["db"]);

    // A tenant added and deleted through the API: its caches come and go.
    let (st, v) = call(
        &base,
        Some(&tok),
        "POST",
        "/v1/tenants",
        Some(json!({"name": "web", "volume": [vol("web")]})),
    );
    assert_eq!(st, 201, "{v}");
    within(Duration::from_secs(10), "web's caches made", || {
        cache_names(&h) == ["db", "web"] && cache_names(&s) == ["db", "web"]
    });
    let (st, v) = call(&base, Some(&tok), "DELETE", "/v1/tenants/web", None);
    assert_eq!(st, 200, "{v}");
    within(Duration::from_secs(10), "web's caches removed", || {
        cache_names(&h) == ["db"] && cache_names(&s) == ["db"]
    });
    assert!(h.state.rules().iter().all(|r| r.export != "web"));
    // And they stay gone.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(cache_names(&h), ["db"]);
    assert_eq!(cache_names(&s), ["db"]);
    rt.block_on(ctl.shutdown());
    rt.block_on(h.shutdown()).unwrap();
    rt.block_on(s.shutdown()).unwrap();
}

/// What the node in front of which [`Liar`] sits says about its counters.
const HONEST: u64 = 0;
const BACKWARDS: u64 = 1;
const JUMP: u64 = 2;

/// A fake node API in front of a real one: every call is passed through, but
/// `/v1/observations` carries counters the test makes up for cache `db` (1,000 requests
/// more at every honest answer, 90 % hits), going backwards or jumping absurdly on demand.
struct Liar {
    real: String,
    mode: AtomicU64,
    /// Honest answers given.
    k: AtomicU64,
    /// Lies told.
    lies: AtomicU64,
    /// Answer `PATCH /v1/caches` as a node from before the batch does (405).
    old: AtomicBool,
    /// Batches so refused.
    batches_refused: AtomicU64,
    /// `PATCH /v1/caches/{cache}` calls passed through.
    single_patches: AtomicU64,
    /// The cache size the node's observations report, if not 0 (a node shrunk).
    cache_size: AtomicU64,
}

impl Liar {
    fn new(real: String) -> Liar {
        Liar {
            real,
            mode: AtomicU64::new(HONEST),
            k: AtomicU64::new(0),
            lies: AtomicU64::new(0),
            old: AtomicBool::new(false),
            batches_refused: AtomicU64::new(0),
            single_patches: AtomicU64::new(0),
            cache_size: AtomicU64::new(0),
        }
    }
}

impl Liar {
    fn observations(&self, mut v: Value) -> Value {
        let size = self.cache_size.load(Ordering::SeqCst);
        if size > 0 {
            v["cache_size"] = json!(size);
        }
        let mode = self.mode.load(Ordering::SeqCst);
        let (k, lies) = match mode {
            HONEST => (self.k.fetch_add(1, Ordering::SeqCst) + 1, 0),
            _ => (
                self.k.load(Ordering::SeqCst),
                self.lies.fetch_add(1, Ordering::SeqCst) + 1,
            ),
        };
        let (requests, hits) = match mode {
            HONEST => (1000 * k, 900 * k),
            // Below the last honest answer, a little lower every time.
            BACKWARDS => {
                let b = k.saturating_sub(lies);
                (1000 * b, 900 * b)
            }
            // 10^15 requests more every time.
            _ => (1000 * k + lies * 1_000_000_000_000_000, 900 * k),
        };
        for t in v["tenants"].as_array_mut().unwrap() {
            if t["cache"] != "db" {
                continue;
            }
            t["requests"] = json!(requests);
            t["lookups"] = json!(requests);
            t["hits"] = json!(hits);
            t["read_bytes"] = json!(requests.saturating_mul(4096));
            t["write_bytes"] = json!(0);
            t["latency"]["count"] = json!(requests);
            t["latency"]["sum_ms"] = json!(requests as f64 * 0.2);
            t["latency"]["buckets"] = json!([[200, requests]]);
            t["latency"]["miss_buckets"] = json!([]);
            t["served"]["hit"] = json!({"count": hits, "sum_ms": hits as f64 * 0.1});
            t["served"]["miss"] =
                json!({"count": requests - hits, "sum_ms": (requests - hits) as f64 * 1.0});
        }
        v
    }
}

async fn proxy(
    axum::extract::State(l): axum::extract::State<Arc<Liar>>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> (
    axum::http::StatusCode,
    [(axum::http::HeaderName, String); 1],
    String,
) {
    let l2 = l.clone();
    let path = uri.to_string();
    let json = || [(axum::http::header::CONTENT_TYPE, "application/json".into())];
    if method == axum::http::Method::PATCH {
        if path == "/v1/caches" && l.old.load(Ordering::SeqCst) {
            l.batches_refused.fetch_add(1, Ordering::SeqCst);
            let e = json!({"error": "PATCH is not a verb of /v1/caches; see GET / for the API"});
            return (
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                json(),
                e.to_string(),
            );
        }
        if path.starts_with("/v1/caches/") {
            l.single_patches.fetch_add(1, Ordering::SeqCst);
        }
    }
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (status, text) = tokio::task::spawn_blocking(move || {
        let mut req = ureq::request(method.as_str(), &format!("{}{path}", l2.real));
        if let Some(a) = &auth {
            req = req.set("Authorization", a);
        }
        let r = if body.is_empty() {
            req.call()
        } else {
            req.set("Content-Type", "application/json")
                .send_bytes(&body)
        };
        let (status, text) = match r {
            Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
            Err(ureq::Error::Status(s, r)) => (s, r.into_string().unwrap_or_default()),
            Err(e) => (502, json!({"error": e.to_string()}).to_string()),
        };
        if path == "/v1/observations" && status == 200 {
            let v: Value = serde_json::from_str(&text).unwrap();
            return (status, l2.observations(v).to_string());
        }
        (status, text)
    })
    .await
    .unwrap();
    (
        axum::http::StatusCode::from_u16(status).unwrap(),
        json(),
        text,
    )
}

/// A controller (its store in `dir`) over `s` and over `h` reached through the proxy at
/// `fake`.
fn service_over_proxy(
    dir: &std::path::Path,
    toml: &str,
    s: &node::RunningNode,
    h: &node::RunningNode,
    fake: std::net::SocketAddr,
) -> Arc<controller::Service> {
    let mut cfg = ControllerConfig::parse(toml).unwrap();
    cfg.controller.data_dir = dir.join("ctl");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("ctl.db")).unwrap());
    let svc = controller::Service::open(&cfg, store).unwrap();
    svc.register(registration("s", 2, format!("http://{}", s.api_addr), s))
        .unwrap();
    svc.register(registration("h", 1, format!("http://{fake}"), h))
        .unwrap();
    svc
}

/// Serves `liar` on a loopback port of its own.
fn serve_proxy(rt: &tokio::runtime::Runtime, liar: &Arc<Liar>) -> std::net::SocketAddr {
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let app = axum::Router::new().fallback(proxy).with_state(liar.clone());
        tokio::spawn(async move { axum::serve(l, app).await });
        addr
    })
}

/// Issue 37: a node from before `PATCH /v1/caches` (it answers 405) still gets every
/// resize the plan makes, one cache at a time: when the node reports half its cache
/// (the proxy in front of it says so), its three tenants' partitions shrink together (a batch of three, refused, then
/// sent one by one), no action is reported failed, nothing is reported refused, and the
/// node holds the sizes the plan gave.
#[test]
fn a_node_from_before_the_batch_gets_its_resizes_one_by_one() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (s, h) = two_levels(&rt, dir.path(), &["a", "b", "c"], None);
    let liar = Arc::new(Liar::new(format!("http://{}", h.api_addr)));
    liar.old.store(true, Ordering::SeqCst);
    let fake = serve_proxy(&rt, &liar);
    let mut toml = String::from(
        "[controller]\nlisten = \"127.0.0.1:0\"\ninterval = \"1s\"\nscheme = \"lachesis\"\nexclusive = false\n",
    );
    for t in ["a", "b", "c"] {
        toml += &format!(
            "[[tenant]]\nname = \"{t}\"\n[[tenant.volume]]\nname = \"{t}\"\nhost = \"h\"\nservers = [\"s\"]\n"
        );
    }
    let svc = service_over_proxy(dir.path(), &toml, &s, &h, fake);
    let mut most_resized = 0;
    let mut last = None;
    for k in 0..4 {
        if k == 1 {
            liar.cache_size.store(2 << 20, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(100));
        let r = svc.tick().unwrap();
        assert!(
            r.actions.iter().all(|a| a.result == "ok"),
            "{:?}",
            r.actions
        );
        assert!(r.refused.is_empty(), "{:?}", r.refused);
        let on_h = r
            .actions
            .iter()
            .filter(|a| a.node == "h" && a.verb == "resize")
            .count();
        most_resized = most_resized.max(on_h);
        last = Some(r);
    }
    assert_eq!(most_resized, 3, "the three partitions shrank together on h");
    assert!(liar.batches_refused.load(Ordering::SeqCst) >= 1);
    assert!(liar.single_patches.load(Ordering::SeqCst) >= 2);
    // The node holds what the last plan gave each tenant there.
    let last = last.unwrap();
    for t in ["a", "b", "c"] {
        let row = last.rows.iter().find(|r| r.tenant == t).unwrap();
        let held = h
            .state
            .caches()
            .into_iter()
            .find(|c| c.name == t)
            .unwrap()
            .size_bytes;
        // (A partition planned at zero keeps one block.)
        assert_eq!(row.l1_applied, row.l1_size.max(4096), "{t}: {row:?}");
        assert_eq!(held, row.l1_applied, "{t}: {row:?}");
        assert!(held <= (2 << 20) / 3, "{t}: {held} within the halved cache");
    }
    rt.block_on(h.shutdown()).unwrap();
    rt.block_on(s.shutdown()).unwrap();
}

fn db_row(r: &controller::IntervalReport) -> controller::Row {
    r.rows.iter().find(|r| r.tenant == "db").unwrap().clone()
}

/// A node whose counters go backwards, then jump by 10^15 requests an interval, is
/// marked suspect (in `/v1/nodes`, with the reason), its tenant is planned at its last
/// good interval (the rows keep its last good 1,000 requests, not the lie, and the
/// partition keeps its size instead of shrinking to one block), and it is believed again
/// as soon as it answers honestly.
#[test]
fn a_node_whose_counters_lie_is_suspect_and_recovers() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (s, h) = two_levels(&rt, dir.path(), &["db"], None);
    let liar = Arc::new(Liar::new(format!("http://{}", h.api_addr)));
    let fake = serve_proxy(&rt, &liar);
    let svc = service_over_proxy(dir.path(), ONE_TENANT, &s, &h, fake);
    let suspect = || {
        svc.nodes()
            .into_iter()
            .find(|n| n.name == "h")
            .unwrap()
            .suspect
    };

    // Honest intervals: 1,000 requests each.
    let mut honest = None;
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(100));
        let r = svc.tick().unwrap();
        assert!(
            r.actions.iter().all(|a| a.result == "ok"),
            "{:?}",
            r.actions
        );
        honest = Some(db_row(&r));
    }
    let honest = honest.unwrap();
    assert_eq!(honest.requests, 1000);
    assert_eq!(suspect(), None);
    let size = honest.l1_size;
    assert!(size > 4096, "{honest:?}");
    let db_cache = || {
        h.state
            .caches()
            .into_iter()
            .find(|c| c.name == "db")
            .unwrap()
            .size_bytes
    };

    for (mode, why) in [(BACKWARDS, "went backwards"), (JUMP, "grew by")] {
        liar.mode.store(mode, Ordering::SeqCst);
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(100));
            let r = svc.tick().unwrap();
            let row = db_row(&r);
            let reason = suspect().expect("the node is suspect");
            assert!(
                reason.contains("cache `db` requests") && reason.contains(why),
                "{reason}"
            );
            assert_eq!(
                row.requests, 1000,
                "planned at the last good interval: {row:?}"
            );
            assert!(row.l1_size >= size / 2 && row.l1_size > 4096, "{row:?}");
            assert!(
                db_cache() > 4096,
                "the node's partition kept: {}",
                db_cache()
            );
        }
    }

    // Honest again: believed at once, the interval's numbers the difference against the
    // last answer believed (one honest answer since: 1,000 requests).
    liar.mode.store(HONEST, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(100));
    let r = svc.tick().unwrap();
    assert_eq!(suspect(), None);
    assert_eq!(db_row(&r).requests, 1000);
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(100));
        let row = db_row(&svc.tick().unwrap());
        assert_eq!(row.requests, 1000, "{row:?}");
        assert!(row.l1_size >= size / 2 && row.l1_size > 4096, "{row:?}");
    }
    assert!(db_cache() > 4096);
    rt.block_on(h.shutdown()).unwrap();
    rt.block_on(s.shutdown()).unwrap();
}

/// A level-1 node whose upstream goes away reports `degraded` on `/healthz`; the
/// controller shows the volume on it as failing (its row, naming the node and the
/// export) until the upstream is back on the same port and the link heals.
#[test]
fn a_volume_over_a_degraded_node_is_shown_failing_until_it_heals() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    // `h` exports `db` from a level-2 node `u` the controller does not drive; `s` is the
    // volume's registered server.
    let up_toml = |port: u16| {
        node_toml(
            &dir.path().join("u"),
            2,
            "1MiB",
            "[[export]]\nname = \"db\"\nfile = \"db.img\"\nsize = \"8MiB\"\n",
        )
        .replace(
            "nbd = \"127.0.0.1:0\"",
            &format!("nbd = \"127.0.0.1:{port}\""),
        )
    };
    let u = rt
        .block_on(node::start(
            &node::config::NodeConfig::parse(&up_toml(0)).unwrap(),
        ))
        .unwrap();
    let port = u.nbd_addr.port();
    let (s, h) = two_levels(&rt, dir.path(), &["db"], Some(u.nbd_addr));
    let mut cfg = ControllerConfig::parse(ONE_TENANT).unwrap();
    cfg.controller.data_dir = dir.path().join("ctl");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("ctl.db")).unwrap());
    let svc = controller::Service::open(&cfg, store).unwrap();
    svc.register(registration("s", 2, format!("http://{}", s.api_addr), &s))
        .unwrap();
    svc.register(registration("h", 1, format!("http://{}", h.api_addr), &h))
        .unwrap();
    let r = svc.tick().unwrap();
    assert_eq!(db_row(&r).failing, None);
    let healthz = |n: &node::RunningNode| {
        call(
            &format!("http://{}", n.api_addr),
            None,
            "GET",
            "/healthz",
            None,
        )
        .0
    };
    assert_eq!(healthz(&h), 200);

    // The upstream goes away.
    rt.block_on(u.shutdown()).unwrap();
    within(Duration::from_secs(5), "h degraded", || healthz(&h) == 503);
    // Reads that need the missing upstream fail: they count as failed requests, not as
    // fast ones, and the interval misses the SLO whatever else it measured.
    let client = rt
        .block_on(nbd::NbdClient::connect(h.nbd_addr, "db"))
        .unwrap();
    for k in 0..3u64 {
        assert!(rt.block_on(client.read(k << 20, 4096)).is_err());
    }
    let row = db_row(&svc.tick().unwrap());
    assert_eq!(
        (row.failed_requests, row.slo_met),
        (3, Some(false)),
        "{row:?}"
    );
    let why = row
        .failing
        .clone()
        .expect("failing while the upstream is away");
    assert!(
        why.contains("node `h`") && why.contains("export `db`") && why.contains(&port.to_string()),
        "{why}"
    );
    let node = svc.nodes().into_iter().find(|n| n.name == "h").unwrap();
    assert!(node.up, "the node itself answers: {node:?}");
    assert_eq!(node.degraded.len(), 1, "{node:?}");
    // What `ctl tenants` and the console read.
    let t = svc.tenant("db").unwrap();
    assert!(t.status[0].failing.is_some(), "{:?}", t.status);

    // Back on the same port: the link heals and the volume is no longer failing.
    let u = rt
        .block_on(node::start(
            &node::config::NodeConfig::parse(&up_toml(port)).unwrap(),
        ))
        .unwrap();
    within(Duration::from_secs(15), "h healthy again", || {
        healthz(&h) == 200
    });
    let row = db_row(&svc.tick().unwrap());
    assert_eq!(row.failing, None, "{row:?}");
    assert!(svc.nodes().iter().all(|n| n.degraded.is_empty()));
    rt.block_on(h.shutdown()).unwrap();
    rt.block_on(s.shutdown()).unwrap();
    rt.block_on(u.shutdown()).unwrap();
}

fn mode(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .mode()
        & 0o777
}

/// The store (`controller.db`, `-wal`, `-shm`), which holds the nodes' tokens, and the
/// generated API token are 0600 in a 0700 directory: made so when new, tightened when an
/// older controller left them 0644 in a 0755 directory; a shared directory keeps its
/// mode, the files are 0600 still.
#[test]
fn the_controllers_files_are_private() {
    let rt = runtime();
    let tmp = tempfile::tempdir().unwrap();
    let files = |d: &std::path::Path| {
        [
            "controller.db",
            "controller.db-wal",
            "controller.db-shm",
            "controller.token",
        ]
        .map(|f| d.join(f))
    };

    // New: everything made private.
    let data = tmp.path().join("new").join("controller-data");
    let mut cfg = ControllerConfig::parse(ONE_TENANT).unwrap();
    cfg.controller.data_dir = data.clone();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&data.join("controller.db")).unwrap());
    let ctl = rt.block_on(controller::start(&cfg, store, false)).unwrap();
    ctl.service
        .register(Registration {
            name: "h".into(),
            level: 1,
            api: "http://127.0.0.1:9".into(),
            cache_size: 1 << 20,
            block_size: 4096,
            epoch: "e".into(),
            token: "node-secret".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(mode(&data), 0o700);
    for f in files(&data) {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
    rt.block_on(ctl.shutdown());

    // Left readable by an older controller: tightened at start.
    let old = tmp.path().join("old");
    std::fs::create_dir(&old).unwrap();
    {
        let _s = SqliteStore::open(&old.join("controller.db")).unwrap();
        std::fs::write(old.join("controller.token"), "0123456789abcdef0123\n").unwrap();
        for f in files(&old) {
            std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o644))
                .unwrap();
        }
        std::fs::set_permissions(&old, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        assert_eq!(mode(&old.join("controller.db-wal")), 0o644);
    }
    let mut cfg = ControllerConfig::parse(ONE_TENANT).unwrap();
    cfg.controller.data_dir = old.clone();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&old.join("controller.db")).unwrap());
    let ctl = rt.block_on(controller::start(&cfg, store, false)).unwrap();
    assert_eq!(mode(&old), 0o700);
    for f in files(&old) {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
    rt.block_on(ctl.shutdown());

    // A directory shared with other files: left as it is, the store's files still 0600.
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(shared.join("notes.txt"), "mine").unwrap();
    let s = SqliteStore::open(&shared.join("state.db")).unwrap();
    s.put(&[("k", Some("v".into()))]).unwrap();
    assert_eq!(mode(&shared), 0o755);
    assert_eq!(mode(&shared.join("state.db")), 0o600);
    assert_eq!(mode(&shared.join("state.db-wal")), 0o600);
    assert_eq!(mode(&shared.join("state.db-shm")), 0o600);
}

/// The controller refuses to serve its API on an address other machines can reach with
/// a token it generated itself, as a node does; given a token file it serves there, and
/// the token guards the API.
#[test]
fn a_reachable_api_needs_a_token_file() {
    let rt = runtime();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut cfg = ControllerConfig::parse(ONE_TENANT).unwrap();
    cfg.controller.listen = "0.0.0.0:0".into();
    cfg.controller.data_dir = data.clone();
    let store =
        || -> Arc<dyn Store> { Arc::new(SqliteStore::open(&tmp.path().join("ctl.db")).unwrap()) };
    let e = match rt.block_on(controller::start(&cfg, store(), false)) {
        Ok(_) => panic!("a reachable API with a generated token was started"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("controller.listen = \"0.0.0.0:0\"") && e.contains("controller.token_file"),
        "{e}"
    );
    assert!(
        !data.join("controller.token").exists(),
        "no token generated for a refused start"
    );

    let tok = tmp.path().join("api.token");
    std::fs::write(&tok, "0123456789abcdef0123456789abcdef\n").unwrap();
    cfg.controller.token_file = Some(tok);
    let ctl = rt
        .block_on(controller::start(&cfg, store(), false))
        .unwrap();
    assert!(ctl.addr.ip().is_unspecified(), "{}", ctl.addr);
    let base = format!("http://127.0.0.1:{}", ctl.addr.port());
    assert_eq!(call(&base, None, "GET", "/v1/tenants", None).0, 401);
    let (st, _) = call(
        &base,
        Some("0123456789abcdef0123456789abcdef"),
        "GET",
        "/v1/tenants",
        None,
    );
    assert_eq!(st, 200);
    rt.block_on(ctl.shutdown());
}
