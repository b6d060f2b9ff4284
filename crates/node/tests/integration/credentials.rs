//! The API's credentials through a real HTTP client: every data endpoint needs the bearer
//! token, `/metrics`, `/healthz` and the page do not, the generated token file is 0600
//! and survives restarts, and an API exposed to the network needs an explicit token file.

use crate::common::TestNode;
use node::config::NodeConfig;
use std::os::unix::fs::PermissionsExt;

const NODE: &str = r#"
[node]
cache_size = "8MiB"
[[export]]
name = "demo"
file = "demo.img"
size = "16MiB"
"#;

#[test]
fn data_endpoints_need_the_token_and_answer_401_json_without_it() {
    let t = TestNode::start(NODE);
    for (method, path) in [
        ("GET", "/v1/caches"),
        ("GET", "/v1/node"),
        ("DELETE", "/v1/caches/demo"),
        ("PUT", "/v1/proportions"),
        ("GET", "/v1/nothing"),
    ] {
        let (s, v) = t.api_as(None, method, path, None);
        assert_eq!(s, 401, "{method} {path}: {v}");
        assert!(v["error"].as_str().unwrap().contains("Bearer"), "{v}");
        let (s, v) = t.api_as(Some("Bearer 0123456789abcdef"), method, path, None);
        assert_eq!(
            (s, v["error"].as_str()),
            (401, Some("wrong token")),
            "{path}"
        );
        let (s, v) = t.api_as(Some("Basic dXNlcjpwYXNz"), method, path, None);
        assert_eq!(s, 401, "{v}");
        assert!(v["error"].as_str().unwrap().contains("malformed"), "{v}");
    }
    // A token that differs only in its last character is still wrong.
    let good = t.node().api_token.secret().to_string();
    let mut near = good.clone();
    let last = near.pop().unwrap();
    near.push(if last == '0' { '1' } else { '0' });
    let (s, _) = t.api_as(Some(&format!("Bearer {near}")), "GET", "/v1/node", None);
    assert_eq!(s, 401);
    // The right token works, and a refused DELETE changed nothing.
    let (s, v) = t.api("GET", "/v1/node", None);
    assert_eq!((s, v["block_size"].as_u64()), (200, Some(4096)));
    let (s, v) = t.api(
        "POST",
        "/v1/caches",
        Some(r#"{"name":"c","size":"1MiB","write_policy":"write-through"}"#),
    );
    assert_eq!(s, 201, "{v}");
    let (s, _) = t.api_as(None, "DELETE", "/v1/caches/c", None);
    assert_eq!(s, 401);
    let (s, v) = t.api("GET", "/v1/caches/c", None);
    assert_eq!((s, v["name"].as_str()), (200, Some("c")));
    t.stop();
}

#[test]
fn metrics_healthz_and_the_page_are_open() {
    let t = TestNode::start(NODE);
    let (s, v) = t.api_as(None, "GET", "/healthz", None);
    assert_eq!((s, v["status"].as_str()), (200, Some("ok")));
    let (s, v) = t.api_as(None, "GET", "/metrics", None);
    assert_eq!(s, 200);
    assert!(v.as_str().unwrap().contains("lachesis_"), "{v}");
    let (s, v) = t.api_as(None, "GET", "/", None);
    assert_eq!(s, 200);
    let page = v.as_str().unwrap();
    assert!(page.contains("<title>Lachesis node</title>"));
    assert!(page.contains("Authorization"), "the page sends the token");
    t.stop();
}

fn config(dir: &std::path::Path, extra: &str) -> NodeConfig {
    let text = NODE.replace("[node]", &format!("[node]\nnbd = \"127.0.0.1:0\"\n{extra}"));
    let mut cfg = NodeConfig::parse(&text).unwrap();
    cfg.node.data_dir = Some(dir.to_path_buf());
    cfg
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_generated_token_file_is_private_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let cfg = config(dir.path(), "api = \"127.0.0.1:0\"");
    let n = rt.block_on(node::start(&cfg)).unwrap();
    let file = dir.path().join("api.token");
    assert_eq!(n.api_token.file(), file);
    let text = std::fs::read_to_string(&file).unwrap();
    let token = text.trim();
    assert_eq!(token.len(), 64, "32 bytes in hex: {token}");
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(token, n.api_token.secret());
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    rt.block_on(n.shutdown()).unwrap();
    // A second start keeps the token.
    let n = rt.block_on(node::start(&cfg)).unwrap();
    assert_eq!(n.api_token.secret(), token);
    let res = ureq::get(&format!("http://{}/v1/node", n.api_addr))
        .set("authorization", &format!("Bearer {token}"))
        .call()
        .unwrap();
    assert_eq!(res.status(), 200);
    rt.block_on(n.shutdown()).unwrap();
}

#[test]
fn a_non_loopback_api_needs_an_explicit_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let cfg = config(dir.path(), "api = \"0.0.0.0:0\"");
    let err = rt.block_on(node::start(&cfg)).err().expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("api_token_file") && msg.contains("0.0.0.0"),
        "{msg}"
    );
    assert!(!dir.path().join("api.token").exists());
    // With a token file of the operator's own it starts and uses that token.
    std::fs::write(dir.path().join("mine.token"), "operator-chosen-secret-42\n").unwrap();
    let cfg = config(
        dir.path(),
        "api = \"0.0.0.0:0\"\napi_token_file = \"mine.token\"",
    );
    let n = rt.block_on(node::start(&cfg)).unwrap();
    assert_eq!(n.api_token.secret(), "operator-chosen-secret-42");
    let url = format!("http://127.0.0.1:{}/v1/caches", n.api_addr.port());
    let res = ureq::get(&url)
        .set("authorization", "Bearer operator-chosen-secret-42")
        .call()
        .unwrap();
    assert_eq!(res.status(), 200);
    // A token file too short to be a secret is refused, naming the field.
    std::fs::write(dir.path().join("short.token"), "abc\n").unwrap();
    let cfg = config(
        dir.path(),
        "api = \"127.0.0.1:0\"\napi_token_file = \"short.token\"",
    );
    let msg = rt.block_on(node::start(&cfg)).err().unwrap().to_string();
    assert!(msg.contains("api_token_file"), "{msg}");
    rt.block_on(n.shutdown()).unwrap();
}

/// Issue 35 item 11: NBD on an address other machines can reach, with an export that has
/// no allow-list and TLS off, is refused at start (naming the export and the way out)
/// unless `allow_anyone = true`; `NBD_OPT_LIST` (nbdinfo --list) shows only the exports
/// the client's allow-list admits.
#[test]
fn open_nbd_exposure_is_refused_and_listing_hides_refused_exports() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let exposed = |extra: &str| {
        let text = NODE.replace(
            "[node]",
            &format!("[node]\nnbd = \"0.0.0.0:0\"\napi = \"127.0.0.1:0\"\n{extra}"),
        );
        let mut cfg = NodeConfig::parse(&text).unwrap();
        cfg.node.data_dir = Some(dir.path().to_path_buf());
        cfg
    };
    let cfg = exposed("");
    let err = rt.block_on(node::start(&cfg)).err().expect("refused");
    let msg = err.to_string();
    println!("{msg}");
    assert!(
        msg.contains("allow_anyone") && msg.contains("0.0.0.0") && msg.contains("allow"),
        "{msg}"
    );
    let cfg = exposed("allow_anyone = true");
    let n = rt.block_on(node::start(&cfg)).unwrap();
    rt.block_on(n.shutdown()).unwrap();

    let t = crate::common::TestNode::start(
        r#"
[node]
cache_size = "1MiB"
[[export]]
name = "mine"
file = "mine.img"
size = "1MiB"
allow = ["127.0.0.1/32", "::1/128"]
[[export]]
name = "theirs"
file = "theirs.img"
size = "1MiB"
allow = ["10.0.0.0/8"]
"#,
    );
    let listed = crate::common::run(
        "nbdinfo",
        &["--list", &format!("nbd://{}", t.node().nbd_addr)],
    );
    println!("{listed}");
    assert!(listed.contains("mine"), "{listed}");
    assert!(
        !listed.contains("theirs"),
        "a refused export is listed: {listed}"
    );
    t.stop();
}
