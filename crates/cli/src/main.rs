//! The `lachesis` binary: parses arguments and prints; every command is a library call.

mod alloc_cmd;
mod bench_cmd;
mod controller_cmd;
mod ctl_cmd;
mod demo_cmd;
mod docs_cmd;
mod mrc_cmd;
mod plot;
mod policies;
mod progress;
mod replay_cmd;
mod report_cmd;
mod serve_cmd;
mod sim_cmd;
mod sim_run_cmd;
mod sizes;
mod source;
mod trace_cmd;

use clap::{Parser, Subcommand};

/// Lachesis: an SLO-aware cache for shared block storage.
#[derive(Parser)]
#[command(name = "lachesis", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate eviction policies on a trace at several cache sizes; `sim run` simulates
    /// the whole hierarchy under each control scheme of a scenario file.
    Sim(sim_run_cmd::SimCommand),
    /// Per-tenant cache sizes from hit-ratio curves: fair, utility, SLO or MLMS. Exits 2
    /// (after printing) when a tenant's SLO is not met.
    Alloc(alloc_cmd::AllocArgs),
    /// Hit-ratio curves: exact LRU, SHARDS, or scaled-down simulation of any policy.
    Mrc(mrc_cmd::MrcArgs),
    /// Summarise, convert and generate traces.
    Trace(trace_cmd::TraceArgs),
    /// Benchmarks printed beside a real peer's figures from the same run.
    Bench(bench_cmd::BenchArgs),
    /// Run a cache node: NBD exports through per-tenant caches, HTTP API on the side.
    Serve(serve_cmd::ServeArgs),
    /// Talk to a running node's API (caches, rules, stats, curves, proportions).
    Ctl(ctl_cmd::CtlArgs),
    /// Replay a trace as NBD reads and writes at its own pace or a given rate.
    Replay(replay_cmd::ReplayArgs),
    /// One self-contained HTML page from `sim run --out` folders: setup, plots, claims.
    Report(report_cmd::ReportArgs),
    /// Run the live controller: tenants, SLOs and nodes; the control step every interval.
    Controller(controller_cmd::ControllerArgs),
    /// A controller, six nodes and four tenants on loopback: SLOs met on real NBD I/O.
    Demo(demo_cmd::DemoArgs),
    /// The book's generated pages and its checks: the configuration reference, the links.
    Docs(docs_cmd::DocsArgs),
}

/// The process's allocator: mimalloc. With glibc's, a control step at provider scale
/// (`lachesis bench control`) spent about a quarter of its time in `malloc` and `free`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    quiet_on_closed_stdout();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(a) => sim_run_cmd::run(a),
        Command::Alloc(a) => alloc_cmd::run(a),
        Command::Mrc(a) => mrc_cmd::run(a),
        Command::Trace(a) => trace_cmd::run(a),
        Command::Bench(a) => bench_cmd::run(a),
        Command::Serve(a) => serve_cmd::run(a),
        Command::Ctl(a) => ctl_cmd::run(a),
        Command::Replay(a) => replay_cmd::run(a),
        Command::Report(a) => report_cmd::run(a),
        Command::Controller(a) => controller_cmd::run(a),
        Command::Demo(a) => demo_cmd::run(a),
        Command::Docs(a) => docs_cmd::run(a),
    };
    if let Err(e) = result {
        eprintln!("lachesis: {e:#}");
        // 2: `alloc` allocated and printed, but an SLO is not met; 1: anything else.
        std::process::exit(if e.is::<alloc_cmd::SloNotMet>() { 2 } else { 1 });
    }
}

/// A reader that stops early (`lachesis mrc ... | head`) closes our stdout, and `println!`
/// then panics. Like any Unix filter, end quietly instead; every other panic still reports.
/// (Restoring `SIGPIPE`'s default action would do the same but needs `unsafe`.)
fn quiet_on_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        report(info)
    }));
}
