//! The five papers' experiments in their quick form (`lachesis sim run scenarios/*.toml
//! --quick`), as CI runs them: every claim a scenario marks `ci = true` must hold, every
//! summary carries at least three claims with the paper's number beside ours, and
//! `lachesis report` builds one self-contained page from the runs.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const SCENARIOS: &[&str] = &["mlms", "moirai", "sopa", "automata", "sancache"];

#[test]
fn the_papers_quick_runs_keep_their_ci_claims_and_report() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = tempfile::tempdir().unwrap();
    let results = out.path().join("results");
    let bin = env!("CARGO_BIN_EXE_lachesis");
    let started = Instant::now();
    let mut cmd = Command::new(bin);
    cmd.args(["sim", "run", "--quick", "--out"]).arg(&results);
    for s in SCENARIOS {
        cmd.arg(root.join("scenarios").join(format!("{s}.toml")));
    }
    let run = cmd.output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let secs = started.elapsed().as_secs_f64();
    eprintln!("quick runs of the five scenarios: {secs:.1} s");
    let mut failed = Vec::new();
    for s in SCENARIOS {
        let text = std::fs::read_to_string(results.join(s).join("summary.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["quick"], true);
        let claims = v["claims"].as_array().unwrap();
        assert!(claims.len() >= 3, "{s}: {} claims", claims.len());
        assert!(
            claims
                .iter()
                .any(|c| c["rule"].as_str().unwrap().contains("lachesis")),
            "{s}: no claim compares lachesis with the paper's scheme"
        );
        for c in claims {
            assert!(c["paper"].as_str().is_some_and(|p| !p.is_empty()));
            assert!(c["ours"]
                .as_str()
                .is_some_and(|p| !p.starts_with("not evaluated")));
            if c["ci"] == true && c["holds"] != true {
                failed.push(format!("{s}: {} ({})", c["name"], c["ours"]));
            }
        }
    }
    assert!(failed.is_empty(), "CI claims that do not hold: {failed:#?}");
    let html = out.path().join("report.html");
    let rep = Command::new(bin)
        .args(["report", "-o"])
        .arg(&html)
        .arg(&results)
        .output()
        .unwrap();
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    for s in SCENARIOS {
        assert!(
            page.contains(&format!("id=\"{s}\"")),
            "{s} missing from the report"
        );
    }
    assert!(page.matches("data:image/png;base64,").count() >= 5 * 4);
    assert!(
        !page.contains("src=\"http"),
        "the page must not fetch anything"
    );
}
