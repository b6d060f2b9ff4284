//! The `lachesis` binary as a user runs it: real files in, numbers out.

use std::path::Path;
mod common;
use common::{lachesis, ok, shared};

fn json_lines(s: &str) -> Vec<serde_json::Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn trace_info_counts_the_shared_trace() {
    let out = ok(&["trace", "info", &shared("cloudPhysicsIO.csv"), "--json"]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["requests"], 113_872);
    assert_eq!(v["reads"], 46_974);
    assert_eq!(v["writes"], 66_898);
    let human = ok(&["trace", "info", &shared("cloudPhysicsIO.oracleGeneral.bin")]);
    assert!(human.contains("requests       113872"), "{human}");
}

#[test]
fn sim_json_has_the_documented_fields_and_libcachesim_numbers() {
    let out = ok(&[
        "sim",
        "--trace",
        &shared("cloudPhysicsIO.oracleGeneral.bin"),
        "--ignore-obj-size",
        "--policy",
        "lru,clock",
        "--size",
        "1000,5000",
        "--json",
    ]);
    let v = json_lines(&out);
    assert_eq!(v.len(), 4);
    for r in &v {
        for f in [
            "policy",
            "cache_size",
            "requests",
            "misses",
            "miss_ratio",
            "byte_miss_ratio",
            "seconds",
            "requests_per_sec",
        ] {
            assert!(!r[f].is_null(), "missing {f} in {r}");
        }
        assert_eq!(r["requests"], 113_872);
    }
    // libCacheSim's miss counts (see crates/policy/tests/libcachesim_parity.rs).
    let misses: Vec<(String, u64, u64)> = v
        .iter()
        .map(|r| {
            (
                r["policy"].as_str().unwrap().to_string(),
                r["cache_size"].as_u64().unwrap(),
                r["misses"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(misses.contains(&("lru".into(), 1000, 94823)));
    assert!(misses.contains(&("lru".into(), 5000, 91527)));
    assert!(misses.contains(&("clock".into(), 1000, 94727)));
    assert!(misses.contains(&("clock".into(), 5000, 91458)));
}

#[test]
fn sim_sizes_as_share_of_footprint_in_block_mode() {
    let out = ok(&[
        "sim",
        "--trace",
        &shared("cloudPhysicsIO.csv"),
        "--policy",
        "lru",
        "--size",
        "10%",
        "--json",
    ]);
    let r = &json_lines(&out)[0];
    // 266,042 unique 4 KiB blocks: 10% is 26,604.
    assert_eq!(r["cache_size"], 26_604);
    assert_eq!(r["mode"], "block");
    assert!(r["accesses"].as_u64().unwrap() > 113_872);
}

#[test]
fn sim_runs_on_the_built_in_workload() {
    let out = ok(&["sim", "--policy", "lru,arc", "--size", "5%"]);
    assert!(out.contains("built-in synthetic workload"), "{out}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("lru") || l.starts_with("arc"))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn bad_input_names_the_file_and_line_or_is_skipped() {
    let d = tempfile::tempdir().unwrap();
    let bad = write(
        d.path(),
        "bad.csv",
        "version,time,op,size,lbn\n1,1,28,512,0\n1,2,zz,512,8\n1,3,28,512,0\n",
    );
    let o = lachesis(&["sim", "--trace", &bad, "--policy", "lru", "--size", "10"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.csv") && err.contains("line 3") && err.contains("op"),
        "{err}"
    );
    let out = ok(&[
        "sim",
        "--trace",
        &bad,
        "--policy",
        "lru",
        "--size",
        "10",
        "--skip-bad",
        "--ignore-obj-size",
        "--json",
    ]);
    let r = &json_lines(&out)[0];
    assert_eq!(
        (
            r["skipped"].as_u64(),
            r["misses"].as_u64(),
            r["accesses"].as_u64()
        ),
        (Some(1), Some(1), Some(2))
    );
    let o = lachesis(&["sim", "--policy", "nosuch"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown policy `nosuch`"));
    let o = lachesis(&["sim", "--size", "-3%"]);
    assert!(!o.status.success());
}

#[test]
fn gen_then_info_round_trips() {
    let d = tempfile::tempdir().unwrap();
    let out = d
        .path()
        .join("z.oracleGeneral.bin.zst")
        .display()
        .to_string();
    ok(&["trace", "gen", "loop:objects=500,requests=2000", "-o", &out]);
    let v: serde_json::Value =
        serde_json::from_str(ok(&["trace", "info", &out, "--json"]).trim()).unwrap();
    assert_eq!(v["requests"], 2000);
    assert_eq!(v["unique_objects"], 500);
    // A loop of 500 through a 499-block LRU misses every time; through 500 blocks only cold.
    let s = json_lines(&ok(&[
        "sim",
        "--trace",
        &out,
        "--ignore-obj-size",
        "--policy",
        "lru",
        "--size",
        "499,500",
        "--json",
    ]));
    let misses: Vec<u64> = s.iter().map(|r| r["misses"].as_u64().unwrap()).collect();
    assert_eq!(misses, vec![2000, 500]);
}

#[test]
fn mrc_json_plot_and_exact_matches_sim() {
    let d = tempfile::tempdir().unwrap();
    let png = d.path().join("mrc.png");
    let out = ok(&[
        "mrc",
        "--trace",
        &shared("cloudPhysicsIO.oracleGeneral.bin"),
        "--ignore-obj-size",
        "--method",
        "exact,shards,minisim",
        "--policy",
        "arc",
        "--sizes",
        "1000,5000",
        "--json",
        "--plot",
        png.to_str().unwrap(),
    ]);
    let v = json_lines(&out);
    assert_eq!(v.len(), 3);
    for r in &v {
        for f in ["method", "policy", "requests", "seconds", "points"] {
            assert!(!r[f].is_null(), "missing {f}");
        }
        let sizes: Vec<u64> = r["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["cache_size"].as_u64().unwrap())
            .collect();
        assert_eq!(sizes, vec![0, 1000, 5000]);
    }
    // The exact curve is LRU's simulated miss ratio (94,823 and 91,527 misses of 113,872).
    let exact = &v[0]["points"];
    assert!((exact[1]["miss_ratio"].as_f64().unwrap() - 94_823.0 / 113_872.0).abs() < 1e-12);
    assert!((exact[2]["miss_ratio"].as_f64().unwrap() - 91_527.0 / 113_872.0).abs() < 1e-12);
    assert_eq!(v[2]["policy"], "arc");
    let bytes = std::fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "{} bytes",
        bytes.len()
    );
    let o = lachesis(&["mrc", "--method", "shards", "--rate", "0"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("rate"));
    // A negative rate reaches the check (not clap's "unexpected argument").
    let o = lachesis(&["mrc", "--method", "shards", "--rate", "-0.5"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("sampling rate -0.5 is not in (0, 1]"), "{err}");
}

#[test]
fn alloc_from_mrc_curves() {
    let d = tempfile::tempdir().unwrap();
    let mut curves = String::new();
    for (name, spec) in [
        ("hot", "zipf:alpha=1.0,objects=20000,requests=200000,seed=1"),
        ("loop", "loop:objects=8000,requests=200000"),
    ] {
        let t = d.path().join(format!("{name}.bin")).display().to_string();
        ok(&["trace", "gen", spec, "-o", &t]);
        let out = ok(&[
            "mrc", "--trace", &t, "--method", "exact", "--sizes", "40", "--json",
        ]);
        let mut v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        v["tenant"] = name.into();
        curves.push_str(&format!("{v}\n"));
    }
    let f = write(d.path(), "curves.jsonl", &curves);
    let out: serde_json::Value = serde_json::from_str(
        ok(&[
            "alloc",
            "--curves",
            &f,
            "--capacity",
            "12000",
            "--objective",
            "utility",
            "--json",
        ])
        .trim(),
    )
    .unwrap();
    let t = out["tenants"].as_array().unwrap();
    let size = |n: &str| {
        t.iter().find(|r| r["tenant"] == n).unwrap()["size"]
            .as_u64()
            .unwrap()
    };
    // The loop needs all of its 8,000 blocks to hit at all; utility gives them, the rest
    // goes to the Zipf tenant.
    assert_eq!(size("loop"), 8000);
    assert_eq!(size("hot"), 4000);
    assert!(out["seconds"].as_f64().is_some());
    // Fair share splits by requests (equal here).
    let fair: serde_json::Value = serde_json::from_str(
        ok(&[
            "alloc",
            "--curves",
            &f,
            "--capacity",
            "12000",
            "--objective",
            "fair",
            "--json",
        ])
        .trim(),
    )
    .unwrap();
    assert_eq!(fair["tenants"][0]["size"], 6000);
    // Fair share never gives a tenant more than its footprint while another waits: with
    // 20,000 blocks, the loop (8,000 distinct blocks) is capped at 8,000 and the Zipf
    // tenant gets the other 12,000 (issue 18: both got 10,000).
    let fair: serde_json::Value = serde_json::from_str(
        ok(&[
            "alloc",
            "--curves",
            &f,
            "--capacity",
            "20000",
            "--objective",
            "fair",
            "--json",
        ])
        .trim(),
    )
    .unwrap();
    assert_eq!(fair["tenants"][0]["size"], 12000);
    assert_eq!(fair["tenants"][1]["size"], 8000);
    // Bad input: zero capacity, unknown objective.
    assert!(!lachesis(&["alloc", "--curves", &f, "--capacity", "0"])
        .status
        .success());
    let o = lachesis(&[
        "alloc",
        "--curves",
        &f,
        "--capacity",
        "10",
        "--objective",
        "magic",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--objective magic"));
    let alloc = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["alloc", "--curves", &f, "--json"];
        args.extend_from_slice(extra);
        serde_json::from_str(ok(&args).trim()).unwrap()
    };
    let sizes = |v: &serde_json::Value| -> Vec<u64> {
        v["tenants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["size"].as_u64().unwrap())
            .collect()
    };
    // Bytes with a unit, converted with the curves' 4 KiB blocks; a step of 1,000 blocks.
    let v = alloc(&["--capacity", "48000KiB"]);
    assert_eq!(v["capacity"], 12000);
    assert_eq!(sizes(&v), [4000, 8000]);
    assert_eq!(
        sizes(&alloc(&["--capacity", "12000", "--step", "1000"])),
        [4000, 8000]
    );
    // Weights instead of the request counts: a tenant worth nothing gets nothing.
    let v = alloc(&["--capacity", "12000", "--weights", "hot=0"]);
    assert_eq!(sizes(&v), [0, 8000]);
    let v = alloc(&["--capacity", "12000", "--weights", "loop=0"]);
    assert_eq!(sizes(&v), [12000, 0]);
    assert!((v["tenants"][0]["predicted_hit_ratio"].as_f64().unwrap() - 0.898418).abs() < 1e-6);
    // SLOs: hot's latency target is met, loop's bandwidth target is out of its curve's reach.
    let slo = write(
        d.path(),
        "slo.toml",
        r#"
[[tenants]]
name = "hot"
slo = { kind = "latency", target = 5.5, cache = 1.0, storage = 10.0 }
[[tenants]]
name = "loop"
slo = { kind = "bandwidth", target = 990.0, cache = 1000.0, storage = 200.0 }
"#,
    );
    // An unmet SLO: the allocation is printed, and the exit status is 2 with a line naming
    // the tenant (issue 18: it used to exit 0).
    let o = lachesis(&[
        "alloc",
        "--curves",
        &f,
        "--json",
        "--capacity",
        "12000",
        "--objective",
        "slo",
        "--slo",
        &slo,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "lachesis: SLO not met for 1 tenant: loop"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(sizes(&v), [4000, 8000]);
    assert_eq!(v["tenants"][0]["slo_met"], true);
    assert!((v["tenants"][0]["predicted_latency"].as_f64().unwrap() - 2.9908225).abs() < 1e-9);
    assert_eq!(v["tenants"][1]["slo_met"], false);
    let why = v["tenants"][1]["reason"].as_str().unwrap();
    assert!(
        why.contains("unreachable") && why.contains("0.9875"),
        "{why}"
    );
    // MLMS: hot reaches server 0 only, loop every server.
    let mlms = |connect: &str| {
        write(
            d.path(),
            "mlms.toml",
            &format!(
                "[mlms]\nservers = [6000, 6000]\nlatencies = {{ lat1 = 0.05, lat2 = 0.5, lat_disk = 8.0 }}\n[mlms.connect]\n{connect}"
            ),
        )
    };
    let m = mlms("hot = [0]\n");
    let v = alloc(&["--capacity", "6000", "--objective", "mlms", "--slo", &m]);
    // MLMS hands out every block of spare space (in proportion to projected gains):
    // level 1's 6000 all to hot, level 2's 2 x 6000 all between the two.
    assert_eq!(sizes(&v), [6000, 0]);
    assert_eq!(v["tenants"][0]["level2_size"], 3935);
    assert_eq!(v["tenants"][1]["level2_size"], 8065);
    assert!((v["tenants"][1]["predicted_latency"].as_f64().unwrap() - 0.8).abs() < 1e-9);
    let human = ok(&[
        "alloc",
        "--curves",
        &f,
        "--capacity",
        "6000",
        "--objective",
        "mlms",
        "--slo",
        &m,
    ]);
    assert!(
        human.contains("level 2") && human.contains("8065"),
        "{human}"
    );
    // Bad input names what is wrong.
    let bad = |extra: &[&str]| {
        let mut args = vec!["alloc", "--curves", &f];
        args.extend_from_slice(extra);
        common::fails(&args)
    };
    let bad_connect = |connect: &str| {
        let slo = mlms(connect);
        bad(&["--capacity", "6000", "--objective", "mlms", "--slo", &slo])
    };
    let e = bad_connect("hot = [0]\nloop = []\n");
    assert!(
        e.contains("tenant `loop` is connected to no storage server"),
        "{e}"
    );
    let e = bad_connect("ghost = [0]\n");
    assert!(e.contains("mlms.connect names tenant `ghost`"), "{e}");
    // A wrong guess in [mlms] names the key and the accepted ones.
    let guess = |text: &str| {
        let slo = write(d.path(), "guess.toml", text);
        bad(&["--capacity", "6000", "--objective", "mlms", "--slo", &slo])
    };
    let e = guess("[mlms]\nservers = [6000]\nlevel2 = 6000\n");
    assert!(
        e.contains("guess.toml: [mlms]: unknown key `level2` (accepted: servers, latencies, slo, grid, connect)"),
        "{e}"
    );
    let e = guess("[mlms]\nservers = [6000]\nlatencies = { l1 = 0.1, lat2 = 1, lat_disk = 8 }\n");
    assert!(
        e.contains("[mlms] latencies: unknown key `l1` (accepted: lat1, lat2, lat_disk)"),
        "{e}"
    );
    let e = guess("[mlms]\nservers = [6000]\n");
    assert!(e.contains("[mlms]: missing `latencies`"), "{e}");
    let e = guess("[[tenants]]\nname = \"hot\"\nminimum = 5\n");
    assert!(
        e.contains(
            "tenant `hot`: unknown key `minimum` (accepted: name, weight, slo, min, max, priority)"
        ),
        "{e}"
    );
    let e = bad(&["--capacity", "12000", "--weights", "ghost=1"]);
    assert!(e.contains("--weights names tenant `ghost`"), "{e}");
    let e = bad(&["--capacity", "12000", "--weights", "hot=-1"]);
    assert!(e.contains("--weights: `-1` is not a weight"), "{e}");
    let e = bad(&["--capacity", "1KiB"]);
    assert!(e.contains("--capacity 1KiB is less than one block"), "{e}");
    let e = bad(&["--capacity", "0"]);
    assert!(e.contains("capacity is zero"), "{e}");
    let e = bad(&["--capacity", "12000", "--step", "13000"]);
    assert!(
        e.contains("step is 13000 blocks, larger than the capacity"),
        "{e}"
    );
    // A curve whose miss ratio rises: an error naming the tenant, unless repaired.
    let mut lines: Vec<serde_json::Value> = curves
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[0]["points"][3]["miss_ratio"] = 0.999.into();
    let text: String = lines.iter().map(|v| format!("{v}\n")).collect();
    let rising = write(d.path(), "rising.jsonl", &text);
    let e = common::fails(&["alloc", "--curves", &rising, "--capacity", "12000"]);
    assert!(
        e.contains("tenant `hot`") && e.contains("not monotone"),
        "{e}"
    );
    ok(&[
        "alloc",
        "--curves",
        &rising,
        "--capacity",
        "12000",
        "--repair-curves",
    ]);
}

#[test]
fn convert_warns_when_oracle_drops_writes_and_lachesis_keeps_them() {
    let d = tempfile::tempdir().unwrap();
    let oracle = d.path().join("cp.bin").display().to_string();
    let o = lachesis(&[
        "trace",
        "convert",
        &shared("cloudPhysicsIO.csv"),
        "-o",
        &oracle,
    ]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.trim(),
        "lachesis: warning: oracleGeneral has no operation field: 66898 writes (58.7 %) now \
         read back as reads; use --to lachesis to keep them"
    );
    // The lachesis CSV keeps the operations and reads back through the same readers.
    for name in ["cp.csv", "cp.csv.zst"] {
        let csv = d.path().join(name).display().to_string();
        let o = lachesis(&[
            "trace",
            "convert",
            &shared("cloudPhysicsIO.csv"),
            "--to",
            "lachesis",
            "-o",
            &csv,
        ]);
        assert!(o.status.success());
        assert!(
            o.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value =
            serde_json::from_str(ok(&["trace", "info", &csv, "--json"]).trim()).unwrap();
        assert_eq!(
            (&v["requests"], &v["reads"], &v["writes"]),
            (&113_872.into(), &46_974.into(), &66_898.into())
        );
        assert_eq!(v["unique_objects"], 48_974);
    }
    let head = std::fs::read_to_string(d.path().join("cp.csv")).unwrap();
    assert!(
        head.starts_with("time_us,tenant,volume,op,offset,len\n"),
        "{}",
        &head[..80]
    );
    let e = common::fails(&["trace", "convert", &oracle, "--to", "csv", "-o", &oracle]);
    assert!(e.contains("--to csv: use oracle or lachesis"), "{e}");
}

#[test]
fn policies_with_parameters_repeat_and_both_size_spellings_work() {
    let t = shared("cloudPhysicsIO.oracleGeneral.bin");
    // A policy with two parameters, --policy repeated, a plain list, and --sizes on sim.
    let out = ok(&[
        "sim",
        "--trace",
        &t,
        "--ignore-obj-size",
        "--policy",
        "2q:kin=0.3,kout=0.6",
        "--policy",
        "lru,clock",
        "--sizes",
        "1000",
        "--json",
    ]);
    let v = json_lines(&out);
    let names: Vec<&str> = v
        .iter()
        .map(|r| r["policy_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["2q(kin=0.3,kout=0.6)", "lru", "clock"]);
    assert_eq!(v[1]["cache_size"], 1000);
    let e = common::fails(&["sim", "--trace", &t, "--policy", "2q:kin=0.3,kot=0.6"]);
    assert!(
        e.contains("--policy 2q:kin=0.3,kot=0.6") && e.contains("`kot`"),
        "{e}"
    );
    // mrc: several minisim policies, one curve each, and --size on mrc.
    let out = ok(&[
        "mrc",
        "--trace",
        &t,
        "--ignore-obj-size",
        "--method",
        "minisim",
        "--rate",
        "0.5",
        "--policy",
        "lru,arc",
        "--policy",
        "2q:kin=0.3,kout=0.6",
        "--size",
        "1000,5000",
        "--json",
    ]);
    let v = json_lines(&out);
    let policies: Vec<&str> = v.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(policies, ["lru", "arc", "2q:kin=0.3,kout=0.6"]);
    for r in &v {
        let sizes: Vec<u64> = r["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["cache_size"].as_u64().unwrap())
            .collect();
        assert_eq!(sizes, [0, 1000, 5000], "{r}");
    }
}

#[test]
fn bench_sim_without_libcachesim_says_what_to_install() {
    // `false` stands for a Python without the package: the import check fails.
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().display().to_string();
    let e = common::fails(&["bench", "sim", "--python", "false", "--dir", &dir]);
    assert_eq!(
        e.trim(),
        "lachesis: the libCacheSim peer is missing: `false -c 'import libcachesim'` failed; \
         install it with `false -m pip install libcachesim` (or give --python)"
    );
    // Nothing was generated before the check.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn bench_nbd_names_its_rows_when_one_is_unknown() {
    let err = common::fails(&["bench", "nbd", "--only", "hit-qd1,qd64"]);
    assert!(
        err.contains("--only qd64: not a row; the rows are hit-qd32, hit-qd1, hit-seq, miss, l1"),
        "{err}"
    );
}

#[test]
fn a_reader_that_stops_early_is_not_a_crash() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_lachesis"))
        .args(["mrc", "--sizes", "20000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("trace: built-in"), "{first}");
    // The read end is dropped here, as `| head -1` would.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(!err.contains("panicked"), "{err}");
}
