//! `lachesis sim run` as a user runs it: a scenario with a real trace tenant, the tables,
//! `--json`, `--out` files, `--seed`, and a bad scenario named with its key.

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
    assert!(l["tenants"]["db"]["slo_met_share"].is_number());
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
