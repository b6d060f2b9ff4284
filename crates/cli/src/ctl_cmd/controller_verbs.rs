//! The controller's verbs (`tenants` with `--controller`, `slo`, `plan`, `history`,
//! `explain`): a table each, or the controller's JSON with `--json`.

use super::args::{CtlArgs, Verb};
use super::call::{controller_call, print};
use anyhow::{bail, Context};
use api::client::ControllerClient;
use api::controller::{HistoryEntry, Row, SetSlo, TenantHead, TenantView};
use serde_json::Value;

/// Runs controller verb `a.verb` against `api`.
pub(super) fn run(a: &CtlArgs, api: &ControllerClient) -> anyhow::Result<()> {
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

/// A JSON value as plain text (strings without quotes), for padding in tables.
fn t(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
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
