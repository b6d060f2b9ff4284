//! What a scenario means to `control`: the scenario and scheme a scheme or variant name
//! runs, and the controller's view of the hierarchy (its topology).
//!
//! Does not own: reading the file (`check`), running a scheme (`crate::engine`).

use super::{Pacing, Scenario};
use crate::SimError;

impl Scenario {
    /// The scenario and scheme a scheme or variant name runs: a variant changes a copy of
    /// the scenario (eviction, hot tiers, static shares) and of its base scheme.
    pub fn resolve(&self, name: &str) -> Result<(Scenario, control::Scheme), SimError> {
        let plan = SimError::Control;
        let Some(v) = self.variants.iter().find(|v| v.name == name) else {
            return Ok((self.clone(), control::Scheme::named(name).map_err(plan)?));
        };
        let mut sc = self.clone();
        let mut scheme = control::Scheme::named(&v.base).map_err(plan)?;
        scheme.name = v.name.clone();
        if let Some(e) = &v.eviction {
            sc.eviction = e.clone();
            sc.l2_eviction = None;
            if let Some(pc) = scheme.policy_choice.as_mut() {
                if !pc.candidates.contains(e) {
                    pc.candidates.insert(0, e.clone());
                }
            }
        }
        if let Some(e) = &v.l2_eviction {
            sc.l2_eviction = Some(e.clone());
        }
        for s in &mut sc.servers {
            if v.hot_tier == Some(false) {
                s.hot_tier = None;
            }
            if let (Some(a), Some(t)) = (&v.hot_admission, s.hot_tier.as_mut()) {
                t.admission = a.clone();
            }
        }
        match v.policy_choice {
            Some(true) if scheme.policy_choice.is_none() => {
                scheme.policy_choice = Some(control::PolicyChoice::default())
            }
            Some(false) => scheme.policy_choice = None,
            _ => {}
        }
        if let Some(a) = &v.automata {
            scheme.automata = match a.as_str() {
                "off" => None,
                mode => Some(control::Automata {
                    coordinated: mode != "uncoordinated",
                    servers_only: mode == "server",
                    ..control::Automata::default()
                }),
            };
        }
        if let Some(b) = v.boost {
            scheme.boost = b;
        }
        sc.shares = v.shares.clone();
        if let Some(i) = v.inclusive {
            sc.inclusive = i;
        }
        if let (Some(x), Some(h)) = (v.write_back_share, scheme.hysteresis.as_mut()) {
            h.write_back_share = x;
        }
        Ok((sc, scheme))
    }

    /// The controller's view of this scenario; `depth` per tenant for closed loops.
    pub fn topology(&self, _depth: &[Option<f64>]) -> control::Topology {
        let bs = self.block_size;
        let net = self.network.expected(bs) * 2.0;
        let ram = self.ram.expected(bs);
        let disk = self
            .servers
            .iter()
            .map(|s| s.disk.expected(bs))
            .sum::<f64>()
            / self.servers.len() as f64;
        control::Topology {
            block_size: bs,
            hosts: self
                .hosts
                .iter()
                .map(|h| control::Node {
                    name: h.name.clone(),
                    capacity: h.blocks,
                    hot_tier: false,
                })
                .collect(),
            servers: self
                .servers
                .iter()
                .map(|s| control::Node {
                    name: s.name.clone(),
                    capacity: s.blocks,
                    hot_tier: s.hot_tier.is_some(),
                })
                .collect(),
            levels: if self.inclusive {
                control::Levels::Inclusive
            } else {
                control::Levels::Exclusive
            },
            service: control::ServiceTimes {
                l1_hit_ms: ram * 1e3,
                l2_hit_ms: (ram * 2.0 + net) * 1e3,
                miss_ms: (ram * 2.0 + net + disk) * 1e3,
            },
            tenants: self
                .tenants
                .iter()
                .map(|t| control::Tenant {
                    name: t.name.clone(),
                    host: t.host,
                    servers: t.servers.clone(),
                    stripe_unit: t.stripe_blocks,
                    slo: t.slo,
                    class: t.class,
                    depth: match t.pacing {
                        Pacing::Depth(d) => Some(d as f64),
                        _ => None,
                    },
                    ..Default::default()
                })
                .collect(),
        }
    }
}
