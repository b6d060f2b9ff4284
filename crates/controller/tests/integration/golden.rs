//! Issue 37 item 5's golden image, live: one read-only image exported by a storage server
//! `s1` and read by two volumes on two hosts (`vm1` on `h1`, `vm2` on `h2`), beside an
//! ordinary volume `db`, under a controller stepping a few intervals. After each interval
//! `plan.consolidated` is what the nodes report ([`assert_applied`]): the image's one
//! read-only cache on `s1` at the planned bytes with its rule over the image, no cache of
//! either reader there, the readers' level-1 caches read-only at their planned bytes, and
//! the report's consolidated row printing what `s1` holds. Then: reads through either
//! reader return the image's bytes, the second reader's reads of the blocks the first read
//! are hits in the consolidated cache (the server's own counters), one copy is resident,
//! not two; a write through a reader is an NBD error and changes nothing; an image larger
//! than its export is a refusal of the rule's `range`; a volume naming an unknown image is
//! an error naming the field.

use crate::common::{file_exports, registration, runtime, start_node};
use api::client::NodeClient;
use controller::config::ControllerConfig;
use controller::consolidate::knee;
use controller::{IntervalReport, Service, SqliteStore, Store};
use mrc::{CurvePoint, HitRatioCurve};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const BS: u64 = 4096;
/// Blocks each reader reads: the same ones.
const READ: u64 = 64;

fn config(scheme: &str, image_size: &str) -> String {
    format!(
        r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "{scheme}"
exclusive = false
[[image]]
name = "golden"
servers = ["s1"]
size = "{image_size}"
[[tenant]]
name = "db"
[[tenant.volume]]
name = "db"
host = "h1"
servers = ["s1"]
[[tenant]]
name = "vdi"
[[tenant.volume]]
name = "vm1"
host = "h1"
servers = ["s1"]
image = "golden"
[[tenant.volume]]
name = "vm2"
host = "h2"
servers = ["s1"]
image = "golden"
"#
    )
}

/// The image's byte at `offset`: no block is all zeros, and each block differs.
fn image_byte(offset: u64) -> u8 {
    ((offset / BS) as u8).wrapping_mul(31) ^ (offset as u8) | 1
}

struct World {
    rt: tokio::runtime::Runtime,
    s1: node::RunningNode,
    h1: node::RunningNode,
    h2: node::RunningNode,
    image: std::path::PathBuf,
}

/// `s1` (4 MiB of cache) exports `golden` read-only over an 8 MiB file of
/// [`image_byte`]s and `db` over its own file; `h1` (1 MiB) exports `vm1` over `golden`
/// and `db` over `db`; `h2` (1 MiB) exports `vm2` over `golden`.
fn world(dir: &Path) -> World {
    let rt = runtime();
    let sdir = dir.join("s1");
    std::fs::create_dir_all(&sdir).unwrap();
    let image = sdir.join("golden.img");
    let bytes: Vec<u8> = (0..8u64 << 20).map(image_byte).collect();
    std::fs::write(&image, bytes).unwrap();
    let s1 = start_node(
        &rt,
        &sdir,
        2,
        "4MiB",
        &format!(
            "[[export]]\nname = \"golden\"\nfile = \"golden.img\"\nread_only = true\n{}",
            file_exports(&["db"], "8MiB")
        ),
    );
    let up = |name: &str, of: &str| {
        format!(
            "[[export]]\nname = \"{name}\"\nupstream = [\"{}/{of}\"]\n",
            s1.nbd_addr
        )
    };
    let h1 = start_node(
        &rt,
        &dir.join("h1"),
        1,
        "1MiB",
        &format!("{}{}", up("vm1", "golden"), up("db", "db")),
    );
    let h2 = start_node(&rt, &dir.join("h2"), 1, "1MiB", &up("vm2", "golden"));
    World {
        rt,
        s1,
        h1,
        h2,
        image,
    }
}

fn client(n: &node::RunningNode) -> NodeClient {
    NodeClient::new(
        &format!("http://{}", n.api_addr),
        Some(n.api_token.secret()),
        Duration::from_secs(5),
    )
}

fn service(w: &World, dir: &Path, text: &str) -> Arc<Service> {
    let mut cfg = ControllerConfig::parse(text).unwrap();
    cfg.controller.data_dir = dir.join("ctl");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("ctl.db")).unwrap());
    let svc = Service::open(&cfg, store).unwrap();
    for (name, level, n, size) in [
        ("s1", 2u8, &w.s1, 4u64 << 20),
        ("h1", 1, &w.h1, 1 << 20),
        ("h2", 1, &w.h2, 1 << 20),
    ] {
        svc.register(registration(name, level, n, size)).unwrap();
    }
    svc
}

/// `plan.consolidated` against what the nodes report: the image's cache on `s1` at the
/// planned bytes, read-only, LRU, inclusive, its one rule over `[0, image)`; no reader's
/// cache on `s1`; each reader's level-1 cache read-only at its planned bytes with its rule;
/// the report's row printing what `s1` holds. Returns the planned blocks.
fn assert_applied(what: &str, svc: &Service, r: &IntervalReport, w: &World, image: u64) -> u64 {
    assert!(r.refused.is_empty(), "{what}: {:?}", r.refused);
    assert!(
        r.actions.iter().all(|a| a.result == "ok"),
        "{what}: {:?}",
        r.actions
    );
    let plan = svc.plan().expect("a plan");
    assert_eq!(
        plan.consolidated.len(),
        1,
        "{what}: {:?}",
        plan.consolidated
    );
    let c = &plan.consolidated[0];
    let readers: Vec<&str> = c
        .readers
        .iter()
        .map(|&i| plan.tenants[i].tenant.as_str())
        .collect();
    assert_eq!((c.image.as_str(), readers), ("golden", vec!["vm1", "vm2"]));
    // The server: the image's one cache, within the server's memory with db's partition.
    let s = client(&w.s1);
    let caches = s.caches().unwrap();
    let got = caches.iter().find(|x| x.name == "golden").unwrap();
    assert_eq!(got.size_bytes, c.size * BS, "{what}: planned {c:?}");
    assert_eq!(
        (
            got.stats.write_policy.as_str(),
            got.stats.eviction.as_str(),
            got.stats.exclusive.as_str()
        ),
        ("read-only", "lru", "off"),
        "{what}"
    );
    assert!(
        caches.iter().all(|x| x.name != "vm1" && x.name != "vm2"),
        "{what}: a reader has a cache of its own on s1: {caches:?}"
    );
    let db = plan.tenants.iter().find(|t| t.tenant == "db").unwrap();
    assert_eq!(plan.server_used(0), db.l2_total() + c.size, "{what}");
    assert!(plan.server_used(0) <= 1024, "{what}: {plan:?}");
    let rules = s.rules().unwrap();
    let to_image: Vec<_> = rules.iter().filter(|x| x.export == "golden").collect();
    assert_eq!(to_image.len(), 1, "{what}: {rules:?}");
    assert_eq!(
        (
            to_image[0].cache,
            to_image[0].client.as_deref(),
            to_image[0].range
        ),
        (got.id, None, Some((0, image))),
        "{what}"
    );
    // The readers: level 2 is the consolidated cache, level 1 their own, read-only.
    for (v, h) in [("vm1", &w.h1), ("vm2", &w.h2)] {
        let tp = plan.tenants.iter().find(|t| t.tenant == v).unwrap();
        assert_eq!(tp.l2_total(), 0, "{what}: {v}");
        assert!(
            matches!(&tp.l2[0].reason, control::Reason::Consolidated { image } if image == "golden"),
            "{what}: {v}: {:?}",
            tp.l2[0].reason
        );
        let hc = client(h);
        let mine = hc
            .caches()
            .unwrap()
            .into_iter()
            .find(|x| x.name == v)
            .unwrap();
        assert_eq!(mine.size_bytes, (tp.l1.size * BS).max(BS), "{what}: {v}");
        assert_eq!(mine.stats.write_policy, "read-only", "{what}: {v}");
        let routed: Vec<u64> = hc
            .rules()
            .unwrap()
            .iter()
            .filter(|x| x.export == v)
            .map(|x| x.cache)
            .collect();
        assert_eq!(routed, vec![mine.id], "{what}: {v}'s rule");
    }
    // The report prints what the server holds.
    let row = &r.consolidated[0];
    assert_eq!((row.image.as_str(), row.server.as_str()), ("golden", "s1"));
    assert_eq!((row.planned, row.applied), (c.size * BS, got.size_bytes));
    assert_eq!(row.resident, got.stats.resident);
    assert_eq!(r.allocations["s1"]["golden"], c.size * BS);
    // The plan as the API shows it.
    let view = svc.plan_view().unwrap();
    assert_eq!(view.consolidated[0].bytes, c.size * BS);
    assert_eq!(view.consolidated[0].readers, ["vm1", "vm2"]);
    assert_eq!(view.consolidated[0].applied, Some(got.size_bytes));
    c.size
}

/// Reads blocks `0..READ` of `export` through `h`, checking every byte against the image.
fn read_all(w: &World, h: &node::RunningNode, export: &str) {
    w.rt.block_on(async {
        let c = nbd::NbdClient::connect(h.nbd_addr, export).await.unwrap();
        for k in 0..READ {
            let got = c.read(k * BS, BS as u32).await.unwrap();
            let want: Vec<u8> = (k * BS..(k + 1) * BS).map(image_byte).collect();
            assert_eq!(&got[..], &want[..], "{export}: block {k}");
        }
        let _ = c.disconnect().await;
    });
}

/// The server's cumulative (lookups, hits) of the image's export.
fn image_counters(w: &World) -> (u64, u64) {
    let o = w.s1.state.observations();
    let t = o
        .tenants
        .iter()
        .find(|t| t.cache.as_deref() == Some("golden"))
        .expect("the image's tenant routed to its cache");
    (t.lookups, t.hits)
}

#[test]
fn two_readers_of_a_golden_image_share_one_consolidated_cache_sized_on_its_own_curve() {
    for scheme in ["fair", "lachesis"] {
        eprintln!("scheme {scheme}");
        run(scheme);
    }
}

fn run(scheme: &str) {
    let dir = tempfile::tempdir().unwrap();
    let w = world(dir.path());
    let image = 8u64 << 20;
    let svc = service(&w, dir.path(), &config(scheme, "8MiB"));
    // Interval 0: no curve yet, the cache takes the room db's partition leaves.
    let r = svc.tick().unwrap();
    let first = assert_applied("interval 0", &svc, &r, &w, image);
    let db = svc.plan().unwrap().tenants[0].l2_total();
    assert_eq!(first, 1024 - db, "no curve: the room");
    eprintln!("interval 0: consolidated {first} blocks (room after db's {db})");

    // vm1 reads 64 blocks of the image: all misses at the server.
    let before = image_counters(&w);
    read_all(&w, &w.h1, "vm1");
    let after_vm1 = image_counters(&w);
    assert_eq!(after_vm1.0 - before.0, READ, "vm1's reads reach s1");
    assert_eq!(after_vm1.1 - before.1, 0, "cold: no hit");
    let r = svc.tick().unwrap();
    let second = assert_applied("interval 1", &svc, &r, &w, image);
    assert_eq!(
        (r.consolidated[0].lookups, r.consolidated[0].hits),
        (READ, 0)
    );
    assert_eq!(
        second, first,
        "every block read once: no reuse yet, the room"
    );

    // vm2 reads the same blocks through its own host: every one a hit at the server.
    read_all(&w, &w.h2, "vm2");
    let after_vm2 = image_counters(&w);
    assert_eq!(after_vm2.0 - after_vm1.0, READ);
    assert_eq!(
        after_vm2.1 - after_vm1.1,
        READ,
        "vm2's reads of what vm1 read are consolidated hits"
    );
    // One copy for two readers.
    let held = |w: &World| {
        client(&w.s1)
            .caches()
            .unwrap()
            .into_iter()
            .find(|x| x.name == "golden")
            .unwrap()
    };
    assert_eq!(held(&w).stats.resident, READ, "one copy, not two");
    let r = svc.tick().unwrap();
    assert_eq!(
        (r.consolidated[0].lookups, r.consolidated[0].hits),
        (READ, READ)
    );
    // Now the curve shows the reuse: the cache is its knee, computed here from the
    // curve the server reports for the image.
    let o = w.s1.state.observations();
    let t = o
        .tenants
        .iter()
        .find(|t| t.cache.as_deref() == Some("golden"))
        .unwrap();
    let pts = t.curves[0]
        .points
        .iter()
        .map(|&(b, m)| CurvePoint {
            cache_size: b / BS,
            miss_ratio: m,
        })
        .collect();
    let k = knee(&HitRatioCurve::new(pts).unwrap());
    let third = assert_applied("interval 2", &svc, &r, &w, image);
    assert_eq!(third, k.min(1024 - db), "{:?}", t.curves[0]);
    assert!(third >= READ, "the knee holds what both read: {third}");
    let c = svc.plan().unwrap().consolidated[0].clone();
    eprintln!(
        "interval 2: knee {k} blocks, consolidated {third} blocks = {} bytes, predicted hit \
         ratio {:?}, {:?} ms; lookups {} hits {}; resident {}",
        third * BS,
        c.predicted_hit_ratio,
        c.predicted_ms,
        r.consolidated[0].lookups,
        r.consolidated[0].hits,
        r.consolidated[0].resident
    );
    assert!(c.predicted_hit_ratio.unwrap() >= 0.49, "{c:?}");
    // Both read again, still the image's bytes; resized each interval, still applied.
    read_all(&w, &w.h2, "vm2");
    read_all(&w, &w.h1, "vm1");
    let r = svc.tick().unwrap();
    assert_applied("interval 3", &svc, &r, &w, image);
    assert!(held(&w).stats.resident <= READ.max(third));

    // A write through a reader: an NBD error, and the image is unchanged.
    let file_before = std::fs::read(&w.image).unwrap();
    w.rt.block_on(async {
        let c = nbd::NbdClient::connect(w.h2.nbd_addr, "vm2").await.unwrap();
        let e = c.write(0, vec![0u8; BS as usize], true).await;
        eprintln!("write through vm2: {e:?}");
        assert!(e.is_err(), "a write to the read-only image was taken");
        let _ = c.disconnect().await;
    });
    read_all(&w, &w.h2, "vm2");
    read_all(&w, &w.h1, "vm1");
    assert_eq!(std::fs::read(&w.image).unwrap(), file_before);

    // A volume naming an unknown image: refused through the API, naming the field.
    let mut spec = svc
        .tenants()
        .into_iter()
        .find(|t| t.spec.name == "vdi")
        .unwrap()
        .spec;
    spec.volumes[0].image = Some("silver".into());
    let e = svc.put_tenant(spec, false).unwrap_err().to_string();
    assert!(
        e.contains("tenant \"vdi\".volume \"vm1\".image: unknown image `silver`"),
        "{e}"
    );
    drop(svc);

    // An image declared larger than its export: the rule's range is refused by the node
    // (4xx naming `range`), reported per node and field; nothing else is held up.
    let dir2 = dir.path().join("big");
    let svc = service(&w, &dir2, &config(scheme, "16MiB"));
    let r = svc.tick().unwrap();
    let refused: Vec<_> = r.refused.iter().filter(|x| x.node == "s1").collect();
    assert_eq!(refused.len(), 1, "{:?}", r.refused);
    assert_eq!(refused[0].field, "rules.golden.range");
    assert!(refused[0].reason.contains("range"), "{:?}", refused[0]);
    assert!(!refused[0].unsupported);
    let s = client(&w.s1);
    assert!(s.rules().unwrap().iter().all(|x| x.export != "golden"));
    // The node's answer itself is a 400.
    let e = s
        .create_rule(&api::node::CreateRule {
            export: "golden".into(),
            cache: "golden".into(),
            range: Some((0, 16 << 20)),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.status(), Some(400), "{e}");
    assert!(s.caches().unwrap().iter().any(|x| x.name == "golden"));
    eprintln!("16MiB image over an 8MiB export: {:?}", refused[0]);

    w.rt.block_on(async {
        let _ = w.h1.shutdown().await;
        let _ = w.h2.shutdown().await;
        let _ = w.s1.shutdown().await;
    });
}

#[test]
fn under_one_shared_cache_per_node_the_image_is_routed_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let w = world(dir.path());
    let svc = service(&w, dir.path(), &config("uncontrolled", "8MiB"));
    for round in 0..2 {
        let r = svc.tick().unwrap();
        assert!(r.refused.is_empty(), "{:?}", r.refused);
        assert!(svc.plan().unwrap().consolidated.is_empty());
        let s = client(&w.s1);
        let caches = s.caches().unwrap();
        let names: Vec<&str> = caches.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, [api::node::SHARED_CACHE], "round {round}");
        let rules = s.rules().unwrap();
        let mut exports: Vec<&str> = rules.iter().map(|x| x.export.as_str()).collect();
        exports.sort();
        assert_eq!(exports, ["db", "golden"], "round {round}: {rules:?}");
        assert!(rules.iter().all(|x| x.cache == caches[0].id));
        read_all(&w, &w.h1, "vm1");
        read_all(&w, &w.h2, "vm2");
    }
    w.rt.block_on(async {
        let _ = w.h1.shutdown().await;
        let _ = w.h2.shutdown().await;
        let _ = w.s1.shutdown().await;
    });
}
