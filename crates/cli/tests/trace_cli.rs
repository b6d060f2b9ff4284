//! `lachesis trace` as a user runs it: the built binary on the shared CloudPhysics trace and
//! on hand-made files, checking the numbers it prints and the files it writes.

use std::path::Path;
mod common;
use common::{fails, ok, shared};

fn info_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["trace", "info"];
    a.extend_from_slice(args);
    a.push("--json");
    serde_json::from_str(ok(&a).trim()).unwrap()
}

/// `obj_id` of every record of an oracleGeneral file (plain).
fn obj_ids(path: &Path) -> Vec<u64> {
    std::fs::read(path)
        .unwrap()
        .chunks(24)
        .map(|r| u64::from_le_bytes(r[4..12].try_into().unwrap()))
        .collect()
}

#[test]
fn info_on_the_shared_csv() {
    let v = info_json(&[&shared("cloudPhysicsIO.csv")]);
    assert_eq!(v["requests"], 113_872);
    assert_eq!(v["reads"], 46_974);
    assert_eq!(v["writes"], 66_898);
    assert_eq!(
        (v["trims"].as_u64(), v["flushes"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(v["unique_objects"], 48_974);
    assert_eq!(v["unique_blocks"], 266_042);
    assert_eq!(v["footprint_bytes"], 266_042u64 * 4096);
    assert_eq!(v["data_bytes"], 4_205_978_112u64);
    // Two hours: `time` is in seconds (see the cloudphysics reader).
    assert_eq!(v["time_span_us"], 7_200_000_000u64);
    assert_eq!(v["skipped"], 0);
    // Block counts follow --block-size.
    let big = info_json(&[&shared("cloudPhysicsIO.csv"), "--block-size", "65536"]);
    assert!(big["unique_blocks"].as_u64().unwrap() < 266_042 / 4);
}

#[test]
fn info_on_the_shared_oracle_trace_is_human_readable() {
    let out = ok(&["trace", "info", &shared("cloudPhysicsIO.oracleGeneral.bin")]);
    for want in [
        "requests       113872",
        "113872 reads (100.0%)",
        "unique objects 48974",
        "time span      7200.000 s",
    ] {
        assert!(out.contains(want), "missing `{want}` in\n{out}");
    }
}

#[test]
fn convert_keeps_object_ids_and_compresses() {
    let d = tempfile::tempdir().unwrap();
    let plain = d.path().join("cp.oracleGeneral.bin");
    let out = ok(&[
        "trace",
        "convert",
        &shared("cloudPhysicsIO.csv"),
        "-o",
        plain.to_str().unwrap(),
    ]);
    assert!(out.contains("wrote 113872 records"), "{out}");
    // Same obj_id record by record as libCacheSim's own conversion.
    let ours = obj_ids(&plain);
    let theirs = obj_ids(Path::new(&shared("cloudPhysicsIO.oracleGeneral.bin")));
    assert_eq!(ours.len(), 113_872);
    assert_eq!(ours, theirs);

    let zst = d.path().join("cp.oracleGeneral.bin.zst");
    ok(&[
        "trace",
        "convert",
        &shared("cloudPhysicsIO.csv"),
        "--next-access",
        "-o",
        zst.to_str().unwrap(),
    ]);
    let bytes = std::fs::read(&zst).unwrap();
    assert_eq!(&bytes[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
    assert!(bytes.len() < 113_872 * 24 / 2);
    let v = info_json(&[zst.to_str().unwrap()]);
    assert_eq!(
        (v["requests"].as_u64(), v["unique_objects"].as_u64()),
        (Some(113_872), Some(48_974))
    );
}

#[test]
fn gen_writes_the_exact_pattern() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("g.oracleGeneral.bin");
    let msg = ok(&[
        "trace",
        "gen",
        "phases(loop:objects=3,requests=6;scan:objects=2,requests=2,start=100)",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(msg.contains("wrote 8 requests"), "{msg}");
    // 4096-byte blocks are 8 sectors apart.
    assert_eq!(obj_ids(&out), vec![0, 8, 16, 0, 8, 16, 800, 808]);
    let v = info_json(&[out.to_str().unwrap()]);
    assert_eq!(
        (v["requests"].as_u64(), v["unique_objects"].as_u64()),
        (Some(8), Some(5))
    );

    let e = fails(&[
        "trace",
        "gen",
        "zipf:alpha=oops",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(e.contains("`alpha`") && e.lines().count() == 1, "{e}");
}

#[test]
fn gen_to_lachesis_keeps_writes_and_tenants() {
    let d = tempfile::tempdir().unwrap();
    let spec = "tenants(loop:objects=4,requests=400,read=0.5,seed=3@1;scan:requests=100@1)";
    let csv = d.path().join("g.csv");
    let msg = ok(&[
        "trace",
        "gen",
        spec,
        "--to",
        "lachesis",
        "-o",
        csv.to_str().unwrap(),
    ]);
    assert!(msg.contains("wrote 500 requests"), "{msg}");
    let v = info_json(&[csv.to_str().unwrap()]);
    assert_eq!(v["requests"], 500);
    let writes = v["writes"].as_u64().unwrap();
    assert!((150..250).contains(&writes), "{v}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let tenants: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.split(',').nth(1))
        .filter(|t| t.parse::<u32>().is_ok())
        .collect();
    assert_eq!(tenants.len(), 2, "{tenants:?}");

    // The same spec to oracleGeneral says what it loses.
    let bin = d.path().join("g.oracleGeneral.bin");
    let o = common::lachesis(&["trace", "gen", spec, "-o", bin.to_str().unwrap()]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{writes} writes")) && err.contains("--to lachesis"),
        "{err}"
    );
    let e = fails(&[
        "trace",
        "gen",
        spec,
        "--to",
        "csv",
        "-o",
        bin.to_str().unwrap(),
    ]);
    assert!(e.contains("--to csv"), "{e}");
}

#[test]
fn bad_input_is_one_line_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.csv");
    std::fs::write(
        &bad,
        "version,time,op,size,lbn\n1,1,28,512,0\n1,x,28,512,0\n1,2,99,512,8\n1,3,2a,512,8\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    let e = fails(&["trace", "info", bad]);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains(bad) && e.contains("line 3") && e.contains("`time`"),
        "{e}"
    );
    let v = info_json(&[bad, "--skip-bad"]);
    assert_eq!(
        (v["requests"].as_u64(), v["skipped"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(v["writes"], 1);

    let e = fails(&["trace", "info", bad, "--format", "tape"]);
    assert!(
        e.contains("unknown trace format `tape`") && e.contains("cloudphysics"),
        "{e}"
    );
    let e = fails(&["trace", "info", "/nonexistent/t.bin"]);
    assert!(e.contains("/nonexistent/t.bin"), "{e}");
}

#[test]
fn other_formats_through_the_command_line() {
    let d = tempfile::tempdir().unwrap();
    let blk = d.path().join("sda.blkparse");
    std::fs::write(
        &blk,
        "  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]\n\
         \x20 8,0    3        2     0.000100000   697  C   W 223490 + 8 [0]\n\
         \x20 8,16   1        3     1.000000000   700  Q   R 100 + 16 [cat]\n\
         \x20 8,16   1        4     1.000200000   700  C   R 100 + 16 [0]\n\
         CPU0 (sda):\n Reads Queued:           1,        8KiB\n",
    )
    .unwrap();
    let q = info_json(&[blk.to_str().unwrap()]);
    assert_eq!(
        (
            q["requests"].as_u64(),
            q["reads"].as_u64(),
            q["volumes"].as_u64()
        ),
        (Some(2), Some(1), Some(2))
    );
    let c = info_json(&[blk.to_str().unwrap(), "--format", "blkparse:C"]);
    assert_eq!(c["time_span_us"], 1_000_100);

    let csv = d.path().join("mine.txt");
    std::fs::write(&csv, "t;rw;lba;n\n0.5;W;8;4096\n1.5;R;16;8192\n").unwrap();
    let v = info_json(&[
        csv.to_str().unwrap(),
        "--format",
        "csv:time=0,op=1,offset=2,len=3,offset_unit=512,time_unit=s,header=1,delim=semicolon",
    ]);
    assert_eq!(
        (
            v["reads"].as_u64(),
            v["writes"].as_u64(),
            v["unique_blocks"].as_u64()
        ),
        (Some(1), Some(1), Some(3))
    );
    assert_eq!(v["time_span_us"], 1_000_000);
    assert_eq!(v["sequentiality"], 1.0 / 2.0);
}
