//! `lachesis serve node.toml [--nbd ADDR] [--api ADDR]`: runs a cache node until SIGINT or
//! SIGTERM, then drains in-flight requests and writes every dirty block back before
//! exiting, within `[node] stop_timeout` (what is not on the backends by then is kept in
//! the recovery file and the exit status is 1). Dirty blocks that can be neither written
//! back nor kept (a failing backend and no room in the data directory) make the stop wait,
//! serving reads, until they can; a second SIGINT or SIGTERM, or `--discard-dirty` given at
//! start, ends the wait, dropping them (the exit status is 1 and the message names the
//! count). `--nbd` and `--api` override the file's listeners.

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `lachesis serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The node's configuration (see `examples/node.toml`).
    config: PathBuf,
    /// Directory for the configuration's relative file paths (overrides `data_dir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Worker threads of the runtime (default: the number of cores).
    #[arg(long)]
    threads: Option<usize>,
    /// NBD listen address (`HOST:PORT`; overrides `[node] nbd`).
    #[arg(long, value_name = "ADDR")]
    nbd: Option<String>,
    /// HTTP API listen address (`HOST:PORT`; overrides `[node] api`).
    #[arg(long, value_name = "ADDR")]
    api: Option<String>,
    /// At a stop, drop acknowledged dirty blocks that can be neither written back nor kept
    /// in the data directory, instead of waiting for the backend to heal or for space.
    #[arg(long)]
    discard_dirty: bool,
}

/// Runs `lachesis serve`.
pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(t) = a.threads {
        rt.worker_threads(t.max(1));
    }
    let rt = rt.build().context("starting the runtime")?;
    let res = rt.block_on(async {
        let mut cfg = node::config::NodeConfig::load(&a.config, a.data_dir.as_deref())?;
        if let Some(n) = a.nbd {
            cfg.node.nbd = n;
        }
        if let Some(n) = a.api {
            cfg.node.api = n;
        }
        cfg.node.discard_dirty = a.discard_dirty;
        let node = node::start(&cfg).await?;
        eprintln!(
            "lachesis node: NBD on {} (e.g. qemu-io -f raw nbd://{}/NAME), API and page on http://{}/ \
             (API token in {}; open the page as http://{}/#token=TOKEN)",
            node.nbd_addr,
            node.nbd_addr,
            node.api_addr,
            node.api_token.file().display(),
            node.api_addr
        );
        node.run_until_signalled(|step| match step {
            node::Stop::Discard => eprintln!(
                "lachesis node: second signal: stopping without waiting for dirty blocks that \
                 can be neither written back nor kept"
            ),
            _ => eprintln!("lachesis node: stopping, writing dirty blocks back"),
        })
        .await
        .context("stopping the node")
    });
    // Requests stuck on a hung backend past the stop's deadline must not keep the
    // process alive: their threads are left behind, the node has already kept their data.
    rt.shutdown_background();
    res
}
