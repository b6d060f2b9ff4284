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
//! [`Summary::of`] compares the two: the share of intervals after the first three in which
//! each feasible SLO held, aggregate throughput (level-1 requests per second), and each
//! tenant's latency over the requests both arms completed.

mod summary;

pub use summary::{ArmSummary, DemoSummary, Summary, TenantResult, WARMUP_INTERVALS};

use crate::config::{ControllerConfig, ControllerSection, TenantSpec, VolumeSpec};
use crate::service::IntervalReport;
use crate::store::SqliteStore;
use bytes::Bytes;
use control::Slo;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of one demo arm.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Length of the run.
    pub duration: Duration,
    /// Enforcement interval.
    pub interval: Duration,
    /// The shared CloudPhysics trace (the `cloud` tenant replays it; without it `cloud`
    /// reads a synthetic mixed set).
    pub trace: Option<PathBuf>,
    /// The controller's listen address (`127.0.0.1:0`: any port).
    pub listen: String,
    /// Mean seek of the modelled disks (ms).
    pub seek_ms: f64,
    /// Level-1 cache per node.
    pub l1_cache: u64,
    /// Level-2 cache per node.
    pub l2_cache: u64,
    /// The db tenant's p99 latency SLO (ms).
    pub db_slo_ms: f64,
    /// Exclusive levels: the controller plans both levels as one LRU stack and creates
    /// the caches exclusive; each level-1 export names its level-2 nodes' APIs
    /// (`upstream_api`), where its cache demotes the clean blocks it evicts.
    pub exclusive: bool,
    /// Keep the workload running this much longer after `duration`, logging each
    /// request's latency but reporting nothing: a reference (fair) arm is extended so that
    /// a scheme that gets further through the same requests still finds them there.
    pub extend: Duration,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            duration: Duration::from_secs(30),
            interval: Duration::from_secs(2),
            trace: None,
            listen: "127.0.0.1:0".into(),
            seek_ms: 2.0,
            l1_cache: 24 << 20,
            l2_cache: 32 << 20,
            db_slo_ms: 0.5,
            exclusive: false,
            extend: Duration::ZERO,
        }
    }
}

/// A demo failure.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// Setting up files, listeners or nodes.
    #[error("{0}")]
    Setup(String),
}

fn setup<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> DemoError + '_ {
    move |e| DemoError::Setup(format!("{what}: {e}"))
}

// ----- the modelled disks -----

struct Disk {
    queue: tokio::sync::Mutex<u64>,
    seek: Duration,
}

impl Disk {
    async fn serve(&self, offset: u64, len: u64) {
        let mut last = self.queue.lock().await;
        let position = if *last == offset {
            Duration::from_micros(100)
        } else {
            self.seek
        };
        let transfer = Duration::from_secs_f64(len as f64 / 200e6);
        tokio::time::sleep(position + transfer).await;
        *last = offset + len;
    }
}

struct SlowFile {
    file: nbd::FileExport,
    disk: Arc<Disk>,
}

type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl nbd::Export for SlowFile {
    fn size(&self) -> u64 {
        self.file.size()
    }
    fn capabilities(&self) -> nbd::Capabilities {
        self.file.capabilities()
    }
    fn read(&self, offset: u64, len: u32) -> Fut<'_, std::io::Result<Bytes>> {
        Box::pin(async move {
            self.disk.serve(offset, len as u64).await;
            self.file.read(offset, len).await
        })
    }
    fn write(&self, offset: u64, data: Bytes, fua: bool) -> Fut<'_, std::io::Result<()>> {
        Box::pin(async move {
            self.disk.serve(offset, data.len() as u64).await;
            self.file.write(offset, data, fua).await
        })
    }
    fn flush(&self) -> Fut<'_, std::io::Result<()>> {
        self.file.flush()
    }
    fn trim(&self, offset: u64, len: u32) -> Fut<'_, std::io::Result<()>> {
        self.file.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> Fut<'_, std::io::Result<()>> {
        self.file.write_zeroes(offset, len, fua)
    }
}

// ----- the workload -----

/// A tenant of the demo.
struct DemoTenant {
    name: &'static str,
    host: &'static str,
    servers: [&'static str; 2],
    slo: Option<Slo>,
    class: Option<&'static str>,
    depth: usize,
}

const VOLUME: u64 = 1 << 30;

/// Each demo tenant's SLO under `opts`.
pub fn tenant_slos(opts: &DemoOptions) -> Vec<(String, Option<Slo>)> {
    tenants(opts.db_slo_ms)
        .into_iter()
        .map(|t| (t.name.to_string(), t.slo))
        .collect()
}

fn tenants(db_slo_ms: f64) -> Vec<DemoTenant> {
    vec![
        DemoTenant {
            name: "db",
            host: "l1-a",
            servers: ["l2-a", "l2-b"],
            slo: Some(Slo::P99Ms(db_slo_ms)),
            class: Some("gold"),
            depth: 2,
        },
        DemoTenant {
            name: "scan",
            host: "l1-a",
            servers: ["l2-a", "l2-d"],
            slo: None,
            class: None,
            depth: 1,
        },
        DemoTenant {
            name: "cloud",
            host: "l1-b",
            servers: ["l2-b", "l2-c"],
            slo: Some(Slo::Degradation(0.1)),
            class: Some("silver"),
            depth: 2,
        },
        DemoTenant {
            name: "web",
            host: "l1-b",
            servers: ["l2-c", "l2-d"],
            slo: Some(Slo::Degradation(0.2)),
            class: None,
            depth: 2,
        },
    ]
}

/// One request of a generator.
#[derive(Clone, Copy)]
struct Io {
    write: bool,
    offset: u64,
    len: u32,
}

/// Deterministic request streams (SplitMix64 for randomness; Zipf by inverse transform
/// over a precomputed table).
struct Gen {
    kind: Kind,
    state: u64,
    next: u64,
}

enum Kind {
    Zipf(Arc<Vec<f64>>),
    Scan,
    Trace(Arc<Vec<Io>>),
}

impl Gen {
    fn rand(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn next(&mut self) -> Io {
        match &self.kind {
            Kind::Zipf(cdf) => {
                let cdf = cdf.clone();
                let u = (self.rand() >> 11) as f64 / (1u64 << 53) as f64;
                let k = cdf.partition_point(|&c| c < u) as u64;
                // Scatter ranks over the volume so hot blocks are not adjacent.
                let block = k.wrapping_mul(2_654_435_761) % (VOLUME / 4096);
                Io {
                    write: false,
                    offset: block * 4096,
                    len: 4096,
                }
            }
            Kind::Scan => {
                let off = self.next % VOLUME;
                self.next = off + 65536;
                Io {
                    write: false,
                    offset: off,
                    len: 65536,
                }
            }
            Kind::Trace(t) => {
                let io = t[(self.next % t.len() as u64) as usize];
                self.next += 1;
                io
            }
        }
    }
}

fn zipf_cdf(n: usize, alpha: f64) -> Arc<Vec<f64>> {
    let mut w: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(alpha)).collect();
    let total: f64 = w.iter().sum();
    let mut acc = 0.0;
    for x in &mut w {
        acc += *x / total;
        *x = acc;
    }
    Arc::new(w)
}

/// The CloudPhysics trace as block requests on a 1 GiB volume (offsets wrapped, lengths
/// rounded up to 4 KiB, at most 64 KiB).
fn load_trace(path: &Path) -> Result<Arc<Vec<Io>>, DemoError> {
    let text = std::fs::read_to_string(path).map_err(setup("the CloudPhysics trace"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 5 {
            return Err(DemoError::Setup(format!(
                "{}:{}: expected version,time,op,size,lbn",
                path.display(),
                i + 1
            )));
        }
        let write = f[2].eq_ignore_ascii_case("2a");
        let size: u64 = f[3].parse().unwrap_or(4096);
        let lbn: u64 = f[4].parse().unwrap_or(0);
        let offset = (lbn * 512 % VOLUME) / 4096 * 4096;
        let len = size.div_ceil(4096).clamp(1, 16) * 4096;
        let len = len.min(VOLUME - offset) as u32;
        out.push(Io { write, offset, len });
    }
    if out.is_empty() {
        return Err(DemoError::Setup(format!("{}: no requests", path.display())));
    }
    Ok(Arc::new(out))
}

/// Most latencies one driver keeps (a very long `--linger` stops logging, not serving).
const LOG_MAX: usize = 1 << 24;

async fn drive(
    addr: std::net::SocketAddr,
    export: &str,
    mut g: Gen,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    log: Arc<std::sync::Mutex<Vec<f32>>>,
) {
    let client = match nbd::NbdClient::connect(addr, export).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%export, %e, "demo client could not connect");
            return;
        }
    };
    let zeros = Bytes::from(vec![0x5au8; 65536]);
    while !stop.load(Ordering::Relaxed) {
        let io = g.next();
        let t0 = Instant::now();
        let r = if io.write {
            client
                .write(io.offset, zeros.slice(..io.len as usize), false)
                .await
                .map(|_| ())
        } else {
            client.read(io.offset, io.len).await.map(|_| ())
        };
        if let Err(e) = r {
            tracing::warn!(%export, %e, "demo request failed");
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        done.fetch_add(1, Ordering::Relaxed);
        let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
        if l.len() < LOG_MAX {
            l.push(ms as f32);
        }
    }
    let _ = client.disconnect().await;
}

// ----- one arm -----

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

/// What one arm measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ArmResult {
    /// The scheme.
    pub scheme: String,
    /// Every interval's report.
    pub reports: Vec<IntervalReport>,
    /// Requests completed per tenant, counted by the clients.
    pub completed: HashMap<String, u64>,
    /// Seconds the workload ran.
    pub seconds: f64,
    /// What each client connection saw: the latency of every request, in order.
    #[serde(skip)]
    pub drivers: Vec<DriverLog>,
    /// How many requests each client connection had logged when the warm-up
    /// ([`WARMUP_INTERVALS`]) ended (empty if the arm ended before).
    #[serde(skip)]
    pub warm: Vec<usize>,
}

/// One client connection of a tenant: the latency (ms) of each request it completed, in
/// order. Its requests are the same sequence in every arm (deterministic generators), so
/// request `k` of one arm is request `k` of another.
#[derive(Clone, Debug, Default)]
pub struct DriverLog {
    /// The tenant.
    pub tenant: String,
    /// Latency of each completed request (ms).
    pub latencies_ms: Vec<f32>,
}

/// Sum of latencies and count of requests `from..to` (clamped to what was logged).
pub(crate) fn span(l: &[f32], from: usize, to: usize) -> (f64, usize) {
    let to = to.min(l.len());
    let from = from.min(to);
    (l[from..to].iter().map(|&x| f64::from(x)).sum(), to - from)
}

/// Re-judges the degradation SLOs of `r` on measurements against `fair` (the same
/// workload under fair share). A degradation SLO `x` holds at the end of an interval when
/// the tenant's clients have spent at most `1 + x` times as long on the requests they have
/// completed so far as the fair arm's clients spent on the same requests (its drivers
/// replay the same sequences, closed loop, so this is being at most `x` behind fair share
/// through the same work). Progress so far, not the interval alone: a write-back cache
/// that absorbs a burst defers its write-back to later intervals, so the same requests
/// cost less early and more later, and only the sum says whether the tenant was slowed.
/// The row keeps its measured latency; its target becomes the one that comparison
/// implies for it (`latency · (1 + x) · fair / ours`), so `latency ≤ target` is the
/// verdict. `None` when the fair arm reached none of the requests.
fn judge_against_fair(
    r: &mut IntervalReport,
    ts: &[DemoTenant],
    logs: &[DriverLog],
    after: &[usize],
    fair: &ArmResult,
) {
    for row in &mut r.rows {
        let Some(Slo::Degradation(x)) =
            ts.iter().find(|t| t.name == row.tenant).and_then(|t| t.slo)
        else {
            continue;
        };
        let (mut ours, mut theirs) = (0.0, 0.0);
        for (d, log) in logs
            .iter()
            .enumerate()
            .filter(|(_, l)| l.tenant == row.tenant)
        {
            let Some(f) = fair.drivers.get(d).filter(|f| f.tenant == log.tenant) else {
                continue;
            };
            // Only the requests the fair arm completed too.
            let to = after[d].min(f.latencies_ms.len());
            ours += span(&log.latencies_ms, 0, to).0;
            theirs += span(&f.latencies_ms, 0, to).0;
        }
        match row.latency_ms {
            Some(lat) if ours > 0.0 && theirs > 0.0 => {
                let ratio = ours / theirs;
                row.target_ms = Some(lat * (1.0 + x) / ratio);
                row.slo_met = Some(ratio <= 1.0 + x);
            }
            _ => {
                row.target_ms = None;
                row.slo_met = None;
            }
        }
    }
}

/// The fair arm is the reference of degradation SLOs: it meets them by definition
/// wherever it served requests (what the controller's model made of them is no verdict).
fn fair_meets_degradation(r: &mut IntervalReport, ts: &[DemoTenant]) {
    for row in &mut r.rows {
        if let Some(Slo::Degradation(x)) =
            ts.iter().find(|t| t.name == row.tenant).and_then(|t| t.slo)
        {
            row.target_ms = row.latency_ms.map(|l| l * (1.0 + x));
            row.slo_met = row.latency_ms.map(|_| true);
        }
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
    let servers = ["l2-a", "l2-b", "l2-c", "l2-d"];
    let ts = tenants(opts.db_slo_ms);
    // Disks.
    let mut map = nbd::ExportMap::new();
    for s in servers {
        let disk = Arc::new(Disk {
            queue: tokio::sync::Mutex::new(u64::MAX),
            seek: Duration::from_secs_f64(opts.seek_ms / 1e3),
        });
        for t in ts.iter().filter(|t| t.servers.contains(&s)) {
            let path = dir.join(format!("disk-{s}-{}.img", t.name));
            let file = nbd::FileExport::create(&path, VOLUME / 2).map_err(setup("a disk file"))?;
            map.insert(
                format!("{s}.{}", t.name),
                Arc::new(SlowFile {
                    file,
                    disk: disk.clone(),
                }),
            );
        }
    }
    let disk_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(setup("the disks' listener"))?;
    let disk_addr = disk_listener
        .local_addr()
        .map_err(setup("the disks' listener"))?;
    let (disk_stop, disk_rx) = tokio::sync::oneshot::channel::<()>();
    let disks = tokio::spawn(
        nbd::Server::builder()
            .build(disk_listener, Arc::new(map))
            .serve(async {
                let _ = disk_rx.await;
            }),
    );
    // The controller.
    let tenant_specs: Vec<TenantSpec> = ts
        .iter()
        .map(|t| TenantSpec {
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
            }],
        })
        .collect();
    let cfg = ControllerConfig {
        controller: ControllerSection {
            listen: opts.listen.clone(),
            data_dir: dir.join("controller"),
            interval_secs: opts.interval.as_secs_f64(),
            scheme: scheme.into(),
            block_size: units::ByteSize(4096),
            token_file: None,
            down_after: 3,
            service_ms: [0.05, 0.3, opts.seek_ms + 0.5],
            exclusive: opts.exclusive,
            bandwidth: Default::default(),
        },
        nodes: Vec::new(),
        tenants: tenant_specs,
    };
    std::fs::create_dir_all(&cfg.controller.data_dir)
        .map_err(setup("the controller's directory"))?;
    let store = Arc::new(
        SqliteStore::open(&cfg.controller.data_dir.join("controller.db"))
            .map_err(setup("the controller's store"))?,
    );
    let ctl = crate::start(&cfg, store, false)
        .await
        .map_err(setup("the controller"))?;
    let (ctl_addr, token_file) = (ctl.addr, ctl.token.file.clone());
    let link = |name: &str| {
        format!(
            "name = \"{name}\"\ncontroller = \"http://{ctl_addr}\"\n\
             controller_token_file = \"{}\"\nheartbeat_secs = {}\n",
            token_file.display(),
            opts.interval.as_secs_f64()
        )
    };
    // Level-2 nodes, then level-1 nodes.
    let mut nodes: Vec<(String, u8, node::RunningNode, u64)> = Vec::new();
    for s in servers {
        let mut toml = format!(
            "[node]\nnbd = \"127.0.0.1:0\"\napi = \"127.0.0.1:0\"\ncache_size = {}\nlevel = 2\n\
             data_dir = \"{}\"\nbusy_poll_us = 0\nstop_timeout = \"2s\"\n{}",
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
        nodes.push((s.to_string(), 2, n, opts.l2_cache));
    }
    let nbd_of: HashMap<String, std::net::SocketAddr> = nodes
        .iter()
        .map(|(name, _, n, _)| (name.clone(), n.nbd_addr))
        .collect();
    // Each level-2 node's API and a file with its token, for the level-1 exports' demotions.
    let mut api_of: HashMap<&str, (std::net::SocketAddr, PathBuf)> = HashMap::new();
    for (name, _, n, _) in &nodes {
        let f = dir.join(format!("{name}.api-token"));
        std::fs::write(&f, n.api_token.secret()).map_err(setup("a node's token file"))?;
        let s = servers
            .iter()
            .find(|s| **s == name.as_str())
            .copied()
            .unwrap_or("");
        api_of.insert(s, (n.api_addr, f));
    }
    for h in ["l1-a", "l1-b"] {
        let mut toml = format!(
            "[node]\nnbd = \"127.0.0.1:0\"\napi = \"127.0.0.1:0\"\ncache_size = {}\nlevel = 1\n\
             data_dir = \"{}\"\nbusy_poll_us = 0\nstop_timeout = \"2s\"\n{}",
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
        nodes.push((h.to_string(), 1, n, opts.l1_cache));
    }
    // Every node registers itself (as in a deployment: `[node] controller`); wait for all.
    let t0 = Instant::now();
    loop {
        let known = ctl
            .service
            .nodes()
            .into_iter()
            .filter(|n| n.api.is_some() && n.up)
            .count();
        if known == nodes.len() {
            break;
        }
        if t0.elapsed() > Duration::from_secs(15) {
            return Err(DemoError::Setup(format!(
                "only {known} of {} nodes registered with the controller",
                nodes.len()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Program the nodes before the workload starts (fair share at first).
    let svc = ctl.service.clone();
    tokio::task::spawn_blocking(move || svc.tick())
        .await
        .map_err(setup("the first interval"))?
        .map_err(setup("the first interval"))?;
    started(&ctl.console_url());
    // The workload.
    let stop = Arc::new(AtomicBool::new(false));
    let trace = match &opts.trace {
        Some(p) => Some(load_trace(p)?),
        None => None,
    };
    let l1_addr: HashMap<String, std::net::SocketAddr> = nodes
        .iter()
        .filter(|n| n.1 == 1)
        .map(|(name, _, n, _)| (name.clone(), n.nbd_addr))
        .collect();
    let mut counters = HashMap::new();
    let mut drivers = Vec::new();
    let mut logs: Vec<(String, Arc<std::sync::Mutex<Vec<f32>>>)> = Vec::new();
    for (ti, t) in ts.iter().enumerate() {
        let done = Arc::new(AtomicU64::new(0));
        counters.insert(t.name.to_string(), done.clone());
        for k in 0..t.depth {
            let kind = match t.name {
                "db" => Kind::Zipf(zipf_cdf(3_500, 0.6)),
                "web" => Kind::Zipf(zipf_cdf(60_000, 0.9)),
                "scan" => Kind::Scan,
                _ => match &trace {
                    Some(tr) => Kind::Trace(tr.clone()),
                    None => Kind::Zipf(zipf_cdf(40_000, 0.8)),
                },
            };
            let g = Gen {
                kind,
                state: 0x1234_5678 + (ti as u64) * 1000 + k as u64,
                next: (k as u64) * 7919 * 4096,
            };
            let log = Arc::new(std::sync::Mutex::new(Vec::new()));
            logs.push((t.name.to_string(), log.clone()));
            drivers.push(tokio::spawn(drive(
                l1_addr[t.host],
                t.name,
                g,
                stop.clone(),
                done.clone(),
                log,
            )));
        }
    }
    let mark = || -> Vec<usize> {
        logs.iter()
            .map(|(_, l)| l.lock().unwrap_or_else(|p| p.into_inner()).len())
            .collect()
    };
    let snapshot = || -> Vec<DriverLog> {
        logs.iter()
            .map(|(t, l)| DriverLog {
                tenant: t.clone(),
                latencies_ms: l.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            })
            .collect()
    };
    let began = Instant::now();
    let mut reports = Vec::new();
    let mut warm = Vec::new();
    let mut next = began + opts.interval;
    while began.elapsed() < opts.duration {
        tokio::time::sleep_until(next.into()).await;
        let svc = ctl.service.clone();
        match tokio::task::spawn_blocking(move || svc.tick()).await {
            Ok(Ok(mut r)) => {
                let now = mark();
                match fair {
                    Some(fair) => judge_against_fair(&mut r, &ts, &snapshot(), &now, fair),
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
    let driver_logs = snapshot();
    while began.elapsed() < opts.duration + opts.extend + linger {
        tokio::time::sleep_until(next.into()).await;
        let svc = ctl.service.clone();
        let _ = tokio::task::spawn_blocking(move || svc.tick()).await;
        next = after(next, opts.interval);
    }
    stop.store(true, Ordering::Relaxed);
    for d in drivers {
        let _ = d.await;
    }
    // Stop everything, level 1 before level 2, so each level's dirty blocks are written
    // back into the one below while it still serves (each node for at most its
    // `stop_timeout` of 2 s; what is left is kept in its `recovery.bin`, in the temporary
    // directory the demo deletes, as the demo's disks are): the level-1 nodes stop together and
    // are waited for (their write-back into level 2 ends before level 2 stops), then the
    // level-2 nodes (writing back to the disks), then the disks. The controller stops
    // last, so no node's heartbeat finds it gone. A node still draining after `grace`
    // is reported and not waited for further (the temporary directory goes with the
    // process).
    let grace = Duration::from_secs(120);
    let (level1, level2): (Vec<_>, Vec<_>) = nodes.into_iter().partition(|n| n.1 == 1);
    for level in [level1, level2] {
        let stopping: Vec<_> = level
            .into_iter()
            .map(|(name, _, n, _)| (name, tokio::spawn(n.shutdown())))
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
    let _ = disk_stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), disks).await;
    let _ = tokio::time::timeout(Duration::from_secs(3), ctl.shutdown()).await;
    Ok(ArmResult {
        scheme: scheme.into(),
        reports,
        completed: counters
            .into_iter()
            .map(|(k, v)| (k, v.load(Ordering::Relaxed)))
            .collect(),
        seconds,
        drivers: driver_logs,
        warm,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::Row;

    /// One client's log (shared with `summary`'s tests).
    pub(super) fn log(tenant: &str, ms: &[f32]) -> DriverLog {
        DriverLog {
            tenant: tenant.into(),
            latencies_ms: ms.to_vec(),
        }
    }

    /// An arm of those logs and no reports (shared with `summary`'s tests).
    pub(super) fn arm(drivers: Vec<DriverLog>) -> ArmResult {
        ArmResult {
            scheme: "fair".into(),
            reports: Vec::new(),
            completed: HashMap::new(),
            seconds: 1.0,
            drivers,
            warm: Vec::new(),
        }
    }

    fn report(latency: f64) -> IntervalReport {
        let row = |t: &str| Row {
            tenant: t.into(),
            latency_ms: Some(latency),
            target_ms: Some(99.0),
            slo_met: Some(false),
            ..Row::default()
        };
        IntervalReport {
            rows: vec![row("db"), row("web"), row("cloud")],
            ..IntervalReport::default()
        }
    }

    #[test]
    fn degradation_is_judged_on_progress_through_the_same_requests() {
        let ts = tenants(1.5);
        // Drivers in the demo's order: db ×2, scan, cloud ×2, web ×2.
        let fair = arm(vec![
            log("db", &[1.0; 10]),
            log("db", &[1.0; 10]),
            log("scan", &[4.0; 10]),
            log("cloud", &[10.0, 10.0, 10.0, 10.0]),
            log("cloud", &[10.0, 10.0]),
            log("web", &[5.0; 4]),
            log("web", &[5.0; 4]),
        ]);
        let ours = vec![
            log("db", &[0.5; 10]),
            log("db", &[0.5; 10]),
            log("scan", &[4.0; 10]),
            // Faster early, slower later, and further than the fair arm got.
            log("cloud", &[2.0, 2.0, 20.0, 20.0, 20.0, 20.0]),
            log("cloud", &[2.0, 30.0, 30.0]),
            log("web", &[6.0, 6.0, 6.0, 6.0]),
            log("web", &[6.5, 6.5, 6.5, 6.5]),
        ];
        // After 3 and 2 cloud requests: 2+2+20 + 2+30 = 56 ms against 50 (1.12 > 1.1).
        let mut r = report(8.0);
        judge_against_fair(&mut r, &ts, &ours, &[5, 5, 5, 3, 2, 4, 4], &fair);
        let cloud = &r.rows[2];
        assert_eq!(cloud.slo_met, Some(false));
        assert!((cloud.target_ms.unwrap() - 8.0 * 1.1 / (56.0 / 50.0)).abs() < 1e-9);
        assert_eq!(
            cloud.latency_ms,
            Some(8.0),
            "the row keeps its measured latency"
        );
        // After 2 and 1: 4 + 2 = 6 against 30: met.
        let mut r = report(8.0);
        judge_against_fair(&mut r, &ts, &ours, &[5, 5, 5, 2, 1, 4, 4], &fair);
        assert_eq!(r.rows[2].slo_met, Some(true));
        // Past what the fair arm reached only the common requests count: 4 and 2 of them,
        // 2+2+20+20 + 2+30 = 76 against 60 (1.27 > 1.1).
        let mut r = report(8.0);
        judge_against_fair(&mut r, &ts, &ours, &[5, 5, 5, 6, 3, 4, 4], &fair);
        assert_eq!(r.rows[2].slo_met, Some(false));
        // web (20 %): 24 + 26 = 50 against 40 is 1.25: missed; db's absolute SLO is left
        // as the controller judged it.
        assert_eq!(r.rows[1].slo_met, Some(false));
        assert_eq!(
            (r.rows[0].target_ms, r.rows[0].slo_met),
            (Some(99.0), Some(false))
        );
        // Nothing the fair arm completed: no verdict.
        let empty = arm(Vec::new());
        let mut r = report(8.0);
        judge_against_fair(&mut r, &ts, &ours, &[5, 5, 5, 3, 2, 4, 4], &empty);
        assert_eq!((r.rows[2].target_ms, r.rows[2].slo_met), (None, None));
    }
}
