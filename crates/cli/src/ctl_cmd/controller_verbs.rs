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
                "interval {} · layout {} · predicted fair speedup {:.3}",
                v.interval, v.layout, v.predicted_fair_speedup
            );
            println!(
                "{:<10} {:>8} {:<28} {:>8} {:<28} {:<8} {:>9} {:>9}",
                "volume", "L1 blk", "why", "L2 blk", "why", "policy", "pred ms", "target"
            );
            for tp in &v.tenants {
                let l2: u64 = tp.l2.iter().map(|p| p.size).sum();
                println!(
                    "{:<10} {:>8} {:<28} {:>8} {:<28} {:<8} {:>9.3} {:>9}",
                    tp.tenant,
                    tp.l1.size,
                    tp.l1.reason,
                    l2,
                    tp.l2.first().map_or("-", |p| p.reason.as_str()),
                    tp.eviction,
                    tp.predicted_latency_ms,
                    fo(tp.target_latency_ms, 3)
                );
            }
            for b in &v.boost {
                println!(
                    "hot tiers of {}: threshold {} (justify {:.2})",
                    b.node, b.threshold, b.justify
                );
            }
            for so in &v.scale_out {
                println!(
                    "scale-out {}: {} blocks, {} at the host (alpha {:.3}), predicted {:.3} ms",
                    so.tenant, so.total, so.host, so.alpha, so.predicted_ms
                );
            }
            for c in &v.consolidated {
                println!(
                    "consolidated {} on {}: {} MiB planned, {} MiB held, for {} ({}; \
                     predicted hit ratio {}, {} ms)",
                    c.image,
                    c.server,
                    mib_of(c.bytes),
                    c.applied.map_or("-".to_string(), mib_of),
                    c.readers.join(", "),
                    c.reason,
                    fo(c.predicted_hit_ratio, 3),
                    fo(c.predicted_ms, 3)
                );
            }
            for s in &v.infeasible {
                println!(
                    "infeasible: {} needs {:.3} ms, best allocation gives {:.3} ms ({})",
                    s.tenant, s.target_ms, s.predicted_ms, s.reason
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
                v.tenant,
                v.slo
                    .as_ref()
                    .map_or_else(|| "none".to_string(), Value::to_string),
                or_dash(v.class.as_deref()),
                v.scheme
            );
            for vol in &v.volumes {
                println!(
                    "volume {} on {} striped over {}:",
                    vol.volume,
                    vol.host,
                    vol.servers.join(", ")
                );
                let Some(p) = &vol.plan else {
                    println!("  not planned yet");
                    continue;
                };
                println!(
                    "  level 1 ({}): {} blocks — {}",
                    p.l1.node, p.l1.size, p.l1.reason
                );
                for part in &p.l2 {
                    println!(
                        "  level 2 ({}): {} blocks — {}",
                        part.node, part.size, part.reason
                    );
                }
                println!(
                    "  policy {} ({}); predicted {:.3} ms, target {} ms; measured {} ms",
                    p.eviction,
                    p.eviction_reason,
                    p.predicted_latency_ms,
                    fo(p.target_latency_ms, 3),
                    fo(vol.measured.as_ref().and_then(|m| m.latency_ms), 3)
                );
                if let Some(s) = &vol.shortfall {
                    println!(
                        "  SHORTFALL: needs {:.3} ms, best {:.3} ms ({})",
                        s.target_ms, s.predicted_ms, s.reason
                    );
                }
            }
        }
        _ => bail!("not a controller verb"),
    }
    Ok(())
}

/// Prints the controller's rows (an interval's rows) as a table. The sizes are those the
/// nodes hold after the interval's reconcile; where the plan wanted others, a line under
/// the row says so.
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
            mib_of(r.l1_applied),
            mib_of(r.l2_applied),
            met
        );
        if (r.l1_applied, r.l2_applied) != (r.l1_size, r.l2_size) {
            println!(
                "  PLANNED {}: L1 {} MiB, L2 {} MiB (the nodes hold the sizes above)",
                r.tenant,
                mib_of(r.l1_size),
                mib_of(r.l2_size)
            );
        }
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
