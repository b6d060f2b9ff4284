//! Where each volume lives: the tenants' volumes placed on the registry's nodes as the
//! `control` topology ([`topology`]). A volume exported on several hosts is one
//! `control` tenant, one [`PlacedVolume`], per host; nodes are in name order per level and a
//! node that is down has capacity 0, so the step plans nothing on it; a storage node
//! that reports a hot tier has one in the topology (its threshold is planned); a volume
//! reading an image is inclusive and read-only whatever the defaults. The poll, the
//! reconcile and the views all name volumes and nodes through these.

use crate::config::{ControllerSection, TenantConfig};
use crate::registry::NodeEntry;
use control::{Levels, Node, ServiceTimes, Tenant, Topology};
use std::collections::BTreeMap;

/// A volume placed on nodes as one `control` tenant: a volume exported on several hosts
/// is one of these per host (the first named as the volume, the others `VOLUME@HOST`).
#[derive(Clone, Debug, Default)]
pub struct PlacedVolume {
    /// The `control` tenant's name.
    pub name: String,
    /// The volume's name: its export and its cache on every node.
    pub cache: String,
    /// Its owner.
    pub owner: String,
    /// Level-1 node.
    pub host: String,
    /// Level-2 nodes.
    pub servers: Vec<String>,
    /// Whether its levels are exclusive (its caches are created so).
    pub exclusive: bool,
    /// Boosting on for it (its export's hot tiers place chunks).
    pub boost: bool,
    /// Its caches' write policy (`None`: the node's default).
    pub write_policy: Option<String>,
    /// Scaled out over its host and servers ([`crate::scaleout`]; its levels exclusive).
    pub scale_out: bool,
    /// The read-only image it reads ([`crate::consolidate`]): its level 2 is the image's
    /// consolidated cache, its levels inclusive and its caches read-only.
    pub image: Option<String>,
}

/// The `control` topology of the known nodes and the tenants' volumes. Nodes are in name
/// order per level; a down node has capacity 0. Volumes naming a node the registry does
/// not know are left out (and logged) unless `strict`, where they are kept so
/// validation names them.
pub fn topology(
    cfg: &ControllerSection,
    tenants: &[TenantConfig],
    nodes: &BTreeMap<String, NodeEntry>,
    strict: bool,
) -> (Topology, Vec<PlacedVolume>) {
    let bs = cfg.block_size.0;
    let level = |l: u8| -> Vec<Node> {
        nodes
            .values()
            .filter(|n| n.level == l)
            .map(|n| Node {
                name: n.name.clone(),
                capacity: n.capacity(bs),
                hot_tier: !n.tiers.is_empty(),
            })
            .collect()
    };
    let hosts = level(1);
    let servers = level(2);
    let mut out = Vec::new();
    let mut vols = Vec::new();
    for t in tenants {
        let class = t.class().unwrap_or_default();
        for v in &t.volumes {
            for (k, vhost) in std::iter::once(&v.host).chain(&v.hosts).enumerate() {
                let cname = if k == 0 {
                    v.name.clone()
                } else {
                    format!("{}@{vhost}", v.name)
                };
                let host = hosts.iter().position(|h| &h.name == vhost);
                let srv: Option<Vec<usize>> = v
                    .servers
                    .iter()
                    .map(|s| servers.iter().position(|x| &x.name == s))
                    .collect();
                let (host, srv) = match (host, srv) {
                    (Some(h), Some(s)) => (h, s),
                    _ if strict => (usize::MAX, Vec::new()),
                    _ => {
                        tracing::warn!(volume = %v.name, "volume names an unknown node; left out");
                        continue;
                    }
                };
                let scale_out = v.scale_out.unwrap_or(false);
                // A reader of an image is inclusive: the consolidated cache keeps what it
                // serves for the other readers.
                let exclusive =
                    (v.exclusive.unwrap_or(cfg.exclusive) || scale_out) && v.image.is_none();
                out.push(Tenant {
                    name: cname.clone(),
                    host,
                    servers: srv,
                    stripe_unit: (v.stripe_unit.map_or(1 << 20, |s| s.0) / bs).max(1),
                    slo: t.slo,
                    class,
                    depth: t.depth,
                    levels: (exclusive != cfg.exclusive).then_some(if exclusive {
                        Levels::Exclusive
                    } else {
                        Levels::Inclusive
                    }),
                });
                vols.push(PlacedVolume {
                    name: cname,
                    cache: v.name.clone(),
                    owner: t.name.clone(),
                    host: vhost.clone(),
                    servers: v.servers.clone(),
                    exclusive,
                    boost: v.boost.unwrap_or(true),
                    write_policy: match v.image {
                        Some(_) => Some("read-only".into()),
                        None => v.write_policy.clone(),
                    },
                    scale_out,
                    image: v.image.clone(),
                });
            }
        }
    }
    let [a, b, c] = cfg.service.map(|d| d.as_nanos() as f64 / 1e6);
    (
        Topology {
            block_size: bs,
            hosts,
            servers,
            levels: if cfg.exclusive {
                Levels::Exclusive
            } else {
                Levels::Inclusive
            },
            service: ServiceTimes {
                l1_hit_ms: a,
                l2_hit_ms: b,
                miss_ms: c,
            },
            tenants: out,
        },
        vols,
    )
}
