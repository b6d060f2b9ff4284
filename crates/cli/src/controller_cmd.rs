//! `lachesis controller controller.toml [--store sqlite:PATH | --store etcd://HOST:PORT]`:
//! runs the live controller (see the `controller` crate) until SIGINT or SIGTERM. The store
//! defaults to `DATA_DIR/controller.db`; a restart with the same store resumes its tenants,
//! nodes, control state and history. With `etcd://`, several replicas may run on the same
//! etcd: they elect a leader through a lease (`--replica` names this one).

use anyhow::{bail, Context};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `lachesis controller`.
#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// The controller's configuration (see `examples/controller.toml`).
    config: PathBuf,
    /// Where state lives: `sqlite:PATH` (default `sqlite:DATA_DIR/controller.db`) or
    /// `etcd://HOST:PORT[/PREFIX]` (replicas elect a leader).
    #[arg(long)]
    store: Option<String>,
    /// This replica's name in the leader election (etcd only; default `HOST-PID`).
    #[arg(long)]
    replica: Option<String>,
}

/// Opens the store named by `spec` (or the default in `data_dir`).
pub fn open_store(
    spec: Option<&str>,
    data_dir: &std::path::Path,
) -> anyhow::Result<Arc<dyn controller::Store>> {
    let path = match spec {
        None => data_dir.join("controller.db"),
        Some(s) if s.starts_with("sqlite:") => PathBuf::from(&s["sqlite:".len()..]),
        Some(s) => bail!("--store `{s}`: expected sqlite:PATH or etcd://HOST:PORT"),
    };
    let s = controller::SqliteStore::open(&path)
        .with_context(|| format!("opening the store {}", path.display()))?;
    Ok(Arc::new(s))
}

/// Runs `lachesis controller`.
pub fn run(a: ControllerArgs) -> anyhow::Result<()> {
    let cfg = controller::ControllerConfig::load(&a.config)?;
    let (store, election) = match a.store.as_deref() {
        Some(s) if s.starts_with("etcd://") => {
            let st = controller::etcd::EtcdStore::connect(s)?;
            let id = a.replica.clone().unwrap_or_else(|| {
                let host = std::fs::read_to_string("/etc/hostname")
                    .map(|h| h.trim().to_string())
                    .unwrap_or_else(|_| "controller".into());
                format!("{host}-{}", std::process::id())
            });
            let el = controller::etcd::Election::new(st.clone(), &id, cfg.controller.interval);
            (st as Arc<dyn controller::Store>, Some(el))
        }
        _ if a.replica.is_some() => bail!("--replica: only with --store etcd://"),
        s => (open_store(s, &cfg.controller.data_dir)?, None),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async {
        let c = controller::start_replica(&cfg, store, true, election).await?;
        eprintln!(
            "lachesis controller: API on http://{} (token in {}), console at {}, store {}, \
             scheme {}, every {} s",
            c.addr,
            c.token.file().display(),
            c.console_url(),
            c.service.store_description(),
            c.service.scheme_name(),
            cfg.controller.interval.as_secs_f64()
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
