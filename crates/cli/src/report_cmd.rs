//! `lachesis report DIR... -o report.html`: one self-contained HTML page from the folders
//! `lachesis sim run --out` wrote. Per experiment (folder): the setup (the scenario file's
//! leading comment, which names the stand-in workloads, and the whole file folded), the
//! table per scheme, the plots the run drew (PNG, embedded as base64 data URIs), and the
//! claims with the paper's number beside ours and, where a claim does not hold, the
//! scenario's explanation. Nothing is fetched when the page is opened. With `--markdown
//! FILE` it also writes the claims of every run as one Markdown table (`docs/claims.md` is
//! this file, written by the command).

use anyhow::{bail, Context};
use clap::Args;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arguments of `lachesis report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run folders (each with summary.json, written by `lachesis sim run --out`); a folder
    /// without summary.json is searched one level down (`results/` holds one per scenario).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short = 'o', long = "out", default_value = "report.html")]
    out: PathBuf,
    /// Also write the claims of every run as a Markdown table to this file.
    #[arg(long)]
    markdown: Option<PathBuf>,
}

/// The plots, in the order shown, with their captions.
const PLOTS: &[(&str, &str)] = &[
    ("latency.png", "Mean latency per scheme over time"),
    ("hit_ratio.png", "Hit ratio per level over time"),
    ("allocation.png", "Allocations over time"),
    (
        "tenant_latency.png",
        "Each tenant's latency against its target",
    ),
    ("deviance.png", "Deviance from targets over time"),
    ("migrations.png", "Hot-tier migrations over time"),
];

/// Runs `lachesis report`.
pub fn run(a: ReportArgs) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    let is_run = |p: &Path| p.join("summary.json").is_file() || p.join("spread.json").is_file();
    for d in &a.dirs {
        if is_run(d) {
            runs.push(d.clone());
        } else if d.is_dir() {
            let mut subs: Vec<PathBuf> = std::fs::read_dir(d)
                .with_context(|| format!("reading {}", d.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| is_run(p))
                .collect();
            subs.sort();
            if subs.is_empty() {
                bail!(
                    "{}: no summary.json or spread.json in it or in a folder below",
                    d.display()
                );
            }
            runs.extend(subs);
        } else {
            bail!("{}: not a folder", d.display());
        }
    }
    if let Some(md) = &a.markdown {
        let table = markdown_claims(&runs)?;
        std::fs::write(md, table).with_context(|| format!("writing {}", md.display()))?;
    }
    let mut html = String::new();
    html.push_str(HEAD);
    let mut toc = String::from("<ul>");
    let mut body = String::new();
    let mut tally = Tally::default();
    for dir in &runs {
        let rows = claim_rows(dir)?;
        tally.add(&rows);
        let s = section(&plots_dir(dir), &rows)?;
        let _ = write!(toc, "<li><a href=\"#{0}\">{0}</a></li>", esc(&s.0));
        body.push_str(&s.1);
    }
    toc.push_str("</ul>");
    let _ = writeln!(
        html,
        "<h1>Lachesis: the papers' experiments</h1>\
         <p>{} experiment(s). {} Each claim's <em>ours</em> column is the rule with the \
         numbers a run measured (the first seed's where several seeds ran; a claim then holds \
         only if it holds at every seed); a claim that does not hold says why below it.</p>\
         {toc}{body}</body></html>",
        runs.len(),
        esc(&tally.sentence())
    );
    std::fs::write(&a.out, html).with_context(|| format!("writing {}", a.out.display()))?;
    eprintln!(
        "wrote {} ({} experiments; {})",
        a.out.display(),
        runs.len(),
        tally.sentence()
    );
    Ok(())
}

/// One claim of one experiment as the report shows it.
struct ClaimRow {
    experiment: String,
    name: String,
    paper: String,
    rule: String,
    ours: String,
    explain: Option<String>,
    kind: String,
    /// Seeds it held at, of seeds it was evaluated at (`(1, 1)` or `(0, 1)` for one run).
    held: (usize, usize),
}

impl ClaimRow {
    fn holds(&self) -> bool {
        self.held.1 > 0 && self.held.0 == self.held.1
    }

    fn held_text(&self) -> String {
        match self.held {
            (_, 1) | (_, 0) => if self.holds() { "yes" } else { "no" }.to_string(),
            (k, n) => format!("{k} of {n} seeds"),
        }
    }
}

/// Claims held and counted per kind; sanity checks are counted apart, never with claims.
#[derive(Default)]
struct Tally {
    paper: (usize, usize),
    ours: (usize, usize),
    sanity: (usize, usize),
}

impl Tally {
    fn add(&mut self, rows: &[ClaimRow]) {
        for r in rows {
            let t = match r.kind.as_str() {
                "ours" => &mut self.ours,
                "sanity" => &mut self.sanity,
                _ => &mut self.paper,
            };
            t.1 += 1;
            t.0 += r.holds() as usize;
        }
    }

    fn sentence(&self) -> String {
        format!(
            "{} of {} of the papers' claims hold, {} of {} of ours; {} of {} sanity checks pass \
             (not counted as claims).",
            self.paper.0, self.paper.1, self.ours.0, self.ours.1, self.sanity.0, self.sanity.1
        )
    }
}

/// The folder whose plots and scenario the report shows for a run: the run itself, or
/// for a run over several seeds the first seed's folder.
fn plots_dir(dir: &Path) -> PathBuf {
    if dir.join("summary.json").is_file() {
        return dir.to_path_buf();
    }
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("summary.json").is_file())
        .collect();
    seeds.sort();
    seeds
        .into_iter()
        .next()
        .unwrap_or_else(|| dir.to_path_buf())
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The claims of a run (`summary.json`) or of a run over several seeds (`spread.json`: held
/// at how many of them).
fn claim_rows(dir: &Path) -> anyhow::Result<Vec<ClaimRow>> {
    let text = |c: &Value, k: &str| c[k].as_str().unwrap_or("").to_string();
    let kind = |c: &Value| c["kind"].as_str().unwrap_or("paper").to_string();
    let spread = dir.join("spread.json");
    if spread.is_file() {
        let v = read_json(&spread)?;
        let name = v["scenario"].as_str().unwrap_or("?").to_string();
        return Ok(v["claims"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| ClaimRow {
                experiment: name.clone(),
                name: text(c, "name"),
                paper: text(c, "paper"),
                rule: text(c, "rule"),
                ours: c["ours"][0].as_str().unwrap_or("").to_string(),
                explain: None,
                kind: kind(c),
                held: (
                    c["holds_at"].as_array().map_or(0, Vec::len),
                    c["of"].as_u64().unwrap_or(0) as usize,
                ),
            })
            .collect());
    }
    let v = read_json(&dir.join("summary.json"))?;
    let name = v["scenario"].as_str().unwrap_or("?").to_string();
    Ok(v["claims"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| ClaimRow {
            experiment: name.clone(),
            name: text(c, "name"),
            paper: text(c, "paper"),
            rule: text(c, "rule"),
            ours: text(c, "ours"),
            explain: c["explain"].as_str().map(str::to_string),
            kind: kind(c),
            held: ((c["holds"].as_bool() == Some(true)) as usize, 1),
        })
        .collect())
}

/// The claims of every run as one Markdown table, with the counts that hold per kind.
fn markdown_claims(runs: &[PathBuf]) -> anyhow::Result<String> {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let (mut rows, mut tally) = (String::new(), Tally::default());
    for dir in runs {
        let claims = claim_rows(dir)?;
        tally.add(&claims);
        for c in &claims {
            let _ = writeln!(
                rows,
                "| {} | {} | {} | {} | `{}` | {} |",
                cell(&c.experiment),
                cell(&c.name),
                c.kind,
                cell(&c.paper),
                cell(&c.ours),
                c.held_text()
            );
        }
    }
    Ok(format!(
        "{}\n\n| experiment | claim | kind | paper | ours | holds |\n\
         |---|---|---|---|---|---|\n{rows}",
        tally.sentence()
    ))
}

fn section(dir: &Path, claims: &[ClaimRow]) -> anyhow::Result<(String, String)> {
    let path = dir.join("summary.json");
    let v = read_json(&path)?;
    let name = v["scenario"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| dir.display().to_string());
    let mut h = String::new();
    let _ = write!(h, "<section id=\"{0}\"><h2>{0}</h2>", esc(&name));
    let secs = v["seconds"].as_f64().unwrap_or(0.0);
    let _ = write!(
        h,
        "<p>{} requests per scheme over {:.0} simulated seconds{}; results from <code>{}</code>.</p>",
        v["requests"].as_u64().unwrap_or(0),
        secs,
        if v["quick"].as_bool() == Some(true) {
            " (quick form)"
        } else {
            ""
        },
        esc(&dir.display().to_string())
    );
    // Setup: the scenario's leading comment, and the file.
    if let Ok(sc) = std::fs::read_to_string(dir.join("scenario.toml")) {
        let intro: Vec<&str> = sc
            .lines()
            .take_while(|l| l.starts_with('#'))
            .map(|l| l.trim_start_matches('#').trim_start_matches(' '))
            .collect();
        if !intro.is_empty() {
            let _ = write!(
                h,
                "<h3>Setup</h3><pre class=\"setup\">{}</pre>",
                esc(&intro.join("\n"))
            );
        }
        let _ = write!(
            h,
            "<details><summary>scenario file</summary><pre>{}</pre></details>",
            esc(&sc)
        );
    }
    if !claims.is_empty() {
        h.push_str(
            "<h3>Claims</h3><table><tr><th>claim</th><th>kind</th><th>paper</th><th>ours</th>\
             <th>holds</th></tr>",
        );
        for c in claims {
            let ok = c.holds();
            let _ = write!(
                h,
                "<tr class=\"{}\"><td>{}<div class=\"rule\">{}</div>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td></tr>",
                if ok { "ok" } else { "no" },
                esc(&c.name),
                esc(&c.rule),
                match (ok, &c.explain) {
                    (false, Some(e)) => format!("<div class=\"why\">Why not: {}</div>", esc(e)),
                    _ => String::new(),
                },
                esc(&c.kind),
                esc(&c.paper),
                esc(&c.ours),
                esc(&c.held_text())
            );
        }
        h.push_str("</table>");
    }
    // Schemes.
    if let Some(schemes) = v["schemes"].as_object() {
        h.push_str(
            "<h3>Schemes</h3><table><tr><th>scheme</th><th>fair speedup</th><th>mean ms</th>\
             <th>p99 ms</th><th>SLO violations</th><th>IOPS</th><th>L1 hit</th><th>L2 hit</th>\
             <th>migrations</th><th>policy switches</th></tr>",
        );
        for (n, s) in schemes {
            let f = |k: &str| s[k].as_f64().unwrap_or(0.0);
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{:.1}</td>\
                 <td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{}</td></tr>",
                esc(n),
                f("fair_speedup"),
                f("mean_latency_ms"),
                f("p99_latency_ms"),
                s["slo_violations"].as_u64().unwrap_or(0),
                f("iops"),
                f("l1_hit_ratio"),
                f("l2_hit_ratio"),
                s["migrations"].as_u64().unwrap_or(0),
                s["policy_switches"].as_u64().unwrap_or(0),
            );
        }
        h.push_str("</table>");
        let phases = schemes.values().any(|s| {
            s["phase_hit_ratio"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        });
        if phases {
            h.push_str(
                "<h3>Hit ratio per phase</h3><table><tr><th>scheme</th><th>per phase</th></tr>",
            );
            for (n, s) in schemes {
                let p: Vec<String> = s["phase_hit_ratio"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|x| format!("{:.3}", x.as_f64().unwrap_or(0.0)))
                            .collect()
                    })
                    .unwrap_or_default();
                let _ = write!(h, "<tr><td>{}</td><td>{}</td></tr>", esc(n), p.join(" / "));
            }
            h.push_str("</table>");
        }
    }
    // Plots.
    h.push_str("<h3>Plots</h3>");
    for (file, caption) in PLOTS {
        let p = dir.join(file);
        if let Ok(bytes) = std::fs::read(&p) {
            let _ = write!(
                h,
                "<figure><img alt=\"{0}\" src=\"data:image/png;base64,{1}\"><figcaption>{0}</figcaption></figure>",
                esc(caption),
                base64(&bytes)
            );
        }
    }
    h.push_str("</section>");
    Ok((name, h))
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Standard base64 with padding.
fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16
            | (c.get(1).copied().unwrap_or(0) as u32) << 8
            | c.get(2).copied().unwrap_or(0) as u32;
        for k in 0..4 {
            if k <= c.len() {
                s.push(A[(n >> (18 - 6 * k)) as usize & 63] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

const HEAD: &str = "<!DOCTYPE html><html><head><meta charset=\"utf-8\">\
<title>Lachesis: the papers' experiments</title><style>\
body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;\
vertical-align:top;font-size:14px}th{background:#f3f3f3}tr.ok td:last-child{background:#dfd}\
tr.no td:last-child{background:#fdd}.rule{font-family:monospace;font-size:12px;color:#555}\
.why{font-size:12px;color:#933;margin-top:4px}pre{background:#f8f8f8;padding:8px;\
overflow-x:auto;font-size:13px}figure{margin:1em 0}img{max-width:100%;border:1px solid #ddd}\
section{border-top:2px solid #888;margin-top:2em}</style></head><body>";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_examples() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }

    #[test]
    fn the_markdown_table_lists_every_claim_and_counts_those_that_hold() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("mlms");
        std::fs::create_dir(&run).unwrap();
        let summary = serde_json::json!({
            "scenario": "mlms",
            "claims": [
                {"name": "a | b", "paper": "+12.6 %", "ours": "1.01 >= 1.126", "holds": false},
                {"name": "c", "paper": "x", "ours": "0 == 0", "holds": true, "kind": "ours"},
                {"name": "d", "paper": "y", "ours": "1 >= 0", "holds": true, "kind": "sanity"}
            ]
        });
        std::fs::write(run.join("summary.json"), summary.to_string()).unwrap();
        let md = markdown_claims(std::slice::from_ref(&run)).unwrap();
        assert!(
            md.starts_with(
                "0 of 1 of the papers' claims hold, 1 of 1 of ours; 1 of 1 sanity checks pass"
            ),
            "{md}"
        );
        assert!(
            md.contains("| mlms | a \\| b | paper | +12.6 % | `1.01 >= 1.126` | no |"),
            "{md}"
        );
        assert!(
            md.contains("| mlms | c | ours | x | `0 == 0` | yes |"),
            "{md}"
        );
        assert_eq!(md.lines().filter(|l| l.starts_with("| mlms")).count(), 3);
        // A run over seeds: held at how many.
        let seeds = dir.path().join("mlms-seeds");
        std::fs::create_dir(&seeds).unwrap();
        let spread = serde_json::json!({
            "scenario": "mlms",
            "claims": [{"name": "e", "paper": "z", "rule": "r", "holds_at": [1, 3], "of": 5,
                        "ours": ["1 >= 2", "3 >= 2"], "kind": "paper"}]
        });
        std::fs::write(seeds.join("spread.json"), spread.to_string()).unwrap();
        let md = markdown_claims(&[seeds]).unwrap();
        assert!(
            md.contains("| mlms | e | paper | z | `1 >= 2` | 2 of 5 seeds |"),
            "{md}"
        );
        assert!(md.starts_with("0 of 1 of the papers' claims hold"), "{md}");
    }
}
