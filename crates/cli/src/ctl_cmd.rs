//! `lachesis ctl`: a thin client of a node's HTTP API (see the `node` crate's `api`
//! module for the verbs), through the `api` crate's typed [`NodeClient`] (each call tried
//! once). Prints the API's JSON, pretty; `status` prints a summary table. A 4xx answer is
//! shown with the node's reason and makes the command fail.
//!
//! The API's bearer token is taken from `--token-file FILE`, else from the
//! `LACHESIS_TOKEN` environment variable, else from `lachesis-data/api.token` (the file a
//! node started from `examples/node.toml` in the same directory generates).
//!
//! The controller's verbs (`tenants` with `--controller`, `slo`, `plan`, `history`,
//! `explain`) talk to `lachesis controller` at `--controller` (default `127.0.0.1:7070`)
//! with the token from `--controller-token-file`, else `LACHESIS_CONTROLLER_TOKEN`, else
//! `controller-data/controller.token`, through the `api` crate's [`ControllerClient`];
//! they print a table, or the API's JSON with `--json`.

use anyhow::{anyhow, bail, Context};
use api::client::{CallError, ControllerClient, NodeClient};
use api::controller::{HistoryEntry, Row, SetSlo, TenantHead, TenantView};
use api::node::{CachePatch, CreateCache, CreateRule, Op, Proportions};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// Where `ctl` looks for the token when neither `--token-file` nor `LACHESIS_TOKEN` gives it.
const DEFAULT_TOKEN_FILE: &str = "lachesis-data/api.token";

/// Arguments of `lachesis ctl`.
#[derive(Args, Debug)]
pub struct CtlArgs {
    /// The node's API address.
    #[arg(long, default_value = "127.0.0.1:10810", global = true)]
    api: String,
    /// File holding the node's API token (default: `LACHESIS_TOKEN`, else
    /// `lachesis-data/api.token`).
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
    /// The controller's API address (for `tenants`, `slo`, `plan`, `history`, `explain`;
    /// `tenants` asks the node unless this is given).
    #[arg(long, global = true)]
    controller: Option<String>,
    /// File holding the controller's API token.
    #[arg(long, global = true)]
    controller_token_file: Option<PathBuf>,
    /// Print the controller's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Subcommand, Debug)]
enum Verb {
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

/// The token from `--token-file`, `LACHESIS_TOKEN` or the default file, if any.
fn token(file: Option<PathBuf>) -> anyhow::Result<Option<String>> {
    let read = |f: &PathBuf| -> anyhow::Result<String> {
        let t = std::fs::read_to_string(f)
            .with_context(|| format!("reading the API token from {}", f.display()))?;
        Ok(t.trim().to_string())
    };
    if let Some(f) = file {
        return read(&f).map(Some);
    }
    if let Ok(t) = std::env::var("LACHESIS_TOKEN") {
        return Ok(Some(t.trim().to_string()));
    }
    let f = PathBuf::from(DEFAULT_TOKEN_FILE);
    if f.exists() {
        return read(&f).map(Some);
    }
    Ok(None)
}

/// How long one call may take: long, since a removal or a resize writes dirty blocks back
/// before the node answers, and a person can interrupt.
const CALL_TIMEOUT: Duration = Duration::from_secs(3600);

/// A failed call as `ctl` reports it: the verb, the path and the peer's reason.
fn failed(method: &str, base: &str, path: &str, e: CallError) -> anyhow::Error {
    match &e {
        CallError::Status { status: 401, .. } => anyhow!(
            "{method} {path}: 401: {} (give the node's api.token with --token-file FILE or \
             LACHESIS_TOKEN)",
            e.reason()
        ),
        CallError::Status { status, .. } => anyhow!("{method} {path}: {status}: {}", e.reason()),
        CallError::Transport(m) => {
            anyhow!("{method} {base}{path}: {m} (is `lachesis serve` running?)")
        }
        CallError::Contract { .. } => anyhow!("{method} {base}{path}: reading the answer: {e}"),
    }
}

/// Runs one node call, naming `method path` if it fails.
fn node_call<T>(
    c: &NodeClient,
    method: &str,
    path: &str,
    f: impl FnOnce(&NodeClient) -> Result<T, CallError>,
) -> anyhow::Result<T> {
    f(c).map_err(|e| failed(method, &c.base, path, e))
}

/// Runs one controller call, naming `method path` if it fails.
fn controller_call<T>(
    c: &ControllerClient,
    method: &str,
    path: &str,
    f: impl FnOnce(&ControllerClient) -> Result<T, CallError>,
) -> anyhow::Result<T> {
    f(c).map_err(|e| failed(method, &c.base, path, e))
}

fn print(v: &impl Serialize) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// A JSON value as plain text (strings without quotes), for padding in tables.
fn t(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn status(api: &NodeClient) -> anyhow::Result<()> {
    let node = node_call(api, "GET", "/v1/node", NodeClient::node_info)?;
    let caches = node_call(api, "GET", "/v1/caches", NodeClient::caches)?;
    let tenants = node_call(api, "GET", "/v1/tenants", NodeClient::tenants)?;
    println!(
        "node level {} · block {} B · {} of {} blocks allocated · up {:.0} s",
        node.level, node.block_size, node.allocated_blocks, node.total_blocks, node.uptime_seconds
    );
    println!(
        "\n{:<4} {:<16} {:>10} {:>10} {:>8} {:>7}  {:<10} {:<12}",
        "id", "cache", "capacity", "resident", "dirty", "hit %", "eviction", "write policy"
    );
    for c in &caches {
        let s = &c.stats;
        println!(
            "{:<4} {:<16} {:>10} {:>10} {:>8} {:>7.1}  {:<10} {:<12}",
            c.id,
            c.name,
            s.capacity,
            s.resident,
            s.dirty,
            100.0 * c.hit_ratio,
            s.eviction,
            s.write_policy
        );
    }
    println!(
        "\n{:<12} {:<12} {:<16} {:>10} {:>10} {:>7} {:>8} {:>8}",
        "tenant", "export", "client", "reads", "writes", "hit %", "p50 µs", "p99 µs"
    );
    for x in &tenants {
        println!(
            "{:<12} {:<12} {:<16} {:>10} {:>10} {:>7.1} {:>8} {:>8}",
            x.tenant,
            x.export,
            x.client,
            x.reads,
            x.writes,
            100.0 * x.hit_ratio,
            x.latency.read.p50_us,
            x.latency.read.p99_us
        );
    }
    Ok(())
}

fn range(s: &str) -> anyhow::Result<(u64, u64)> {
    let (a, b) = s
        .split_once("..")
        .with_context(|| format!("--range `{s}`: expected START..END"))?;
    let p = |x: &str| units::parse_bytes(x).map_err(anyhow::Error::msg);
    Ok((p(a)?, p(b)?))
}

/// `--size`: bytes with an optional unit.
fn size(s: &str) -> anyhow::Result<units::ByteSize> {
    units::parse_bytes(s)
        .map(units::ByteSize)
        .map_err(|e| anyhow!("--size: {e}"))
}

/// `--op`: `read` or `write`.
fn op(s: &str) -> anyhow::Result<Op> {
    match s {
        "read" => Ok(Op::Read),
        "write" => Ok(Op::Write),
        _ => bail!("--op `{s}`: expected read or write"),
    }
}

/// The controller's token from the flag, `LACHESIS_CONTROLLER_TOKEN` or the default file.
fn controller_token(file: Option<PathBuf>) -> anyhow::Result<Option<String>> {
    if let Some(f) = file {
        let t = std::fs::read_to_string(&f)
            .with_context(|| format!("reading the controller token from {}", f.display()))?;
        return Ok(Some(t.trim().to_string()));
    }
    if let Ok(t) = std::env::var("LACHESIS_CONTROLLER_TOKEN") {
        return Ok(Some(t.trim().to_string()));
    }
    let f = PathBuf::from("controller-data/controller.token");
    Ok(std::fs::read_to_string(&f)
        .ok()
        .map(|t| t.trim().to_string()))
}

fn f(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn mib(v: &Value) -> String {
    v.as_f64()
        .map_or("-".into(), |x| format!("{:.1}", x / 1048576.0))
}

/// `x` with `digits` decimals, `-` for none.
fn fo(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// Bytes as MiB with one decimal.
fn mib_of(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1048576.0)
}

/// An optional string, `-` for none.
fn or_dash(s: Option<&str>) -> String {
    s.unwrap_or("-").to_string()
}

/// Prints the controller's rows (an interval's rows) as a table.
pub fn print_rows(rows: &[Row]) {
    println!(
        "{:<10} {:<10} {:<22} {:>9} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8}  {:<5}",
        "volume",
        "tenant",
        "SLO",
        "lat ms",
        "p99 ms",
        "target",
        "L1 hit",
        "L2 hit",
        "L1 MiB",
        "L2 MiB",
        "met"
    );
    for r in rows {
        let met = match r.slo_met {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        println!(
            "{:<10} {:<10} {:<22} {:>9} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8}  {:<5}",
            r.tenant,
            r.owner,
            or_dash(r.slo.as_deref()),
            fo(r.latency_ms, 3),
            fo(r.p99_ms, 3),
            fo(r.target_ms, 3),
            fo(Some(r.l1_hit_ratio), 3),
            fo(Some(r.l2_hit_ratio), 3),
            mib_of(r.l1_size),
            mib_of(r.l2_size),
            met
        );
        if let Some(why) = &r.failing {
            println!("  FAILING {}: {why}", r.tenant);
        }
    }
}

/// A tenant's SLO as JSON text (`null` for none).
fn slo_text(t: &TenantView<TenantHead>) -> String {
    t.spec
        .slo
        .as_ref()
        .map_or_else(|| "null".to_string(), Value::to_string)
}

fn controller_verb(a: &CtlArgs, api: &ControllerClient) -> anyhow::Result<()> {
    match &a.verb {
        Verb::Tenants => {
            let v = controller_call(api, "GET", "/v1/tenants", ControllerClient::tenants)?;
            if a.json {
                print(&v);
                return Ok(());
            }
            let rows: Vec<Row> = v.iter().flat_map(|t| t.status.iter().cloned()).collect();
            for t0 in &v {
                if t0.status.is_empty() {
                    println!("{}: no interval measured yet", t0.spec.name);
                }
            }
            print_rows(&rows);
        }
        Verb::Slo { tenant, set, class } => {
            let path = format!("/v1/tenants/{tenant}");
            if set.is_some() || class.is_some() {
                let cur = controller_call(api, "GET", &path, |c| c.tenant(tenant))?;
                let slo: Option<Value> = match set {
                    Some(s) => {
                        serde_json::from_str(s).with_context(|| format!("--set `{s}`: not JSON"))?
                    }
                    None => cur.spec.slo.clone(),
                };
                let body = SetSlo {
                    slo,
                    class: class.clone(),
                };
                controller_call(api, "PUT", &format!("{path}/slo"), |c| {
                    c.set_slo(tenant, &body)
                })?;
            }
            let v = controller_call(api, "GET", &path, |c| c.tenant(tenant))?;
            if a.json {
                print(&v);
                return Ok(());
            }
            println!(
                "tenant {} · class {} · SLO {}",
                v.spec.name,
                or_dash(v.spec.class.as_deref()),
                slo_text(&v)
            );
            print_rows(&v.status);
        }
        Verb::Plan => {
            let v = controller_call(api, "GET", "/v1/plan", ControllerClient::plan)?;
            if a.json {
                print(&v);
                return Ok(());
            }
            println!(
                "interval {} · predicted fair speedup {}",
                t(&v["interval"]),
                f(&v["predicted_fair_speedup"], 3)
            );
            println!(
                "{:<10} {:>8} {:<28} {:>8} {:<28} {:<8} {:>9} {:>9}",
                "volume", "L1 blk", "why", "L2 blk", "why", "policy", "pred ms", "target"
            );
            for tp in v["tenants"].as_array().into_iter().flatten() {
                let l2: u64 = tp["l2"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p["size"].as_u64())
                    .sum();
                println!(
                    "{:<10} {:>8} {:<28} {:>8} {:<28} {:<8} {:>9} {:>9}",
                    t(&tp["tenant"]),
                    t(&tp["l1"]["size"]),
                    t(&tp["l1"]["reason"]["kind"]),
                    l2,
                    t(&tp["l2"][0]["reason"]["kind"]),
                    t(&tp["eviction"]),
                    f(&tp["predicted_latency_ms"], 3),
                    f(&tp["target_latency_ms"], 3)
                );
            }
            for s in v["infeasible"].as_array().into_iter().flatten() {
                println!(
                    "infeasible: {} needs {} ms, best allocation gives {} ms ({})",
                    t(&s["tenant"]),
                    f(&s["target_ms"], 3),
                    f(&s["predicted_ms"], 3),
                    t(&s["reason"])
                );
            }
        }
        Verb::History { tenant, limit } => {
            let v: Vec<HistoryEntry> = controller_call(api, "GET", "/v1/history", |c| {
                c.history(tenant.as_deref(), *limit)
            })?;
            if a.json {
                print(&v);
                return Ok(());
            }
            println!(
                "{:>8} {:<10} {:>9} {:>9} {:>8} {:>8}  why",
                "interval", "volume", "lat ms", "target", "L1 MiB", "L2 MiB"
            );
            for h in &v {
                let d = &h.detail;
                if h.tenant == "*" {
                    let n = d["actions"].as_array().map_or(0, Vec::len);
                    println!("{:>8} {:<10} {} node changes", h.interval, "(plan)", n);
                    continue;
                }
                println!(
                    "{:>8} {:<10} {:>9} {:>9} {:>8} {:>8}  {} / {}",
                    h.interval,
                    h.tenant,
                    f(&d["latency_ms"], 3),
                    f(&d["target_ms"], 3),
                    mib(&d["l1_size"]),
                    mib(&d["l2_size"]),
                    t(&d["l1_reason"]),
                    t(&d["l2_reason"])
                );
            }
        }
        Verb::Explain { tenant } => {
            let v = controller_call(api, "GET", &format!("/v1/explain/{tenant}"), |c| {
                c.explain(tenant)
            })?;
            if a.json {
                print(&v);
                return Ok(());
            }
            println!(
                "tenant {} · SLO {} · class {} · scheme {}",
                t(&v["tenant"]),
                v["slo"],
                t(&v["class"]),
                t(&v["scheme"])
            );
            for vol in v["volumes"].as_array().into_iter().flatten() {
                let p = &vol["plan"];
                println!(
                    "volume {} on {} striped over {}:",
                    t(&vol["volume"]),
                    t(&vol["host"]),
                    vol["servers"]
                );
                println!(
                    "  level 1: {} blocks — {}",
                    t(&p["l1"]["size"]),
                    p["l1"]["reason"]
                );
                for part in p["l2"].as_array().into_iter().flatten() {
                    println!(
                        "  level 2 (server #{}): {} blocks — {}",
                        t(&part["node"]),
                        t(&part["size"]),
                        part["reason"]
                    );
                }
                println!(
                    "  policy {} ({}); predicted {} ms, target {} ms; measured {} ms",
                    t(&p["eviction"]),
                    t(&p["eviction_reason"]),
                    f(&p["predicted_latency_ms"], 3),
                    f(&p["target_latency_ms"], 3),
                    f(&vol["measured"]["latency_ms"], 3)
                );
                if !vol["shortfall"].is_null() {
                    println!("  SHORTFALL: {}", vol["shortfall"]);
                }
            }
        }
        _ => bail!("not a controller verb"),
    }
    Ok(())
}

/// Runs `lachesis ctl`.
pub fn run(a: CtlArgs) -> anyhow::Result<()> {
    let for_controller = matches!(
        a.verb,
        Verb::Slo { .. } | Verb::Plan | Verb::History { .. } | Verb::Explain { .. }
    ) || (matches!(a.verb, Verb::Tenants) && a.controller.is_some());
    if for_controller {
        let addr = a
            .controller
            .clone()
            .unwrap_or_else(|| "127.0.0.1:7070".into());
        let token = controller_token(a.controller_token_file.clone())?;
        let api = ControllerClient::new(&addr, token.as_deref(), CALL_TIMEOUT);
        return controller_verb(&a, &api);
    }
    let token = token(a.token_file)?;
    let api = NodeClient::new(&a.api, token.as_deref(), CALL_TIMEOUT).once();
    let c = &api;
    match a.verb {
        Verb::Status => return status(c),
        Verb::Caches => print(&node_call(c, "GET", "/v1/caches", NodeClient::caches)?),
        Verb::Stats { cache } => {
            let path = format!("/v1/caches/{cache}");
            print(&node_call(c, "GET", &path, |c| c.cache(&cache))?)
        }
        Verb::CreateCache {
            name,
            size: sz,
            eviction,
            write_policy,
            admission,
        } => {
            let spec = CreateCache {
                name,
                size: size(&sz)?,
                eviction: Some(eviction),
                write_policy: Some(write_policy),
                admission,
                ..Default::default()
            };
            print(&node_call(c, "POST", "/v1/caches", |c| {
                c.create_cache(&spec)
            })?)
        }
        Verb::Configure {
            cache,
            size: sz,
            eviction,
            write_policy,
            admission,
        } => {
            let patch = CachePatch {
                size: sz.as_deref().map(size).transpose()?,
                eviction,
                write_policy,
                admission,
                ..Default::default()
            };
            if patch == CachePatch::default() {
                bail!("configure: give at least one of --size, --eviction, --write-policy, --admission");
            }
            let path = format!("/v1/caches/{cache}");
            print(&node_call(c, "PATCH", &path, |c| {
                c.configure_cache(&cache, &patch)
            })?)
        }
        Verb::RemoveCache { cache } => {
            let path = format!("/v1/caches/{cache}");
            print(&node_call(c, "DELETE", &path, |c| c.remove_cache(&cache))?)
        }
        Verb::Rules => print(&node_call(c, "GET", "/v1/rules", NodeClient::rules)?),
        Verb::CreateRule {
            export,
            cache,
            client,
            op: o,
            range: r,
        } => {
            let rule = CreateRule {
                export,
                cache,
                client,
                op: o.as_deref().map(op).transpose()?,
                range: r.as_deref().map(range).transpose()?,
            };
            print(&node_call(c, "POST", "/v1/rules", |c| {
                c.create_rule(&rule)
            })?)
        }
        Verb::RemoveRule { id } => {
            let path = format!("/v1/rules/{id}");
            print(&node_call(c, "DELETE", &path, |c| c.remove_rule(id))?)
        }
        Verb::Curve {
            cache,
            window,
            points,
        } => {
            let path = format!("/v1/caches/{cache}/curve");
            print(&node_call(c, "GET", &path, |c| {
                c.curve(&cache, window, points)
            })?)
        }
        Verb::Tenants => print(&node_call(c, "GET", "/v1/tenants", NodeClient::tenants)?),
        Verb::Slo { .. } | Verb::Plan | Verb::History { .. } | Verb::Explain { .. } => {
            bail!("answered by the controller above")
        }
        Verb::Proportions { set } => {
            if set.is_empty() {
                print(&node_call(c, "GET", "/v1/proportions", |c| {
                    c.get_json("/v1/proportions")
                })?)
            } else {
                let mut m = Proportions::new();
                for kv in set {
                    let (k, v) = kv
                        .split_once('=')
                        .with_context(|| format!("`{kv}`: expected TENANT=WEIGHT"))?;
                    let w: f64 = v
                        .parse()
                        .with_context(|| format!("`{kv}`: weight is not a number"))?;
                    m.insert(k.into(), w);
                }
                // Weights to proportions; a bad weight goes as it is, for the node to name.
                let sum: f64 = m.values().sum();
                if m.values().all(|w| w.is_finite() && *w > 0.0) {
                    for w in m.values_mut() {
                        *w /= sum;
                    }
                }
                print(&node_call(c, "PUT", "/v1/proportions", |c| {
                    c.set_proportions(&m)
                })?)
            }
        }
    }
    Ok(())
}
