//! The embedded demonstration (`lachesis demo`), on loopback in one process:
//!
//! * four "disks": an NBD server in-process whose exports are sparse temporary files behind
//!   a model of a hard disk (one request at a time per disk; a random access costs
//!   `seek_ms`, a sequential one 0.1 ms, plus transfer at 200 MB/s), one disk per level-2
//!   node, so tenants sharing a server contend for its disk;
//! * four level-2 nodes and two level-1 nodes (`node::start`), each volume exported by its
//!   level-1 node and striped over two level-2 nodes;
//! * a controller (SQLite in the temporary directory) that the demo steps every interval,
//!   started first: each node registers itself with it (`[node] controller`, with the
//!   controller's token) and sends heartbeats, as in a deployment;
//! * four tenants driving real NBD I/O against their level-1 exports, closed loop:
//!   `cloud` replays the shared CloudPhysics trace (reads and writes, looped), `db` reads a
//!   Zipf hot set with a tight latency SLO (gold), `web` reads a wider Zipf set with an
//!   MLMS degradation SLO, `scan` reads sequentially through its whole volume (no SLO).
//!
//! [`run_arm`] runs the whole thing once with a given `control` scheme and returns every
//! interval's report and what each client measured of every request; given a static
//! fair-share arm run before on the same workload (fresh nodes, same seeds), it judges
//! each interval's degradation SLOs against it on those measurements (`judge_against_fair`).
//! [`ArmComparison::of`] compares the two: the share of intervals after the first three in which
//! each feasible SLO held, aggregate throughput (level-1 requests per second), and each
//! tenant's latency over the requests both arms completed.
//!
//! | file | owns |
//! |---|---|
//! | `options` | [`DemoOptions`] |
//! | `disks` | the modelled disks and their NBD server |
//! | `cluster` | the controller and the nodes: started, registered, stopped in order |
//! | `workload` | the tenants, their request streams and client connections |
//! | `results` | what one arm measured ([`ArmResult`], [`DriverLog`]) |
//! | `judge` | degradation SLOs judged against the fair arm's measurements |
//! | `summary` | arms compared ([`ArmComparison`]) |

mod cluster;
mod disks;
mod error;
mod judge;
mod options;
mod results;
mod summary;
mod workload;

pub use error::DemoError;
pub use options::DemoOptions;
pub use results::{ArmResult, DriverLog};
pub use summary::{ArmComparison, ArmSummary, DemoSummary, TenantResult, WARMUP_INTERVALS};

use crate::views::IntervalReport;
use control::Slo;
use error::setup;
use judge::{fair_meets_degradation, judge_against_fair};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};
use workload::{tenants, Workload};

/// Each demo tenant's SLO under `opts`.
pub fn tenant_slos(opts: &DemoOptions) -> Vec<(String, Option<Slo>)> {
    tenants(opts.db_slo_ms)
        .into_iter()
        .map(|t| (t.name.to_string(), t.slo))
        .collect()
}

/// When the interval after one due at `due` starts: `interval` later, or, if the step
/// ran past that (a reconcile waiting for a resize's write-back), `interval` after the
/// step ended, as the service's own loop does (`MissedTickBehavior::Delay`). Catching up
/// instead would measure the next interval over a few milliseconds and plan from that.
fn after(due: Instant, interval: Duration) -> Instant {
    let (next, now) = (due + interval, Instant::now());
    if now > next {
        now + interval
    } else {
        next
    }
}

/// Runs one arm: builds the disks, nodes and controller under `dir`, drives the workload
/// for `opts.duration`, steps the controller every interval and calls `each` with every
/// report; `started` is called once with the console's URL. Everything keeps running
/// `linger` longer (intervals not reported) so the console can be looked at.
///
/// Given the `fair` arm (run before on the same workload), each report's degradation SLOs
/// are judged on measurements rather than the controller's model: the requests completed
/// so far against the same requests under fair share (see `judge_against_fair`).
pub async fn run_arm(
    opts: &DemoOptions,
    scheme: &str,
    dir: &Path,
    mut started: impl FnMut(&str),
    mut each: impl FnMut(&IntervalReport),
    linger: Duration,
    fair: Option<&ArmResult>,
) -> Result<ArmResult, DemoError> {
    std::fs::create_dir_all(dir).map_err(setup("the demo directory"))?;
    let ts = tenants(opts.db_slo_ms);
    let disks = disks::start(dir, &cluster::SERVERS, &ts, opts.seek_ms).await?;
    let ctl = cluster::start_controller(opts, scheme, dir, &ts).await?;
    let nodes = cluster::start_nodes(opts, dir, &ts, disks.addr, &ctl).await?;
    // Every node registers itself (as in a deployment: `[node] controller`); wait for all.
    cluster::registered(&ctl, nodes.len()).await?;
    // Program the nodes before the workload starts (fair share at first).
    let svc = ctl.service.clone();
    tokio::task::spawn_blocking(move || svc.tick())
        .await
        .map_err(setup("the first interval"))?
        .map_err(setup("the first interval"))?;
    started(&ctl.console_url());
    // The workload.
    let l1_addr: HashMap<String, std::net::SocketAddr> = nodes
        .iter()
        .filter(|n| n.level == 1)
        .map(|n| (n.name.clone(), n.node.nbd_addr))
        .collect();
    let work = Workload::start(&ts, &l1_addr, opts.trace.as_deref())?;
    let began = Instant::now();
    let mut reports = Vec::new();
    let mut warm = Vec::new();
    let mut next = began + opts.interval;
    while began.elapsed() < opts.duration {
        tokio::time::sleep_until(next.into()).await;
        let svc = ctl.service.clone();
        match tokio::task::spawn_blocking(move || svc.tick()).await {
            Ok(Ok(mut r)) => {
                let now = work.mark();
                match fair {
                    Some(fair) => judge_against_fair(&mut r, &ts, &work.snapshot(), &now, fair),
                    None if scheme == "fair" => fair_meets_degradation(&mut r, &ts),
                    None => {}
                }
                each(&r);
                reports.push(r);
                if reports.len() == WARMUP_INTERVALS {
                    warm = now;
                }
            }
            Ok(Err(e)) => tracing::warn!(%e, "demo interval failed"),
            Err(e) => tracing::warn!(%e, "demo interval panicked"),
        }
        next = after(next, opts.interval);
    }
    let seconds = began.elapsed().as_secs_f64();
    // Keep serving (workload and intervals) for the reference's extension, then for a look
    // at the console; not counted.
    while began.elapsed() < opts.duration + opts.extend {
        tokio::time::sleep_until(next.into()).await;
        let svc = ctl.service.clone();
        let _ = tokio::task::spawn_blocking(move || svc.tick()).await;
        next = after(next, opts.interval);
    }
    let driver_logs = work.snapshot();
    while began.elapsed() < opts.duration + opts.extend + linger {
        tokio::time::sleep_until(next.into()).await;
        let svc = ctl.service.clone();
        let _ = tokio::task::spawn_blocking(move || svc.tick()).await;
        next = after(next, opts.interval);
    }
    let completed = work.stop().await;
    // Stop the nodes (level 1, then level 2: see `cluster::stop_nodes`), then the disks.
    // The controller stops last, so no node's heartbeat finds it gone.
    cluster::stop_nodes(nodes, Duration::from_secs(120)).await;
    disks.stop().await;
    let _ = tokio::time::timeout(Duration::from_secs(3), ctl.shutdown()).await;
    Ok(ArmResult {
        scheme: scheme.into(),
        reports,
        completed,
        seconds,
        drivers: driver_logs,
        warm,
    })
}
