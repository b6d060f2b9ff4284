//! Real NBD clients against our server: `qemu-io`, `qemu-img` (Debian `qemu-utils`) and
//! `nbdinfo` (Debian `libnbd-bin`).
//!
//! A missing tool FAILS the test with the package to install; it never passes silently.
//! The server runs in this process on 127.0.0.1 with an ephemeral port.

use std::process::Command;
use std::sync::Arc;
use std::thread::JoinHandle;

use nbd::server::{Capabilities, ExportMap};
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
        let exports = Arc::new(
            ExportMap::new()
                .with("disk", disk.clone())
                .with("ro", Arc::new(ro)),
        );
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
                nbd::serve(l, exports, async move {
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

/// Run a tool; panic naming the Debian package when the tool is missing.
fn run(tool: &str, package: &str, args: &[&str]) -> (bool, String) {
    let out = match Command::new(tool).args(args).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "`{tool}` is not installed: run `apt-get install -y {package}` \
             (CI installs it; this test must not pass without it)"
        ),
        Err(e) => panic!("could not run {tool}: {e}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn qemu_io(args: &[&str]) -> (bool, String) {
    run("qemu-io", "qemu-utils", args)
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
    let (ok, out) = run("nbdinfo", "libnbd-bin", &[&s.uri("disk")]);
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
    let (ok, out) = run("nbdinfo", "libnbd-bin", &["--size", &s.uri("ro")]);
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "1048576");
    let (ok, out) = run("nbdinfo", "libnbd-bin", &[&s.uri("ro")]);
    assert!(ok && out.contains("is_read_only: true"), "{out}");

    let base = format!("nbd://127.0.0.1:{}", s.port);
    let (ok, out) = run("nbdinfo", "libnbd-bin", &["--list", &base]);
    assert!(ok, "nbdinfo --list failed:\n{out}");
    assert!(out.contains("export=\"disk\":"), "{out}");
    assert!(out.contains("export=\"ro\":"), "{out}");
}

#[test]
fn qemu_img_info_reports_the_size() {
    let s = Server::start();
    let (ok, out) = run(
        "qemu-img",
        "qemu-utils",
        &["info", "--output=json", &s.uri("disk")],
    );
    assert!(ok, "qemu-img failed:\n{out}");
    assert!(out.contains("\"virtual-size\": 1048576"), "{out}");
    let (ok, out) = run("qemu-img", "qemu-utils", &["info", &s.uri("disk")]);
    assert!(
        ok && out.contains("virtual size: 1 MiB (1048576 bytes)"),
        "{out}"
    );
}
