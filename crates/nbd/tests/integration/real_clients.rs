//! Real NBD clients against our server: `qemu-io`, `qemu-img` (Debian `qemu-utils`),
//! `nbdinfo` and `nbdcopy` (Debian `libnbd-bin`).
//!
//! A missing tool FAILS the test with the package to install; it never passes silently.
//! The server runs in this process on 127.0.0.1 with an ephemeral port.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::common::run_tool;
use nbd::server::{BoxFuture, Capabilities, ExportMap};
use nbd::MemExport;

const SIZE: u64 = 1 << 20;

struct Server {
    port: u16,
    disk: Arc<MemExport>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start() -> Server {
        let disk = Arc::new(MemExport::new(SIZE));
        let ro = MemExport::new(SIZE).with_capabilities(Capabilities {
            read_only: true,
            ..Capabilities::default()
        });
        let exports = ExportMap::new()
            .with("disk", disk.clone())
            .with("ro", Arc::new(ro));
        Server::serving(exports, disk)
    }

    /// Serve `exports` (`disk` is kept for tests that look inside it).
    fn serving(exports: ExportMap, disk: Arc<MemExport>) -> Server {
        let exports = Arc::new(exports);
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                port_tx.send(l.local_addr().unwrap().port()).unwrap();
                nbd::Server::builder()
                    .build(l, exports)
                    .serve(async move {
                        let _ = rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        Server {
            port: port_rx.recv().unwrap(),
            disk,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn uri(&self, export: &str) -> String {
        format!("nbd://127.0.0.1:{}/{export}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn qemu_io(args: &[&str]) -> (bool, String) {
    run_tool("qemu-io", "qemu-utils", args)
}

#[test]
fn qemu_io_writes_and_reads_back() {
    let s = Server::start();
    let uri = s.uri("disk");
    let (ok, out) = qemu_io(&[
        "-f",
        "raw",
        &uri,
        "-c",
        "write -P 0xab 0 64k",
        "-c",
        "read -P 0xab 0 64k",
    ]);
    assert!(ok, "qemu-io failed:\n{out}");
    assert!(out.contains("wrote 65536/65536 bytes at offset 0"), "{out}");
    assert!(out.contains("read 65536/65536 bytes at offset 0"), "{out}");
    assert!(!out.contains("Pattern verification failed"), "{out}");
    // The bytes really are in the export.
    assert!(s.disk.read_sync(0, 65536).iter().all(|&b| b == 0xab));
    assert!(s.disk.read_sync(65536, 4096).iter().all(|&b| b == 0));

    // The pattern check is real: a wrong pattern is reported.
    let (ok, out) = qemu_io(&["-f", "raw", &uri, "-c", "read -P 0xcd 0 4k"]);
    assert!(
        !ok && out.contains("Pattern verification failed at offset 0"),
        "{out}"
    );

    // Write zeroes, discard (trim), flush and an FUA write.
    let (ok, out) = qemu_io(&[
        "-f",
        "raw",
        &uri,
        "-c",
        "write -z 4k 4k",
        "-c",
        "discard 32k 32k",
        "-c",
        "flush",
        "-c",
        "write -f -P 0x11 128k 4k",
        "-c",
        "read -P 0 4k 4k",
        "-c",
        "read -P 0 32k 32k",
        "-c",
        "read -P 0x11 128k 4k",
    ]);
    assert!(ok, "qemu-io failed:\n{out}");
    assert!(!out.contains("Pattern verification failed"), "{out}");
    let st = s.disk.stats();
    assert_eq!(st.write_zeroes, 1, "{st:?}");
    assert_eq!(st.trims, 1, "{st:?}");
    assert!(st.fua >= 1, "the FUA write arrived with its flag: {st:?}");
    assert!(st.flushes >= 1, "{st:?}");
    let back = s.disk.read_sync(0, 64 * 1024);
    assert!(back[..4096].iter().all(|&b| b == 0xab));
    assert!(back[4096..8192].iter().all(|&b| b == 0));
    assert!(back[8192..32768].iter().all(|&b| b == 0xab));
    assert!(back[32768..].iter().all(|&b| b == 0));
    assert!(s
        .disk
        .read_sync(128 * 1024, 4096)
        .iter()
        .all(|&b| b == 0x11));
}

#[test]
fn qemu_io_sees_read_only_and_unknown_exports() {
    let s = Server::start();
    let (ok, out) = qemu_io(&["-f", "raw", &s.uri("nope"), "-c", "read 0 4k"]);
    assert!(
        !ok && out.contains("Requested export not available"),
        "{out}"
    );
    let (ok, out) = qemu_io(&["-r", "-f", "raw", &s.uri("ro"), "-c", "read -P 0 0 4k"]);
    assert!(ok, "read-only open failed:\n{out}");
    let (ok, out) = qemu_io(&["-f", "raw", &s.uri("ro"), "-c", "write 0 4k"]);
    assert!(!ok, "a write to a read-only export succeeded:\n{out}");
}

#[test]
fn nbdinfo_reports_size_flags_and_list() {
    let s = Server::start();
    let (ok, out) = run_tool("nbdinfo", "libnbd-bin", &[&s.uri("disk")]);
    assert!(ok, "nbdinfo failed:\n{out}");
    for want in [
        "export-size: 1048576",
        "is_read_only: false",
        "can_flush: true",
        "can_fua: true",
        "can_trim: true",
        "can_zero: true",
        "can_multi_conn: true",
        "block_size_preferred: 4096",
        "block_size_maximum: 33554432",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    let (ok, out) = run_tool("nbdinfo", "libnbd-bin", &["--size", &s.uri("ro")]);
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "1048576");
    let (ok, out) = run_tool("nbdinfo", "libnbd-bin", &[&s.uri("ro")]);
    assert!(ok && out.contains("is_read_only: true"), "{out}");

    let base = format!("nbd://127.0.0.1:{}", s.port);
    let (ok, out) = run_tool("nbdinfo", "libnbd-bin", &["--list", &base]);
    assert!(ok, "nbdinfo --list failed:\n{out}");
    assert!(out.contains("export=\"disk\":"), "{out}");
    assert!(out.contains("export=\"ro\":"), "{out}");
}

#[test]
fn qemu_img_info_reports_the_size() {
    let s = Server::start();
    let (ok, out) = run_tool(
        "qemu-img",
        "qemu-utils",
        &["info", "--output=json", &s.uri("disk")],
    );
    assert!(ok, "qemu-img failed:\n{out}");
    assert!(out.contains("\"virtual-size\": 1048576"), "{out}");
    let (ok, out) = run_tool("qemu-img", "qemu-utils", &["info", &s.uri("disk")]);
    assert!(
        ok && out.contains("virtual size: 1 MiB (1048576 bytes)"),
        "{out}"
    );
}

/// A sparse image file: 64 MiB with 1 MiB of 0x77 at 8 MiB and 4 KiB of 0x99 at 40 MiB.
fn sparse_image(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::FileExt;
    let path = dir.join("sparse.img");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(64 << 20).unwrap();
    f.write_all_at(&vec![0x77; 1 << 20], 8 << 20).unwrap();
    f.write_all_at(&[0x99; 4096], 40 << 20).unwrap();
    f.sync_all().unwrap();
    path
}

/// Bytes the file system really allocated to `path` (what `du` counts).
fn allocated(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// An export that counts the bytes read from it (to see what a client skipped).
struct Counting {
    inner: nbd::FileExport,
    read: std::sync::atomic::AtomicU64,
}

impl nbd::Export for Counting {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn read(&self, offset: u64, len: u32) -> BoxFuture<'_, std::io::Result<bytes::Bytes>> {
        self.read
            .fetch_add(len as u64, std::sync::atomic::Ordering::Relaxed);
        self.inner.read(offset, len)
    }
    fn write(
        &self,
        offset: u64,
        data: bytes::Bytes,
        fua: bool,
    ) -> BoxFuture<'_, std::io::Result<()>> {
        self.inner.write(offset, data, fua)
    }
    fn flush(&self) -> BoxFuture<'_, std::io::Result<()>> {
        self.inner.flush()
    }
    fn trim(&self, offset: u64, len: u32) -> BoxFuture<'_, std::io::Result<()>> {
        self.inner.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> BoxFuture<'_, std::io::Result<()>> {
        self.inner.write_zeroes(offset, len, fua)
    }
    fn block_status(
        &self,
        offset: u64,
        len: u32,
    ) -> BoxFuture<'_, std::io::Result<Vec<nbd::server::export::Extent>>> {
        self.inner.block_status(offset, len)
    }
}

#[test]
fn block_status_keeps_sparse_images_sparse_through_real_clients() {
    let dir = tempfile::tempdir().unwrap();
    let image = sparse_image(dir.path());
    let file = Arc::new(Counting {
        inner: nbd::FileExport::open(&image, false).unwrap(),
        read: Default::default(),
    });
    let s = Server::serving(
        ExportMap::new().with("img", file.clone()),
        Arc::new(MemExport::new(SIZE)),
    );
    let uri = s.uri("img");

    // nbdinfo --map: holes and data where the file has them.
    let (ok, out) = run_tool("nbdinfo", "libnbd-bin", &["--map", "--json", &uri]);
    assert!(ok, "nbdinfo --map failed:\n{out}");
    let map: Vec<serde_json::Value> = serde_json::from_str(&out).expect(&out);
    let at = |offset: u64| {
        map.iter()
            .find(|e| {
                let o = e["offset"].as_u64().unwrap();
                o <= offset && offset < o + e["length"].as_u64().unwrap()
            })
            .unwrap_or_else(|| panic!("offset {offset} not mapped: {out}"))["type"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(at(0), 3, "hole,zero at the start: {out}");
    assert_eq!(at(8 << 20), 0, "data at 8 MiB: {out}");
    assert_eq!(at((9 << 20) - 1), 0, "{out}");
    assert_eq!(at(20 << 20), 3, "{out}");
    assert_eq!(at(40 << 20), 0, "{out}");
    assert_eq!(at((64 << 20) - 1), 3, "{out}");
    let total: u64 = map.iter().map(|e| e["length"].as_u64().unwrap()).sum();
    assert_eq!(total, 64 << 20);
    let data: u64 = map
        .iter()
        .filter(|e| e["type"].as_u64() == Some(0))
        .map(|e| e["length"].as_u64().unwrap())
        .sum();
    assert!(
        ((1 << 20) + 4096..=3 << 20).contains(&data),
        "about 1 MiB of data mapped, got {data}: {out}"
    );

    // qemu-img map agrees.
    let (ok, out) = run_tool("qemu-img", "qemu-utils", &["map", "--output=json", &uri]);
    assert!(ok, "qemu-img map failed:\n{out}");
    let qmap: Vec<serde_json::Value> = serde_json::from_str(&out).expect(&out);
    let data_at = |offset: u64| {
        qmap.iter()
            .find(|e| {
                let o = e["start"].as_u64().unwrap();
                o <= offset && offset < o + e["length"].as_u64().unwrap()
            })
            .unwrap_or_else(|| panic!("offset {offset} not mapped: {out}"))["data"]
            .as_bool()
            .unwrap()
    };
    assert!(!data_at(0) && data_at(8 << 20) && !data_at(30 << 20) && data_at(40 << 20));

    // qemu-img convert skips the holes: the copy is as sparse as the image, and equal.
    let copy = dir.path().join("copy.img");
    let (ok, out) = run_tool(
        "qemu-img",
        "qemu-utils",
        &["convert", "-O", "raw", &uri, copy.to_str().unwrap()],
    );
    assert!(ok, "qemu-img convert failed:\n{out}");
    // It read the data, not the 64 MiB: the holes were skipped, not scanned.
    let read = file.read.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        ((1 << 20) + 4096..=4 << 20).contains(&read),
        "qemu-img convert read {read} bytes of a 64 MiB image holding 1 MiB + 4 KiB"
    );
    assert_eq!(std::fs::metadata(&copy).unwrap().len(), 64 << 20);
    let (src, dst) = (allocated(&image), allocated(&copy));
    assert!(
        dst <= src + (1 << 20) && dst < 8 << 20,
        "the copy allocated {dst} bytes against the image's {src} (of 64 MiB)"
    );
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&image).unwrap()
    );

    // nbdcopy too: it reads the data extents only and zeroes (punches) the holes of a
    // sparse destination file, so the copy stays sparse and equal.
    file.read.store(0, std::sync::atomic::Ordering::Relaxed);
    let copy2 = dir.path().join("copy2.img");
    std::fs::File::create(&copy2)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let (ok, out) = run_tool("nbdcopy", "libnbd-bin", &[&uri, copy2.to_str().unwrap()]);
    assert!(ok, "nbdcopy failed:\n{out}");
    let read = file.read.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        ((1 << 20) + 4096..=4 << 20).contains(&read),
        "nbdcopy read {read} bytes of a 64 MiB image holding 1 MiB + 4 KiB"
    );
    let dst = allocated(&copy2);
    assert!(
        dst <= src + (1 << 20) && dst < 8 << 20,
        "nbdcopy's copy allocated {dst} bytes against the image's {src} (of 64 MiB)"
    );
    assert_eq!(
        std::fs::read(&copy2).unwrap(),
        std::fs::read(&image).unwrap()
    );

    // Reads with structured replies negotiated return the right bytes.
    let (ok, out) = qemu_io(&[
        "-f",
        "raw",
        &uri,
        "-c",
        "read -P 0x77 8M 1M",
        "-c",
        "read -P 0x99 40M 4k",
        "-c",
        "read -P 0 0 1M",
    ]);
    assert!(ok, "qemu-io failed:\n{out}");
    assert!(!out.contains("Pattern verification failed"), "{out}");
    assert!(
        out.contains("read 1048576/1048576 bytes at offset 8388608"),
        "{out}"
    );
}
