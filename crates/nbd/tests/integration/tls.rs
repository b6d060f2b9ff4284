//! TLS (`NBD_OPT_STARTTLS`) and per-export allow-lists, through real clients and raw bytes.
//!
//! Certificates are made by the test (rcgen) into a temporary directory under the names
//! qemu and gnutls look for (`ca-cert.pem`, `server-cert.pem`, `server-key.pem`).
//! `nbdinfo` (Debian `libnbd-bin`) and `qemu-io`/`qemu-img` (`qemu-utils`) must be
//! installed: a missing tool FAILS the test with the package to install.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::common::run_tool;
use nbd::server::allow::AllowList;
use nbd::server::{Export, ExportMap, ExportProvider, Limits, ServerConfig};
use nbd::{MemExport, Tls, TlsMode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SIZE: u64 = 1 << 20;
const IHAVEOPT: &[u8; 8] = b"IHAVEOPT";
const ERR_POLICY: u32 = (1 << 31) | 2;
const ERR_TLS_REQD: u32 = (1 << 31) | 5;
const ERR_UNSUP: u32 = (1 << 31) | 1;
const ACK: u32 = 1;

/// Write a CA and a server certificate for `localhost` / 127.0.0.1 into `dir`.
fn make_certs(dir: &Path) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "lachesis test CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = rcgen::date_time_ymd(2020, 1, 1);
    ca.not_after = rcgen::date_time_ymd(2045, 1, 1);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let mut srv =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    srv.distinguished_name.push(DnType::CommonName, "localhost");
    srv.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    srv.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    srv.not_before = rcgen::date_time_ymd(2020, 1, 1);
    srv.not_after = rcgen::date_time_ymd(2045, 1, 1);
    let key = KeyPair::generate().unwrap();
    let cert = srv.signed_by(&key, &ca_cert, &ca_key).unwrap();
    std::fs::write(dir.join("ca-cert.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("server-cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("server-key.pem"), key.serialize_pem()).unwrap();
}

/// Exports with allow-lists: `disk` admits 127.0.0.1, `closed` admits only 10.0.0.0/8.
struct Guarded {
    map: ExportMap,
    lists: Vec<(&'static str, AllowList)>,
}

impl ExportProvider for Guarded {
    fn lookup(&self, name: &str) -> Option<Arc<dyn Export>> {
        self.map.lookup(name)
    }
    fn admits(&self, name: &str, peer: &str) -> bool {
        self.lists
            .iter()
            .find(|(n, _)| *n == name)
            .is_none_or(|(_, l)| l.admits(peer))
    }
    fn list(&self) -> Vec<String> {
        self.map.list()
    }
}

struct Server {
    port: u16,
    disk: Arc<MemExport>,
    dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(mode: TlsMode) -> Server {
        let dir = tempfile::tempdir().unwrap();
        make_certs(dir.path());
        let tls = Tls::from_pem_files(
            mode,
            &dir.path().join("server-cert.pem"),
            &dir.path().join("server-key.pem"),
        )
        .unwrap();
        let disk = Arc::new(MemExport::new(SIZE));
        let exports = Arc::new(Guarded {
            map: ExportMap::new()
                .with("disk", disk.clone())
                .with("closed", Arc::new(MemExport::new(SIZE))),
            lists: vec![
                (
                    "disk",
                    AllowList::parse(&["127.0.0.1/32", "::1/128"]).unwrap(),
                ),
                ("closed", AllowList::parse(&["10.0.0.0/8"]).unwrap()),
            ],
        });
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
                let config = ServerConfig::default();
                let limits = Limits::for_config(&config);
                nbd::Server::builder()
                    .config(config)
                    .limits(limits)
                    .tls(Some(tls))
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
            dir,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn dir(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    fn qemu_tls(&self, export: &str, cmds: &[&str]) -> (bool, String) {
        let object = format!("tls-creds-x509,id=tls0,dir={},endpoint=client", self.dir());
        let image = format!(
            "driver=nbd,host=127.0.0.1,port={},export={export},tls-creds=tls0",
            self.port
        );
        let mut args = vec!["--object", &object, "--image-opts", &image];
        for c in cmds {
            args.extend(["-c", c]);
        }
        run_tool("qemu-io", "qemu-utils", &args)
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

#[test]
fn qemu_io_writes_and_reads_back_over_tls() {
    let s = Server::start(TlsMode::Required);
    let (ok, out) = s.qemu_tls(
        "disk",
        &["write -P 0x5a 4096 128k", "read -P 0x5a 4096 128k"],
    );
    assert!(ok, "qemu-io over TLS failed:\n{out}");
    assert!(
        out.contains("wrote 131072/131072 bytes at offset 4096"),
        "{out}"
    );
    assert!(
        out.contains("read 131072/131072 bytes at offset 4096"),
        "{out}"
    );
    assert!(!out.contains("Pattern verification failed"), "{out}");
    // The bytes are in the export, and nothing around them.
    assert!(s.disk.read_sync(4096, 131072).iter().all(|&b| b == 0x5a));
    assert!(s.disk.read_sync(0, 4096).iter().all(|&b| b == 0));
    assert!(s
        .disk
        .read_sync(4096 + 131072, 4096)
        .iter()
        .all(|&b| b == 0));

    // qemu-img over TLS reads the size.
    let object = format!("tls-creds-x509,id=tls0,dir={},endpoint=client", s.dir());
    let image = format!(
        "driver=nbd,host=127.0.0.1,port={},export=disk,tls-creds=tls0",
        s.port
    );
    let (ok, out) = run_tool(
        "qemu-img",
        "qemu-utils",
        &["info", "--object", &object, "--image-opts", &image],
    );
    assert!(ok, "qemu-img info over TLS failed:\n{out}");
    assert!(out.contains("1 MiB (1048576 bytes)"), "{out}");
}

#[test]
fn nbdinfo_over_tls_and_plain_clients_refused() {
    let s = Server::start(TlsMode::Required);
    s.disk.write_sync(0, &[7u8; 512]);
    let uri = format!(
        "nbds://127.0.0.1:{}/disk?tls-certificates={}",
        s.port,
        s.dir()
    );
    let (ok, out) = run_tool("nbdinfo", "libnbd-bin", &["--size", &uri]);
    assert!(ok, "nbdinfo over TLS failed:\n{out}");
    assert_eq!(out.trim(), SIZE.to_string());
    let (ok, out) = run_tool("nbdinfo", "libnbd-bin", &[&uri]);
    assert!(ok, "{out}");
    assert!(out.contains("with TLS"), "{out}");
    // Block status (structured replies) inside TLS: the written page is data, the rest
    // a hole.
    let (ok, out) = run_tool("nbdinfo", "libnbd-bin", &["--map", "--json", &uri]);
    assert!(ok, "nbdinfo --map over TLS failed:\n{out}");
    let map: Vec<serde_json::Value> = serde_json::from_str(&out).expect(&out);
    let got: Vec<(u64, u64, u64)> = map
        .iter()
        .map(|e| {
            let n = |k: &str| e[k].as_u64().unwrap();
            (n("offset"), n("length"), n("type"))
        })
        .collect();
    assert_eq!(got, vec![(0, 4096, 0), (4096, SIZE - 4096, 3)], "{out}");

    // Plain clients get nothing: nbdinfo and qemu-io without TLS fail.
    let plain = format!("nbd://127.0.0.1:{}/disk", s.port);
    let (ok, out) = run_tool("nbdinfo", "libnbd-bin", &["--size", &plain]);
    assert!(
        !ok,
        "a plain nbdinfo got through a TLS-required server:\n{out}"
    );
    let (ok, out) = run_tool(
        "qemu-io",
        "qemu-utils",
        &["-f", "raw", &plain, "-c", "read 0 512"],
    );
    assert!(!ok, "a plain qemu-io got through:\n{out}");
    assert!(
        out.to_lowercase().contains("tls"),
        "the refusal should name TLS:\n{out}"
    );

    // A client that trusts another CA refuses the server.
    let other = tempfile::tempdir().unwrap();
    make_certs(other.path());
    let wrong = format!(
        "nbds://127.0.0.1:{}/disk?tls-certificates={}",
        s.port,
        other.path().display()
    );
    let (ok, out) = run_tool("nbdinfo", "libnbd-bin", &["--size", &wrong]);
    assert!(!ok, "a client trusting another CA connected:\n{out}");
}

#[test]
fn optional_tls_serves_both_and_allow_lists_refuse() {
    let s = Server::start(TlsMode::Optional);
    let (ok, out) = s.qemu_tls("disk", &["write -P 0x11 0 4k", "read -P 0x11 0 4k"]);
    assert!(ok, "{out}");
    let plain = format!("nbd://127.0.0.1:{}/disk", s.port);
    let (ok, out) = run_tool(
        "qemu-io",
        "qemu-utils",
        &["-f", "raw", &plain, "-c", "read -P 0x11 0 4k"],
    );
    assert!(ok, "plain client on optional TLS failed:\n{out}");
    assert!(!out.contains("Pattern verification failed"), "{out}");

    // `closed` admits 10.0.0.0/8 only: qemu-io from 127.0.0.1 is refused, TLS or not.
    let (ok, out) = s.qemu_tls("closed", &["read 0 4k"]);
    assert!(!ok, "a client outside the allow-list got in:\n{out}");
    let closed = format!("nbd://127.0.0.1:{}/closed", s.port);
    let (ok, out) = run_tool(
        "qemu-io",
        "qemu-utils",
        &["-f", "raw", &closed, "-c", "read 0 4k"],
    );
    assert!(!ok, "a client outside the allow-list got in:\n{out}");
}

/// Raw bytes: greeting, flags, then one option; returns the reply type (and the stream).
async fn option(port: u16, code: u32, data: &[u8]) -> (tokio::net::TcpStream, Option<u32>) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut greet = [0u8; 18];
    s.read_exact(&mut greet).await.unwrap();
    assert_eq!(&greet[..8], b"NBDMAGIC");
    s.write_all(&3u32.to_be_bytes()).await.unwrap();
    send_option(&mut s, code, data).await;
    let t = reply_type(&mut s).await;
    (s, t)
}

async fn send_option(s: &mut tokio::net::TcpStream, code: u32, data: &[u8]) {
    let mut m = Vec::new();
    m.extend_from_slice(IHAVEOPT);
    m.extend_from_slice(&code.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    s.write_all(&m).await.unwrap();
}

/// The type of the next option reply (its data skipped), or `None` if the server closed.
async fn reply_type(s: &mut tokio::net::TcpStream) -> Option<u32> {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).await.ok()?;
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
    let mut d = vec![0; len as usize];
    s.read_exact(&mut d).await.ok()?;
    Some(u32::from_be_bytes(h[12..16].try_into().unwrap()))
}

fn go(name: &str) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&0u16.to_be_bytes());
    d
}

#[tokio::test]
async fn raw_required_mode_refuses_everything_but_starttls() {
    let s = Server::start(TlsMode::Required);
    // GO, INFO and LIST in clear: NBD_REP_ERR_TLS_REQD, and negotiation goes on.
    let (mut c, t) = option(s.port, 7, &go("disk")).await;
    assert_eq!(t, Some(ERR_TLS_REQD));
    send_option(&mut c, 6, &go("disk")).await;
    assert_eq!(reply_type(&mut c).await, Some(ERR_TLS_REQD));
    send_option(&mut c, 3, &[]).await;
    assert_eq!(reply_type(&mut c).await, Some(ERR_TLS_REQD));
    // EXPORT_NAME in clear has no error reply: the server closes.
    send_option(&mut c, 1, b"disk").await;
    let mut b = [0u8; 1];
    assert_eq!(c.read(&mut b).await.unwrap(), 0, "the server must close");
    // STARTTLS is acknowledged; plaintext sent instead of the TLS handshake is never
    // taken as an option: the connection closes (at most with a TLS alert, never with an
    // NBD reply).
    let (mut c, t) = option(s.port, 5, &[]).await;
    assert_eq!(t, Some(ACK));
    send_option(&mut c, 7, &go("disk")).await;
    let mut got = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(5), c.read_to_end(&mut got))
        .await
        .expect("the server must close, not wait")
        .ok();
    assert!(
        got.is_empty() || got[0] == 0x15,
        "plaintext after STARTTLS got an answer other than a TLS alert: {got:02x?}"
    );
}

#[tokio::test]
async fn raw_allow_list_answers_policy() {
    let s = Server::start(TlsMode::Optional);
    let (mut c, t) = option(s.port, 7, &go("closed")).await;
    assert_eq!(t, Some(ERR_POLICY));
    send_option(&mut c, 6, &go("disk")).await;
    let mut h = [0u8; 20];
    c.read_exact(&mut h).await.unwrap();
    assert_eq!(
        u32::from_be_bytes(h[12..16].try_into().unwrap()),
        3,
        "REP_INFO"
    );
    let (_c, t) = option(s.port, 1, b"closed").await;
    assert_eq!(t, None, "EXPORT_NAME outside the allow-list closes");
}

#[tokio::test]
async fn starttls_is_unsupported_when_off() {
    let disk = Arc::new(MemExport::new(SIZE));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        nbd::Server::builder()
            .build(l, Arc::new(ExportMap::new().with("d", disk)))
            .serve(async {
                let _ = rx.await;
            }),
    );
    let (mut c, t) = option(port, 5, &[]).await;
    assert_eq!(t, Some(ERR_UNSUP));
    send_option(&mut c, 7, &go("d")).await;
    let mut h = [0u8; 20];
    c.read_exact(&mut h).await.unwrap();
    assert_eq!(u32::from_be_bytes(h[12..16].try_into().unwrap()), 3);
    drop(c);
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

/// Our own client (what a level-1 node uses to reach its level-2 node) over STARTTLS.
#[test]
fn our_client_upgrades_to_tls_and_refuses_to_go_on_in_clear() {
    use nbd::{ClientError, ClientTls, NbdClient};
    let s = Server::start(TlsMode::Required);
    let addr = format!("127.0.0.1:{}", s.port);
    let ca = s.dir.path().join("ca-cert.pem");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Trusting the right CA: written bytes read back, through TLS.
        let tls = ClientTls::from_pem_files(TlsMode::Required, &ca, None).unwrap();
        let c = NbdClient::connect_tls(&addr, "disk", &tls).await.unwrap();
        assert_eq!(c.size(), SIZE);
        c.write(8192, bytes::Bytes::from(vec![0x3c; 4096]), true)
            .await
            .unwrap();
        assert_eq!(&c.read(8192, 4096).await.unwrap()[..], &[0x3c; 4096][..]);
        c.disconnect().await.unwrap();
        assert!(s.disk.read_sync(8192, 4096).iter().all(|&b| b == 0x3c));

        // A client that trusts another CA: the handshake fails, and says so.
        let other = tempfile::tempdir().unwrap();
        make_certs(other.path());
        let wrong =
            ClientTls::from_pem_files(TlsMode::Required, &other.path().join("ca-cert.pem"), None)
                .unwrap();
        let err = NbdClient::connect_tls(&addr, "disk", &wrong)
            .await
            .err()
            .expect("a server signed by another CA was trusted");
        assert!(matches!(err, ClientError::Tls(_)), "{err}");
        assert!(err.to_string().contains("TLS handshake failed"), "{err}");

        // Without TLS a required server refuses to serve: the plain client cannot open.
        assert!(NbdClient::connect(addr.as_str(), "disk").await.is_err());
        // A file that is no certificate is an error naming it.
        let bad = s.dir.path().join("server-key.pem");
        let e = ClientTls::from_pem_files(TlsMode::Required, &bad, None).unwrap_err();
        assert!(e.to_string().contains("server-key.pem"), "{e}");
    });

    // A server without TLS: a client requiring it refuses to go on in clear; one for
    // which it is optional goes on.
    let disk = Arc::new(MemExport::new(SIZE));
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let plain = l.local_addr().unwrap().to_string();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(
            nbd::Server::builder()
                .build(l, Arc::new(ExportMap::new().with("d", disk.clone())))
                .serve(async {
                    let _ = rx.await;
                }),
        );
        let required = ClientTls::from_pem_files(TlsMode::Required, &ca, None).unwrap();
        let err = NbdClient::connect_tls(&plain, "d", &required)
            .await
            .err()
            .expect("went on in clear although TLS is required");
        assert!(
            matches!(err, ClientError::TlsRefused { reply } if reply == ERR_UNSUP),
            "{err}"
        );
        let optional = ClientTls::from_pem_files(TlsMode::Optional, &ca, None).unwrap();
        let c = NbdClient::connect_tls(&plain, "d", &optional)
            .await
            .unwrap();
        c.write(0, bytes::Bytes::from_static(b"clear"), false)
            .await
            .unwrap();
        assert_eq!(&c.read(0, 5).await.unwrap()[..], b"clear");
        c.disconnect().await.unwrap();
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    });
}
