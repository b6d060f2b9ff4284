//! `lachesis bench`: the flags of each benchmark; the benchmarks themselves, and their
//! reports, are the `bench` crate's.

use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Arguments of `lachesis bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// Simulator throughput against libCacheSim's C simulator and PyPI bindings, and LRU memory per object.
    Sim(SimBench),
    /// Curve methods: speed, error against the exact curve, bounded memory.
    Mrc(MrcBench),
    /// Allocation: 5,000 tenants over 1 TB at 1 MB steps against plain water-filling; MLMS with its LP.
    Alloc,
    /// The node's data path against nbdkit and qemu-nbd on loopback (needs fio, nbdkit, qemu-nbd).
    Nbd {
        /// Seconds per fio run.
        #[arg(long, default_value_t = 4)]
        seconds: u32,
        /// Interleaved runs per side of each comparison; the best of each side is compared.
        #[arg(long, default_value_t = 3)]
        repeat: u32,
        /// Only these rows (comma-separated): hit-qd32, hit-qd1, hit-seq, miss, l1.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// Sustained writes through a 100 %-dirty write-back cache against a slow backend
    /// (nbdkit's rate filter over a file), beside the backend's own speed (needs fio, nbdkit).
    Writeback {
        /// Seconds per side.
        #[arg(long, default_value_t = 10)]
        seconds: u32,
        /// The backend's limit, nbdkit's syntax in bits per second.
        #[arg(long, default_value = "64M")]
        rate: String,
        /// Cache size in MiB (the writes cover eight times it).
        #[arg(long, default_value_t = 16)]
        cache_mib: u64,
    },
    /// One control step at scale (100,000 tenants over 10,000 nodes by default), also
    /// with the topology rebuilt; with `--nodes N`, one whole live interval against N node
    /// APIs on loopback instead; the demo's workload under lachesis against static fair
    /// share (SLOs met, throughput).
    Control {
        /// Tenants of the step's figure (with `--nodes`: of the live interval's, default
        /// 10,000).
        #[arg(long)]
        tenants: Option<usize>,
        /// Nodes of the step's figure, half hosts and half servers (default 10,000).
        #[arg(long, default_value_t = 10_000)]
        step_nodes: usize,
        /// Measure one whole live interval (poll, step, reconcile) against this many node
        /// APIs served on loopback in this process, beside the interval's length, instead
        /// of the step alone; the demo is not run.
        #[arg(long)]
        nodes: Option<usize>,
        /// The live interval's length in seconds (with `--nodes`).
        #[arg(long, default_value_t = 5.0)]
        interval: f64,
        /// Seconds of each demo arm (0: only the step). Each arm starts with empty caches,
        /// which take 40 to 60 s to fill from the demo's disks whatever the sizes; the
        /// default runs well past that, so the plan, not the warm-up, is compared.
        #[arg(long, default_value_t = 90)]
        seconds: u64,
        /// The CloudPhysics trace (default: shared/traces/cloudPhysicsIO.csv above here).
        #[arg(long)]
        trace: Option<PathBuf>,
    },
    /// PostgreSQL (pgbench) on ext4 on a Lachesis volume beside a scanning neighbour (fio),
    /// under each scheme at once, side by side (needs root, postgresql, qemu-utils, fio).
    Apps {
        /// Seconds pgbench runs.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Seconds the neighbour scans before pgbench starts.
        #[arg(long, default_value_t = 20)]
        warmup: u64,
        /// pgbench's scale.
        #[arg(long, default_value_t = 5)]
        scale: u32,
        /// The schemes compared (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "fair,lachesis")]
        schemes: Vec<String>,
        /// One JSON object per arm instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Data check of the whole path: writers stamp every sector, read it back while the
    /// controller re-plans and a neighbour scans, and name every sector that is not what
    /// was last acknowledged (exits non-zero if any). No root needed.
    Verify {
        /// Seconds the writers run.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        /// The control scheme.
        #[arg(long, default_value = "lachesis")]
        scheme: String,
        /// Writers (connections), each with a 12 MiB region.
        #[arg(long, default_value_t = 4)]
        writers: usize,
        /// Requests each writer keeps in flight.
        #[arg(long, default_value_t = 8)]
        depth: usize,
        /// Seed of the writers' choices.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Also switch `pg`'s caches between write-back and write-through and between
        /// eviction policies every this many seconds (0: only the controller changes them).
        #[arg(long, default_value_t = 0.0)]
        churn: f64,
        /// The report as one JSON object instead of lines.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
struct MrcBench {
    /// Requests in the generated trace.
    #[arg(long, default_value_t = 10_000_000)]
    requests: u64,
    /// Distinct objects in the generated trace.
    #[arg(long, default_value_t = 1_000_000)]
    objects: u64,
    /// Where the generated trace is kept between runs.
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// Skip the miniSim comparison against full simulation (the slow part).
    #[arg(long)]
    no_minisim: bool,
}

#[derive(Args, Debug)]
struct SimBench {
    /// Requests in the generated trace.
    #[arg(long, default_value_t = 10_000_000)]
    requests: u64,
    /// Distinct objects in the generated trace.
    #[arg(long, default_value_t = 1_000_000)]
    objects: u64,
    /// Zipf skew of the generated trace.
    #[arg(long, default_value_t = 0.9)]
    alpha: f64,
    /// Cache size in objects.
    #[arg(long, default_value_t = 100_000)]
    size: u64,
    /// Policies to compare.
    #[arg(long, default_value = "lru,fifo,clock,arc,lirs,2q")]
    policy: String,
    /// Where the generated trace is kept between runs.
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// Python interpreter with `libcachesim` installed.
    #[arg(long, default_value = "python3")]
    python: String,
    /// Skip the memory measurement.
    #[arg(long)]
    no_memory: bool,
    /// Runs of each side per policy, interleaved (ours, peer, ours, ...); the best of each
    /// side is compared, so a burst of load from a neighbour on a shared machine does not
    /// decide the ratio.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// libCacheSim's C simulator `cachesim` (built by `shared/peers/build_cachesim.sh`);
    /// default: `$CACHESIM`, else `~/.cache/lachesis-peers/cachesim` if it exists.
    #[arg(long)]
    cachesim: Option<PathBuf>,
}

/// Where `build_cachesim.sh` leaves `cachesim`, if it is there.
fn default_cachesim() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CACHESIM") {
        return Some(PathBuf::from(p));
    }
    let p = PathBuf::from(std::env::var_os("HOME")?).join(".cache/lachesis-peers/cachesim");
    p.is_file().then_some(p)
}

/// Runs `lachesis bench`.
pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    match a.what {
        BenchWhat::Sim(b) => bench::sim::run(&bench::sim::SimBench {
            exe: std::env::current_exe()?,
            requests: b.requests,
            objects: b.objects,
            alpha: b.alpha,
            size: b.size,
            policy: b.policy,
            dir: b.dir,
            python: b.python,
            no_memory: b.no_memory,
            repeat: b.repeat,
            cachesim: b.cachesim.or_else(default_cachesim),
        })?,
        BenchWhat::Alloc => bench::allocation::run(),
        BenchWhat::Nbd {
            seconds,
            repeat,
            only,
        } => bench::nbd::run(seconds, repeat, &only)?,
        BenchWhat::Writeback {
            seconds,
            rate,
            cache_mib,
        } => {
            bench::writeback::run(seconds, &rate, cache_mib)?;
        }
        BenchWhat::Control {
            nodes: Some(nodes),
            tenants,
            interval,
            ..
        } => bench::control_live::run(nodes, tenants.unwrap_or(10_000), interval)?,
        BenchWhat::Control {
            seconds,
            trace,
            tenants,
            step_nodes,
            ..
        } => bench::control::run(
            bench::control::Scale {
                tenants: tenants.unwrap_or(100_000),
                hosts: (step_nodes / 2).max(1),
                servers: (step_nodes - step_nodes / 2).max(1),
            },
            (seconds > 0).then(|| std::time::Duration::from_secs(seconds)),
            trace.or_else(|| {
                trace::find_shared_trace("cloudPhysicsIO.csv", &std::env::current_dir().ok()?)
            }),
        )?,
        BenchWhat::Mrc(b) => bench::curves::run(b.requests, b.objects, &b.dir, !b.no_minisim)?,
        BenchWhat::Apps {
            seconds,
            warmup,
            scale,
            schemes,
            json,
        } => apps(
            loadgen::apps::AppsOptions {
                schemes,
                duration: std::time::Duration::from_secs(seconds),
                warmup: std::time::Duration::from_secs(warmup),
                scale,
                ..Default::default()
            },
            json,
        )?,
        BenchWhat::Verify {
            seconds,
            scheme,
            writers,
            depth,
            seed,
            churn,
            json,
        } => verify(
            loadgen::verify::VerifyOptions {
                scheme,
                duration: std::time::Duration::from_secs(seconds),
                writers,
                depth,
                seed,
                churn: (churn > 0.0)
                    .then(|| std::time::Duration::try_from_secs_f64(churn))
                    .transpose()
                    .map_err(|e| anyhow::anyhow!("--churn: {e}"))?,
                ..Default::default()
            },
            json,
        )?,
    }
    Ok(())
}

/// `lachesis bench verify`: one run, its counts and every bad sector; an error if any.
fn verify(opts: loadgen::verify::VerifyOptions, json: bool) -> anyhow::Result<()> {
    control::Scheme::named(&opts.scheme).map_err(|e| anyhow::anyhow!("--scheme: {e}"))?;
    anyhow::ensure!(opts.writers > 0, "--writers: at least one");
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let r = rt.block_on(loadgen::verify::run_verify(&opts, dir.path()))?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "{}: {} writes, {} write-zeroes, {} flushes, {} reads ({} MiB checked) over {} \
             intervals, {} changes made on the nodes {:?}, {} switches by --churn",
            r.scheme,
            r.writes,
            r.zeroings,
            r.flushes,
            r.reads,
            r.bytes_checked >> 20,
            r.intervals,
            r.actions,
            r.action_kinds,
            r.churned
        );
        for m in &r.mismatches {
            println!(
                "  bad sector at byte {} ({}): expected {}, found {}",
                m.offset,
                m.phase,
                if m.expected == 0 {
                    "zeros".to_string()
                } else {
                    format!("version {}", m.expected)
                },
                m.found
            );
        }
    }
    anyhow::ensure!(
        r.mismatched_sectors == 0,
        "{} sectors read back other than last acknowledged",
        r.mismatched_sectors
    );
    Ok(())
}

/// `lachesis bench apps`: every arm at once, then a row per arm.
fn apps(opts: loadgen::apps::AppsOptions, json: bool) -> anyhow::Result<()> {
    for s in &opts.schemes {
        control::Scheme::named(s).map_err(|e| anyhow::anyhow!("--schemes: {e}"))?;
    }
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let rows = rt.block_on(loadgen::apps::run_apps(&opts, dir.path()))?;
    if json {
        for r in &rows {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    println!(
        "pgbench (TPC-B-like, scale {}, {} clients, {} s; `span` runs to the last \
         transaction's end, `max` is the slowest, one that waited for a FLUSH to reach the \
         disks) on ext4 on a Lachesis volume, a \
         scanning neighbour (fio, 64 KiB sequential reads) on the same host and servers; \
         every arm at the same time:",
        opts.scale,
        opts.clients,
        opts.duration.as_secs()
    );
    println!(
        "{:<14} {:>8} {:>12} {:>9} {:>9} {:>9} {:>7} {:>13} {:>9} {:>9}",
        "scheme",
        "TPS",
        "transactions",
        "mean ms",
        "p99 ms",
        "max ms",
        "span s",
        "neighbour MB/s",
        "pg L1 MiB",
        "pg L2 MiB"
    );
    for r in &rows {
        println!(
            "{:<14} {:>8.1} {:>12} {:>9.2} {:>9.2} {:>9.0} {:>7.1} {:>13.1} {:>9.1} {:>9.1}",
            r.scheme,
            r.tps,
            r.transactions,
            r.mean_ms,
            r.p99_ms,
            r.max_ms,
            r.span_s,
            r.neighbour_mbps,
            r.pg_sizes.0 as f64 / 1048576.0,
            r.pg_sizes.1 as f64 / 1048576.0
        );
    }
    Ok(())
}
