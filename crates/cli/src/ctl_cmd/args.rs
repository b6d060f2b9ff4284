//! The arguments of `lachesis ctl`: where the node and the controller are, their tokens,
//! and the verb.

use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Arguments of `lachesis ctl`.
#[derive(Args, Debug)]
pub struct CtlArgs {
    /// The node's API address.
    #[arg(long, default_value = "127.0.0.1:10810", global = true)]
    pub(super) api: String,
    /// File holding the node's API token (default: `LACHESIS_TOKEN`, else
    /// `lachesis-data/api.token`).
    #[arg(long, global = true)]
    pub(super) token_file: Option<PathBuf>,
    /// The controller's API address (for `tenants`, `slo`, `plan`, `history`, `explain`;
    /// `tenants` asks the node unless this is given).
    #[arg(long, global = true)]
    pub(super) controller: Option<String>,
    /// File holding the controller's API token.
    #[arg(long, global = true)]
    pub(super) controller_token_file: Option<PathBuf>,
    /// Print the controller's JSON instead of a table.
    #[arg(long, global = true)]
    pub(super) json: bool,
    #[command(subcommand)]
    pub(super) verb: Verb,
}

#[derive(Subcommand, Debug)]
pub(super) enum Verb {
    /// Node, caches and tenants at a glance.
    Status,
    /// List the caches with their counters.
    Caches,
    /// One cache's counters.
    Stats {
        /// Cache id or name.
        cache: String,
    },
    /// Create a cache.
    CreateCache {
        /// Name.
        name: String,
        /// Capacity (`64MiB`, or bytes).
        #[arg(long)]
        size: String,
        /// Eviction policy spec.
        #[arg(long, default_value = "lru")]
        eviction: String,
        /// Write policy.
        #[arg(long, default_value = "write-back")]
        write_policy: String,
        /// Admission policy spec.
        #[arg(long)]
        admission: Option<String>,
    },
    /// Change a cache online (resize, switch policy, write or admission policy).
    Configure {
        /// Cache id or name.
        cache: String,
        /// New capacity.
        #[arg(long)]
        size: Option<String>,
        /// New eviction policy spec.
        #[arg(long)]
        eviction: Option<String>,
        /// New write policy.
        #[arg(long)]
        write_policy: Option<String>,
        /// New admission policy spec.
        #[arg(long)]
        admission: Option<String>,
    },
    /// Remove a cache (its dirty blocks are written back first).
    RemoveCache {
        /// Cache id or name.
        cache: String,
    },
    /// List the rules.
    Rules,
    /// Route requests to a cache.
    CreateRule {
        /// Export.
        #[arg(long)]
        export: String,
        /// Cache id or name.
        #[arg(long)]
        cache: String,
        /// Client address (default: every client).
        #[arg(long)]
        client: Option<String>,
        /// `read` or `write` (default: both).
        #[arg(long)]
        op: Option<String>,
        /// Byte range `START..END` (default: the whole export).
        #[arg(long)]
        range: Option<String>,
    },
    /// Remove a rule.
    RemoveRule {
        /// Rule id.
        id: u64,
    },
    /// A cache's live hit-ratio curve.
    Curve {
        /// Cache id or name.
        cache: String,
        /// Recent accesses only.
        #[arg(long)]
        window: bool,
        /// Points.
        #[arg(long, default_value_t = 20)]
        points: usize,
    },
    /// Per-tenant counters and latency (a node's), or with `--controller` the
    /// controller's tenants with their SLO status.
    Tenants,
    /// A tenant's SLO and status at the controller; `--set '{"latency_ms": 2.0}'` (or
    /// `null`) changes it.
    Slo {
        /// Tenant.
        tenant: String,
        /// New SLO as JSON (`{"latency_ms": 2.0}`, `{"p99_ms": 5}`, `{"iops": 5000}`,
        /// `null`).
        #[arg(long)]
        set: Option<String>,
        /// New class (`gold`, `silver`, `best-effort`).
        #[arg(long)]
        class: Option<String>,
    },
    /// The controller's last plan: sizes per volume and node, with reasons.
    Plan,
    /// Decisions kept by the controller.
    History {
        /// Only this tenant (or volume).
        #[arg(long)]
        tenant: Option<String>,
        /// Most entries.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Why a tenant has the sizes it has.
    Explain {
        /// Tenant.
        tenant: String,
    },
    /// Show, or set with `TENANT=WEIGHT ...`, the proportions of the node's backend (the
    /// weights are sent divided by their sum, as the node wants proportions summing to
    /// one).
    Proportions {
        /// `tenant=weight` pairs.
        set: Vec<String>,
    },
}
