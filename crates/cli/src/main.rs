//! The `lachesis` binary: parses arguments and prints; every command is a library call.

mod sim_cmd;

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
    /// Simulate eviction policies on a trace at several cache sizes.
    Sim(sim_cmd::SimArgs),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(a) => sim_cmd::run(a),
    }
}
