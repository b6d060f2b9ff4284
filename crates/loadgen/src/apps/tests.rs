//! Tests of reading what the tools report: `pgbench`'s tps line and per-transaction
//! logs, and fio's JSON.

use super::reports::{latencies, neighbour_mbps, tps_of};

#[test]
fn pgbench_output_and_logs_are_read() {
    let out = "number of transactions actually processed: 120\n\
               latency average = 33.1 ms\ntps = 120.53 (without initial connection time)\n";
    assert_eq!(tps_of(out), Some(120.53));
    assert_eq!(tps_of("nothing"), None);
    let dir = tempfile::tempdir().unwrap();
    // client, transaction, latency (µs), script, end (epoch s, µs): transaction k
    // takes k ms and ends at 1,700,000,000 s + k × 10 ms.
    let lines: String = (1..=100)
        .map(|k| format!("0 {k} {} 0 1700000000 {}\n", k * 1000, k * 10_000))
        .collect();
    std::fs::write(dir.path().join("pgbench_log.1"), lines).unwrap();
    std::fs::write(dir.path().join("other"), "0 1 999999999 0 0 0\n").unwrap();
    let l = latencies(dir.path(), "pgbench_log");
    assert_eq!(l.n, 100);
    assert!((l.mean_ms - 50.5).abs() < 1e-9);
    assert!((l.p99_ms - 99.0).abs() < 1e-9);
    assert!((l.max_ms - 100.0).abs() < 1e-9);
    // From the first's start (10 ms - 1 ms) to the last's end (1 s).
    assert!((l.span_s - 0.991).abs() < 1e-6, "{l:?}");
    let fio = dir.path().join("fio.json");
    std::fs::write(
        &fio,
        "note: x\n{\"jobs\": [{\"read\": {\"bw_bytes\": 52000000}}]}",
    )
    .unwrap();
    assert!((neighbour_mbps(&fio) - 52.0).abs() < 1e-9);
}
