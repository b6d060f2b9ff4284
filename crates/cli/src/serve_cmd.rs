//! `lachesis serve node.toml [--nbd ADDR] [--api ADDR]`: runs a cache node until SIGINT or
//! SIGTERM, then drains in-flight requests and writes every dirty block back before
//! exiting, within `[node] stop_timeout` (what is not on the backends by then is kept in
//! the recovery file and the exit status is 1). `--nbd` and `--api` override the file's
//! listeners.

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
        let mut node = node::start(&cfg).await?;
        eprintln!(
            "lachesis node: NBD on {} (e.g. qemu-io -f raw nbd://{}/NAME), API and page on http://{}/ \
             (API token in {}; open the page as http://{}/#token=TOKEN)",
            node.nbd_addr,
            node.nbd_addr,
            node.api_addr,
            node.api_token.file().display(),
            node.api_addr
        );
        let stop = node.stopper();
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
            res = node.wait() => return res.context("node stopped"),
        }
        eprintln!("lachesis node: stopping, writing dirty blocks back");
        if let Some(s) = stop {
            let _ = s.send(());
        }
        node.wait().await.context("stopping the node")
    });
    // Requests stuck on a hung backend past the stop's deadline must not keep the
    // process alive: their threads are left behind, the node has already kept their data.
    rt.shutdown_background();
    res
}
