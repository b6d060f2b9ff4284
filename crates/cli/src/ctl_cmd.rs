//! `lachesis ctl`: a thin client of a node's HTTP API (see the `node` crate's `api`
//! module for the verbs). Prints the API's JSON, pretty; `status` prints a summary table.
//! A 4xx answer is shown with the node's reason and makes the command fail.
//!
//! The API's bearer token is taken from `--token-file FILE`, else from the
//! `LACHESIS_TOKEN` environment variable, else from `lachesis-data/api.token` (the file a
//! node started from `examples/node.toml` in the same directory generates).
//!
//! The controller's verbs (`tenants` with `--controller`, `slo`, `plan`, `history`,
//! `explain`) talk to `lachesis controller` at `--controller` (default `127.0.0.1:7070`)
//! with the token from `--controller-token-file`, else `LACHESIS_CONTROLLER_TOKEN`, else
//! `controller-data/controller.token`; they print a table, or the API's JSON with `--json`.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::path::PathBuf;

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
        /// New SLO as JSON (`{"latency_ms": 2.0}`, `{"iops": 5000}`, `null`).
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
    /// Show, or set with `TENANT=WEIGHT ...`, the bandwidth proportions.
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

struct Api {
    addr: String,
    token: Option<String>,
}

impl Api {
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let url = format!("http://{}{path}", self.addr);
        let mut req = ureq::request(method, &url);
        if let Some(t) = &self.token {
            req = req.set("authorization", &format!("Bearer {t}"));
        }
        let res = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        match res {
            Ok(r) => r
                .into_json()
                .with_context(|| format!("{method} {url}: reading the answer")),
            Err(ureq::Error::Status(code, r)) => {
                let reason = r
                    .into_json::<Value>()
                    .ok()
                    .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                    .unwrap_or_default();
                if code == 401 {
                    bail!(
                        "{method} {path}: 401: {reason} (give the node's api.token with \
                         --token-file FILE or LACHESIS_TOKEN)"
                    )
                }
                bail!("{method} {path}: {code}: {reason}")
            }
            Err(e) => bail!("{method} {url}: {e} (is `lachesis serve` running?)"),
        }
    }
}

fn print(v: &Value) {
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

fn status(api: &Api) -> anyhow::Result<()> {
    let node = api.call("GET", "/v1/node", None)?;
    let caches = api.call("GET", "/v1/caches", None)?;
    let tenants = api.call("GET", "/v1/tenants", None)?;
    println!(
        "node level {} · block {} B · {} of {} blocks allocated · up {:.0} s",
        t(&node["level"]),
        t(&node["block_size"]),
        t(&node["allocated_blocks"]),
        t(&node["total_blocks"]),
        node["uptime_seconds"].as_f64().unwrap_or(0.0)
    );
    println!(
        "\n{:<4} {:<16} {:>10} {:>10} {:>8} {:>7}  {:<10} {:<12}",
        "id", "cache", "capacity", "resident", "dirty", "hit %", "eviction", "write policy"
    );
    for c in caches.as_array().into_iter().flatten() {
        let s = &c["stats"];
        println!(
            "{:<4} {:<16} {:>10} {:>10} {:>8} {:>7.1}  {:<10} {:<12}",
            t(&c["id"]),
            t(&c["name"]),
            t(&s["capacity"]),
            t(&s["resident"]),
            t(&s["dirty"]),
            100.0 * c["hit_ratio"].as_f64().unwrap_or(0.0),
            t(&s["eviction"]),
            t(&s["write_policy"])
        );
    }
    println!(
        "\n{:<12} {:<12} {:<16} {:>10} {:>10} {:>7} {:>8} {:>8}",
        "tenant", "export", "client", "reads", "writes", "hit %", "p50 µs", "p99 µs"
    );
    for x in tenants.as_array().into_iter().flatten() {
        println!(
            "{:<12} {:<12} {:<16} {:>10} {:>10} {:>7.1} {:>8} {:>8}",
            t(&x["tenant"]),
            t(&x["export"]),
            t(&x["client"]),
            t(&x["reads"]),
            t(&x["writes"]),
            100.0 * x["hit_ratio"].as_f64().unwrap_or(0.0),
            t(&x["latency"]["read"]["p50_us"]),
            t(&x["latency"]["read"]["p99_us"])
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

/// Prints the controller's rows (`IntervalReport` rows) as a table.
pub fn print_rows(rows: &[Value]) {
    println!(
        "{:<10} {:<10} {:<22} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8}  {:<5}",
        "volume",
        "tenant",
        "SLO",
        "lat ms",
        "target",
        "L1 hit",
        "L2 hit",
        "L1 MiB",
        "L2 MiB",
        "met"
    );
    for r in rows {
        let met = match r["slo_met"].as_bool() {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        println!(
            "{:<10} {:<10} {:<22} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8}  {:<5}",
            t(&r["tenant"]),
            t(&r["owner"]),
            t(&r["slo"]),
            f(&r["latency_ms"], 3),
            f(&r["target_ms"], 3),
            f(&r["l1_hit_ratio"], 3),
            f(&r["l2_hit_ratio"], 3),
            mib(&r["l1_size"]),
            mib(&r["l2_size"]),
            met
        );
    }
}

fn controller_verb(a: &CtlArgs, api: &Api) -> anyhow::Result<Option<Value>> {
    let out = match &a.verb {
        Verb::Tenants if a.controller.is_some() => {
            let v = api.call("GET", "/v1/tenants", None)?;
            if !a.json {
                let rows: Vec<Value> = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|t| t["status"].as_array().cloned().unwrap_or_default())
                    .collect();
                for t0 in v.as_array().into_iter().flatten() {
                    if t0["status"].as_array().is_none_or(|s| s.is_empty()) {
                        println!("{}: no interval measured yet", t(&t0["name"]));
                    }
                }
                print_rows(&rows);
                return Ok(None);
            }
            v
        }
        Verb::Slo { tenant, set, class } => {
            if set.is_some() || class.is_some() {
                let cur = api.call("GET", &format!("/v1/tenants/{tenant}"), None)?;
                let slo: Value = match set {
                    Some(s) => {
                        serde_json::from_str(s).with_context(|| format!("--set `{s}`: not JSON"))?
                    }
                    None => cur["slo"].clone(),
                };
                api.call(
                    "PUT",
                    &format!("/v1/tenants/{tenant}/slo"),
                    Some(json!({"slo": slo, "class": class})),
                )?;
            }
            let v = api.call("GET", &format!("/v1/tenants/{tenant}"), None)?;
            if !a.json {
                println!(
                    "tenant {} · class {} · SLO {}",
                    t(&v["name"]),
                    t(&v["class"]),
                    v["slo"]
                );
                print_rows(v["status"].as_array().map(Vec::as_slice).unwrap_or(&[]));
                return Ok(None);
            }
            v
        }
        Verb::Plan => {
            let v = api.call("GET", "/v1/plan", None)?;
            if !a.json {
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
                return Ok(None);
            }
            v
        }
        Verb::History { tenant, limit } => {
            let q = match tenant {
                Some(t) => format!("/v1/history?tenant={t}&limit={limit}"),
                None => format!("/v1/history?limit={limit}"),
            };
            let v = api.call("GET", &q, None)?;
            if !a.json {
                println!(
                    "{:>8} {:<10} {:>9} {:>9} {:>8} {:>8}  why",
                    "interval", "volume", "lat ms", "target", "L1 MiB", "L2 MiB"
                );
                for h in v.as_array().into_iter().flatten() {
                    let d = &h["detail"];
                    if h["tenant"] == "*" {
                        let n = d["actions"].as_array().map_or(0, Vec::len);
                        println!(
                            "{:>8} {:<10} {} node changes",
                            t(&h["interval"]),
                            "(plan)",
                            n
                        );
                        continue;
                    }
                    println!(
                        "{:>8} {:<10} {:>9} {:>9} {:>8} {:>8}  {} / {}",
                        t(&h["interval"]),
                        t(&h["tenant"]),
                        f(&d["latency_ms"], 3),
                        f(&d["target_ms"], 3),
                        mib(&d["l1_size"]),
                        mib(&d["l2_size"]),
                        t(&d["l1_reason"]),
                        t(&d["l2_reason"])
                    );
                }
                return Ok(None);
            }
            v
        }
        Verb::Explain { tenant } => {
            let v = api.call("GET", &format!("/v1/explain/{tenant}"), None)?;
            if !a.json {
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
                return Ok(None);
            }
            v
        }
        _ => return Ok(Some(Value::Null)),
    };
    Ok(Some(out))
}

/// Runs `lachesis ctl`.
pub fn run(a: CtlArgs) -> anyhow::Result<()> {
    let for_controller = matches!(
        a.verb,
        Verb::Slo { .. } | Verb::Plan | Verb::History { .. } | Verb::Explain { .. }
    ) || (matches!(a.verb, Verb::Tenants) && a.controller.is_some());
    if for_controller {
        let api = Api {
            addr: a
                .controller
                .clone()
                .unwrap_or_else(|| "127.0.0.1:7070".into()),
            token: controller_token(a.controller_token_file.clone())?,
        };
        if let Some(v) = controller_verb(&a, &api)? {
            print(&v);
        }
        return Ok(());
    }
    let api = Api {
        addr: a.api,
        token: token(a.token_file)?,
    };
    let out = match a.verb {
        Verb::Status => return status(&api),
        Verb::Caches => api.call("GET", "/v1/caches", None)?,
        Verb::Stats { cache } => api.call("GET", &format!("/v1/caches/{cache}"), None)?,
        Verb::CreateCache {
            name,
            size,
            eviction,
            write_policy,
            admission,
        } => api.call(
            "POST",
            "/v1/caches",
            Some(json!({"name": name, "size": size, "eviction": eviction,
                        "write_policy": write_policy, "admission": admission})),
        )?,
        Verb::Configure {
            cache,
            size,
            eviction,
            write_policy,
            admission,
        } => {
            let mut b = serde_json::Map::new();
            for (k, v) in [
                ("size", size),
                ("eviction", eviction),
                ("write_policy", write_policy),
                ("admission", admission),
            ] {
                if let Some(v) = v {
                    b.insert(k.into(), Value::String(v));
                }
            }
            if b.is_empty() {
                bail!("configure: give at least one of --size, --eviction, --write-policy, --admission");
            }
            api.call(
                "PATCH",
                &format!("/v1/caches/{cache}"),
                Some(Value::Object(b)),
            )?
        }
        Verb::RemoveCache { cache } => api.call("DELETE", &format!("/v1/caches/{cache}"), None)?,
        Verb::Rules => api.call("GET", "/v1/rules", None)?,
        Verb::CreateRule {
            export,
            cache,
            client,
            op,
            range: r,
        } => {
            let r = r.as_deref().map(range).transpose()?;
            api.call(
                "POST",
                "/v1/rules",
                Some(json!({"export": export, "cache": cache, "client": client, "op": op, "range": r})),
            )?
        }
        Verb::RemoveRule { id } => api.call("DELETE", &format!("/v1/rules/{id}"), None)?,
        Verb::Curve {
            cache,
            window,
            points,
        } => api.call(
            "GET",
            &format!("/v1/caches/{cache}/curve?window={window}&points={points}"),
            None,
        )?,
        Verb::Tenants => api.call("GET", "/v1/tenants", None)?,
        Verb::Slo { .. } | Verb::Plan | Verb::History { .. } | Verb::Explain { .. } => {
            bail!("answered by the controller above")
        }
        Verb::Proportions { set } => {
            if set.is_empty() {
                api.call("GET", "/v1/proportions", None)?
            } else {
                let mut m = serde_json::Map::new();
                for kv in set {
                    let (k, v) = kv
                        .split_once('=')
                        .with_context(|| format!("`{kv}`: expected TENANT=WEIGHT"))?;
                    let w: f64 = v
                        .parse()
                        .with_context(|| format!("`{kv}`: weight is not a number"))?;
                    m.insert(k.into(), json!(w));
                }
                api.call("PUT", "/v1/proportions", Some(Value::Object(m)))?
            }
        }
    };
    print(&out);
    Ok(())
}
