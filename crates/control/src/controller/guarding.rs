//! The controller's side of the do-no-harm guard ([`crate::guard`]): each guarded tenant's
//! verdict turned into its floor (the least sizes the guard allows it) and the nodes that
//! fall back to fair share.

use super::previous::Previous;
use super::state::ControlState;
use crate::allocate::{Floor, Sizes};
use crate::guard::{GuardSizes, Held, Limit, Verdict};
use crate::model::LatencyModel;
use crate::observe::Observations;
use crate::plan::Reason;
use crate::scheme::Scheme;
use crate::topology::{Placement, Topology};

/// What the do-no-harm guard ([`crate::guard`]) decided this interval.
#[derive(Default)]
pub(super) struct Guarding {
    /// Per guarded tenant, its floor: the least sizes the guard allows
    /// ([`crate::guard::floor`]).
    pub(super) floors: Vec<Option<Floor>>,
    /// Per tenant, whether it runs the fair scheme's policy because its nodes fall back.
    pub(super) fair_policy: Vec<bool>,
    /// Per host, the guarded tenant for whom every tenant on it falls back to its fair
    /// share there.
    pub(super) hosts: Vec<Option<usize>>,
    /// Per server, the same.
    pub(super) servers: Vec<Option<usize>>,
}

impl Guarding {
    /// Whether any node falls back.
    pub(super) fn any_fallback(&self) -> bool {
        self.hosts.iter().chain(&self.servers).any(Option::is_some)
    }

    /// Sets every tenant on a node that falls back to its fair share there.
    pub(super) fn apply(
        &self,
        topo: &Topology,
        place: &Placement,
        sizes: &mut Sizes,
        fair: &Sizes,
    ) {
        let why = |j: usize| Reason::Guarded {
            why: format!("node held at fair share for `{}`", topo.tenants[j].name),
        };
        for (h, members) in place.hosts.iter().enumerate() {
            let Some(j) = self.hosts.get(h).copied().flatten() else {
                continue;
            };
            for &i in members {
                if sizes.l1[i] != fair.l1[i] {
                    sizes.l1[i] = fair.l1[i];
                    sizes.l1_reason[i] = why(j);
                }
            }
        }
        for (s, members) in place.servers.iter().enumerate() {
            let Some(j) = self.servers.get(s).copied().flatten() else {
                continue;
            };
            for &(i, k) in members {
                if sizes.l2[i][k] != fair.l2[i][k] {
                    sizes.l2[i][k] = fair.l2[i][k];
                    sizes.l2_reason[i] = why(j);
                }
            }
        }
    }
}

/// The guard's step for every tenant: only active tenants with a degradation or latency
/// SLO are guarded. Updates each guarded tenant's [`GuardState`](crate::guard::GuardState) from this interval's
/// observation at the sizes and policy the previous plan gave it (and whether its
/// neighbours held their fair shares), and returns the floors and the nodes that fall
/// back to fair share.
#[allow(clippy::too_many_arguments)] // the step's inputs, each read here
pub(super) fn guard(
    topo: &Topology,
    place: &Placement,
    was: Option<&Previous>,
    scheme: &Scheme,
    state: &mut ControlState,
    models: &[LatencyModel],
    fair: &Sizes,
    active: &[bool],
    obs: &Observations,
) -> Guarding {
    let baseline = baseline_policy(scheme);
    let n = topo.tenants.len();
    let mut held: Vec<Option<(u64, Vec<u64>, bool)>> = vec![None; n];
    let mut host_at_fair = vec![false; topo.hosts.len()];
    let mut server_at_fair = vec![false; topo.servers.len()];
    if let Some(was) = was {
        for (i, slot) in held.iter_mut().enumerate() {
            *slot = was.sizes(topo, i).map(|(l1, l2)| {
                let policy = was.tenant[i].is_some_and(|tp| tp.eviction == baseline);
                (l1, l2, policy)
            });
        }
        for (h, members) in place.hosts.iter().enumerate() {
            host_at_fair[h] = members.iter().all(|&i| was.l1(topo, i) == Some(fair.l1[i]));
        }
        for (s, members) in place.servers.iter().enumerate() {
            server_at_fair[s] = members
                .iter()
                .all(|&(i, k)| was.l2(topo, i, k) == Some(fair.l2[i][k]));
        }
    }
    let mut out = Guarding {
        floors: vec![None; n],
        fair_policy: vec![false; n],
        hosts: vec![None; topo.hosts.len()],
        servers: vec![None; topo.servers.len()],
    };
    let mut noisy = Vec::new();
    for i in 0..n {
        let t = &topo.tenants[i];
        let Some(limit) = t.slo.as_ref().and_then(Limit::of) else {
            continue;
        };
        if !active[i] {
            continue;
        }
        let neighbours_at_fair =
            host_at_fair[t.host] && t.servers.iter().all(|&s| server_at_fair[s]);
        let fair_hit = obs.tenants[i].curve(&baseline).map(|c| {
            let total = fair.l1[i] + fair.l2[i].iter().sum::<u64>();
            c.hit_ratio(total as f64)
        });
        let sizes = held[i].as_ref().map(|(l1, l2, policy)| Held {
            held: (*l1, l2),
            fair: (fair.l1[i], &fair.l2[i]),
            fair_policy: *policy,
            neighbours_at_fair,
            fair_hit,
            seconds: obs.seconds,
        });
        let st = &mut state.tenants[i].guard;
        let verdict = crate::guard::step(st, limit, &models[i], sizes, &obs.tenants[i]);
        if verdict.falls_back() {
            out.hosts[t.host].get_or_insert(i);
            for &s in &t.servers {
                out.servers[s].get_or_insert(i);
            }
            out.fair_policy[i] = true;
        }
        if matches!(verdict, Verdict::TooNoisy { .. }) {
            noisy.push(i);
        }
        let fair_i = GuardSizes {
            l1: fair.l1[i],
            l2: fair.l2[i].clone(),
        };
        let f = crate::guard::floor(st, verdict, &fair_i);
        out.floors[i] = Some(Floor {
            l1: f.l1,
            l2: f.l2,
            reason: Reason::Guarded { why: verdict.why() },
        });
    }
    // A tenant too noisy to judge is judged against the fair scheme interval by interval
    // all the same, and what its disks serve it in an interval depends on every request
    // queued there: every tenant striped over one of its servers runs as the fair scheme
    // runs it, on all its nodes and on the fair scheme's policy, so that what the disks
    // see is what they would see under the fair scheme.
    for &i in &noisy {
        for &s in &topo.tenants[i].servers {
            for &(j, _) in &place.servers[s] {
                let tj = &topo.tenants[j];
                out.hosts[tj.host].get_or_insert(i);
                for &sj in &tj.servers {
                    out.servers[sj].get_or_insert(i);
                }
                out.fair_policy[j] = true;
            }
        }
    }
    out
}

/// The eviction policy the fair scheme runs where `scheme` chooses none: its first
/// candidate, or LRU.
pub(super) fn baseline_policy(scheme: &Scheme) -> String {
    scheme
        .policy_choice
        .as_ref()
        .and_then(|c| c.candidates.first().cloned())
        .unwrap_or_else(|| "lru".into())
}
