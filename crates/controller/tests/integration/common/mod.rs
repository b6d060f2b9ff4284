//! Helpers shared by the controller's integration tests.

/// A node's configuration: loopback NBD and API on ephemeral ports, a `size` cache at
/// `level`, its data in `dir`, and `exports` (TOML `[[export]]` tables) appended.
pub fn node_toml(dir: &std::path::Path, level: u8, size: &str, exports: &str) -> String {
    format!(
        "[node]\nnbd = \"127.0.0.1:0\"\napi = \"127.0.0.1:0\"\ncache_size = \"{size}\"\nlevel = {level}\n\
         data_dir = \"{}\"\nbusy_poll = \"0s\"\n{exports}",
        dir.display()
    )
}

/// A runtime for the nodes and the controller of one test (two workers).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `[[export]]` tables for `volumes`, each over its own `NAME.img` of `size` in the node's
/// data directory.
pub fn file_exports(volumes: &[&str], size: &str) -> String {
    volumes
        .iter()
        .map(|v| format!("[[export]]\nname = \"{v}\"\nfile = \"{v}.img\"\nsize = \"{size}\"\n"))
        .collect()
}

/// `[[export]]` tables for `volumes`, each over the export of the same name at `upstream`.
pub fn upstream_exports(upstream: std::net::SocketAddr, volumes: &[&str]) -> String {
    volumes
        .iter()
        .map(|v| format!("[[export]]\nname = \"{v}\"\nupstream = [\"{upstream}/{v}\"]\n"))
        .collect()
}

/// Starts a node with [`node_toml`]'s configuration on `rt`.
pub fn start_node(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    level: u8,
    size: &str,
    exports: &str,
) -> node::RunningNode {
    let cfg = node::config::NodeConfig::parse(&node_toml(dir, level, size, exports)).unwrap();
    rt.block_on(node::start(&cfg)).unwrap()
}

/// The registration of node `n` as `name` at `level` with `cache_size` bytes (epoch `e0`,
/// its own API token).
pub fn registration(
    name: &str,
    level: u8,
    n: &node::RunningNode,
    cache_size: u64,
) -> controller::registry::Registration {
    controller::registry::Registration {
        name: name.into(),
        level,
        api: format!("http://{}", n.api_addr),
        nbd: Some(n.nbd_addr.to_string()),
        cache_size,
        block_size: 4096,
        epoch: "e0".into(),
        exports: vec![],
        token: n.api_token.secret().to_string(),
    }
}

/// `method base+path` with an optional bearer token: (status, JSON or text).
pub fn call(
    base: &str,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut req = ureq::request(method, &format!("{base}{path}"));
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let r = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    match r {
        Ok(r) => {
            let s = r.status();
            let t = r.into_string().unwrap_or_default();
            (
                s,
                serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)),
            )
        }
        Err(ureq::Error::Status(s, r)) => (s, r.into_json().unwrap_or(serde_json::Value::Null)),
        Err(e) => panic!("{method} {path}: {e}"),
    }
}

/// A level-2 node `s1` (a `4MiB` cache, each of `volumes` over its own 8 MiB file) and a
/// level-1 node `h` (`l1_size`) exporting each of them over `s1`'s export of that name.
pub fn two_level(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    volumes: &[&str],
    l1_size: &str,
) -> (node::RunningNode, node::RunningNode) {
    let s1 = start_node(
        rt,
        &dir.join("s1"),
        2,
        "4MiB",
        &file_exports(volumes, "8MiB"),
    );
    let h = start_node(
        rt,
        &dir.join("h"),
        1,
        l1_size,
        &upstream_exports(s1.nbd_addr, volumes),
    );
    (s1, h)
}
