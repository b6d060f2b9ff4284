//! The node's verbs: a summary table (`status`), and caches, rules, curves, tenants and
//! proportions through the node's API, printed as its JSON.

use super::args::Verb;
use super::call::{node_call, print};
use anyhow::{anyhow, bail, Context};
use api::client::NodeClient;
use api::node::{CachePatch, CreateCache, CreateRule, Op, Proportions};

/// Runs node verb `verb` against `api`.
pub(super) fn run(verb: Verb, api: &NodeClient) -> anyhow::Result<()> {
    let c = api;
    match verb {
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
                print(&node_call(
                    c,
                    "GET",
                    "/v1/proportions",
                    NodeClient::proportions,
                )?)
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
