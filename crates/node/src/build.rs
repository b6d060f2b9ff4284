//! The node's state built from its configuration: each export's backend (a file; an
//! upstream NBD export, over TLS if asked; several upstreams striped; with exclusive
//! levels, the upstreams' APIs demoted to), behind the backend queue and the hot tier if
//! any; then the configured caches and rules.

use crate::config::{ExportConfig, NodeConfig};
use crate::error::NodeError;
use crate::hot_tier::{HotTier, HotTierConfig};
use crate::images::{open_or_create, IMAGES_FILE};
use crate::state::{ControlPlane, ExportInfo};
use crate::{auth, bandwidth, demote, upstream};
use std::path::Path;
use std::sync::Arc;

/// The backend of export `e` and its description.
async fn open_backend(
    cfg: &NodeConfig,
    e: &ExportConfig,
    demoter: &demote::Demoter,
    links: &upstream::UpstreamLinks,
) -> Result<(Arc<dyn cache::Backend>, String), NodeError> {
    let field = |msg: String| NodeError::Config {
        file: "node.toml".into(),
        msg: format!("export `{}`: {msg}", e.name),
    };
    if let Some(file) = &e.file {
        let path = cfg.path(file);
        let images = cfg.path(Path::new(IMAGES_FILE));
        let b = open_or_create(&path, e.size.map(|s| s.0), &images, e.recreate_missing)
            .map_err(field)?;
        return Ok((Arc::new(b), format!("file:{}", path.display())));
    }
    let mode: nbd::TlsMode = e.upstream_tls.parse().map_err(field)?;
    let tls = match (&e.upstream_tls_ca, mode) {
        (_, nbd::TlsMode::Off) => None,
        (None, _) => return Err(field("upstream_tls_ca: missing".into())),
        (Some(ca), mode) => {
            let client = match (&e.upstream_tls_cert, &e.upstream_tls_key) {
                (Some(c), Some(k)) => Some((cfg.path(c), cfg.path(k))),
                _ => None,
            };
            let client = client.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
            let t = nbd::ClientTls::from_pem_files(mode, &cfg.path(ca), client)
                .map_err(|err| field(format!("upstream_tls_ca / upstream_tls_cert: {err}")))?;
            Some((t, cfg.path(ca)))
        }
    };
    let mut members: Vec<Arc<dyn cache::Backend>> = Vec::new();
    for u in &e.upstream {
        let b = upstream::UpstreamBackend::connect_tls(
            u,
            tls.as_ref().map(|t| &t.0),
            cfg.node.upstream_wait,
        )
        .await
        .map_err(|err| match &tls {
            // Name the setting to check when the TLS handshake itself failed.
            Some((_, ca)) if err.to_string().contains("TLS handshake failed") => field(format!(
                "{err} (is the upstream's certificate signed by the CA in upstream_tls_ca = {}?)",
                ca.display()
            )),
            Some(_) if err.to_string().contains("refused NBD_OPT_STARTTLS") => {
                field(format!("{err} (upstream_tls = \"{}\")", e.upstream_tls))
            }
            _ => field(err.to_string()),
        })?;
        links.add(&e.name, b.link());
        members.push(Arc::new(b));
    }
    let unit = e.stripe_unit.map(|u| u.0).unwrap_or(1 << 20);
    if !e.upstream_api.is_empty() {
        let mut with_targets = Vec::new();
        for (j, (m, (u, api))) in members
            .into_iter()
            .zip(e.upstream.iter().zip(&e.upstream_api))
            .enumerate()
        {
            let token = auth::read_token(&cfg.path(&api.token_file))
                .map_err(|err| field(format!("upstream_api[{j}].token_file: {err}")))?;
            let (_, export) = upstream::parse_address(u).map_err(|err| field(err.to_string()))?;
            with_targets.push((
                m,
                demote::DemoteTarget {
                    url: api.url.clone(),
                    token,
                    export,
                },
            ));
        }
        members = demoter.add_export(&e.name, with_targets, unit)?;
    }
    if members.len() == 1 {
        return Ok((
            members.pop().expect("one member"),
            format!("nbd:{}", e.upstream[0]),
        ));
    }
    let striped =
        cache::StripedBackend::new(members, unit).map_err(|err| field(err.to_string()))?;
    Ok((
        Arc::new(striped),
        format!("stripe({}; unit {unit})", e.upstream.join(", ")),
    ))
}

/// Builds the node's state from `cfg`: backends, caches, rules.
pub async fn build(cfg: &NodeConfig) -> Result<ControlPlane, NodeError> {
    build_named(cfg, None, None).await
}

/// [`build`], named `default_name` when `cfg` gives no name, with the NBD server's
/// limits `nbd_limits` (for `/metrics`).
pub(crate) async fn build_named(
    cfg: &NodeConfig,
    default_name: Option<String>,
    nbd_limits: Option<Arc<nbd::Limits>>,
) -> Result<ControlPlane, NodeError> {
    if let Some(d) = &cfg.node.data_dir {
        std::fs::create_dir_all(d)?;
    }
    let bs = cfg.node.block_size.0 as usize;
    let blocks = (cfg.node.cache_size.0 / bs as u64) as usize;
    let mut b = ControlPlane::builder(blocks, bs, cfg.node.level, cfg.node.backend_depth)?
        .phantom_policies(cfg.node.phantom_policies.clone())
        .name(cfg.node.name.clone().or(default_name).unwrap_or_default())
        .data_dir(cfg.node.data_dir.clone())
        .metrics_client_labels(cfg.node.metrics_client_labels)
        .nbd_limits(nbd_limits);
    for e in &cfg.exports {
        let (backend, mut desc) = open_backend(cfg, e, b.demoter(), b.upstreams()).await?;
        // Below the hot tier: only what reaches the disk or upstream waits its turn.
        let mut backend: Arc<dyn cache::Backend> = Arc::new(bandwidth::QueuedBackend::new(
            backend,
            e.tenant(),
            b.bandwidth().clone(),
        ));
        let mut tier = None;
        if let Some(h) = &e.hot_tier {
            let at = |msg: String| NodeError::Config {
                file: "node.toml".into(),
                msg: format!("export `{}`.hot_tier: {msg}", e.name),
            };
            let path = cfg.path(&h.file);
            let images = cfg.path(Path::new(IMAGES_FILE));
            let fast =
                open_or_create(&path, Some(h.size.0), &images, e.recreate_missing).map_err(at)?;
            let t = Arc::new(
                HotTier::new(
                    backend,
                    Arc::new(fast),
                    HotTierConfig {
                        chunk_size: h.chunk.0,
                        capacity_chunks: h.size.0 / h.chunk.0,
                        admission: h.admission.clone(),
                        max_migrations_per_sec: h.max_migrations_per_sec,
                    },
                )
                .map_err(|err| at(err.to_string()))?,
            );
            desc = format!("{desc} + hot tier {} ({})", path.display(), h.admission);
            backend = t.clone();
            tier = Some(t);
        }
        let size = backend.size();
        b.add_export(
            ExportInfo {
                name: e.name.clone(),
                tenant: e.tenant().to_string(),
                size,
                read_only: e.read_only,
                backend: desc,
            },
            backend,
            tier,
        )?;
    }
    let state = b.build();
    for c in &cfg.caches {
        state
            .create_cache_at_start(c)
            .map_err(|err| NodeError::Config {
                file: "node.toml".into(),
                msg: format!("cache `{}`: {err}", c.name),
            })?;
    }
    for (i, r) in cfg.rules.iter().enumerate() {
        state.create_rule(r).map_err(|err| NodeError::Config {
            file: "node.toml".into(),
            msg: format!("rule[{i}]: {err}"),
        })?;
    }
    Ok(state)
}
