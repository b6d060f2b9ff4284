//! Registration and heartbeat against a small fake controller (axum): the node serves
//! while no controller listens, registers once one does (with the fields and the token a
//! controller needs to call it back), beats with its epoch, registers again when the
//! controller forgets it (404), and stops beating when it stops.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use node::config::NodeConfig;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "controller-secret-0123456789";

#[derive(Default)]
struct Fake {
    registrations: Mutex<Vec<Value>>,
    heartbeats: Mutex<Vec<(String, Value)>>,
    known: Mutex<HashSet<String>>,
}

type S = State<Arc<Fake>>;

fn authorised(h: &HeaderMap) -> bool {
    h.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {SECRET}"))
}

async fn register(State(f): S, h: HeaderMap, Json(b): Json<Value>) -> StatusCode {
    if !authorised(&h) {
        return StatusCode::UNAUTHORIZED;
    }
    f.known
        .lock()
        .unwrap()
        .insert(b["name"].as_str().unwrap().to_string());
    f.registrations.lock().unwrap().push(b);
    StatusCode::OK
}

async fn heartbeat(
    State(f): S,
    h: HeaderMap,
    Path(name): Path<String>,
    Json(b): Json<Value>,
) -> StatusCode {
    if !authorised(&h) {
        return StatusCode::UNAUTHORIZED;
    }
    if !f.known.lock().unwrap().contains(&name) {
        return StatusCode::NOT_FOUND;
    }
    f.heartbeats.lock().unwrap().push((name, b));
    StatusCode::NO_CONTENT
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn get(url: &str, token: &str) -> (u16, Value) {
    match ureq::get(url)
        .set("authorization", &format!("Bearer {token}"))
        .call()
    {
        Ok(r) => (r.status(), r.into_json().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap_or(Value::Null)),
        Err(e) => panic!("{url}: {e}"),
    }
}

#[test]
fn registers_beats_and_survives_an_absent_controller() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("controller.token"), format!("{SECRET}\n")).unwrap();
    // A port where nothing listens yet.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let text = format!(
        r#"
[node]
name = "l2-b"
level = 2
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "16MiB"
controller = "http://{addr}/"
controller_token_file = "controller.token"
heartbeat = "100ms"
[[export]]
name = "vol"
tenant = "t9"
file = "vol.img"
size = "8MiB"
"#
    );
    let mut cfg = NodeConfig::parse(&text).unwrap();
    cfg.node.data_dir = Some(dir.path().to_path_buf());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let node = rt.block_on(node::start(&cfg)).unwrap();
    let api = format!("http://{}", node.api_addr);
    let own = node.api_token.secret().to_string();

    // No controller: the node serves all the same.
    std::thread::sleep(Duration::from_millis(400));
    let (status, obs) = get(&format!("{api}/v1/observations"), &own);
    assert_eq!(status, 200, "{obs}");
    let epoch = obs["epoch"].as_str().unwrap().to_string();

    // The controller comes up on that port.
    let fake = Arc::new(Fake::default());
    let app = Router::new()
        .route("/v1/nodes/register", post(register))
        .route("/v1/nodes/{name}/heartbeat", post(heartbeat))
        .with_state(fake.clone());
    let listener = rt.block_on(tokio::net::TcpListener::bind(addr)).unwrap();
    rt.spawn(async move { axum::serve(listener, app).await });

    wait_for("registration", || {
        !fake.registrations.lock().unwrap().is_empty()
    });
    let reg = fake.registrations.lock().unwrap()[0].clone();
    assert_eq!(reg["name"], "l2-b");
    assert_eq!(reg["level"], 2);
    assert_eq!(reg["api"], api.as_str());
    assert_eq!(reg["nbd"], node.nbd_addr.to_string().as_str());
    assert_eq!(reg["cache_size"], 16u64 << 20);
    assert_eq!(reg["block_size"], 4096);
    assert_eq!(reg["epoch"], epoch.as_str());
    assert_eq!(
        reg["exports"],
        serde_json::json!([{"name": "vol", "tenant": "t9", "size": 8u64 << 20}])
    );
    // The token lets the controller call the node back.
    let (status, obs) = get(
        &format!("{api}/v1/observations"),
        reg["token"].as_str().unwrap(),
    );
    assert_eq!(status, 200);
    assert_eq!(obs["node"], "l2-b");

    wait_for("three heartbeats", || {
        fake.heartbeats.lock().unwrap().len() >= 3
    });
    {
        let beats = fake.heartbeats.lock().unwrap();
        assert!(beats
            .iter()
            .all(|(n, b)| n == "l2-b" && b["epoch"] == epoch.as_str()));
        let up: Vec<u64> = beats
            .iter()
            .map(|(_, b)| b["uptime_ms"].as_u64().unwrap())
            .collect();
        assert!(up.windows(2).all(|w| w[0] <= w[1]), "{up:?}");
    }

    // The controller forgets the node: the next heartbeat's 404 makes it register again.
    fake.known.lock().unwrap().clear();
    wait_for("registration again", || {
        fake.registrations.lock().unwrap().len() >= 2
    });
    let n = fake.heartbeats.lock().unwrap().len();
    wait_for("heartbeats again", || {
        fake.heartbeats.lock().unwrap().len() > n
    });

    rt.block_on(node.shutdown()).unwrap();
    let after = fake.heartbeats.lock().unwrap().len();
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        fake.heartbeats.lock().unwrap().len(),
        after,
        "beats after stop"
    );
}

#[test]
fn a_missing_controller_token_file_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"
[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "16MiB"
controller = "http://127.0.0.1:9"
controller_token_file = "nope.token"
"#;
    let mut cfg = NodeConfig::parse(text).unwrap();
    cfg.node.data_dir = Some(dir.path().to_path_buf());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let err = rt.block_on(node::start(&cfg)).err().unwrap().to_string();
    assert!(err.contains("node.controller_token_file"), "{err}");
    assert!(
        NodeConfig::parse(&text.replace("http://127.0.0.1:9", "127.0.0.1:9"))
            .unwrap_err()
            .to_string()
            .contains("node.controller")
    );
}
