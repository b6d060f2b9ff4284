//! The node's NBD TLS, allow-lists and in-flight budget metrics, end to end: a node started
//! from a `node.toml` with `tls = "required"`, reached by `qemu-io` (Debian `qemu-utils`)
//! over TLS with certificates made here (rcgen), refused in clear and outside an export's
//! allow-list, and its `/metrics` showing the budget.

use crate::common::TestNode;
use node::config::NodeConfig;
use std::path::Path;
use std::process::Command;

fn make_certs(dir: &Path) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "node test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.not_before = rcgen::date_time_ymd(2020, 1, 1);
    ca.not_after = rcgen::date_time_ymd(2045, 1, 1);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let mut srv =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    srv.distinguished_name.push(DnType::CommonName, "localhost");
    srv.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    srv.not_before = rcgen::date_time_ymd(2020, 1, 1);
    srv.not_after = rcgen::date_time_ymd(2045, 1, 1);
    let key = KeyPair::generate().unwrap();
    let cert = srv.signed_by(&key, &ca_cert, &ca_key).unwrap();
    std::fs::write(dir.join("ca-cert.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("server-cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("server-key.pem"), key.serialize_pem()).unwrap();
}

const NODE: &str = r#"
[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "8MiB"
in_flight_budget = "16MiB"
tls = "required"
tls_cert = "server-cert.pem"
tls_key = "server-key.pem"
[[export]]
name = "demo"
file = "demo.img"
size = "16MiB"
allow = ["127.0.0.1/32", "::1/128"]
[[export]]
name = "closed"
file = "closed.img"
size = "1MiB"
allow = ["10.0.0.0/8"]
[[cache]]
name = "c"
size = "4MiB"
[[rule]]
export = "demo"
cache = "c"
"#;

fn start() -> TestNode {
    TestNode::start_prepared(NODE, make_certs)
}

fn qemu_io(args: &[&str]) -> (bool, String) {
    let out = Command::new("qemu-io")
        .args(args)
        .output()
        .expect("qemu-io must be installed (apt-get install qemu-utils; .ci/run does)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn qemu_tls(t: &TestNode, export: &str, cmds: &[&str]) -> (bool, String) {
    let addr = t.node().nbd_addr;
    let object = format!(
        "tls-creds-x509,id=tls0,dir={},endpoint=client",
        t.dir.path().display()
    );
    let image = format!(
        "driver=nbd,host=127.0.0.1,port={},export={export},tls-creds=tls0",
        addr.port()
    );
    let mut args = vec!["--object", &object, "--image-opts", &image];
    for c in cmds {
        args.extend(["-c", c]);
    }
    qemu_io(&args)
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn tls_required_node_serves_qemu_over_tls_only_and_to_allowed_clients() {
    let t = start();
    let (ok, out) = qemu_tls(
        &t,
        "demo",
        &["write -P 0xc3 1M 2M", "flush", "read -P 0xc3 1M 2M"],
    );
    assert!(ok, "qemu-io over TLS failed:\n{out}");
    assert!(
        out.contains("wrote 2097152/2097152 bytes at offset 1048576"),
        "{out}"
    );
    assert!(
        out.contains("read 2097152/2097152 bytes at offset 1048576"),
        "{out}"
    );
    assert!(!out.contains("Pattern verification failed"), "{out}");
    // The bytes reached the image file.
    let img = std::fs::read(t.dir.path().join("demo.img")).unwrap();
    assert!(img[1 << 20..3 << 20].iter().all(|&b| b == 0xc3));
    assert!(img[..1 << 20].iter().all(|&b| b == 0));

    // In clear: refused, naming TLS.
    let (ok, out) = qemu_io(&["-f", "raw", &t.uri("demo"), "-c", "read 0 4k"]);
    assert!(!ok, "a plain client got through:\n{out}");
    assert!(out.to_lowercase().contains("tls"), "{out}");
    // Outside the allow-list: refused even over TLS.
    let (ok, out) = qemu_tls(&t, "closed", &["read 0 4k"]);
    assert!(!ok, "a client outside the allow-list got in:\n{out}");

    // The budget in /metrics: its limit is the configured 16 MiB, and the 2 MiB write
    // (one request of qemu's up to 2 MiB) was counted in flight.
    let (s, v) = t.api_as(None, "GET", "/metrics", None);
    assert_eq!(s, 200);
    let m = v.as_str().unwrap();
    assert_eq!(metric(m, "lachesis_nbd_in_flight_limit_bytes"), 16 << 20);
    assert_eq!(
        metric(m, "lachesis_nbd_in_flight_bytes"),
        0,
        "nothing in flight now"
    );
    let peak = metric(m, "lachesis_nbd_in_flight_peak_bytes");
    assert!(
        peak >= 1 << 20,
        "write payloads count in the budget: peak {peak}"
    );
    let _ = metric(m, "lachesis_nbd_budget_waits_total");
    t.stop();
}

#[test]
fn bad_tls_and_allow_settings_name_the_field() {
    let e = NodeConfig::parse(&NODE.replace("tls = \"required\"", "tls = \"yes\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("node.tls"), "{e}");
    let e = NodeConfig::parse(&NODE.replace("10.0.0.0/8", "10.0.0.300/8"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("export[1].allow[0]"), "{e}");
    // Missing certificate files are reported at start, naming the field and the file.
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = NodeConfig::parse(NODE).unwrap();
    cfg.node.data_dir = Some(dir.path().to_path_buf());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let e = rt
        .block_on(node::start(&cfg))
        .err()
        .expect("must fail")
        .to_string();
    assert!(
        e.contains("node.tls_cert") && e.contains("server-cert.pem"),
        "{e}"
    );
}

/// A level-1 node reaching a TLS-required level-2 node: `upstream_tls`.
fn level_one(l2: &TestNode, mode: &str, ca_from: &Path) -> (NodeConfig, tempfile::TempDir) {
    let text = format!(
        r#"
[node]
nbd = "127.0.0.1:0"
api = "127.0.0.1:0"
cache_size = "8MiB"
[[export]]
name = "vol"
upstream = ["{}/demo"]
upstream_tls = "{mode}"
upstream_tls_ca = "upstream-ca.pem"
[[cache]]
name = "c"
size = "4MiB"
write_policy = "write-through"
[[rule]]
export = "vol"
cache = "c"
"#,
        l2.node().nbd_addr
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        ca_from.join("ca-cert.pem"),
        dir.path().join("upstream-ca.pem"),
    )
    .unwrap();
    let mut cfg = NodeConfig::parse(&text).unwrap();
    cfg.node.data_dir = Some(dir.path().to_path_buf());
    (cfg, dir)
}

#[test]
fn level_one_reaches_a_tls_required_level_two_over_tls() {
    let l2 = start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (cfg, _dir) = level_one(&l2, "required", l2.dir.path());
    let l1 = rt.block_on(node::start(&cfg)).unwrap();
    let uri = format!("nbd://{}/vol", l1.nbd_addr);
    let (ok, out) = qemu_io(&[
        "-f",
        "raw",
        &uri,
        "-c",
        "write -P 0x6e 512k 1M",
        "-c",
        "flush",
        "-c",
        "read -P 0x6e 512k 1M",
    ]);
    assert!(ok && !out.contains("Pattern verification failed"), "{out}");
    assert!(
        out.contains("read 1048576/1048576 bytes at offset 524288"),
        "{out}"
    );
    // The bytes crossed the TLS link into level 2's image.
    let (ok, out) = qemu_tls(&l2, "demo", &["read -P 0x6e 512k 1M", "read -P 0 0 512k"]);
    assert!(ok && !out.contains("Pattern verification failed"), "{out}");
    rt.block_on(l1.shutdown()).unwrap();

    // A CA that did not sign level 2's certificate: start fails, naming the setting.
    let other = tempfile::tempdir().unwrap();
    make_certs(other.path());
    let (cfg, _dir) = level_one(&l2, "required", other.path());
    let e = rt
        .block_on(node::start(&cfg))
        .err()
        .expect("trusted a certificate another CA signed")
        .to_string();
    assert!(
        e.contains("TLS handshake failed") && e.contains("upstream_tls_ca"),
        "{e}"
    );
    // `upstream_tls = "off"` against a TLS-required level 2: refused, not served in clear.
    let (cfg, _dir) = level_one(&l2, "off", l2.dir.path());
    let e = rt
        .block_on(node::start(&cfg))
        .err()
        .expect("reached a TLS-required upstream in clear")
        .to_string();
    assert!(e.contains("upstream"), "{e}");
    // Settings are checked when the file is read.
    let e = NodeConfig::parse(
        "[node]\ncache_size = \"8MiB\"\n[[export]]\nname = \"v\"\nupstream = [\"h:1/v\"]\nupstream_tls = \"required\"\n",
    )
    .unwrap_err().to_string();
    assert!(e.contains("upstream_tls_ca"), "{e}");
    let e = NodeConfig::parse(
        "[node]\ncache_size = \"8MiB\"\n[[export]]\nname = \"v\"\nupstream = [\"h:1/v\"]\nupstream_tls = \"maybe\"\n",
    )
    .unwrap_err().to_string();
    assert!(e.contains("export[0] (`v`).upstream_tls"), "{e}");
    l2.stop();
}
