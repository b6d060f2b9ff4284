//! Helpers shared by the nbd crate's integration tests that speak the protocol by hand:
//! a server on a loopback port, polling its gauge, negotiating by hand; running a real client
//! tool; and running a test that measures its process in a process of its own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nbd::server::{ExportMap, Limits, LimitsGauge, ServerConfig};
use nbd::MemExport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A server on a loopback port serving one export, `d`.
pub struct Server {
    pub port: u16,
    pub limits: Arc<Limits>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Serves `disk` as export `d` with `config` and limits sized by it.
    pub async fn start(config: ServerConfig, disk: Arc<MemExport>) -> Server {
        let limits = Limits::for_config(&config);
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let exports = Arc::new(ExportMap::new().with("d", disk));
        let task = tokio::spawn(
            nbd::Server::builder()
                .config(config)
                .limits(limits.clone())
                .build(l, exports)
                .serve(async {
                    let _ = rx.await;
                }),
        );
        Server {
            port,
            limits,
            stop,
            task,
        }
    }

    /// Shuts the server down; it must end without error.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// Wait (at most 5 s) until the server's gauge says `what`.
pub async fn until(limits: &Limits, what: &str, ok: impl Fn(&LimitsGauge) -> bool) {
    let start = Instant::now();
    while !ok(&limits.gauge()) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{what}: {:?}",
            limits.gauge()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Negotiate export `name` by hand (fixed newstyle, `NBD_OPT_GO`), so the test controls
/// every byte sent afterwards.
pub async fn negotiate_go(c: &mut TcpStream, name: &str) {
    let mut greet = [0u8; 18];
    c.read_exact(&mut greet).await.unwrap();
    c.write_all(&3u32.to_be_bytes()).await.unwrap();
    let mut m = b"IHAVEOPT".to_vec();
    m.extend_from_slice(&7u32.to_be_bytes()); // NBD_OPT_GO
    m.extend_from_slice(&(6 + name.len() as u32).to_be_bytes());
    m.extend_from_slice(&(name.len() as u32).to_be_bytes());
    m.extend_from_slice(name.as_bytes());
    m.extend_from_slice(&0u16.to_be_bytes()); // no information requests
    c.write_all(&m).await.unwrap();
    loop {
        let mut h = [0u8; 20];
        c.read_exact(&mut h).await.unwrap();
        let mut d = vec![0; u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize];
        c.read_exact(&mut d).await.unwrap();
        if u32::from_be_bytes(h[12..16].try_into().unwrap()) == 1 {
            return; // NBD_REP_ACK
        }
    }
}

/// Whether this is the process in which the test `name` (its full name in this binary,
/// `module::test`) does its work. Tests that measure their process (its RSS and threads in
/// `/proc/self/status`) must not share it with the other tests of this binary, which run
/// beside them: in the harness's process this runs the binary again for that one test
/// alone, prints its output, fails if it did not pass, and returns false; in that child it
/// returns true. Such children run one at a time, so they do not measure each other.
pub fn in_a_process_of_its_own(name: &str) -> bool {
    const CHILD: &str = "NBD_TEST_ALONE";
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if std::env::var(CHILD).is_ok_and(|v| v == name) {
        return true;
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            name,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} in a process of its own: {}",
        out.status
    );
    false
}

/// Runs a tool and returns whether it succeeded and its stdout and stderr; panics naming
/// the Debian package when the tool is missing (CI installs it; a test must not pass
/// without it).
pub fn run_tool(tool: &str, package: &str, args: &[&str]) -> (bool, String) {
    let out = match std::process::Command::new(tool).args(args).output() {
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
