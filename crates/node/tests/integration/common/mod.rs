//! A node started in-process on ephemeral ports, and a small HTTP client for its API.
#![allow(dead_code)]

pub mod nbdkit;
pub mod small_disk;

use node::config::NodeConfig;
use node::RunningNode;
use serde_json::Value;
use std::process::Command;

/// A running node with its runtime and data directory.
pub struct TestNode {
    pub rt: tokio::runtime::Runtime,
    pub node: Option<RunningNode>,
    pub dir: tempfile::TempDir,
}

impl TestNode {
    /// Starts a node from `toml` (listeners on port 0, data in a temp dir).
    pub fn start(toml: &str) -> Self {
        let text = toml.replace(
            "[node]",
            "[node]\nnbd = \"127.0.0.1:0\"\napi = \"127.0.0.1:0\"",
        );
        Self::start_prepared(&text, |_| {})
    }

    /// Starts a node from `toml` as given, after `prepare` has put files in its data
    /// directory (certificates, images).
    pub fn start_prepared(toml: &str, prepare: impl FnOnce(&std::path::Path)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path());
        let mut cfg = NodeConfig::parse(toml).unwrap();
        cfg.node.data_dir = Some(dir.path().to_path_buf());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let node = rt.block_on(node::start(&cfg)).unwrap();
        TestNode {
            rt,
            node: Some(node),
            dir,
        }
    }

    pub fn node(&self) -> &RunningNode {
        self.node.as_ref().unwrap()
    }

    /// `nbd://127.0.0.1:PORT/name`.
    pub fn uri(&self, export: &str) -> String {
        format!("nbd://{}/{export}", self.node().nbd_addr)
    }

    /// Calls the API with the node's token; returns (status, JSON body).
    pub fn api(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let bearer = format!("Bearer {}", self.node().api_token.secret());
        self.api_as(Some(&bearer), method, path, body)
    }

    /// Calls the API with `authorization` as the header (or none); returns (status, JSON
    /// body).
    pub fn api_as(
        &self,
        authorization: Option<&str>,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> (u16, Value) {
        let url = format!("http://{}{path}", self.node().api_addr);
        let mut req = ureq::request(method, &url).set("content-type", "application/json");
        if let Some(a) = authorization {
            req = req.set("authorization", a);
        }
        let res = match body {
            Some(b) => req.send_string(b),
            None => req.call(),
        };
        let r = match res {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let status = r.status();
        let text = r.into_string().unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub fn stop(mut self) {
        let n = self.node.take().unwrap();
        self.rt.block_on(n.shutdown()).unwrap();
    }
}

/// Runs a command, asserting success; returns stdout.
pub fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} must be installed (.ci/run installs it): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains("Pattern verification failed") && !stdout.contains("failed"),
        "{cmd} {args:?}: {stdout}"
    );
    stdout
}
