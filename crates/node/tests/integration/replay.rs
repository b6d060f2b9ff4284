//! `node::replay` against a running node: a lachesis-format trace replayed as NBD I/O,
//! its writes checked byte for byte by qemu-io, its pace following the trace's times
//! (scaled by `speed`) or a given rate.

use crate::common::{run, TestNode};
use node::replay::{replay, ReplayConfig, ReplayStats};
use std::io::Write;
use std::sync::Arc;

const NODE: &str = r#"
[node]
cache_size = "32MiB"
[[export]]
name = "vol"
file = "vol.img"
size = "8MiB"
[[cache]]
name = "vol"
size = "16MiB"
[[rule]]
export = "vol"
cache = "vol"
"#;

fn trace_file(dir: &std::path::Path, lines: &[&str]) -> std::path::PathBuf {
    let p = dir.join("t.csv");
    let mut f = std::fs::File::create(&p).unwrap();
    writeln!(f, "time_us,tenant,volume,op,offset,len").unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    p
}

#[test]
fn replayed_writes_land_and_reads_are_counted() {
    let t = TestNode::start(NODE);
    // Tenant 1's writes (one past the end of the 8 MiB export: wraps to 4 KiB), reads,
    // and tenant 2's write, which the filter leaves out.
    let path = trace_file(
        t.dir.path(),
        &[
            "0,1,0,write,0,65536",
            "100,1,0,write,1048576,131072",
            "200,1,0,write,8392704,4096",
            "300,2,0,write,2097152,65536",
            "400,1,0,read,0,65536",
            "500,1,0,read,1048576,131072",
            "600,1,0,flush,0,0",
        ],
    );
    let mut cfg = ReplayConfig::new(t.uri("vol").parse().unwrap());
    cfg.tenant = Some(1);
    cfg.threads = 2;
    let stats = Arc::new(ReplayStats::default());
    let reader = trace::open(&path, None).unwrap();
    let report = t.rt.block_on(replay(reader, &cfg, stats.clone())).unwrap();
    assert_eq!(report.requests, 6, "{report:?}");
    assert_eq!(report.writes, 3);
    assert_eq!(report.reads, 2);
    assert_eq!(report.write_bytes, 65536 + 131072 + 4096);
    assert_eq!(report.read_bytes, 65536 + 131072);
    assert_eq!(report.errors, 0, "{report:?}");
    assert!(
        report.p50_ms > 0.0 && report.p50_ms <= report.p99_ms,
        "{report:?}"
    );
    // The bytes, read back by another client.
    let uri = t.uri("vol");
    run(
        "qemu-io",
        &[
            "-f",
            "raw",
            &uri,
            "-c",
            "read -P 0xa5 0 4096",
            "-c",
            "read -P 0xa5 4096 61440",
            "-c",
            "read -P 0xa5 1M 128K",
            "-c",
            "read -P 0 64K 960K",
            "-c",
            "read -P 0 2M 64K",
        ],
    );
    t.stop();
}

#[test]
fn the_pace_follows_the_trace_or_the_rate() {
    let t = TestNode::start(NODE);
    // 31 reads over 300 ms of trace time.
    let lines: Vec<String> = (0..=30)
        .map(|i| format!("{},0,0,read,{},4096", i * 10_000, i * 4096))
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = trace_file(t.dir.path(), &refs);
    let go = |cfg: &ReplayConfig| {
        let reader = trace::open(&path, None).unwrap();
        t.rt.block_on(replay(reader, cfg, Arc::new(ReplayStats::default())))
            .unwrap()
    };
    let mut cfg = ReplayConfig::new(t.uri("vol").parse().unwrap());
    let own = go(&cfg);
    assert_eq!(own.requests, 31);
    assert!(own.seconds >= 0.3 && own.seconds < 1.5, "{own:?}");
    cfg.speed = 3.0;
    let fast = go(&cfg);
    assert!(fast.seconds >= 0.1 && fast.seconds < 0.28, "{fast:?}");
    // 100 per second: 31 requests take 0.3 s whatever the trace's times.
    cfg.rate = Some(100.0);
    let rated = go(&cfg);
    assert!(rated.seconds >= 0.3 && rated.seconds < 1.0, "{rated:?}");
    assert!(rated.iops > 25.0 && rated.iops <= 104.0, "{rated:?}");
    // A duration cuts it short.
    cfg.duration = Some(std::time::Duration::from_millis(100));
    let cut = go(&cfg);
    assert!(cut.requests >= 9 && cut.requests <= 11, "{cut:?}");
    // A wrong export is an error naming it.
    let bad = ReplayConfig::new(t.uri("nope").parse().unwrap());
    let reader = trace::open(&path, None).unwrap();
    let err =
        t.rt.block_on(replay(reader, &bad, Arc::new(ReplayStats::default())))
            .unwrap_err()
            .to_string();
    assert!(err.contains("nope"), "{err}");
    t.stop();
}
