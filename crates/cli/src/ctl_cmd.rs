//! `lachesis ctl`: a thin client of a node's HTTP API (see the `node` crate's `api`
//! module for the verbs). Prints the API's JSON, pretty; `status` prints a summary table.
//! A 4xx answer is shown with the node's reason and makes the command fail.
//!
//! The API's bearer token is taken from `--token-file FILE`, else from the
//! `LACHESIS_TOKEN` environment variable, else from `lachesis-data/api.token` (the file a
//! node started from `examples/node.toml` in the same directory generates).

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
    /// Per-tenant counters and latency.
    Tenants,
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

/// Runs `lachesis ctl`.
pub fn run(a: CtlArgs) -> anyhow::Result<()> {
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
