//! `lachesis bench verify`: is every byte read back the byte last acknowledged? A data
//! check of the whole path (level-1 node, its striped upstreams, level-2 nodes, the
//! modelled disks) while the controller re-plans every interval and a neighbour scans.
//!
//! The cluster is `bench apps`'s (tenants `pg` and `scan`, one scheme), with small caches so
//! that blocks are evicted, written back, filled and resized all the time. Writers, each on
//! its own NBD connection to the level-1 node's `pg` export, own disjoint regions of it
//! whose edges fall inside 4 KiB blocks (so two writers' sectors share blocks), and keep
//! several requests in flight at once on ranges that do not overlap by a sector but may
//! share blocks and stripes (the partial-block read-modify-write races). Every 512-byte
//! sector written carries its sector number, a version and its writer, so a read names
//! exactly what it found: a stale version, another sector's bytes, zeros. The model (the
//! version of each sector) changes only when a write or zeroing is acknowledged; a read is
//! checked against the versions of the time it was sent, and is only sent over sectors no
//! write in flight covers. The mix: writes (some with FUA), reads, write-zeroes (which the
//! node turns into trims of whole blocks) and flushes. At the end every region is read
//! back whole. With `churn`, every node's `pg` cache also switches write policy
//! (write-back, write-through: leaving write-back writes every dirty block back while
//! writes go on) and eviction policy (by reconstruction) every so often, besides what
//! the controller changes.
//!
//! What it does not check: crashes (the node's durability tests do), or requests of one
//! connection that overlap (the protocol leaves their order to the server).

use crate::apps::{start_arm, step, AppsError};
use crate::demo::DemoOptions;
use bytes::Bytes;
use nbd::NbdClient;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Bytes per stamped sector.
pub const SECTOR: u64 = 512;

/// What `lachesis bench verify` runs.
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    /// The control scheme.
    pub scheme: String,
    /// How long the writers run.
    pub duration: Duration,
    /// Writers (connections), each with its own region.
    pub writers: usize,
    /// Bytes of each writer's region.
    pub region: u64,
    /// Requests each writer keeps in flight.
    pub depth: usize,
    /// Seed of the writers' choices.
    pub seed: u64,
    /// Also switch `pg`'s caches on every node between write-back and write-through and
    /// between eviction policies (LRU, ARC, S3-FIFO) every this long, beside what the
    /// controller changes (`None`: only the controller).
    pub churn: Option<Duration>,
    /// The cluster: interval, caches, disks.
    pub cluster: DemoOptions,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            scheme: "lachesis".into(),
            duration: Duration::from_secs(30),
            writers: 4,
            region: 12 << 20,
            depth: 8,
            seed: 1,
            churn: None,
            cluster: DemoOptions {
                interval: Duration::from_secs(1),
                seek_ms: 0.5,
                l1_cache: 4 << 20,
                l2_cache: 6 << 20,
                ..DemoOptions::default()
            },
        }
    }
}

/// A sector that read back other than it was last acknowledged.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Mismatch {
    /// Byte offset of the sector in the volume.
    pub offset: u64,
    /// The version expected (0: zeros).
    pub expected: u64,
    /// What was found: `version N of sector S by writer W`, `zeros`, or `garbage`.
    pub found: String,
    /// `run` (during the mix) or `final` (the read-back at the end).
    pub phase: &'static str,
}

/// What one run did and found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct VerifyReport {
    /// The scheme.
    pub scheme: String,
    /// Acknowledged writes.
    pub writes: u64,
    /// Acknowledged write-zeroes.
    pub zeroings: u64,
    /// Flushes.
    pub flushes: u64,
    /// Reads checked (the final read-back included).
    pub reads: u64,
    /// Bytes checked.
    pub bytes_checked: u64,
    /// Requests the node failed (each is also an error of the run's result).
    pub errors: u64,
    /// Controller intervals run meanwhile.
    pub intervals: u64,
    /// Changes the controller made on the nodes meanwhile (sizes, policies, ...).
    pub actions: u64,
    /// Those changes by kind (`resize`, `policy`, `write_policy`, ...).
    pub action_kinds: BTreeMap<String, u64>,
    /// Write-policy and eviction switches made by the churn task (`churn`), applied.
    pub churned: u64,
    /// Every sector that read back wrong (at most 100 kept).
    pub mismatches: Vec<Mismatch>,
    /// Mismatching sectors in all.
    pub mismatched_sectors: u64,
}

/// The stamp of sector `sector` at `version` by `writer`: its number, version and
/// writer, then bytes that depend on all three.
fn stamp(sector: u64, version: u64, writer: u64, out: &mut [u8]) {
    out[0..8].copy_from_slice(&sector.to_le_bytes());
    out[8..16].copy_from_slice(&version.to_le_bytes());
    out[16..24].copy_from_slice(&writer.to_le_bytes());
    let fill = (sector ^ version.rotate_left(17) ^ writer.rotate_left(40)).to_le_bytes();
    for (i, b) in out[24..].iter_mut().enumerate() {
        *b = fill[i % 8] ^ (i as u8);
    }
}

/// Whether `got` is exactly the stamp (or zeros for version 0); if not, what it is.
fn check(sector: u64, version: u64, writer: u64, got: &[u8]) -> Option<String> {
    let mut want = [0u8; SECTOR as usize];
    if version > 0 {
        stamp(sector, version, writer, &mut want);
    }
    if got == want {
        return None;
    }
    if got.iter().all(|&b| b == 0) {
        return Some("zeros".into());
    }
    let word = |i: usize| u64::from_le_bytes(got[i..i + 8].try_into().unwrap_or([0; 8]));
    let (s, v, w) = (word(0), word(8), word(16));
    let mut theirs = [0u8; SECTOR as usize];
    stamp(s, v, w, &mut theirs);
    if got == theirs {
        Some(format!("version {v} of sector {s} by writer {w}"))
    } else {
        Some("garbage".into())
    }
}

/// One writer's region and what it expects there.
struct Region {
    writer: u64,
    /// First sector.
    first: u64,
    /// The acknowledged version of each sector (0: zeros).
    versions: Vec<u64>,
    next_version: u64,
}

/// What a request in flight was (its sector range travels beside it, [`Done`]).
enum Op {
    Write { version: u64 },
    Zero,
    Read { expect: Vec<u64> },
    Flush,
}

/// A request in flight: its sector range in the region, what it was, and its reply.
type Done = (u64, u64, Op, Result<Bytes, nbd::ClientError>);

/// The mismatches of a read of `n` sectors at region sector `at`.
fn compare(r: &Region, at: u64, expect: &[u64], data: &[u8], phase: &'static str) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for (i, &v) in expect.iter().enumerate() {
        let sector = r.first + at + i as u64;
        let got = &data[i * SECTOR as usize..(i + 1) * SECTOR as usize];
        if let Some(found) = check(sector, v, r.writer, got) {
            out.push(Mismatch {
                offset: sector * SECTOR,
                expected: v,
                found,
                phase,
            });
        }
    }
    out
}

/// Sectors `[at, at + n)` of the region overlap no request in `busy`.
fn free(busy: &BTreeMap<u64, u64>, at: u64, n: u64) -> bool {
    // No busy range starts before `at + n` and ends after `at`.
    !busy.range(..at + n).any(|(_, &e)| e > at)
}

struct Tally {
    report: VerifyReport,
    first_error: Option<String>,
}

impl Tally {
    fn mismatches(&mut self, m: Vec<Mismatch>) {
        self.report.mismatched_sectors += m.len() as u64;
        for x in m {
            if self.report.mismatches.len() < 100 {
                self.report.mismatches.push(x);
            }
        }
    }
}

/// One writer: its mix until `until`, then its region read back whole.
async fn writer(
    addr: SocketAddr,
    mut region: Region,
    depth: usize,
    seed: u64,
    until: Instant,
) -> Result<Tally, AppsError> {
    let client = Arc::new(
        NbdClient::connect(addr, "pg")
            .await
            .map_err(|e| step("verify", "a writer's connection", e))?,
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tally = Tally {
        report: VerifyReport::default(),
        first_error: None,
    };
    let sectors = region.versions.len() as u64;
    let mut busy: BTreeMap<u64, u64> = BTreeMap::new();
    let mut flying: JoinSet<Done> = JoinSet::new();
    let base = region.first * SECTOR;
    loop {
        while flying.len() < depth && Instant::now() < until {
            let roll: f64 = rng.gen();
            // Flushes, zeroings, large writes (128 KiB to 2 MiB, many stripes), small
            // writes, large reads, small reads.
            let n = match roll {
                r if r < 0.05 => 0,
                r if r < 0.10 => rng.gen_range(8..=512),
                r if r < 0.15 => rng.gen_range(256..=4096),
                r if r < 0.55 => rng.gen_range(1..=64),
                r if r < 0.60 => rng.gen_range(256..=4096),
                _ => rng.gen_range(1..=256),
            }
            .min(sectors);
            let at = if n == 0 {
                0
            } else {
                rng.gen_range(0..=sectors - n)
            };
            if n > 0 && !free(&busy, at, n) {
                // Sectors taken by a request in flight: leave it for the next round.
                break;
            }
            if n > 0 {
                busy.insert(at, at + n);
            }
            let (c, off, len) = (client.clone(), base + at * SECTOR, (n * SECTOR) as u32);
            if n == 0 {
                flying
                    .spawn(async move { (0, 0, Op::Flush, c.flush().await.map(|_| Bytes::new())) });
            } else if roll < 0.10 {
                flying.spawn(async move {
                    let r = c.write_zeroes(off, len, false).await;
                    (at, n, Op::Zero, r.map(|_| Bytes::new()))
                });
            } else if roll < 0.55 {
                let version = region.next_version;
                region.next_version += 1;
                let fua = rng.gen_bool(0.05);
                let mut data = vec![0u8; len as usize];
                for (i, sector) in data.chunks_mut(SECTOR as usize).enumerate() {
                    stamp(region.first + at + i as u64, version, region.writer, sector);
                }
                flying.spawn(async move {
                    let r = c.write(off, data, fua).await;
                    (at, n, Op::Write { version }, r.map(|_| Bytes::new()))
                });
            } else {
                let expect = region.versions[at as usize..(at + n) as usize].to_vec();
                flying.spawn(async move { (at, n, Op::Read { expect }, c.read(off, len).await) });
            }
        }
        let Some(done) = flying.join_next().await else {
            break;
        };
        let (at, n, op, result) = done.map_err(|e| step("verify", "a request", e))?;
        if n > 0 {
            busy.remove(&at);
        }
        let data = match result {
            Ok(d) => d,
            Err(e) => {
                tally.report.errors += 1;
                tally
                    .first_error
                    .get_or_insert_with(|| format!("writer {}: {e}", region.writer));
                continue;
            }
        };
        match op {
            Op::Flush => tally.report.flushes += 1,
            Op::Zero => {
                region.versions[at as usize..(at + n) as usize].fill(0);
                tally.report.zeroings += 1;
            }
            Op::Write { version: v } => {
                region.versions[at as usize..(at + n) as usize].fill(v);
                tally.report.writes += 1;
            }
            Op::Read { expect } => {
                tally.report.reads += 1;
                tally.report.bytes_checked += data.len() as u64;
                let m = compare(&region, at, &expect, &data, "run");
                tally.mismatches(m);
            }
        }
    }
    // The whole region, read back.
    let step_sectors = 2048u64;
    let mut at = 0;
    while at < sectors {
        let n = step_sectors.min(sectors - at);
        let data = client
            .read(base + at * SECTOR, (n * SECTOR) as u32)
            .await
            .map_err(|e| step("verify", "the final read-back", e))?;
        let expect = region.versions[at as usize..(at + n) as usize].to_vec();
        tally.report.reads += 1;
        tally.report.bytes_checked += data.len() as u64;
        let m = compare(&region, at, &expect, &data, "final");
        tally.mismatches(m);
        at += n;
    }
    let _ = client.disconnect().await;
    Ok(tally)
}

/// The neighbour: reads `scan` from start to end, over and over, until `until`.
async fn scanner(addr: SocketAddr, until: Instant) -> Result<u64, AppsError> {
    let c = NbdClient::connect(addr, "scan")
        .await
        .map_err(|e| step("verify", "the scanner's connection", e))?;
    let (size, piece) = (c.size(), 64u64 << 10);
    let (mut at, mut bytes) = (0u64, 0u64);
    while Instant::now() < until {
        if c.read(at, piece as u32).await.is_ok() {
            bytes += piece;
        }
        at = (at + piece) % (size - size % piece).max(piece);
    }
    Ok(bytes)
}

/// Every `every` until `until`: each node's `pg` cache switches write policy
/// (write-back, write-through) and eviction policy (LRU, ARC, S3-FIFO) in turn, on a
/// blocking thread. Returns the switches applied (a node refusing one is not counted).
async fn churn(
    planes: Vec<std::sync::Arc<node::state::ControlPlane>>,
    every: Duration,
    until: Instant,
) -> u64 {
    let mut applied = 0;
    let mut turn = 0usize;
    while Instant::now() + every < until {
        tokio::time::sleep(every).await;
        let patch = api::node::CachePatch {
            write_policy: Some(["write-through", "write-back"][turn % 2].into()),
            eviction: Some(["arc", "s3fifo", "lru"][turn % 3].into()),
            ..Default::default()
        };
        turn += 1;
        let planes = planes.clone();
        applied += tokio::task::spawn_blocking(move || {
            planes
                .iter()
                .filter(|p| {
                    p.cache_id("pg")
                        .is_some_and(|id| p.configure_cache(id, &patch).is_ok())
                })
                .count() as u64
        })
        .await
        .unwrap_or(0);
    }
    applied
}

/// Runs the check under `dir`: the cluster, the writers and the scanner for
/// `opts.duration` while the controller plans, then the read-back.
pub async fn run_verify(opts: &VerifyOptions, dir: &Path) -> Result<VerifyReport, AppsError> {
    let arm = start_arm(&opts.cluster, &opts.scheme, dir).await?;
    let l1 = arm.level1()?;
    let until = Instant::now() + opts.duration;
    // Regions start 3 KiB past a block edge, so neighbours share a block at each seam.
    let per = opts.region / SECTOR;
    let mut tasks = JoinSet::new();
    for w in 0..opts.writers as u64 {
        let region = Region {
            writer: w,
            first: 6 + w * per,
            versions: vec![0; per as usize],
            next_version: 1,
        };
        let seed = opts.seed.wrapping_mul(1_000_003).wrapping_add(w);
        tasks.spawn(writer(l1, region, opts.depth.max(1), seed, until));
    }
    let scan = tokio::spawn(scanner(l1, until));
    let churning = opts.churn.map(|every| {
        let planes: Vec<_> = arm.nodes.iter().map(|n| n.node.state.clone()).collect();
        tokio::spawn(churn(planes, every, until))
    });
    let mut report = VerifyReport {
        scheme: opts.scheme.clone(),
        ..VerifyReport::default()
    };
    let mut first_error = None;
    while let Some(t) = tasks.join_next().await {
        let t = t.map_err(|e| step(&opts.scheme, "a writer", e))??;
        let r = t.report;
        report.writes += r.writes;
        report.zeroings += r.zeroings;
        report.flushes += r.flushes;
        report.reads += r.reads;
        report.bytes_checked += r.bytes_checked;
        report.errors += r.errors;
        report.mismatched_sectors += r.mismatched_sectors;
        report.mismatches.extend(r.mismatches);
        first_error = first_error.or(t.first_error);
    }
    report.mismatches.sort_by_key(|m| m.offset);
    report.mismatches.truncate(100);
    let _ = scan.await;
    let churned = match churning {
        Some(c) => c.await.unwrap_or(0),
        None => 0,
    };
    let series = arm.stop().await;
    report.churned = churned;
    report.intervals = series.last().map_or(0, |r| r.interval);
    report.actions = series.iter().map(|r| r.actions.len() as u64).sum();
    for a in series.iter().flat_map(|r| &r.actions) {
        *report.action_kinds.entry(a.verb.clone()).or_default() += 1;
    }
    if let Some(e) = first_error {
        return Err(step(&opts.scheme, "a request", e));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_names_what_a_sector_holds() {
        let mut s = [0u8; SECTOR as usize];
        stamp(7, 3, 1, &mut s);
        assert_eq!(check(7, 3, 1, &s), None);
        assert_eq!(
            check(7, 4, 1, &s).as_deref(),
            Some("version 3 of sector 7 by writer 1")
        );
        assert_eq!(check(7, 3, 1, &[0; 512]).as_deref(), Some("zeros"));
        assert_eq!(check(7, 0, 1, &[0; 512]), None);
        s[100] ^= 1;
        assert_eq!(check(7, 3, 1, &s).as_deref(), Some("garbage"));
    }

    #[test]
    fn ranges_in_flight_are_not_reused() {
        let mut busy = BTreeMap::new();
        busy.insert(10, 20);
        assert!(free(&busy, 0, 10));
        assert!(free(&busy, 20, 5));
        assert!(!free(&busy, 5, 6));
        assert!(!free(&busy, 19, 1));
        assert!(!free(&busy, 0, 100));
        assert!(!free(&busy, 12, 2));
    }
}
