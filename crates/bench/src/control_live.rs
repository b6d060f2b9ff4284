//! `lachesis bench control --nodes N`: one whole live interval of the controller (poll,
//! `control` step, reconcile, record) against `N` node APIs served on loopback in this
//! process: the node's own API handlers (`node::api::router`) over their own
//! `node::state::ControlPlane`, each with its own caches, exports, observers and backend
//! queue, half of them level-1 hosts and half level-2 servers. Tenants are spread over
//! them as in the step's figure (one host, striped over two servers, a third with latency
//! SLOs, scheme `lachesis`), each with one volume exported where it lives; the exports'
//! backends read zeros and drop writes (no I/O is driven: what is measured is the control
//! plane, not the data path).
//!
//! The first interval programs every node (creates each volume's caches and rules); the
//! ones after it are the steady state a running controller is in (no I/O is driven, so
//! the tenants soon count as idle and their partitions move to the idle floor over the
//! next intervals: those intervals resize every cache). Between intervals the rest of
//! the interval passes, as in the live loop. Every interval is printed with its actions,
//! with the median of the steady ones, beside the interval's length and the goal (a
//! quarter of it).

use api::controller::Registration;
use controller::config::{ControllerConfig, ControllerSection, TenantConfig, VolumeSpec};
use controller::{Service, SqliteStore, Store};
use std::io;
use std::sync::Arc;
use std::time::Instant;

/// A backend of `size` bytes that reads zeros and drops writes.
struct Zeros(u64);

impl cache::Backend for Zeros {
    fn size(&self) -> u64 {
        self.0
    }
    fn read_at(&self, _offset: u64, buf: &mut [u8]) -> io::Result<()> {
        buf.fill(0);
        Ok(())
    }
    fn write_at(&self, _offset: u64, _data: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn trim(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
}

/// The figure of whole intervals at scale.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IntervalFigure {
    /// Node APIs served.
    pub nodes: usize,
    /// Tenants (one volume each).
    pub tenants: usize,
    /// The configured interval (s).
    pub interval_seconds: f64,
    /// The first interval, which programs every node (s).
    pub first_seconds: f64,
    /// Each steady interval after it (s).
    pub steady_seconds: Vec<f64>,
    /// Their median (s).
    pub median_seconds: f64,
    /// Actions the first interval took on the nodes (creates, rules, ...).
    pub first_actions: usize,
    /// Actions the steady intervals took (a plan that moved little changes little).
    pub steady_actions: usize,
    /// Each steady interval's actions.
    pub steady_actions_each: Vec<usize>,
    /// The steady intervals' actions by verb and the level of the node they changed
    /// (`resize@1`): what a steady interval still sends.
    pub steady_verbs: std::collections::BTreeMap<String, usize>,
}

const BLOCK: u64 = 4096;
/// Blocks of a host's memory and a server's.
const HOST_BLOCKS: u64 = 16_384;
const SERVER_BLOCKS: u64 = 32_768;
/// Bytes of each exported volume.
const VOLUME: u64 = 64 << 20;

fn host(i: usize, hosts: usize) -> String {
    format!("h{}", i % hosts)
}

fn servers_of(i: usize, servers: usize) -> [String; 2] {
    [
        format!("s{}", i % servers),
        format!("s{}", (i + 1) % servers),
    ]
}

/// One node's state with an export per tenant of `tenants` it serves.
fn node_state(name: &str, level: u8, tenants: &[String]) -> node::state::ControlPlane {
    let blocks = if level == 1 {
        HOST_BLOCKS
    } else {
        SERVER_BLOCKS
    };
    let mut b = node::state::ControlPlane::builder(blocks as usize, BLOCK as usize, level, 32)
        .expect("a node's cache")
        .name(name);
    for t in tenants {
        let info = node::state::ExportInfo {
            name: t.clone(),
            tenant: t.clone(),
            size: VOLUME,
            read_only: false,
            backend: "zeros".into(),
        };
        b.add_export(info, Arc::new(Zeros(VOLUME)), None)
            .expect("an export");
    }
    b.build()
}

/// Times `intervals` intervals (the first programming every node) of `tenants` tenants
/// over `nodes` node APIs on loopback, intervals of `interval_seconds`.
pub fn interval_at_scale(
    nodes: usize,
    tenants: usize,
    interval_seconds: f64,
    intervals: usize,
) -> crate::Result<IntervalFigure> {
    let hosts = (nodes / 2).max(1);
    let servers = (nodes - hosts).max(1);
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let token = Arc::new(
        api::auth::Token::generate(&dir.path().join("node.token"))
            .map_err(|e| crate::BenchError::Failed(e.to_string()))?,
    );
    // Which tenants each node serves.
    let mut on: std::collections::BTreeMap<String, (u8, Vec<String>)> = Default::default();
    for h in 0..hosts {
        on.insert(format!("h{h}"), (1, Vec::new()));
    }
    for s in 0..servers {
        on.insert(format!("s{s}"), (2, Vec::new()));
    }
    for i in 0..tenants {
        let t = format!("t{i}");
        on.get_mut(&host(i, hosts)).expect("host").1.push(t.clone());
        for s in servers_of(i, servers) {
            on.get_mut(&s).expect("server").1.push(t.clone());
        }
    }
    let mut registrations = Vec::new();
    for (name, (level, ts)) in &on {
        let state = Arc::new(node_state(name, *level, ts));
        let epoch = state.observations().epoch;
        let router = node::api::router(state, token.clone());
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        rt.spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        let blocks = if *level == 1 {
            HOST_BLOCKS
        } else {
            SERVER_BLOCKS
        };
        registrations.push(Registration {
            name: name.clone(),
            level: *level,
            api: format!("http://{addr}"),
            nbd: None,
            cache_size: blocks * BLOCK,
            block_size: BLOCK,
            epoch,
            exports: Vec::new(),
            token: token.secret().to_string(),
        });
    }
    let cfg = ControllerConfig {
        controller: ControllerSection {
            listen: "127.0.0.1:0".into(),
            data_dir: dir.path().join("controller"),
            interval: std::time::Duration::from_secs_f64(interval_seconds),
            scheme: "lachesis".into(),
            block_size: units::ByteSize(BLOCK),
            token_file: None,
            down_after: 3,
            service: [
                std::time::Duration::from_micros(50),
                std::time::Duration::from_micros(500),
                std::time::Duration::from_millis(5),
            ],
            exclusive: false,
            bandwidth: Default::default(),
            boost: None,
            policy_choice: None,
        },
        nodes: Vec::new(),
        tenants: (0..tenants)
            .map(|i| TenantConfig {
                name: format!("t{i}"),
                slo: (i % 3 == 0).then_some(control::Slo::LatencyMs(2.0 + (i % 5) as f64)),
                class: None,
                depth: Some(4.0),
                volumes: vec![VolumeSpec {
                    name: format!("t{i}"),
                    host: host(i, hosts),
                    servers: servers_of(i, servers).to_vec(),
                    ..Default::default()
                }],
            })
            .collect(),
        images: Vec::new(),
    };
    std::fs::create_dir_all(&cfg.controller.data_dir)?;
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("controller.db"))
            .map_err(|e| crate::BenchError::Failed(e.to_string()))?,
    );
    let svc = Service::open(&cfg, store).map_err(|e| crate::BenchError::Failed(e.to_string()))?;
    for r in registrations {
        svc.register(r)
            .map_err(|e| crate::BenchError::Failed(e.to_string()))?;
    }
    let mut times = Vec::new();
    let mut actions = Vec::new();
    let mut steady_verbs = std::collections::BTreeMap::new();
    for k in 0..intervals.max(2) {
        let t = Instant::now();
        let report = svc
            .tick()
            .map_err(|e| crate::BenchError::Failed(e.to_string()))?;
        let took = t.elapsed();
        times.push(took.as_secs_f64());
        actions.push(report.actions.len());
        // The rest of the interval passes as in the live loop (`Service::run`): what
        // the controller does behind an interval (its history) is done in it.
        std::thread::sleep(cfg.controller.interval.saturating_sub(took));
        if k > 0 {
            for a in &report.actions {
                let level = if a.node.starts_with('h') { 1 } else { 2 };
                *steady_verbs
                    .entry(format!("{}@{level}", a.verb))
                    .or_insert(0) += 1;
            }
        }
        if !report.refused.is_empty() {
            return Err(crate::BenchError::Failed(format!(
                "{} fields refused, the first: {}",
                report.refused.len(),
                report.refused[0].describe()
            )));
        }
    }
    let steady = times[1..].to_vec();
    let mut sorted = steady.clone();
    sorted.sort_by(f64::total_cmp);
    rt.shutdown_background();
    Ok(IntervalFigure {
        nodes: on.len(),
        tenants,
        interval_seconds,
        first_seconds: times[0],
        median_seconds: sorted[sorted.len() / 2],
        steady_seconds: steady,
        first_actions: actions[0],
        steady_actions: actions[1..].iter().sum(),
        steady_actions_each: actions[1..].to_vec(),
        steady_verbs,
    })
}

/// Prints [`interval_at_scale`]'s figure.
pub fn run(nodes: usize, tenants: usize, interval_seconds: f64) -> crate::Result<()> {
    let f = interval_at_scale(nodes, tenants, interval_seconds, 6)?;
    let goal = f.interval_seconds / 4.0;
    println!(
        "live interval, {} tenants over {} node APIs on loopback (scheme lachesis): median \
         {:.3} s of a {:.1} s interval (steady intervals, seconds/actions: {}; {} actions in \
         all; the first, \
         programming every node with {} actions, {:.3} s) against the goal of a quarter, \
         {:.3} s: {}{}",
        f.tenants,
        f.nodes,
        f.median_seconds,
        f.interval_seconds,
        f.steady_seconds
            .iter()
            .zip(&f.steady_actions_each)
            .map(|(s, a)| format!("{s:.3}/{a}"))
            .collect::<Vec<_>>()
            .join(" "),
        f.steady_actions,
        f.first_actions,
        f.first_seconds,
        goal,
        if f.median_seconds < goal {
            "met"
        } else {
            "NOT met"
        },
        if f.steady_verbs.is_empty() {
            String::new()
        } else {
            format!(" (steady actions by verb@level: {:?})", f.steady_verbs)
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_nodes_are_programmed_then_left_alone() {
        let f = interval_at_scale(6, 30, 0.5, 3).unwrap();
        assert_eq!((f.nodes, f.tenants), (6, 30));
        // The first interval creates each volume's cache on its host and two servers,
        // and its rule on each: 30 × 3 × 2 actions, and the proportions of each node.
        assert!(f.first_actions >= 180, "{f:?}");
        assert_eq!(f.steady_seconds.len(), 2);
    }
}
