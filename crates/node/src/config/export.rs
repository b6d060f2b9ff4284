//! One `[[export]]`: an NBD export, the tenant owning it and exactly one backend (a file,
//! or upstream NBD exports striped, over TLS if asked), with its hot tier, the upstreams'
//! APIs for demotions, and who may connect.

use super::section::default_tls;
use crate::units::ByteSize;
use serde::Deserialize;
use std::path::PathBuf;

/// One `[[export]]`: a name, the tenant that owns it, and exactly one backend.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    /// The NBD export name.
    pub name: String,
    /// The tenant owning the export (default: the export's name); bandwidth shares and
    /// per-tenant metrics use it.
    #[serde(default)]
    pub tenant: Option<String>,
    /// A local file or block device.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// With `file`: create the file sparse with this size if it is missing.
    #[serde(default)]
    pub size: Option<ByteSize>,
    /// With `file`: create the image anew (sparse, `size` bytes) even if an earlier start
    /// used a file there that is now missing (default false: that is an error naming the
    /// file; see `IMAGES_FILE`).
    #[serde(default)]
    pub recreate_missing: bool,
    /// Upstream NBD exports (`host:port/name`); several are striped by `stripe_unit`.
    #[serde(default)]
    pub upstream: Vec<String>,
    /// TLS to the upstreams (`NBD_OPT_STARTTLS`): `off` (the default), `optional`
    /// (upgrade when the upstream offers it) or `required` (never go on in clear; an
    /// upstream that refuses is an error at start).
    #[serde(default = "default_tls")]
    pub upstream_tls: String,
    /// With `upstream_tls`: the CA certificates (PEM) that must have signed the
    /// upstreams' certificates (relative to `data_dir`).
    #[serde(default)]
    pub upstream_tls_ca: Option<PathBuf>,
    /// With `upstream_tls`: a client certificate chain (PEM) to present, with
    /// `upstream_tls_key` (relative to `data_dir`).
    #[serde(default)]
    pub upstream_tls_cert: Option<PathBuf>,
    /// With `upstream_tls_cert`: its private key (PEM).
    #[serde(default)]
    pub upstream_tls_key: Option<PathBuf>,
    /// Stripe unit for several upstreams (default 1 MiB).
    #[serde(default)]
    pub stripe_unit: Option<ByteSize>,
    /// Refuse writes.
    #[serde(default)]
    pub read_only: bool,
    /// A SANCACHE hot-chunk tier on a fast file between the caches and the backend.
    #[serde(default)]
    pub hot_tier: Option<HotTierSpec>,
    /// The HTTP API of each upstream (one per `upstream`, same order): where the clean
    /// blocks an exclusive cache evicts are demoted (see `demote`). Empty: not demoted.
    #[serde(default)]
    pub upstream_api: Vec<UpstreamApi>,
    /// Clients allowed to use the export, as CIDR blocks (`"10.0.0.0/8"`, `"::1/128"`, a
    /// bare address for one host, `"unix"` for the Unix socket); absent: every client.
    /// Others are refused with `NBD_REP_ERR_POLICY` and logged.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
}

/// One `upstream_api` entry: a level-2 node's API and its token.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamApi {
    /// `http://HOST:PORT`.
    pub url: String,
    /// A file holding the level-2 node's API token (relative to `data_dir`).
    pub token_file: PathBuf,
}

/// `[export.hot_tier]`: hot chunks of the export kept on a fast file.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HotTierSpec {
    /// The fast file (created with `size` if missing).
    pub file: PathBuf,
    /// Bytes of the fast file used for chunks.
    pub size: ByteSize,
    /// Chunk size (default 1 MiB).
    #[serde(default = "default_chunk")]
    pub chunk: ByteSize,
    /// Placement policy spec (default `adaptive`: MRFU with SANCACHE's adaptive threshold).
    #[serde(default = "default_tier_admission")]
    pub admission: String,
    /// Chunk migrations allowed per second (default 100; 0 = unlimited).
    #[serde(default = "default_migrations")]
    pub max_migrations_per_sec: u64,
}

fn default_chunk() -> ByteSize {
    ByteSize(1 << 20)
}
fn default_tier_admission() -> String {
    "adaptive".into()
}
fn default_migrations() -> u64 {
    100
}

impl ExportConfig {
    /// The owning tenant.
    pub fn tenant(&self) -> &str {
        self.tenant.as_deref().unwrap_or(&self.name)
    }
}
