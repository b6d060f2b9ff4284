//! Two controller replicas on one etcd (Debian's `etcd-server`, started here on loopback
//! ports with a temporary data directory): one leads and programs real nodes, the other
//! answers the read API and names the leader; when the leader dies without a word, the
//! standby leads within two intervals with the same tenants, nodes and history, and its
//! first interval continues the `control` state's numbering. A bad `--store` URL is a
//! clear error. Fails (does not skip) when `etcd` is not installed.

use crate::common::node_toml;
use controller::config::ControllerConfig;
use controller::etcd::{Election, EtcdStore};
use controller::registry::Registration;
use controller::{RunningController, Store};
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const INTERVAL: f64 = 2.0;

const CONFIG: &str = r#"
[controller]
listen = "127.0.0.1:0"
interval = "2s"
scheme = "lachesis"
exclusive = false
[[tenant]]
name = "db"
class = "gold"
slo = { latency_ms = 5.0 }
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

struct Etcd(Child);

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts etcd on loopback; panics (the test fails) if it is not installed.
fn start_etcd(dir: &std::path::Path) -> (Etcd, String) {
    let (client, peer) = (free_port(), free_port());
    let c = format!("http://127.0.0.1:{client}");
    let p = format!("http://127.0.0.1:{peer}");
    let child = Command::new("etcd")
        .args(["--name", "t", "--data-dir"])
        .arg(dir)
        .args(["--listen-client-urls", &c, "--advertise-client-urls", &c])
        .args([
            "--listen-peer-urls",
            &p,
            "--initial-advertise-peer-urls",
            &p,
        ])
        .args(["--initial-cluster", &format!("t={p}")])
        .args(["--log-level", "error"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run `etcd` ({e}): install it (Debian: apt-get install etcd-server)")
        });
    let etcd = Etcd(child);
    let t0 = Instant::now();
    loop {
        if let Ok(r) = ureq::get(&format!("{c}/health")).call() {
            if r.into_string().unwrap_or_default().contains("true") {
                break;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "etcd did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    (etcd, format!("etcd://127.0.0.1:{client}/test"))
}

fn call(base: &str, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let req = ureq::request(method, &format!("{base}{path}"))
        .set("Authorization", &format!("Bearer {token}"));
    let r = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    match r {
        Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
        Err(ureq::Error::Status(s, r)) => (s, r.into_json().unwrap_or(Value::Null)),
        Err(e) => panic!("{method} {path}: {e}"),
    }
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    t0.elapsed()
}

#[test]
fn standby_takes_over_with_the_same_state_and_bad_urls_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let (_etcd, url) = start_etcd(&dir.path().join("etcd"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // Bad URLs: named, with what is wrong.
    let e = EtcdStore::connect("etcd://127.0.0.1")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("no port") && e.contains("etcd://127.0.0.1"),
        "{e}"
    );
    let e = EtcdStore::connect(&format!("etcd://127.0.0.1:{}", free_port()))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("etcd does not answer"), "{e}");

    // Real nodes: one level-2 with file exports, one level-1 over it.
    let ex = "[[export]]\nname = \"db\"\nfile = \"db.img\"\nsize = \"8MiB\"\n\
              [[export]]\nname = \"web\"\nfile = \"web.img\"\nsize = \"8MiB\"\n";
    let s1 = rt
        .block_on(node::start(
            &node::config::NodeConfig::parse(&node_toml(&dir.path().join("s1"), 2, "4MiB", ex))
                .unwrap(),
        ))
        .unwrap();
    let ex = format!(
        "[[export]]\nname = \"db\"\nupstream = [\"{0}/db\"]\n\
         [[export]]\nname = \"web\"\nupstream = [\"{0}/web\"]\n",
        s1.nbd_addr
    );
    let h = rt
        .block_on(node::start(
            &node::config::NodeConfig::parse(&node_toml(&dir.path().join("h"), 1, "4MiB", &ex))
                .unwrap(),
        ))
        .unwrap();

    let mut cfg = ControllerConfig::parse(CONFIG).unwrap();
    cfg.controller.data_dir = dir.path().join("ctl");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "replicas-share-this-token").unwrap();
    cfg.controller.token_file = Some(token_file);
    let replica = |id: &str| -> RunningController {
        let store = EtcdStore::connect(&url).unwrap();
        let el = Election::new(store.clone(), id, Duration::from_secs_f64(INTERVAL));
        let store: Arc<dyn Store> = store;
        rt.block_on(controller::start_replica(&cfg, store, true, Some(el)))
            .unwrap()
    };
    let token = "replicas-share-this-token";
    let status = |base: &str| call(base, token, "GET", "/v1/status", None).1;

    // Replica a leads; b, started after, stands by and names a.
    let a = replica("a");
    let a_url = format!("http://{}", a.addr);
    wait_for("a leads", Duration::from_secs(5), || {
        status(&a_url)["leading"] == true
    });
    let b = replica("b");
    let b_url = format!("http://{}", b.addr);
    wait_for("b sees a lead", Duration::from_secs(5), || {
        status(&b_url)["replica"]["leader"] == "a"
    });
    let st = status(&b_url);
    assert_eq!(st["leading"], false);
    assert_eq!(st["replica"]["leader_api"], a_url.as_str());
    let (code, v) = call(
        &b_url,
        token,
        "PUT",
        "/v1/tenants/web/slo",
        Some(json!({"slo": {"degradation": 0.5}})),
    );
    assert_eq!(code, 409, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains(&a_url),
        "a standby names the leader: {v}"
    );

    // The leader gets the nodes and a change, and steps them.
    for (name, level, n) in [("s1", 2u8, &s1), ("h", 1, &h)] {
        let r = Registration {
            name: name.into(),
            level,
            api: format!("http://{}", n.api_addr),
            nbd: Some(n.nbd_addr.to_string()),
            cache_size: 4 << 20,
            block_size: 4096,
            epoch: "e0".into(),
            exports: vec![],
            token: n.api_token.secret().to_string(),
        };
        let (code, v) = call(
            &a_url,
            token,
            "POST",
            "/v1/nodes/register",
            Some(serde_json::to_value(&r).unwrap()),
        );
        assert_eq!(code, 200, "{v}");
    }
    let (code, v) = call(
        &a_url,
        token,
        "PUT",
        "/v1/tenants/web/slo",
        Some(json!({"slo": {"degradation": 0.5}})),
    );
    assert_eq!(code, 200, "{v}");
    let hist = |base: &str| {
        call(base, token, "GET", "/v1/history?limit=1000", None)
            .1
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    // Two intervals with both volumes (3 entries each: db, web and the plan's `*`).
    wait_for("a steps twice", Duration::from_secs(10), || {
        hist(&a_url).iter().filter(|e| e["tenant"] == "db").count() >= 2
    });
    assert_eq!(h.state.caches().len(), 2, "the leader programmed the host");
    // The standby reads the same tenants (it reloads every interval).
    let tenants_of = |base: &str| {
        let v = call(base, token, "GET", "/v1/tenants", None).1;
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| (t["name"].clone(), t["slo"].clone(), t["volume"].clone()))
            .collect::<Vec<_>>()
    };
    let a_tenants = tenants_of(&a_url);
    wait_for("b follows a's tenants", Duration::from_secs(5), || {
        tenants_of(&b_url) == a_tenants
    });

    // Kill the leader: no lease revoked, nothing finished.
    let a_hist = hist(&b_url);
    assert!(a_hist.len() >= 6, "{a_hist:?}");
    rt.block_on(a.abort());
    let took = wait_for(
        "b leads within two intervals",
        Duration::from_secs_f64(2.0 * INTERVAL),
        || status(&b_url)["leading"] == true,
    );
    eprintln!("standby leads {took:?} after the leader died");
    assert_eq!(status(&b_url)["replica"]["leader"], "b");
    assert_eq!(tenants_of(&b_url), a_tenants, "same tenants");
    assert_eq!(
        tenants_of(&b_url)[1].1,
        json!({"degradation": 0.5}),
        "the change made on a"
    );
    let nodes = call(&b_url, token, "GET", "/v1/nodes", None).1;
    assert_eq!(nodes.as_array().unwrap().len(), 2, "{nodes}");
    // b's intervals continue a's history and numbering (a tick a had under way when it
    // died may have committed one more interval before its lease expired).
    let last_a = a_hist
        .iter()
        .map(|e| e["interval"].as_u64().unwrap())
        .max()
        .unwrap();
    wait_for("b steps", Duration::from_secs(8), || {
        hist(&b_url)
            .iter()
            .any(|e| e["interval"].as_u64().unwrap() > last_a + 1)
    });
    let b_hist = hist(&b_url);
    assert_eq!(&b_hist[..a_hist.len()], &a_hist[..], "nothing lost");
    let ivs: Vec<u64> = b_hist
        .iter()
        .map(|e| e["interval"].as_u64().unwrap())
        .collect();
    assert!(
        ivs.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1),
        "the control state resumed: {ivs:?}"
    );
    assert_eq!(h.state.caches().len(), 2, "b programs the host too");
    // b changes things now.
    let (code, v) = call(
        &b_url,
        token,
        "PUT",
        "/v1/tenants/web/slo",
        Some(json!({"slo": null})),
    );
    assert_eq!(code, 200, "{v}");
    rt.block_on(b.shutdown());
    rt.block_on(h.shutdown()).unwrap();
    rt.block_on(s1.shutdown()).unwrap();
}
