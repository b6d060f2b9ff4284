//! The demo's cluster on loopback: a controller (SQLite in the temporary directory) that
//! the demo steps itself, four level-2 nodes over the modelled disks and two level-1
//! nodes, each volume exported by its level-1 node and striped over two level-2 nodes.
//! The controller starts first; each node registers itself with it (`[node] controller`,
//! with the controller's token) and sends heartbeats, as in a deployment. With exclusive
//! levels each level-1 export names its level-2 nodes' APIs (`upstream_api`), where its
//! cache demotes the clean blocks it evicts.

use super::error::{setup, DemoError};
use super::options::DemoOptions;
use super::workload::DemoTenant;
use controller::config::{ControllerConfig, ControllerSection, TenantConfig, VolumeSpec};
use controller::store::SqliteStore;
use controller::RunningController;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The level-2 nodes' names: every server of a tenant of `ts`, in order.
pub(crate) fn servers(ts: &[DemoTenant]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = ts.iter().flat_map(|t| t.servers).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The level-1 nodes' names: every host of a tenant of `ts`, in order.
fn hosts(ts: &[DemoTenant]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = ts.iter().map(|t| t.host).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// One node of the demo.
pub(crate) struct DemoNode {
    /// Its name.
    pub name: String,
    /// Its level.
    pub level: u8,
    /// The node.
    pub node: node::RunningNode,
}

/// Starts the controller with scheme `scheme`, the tenants `ts` and no node (each
/// registers itself), not running its own loop.
pub(crate) async fn start_controller(
    opts: &DemoOptions,
    scheme: &str,
    dir: &Path,
    ts: &[DemoTenant],
) -> Result<RunningController, DemoError> {
    let tenant_specs: Vec<TenantConfig> = ts
        .iter()
        .map(|t| TenantConfig {
            name: t.name.into(),
            slo: t.slo,
            class: t.class.map(String::from),
            depth: Some(t.depth as f64),
            volumes: vec![VolumeSpec {
                name: t.name.into(),
                host: t.host.into(),
                servers: t.servers.iter().map(|s| s.to_string()).collect(),
                stripe_unit: Some(units::ByteSize(65536)),
                exclusive: None,
                hosts: Vec::new(),
                ..Default::default()
            }],
        })
        .collect();
    let cfg = ControllerConfig {
        controller: ControllerSection {
            listen: opts.listen.clone(),
            data_dir: dir.join("controller"),
            interval: opts.interval,
            scheme: scheme.into(),
            block_size: units::ByteSize(4096),
            token_file: None,
            down_after: 3,
            service: [
                Duration::from_micros(50),
                Duration::from_micros(300),
                Duration::from_secs_f64((opts.seek_ms + 0.5) / 1e3),
            ],
            exclusive: opts.exclusive,
            bandwidth: Default::default(),
            boost: None,
            policy_choice: None,
        },
        nodes: Vec::new(),
        tenants: tenant_specs,
        images: Vec::new(),
    };
    std::fs::create_dir_all(&cfg.controller.data_dir)
        .map_err(setup("the controller's directory"))?;
    let store = Arc::new(
        SqliteStore::open(&cfg.controller.data_dir.join("controller.db"))
            .map_err(setup("the controller's store"))?,
    );
    controller::start(&cfg, store, false)
        .await
        .map_err(setup("the controller"))
}

/// Starts the level-2 nodes (over the disks at `disk_addr`), then the level-1 nodes,
/// each linked to the controller `ctl`.
pub(crate) async fn start_nodes(
    opts: &DemoOptions,
    dir: &Path,
    ts: &[DemoTenant],
    disk_addr: SocketAddr,
    ctl: &RunningController,
) -> Result<Vec<DemoNode>, DemoError> {
    let (ctl_addr, token_file) = (ctl.addr, ctl.token.file().to_path_buf());
    let link = |name: &str| {
        format!(
            "name = \"{name}\"\ncontroller = \"http://{ctl_addr}\"\n\
             controller_token_file = \"{}\"\nheartbeat = \"{}s\"\n",
            token_file.display(),
            opts.interval.as_secs_f64()
        )
    };
    let mut nodes: Vec<DemoNode> = Vec::new();
    for s in servers(ts) {
        let mut toml = format!(
            "[node]\nnbd = \"127.0.0.1:0\"\napi = \"127.0.0.1:0\"\ncache_size = {}\nlevel = 2\n\
             data_dir = \"{}\"\nbusy_poll = \"0s\"\nstop_timeout = \"2s\"\n{}",
            opts.l2_cache,
            dir.join(s).display(),
            link(s)
        );
        for t in ts.iter().filter(|t| t.servers.contains(&s)) {
            toml += &format!(
                "[[export]]\nname = \"{}\"\ntenant = \"{}\"\nupstream = [\"{disk_addr}/{s}.{}\"]\n",
                t.name, t.name, t.name
            );
        }
        let cfg = node::config::NodeConfig::parse(&toml).map_err(setup("a level-2 node"))?;
        let n = node::start(&cfg).await.map_err(setup("a level-2 node"))?;
        nodes.push(DemoNode {
            name: s.to_string(),
            level: 2,
            node: n,
        });
    }
    let nbd_of: HashMap<String, SocketAddr> = nodes
        .iter()
        .map(|n| (n.name.clone(), n.node.nbd_addr))
        .collect();
    // Each level-2 node's API and a file with its token, for the level-1 exports' demotions.
    let mut api_of: HashMap<&str, (SocketAddr, PathBuf)> = HashMap::new();
    for n in &nodes {
        let f = dir.join(format!("{}.api-token", n.name));
        std::fs::write(&f, n.node.api_token.secret()).map_err(setup("a node's token file"))?;
        let s = servers(ts)
            .into_iter()
            .find(|s| *s == n.name.as_str())
            .unwrap_or("");
        api_of.insert(s, (n.node.api_addr, f));
    }
    for h in hosts(ts) {
        let mut toml = format!(
            "[node]\nnbd = \"127.0.0.1:0\"\napi = \"127.0.0.1:0\"\ncache_size = {}\nlevel = 1\n\
             data_dir = \"{}\"\nbusy_poll = \"0s\"\nstop_timeout = \"2s\"\n{}",
            opts.l1_cache,
            dir.join(h).display(),
            link(h)
        );
        for t in ts.iter().filter(|t| t.host == h) {
            toml += &format!(
                "[[export]]\nname = \"{}\"\ntenant = \"{}\"\nupstream = [\"{}/{}\", \"{}/{}\"]\nstripe_unit = \"64KiB\"\n",
                t.name, t.name, nbd_of[t.servers[0]], t.name, nbd_of[t.servers[1]], t.name
            );
            if opts.exclusive {
                for s in t.servers {
                    toml += &format!(
                        "[[export.upstream_api]]\nurl = \"http://{}\"\ntoken_file = \"{}\"\n",
                        api_of[s].0,
                        api_of[s].1.display()
                    );
                }
            }
        }
        let cfg = node::config::NodeConfig::parse(&toml).map_err(setup("a level-1 node"))?;
        let n = node::start(&cfg).await.map_err(setup("a level-1 node"))?;
        nodes.push(DemoNode {
            name: h.to_string(),
            level: 1,
            node: n,
        });
    }
    Ok(nodes)
}

/// Waits (at most 15 s) until `n` nodes have registered with the controller and are up.
pub(crate) async fn registered(ctl: &RunningController, n: usize) -> Result<(), DemoError> {
    let t0 = Instant::now();
    loop {
        let known = ctl
            .service
            .nodes()
            .into_iter()
            .filter(|n| n.api.is_some() && n.up)
            .count();
        if known == n {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(15) {
            return Err(DemoError::Setup(format!(
                "only {known} of {n} nodes registered with the controller"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stops every node, level 1 before level 2, so each level's dirty blocks are written
/// back into the one below while it still serves (each node for at most its
/// `stop_timeout` of 2 s; what is left is kept in its `recovery.bin`, in the temporary
/// directory the demo deletes, as the demo's disks are): the level-1 nodes stop together
/// and are waited for (their write-back into level 2 ends before level 2 stops), then the
/// level-2 nodes (writing back to the disks). A node still draining after `grace` is
/// reported and not waited for further (the temporary directory goes with the process).
pub(crate) async fn stop_nodes(nodes: Vec<DemoNode>, grace: Duration) {
    let (level1, level2): (Vec<_>, Vec<_>) = nodes.into_iter().partition(|n| n.level == 1);
    for level in [level1, level2] {
        let stopping: Vec<_> = level
            .into_iter()
            .map(|n| (n.name, tokio::spawn(n.node.shutdown())))
            .collect();
        let t0 = Instant::now();
        for (name, s) in stopping {
            match tokio::time::timeout(grace.saturating_sub(t0.elapsed()), s).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => {
                    tracing::warn!(node = %name, %e, "demo node stopped with an error")
                }
                Ok(Err(e)) => tracing::warn!(node = %name, %e, "demo node's shutdown panicked"),
                Err(_) => {
                    tracing::warn!(node = %name, "demo node still writing back after the grace; not waited for")
                }
            }
        }
        tracing::debug!(seconds = t0.elapsed().as_secs_f64(), "demo level stopped");
    }
}
