//! `lachesis controller controller.toml [--store sqlite:PATH]`: runs the live controller
//! (see the `controller` crate) until SIGINT or SIGTERM. The store defaults to
//! `DATA_DIR/controller.db`; a restart with the same store resumes its tenants, nodes,
//! control state and history.

use anyhow::{bail, Context};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `lachesis controller`.
#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// The controller's configuration (see `examples/controller.toml`).
    config: PathBuf,
    /// Where state lives: `sqlite:PATH` (default `sqlite:DATA_DIR/controller.db`).
    #[arg(long)]
    store: Option<String>,
}

/// Opens the store named by `spec` (or the default in `data_dir`).
pub fn open_store(
    spec: Option<&str>,
    data_dir: &std::path::Path,
) -> anyhow::Result<Arc<dyn controller::Store>> {
    let path = match spec {
        None => data_dir.join("controller.db"),
        Some(s) if s.starts_with("sqlite:") => PathBuf::from(&s["sqlite:".len()..]),
        Some(s) if s.starts_with("etcd://") => {
            bail!("--store {s}: the etcd store is not built yet; use sqlite:PATH")
        }
        Some(s) => bail!("--store `{s}`: expected sqlite:PATH"),
    };
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let s = controller::SqliteStore::open(&path)
        .with_context(|| format!("opening the store {}", path.display()))?;
    Ok(Arc::new(s))
}

/// Runs `lachesis controller`.
pub fn run(a: ControllerArgs) -> anyhow::Result<()> {
    let cfg = controller::ControllerConfig::load(&a.config)?;
    let store = open_store(a.store.as_deref(), &cfg.controller.data_dir)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async {
        let c = controller::start(&cfg, store, true).await?;
        eprintln!(
            "lachesis controller: API on http://{} (token in {}), console at {}, store {}, \
             scheme {}, every {} s",
            c.addr,
            c.token.file.display(),
            c.console_url(),
            c.service.store_description(),
            c.service.scheme_name(),
            cfg.controller.interval_secs
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("lachesis controller: stopping");
        c.shutdown().await;
        Ok(())
    })
}
