//! Moirai's allocation (Stefanovici et al., SoCC'15): each cache is shared among its tenants
//! to maximise the hits it serves (each tenant's hit ratio weighted by its request rate:
//! the paper's "hit rate" utility), after, optionally, every SLO's minimum, by the paper's
//! Algorithm 3.1 (water-filling in steps of `ε = 0.001 · C`, [`super::Search::WaterFill`]),
//! not by our hull optimiser.
//!
//! Level 1 first, per host: tenant `i`'s curve is its own, weighted by its rate. Then level
//! 2, per server, given the level-1 sizes: a server holds `1/n` of a tenant's stripe, so
//! `x` blocks there serve that share as `n·x` blocks would the whole stream; the curve is
//! the share of level-1 misses that also miss level 2. SLO minimums (Moirai §3.2) apply to
//! level 1, the cache Moirai programs for the tenant: the target latency becomes a hit
//! ratio between a level-1 hit and a level-1 miss at fair-share level 2
//! (`lachesis_alloc::slo`), and the smallest size reaching it is reserved, admitted by
//! class when they do not all fit. An IOPS or bandwidth SLA becomes its hit ratio by the
//! paper's equation 2, `Hit ≥ (SLA − BW_storage) / (BW_memory − BW_storage)` (figures per
//! outstanding request, see the code).

use super::{optimise_with, Inputs, Item, Search, Sizes};
use crate::model::normalised_curve_flat;
use crate::plan::{Reason, Shortfall};
use lachesis_alloc::slo::{slo_minimums, SloStatus, SloTenant};
use lachesis_alloc::{Slo, SloKind};

/// Moirai's sizes; `fair_l2` is the fair level-2 total per tenant (for the SLO stage).
pub fn allocate(inp: &Inputs, slo_stage: bool, fair_l2: &[u64]) -> Sizes {
    let topo = inp.topo;
    let n = topo.tenants.len();
    let mut out = super::fair(topo, inp.place, inp.active, inp.idle_floor);
    let place = inp.place;
    for (h, host) in topo.hosts.iter().enumerate() {
        let members: Vec<usize> = place.hosts[h]
            .iter()
            .copied()
            .filter(|&i| inp.active[i])
            .collect();
        if members.is_empty() {
            continue;
        }
        let idle = place.hosts[h].len() - members.len();
        let cap = host.capacity.saturating_sub(inp.idle_floor * idle as u64);
        let mut mins = vec![0u64; members.len()];
        if slo_stage {
            let slos: Vec<Option<Slo>> = members
                .iter()
                .map(|&i| {
                    let target = inp.targets[i]?;
                    let m = &inp.models[i];
                    let storage = m.latency(0.0, fair_l2[i] as f64);
                    if storage <= m.service.l1_hit_ms {
                        return None;
                    }
                    Some(match topo.tenants[i].slo {
                        // Equation 2: a bandwidth (or IOPS) SLA is a hit ratio between what
                        // the tenant's outstanding requests get from memory and from the
                        // storage behind it. Both figures and the SLA scale with its
                        // concurrency N (Little's law: the target latency is N / SLA), so
                        // they are taken per outstanding request: SLA ↔ 1 / target,
                        // BW_memory ↔ 1 / level-1 hit, BW_storage ↔ 1 / its latency with
                        // no level 1 (level 2 at fair share).
                        Some(crate::topology::Slo::Iops(_) | crate::topology::Slo::Mbps(_)) => {
                            Slo {
                                kind: SloKind::Iops,
                                target: 1.0 / target,
                                cache: 1.0 / m.service.l1_hit_ms,
                                storage: 1.0 / storage,
                            }
                        }
                        _ => Slo {
                            kind: SloKind::Latency,
                            target,
                            cache: m.service.l1_hit_ms,
                            storage,
                        },
                    })
                })
                .collect();
            let st: Vec<SloTenant> = members
                .iter()
                .zip(&slos)
                .map(|(&i, s)| SloTenant {
                    curve: &inp.models[i].curve,
                    slo: s.as_ref(),
                    weight: topo.tenants[i].class.weight(),
                    floor: 0,
                })
                .collect();
            if let Ok(status) = slo_minimums(&st, cap, 1) {
                for (k, s) in status.iter().enumerate() {
                    mins[k] = s.reserved();
                    if let (Some(why), Some(t)) = (s.reason(), inp.targets[members[k]]) {
                        if !matches!(s, SloStatus::None) {
                            out.shortfalls.push(Shortfall {
                                tenant: topo.tenants[members[k]].name.clone(),
                                target_ms: t,
                                predicted_ms: 0.0,
                                reason: why,
                            });
                        }
                    }
                }
            }
        }
        let items: Vec<Item> = members
            .iter()
            .zip(&mins)
            .map(|(&i, &min)| Item {
                curve: inp.models[i].curve.clone(),
                weight: inp.rates[i].max(1e-9) * topo.tenants[i].class.weight(),
                min,
            })
            .collect();
        let (sizes, gains) = optimise_with(cap, &items, Search::WaterFill);
        for (k, &i) in members.iter().enumerate() {
            out.l1[i] = sizes[k];
            out.l1_reason[i] = if mins[k] > 0 && sizes[k] <= mins[k] {
                Reason::SloMinimum {
                    target_ms: inp.targets[i].unwrap_or(0.0),
                }
            } else {
                Reason::Gain {
                    per_block: gains[k],
                }
            };
        }
    }
    level2_for_hits(inp, &mut out);
    let index = super::name_index(topo);
    for sf in out.shortfalls.iter_mut() {
        if let Some(i) = index.get(sf.tenant.as_str()).copied() {
            sf.predicted_ms = inp.latency(i, out.l1[i], &out.l2[i]);
        }
    }
    debug_assert_eq!(out.l1.len(), n);
    out
}

/// Level 2 per server for hits, given `out.l1`.
pub fn level2_for_hits(inp: &Inputs, out: &mut Sizes) {
    let topo = inp.topo;
    let place = inp.place;
    for (s, server) in topo.servers.iter().enumerate() {
        let members: Vec<(usize, usize)> = place.servers[s]
            .iter()
            .copied()
            .filter(|&(i, _)| inp.active[i])
            .collect();
        if members.is_empty() {
            continue;
        }
        let idle = place.servers[s].len() - members.len();
        let cap = server.capacity.saturating_sub(inp.idle_floor * idle as u64);
        let items: Vec<Item> = members
            .iter()
            .map(|&(i, _)| {
                let m = &inp.models[i];
                let ns = topo.tenants[i].servers.len() as f64;
                let c1 = out.l1[i] as f64;
                let flat = m.flat_from_c2(out.l1[i], topo.tenants[i].servers.len() as u64);
                // Share of level-1 misses that miss level 2 too, at x blocks here.
                let (curve, base) = normalised_curve_flat(
                    |x| 1.0 - m.hit_ratios(c1, ns * x as f64).1,
                    cap,
                    256,
                    flat,
                );
                Item {
                    curve,
                    weight: inp.rates[i].max(1e-9) / ns * base * topo.tenants[i].class.weight(),
                    min: 0,
                }
            })
            .collect();
        let (sizes, gains) = optimise_with(cap, &items, Search::WaterFill);
        for (j, &(i, k)) in members.iter().enumerate() {
            out.l2[i][k] = sizes[j];
            out.l2_reason[i] = Reason::Gain {
                per_block: gains[j],
            };
        }
    }
}
