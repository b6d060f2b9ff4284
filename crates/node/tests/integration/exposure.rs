//! Issue 35 item 11 on `/metrics`: it answers without a token, so it carries no client
//! addresses unless `[node] metrics_client_labels = true`; the series are then summed
//! over the export's clients.

use crate::common::TestNode;

const NODE: &str = r#"
[node]
cache_size = "4MiB"
[[export]]
name = "vol"
tenant = "alice"
file = "vol.img"
size = "4MiB"
"#;

/// Two reads and a write through NBD, then `/metrics` without a token.
fn metrics_after_io(t: &TestNode) -> String {
    let addr = t.node().nbd_addr;
    t.rt.block_on(async {
        for _ in 0..2 {
            let c = nbd::NbdClient::connect(addr, "vol").await.unwrap();
            c.write(0, vec![1u8; 4096], false).await.unwrap();
            c.read(0, 4096).await.unwrap();
        }
    });
    let url = format!("http://{}/metrics", t.node().api_addr);
    ureq::get(&url).call().unwrap().into_string().unwrap()
}

#[test]
fn metrics_carry_client_addresses_only_when_asked() {
    let t = TestNode::start(NODE);
    let m = metrics_after_io(&t);
    let tenant: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("lachesis_tenant_"))
        .collect();
    assert!(!tenant.is_empty(), "{m}");
    assert!(!m.contains("client=") && !m.contains("127.0.0.1"), "{m}");
    // Summed over both connections' client.
    assert!(
        m.contains("lachesis_tenant_requests_total{export=\"vol\",tenant=\"alice\",op=\"read\"} 2"),
        "{m}"
    );
    assert!(
        m.contains(
            "lachesis_tenant_latency_seconds_count{export=\"vol\",tenant=\"alice\",op=\"write\"} 2"
        ),
        "{m}"
    );
    t.stop();

    let t = TestNode::start(&NODE.replace("[node]", "[node]\nmetrics_client_labels = true"));
    let m = metrics_after_io(&t);
    assert!(
        m.contains(
            "lachesis_tenant_requests_total{export=\"vol\",client=\"127.0.0.1\",tenant=\"alice\",op=\"read\"} 2"
        ),
        "{m}"
    );
    t.stop();
}
