//! Issue 17: at 100 % dirty, sustained writes through a write-back cache run at least at
//! 80 % of the slow backend's own speed (nbdkit with its rate filter; a small run of
//! `lachesis bench writeback`).

#[test]
fn writes_at_full_dirty_keep_eighty_percent_of_the_backends_speed() {
    let f = bench::writeback::run(3, "32M", 4).unwrap();
    println!("{f:?}");
    assert!(f.backend > 1e6, "backend {} B/s", f.backend);
    assert!(
        f.ratio() >= 0.8,
        "through the cache {:.0} B/s, backend {:.0} B/s: ratio {:.2}",
        f.cached,
        f.backend,
        f.ratio()
    );
}
