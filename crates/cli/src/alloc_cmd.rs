//! `lachesis alloc`: per-tenant cache sizes from hit-ratio curves and objectives.
//!
//! Input curves are what `lachesis mrc --json` writes, with a `tenant` field added: one
//! object, a JSON list of them, or JSON Lines. A tenant's utility weight is its `requests`
//! unless `--weights` says otherwise. `--capacity` and `--step` are blocks, or bytes with a
//! unit converted with the curves' `block_size` (rounded down; less than one block is an
//! error). A `--weights` entry or an SLO-file tenant without a curve is an error naming
//! it, as is a step larger than the capacity. Output goes to stdout; a reader that closes
//! early (`| head`) ends it quietly.
//!
//! Exit status: 0 when the allocation is made and every SLO is met; 2 when it is made
//! (and printed) but at least one tenant's SLO is not met, with a line on stderr naming
//! them; 1 on bad input.
//!
//! ## The SLO file (`--slo`, TOML)
//!
//! ```toml
//! capacity = 12000           # blocks (optional; --capacity wins)
//! step = 100                 # blocks (optional; --step wins)
//! objective = "slo"          # fair, utility, slo or mlms (optional; --objective wins)
//!
//! [[tenants]]                # one per tenant with a curve; all keys but name optional
//! name = "hot"
//! weight = 2.0               # utility weight (default 1)
//! slo = { kind = "latency", target = 5.5, cache = 1.0, storage = 10.0 }
//! min = 1000                 # blocks at least
//! max = 8000                 # blocks at most
//! priority = 500             # a dedicated partition of this many blocks
//!
//! [mlms]                     # needed for --objective mlms only
//! servers = [6000, 6000]     # level-2 capacity of each storage server, blocks (required)
//! latencies = { lat1 = 0.05, lat2 = 0.5, lat_disk = 8.0 }  # level-1 hit, level-2 hit,
//!                            # disk; any one unit (required)
//! slo = 1.0                  # tolerated slowdown against the fair share (default 1.0)
//! grid = 32                  # search grid steps per fair share (default 32)
//! [mlms.connect]             # tenant = server indices; unlisted tenants reach all
//! hot = [0]
//! ```
//!
//! An SLO's `kind` is `bandwidth`, `iops` or `latency`; `cache` and `storage` are the
//! metric when every request hits, respectively misses. A key that is not one of these
//! (in `[mlms]`, `latencies`, a tenant or an SLO) is an error naming it and the accepted
//! keys, before anything else is read.

use crate::sizes::parse_bytes;
use anyhow::{bail, Context};
use clap::Args;
use lachesis_alloc::{allocate, AllocInput, Objective, SloFile, TenantInput, TenantSpec};
use mrc::{CurvePoint, HitRatioCurve};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `lachesis alloc`.
#[derive(Args, Debug)]
pub struct AllocArgs {
    /// Curves file (`lachesis mrc --json` objects with a `tenant` field).
    #[arg(long)]
    curves: PathBuf,
    /// Cache capacity: blocks, or bytes with a unit (`1TiB`, `512MiB`).
    #[arg(long)]
    capacity: Option<String>,
    /// fair, utility, slo or mlms.
    #[arg(long)]
    objective: Option<String>,
    /// Allocation step (epsilon): blocks or bytes with a unit.
    #[arg(long)]
    step: Option<String>,
    /// SLO file (TOML): capacity, step, objective; `[[tenants]]` with name, weight, slo,
    /// min, max, priority; `[mlms]` with servers, latencies {lat1, lat2, lat_disk}, slo,
    /// grid, connect (docs/node.md: "An SLO file").
    #[arg(long)]
    slo: Option<PathBuf>,
    /// Utility weights, `tenant=weight,...` (default: each curve's request count).
    #[arg(long)]
    weights: Option<String>,
    /// Replace non-monotone curves by their monotone envelope instead of failing.
    #[arg(long)]
    repair_curves: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Deserialize)]
struct CurveObject {
    tenant: Option<String>,
    #[serde(default)]
    requests: Option<u64>,
    #[serde(default)]
    block_size: Option<u32>,
    points: Vec<CurvePoint>,
}

fn read_curves(path: &PathBuf) -> anyhow::Result<Vec<CurveObject>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let t = text.trim_start();
    if t.starts_with('[') {
        return serde_json::from_str(t)
            .with_context(|| format!("{}: not a list of curve objects", path.display()));
    }
    let mut v = Vec::new();
    let mut de = serde_json::Deserializer::from_str(t).into_iter::<CurveObject>();
    for (i, c) in de.by_ref().enumerate() {
        v.push(
            c.with_context(|| format!("{}: curve object {} is malformed", path.display(), i + 1))?,
        );
    }
    if v.is_empty() {
        bail!("{}: no curve in the file", path.display());
    }
    Ok(v)
}

fn blocks(s: &str, block_size: Option<u32>, what: &str) -> anyhow::Result<u64> {
    if let Ok(n) = s.trim().parse::<u64>() {
        return Ok(n);
    }
    let bytes = parse_bytes(s).with_context(|| format!("--{what} {s}"))?;
    let bs = block_size.with_context(|| {
        format!("--{what} {s}: the curves carry no block_size to convert bytes with (they are object-mode curves); give blocks")
    })?;
    if bytes > 0 && bytes < bs as u64 {
        bail!("--{what} {s} is less than one block of the curves ({bs} bytes)");
    }
    Ok(bytes / bs as u64)
}

/// Runs `lachesis alloc`.
pub fn run(a: AllocArgs) -> anyhow::Result<()> {
    let curves = read_curves(&a.curves)?;
    let slo: SloFile = match &a.slo {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            check_slo_keys(&text).with_context(|| format!("{}", p.display()))?;
            toml::from_str(&text)
                .with_context(|| format!("{}: not a valid SLO file", p.display()))?
        }
        None => SloFile::default(),
    };
    let block_size = curves.iter().find_map(|c| c.block_size);
    let capacity = match (&a.capacity, slo.capacity) {
        (Some(c), _) => blocks(c, block_size, "capacity")?,
        (None, Some(c)) => c,
        (None, None) => bail!("--capacity is required (or `capacity` in the SLO file)"),
    };
    let step = match (&a.step, slo.step) {
        (Some(s), _) => blocks(s, block_size, "step")?,
        (None, Some(s)) => s,
        (None, None) => 1,
    };
    if step == 0 {
        bail!("--step must be at least one block");
    }
    let objective = match a.objective.as_deref() {
        Some("fair") => Objective::Fair,
        Some("utility") => Objective::Utility,
        Some("slo") => Objective::Slo,
        Some("mlms") => Objective::Mlms,
        Some(o) => bail!("--objective {o}: use fair, utility, slo or mlms"),
        None => slo.objective.unwrap_or(Objective::Utility),
    };
    let mut weights: HashMap<String, f64> = HashMap::new();
    if let Some(w) = &a.weights {
        for kv in w.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .with_context(|| format!("--weights: `{kv}` is not tenant=weight"))?;
            let x: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                .with_context(|| format!("--weights: `{v}` is not a weight"))?;
            weights.insert(k.trim().to_string(), x);
        }
    }
    let name_of = |i: usize, c: &CurveObject| {
        c.tenant
            .clone()
            .unwrap_or_else(|| format!("tenant{}", i + 1))
    };
    let names: Vec<String> = curves
        .iter()
        .enumerate()
        .map(|(i, c)| name_of(i, c))
        .collect();
    let mut unknown: Vec<&String> = weights.keys().filter(|k| !names.contains(k)).collect();
    unknown.sort();
    if let Some(k) = unknown.first() {
        bail!(
            "--weights names tenant `{k}`, which has no curve in {}",
            a.curves.display()
        );
    }
    let mut tenants = Vec::new();
    for (c, name) in curves.into_iter().zip(names) {
        let curve =
            HitRatioCurve::new(c.points).with_context(|| format!("curve of tenant `{name}`"))?;
        let mut spec = slo
            .tenants
            .iter()
            .find(|t| t.name == name)
            .cloned()
            .unwrap_or(TenantSpec {
                name: name.clone(),
                weight: 1.0,
                slo: None,
                min: None,
                max: None,
                priority: None,
            });
        spec.weight = match weights.get(&name) {
            Some(&w) => w,
            None if slo.tenants.iter().any(|t| t.name == name) => spec.weight,
            None => c.requests.map_or(1.0, |r| r as f64),
        };
        tenants.push(TenantInput { spec, curve });
    }
    for t in &slo.tenants {
        if !tenants.iter().any(|x| x.spec.name == t.name) {
            bail!(
                "SLO file names tenant `{}`, which has no curve in {}",
                t.name,
                a.curves.display()
            );
        }
    }
    let input = AllocInput {
        tenants,
        capacity,
        step,
        objective,
        repair_curves: a.repair_curves,
        mlms: slo.mlms.clone(),
    };
    let start = Instant::now();
    let mut out = allocate(&input)?;
    out.seconds = Some(start.elapsed().as_secs_f64());
    let unmet: Vec<String> = out
        .tenants
        .iter()
        .filter(|t| t.slo_met == Some(false))
        .map(|t| t.tenant.clone())
        .collect();
    let verdict = || {
        if unmet.is_empty() {
            Ok(())
        } else {
            Err(SloNotMet(unmet.clone()).into())
        }
    };
    if a.json {
        print(&format!("{}\n", serde_json::to_string(&out)?))?;
        return verdict();
    }
    let mlms = out.objective == Objective::Mlms;
    let mut text = format!(
        "objective {:?}, capacity {} blocks, step {}, {} tenants, {:.3} ms\n",
        out.objective,
        out.capacity,
        step,
        out.tenants.len(),
        1e3 * out.seconds.unwrap_or(0.0)
    );
    // MLMS: `size` is level 1 and the hit ratio counts both levels, so show level 2 too.
    let level2 = |t: &lachesis_alloc::TenantAllocation| {
        if mlms {
            format!(" {:>12}", t.level2_size.unwrap_or(0))
        } else {
            String::new()
        }
    };
    text += &format!(
        "{:<16} {:>12}{} {:>10} {:>10} {:>8}  reason\n",
        "tenant",
        "size",
        if mlms { "      level 2" } else { "" },
        "hit ratio",
        "latency",
        "SLO"
    );
    for t in &out.tenants {
        text += &format!(
            "{:<16} {:>12}{} {:>10.4} {:>10} {:>8}  {}\n",
            t.tenant,
            t.size,
            level2(t),
            t.predicted_hit_ratio,
            t.predicted_latency
                .map_or("-".into(), |l| format!("{l:.3}")),
            match t.slo_met {
                Some(true) => "met",
                Some(false) => "NOT MET",
                None => "-",
            },
            t.reason.as_deref().unwrap_or("")
        );
    }
    print(&text)?;
    verdict()
}

/// The allocation was made and printed, but these tenants' SLOs are not met (exit 2).
#[derive(Debug)]
pub struct SloNotMet(pub Vec<String>);

impl std::fmt::Display for SloNotMet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "SLO not met for {n} tenant{}: {}",
            if n == 1 { "" } else { "s" },
            self.0.join(", ")
        )
    }
}

impl std::error::Error for SloNotMet {}

/// The keys each table of an SLO file accepts.
const TOP_KEYS: &[&str] = &["capacity", "step", "objective", "mlms", "tenants"];
const TENANT_KEYS: &[&str] = &["name", "weight", "slo", "min", "max", "priority"];
const SLO_KEYS: &[&str] = &["kind", "target", "cache", "storage"];
const MLMS_KEYS: &[&str] = &["servers", "latencies", "slo", "grid", "connect"];
const LATENCY_KEYS: &[&str] = &["lat1", "lat2", "lat_disk"];

/// Checks an SLO file's keys against the documented ones (see the module docs), so a wrong
/// guess is named with the keys that would do, and a missing required `[mlms]` key is
/// named with what it means, instead of a bare serde message.
fn check_slo_keys(text: &str) -> anyhow::Result<()> {
    let doc: toml::Table = toml::from_str(text).context("not valid TOML")?;
    known(&doc, "the top level", TOP_KEYS)?;
    if let Some(ts) = doc.get("tenants").and_then(|v| v.as_array()) {
        for (i, t) in ts.iter().enumerate() {
            let Some(t) = t.as_table() else { continue };
            let name = t
                .get("name")
                .and_then(|n| n.as_str())
                .map_or(format!("[[tenants]] number {}", i + 1), |n| {
                    format!("tenant `{n}`")
                });
            known(t, &name, TENANT_KEYS)?;
            if let Some(slo) = t.get("slo").and_then(|v| v.as_table()) {
                known(slo, &format!("{name}: slo"), SLO_KEYS)?;
            }
        }
    }
    if let Some(m) = doc.get("mlms") {
        let m = m.as_table().context("`mlms` must be a table ([mlms])")?;
        known(m, "[mlms]", MLMS_KEYS)?;
        if !m.contains_key("servers") {
            bail!("[mlms]: missing `servers`, the level-2 capacity of each storage server in blocks (e.g. servers = [6000, 6000])");
        }
        match m.get("latencies") {
            None => bail!("[mlms]: missing `latencies`, e.g. latencies = {{ lat1 = 0.05, lat2 = 0.5, lat_disk = 8.0 }} (level-1 hit, level-2 hit, disk)"),
            Some(l) => {
                let l = l
                    .as_table()
                    .context("[mlms]: `latencies` must be a table { lat1, lat2, lat_disk }")?;
                known(l, "[mlms] latencies", LATENCY_KEYS)?;
                if let Some(k) = LATENCY_KEYS.iter().find(|k| !l.contains_key(**k)) {
                    bail!("[mlms] latencies: missing `{k}` (needs {})", LATENCY_KEYS.join(", "));
                }
            }
        }
    }
    Ok(())
}

/// Errors on the first key of `table` not in `accepted`, naming where it is.
fn known(table: &toml::Table, place: &str, accepted: &[&str]) -> anyhow::Result<()> {
    if let Some(k) = table.keys().find(|k| !accepted.contains(&k.as_str())) {
        bail!(
            "{place}: unknown key `{k}` (accepted: {})",
            accepted.join(", ")
        );
    }
    Ok(())
}

/// Writes to stdout; a reader that went away (`| head`) is not an error.
fn print(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
