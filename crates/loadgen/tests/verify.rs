//! Every byte read back through a level-1 node is the byte last acknowledged
//! (`loadgen::verify`): writers with requests in flight on neighbouring sectors, write
//! zeroes and flushes, a scanning neighbour, small caches at both levels, and the
//! controller re-planning every interval; under lachesis, under fair share, and with every
//! node's cache switching write policy and eviction policy every second besides.

use loadgen::verify::{run_verify, VerifyOptions};
use std::time::Duration;

fn verify(scheme: &str, seed: u64, churn: Option<Duration>) {
    let opts = VerifyOptions {
        scheme: scheme.into(),
        duration: Duration::from_secs(12),
        seed,
        churn,
        ..VerifyOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = rt
        .block_on(run_verify(&opts, dir.path()))
        .unwrap_or_else(|e| panic!("{e}"));
    println!("{scheme} seed {seed}: {} writes, {} zeroings, {} flushes, {} reads, {} MB checked, {} intervals, {} actions, {} bad sectors",
        r.writes, r.zeroings, r.flushes, r.reads, r.bytes_checked >> 20, r.intervals, r.actions, r.mismatched_sectors);
    assert!(r.mismatches.is_empty(), "{scheme}: {:#?}", r.mismatches);
    // It checked something: the writers' regions read back whole at the end (4 × 12 MiB)
    // and reads during the run, with the controller at work meanwhile.
    assert!(r.bytes_checked >= 48 << 20, "{r:?}");
    // (Some 400 writes, 40 zeroings and 50 flushes on an idle machine; the floors leave
    // room for one loaded by the rest of the workspace's tests.)
    assert!(
        r.writes >= 100 && r.zeroings >= 5 && r.flushes >= 5,
        "{r:?}"
    );
    assert!(r.intervals >= 5, "{r:?}");
    if churn.is_some() {
        // Every node's `pg` cache switched write and eviction policy several times.
        assert!(r.churned >= 9, "{r:?}");
    }
}

#[test]
fn every_byte_read_back_is_the_last_acknowledged_under_lachesis() {
    verify("lachesis", 1, None);
}

#[test]
fn every_byte_read_back_is_the_last_acknowledged_under_fair_share() {
    verify("fair", 2, None);
}

#[test]
fn every_byte_read_back_is_the_last_acknowledged_while_write_and_eviction_policies_switch() {
    verify("lachesis", 3, Some(Duration::from_secs(1)));
}
