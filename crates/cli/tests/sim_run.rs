//! `lachesis sim run` as a user runs it: a scenario with a real trace tenant, the tables,
//! `--json`, `--out` files, `--seed`, `--seeds`, and a bad scenario named with its key.

mod common;
use common::{fails, ok, shared};

fn scenario(dir: &std::path::Path) -> std::path::PathBuf {
    let text = format!(
        r#"
[sim]
block_size = "4KiB"
interval = "20s"
warmup = 0.1
[[host]]
name = "h1"
cache = "8MiB"
[[server]]
name = "s1"
cache = "16MiB"
disk = "hdd"
[[server]]
name = "s2"
cache = "16MiB"
disk = "ssd"
[[tenant]]
name = "vm"
trace = "{}"
host = "h1"
servers = ["s1", "s2"]
speed = 4.0
slo = {{ degradation = 0.05 }}
[[tenant]]
name = "db"
synthetic = "zipf:alpha=1.0,objects=20000,requests=60000,seed=2"
host = "h1"
servers = ["s2"]
depth = 2
slo = {{ latency_ms = 1.5 }}
"#,
        shared("cloudPhysicsIO.csv")
    );
    let p = dir.join("small.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn sim_run_prints_tables_writes_results_and_replays_by_seed() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path());
    let sc = sc.to_str().unwrap();
    let table = ok(&["sim", "run", sc, "--scheme", "fair,mlms,lachesis"]);
    for s in [
        "fair", "mlms", "lachesis", "speedup", "p99 ms", "L2 hit", "SLO met",
    ] {
        assert!(table.contains(s), "{s} missing from\n{table}");
    }
    let out = dir.path().join("res");
    let json = ok(&[
        "sim",
        "run",
        sc,
        "--scheme",
        "lachesis",
        "--json",
        "--seed",
        "7",
        "--out",
        out.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    // The CloudPhysics trace has 113,872 requests; the synthetic tenant 60,000.
    assert_eq!(v["requests"], 113_872 + 60_000);
    assert!(v["schemes"]["fair"]["fair_speedup"].as_f64().unwrap() == 1.0);
    let l = &v["schemes"]["lachesis"];
    assert!(l["tenants"]["vm"]["l1_hit_ratio"].as_f64().unwrap() > 0.0);
    assert!(l["tenants"]["vm"]["slo_met_share"].is_number());
    // `db`, a closed loop of 60,000 requests, is done before the warm-up ends: nothing of
    // it is counted, so its SLO is unjudged, never reported as met.
    assert_eq!(l["tenants"]["db"]["requests"], 0);
    assert!(l["tenants"]["db"]["slo_met_share"].is_null());
    assert_eq!(l["tenants"]["db"]["slo_unjudged"], true);
    assert!(l["slo_violations"].as_u64().unwrap() >= 1);
    for f in [
        "intervals.csv",
        "summary.json",
        "latency.png",
        "hit_ratio.png",
        "allocation.png",
        "tenant_latency.png",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
    let again = ok(&[
        "sim", "run", sc, "--scheme", "lachesis", "--json", "--seed", "7",
    ]);
    let w: serde_json::Value = serde_json::from_str(&again).unwrap();
    for s in ["fair", "lachesis"] {
        assert_eq!(
            v["schemes"][s]["tenants"], w["schemes"][s]["tenants"],
            "the same seed gives the same results"
        );
    }
}

#[test]
fn a_bad_scenario_names_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path());
    let text = std::fs::read_to_string(&sc)
        .unwrap()
        .replace("servers = [\"s2\"]", "servers = [\"s9\"]");
    std::fs::write(&sc, text).unwrap();
    let err = fails(&["sim", "run", sc.to_str().unwrap()]);
    assert!(
        err.contains("small.toml") && err.contains("tenant \"db\".servers") && err.contains("s9"),
        "{err}"
    );
    let sc = scenario(dir.path());
    let err = fails(&["sim", "run", sc.to_str().unwrap(), "--scheme", "fastest"]);
    assert!(err.contains("fastest") && err.contains("lachesis"), "{err}");
}

#[test]
fn seeds_give_each_figure_as_median_and_range_and_bad_seeds_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path());
    let sc = sc.to_str().unwrap();
    let out = dir.path().join("res");
    let json = ok(&[
        "sim",
        "run",
        sc,
        "--scheme",
        "lachesis",
        "--seeds",
        "3..4",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["seeds"], serde_json::json!([3, 4]));
    let fair = &v["schemes"]["fair"]["fair_speedup"];
    assert_eq!(
        (fair["median"].as_f64(), fair["min"].as_f64()),
        (Some(1.0), Some(1.0))
    );
    // Each tenant against fair share at the same seed; the range brackets the median.
    let vm = &v["schemes"]["lachesis"]["tenants"]["vm"]["vs_fair"];
    let (lo, mid, hi) = (
        vm["min"].as_f64().unwrap(),
        vm["median"].as_f64().unwrap(),
        vm["max"].as_f64().unwrap(),
    );
    assert!(lo > 0.0 && lo <= mid && mid <= hi, "{vm}");
    // The two seeds' own results, and the spread beside them.
    for f in ["seed-3/summary.json", "seed-4/summary.json", "spread.json"] {
        assert!(out.join(f).exists(), "{f}");
    }
    let a: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("seed-3/summary.json")).unwrap())
            .unwrap();
    let b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("seed-4/summary.json")).unwrap())
            .unwrap();
    assert_ne!(
        a["schemes"]["lachesis"]["tenants"]["vm"]["mean_latency_ms"],
        b["schemes"]["lachesis"]["tenants"]["vm"]["mean_latency_ms"],
        "two seeds, two runs"
    );
    let err = fails(&["sim", "run", sc, "--seeds", "5..2"]);
    assert!(
        err.contains("--seeds `5..2`") && err.contains("below the start"),
        "{err}"
    );
}
