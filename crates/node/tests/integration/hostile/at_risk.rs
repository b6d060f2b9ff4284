//! Issue 35, item 2, the rest: acknowledged dirty blocks that neither the backend (nbdkit's
//! `error` filter fails every write while a trigger file exists) nor the data directory
//! (a small tmpfs, filled up, with `recovery_reserve = "0"`) can take.
//!
//! Before, the node went on acknowledging writes, said nothing, and a stop logged "… could
//! not be written back … nor kept in recovery.bin: No space left on device" and exited:
//! the blocks existed nowhere. Now the node stays up: writes to the export are refused
//! (ENOSPC), reads are served, `/healthz` answers 503 `at-risk` and
//! `lachesis_dirty_at_risk_blocks` counts them; a stop waits, still serving reads, and ends
//! once the backend heals (every block on the image), or once space is freed (every block
//! in `recovery.bin`, replayed by the next start), or when told to drop them (the error
//! names the count).

use super::*;
use nbd::NbdClient;

/// Acknowledged dirty blocks of the tests.
const BLOCKS: u64 = 64;

/// A node at risk: its data directory on a full `disk`, its backend failing writes.
struct AtRisk {
    rt: tokio::runtime::Runtime,
    _tmp: tempfile::TempDir,
    img: PathBuf,
    trigger: PathBuf,
    filler: PathBuf,
    dir: PathBuf,
    _kit: Nbdkit,
    node: node::RunningNode,
}

impl AtRisk {
    /// Starts the node on `disk`, writes [`BLOCKS`] blocks (acknowledged, write-back), then
    /// makes the backend fail and fills the disk, and waits until the node says so.
    fn new(disk: &SmallDisk) -> AtRisk {
        let rt = runtime();
        let tmp = tempfile::tempdir().unwrap();
        let img = sparse_image(tmp.path(), 8 << 20);
        let trigger = tmp.path().join("fail-writes");
        let kit = Nbdkit::start(
            &img,
            &["error"],
            &[
                "error-pwrite=EIO".into(),
                "error-pwrite-rate=1".into(),
                format!("error-pwrite-file={}", trigger.display()),
            ],
        );
        let dir = disk.path().join("node");
        let cfg = config(
            &dir,
            &kit.upstream(),
            "recovery_reserve = \"0\"\nstop_timeout = \"2s\"",
        );
        let node = rt.block_on(node::start(&cfg)).unwrap();
        let client = rt
            .block_on(NbdClient::connect(node.nbd_addr, "vol"))
            .unwrap();
        // One request, the trigger made right after it: the node's assessment (every
        // second, flushing dirty blocks a zero reserve cannot hold) must not write them
        // back in between.
        let all: Vec<u8> = (0..BLOCKS).flat_map(pattern).collect();
        rt.block_on(client.write(0, all, false)).unwrap();
        std::fs::write(&trigger, b"").unwrap();
        drop(client);
        let filler = disk.fill();
        let api = node.api_addr;
        let took = within(Duration::from_secs(10), "/healthz at-risk", || {
            let (s, body) = health(api);
            s == 503 && body.contains("\"at-risk\"")
        });
        println!("dirty blocks at risk noticed within {took:?}");
        AtRisk {
            rt,
            _tmp: tmp,
            img,
            trigger,
            filler,
            dir,
            _kit: kit,
            node,
        }
    }

    fn client(&self) -> NbdClient {
        self.rt
            .block_on(NbdClient::connect(self.node.nbd_addr, "vol"))
            .unwrap()
    }

    /// Every acknowledged block reads back right.
    fn reads_back(&self, what: &str) {
        let c = self.client();
        for b in 0..BLOCKS {
            let got = self.rt.block_on(c.read(b * BS, BS as u32)).unwrap();
            assert_eq!(&got[..], &pattern(b)[..], "{what}: block {b}");
        }
    }

    /// Asks for the stop; the node's end is then awaited by the returned task.
    fn stop(self) -> Stopping {
        let AtRisk {
            rt,
            _tmp,
            img,
            trigger,
            filler,
            dir,
            _kit,
            mut node,
        } = self;
        let stopper = node.stopper();
        let (api, nbd) = (node.api_addr, node.nbd_addr);
        stopper.stop();
        let ended = rt.spawn(async move { node.wait().await });
        Stopping {
            rt,
            _tmp,
            img,
            trigger,
            filler,
            dir,
            _kit,
            stopper,
            ended,
            api,
            nbd,
        }
    }
}

/// A node whose stop was asked.
struct Stopping {
    rt: tokio::runtime::Runtime,
    _tmp: tempfile::TempDir,
    img: PathBuf,
    trigger: PathBuf,
    filler: PathBuf,
    dir: PathBuf,
    _kit: Nbdkit,
    stopper: node::Stopper,
    ended: tokio::task::JoinHandle<std::io::Result<()>>,
    api: std::net::SocketAddr,
    nbd: std::net::SocketAddr,
}

impl Stopping {
    /// The stop is still waiting after `for_`, and the node still serves reads and says
    /// why it waits.
    fn still_waiting(&self, for_: Duration) {
        std::thread::sleep(for_);
        assert!(!self.ended.is_finished(), "the stop did not wait");
        let (s, body) = health(self.api);
        assert!(
            s == 503 && body.contains("\"stop_waiting\":true"),
            "{s} {body}"
        );
        let c = self
            .rt
            .block_on(NbdClient::connect(self.nbd, "vol"))
            .unwrap();
        for b in [0, BLOCKS / 2, BLOCKS - 1] {
            let got = self.rt.block_on(c.read(b * BS, BS as u32)).unwrap();
            assert_eq!(
                &got[..],
                &pattern(b)[..],
                "a read while the stop waits: block {b}"
            );
        }
        let e = self
            .rt
            .block_on(c.write(BLOCKS * BS, pattern(BLOCKS), false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("ESHUTDOWN"), "a write while stopping: {e}");
    }

    /// How the stop ended, and after how long from now (it must end within `limit`).
    fn ended(self, limit: Duration) -> (std::io::Result<()>, Duration, Stopped) {
        let t0 = Instant::now();
        let ended = self.ended;
        let res = self
            .rt
            .block_on(async move { tokio::time::timeout(limit, ended).await })
            .unwrap_or_else(|_| panic!("the stop did not end within {limit:?}"))
            .unwrap();
        (
            res,
            t0.elapsed(),
            Stopped {
                rt: self.rt,
                _tmp: self._tmp,
                img: self.img,
                dir: self.dir,
                _kit: self._kit,
            },
        )
    }
}

/// What is left once the node stopped.
struct Stopped {
    rt: tokio::runtime::Runtime,
    _tmp: tempfile::TempDir,
    img: PathBuf,
    dir: PathBuf,
    _kit: Nbdkit,
}

/// The running state and the stop that waits, healed by the backend: while at risk the
/// export refuses writes (ENOSPC, not acknowledged), reads are served, `/healthz` is 503
/// `at-risk` with the count, the metric counts the blocks; the stop waits (reads served,
/// writes refused with ESHUTDOWN) until the backend heals, then ends cleanly with every
/// block on the image and no recovery file.
#[test]
fn blocks_nobody_can_take_keep_the_node_up_and_a_stop_waits_for_the_backend() {
    let Some(disk) = SmallDisk::mount("4m") else {
        return;
    };
    let n = AtRisk::new(&disk);
    let (s, body) = health(n.node.api_addr);
    println!("/healthz while at risk: {s} {body}");
    assert!(
        body.contains(&format!("\"blocks\":{BLOCKS}")) && body.contains("\"disk_full\":true"),
        "{body}"
    );
    let m = metric(n.node.api_addr, "lachesis_dirty_at_risk_blocks");
    assert_eq!(m, [format!("lachesis_dirty_at_risk_blocks {BLOCKS}")]);
    let c = n.client();
    let e =
        n.rt.block_on(c.write(BLOCKS * BS, pattern(BLOCKS), false))
            .unwrap_err()
            .to_string();
    assert!(e.contains("ENOSPC"), "a write while at risk: {e}");
    drop(c);
    n.reads_back("while at risk");

    let stopping = n.stop();
    stopping.still_waiting(Duration::from_secs(3));
    std::fs::remove_file(&stopping.trigger).unwrap();
    let (res, took, stopped) = stopping.ended(Duration::from_secs(20));
    println!("the stop ended {took:?} after the backend healed: {res:?}");
    res.unwrap();
    assert!(!stopped.dir.join(node::RECOVERY_FILE).exists());
    for b in 0..BLOCKS {
        assert_eq!(
            image_block(&stopped.img, b * BS),
            pattern(b),
            "block {b} on the image"
        );
    }
    drop(stopped.rt);
}

/// The same, healed by room: space freed in the data directory lets the node grow its
/// reserve, the stop goes on and keeps every block in `recovery.bin` (the backend still
/// fails), and the next start over a healed backend writes them all to the image.
#[test]
fn blocks_nobody_can_take_are_kept_once_the_disk_has_room_again() {
    let Some(disk) = SmallDisk::mount("4m") else {
        return;
    };
    let n = AtRisk::new(&disk);
    let stopping = n.stop();
    stopping.still_waiting(Duration::from_secs(2));
    std::fs::remove_file(&stopping.filler).unwrap();
    let trigger = stopping.trigger.clone();
    let (res, took, stopped) = stopping.ended(Duration::from_secs(20));
    let err = res.unwrap_err().to_string();
    println!("the stop ended {took:?} after space was freed: {err}");
    assert!(
        err.contains(&format!("{BLOCKS} dirty block(s)")) && err.contains("kept in"),
        "{err}"
    );
    let kept = cache::recovery::read(&stopped.dir.join(node::RECOVERY_FILE)).unwrap();
    assert_eq!(kept.len() as u64, BLOCKS);
    std::fs::remove_file(&trigger).unwrap();
    let kit = &stopped._kit;
    let cfg = config(&stopped.dir, &kit.upstream(), "");
    let n = stopped.rt.block_on(node::start(&cfg)).unwrap();
    assert!(!stopped.dir.join(node::RECOVERY_FILE).exists());
    stopped.rt.block_on(n.shutdown()).unwrap();
    for b in 0..BLOCKS {
        assert_eq!(
            image_block(&stopped.img, b * BS),
            pattern(b),
            "block {b} on the image"
        );
    }
}

/// Told to drop them (a second signal: `Stopper::discard`), the waiting stop ends at once
/// and fails naming the count and why.
#[test]
fn a_waiting_stop_ends_when_told_to_drop_the_blocks_and_names_them() {
    let Some(disk) = SmallDisk::mount("4m") else {
        return;
    };
    let n = AtRisk::new(&disk);
    let stopping = n.stop();
    stopping.still_waiting(Duration::from_secs(2));
    stopping.stopper.discard();
    let (res, took, _stopped) = stopping.ended(Duration::from_secs(10));
    let err = res.unwrap_err().to_string();
    println!("the stop ended {took:?} after a discard: {err}");
    assert!(
        err.contains(&format!("{BLOCKS} dirty block(s)"))
            && err.contains("nor kept")
            && err.contains("dropped at the operator's request"),
        "{err}"
    );
}
