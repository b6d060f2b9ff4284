//! The node's own page in headless Chromium (Debian's `chromium` and `chromium-driver`,
//! through WebDriver with `fantoccini`): a node with a cache that real NBD reads went
//! through shows the cache with the size and hit ratio `/v1/caches` gives, and its curve
//! drawn with as many points as `/v1/caches/{name}/curve` returns, miss ratio falling with
//! size, the current size marked. Fails (does not skip) when Chromium or chromedriver is
//! missing.

use crate::common::TestNode;
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NODE: &str = r#"
[node]
cache_size = "8MiB"
[[export]]
name = "vol"
tenant = "alice"
file = "vol.img"
size = "8MiB"
[[cache]]
name = "hot"
size = "1MiB"
[[rule]]
export = "vol"
cache = "hot"
"#;

struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn browser() -> (Driver, fantoccini::Client) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let driver = Driver(
        Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `chromedriver` ({e}): install it \
                     (Debian: apt-get install chromium chromium-driver)"
                )
            }),
    );
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "chromedriver did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut opts = json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
        "--disable-dev-shm-usage", "--window-size=1400,1600"]});
    if std::path::Path::new("/usr/bin/chromium").exists() {
        opts["binary"] = json!("/usr/bin/chromium");
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), opts);
    let client =
        fantoccini::ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a headless Chromium session (is `chromium` installed?)");
    (driver, client)
}

const READ_PAGE: &str = r##"
const q = (s, r) => [...(r || document).querySelectorAll(s)];
return {
  err: document.getElementById("err").textContent,
  caches: q("#caches tr").slice(1).map(tr => q("td", tr).map(td => td.textContent.trim())),
  tenant_header: q("#tenants th").map(th => th.textContent),
  tenants: q("#tenants tr").slice(1).map(tr => q("td", tr).map(td => td.textContent)),
  curves: q("#curves .curve").map(c => ({title: (c.querySelector("b") || {}).textContent,
     path: (c.querySelector("svg path") || {getAttribute: () => null}).getAttribute("d"),
     marks: q("svg circle", c).length,
     labels: q("svg text", c).map(t => t.textContent)})),
};
"##;

/// `(x, y)` of every point of an SVG path `Mx,yLx,y...`.
fn points(d: &str) -> Vec<(f64, f64)> {
    d.split(['M', 'L'])
        .filter(|s| !s.trim().is_empty())
        .map(|p| {
            let (x, y) = p.trim().split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

/// "1.0 MiB", "512 KiB", "3 B" to bytes.
fn bytes(s: &str) -> f64 {
    let (n, unit) = s.trim().split_once(' ').unwrap();
    let n: f64 = n.parse().unwrap();
    n * match unit {
        "GiB" => 1073741824.0,
        "MiB" => 1048576.0,
        "KiB" => 1024.0,
        _ => 1.0,
    }
}

#[test]
fn node_page_in_headless_chromium_matches_the_api() {
    let t_start = Instant::now();
    let t = TestNode::start(NODE);
    // Real reads through the export: a 100-block hot set read twice per pass (it fits in
    // the 256-block cache) and 200 new blocks per pass (they never come back).
    let addr = t.node().nbd_addr;
    t.rt.block_on(async {
        let c = nbd::NbdClient::connect(addr, "vol").await.unwrap();
        for pass in 0..4u64 {
            for b in (0..100u64)
                .chain(0..100)
                .chain(100 + 200 * pass..300 + 200 * pass)
            {
                let got = c.read(b * 4096, 4096).await.unwrap();
                assert_eq!(got.len(), 4096);
            }
        }
    });
    let (s, caches) = t.api("GET", "/v1/caches", None);
    assert_eq!(s, 200);
    let hot = caches
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "hot")
        .cloned()
        .unwrap();
    let (s, curve) = t.api("GET", "/v1/caches/hot/curve?points=40", None);
    assert_eq!(s, 200, "{curve}");
    let api_pts = curve["points"].as_array().unwrap().clone();
    assert!(api_pts.len() >= 2, "{curve}");
    let miss: Vec<f64> = api_pts
        .iter()
        .map(|p| p["miss_ratio"].as_f64().unwrap())
        .collect();
    assert!(miss.windows(2).all(|w| w[1] <= w[0] + 1e-9), "{miss:?}");
    assert!(miss[0] > *miss.last().unwrap(), "{miss:?}");

    let url = format!(
        "http://{}/#token={}",
        t.node().api_addr,
        t.node().api_token.secret()
    );
    let page: Value = t.rt.block_on(async {
        let (_driver, c) = browser().await;
        c.goto(&url).await.unwrap();
        let t0 = Instant::now();
        let page = loop {
            let v = c.execute(READ_PAGE, vec![]).await.unwrap();
            if v["curves"].as_array().is_some_and(|a| !a.is_empty()) {
                break v;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the page did not load: {v}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        c.close().await.unwrap();
        page
    });
    assert_eq!(page["err"], "", "{page}");

    // The cache, with the API's size and hit ratio.
    let rows = page["caches"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r[0].as_str().unwrap().starts_with("hot"))
        .unwrap_or_else(|| panic!("cache `hot` not listed: {page}"));
    let size = hot["size_bytes"].as_f64().unwrap();
    let shown = bytes(row[1].as_str().unwrap());
    assert!((shown - size).abs() <= size * 0.001, "{row} vs {hot}");
    // The page prints the hit ratio with JavaScript's `toFixed(1)`, which rounds ties up
    // where Rust's `format!` rounds them to even: compare as numbers within half a unit.
    let hit = 100.0 * hot["hit_ratio"].as_f64().unwrap();
    let shown_hit: f64 = row[4]
        .as_str()
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    assert!((shown_hit - hit).abs() <= 0.05 + 1e-9, "{hit}: {row}");
    assert!(
        hit > 0.0 && hit < 100.0,
        "the reads both hit and missed: {hot}"
    );

    // The tenants table has read and write IOPS columns, and lists alice.
    let header = page["tenant_header"].as_array().unwrap();
    for col in ["read IOPS", "write IOPS", "hit ratio"] {
        assert!(
            header.iter().any(|h| h == col),
            "no `{col}` column: {header:?}"
        );
    }
    assert!(
        page["tenants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r[0] == "alice"),
        "{page}"
    );

    // Its curve: the API's points, miss ratio falling with size, the size marked.
    let cv = page["curves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["title"] == "hot")
        .unwrap_or_else(|| panic!("no curve for `hot`: {page}"));
    let d = cv["path"].as_str().unwrap();
    let pts = points(d);
    assert_eq!(pts.len(), api_pts.len(), "{d}");
    // Screen y grows downwards: a falling miss ratio is a non-decreasing y.
    assert!(
        pts.windows(2)
            .all(|w| w[1].0 >= w[0].0 && w[1].1 >= w[0].1 - 0.11),
        "{d}"
    );
    assert!(pts.last().unwrap().1 > pts[0].1, "the curve falls: {d}");
    assert_eq!(cv["marks"], 1, "the current size is marked");
    // Axis labels: a miss-ratio axis and binary sizes (the largest point, in MiB or KiB).
    let labels: Vec<&str> = cv["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(labels.contains(&"miss ratio"), "{labels:?}");
    assert!(labels.contains(&"cache size"), "{labels:?}");
    let largest = api_pts.last().unwrap()["cache_size"].as_f64().unwrap() * 4096.0;
    let x_label = labels
        .iter()
        .find(|l| l.ends_with("iB") || l.ends_with(" B"))
        .unwrap_or_else(|| panic!("no size label: {labels:?}"));
    let tol = if x_label.ends_with("MiB") {
        0.05 * 1048576.0
    } else {
        512.0
    };
    assert!(
        (bytes(x_label) - largest).abs() <= tol + 1.0,
        "{x_label} vs {largest}"
    );
    assert!(
        t_start.elapsed() < Duration::from_secs(20),
        "{:?}",
        t_start.elapsed()
    );
}
