//! Bandwidth proportions live: which scheme chooses them (`[controller.bandwidth]`), and
//! the proportions each node is sent every interval.
//!
//! Owns: the choice of bandwidth scheme, the static shares, and turning the plan's
//! `bandwidth` (proportions per scheduled resource, by topology tenant) into each node's
//! `PUT /v1/proportions` body (by the tenant owning each export on the node). Does not
//! own: learning the proportions (the `control` crate's automata, the simulator's code),
//! or enforcing them (each node's backend queue, `node::bandwidth`).
//!
//! Schemes, as the simulator's variants name them (`mode`):
//!
//! | `mode` | proportions |
//! |---|---|
//! | `scheme` (default) | whatever the control scheme does (no learners in the named schemes) |
//! | `off` | none: every node's backend is shared equally |
//! | `shares` | static: each storage server divides between its volumes in the ratio of their owners' `shares` (1 for a tenant not named), as the simulator's `shares` variant |
//! | `server` (or `single`) | one level of learning automata, at the storage servers |
//! | `uncoordinated` | an automaton at every host and server with two or more volumes, all learning at once |
//! | `coordinated` | the same, a token passed between them (only the holder learns) |
//!
//! ```toml
//! [controller.bandwidth]
//! mode = "shares"
//! shares = { gold = 3, bronze = 1 }
//! ```
//!
//! Every interval the plan's proportions reach every node that is up, as part of its
//! reconcile (`crate::reconcile::apply`): a node with a resource in the plan gets its
//! members' proportions, summed per owning tenant and normalised to one; a node without
//! one gets `{}` (equal shares), so switching a scheme off takes effect too. A node that
//! refuses is reported like any other reconcile failure and tried again next interval.

use crate::placement::PlacedVolume;
use crate::registry::NodeEntry;
use api::node::Proportions;
use control::{Automata, Plan, ResourceShares, Scheme, Topology};

pub use crate::config::{BandwidthSpec, Mode, SpecError};

impl BandwidthSpec {
    /// Sets `scheme`'s learners as the mode says.
    pub fn apply_to(&self, scheme: &mut Scheme) {
        let learners = |coordinated, servers_only| {
            Some(Automata {
                coordinated,
                servers_only,
                ..Automata::default()
            })
        };
        scheme.automata = match self.mode {
            Mode::Scheme => return,
            Mode::Off | Mode::Shares => None,
            Mode::Server => learners(true, true),
            Mode::Uncoordinated => learners(false, false),
            Mode::Coordinated => learners(true, false),
        };
    }

    /// With `shares`: the plan's proportions (each storage server with two or more
    /// volumes divides between them in their owners' ratio); `None` for other modes.
    pub fn static_shares(
        &self,
        topo: &Topology,
        vols: &[PlacedVolume],
    ) -> Option<Vec<ResourceShares>> {
        if self.mode != Mode::Shares {
            return None;
        }
        let weight = |i: usize| {
            vols.get(i)
                .and_then(|v| self.shares.get(&v.owner))
                .copied()
                .unwrap_or(1.0)
        };
        let place = topo.placement();
        let mut out = Vec::new();
        for (s, members) in place.servers.iter().enumerate() {
            if members.len() < 2 {
                continue;
            }
            let total: f64 = members.iter().map(|&(i, _)| weight(i)).sum();
            out.push(ResourceShares {
                level: "server".into(),
                node: s,
                shares: members
                    .iter()
                    .map(|&(i, _)| (i, weight(i) / total))
                    .collect(),
                volumes: Vec::new(),
            });
        }
        Some(out)
    }

    /// The plan as run: the static shares put in (other modes leave it as it is).
    pub fn fill(&self, topo: &Topology, vols: &[PlacedVolume], plan: &mut Plan) {
        if let Some(s) = self.static_shares(topo, vols) {
            plan.bandwidth = s;
        }
    }
}

/// The proportions node `e` is to enforce under `plan`: its resource's shares summed per
/// tenant owning each volume's export there (the registration's, else the export's name,
/// the node's default; a reader's export on a server is its image's) and normalised to one; empty (equal shares) if the plan has no
/// resource there or none of its volumes is exported there.
pub fn node_proportions(
    topo: &Topology,
    plan: &Plan,
    vols: &[PlacedVolume],
    e: &NodeEntry,
) -> Proportions {
    let (level, nodes) = match e.level {
        1 => ("host", &topo.hosts),
        _ => ("server", &topo.servers),
    };
    let Some(r) = plan
        .bandwidth
        .iter()
        .find(|r| r.level == level && nodes.get(r.node).is_some_and(|n| n.name == e.name))
    else {
        return Proportions::new();
    };
    let mut p = Proportions::new();
    for &(i, share) in &r.shares {
        let Some(v) = vols.get(i) else { continue };
        // A reader of an image reads the image's export at level 2.
        let export = match (e.level, v.image.as_deref()) {
            (2, Some(image)) => image,
            _ => v.cache.as_str(),
        };
        let tenant = match e.exports.iter().find(|x| x.name == export) {
            Some(x) => x.tenant.clone(),
            None if e.exports.is_empty() => export.to_string(),
            // Not exported here: nothing of it waits for this node's backend.
            None => continue,
        };
        *p.entry(tenant).or_default() += share;
    }
    let total: f64 = p.values().sum();
    if p.len() < 2 || total.is_nan() || total <= 0.0 {
        return Proportions::new();
    }
    for v in p.values_mut() {
        *v /= total;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::controller::ExportRef;
    use std::collections::BTreeMap;

    fn topo() -> Topology {
        let node = |name: &str| control::Node {
            name: name.into(),
            capacity: 100,
            hot_tier: false,
        };
        let tenant = |name: &str| control::Tenant {
            name: name.into(),
            host: 0,
            servers: vec![0],
            ..control::Tenant::default()
        };
        Topology {
            block_size: 4096,
            hosts: vec![node("h")],
            servers: vec![node("s")],
            levels: Default::default(),
            service: control::ServiceTimes {
                l1_hit_ms: 0.1,
                l2_hit_ms: 1.0,
                miss_ms: 5.0,
            },
            tenants: vec![tenant("gold"), tenant("bronze"), tenant("tin")],
        }
    }

    fn vols() -> Vec<PlacedVolume> {
        [("gold", "g"), ("bronze", "b"), ("tin", "b")]
            .iter()
            .map(|(v, owner)| PlacedVolume {
                name: v.to_string(),
                cache: v.to_string(),
                owner: owner.to_string(),
                host: "h".into(),
                servers: vec!["s".into()],
                exclusive: false,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn static_shares_divide_each_server_by_the_owners_ratio_and_reach_its_tenants() {
        let spec = BandwidthSpec {
            mode: Mode::Shares,
            shares: [("g".to_string(), 2.0)].into(),
        };
        spec.check().unwrap();
        let (topo, vols) = (topo(), vols());
        let shares = spec.static_shares(&topo, &vols).unwrap();
        assert_eq!(shares.len(), 1);
        assert_eq!(shares[0].shares, vec![(0, 0.5), (1, 0.25), (2, 0.25)]);
        let mut plan: Plan = serde_json::from_value(serde_json::json!({
            "interval": 0, "time": 0.0, "layout": "partitioned", "tenants": [],
            "bandwidth": [], "boost": [], "infeasible": [], "predicted_fair_speedup": 1.0
        }))
        .unwrap();
        spec.fill(&topo, &vols, &mut plan);
        // The server exports gold and bronze (owned by tenants g and b); tin is not
        // exported there, so its share is left out and the rest renormalised.
        let e = NodeEntry {
            name: "s".into(),
            level: 2,
            exports: ["gold", "bronze"]
                .iter()
                .map(|x| ExportRef {
                    name: x.to_string(),
                    tenant: format!("t-{x}"),
                    size: 1 << 20,
                })
                .collect(),
            ..Default::default()
        };
        let p = node_proportions(&topo, &plan, &vols, &e);
        let want: Proportions = [
            ("t-gold".to_string(), 2.0 / 3.0),
            ("t-bronze".into(), 1.0 / 3.0),
        ]
        .into();
        assert_eq!(p.len(), 2);
        for (k, v) in &want {
            assert!((p[k] - v).abs() < 1e-12, "{p:?}");
        }
        // The host has no resource in the plan: equal shares.
        let h = NodeEntry {
            name: "h".into(),
            level: 1,
            ..Default::default()
        };
        assert!(node_proportions(&topo, &plan, &vols, &h).is_empty());
    }

    #[test]
    fn modes_set_the_learners_and_bad_shares_name_the_field() {
        let mut s = Scheme::named("fair").unwrap();
        let spec = |mode| BandwidthSpec {
            mode,
            shares: BTreeMap::new(),
        };
        spec(Mode::Coordinated).apply_to(&mut s);
        let a = s.automata.unwrap();
        assert!(a.coordinated && !a.servers_only);
        spec(Mode::Server).apply_to(&mut s);
        assert!(s.automata.unwrap().servers_only);
        spec(Mode::Uncoordinated).apply_to(&mut s);
        assert!(!s.automata.unwrap().coordinated);
        spec(Mode::Scheme).apply_to(&mut s);
        assert!(s.automata.is_some());
        spec(Mode::Off).apply_to(&mut s);
        assert!(s.automata.is_none());
        let bad = BandwidthSpec {
            mode: Mode::Shares,
            shares: [("g".to_string(), -1.0)].into(),
        };
        assert_eq!(
            bad.check().unwrap_err().to_string(),
            "controller.bandwidth.shares.g: -1 must be a positive finite number"
        );
        let unused = BandwidthSpec {
            mode: Mode::Off,
            shares: [("g".to_string(), 1.0)].into(),
        };
        assert!(unused.check().unwrap_err().to_string().contains("mode"));
        let parsed: BandwidthSpec = toml::from_str("mode = \"single\"").unwrap();
        assert_eq!(parsed.mode, Mode::Server);
    }
}
