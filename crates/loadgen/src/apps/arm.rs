//! One arm's cluster: the demo's disks, nodes and controller with tenants `pg` and
//! `scan`, started and stepped every interval by a task until it is stopped ([`Arm`],
//! also used by [`crate::verify`]).

use super::{step, AppsError};
use crate::demo::cluster::{self, DemoNode};
use crate::demo::disks::{self, Disks};
use crate::demo::workload::DemoTenant;
use crate::demo::DemoOptions;
use crate::driver::Pace;
use control::Slo;
use controller::RunningController;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The two tenants of an arm.
fn tenants() -> Vec<DemoTenant> {
    let t = |name, slo| DemoTenant {
        name,
        host: "l1-a",
        servers: ["l2-a", "l2-b"],
        slo,
        class: None,
        depth: 1,
        pace: Pace::ClosedLoop,
    };
    vec![t("pg", Some(Slo::Degradation(0.1))), t("scan", None)]
}

/// One arm's cluster (tenants `pg` and `scan`), stepped every interval by a task until
/// `stop` (also used by `verify`).
pub(crate) struct Arm {
    pub(crate) scheme: String,
    pub(crate) disks: Disks,
    pub(crate) ctl: RunningController,
    pub(crate) nodes: Vec<DemoNode>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) stepping: tokio::task::JoinHandle<()>,
}

pub(crate) async fn start_arm(c: &DemoOptions, scheme: &str, dir: &Path) -> Result<Arm, AppsError> {
    let ts = tenants();
    std::fs::create_dir_all(dir).map_err(|e| step(scheme, "its directory", e))?;
    let disks = disks::start(dir, &cluster::servers(&ts), &ts, c.seek_ms).await?;
    let ctl = cluster::start_controller(c, scheme, dir, &ts).await?;
    let nodes = cluster::start_nodes(c, dir, &ts, disks.addr, &ctl).await?;
    cluster::registered(&ctl, nodes.len()).await?;
    let svc = ctl.service.clone();
    tokio::task::spawn_blocking(move || svc.tick())
        .await
        .map_err(|e| step(scheme, "the first interval", e))?
        .map_err(|e| step(scheme, "the first interval", e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (svc, flag, interval) = (ctl.service.clone(), stop.clone(), c.interval);
    let stepping = tokio::spawn(async move {
        while !flag.load(Ordering::Relaxed) {
            tokio::time::sleep(interval).await;
            let s = svc.clone();
            if let Ok(Err(e)) = tokio::task::spawn_blocking(move || s.tick()).await {
                tracing::warn!(%e, "apps interval failed");
            }
            for a in svc.last().map(|r| r.actions).unwrap_or_default() {
                tracing::info!(node = %a.node, verb = %a.verb, cache = %a.cache, detail = %a.detail, result = %a.result, "apps: the controller changed a node");
            }
        }
    });
    Ok(Arm {
        scheme: scheme.into(),
        disks,
        ctl,
        nodes,
        stop,
        stepping,
    })
}

impl Arm {
    /// The level-1 node's NBD address (where `pg` and `scan` are exported).
    pub(crate) fn level1(&self) -> Result<std::net::SocketAddr, AppsError> {
        self.nodes
            .iter()
            .find(|n| n.level == 1)
            .map(|n| n.node.nbd_addr)
            .ok_or_else(|| step(&self.scheme, "the cluster", "no level-1 node"))
    }

    /// Stops stepping, then the nodes (writing back), the disks and the controller;
    /// returns the intervals the controller kept.
    pub(crate) async fn stop(self) -> Vec<api::controller::IntervalReport> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stepping.await;
        let series = self.ctl.service.series();
        cluster::stop_nodes(self.nodes, Duration::from_secs(60)).await;
        self.disks.stop().await;
        let _ = tokio::time::timeout(Duration::from_secs(3), self.ctl.shutdown()).await;
        series
    }
}
