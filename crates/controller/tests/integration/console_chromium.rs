//! The operator's console in headless Chromium (Debian's `chromium` and
//! `chromium-driver`, driven through WebDriver with `fantoccini`), over a controller that
//! has stepped real nodes carrying real NBD I/O: every volume listed with the numbers the
//! API gives, a falling miss-ratio curve per volume with the planned size marked, latency
//! against target and allocations per node over time, the last decisions with reasons,
//! the nodes' health, and an infeasible SLO's shortfall. Fails (does not skip) when
//! Chromium or chromedriver is missing.

use crate::common::node_toml;
use controller::config::ControllerConfig;
use controller::registry::Registration;
use controller::{SqliteStore, Store};
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
[controller]
listen = "127.0.0.1:0"
interval = "1s"
scheme = "lachesis"
exclusive = false
[[tenant]]
name = "db"
class = "gold"
slo = { latency_ms = 0.0001 }
[[tenant.volume]]
name = "db"
host = "h"
servers = ["s1", "s2"]
stripe_unit = "64KiB"
[[tenant]]
name = "web"
slo = { degradation = 0.2 }
[[tenant.volume]]
name = "web"
host = "h"
servers = ["s1"]
"#;

struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts chromedriver and a headless Chromium session; panics (the test fails) if either
/// is missing.
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
        "--disable-dev-shm-usage", "--window-size=1400,2400"]});
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

/// What the page shows, read from its DOM.
const READ_PAGE: &str = r##"
const q = (s, r) => [...(r || document).querySelectorAll(s)];
const txt = (e, s) => { const x = e.querySelector(s); return x ? x.textContent.trim() : null; };
return {
  loaded: document.body.dataset.loaded || null,
  meta: document.getElementById("meta").textContent,
  err: document.getElementById("err").textContent,
  rows: q("#tenants tbody tr").map(tr => ({volume: tr.dataset.tenant, owner: tr.dataset.owner,
     latency: txt(tr, ".latency"), target: txt(tr, ".target"), l1hit: txt(tr, ".l1hit"),
     l2hit: txt(tr, ".l2hit"), l1size: txt(tr, ".l1size"), l2size: txt(tr, ".l2size"),
     slomet: txt(tr, ".slomet")})),
  curves: q("svg.curve").map(s => ({volume: s.dataset.tenant,
     paths: q("path", s).map(p => p.getAttribute("d")),
     chosen: q("line.chosen", s).map(l => l.getAttribute("data-value"))})),
  latency: q("svg.latency").map(s => ({volume: s.dataset.tenant, paths: q("path", s).length})),
  alloc: q("svg.alloc").map(s => q("path", s).length),
  alloc_titles: q("#alloc .card h3").map(h => h.textContent),
  decisions: q("#decisions tbody tr").map(tr => q("td", tr).map(td => td.textContent)),
  nodes: q("#nodes tbody tr").map(tr => ({node: tr.dataset.node, cells: q("td", tr).map(td => td.textContent)})),
  infeasible: document.getElementById("infeasible").textContent,
  p99: q("#tenants tbody tr").map(tr => ({volume: tr.dataset.tenant, p99: txt(tr, ".p99")})),
  login_shown: getComputedStyle(document.getElementById("login")).display !== "none",
  // Every chart: its axis titles, its last x label's right edge against the axis' end,
  // each line's style, and the values each line draws.
  charts: q("#curves .card > svg, #latency .card > svg, #alloc .card > svg").map(s => {
    const axis = s.querySelector("line").getBoundingClientRect(), last = s.querySelector("text.xlast").getBoundingClientRect();
    return {cls: s.getAttribute("class"), volume: s.dataset.tenant || null,
      xtitle: txt(s, "text.xtitle"), ytitle: txt(s, "text.ytitle"), last_gap: Math.abs(last.right - axis.right),
      styles: q("path", s).map(p => (p.getAttribute("stroke-dasharray") || "") + "/" + p.getAttribute("stroke-width")),
      markers: q(".marker", s).length,
      series: Object.fromEntries(q("path", s).map(p => [p.dataset.series, {x: JSON.parse(p.dataset.x), y: JSON.parse(p.dataset.y)}]))};
  }),
  // Text that leaves its picture (clipped).
  clipped: q("svg text").filter(t => { const r = t.getBoundingClientRect(), b = t.ownerSVGElement.getBoundingClientRect();
    return t.textContent && (r.left < b.left - 0.5 || r.right > b.right + 0.5 || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5); })
    .map(t => t.textContent),
};
"##;

/// `(x, y)` of every point of an SVG path `M x,y L x,y ...`.
fn points(d: &str) -> Vec<(f64, f64)> {
    d.split(['M', 'L'])
        .filter(|s| !s.trim().is_empty())
        .map(|p| {
            let (x, y) = p.trim().split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

/// Asserts that the page's text `shown` is `value` written with `decimals` decimals, or "-"
/// for no value. Compared as numbers within half a unit of the last decimal: the page rounds
/// with JavaScript's `toFixed`, which takes ties upwards where Rust's formatting takes them
/// to even (0.25 MiB is "0.3" on the page and "0.2" from `format!`).
fn assert_shown(shown: &Value, value: Option<f64>, decimals: i32, what: &str) {
    let text = shown.as_str().unwrap_or_else(|| panic!("{what}: {shown}"));
    match value {
        None => assert_eq!(text, "-", "{what}"),
        Some(v) => {
            let on_page: f64 = text
                .parse()
                .unwrap_or_else(|_| panic!("{what}: `{text}` is not a number"));
            let half_unit = 0.5 * 10f64.powi(-decimals);
            assert!(
                (on_page - v).abs() <= half_unit + 1e-9,
                "{what}: the page shows {text}, the API says {v}"
            );
        }
    }
}

fn mib(bytes: &Value) -> Option<f64> {
    bytes.as_u64().map(|b| b as f64 / 1048576.0)
}

#[test]
fn console_in_headless_chromium_shows_what_the_api_says() {
    let t_start = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut nodes = Vec::new();
    for s in ["s1", "s2"] {
        let ex = "[[export]]\nname = \"db\"\nfile = \"db.img\"\nsize = \"8MiB\"\n\
                  [[export]]\nname = \"web\"\nfile = \"web.img\"\nsize = \"8MiB\"\n";
        let cfg = node::config::NodeConfig::parse(&node_toml(&dir.path().join(s), 2, "4MiB", ex))
            .unwrap();
        nodes.push((s, 2u8, rt.block_on(node::start(&cfg)).unwrap()));
    }
    let ex = format!(
        "[[export]]\nname = \"db\"\nupstream = [\"{}/db\", \"{}/db\"]\nstripe_unit = \"64KiB\"\n\
         [[export]]\nname = \"web\"\nupstream = [\"{}/web\"]\n",
        nodes[0].2.nbd_addr, nodes[1].2.nbd_addr, nodes[0].2.nbd_addr
    );
    let cfg =
        node::config::NodeConfig::parse(&node_toml(&dir.path().join("h"), 1, "4MiB", &ex)).unwrap();
    nodes.push(("h", 1u8, rt.block_on(node::start(&cfg)).unwrap()));

    let mut cfg = ControllerConfig::parse(CONFIG).unwrap();
    cfg.controller.data_dir = dir.path().join("ctl");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("c.db")).unwrap());
    let ctl = rt.block_on(controller::start(&cfg, store, false)).unwrap();
    let svc = ctl.service.clone();
    for (name, level, n) in &nodes {
        svc.register(Registration {
            name: name.to_string(),
            level: *level,
            api: format!("http://{}", n.api_addr),
            nbd: Some(n.nbd_addr.to_string()),
            cache_size: 4 << 20,
            block_size: 4096,
            epoch: "e0".into(),
            exports: vec![],
            token: n.api_token.secret().to_string(),
        })
        .unwrap();
    }
    svc.tick().unwrap();
    // Real I/O through the level-1 exports between intervals: a hot set re-read, so the
    // curves have data and fall with size.
    let h = nodes[2].2.nbd_addr;
    for round in 0..3u64 {
        rt.block_on(async {
            for vol in ["db", "web"] {
                let c = nbd::NbdClient::connect(h, vol).await.unwrap();
                for pass in 0..3u64 {
                    for b in 0..(200 + 100 * pass) {
                        let off = ((b * 7 + round) % 600) * 4096;
                        let got = c.read(off, 4096).await.unwrap();
                        assert_eq!(got.len(), 4096);
                    }
                }
            }
        });
        svc.tick().unwrap();
    }

    // What the API says.
    let base = format!("http://{}", ctl.addr);
    let api = |path: &str| -> Value {
        ureq::get(&format!("{base}{path}"))
            .set("Authorization", &format!("Bearer {}", ctl.token.secret()))
            .call()
            .unwrap()
            .into_json()
            .unwrap()
    };
    let status = api("/v1/status");
    let last = &status["last"];
    let interval = last["interval"].as_u64().unwrap();
    let curves = api("/v1/curves");
    let api_nodes = api("/v1/nodes");
    assert!(
        !last["infeasible"].as_array().unwrap().is_empty(),
        "db's SLO of 0.1 µs cannot be met: {last}"
    );

    // What the page shows.
    let url = ctl.console_url();
    let page = rt.block_on(async {
        let (_driver, c) = browser().await;
        c.goto(&url).await.unwrap();
        let t0 = Instant::now();
        let page = loop {
            let v = c.execute(READ_PAGE, vec![]).await.unwrap();
            if v["loaded"].as_str() == Some(interval.to_string().as_str()) {
                break v;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the console did not load: {v}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        c.close().await.unwrap();
        page
    });
    assert_eq!(page["err"], "", "{page}");
    assert!(page["meta"].as_str().unwrap().contains("scheme lachesis"));

    // Every volume, with the API's numbers.
    let rows = page["rows"].as_array().unwrap();
    let api_rows = last["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{page}");
    for r in api_rows {
        let v = r["tenant"].as_str().unwrap();
        let shown = rows
            .iter()
            .find(|x| x["volume"] == v)
            .unwrap_or_else(|| panic!("{v} not listed: {page}"));
        assert_shown(
            &shown["l1size"],
            mib(&r["l1_size"]),
            1,
            &format!("{v} L1 MiB"),
        );
        assert_shown(
            &shown["l2size"],
            mib(&r["l2_size"]),
            1,
            &format!("{v} L2 MiB"),
        );
        assert_shown(
            &shown["latency"],
            r["latency_ms"].as_f64(),
            3,
            &format!("{v} latency"),
        );
        assert_shown(
            &shown["target"],
            r["target_ms"].as_f64(),
            3,
            &format!("{v} target"),
        );
        assert_shown(
            &shown["l1hit"],
            r["l1_hit_ratio"].as_f64(),
            3,
            &format!("{v} L1 hits"),
        );
        assert_shown(
            &shown["l2hit"],
            r["l2_hit_ratio"].as_f64(),
            3,
            &format!("{v} L2 hits"),
        );
        let met = match r["slo_met"].as_bool() {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        };
        assert_eq!(shown["slomet"], met, "{v}");
    }
    assert!(
        api_rows.iter().any(|r| r["requests"].as_u64().unwrap() > 0),
        "the nodes saw the I/O: {last}"
    );

    // A curve per volume: as many points as the API's, falling, the planned size marked.
    for (vol, c) in curves.as_object().unwrap() {
        let shown = page["curves"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["volume"] == vol.as_str())
            .unwrap_or_else(|| panic!("no curve for {vol}: {page}"));
        let api_pts = c["curves"][0]["points"].as_array().unwrap();
        assert!(api_pts.len() >= 2, "{vol}: {c}");
        let miss: Vec<f64> = api_pts.iter().map(|p| p[1].as_f64().unwrap()).collect();
        assert!(
            miss.windows(2).all(|w| w[1] <= w[0] + 1e-9),
            "{vol}: {miss:?}"
        );
        assert!(
            miss[0] > *miss.last().unwrap(),
            "{vol}: some size helps: {miss:?}"
        );
        let d = shown["paths"][0].as_str().unwrap();
        let pts = points(d);
        assert_eq!(pts.len(), api_pts.len(), "{vol}: {d}");
        // Screen y grows downwards: a falling miss ratio is a non-decreasing y.
        assert!(
            pts.windows(2)
                .all(|w| w[1].0 >= w[0].0 && w[1].1 >= w[0].1 - 0.11),
            "{d}"
        );
        assert_eq!(
            shown["chosen"][0].as_str().unwrap(),
            c["chosen_bytes"].as_u64().unwrap().to_string(),
            "{vol}: the planned size is marked"
        );
    }

    // Latency against target, per volume; allocations over time, per node.
    let lat = page["latency"].as_array().unwrap();
    assert_eq!(lat.len(), 2, "{page}");
    assert!(
        lat.iter().all(|l| l["paths"].as_u64().unwrap() >= 1),
        "{page}"
    );
    let alloc_nodes: Vec<String> = last["allocations"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(page["alloc"].as_array().unwrap().len(), alloc_nodes.len());
    for n in &alloc_nodes {
        assert!(
            page["alloc_titles"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t.as_str().unwrap().starts_with(n.as_str())),
            "{n}: {page}"
        );
    }

    // The last decisions with their reasons.
    let dec = page["decisions"].as_array().unwrap();
    assert!(dec.len() >= 4, "{page}");
    assert!(
        dec.iter().all(|r| !r[3].as_str().unwrap().is_empty()),
        "{page}"
    );

    // The nodes' health.
    let shown_nodes = page["nodes"].as_array().unwrap();
    assert_eq!(shown_nodes.len(), api_nodes.as_array().unwrap().len());
    for n in api_nodes.as_array().unwrap() {
        let s = shown_nodes
            .iter()
            .find(|x| x["node"] == n["name"])
            .unwrap_or_else(|| panic!("{n}"));
        let state = if n["up"] == true { "up" } else { "down" };
        assert_eq!(s["cells"][2], state);
    }

    // The infeasible SLO with its shortfall.
    let inf = &last["infeasible"][0];
    let text = page["infeasible"].as_str().unwrap();
    assert!(text.contains("infeasible: db"), "{text}");
    let short = inf["predicted_ms"].as_f64().unwrap() - inf["target_ms"].as_f64().unwrap();
    assert!(
        text.contains(&format!("shortfall {short:.3} ms")),
        "{text} vs {inf}"
    );

    // p99 beside the mean, as the API gives it.
    for r in api_rows {
        let v = r["tenant"].as_str().unwrap();
        let shown = page["p99"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["volume"] == v)
            .unwrap();
        assert_shown(&shown["p99"], r["p99_ms"].as_f64(), 3, &format!("{v} p99"));
    }

    // Charts: axis titles, the last x label ending where the axis ends, no text clipped,
    // and lines of the same chart drawn each in a style of its own (equal series stay
    // distinguishable), with markers.
    let charts = page["charts"].as_array().unwrap();
    assert!(charts.len() >= 5, "{page}");
    for c in charts {
        assert!(
            !c["xtitle"].as_str().unwrap().is_empty() && !c["ytitle"].as_str().unwrap().is_empty(),
            "axis titles: {c}"
        );
        assert!(
            c["last_gap"].as_f64().unwrap() < 1.5,
            "last x label at the axis end: {c}"
        );
        let styles: Vec<&str> = c["styles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        let mut unique = styles.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), styles.len(), "each line its own style: {c}");
        assert!(c["markers"].as_u64().unwrap() >= styles.len() as u64, "{c}");
    }
    assert_eq!(page["clipped"], json!([]), "labels clipped: {page}");

    // The whole history, from the store: the latency chart has a point per stored
    // interval, and the degradation target drawn is the one the controller set from the
    // fair-share reference ((1 + x) times the model's latency at fair share), not one
    // made from the measured latency.
    let hist = api("/v1/history?limit=10000");
    let web_rows: Vec<&Value> = hist
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["tenant"] == "web")
        .map(|h| &h["detail"])
        .collect();
    let web = charts
        .iter()
        .find(|c| c["cls"] == "latency" && c["volume"] == "web")
        .unwrap_or_else(|| panic!("{page}"));
    let drawn: Vec<f64> = web["series"]["target"]["y"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let stored: Vec<f64> = web_rows
        .iter()
        .filter_map(|r| r["target_ms"].as_f64())
        .collect();
    assert_eq!(drawn, stored, "web's target line is the stored targets");
    assert!(!stored.is_empty(), "web has a degradation target: {hist}");
    let measured: Vec<f64> = web_rows
        .iter()
        .filter_map(|r| r["latency_ms"].as_f64())
        .collect();
    assert!(
        stored
            .iter()
            .zip(&measured)
            .any(|(t, m)| (t - 1.2 * m).abs() > 1e-6),
        "a target is not 1.2 times the measured latency: {stored:?} {measured:?}"
    );
    assert_eq!(
        web["series"]["mean"]["x"].as_array().unwrap().len(),
        measured.len(),
        "a point per stored interval"
    );

    // Reasons in words and units: no "per block", no bare block counts.
    for r in dec {
        for cell in [&r[3], &r[5]] {
            let t = cell.as_str().unwrap();
            assert!(
                !t.contains("per block") && !t.contains(" blocks"),
                "reason in words and units: {t}"
            );
        }
    }

    // Without the token the page asks for it (no raw 401), and takes it.
    let bare = format!("http://{}/", ctl.addr);
    let token = ctl.token.secret().to_string();
    rt.block_on(async {
        let (_driver, c) = browser().await;
        c.goto(&bare).await.unwrap();
        let t0 = Instant::now();
        loop {
            let v = c.execute(READ_PAGE, vec![]).await.unwrap();
            if v["login_shown"] == true {
                assert_eq!(v["err"], "", "no raw error beside the prompt: {v}");
                assert!(!v["meta"].as_str().unwrap().contains("401"), "{v}");
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "no token prompt: {v}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let input = c.find(fantoccini::Locator::Id("token")).await.unwrap();
        input.send_keys(&token).await.unwrap();
        c.find(fantoccini::Locator::Css("#login button"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let t0 = Instant::now();
        loop {
            let v = c.execute(READ_PAGE, vec![]).await.unwrap();
            if v["loaded"].as_str() == Some(interval.to_string().as_str()) {
                assert_eq!(v["login_shown"], false, "{v}");
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the token was not taken: {v}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if let Ok(dir) = std::env::var("LACHESIS_CONSOLE_SCREENSHOT") {
            let png = c.screenshot().await.unwrap();
            std::fs::write(std::path::Path::new(&dir).join("console.png"), png).unwrap();
        }
        c.close().await.unwrap();
    });

    rt.block_on(ctl.shutdown());
    for (_, _, n) in nodes {
        rt.block_on(n.shutdown()).unwrap();
    }
    assert!(
        t_start.elapsed() < Duration::from_secs(40),
        "{:?}",
        t_start.elapsed()
    );
}
