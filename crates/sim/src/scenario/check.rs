//! Reading a scenario file into a [`Scenario`]: each value checked, defaults filled in,
//! names resolved to indices (hosts, servers, tenants, hot-tier volumes, variants' shares),
//! trace paths found; each error names the file, the key and the reason.
//!
//! Does not own: the schema (`file`), what a scheme or variant runs (`schemes`).

use super::file::{DiskField, File};
use super::{
    HostSpec, HotTier, Pacing, Scenario, ServerSpec, TenantSpec, Variant, Workload,
    DEFAULT_MAX_IN_FLIGHT,
};
use crate::device::DeviceSpec;
use crate::SimError;
use control::Class;
use std::path::Path;
use units::ByteSize as Bytes;

impl Scenario {
    /// Parses and checks scenario `text` read from `path` (relative trace paths start
    /// from its folder).
    pub fn parse(text: &str, path: &Path) -> Result<Scenario, SimError> {
        let file_name = path.display().to_string();
        let err = |key: String, reason: String| SimError::Scenario {
            file: file_name.clone(),
            key,
            reason,
        };
        let f: File = toml::from_str(text).map_err(|e| {
            let key = e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].lines().count().max(1);
                    format!("line {line}")
                })
                .unwrap_or_else(|| "-".into());
            err(key, e.message().to_string())
        })?;
        let s = &f.sim;
        let bs = s.block_size.0;
        if bs == 0 {
            return Err(err("sim.block_size".into(), "must be above 0".into()));
        }
        if !(s.interval.0.is_finite() && s.interval.0 > 0.0) {
            return Err(err("sim.interval".into(), "must be above 0".into()));
        }
        if let Some(q) = s.quantum {
            if !(q.0.is_finite() && q.0 > 0.0) {
                return Err(err("sim.quantum".into(), "must be above 0".into()));
            }
        }
        if !(0.0..1.0).contains(&s.warmup) {
            return Err(err(
                "sim.warmup".into(),
                format!("{} must be in [0, 1)", s.warmup),
            ));
        }
        policy::build(&s.eviction).map_err(|e| err("sim.eviction".into(), e.to_string()))?;
        if let Some(e) = &s.l2_eviction {
            policy::build(e).map_err(|x| err("sim.l2_eviction".into(), x.to_string()))?;
        }
        let schemes = match &s.schemes {
            Some(v) => {
                for n in v {
                    if f.variant.iter().any(|x| &x.name == n) {
                        continue;
                    }
                    control::Scheme::named(n)
                        .map_err(|e| err("sim.schemes".into(), e.to_string()))?;
                }
                v.clone()
            }
            None => control::SCHEME_NAMES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        };
        if let Some(c) = &s.candidates {
            for p in c {
                policy::build(p).map_err(|e| err("sim.candidates".into(), e.to_string()))?;
            }
        }
        let network = s.network.unwrap_or_else(DeviceSpec::net);
        network
            .check()
            .map_err(|r| err("sim.network".into(), r.to_string()))?;
        let ram = s.ram.unwrap_or_else(DeviceSpec::ram);
        ram.check()
            .map_err(|r| err("sim.ram".into(), r.to_string()))?;
        if f.host.is_empty() {
            return Err(err("host".into(), "no [[host]]".into()));
        }
        if f.server.is_empty() {
            return Err(err("server".into(), "no [[server]]".into()));
        }
        let blocks = |b: Bytes, key: String| -> Result<u64, SimError> {
            if b.0 % bs != 0 {
                return Err(err(
                    key,
                    format!("{} bytes is not a whole number of {bs}-byte blocks", b.0),
                ));
            }
            Ok(b.0 / bs)
        };
        let mut hosts = Vec::new();
        for h in &f.host {
            if hosts.iter().any(|x: &HostSpec| x.name == h.name) {
                return Err(err(format!("host \"{}\"", h.name), "appears twice".into()));
            }
            if let Some(l) = &h.link {
                l.check()
                    .map_err(|r| err(format!("host \"{}\".link", h.name), r.to_string()))?;
            }
            hosts.push(HostSpec {
                name: h.name.clone(),
                blocks: blocks(h.cache, format!("host \"{}\".cache", h.name))?,
                link: h.link,
            });
        }
        let disk = |d: &Option<DiskField>,
                    key: String,
                    default: DeviceSpec|
         -> Result<DeviceSpec, SimError> {
            let spec = match d {
                None => default,
                Some(DiskField::Name(n)) => match n.as_str() {
                    "hdd" => DeviceSpec::hdd(),
                    "ssd" => DeviceSpec::ssd(),
                    other => {
                        return Err(err(
                            key,
                            format!("unknown disk `{other}` (hdd, ssd, or a table)"),
                        ))
                    }
                },
                Some(DiskField::Spec(s)) => *s,
            };
            spec.check().map_err(|r| err(key, r.to_string()))?;
            Ok(spec)
        };
        let mut servers = Vec::new();
        for sv in &f.server {
            let key = |k: &str| format!("server \"{}\".{k}", sv.name);
            if servers.iter().any(|x: &ServerSpec| x.name == sv.name) {
                return Err(err(
                    format!("server \"{}\"", sv.name),
                    "appears twice".into(),
                ));
            }
            let hot_tier = match &sv.hot_tier {
                None => None,
                Some(t) => {
                    let chunk_blocks = blocks(t.chunk, key("hot_tier.chunk"))?;
                    if chunk_blocks == 0 || t.size.0 % t.chunk.0.max(1) != 0 {
                        return Err(err(
                            key("hot_tier"),
                            "size must be a whole number of chunks of at least one block".into(),
                        ));
                    }
                    policy::admission::build_admission(&t.admission)
                        .map_err(|e| err(key("hot_tier.admission"), e.to_string()))?;
                    Some(HotTier {
                        chunks: t.size.0 / t.chunk.0,
                        chunk_blocks,
                        admission: t.admission.clone(),
                        device: disk(&t.device, key("hot_tier.device"), DeviceSpec::ssd())?,
                        volumes: None,
                        migration_threads: if t.migration_threads == 0 {
                            return Err(err(
                                key("hot_tier.migration_threads"),
                                "must be at least 1".into(),
                            ));
                        } else {
                            t.migration_threads
                        },
                    })
                }
            };
            servers.push(ServerSpec {
                name: sv.name.clone(),
                blocks: blocks(sv.cache, key("cache"))?,
                disk: disk(&sv.disk, key("disk"), DeviceSpec::hdd())?,
                hot_tier,
            });
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut tenants = Vec::new();
        for t in &f.tenant {
            let key = |k: &str| format!("tenant \"{}\".{k}", t.name);
            if tenants.iter().any(|x: &TenantSpec| x.name == t.name) {
                return Err(err(
                    format!("tenant \"{}\"", t.name),
                    "appears twice".into(),
                ));
            }
            let workload = match (&t.trace, &t.synthetic) {
                (Some(p), None) => {
                    let direct = dir.join(p);
                    let path = if direct.exists() {
                        direct
                    } else {
                        trace::find_shared_trace(p, dir)
                            .or_else(|| {
                                std::env::current_dir()
                                    .ok()
                                    .and_then(|c| trace::find_shared_trace(p, &c))
                            })
                            .ok_or_else(|| {
                                err(
                                    key("trace"),
                                    format!("`{}` does not exist", direct.display()),
                                )
                            })?
                    };
                    if let Some(fm) = &t.format {
                        fm.parse::<trace::Format>()
                            .map_err(|e| err(key("format"), e.to_string()))?;
                    }
                    Workload::Trace {
                        path,
                        format: t.format.clone(),
                    }
                }
                (None, Some(spec)) => {
                    trace::synth::parse(spec).map_err(|e| err(key("synthetic"), e.to_string()))?;
                    Workload::Synthetic(spec.clone())
                }
                _ => {
                    return Err(err(
                        key("trace"),
                        "give exactly one of `trace` and `synthetic`".into(),
                    ))
                }
            };
            let host = hosts
                .iter()
                .position(|h| h.name == t.host)
                .ok_or_else(|| err(key("host"), format!("`{}` is not a [[host]]", t.host)))?;
            if t.servers.is_empty() {
                return Err(err(
                    key("servers"),
                    "the tenant is on no storage server".into(),
                ));
            }
            let mut sv = Vec::new();
            for n in &t.servers {
                let i = servers
                    .iter()
                    .position(|s| &s.name == n)
                    .ok_or_else(|| err(key("servers"), format!("`{n}` is not a [[server]]")))?;
                if sv.contains(&i) {
                    return Err(err(key("servers"), format!("`{n}` listed twice")));
                }
                sv.push(i);
            }
            let stripe_blocks = blocks(t.stripe_unit, key("stripe_unit"))?;
            if stripe_blocks == 0 {
                return Err(err(key("stripe_unit"), "must be at least one block".into()));
            }
            if let Some(slo) = &t.slo {
                slo.check().map_err(|r| err(key("slo"), r.to_string()))?;
            }
            let class = match (t.class.as_deref(), t.dedicated) {
                (_, Some((a, b))) => Class::Dedicated {
                    l1: blocks(a, key("dedicated"))?,
                    l2: blocks(b, key("dedicated"))?,
                },
                (None | Some("best-effort"), None) => Class::BestEffort,
                (Some("gold"), None) => Class::Gold,
                (Some("silver"), None) => Class::Silver,
                (Some(c), None) => {
                    return Err(err(
                        key("class"),
                        format!(
                            "unknown class `{c}` (gold, silver, best-effort; or set `dedicated`)"
                        ),
                    ))
                }
            };
            let pacing = match (t.rate, t.depth, t.speed) {
                (Some(r), None, None) if r.is_finite() && r > 0.0 => Pacing::Rate(r),
                (None, Some(d), None) if d > 0 => Pacing::Depth(d),
                (None, None, Some(s)) if s.is_finite() && s > 0.0 => {
                    Pacing::Timestamps { speed: s }
                }
                (None, None, None) => Pacing::Timestamps { speed: 1.0 },
                _ => {
                    return Err(err(
                        key("rate"),
                        "give at most one of rate (> 0), depth (> 0) and speed (> 0)".into(),
                    ))
                }
            };
            let max_in_flight = match (pacing, t.max_in_flight) {
                (Pacing::Depth(d), None) => d,
                (Pacing::Depth(_), Some(_)) => {
                    return Err(err(
                        key("max_in_flight"),
                        "a closed loop keeps `depth` requests in flight; give one of them".into(),
                    ))
                }
                (_, Some(0)) => return Err(err(key("max_in_flight"), "must be at least 1".into())),
                (_, m) => m.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
            };
            tenants.push(TenantSpec {
                name: t.name.clone(),
                workload,
                host,
                servers: sv,
                stripe_blocks,
                slo: t.slo,
                class,
                pacing,
                max_in_flight,
                requests: t.requests,
                start: t.start.map_or(0.0, |s| s.0),
                idle: match t.idle {
                    None => None,
                    Some((a, b)) if a.0 >= 0.0 && b.0 > a.0 => Some((a.0, b.0)),
                    Some(_) => {
                        return Err(err(
                            key("idle"),
                            "give [from, to] with 0 <= from < to".into(),
                        ))
                    }
                },
            });
        }
        if tenants.is_empty() {
            return Err(err("tenant".into(), "no [[tenant]]".into()));
        }
        let tenant_index = |n: &str, key: String| {
            tenants
                .iter()
                .position(|t: &TenantSpec| t.name == n)
                .ok_or_else(|| err(key, format!("`{n}` is not a [[tenant]]")))
        };
        for (sv, spec) in f.server.iter().zip(servers.iter_mut()) {
            if let (Some(v), Some(t)) = (
                sv.hot_tier.as_ref().and_then(|h| h.volumes.as_ref()),
                spec.hot_tier.as_mut(),
            ) {
                let mut ix = Vec::new();
                for n in v {
                    ix.push(tenant_index(
                        n,
                        format!("server \"{}\".hot_tier.volumes", sv.name),
                    )?);
                }
                t.volumes = Some(ix);
            }
        }
        let mut variants = Vec::new();
        for v in &f.variant {
            let key = |k: &str| format!("variant \"{}\".{k}", v.name);
            if control::Scheme::named(&v.name).is_ok()
                || variants.iter().any(|x: &Variant| x.name == v.name)
            {
                return Err(err(
                    key("name"),
                    "is a scheme's name or appears twice".into(),
                ));
            }
            control::Scheme::named(&v.base).map_err(|e| err(key("base"), e.to_string()))?;
            if let Some(e) = &v.eviction {
                policy::build(e).map_err(|x| err(key("eviction"), x.to_string()))?;
            }
            if let Some(e) = &v.l2_eviction {
                policy::build(e).map_err(|x| err(key("l2_eviction"), x.to_string()))?;
            }
            if let Some(a) = &v.hot_admission {
                policy::admission::build_admission(a)
                    .map_err(|x| err(key("hot_admission"), x.to_string()))?;
            }
            if let Some(a) = &v.automata {
                if !matches!(
                    a.as_str(),
                    "coordinated" | "uncoordinated" | "server" | "off"
                ) {
                    return Err(err(
                        key("automata"),
                        format!("`{a}`: coordinated, uncoordinated, server or off"),
                    ));
                }
            }
            let shares = match &v.shares {
                None => None,
                Some(m) => {
                    let mut w = vec![1.0; tenants.len()];
                    for (n, &x) in m {
                        if !(x.is_finite() && x > 0.0) {
                            return Err(err(key("shares"), format!("`{n}`: {x} must be above 0")));
                        }
                        w[tenant_index(n, key("shares"))?] = x;
                    }
                    Some(w)
                }
            };
            variants.push(Variant {
                name: v.name.clone(),
                base: v.base.clone(),
                eviction: v.eviction.clone(),
                l2_eviction: v.l2_eviction.clone(),
                hot_admission: v.hot_admission.clone(),
                hot_tier: v.hot_tier,
                policy_choice: v.policy_choice,
                automata: v.automata.clone(),
                shares,
                boost: v.boost,
                inclusive: v.inclusive,
                write_back_share: match v.write_back_share {
                    Some(x) if !(x.is_finite() && (0.0..=1.0).contains(&x)) => {
                        return Err(err(
                            format!("variant \"{}\".write_back_share", v.name),
                            format!("{x} must be between 0 and 1"),
                        ));
                    }
                    Some(_)
                        if control::Scheme::named(&v.base)
                            .map_or(true, |s| s.hysteresis.is_none()) =>
                    {
                        return Err(err(
                            format!("variant \"{}\".write_back_share", v.name),
                            format!(
                                "base scheme `{}` paces no shrinks (it has no hysteresis)",
                                v.base
                            ),
                        ));
                    }
                    x => x,
                },
            });
        }
        for c in &f.claim {
            crate::claims::Rule::parse(&c.rule)
                .map_err(|e| err(format!("claim \"{}\".rule", c.name), e.to_string()))?;
        }
        let quick = s.quick.unwrap_or(0.25);
        if !(quick > 0.0 && quick <= 1.0) {
            return Err(err(
                "sim.quick".into(),
                format!("{quick} must be in (0, 1]"),
            ));
        }
        let sc = Scenario {
            name: path
                .file_stem()
                .map_or("scenario".into(), |s| s.to_string_lossy().into_owned()),
            block_size: bs,
            interval: s.interval.0,
            warmup: s.warmup,
            schemes,
            inclusive: s.inclusive,
            eviction: s.eviction.clone(),
            l2_eviction: s.l2_eviction.clone(),
            duration: s.duration.map(|d| d.0),
            seed: s.seed,
            reseeded: false,
            l1_write: s.l1_write,
            l2_write: s.l2_write,
            network,
            ram,
            candidates: s.candidates.clone(),
            quantum: s.quantum.map(|q| q.0),
            hosts,
            servers,
            tenants,
            variants,
            claims: f.claim.clone(),
            phases: s.phases.iter().map(|p| p.0).collect(),
            quick,
            shares: None,
            is_quick: false,
        };
        sc.topology(&sc.tenants.iter().map(|_| None).collect::<Vec<_>>())
            .validate()
            .map_err(|e| err("tenant".into(), e.to_string()))?;
        Ok(sc)
    }
}
