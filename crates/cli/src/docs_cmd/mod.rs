//! `lachesis docs`: what the book under `docs/` holds that is generated from code, and its
//! checks. `docs config` prints the configuration reference (`docs/config.md`) from the
//! configuration types themselves ([`reference`]); `docs check` checks that every relative
//! link of the README and the book leads to a file, and every `#anchor` to a heading
//! ([`links`]). `cargo test` runs both, so neither the reference nor a link can go stale.

mod links;
mod reference;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Arguments of `lachesis docs`.
#[derive(Args, Debug)]
pub struct DocsArgs {
    #[command(subcommand)]
    command: DocsCommand,
}

#[derive(Subcommand, Debug)]
enum DocsCommand {
    /// Print the configuration reference of node.toml and controller.toml (Markdown), as
    /// `docs/config.md` holds it.
    Config {
        /// Write it to this file instead of stdout.
        #[arg(short = 'o', long = "out")]
        out: Option<PathBuf>,
    },
    /// Check the relative links of README.md and every Markdown file under docs/: each
    /// must name a file that exists and, with `#anchor`, a heading of it.
    Check {
        /// The repository's root (default: the working directory).
        #[arg(default_value = ".")]
        root: PathBuf,
    },
}

/// Runs `lachesis docs`.
pub fn run(args: DocsArgs) -> anyhow::Result<()> {
    match args.command {
        DocsCommand::Config { out } => {
            let text = reference::config_reference()?;
            match out {
                Some(path) => std::fs::write(&path, text)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => print!("{text}"),
            }
        }
        DocsCommand::Check { root } => {
            let report = links::check(&root)?;
            for broken in &report.broken {
                eprintln!("{broken}");
            }
            if !report.broken.is_empty() {
                bail!(
                    "{} broken link(s) in {} file(s) checked",
                    report.broken.len(),
                    report.files
                );
            }
            println!(
                "{} links in {} files: all lead somewhere",
                report.links, report.files
            );
        }
    }
    Ok(())
}
