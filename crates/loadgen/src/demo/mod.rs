//! The embedded demonstration (`lachesis demo`), on loopback in one process:
//!
//! * four "disks" per arm: an NBD server in-process whose exports are sparse temporary
//!   files behind a model of a hard disk (one request at a time per disk; a random access
//!   costs `seek_ms`, a sequential one 0.1 ms, plus transfer at 200 MB/s), one disk per
//!   level-2 node, so tenants sharing a server contend for its disk;
//! * four level-2 nodes and two level-1 nodes (`node::start`) per arm, each volume
//!   exported by its level-1 node and striped over two level-2 nodes;
//! * a controller per arm (SQLite in the temporary directory) that the demo steps every
//!   interval, started first: each node registers itself with it (`[node] controller`,
//!   with the controller's token) and sends heartbeats, as in a deployment;
//! * four tenants per arm driving real NBD I/O against their level-1 exports
//!   ([`crate::driver`]): `cloud` replays the shared CloudPhysics trace (reads and writes,
//!   looped), `db` reads a Zipf hot set at a rate of its own with a tight p99 SLO (gold),
//!   `web` reads a wider Zipf set with an MLMS degradation SLO, `scan` reads sequentially
//!   through its whole volume (no SLO).
//!
//! [`run_arms`] runs every arm (one control scheme each) **at the same time**, on fresh
//! nodes and the same request streams, so every arm sees the same machine (a loaded
//! machine slows all arms alike, not whichever ran last); each interval steps every
//! arm's controller and records its report and how far each client had got. The arms run
//! `extend` longer than is counted, so that the fair arm's clients (the reference) reach
//! the requests a faster arm completed. [`judge`] then judges every arm's degradation SLOs
//! against the fair arm's measurements of the same requests (`judge::against_fair`), and
//! [`DemoSummary::of`] compares the arms after the same warm-up.
//!
//! | file | owns |
//! |---|---|
//! | `options` | [`DemoOptions`] |
//! | `disks` | the modelled disks and their NBD server |
//! | `cluster` | the controller and the nodes: started, registered, stopped in order |
//! | `workload` | the tenants, their request streams and client connections |
//! | `results` | what one arm measured ([`ArmResult`], [`DriverLog`]) |
//! | `judge` | degradation SLOs judged against the fair arm's measurements |
//! | `summary` | arms compared ([`ArmComparison`], [`DemoSummary`]) |

pub(crate) mod cluster;
pub(crate) mod disks;
mod error;
mod judge;
mod options;
mod results;
mod summary;
pub(crate) mod workload;

pub use error::DemoError;
pub use options::DemoOptions;
pub use results::{ArmResult, DriverLog};
pub use summary::{ArmComparison, ArmSummary, DemoSummary, TenantResult, WARMUP_INTERVALS};

use control::Slo;
use controller::views::IntervalReport;
use error::setup;
pub use judge::judge;
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

/// One arm while it runs.
struct Running {
    scheme: String,
    disks: disks::Disks,
    ctl: controller::RunningController,
    nodes: Vec<cluster::DemoNode>,
    work: Option<Workload>,
    reports: Vec<IntervalReport>,
    marks: Vec<Vec<usize>>,
}

/// Steps every arm's controller at once; returns each arm's report (`None`: the step
/// failed, and is logged).
async fn tick_all(arms: &[Running]) -> Vec<Option<IntervalReport>> {
    let steps: Vec<_> = arms
        .iter()
        .map(|a| {
            let svc = a.ctl.service.clone();
            tokio::task::spawn_blocking(move || svc.tick())
        })
        .collect();
    let mut out = Vec::new();
    for (a, s) in arms.iter().zip(steps) {
        out.push(match s.await {
            Ok(Ok(r)) => Some(r),
            Ok(Err(e)) => {
                tracing::warn!(arm = %a.scheme, %e, "demo interval failed");
                None
            }
            Err(e) => {
                tracing::warn!(arm = %a.scheme, %e, "demo interval panicked");
                None
            }
        });
    }
    out
}

/// Runs one arm per scheme of `schemes`, all at once (see the module docs): builds each
/// arm's disks, nodes and controller under `dir/SCHEME`, drives the same workload in
/// every arm for `opts.duration` (counted) and `opts.extend` more (not counted), steps
/// every controller every interval and calls `each(scheme, report)` with every counted
/// report as the controller judged it; `started(scheme, url)` is called with each
/// console's URL. Everything keeps running `linger` longer (nothing recorded) so the
/// consoles can be looked at. The reports are returned as the controllers judged them:
/// [`judge`] judges degradation SLOs on the measurements.
pub async fn run_arms(
    opts: &DemoOptions,
    schemes: &[&str],
    dir: &Path,
    mut started: impl FnMut(&str, &str),
    mut each: impl FnMut(&str, &IntervalReport),
    linger: Duration,
) -> Result<Vec<ArmResult>, DemoError> {
    let ts = tenants(opts.db_slo_ms);
    let mut arms = Vec::new();
    for scheme in schemes {
        let dir = dir.join(scheme);
        std::fs::create_dir_all(&dir).map_err(setup("the demo directory"))?;
        let disks = disks::start(&dir, &cluster::servers(&ts), &ts, opts.seek_ms).await?;
        let ctl = cluster::start_controller(opts, scheme, &dir, &ts).await?;
        let nodes = cluster::start_nodes(opts, &dir, &ts, disks.addr, &ctl).await?;
        // Every node registers itself (as in a deployment: `[node] controller`).
        cluster::registered(&ctl, nodes.len()).await?;
        arms.push(Running {
            scheme: scheme.to_string(),
            disks,
            ctl,
            nodes,
            work: None,
            reports: Vec::new(),
            marks: Vec::new(),
        });
    }
    // Program the nodes before the workload starts (fair share at first).
    for (a, r) in arms.iter().zip(tick_all(&arms).await) {
        if r.is_none() {
            return Err(DemoError::Setup(format!(
                "{}: the first interval failed",
                a.scheme
            )));
        }
        started(&a.scheme, &a.ctl.console_url());
    }
    // The workloads, started together.
    for a in &mut arms {
        let l1_addr: HashMap<String, std::net::SocketAddr> = a
            .nodes
            .iter()
            .filter(|n| n.level == 1)
            .map(|n| (n.name.clone(), n.node.nbd_addr))
            .collect();
        a.work = Some(Workload::start(&ts, &l1_addr, opts.trace.as_deref())?);
    }
    let began = Instant::now();
    let mut next = began + opts.interval;
    let mut counted_secs = 0.0;
    while began.elapsed() < opts.duration + opts.extend + linger {
        tokio::time::sleep_until(next.into()).await;
        let counting = began.elapsed() <= opts.duration + opts.interval / 2;
        let logging = began.elapsed() < opts.duration + opts.extend;
        let reports = tick_all(&arms).await;
        for (a, r) in arms.iter_mut().zip(reports) {
            let now = a.work.as_ref().map(Workload::mark).unwrap_or_default();
            if !logging {
                continue;
            }
            // Past the counted intervals only how far each client got is kept (the
            // reference for a faster arm's requests).
            a.marks.push(now);
            if let (true, Some(r)) = (counting, r) {
                each(&a.scheme, &r);
                a.reports.push(r);
            } else if counting {
                // A failed step is an interval without a report; its requests count in the next.
                a.marks.pop();
            }
        }
        if counting {
            counted_secs = began.elapsed().as_secs_f64();
        }
        next = after(next, opts.interval);
    }
    let mut out = Vec::new();
    for mut a in arms {
        let work = a.work.take();
        let drivers = work.as_ref().map(Workload::snapshot).unwrap_or_default();
        let completed = match work {
            Some(w) => w.stop().await,
            None => HashMap::new(),
        };
        // Stop the nodes (level 1, then level 2: see `cluster::stop_nodes`), then the
        // disks; the controller stops last, so no node's heartbeat finds it gone.
        cluster::stop_nodes(a.nodes, Duration::from_secs(120)).await;
        a.disks.stop().await;
        let _ = tokio::time::timeout(Duration::from_secs(3), a.ctl.shutdown()).await;
        let warm = a
            .marks
            .get(WARMUP_INTERVALS.wrapping_sub(1))
            .cloned()
            .unwrap_or_default();
        out.push(ArmResult {
            scheme: a.scheme,
            reports: a.reports,
            completed,
            seconds: counted_secs,
            drivers,
            warm,
            marks: a.marks,
        });
    }
    Ok(out)
}
