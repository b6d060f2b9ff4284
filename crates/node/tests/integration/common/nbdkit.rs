//! nbdkit as a test backend: its file plugin behind any of its filters (`error`, `delay`),
//! started on a port of its own and stopped when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An nbdkit serving an image with the file plugin behind the given filters, on a port of
/// its own; stopped when dropped.
pub struct Nbdkit {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

/// A sparse image of `size` bytes, `backend.img` in `dir`, for nbdkit to serve.
pub fn sparse_image(dir: &Path, size: u64) -> std::path::PathBuf {
    let img = dir.join("backend.img");
    std::fs::File::create(&img).unwrap().set_len(size).unwrap();
    img
}

impl Nbdkit {
    pub fn start(img: &Path, filters: &[&str], params: &[String]) -> Nbdkit {
        Self::start_at(img, filters, params, None)
    }

    /// Like `start`, on `port` if given (a restart on the same address).
    pub fn start_at(img: &Path, filters: &[&str], params: &[String], at: Option<u16>) -> Nbdkit {
        let dir = img.parent().unwrap();
        let pidfile = dir.join(format!("nbdkit-{}.pid", std::process::id()));
        for _ in 0..20 {
            let _ = std::fs::remove_file(&pidfile);
            let port = at.unwrap_or_else(|| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            });
            let mut cmd = Command::new("nbdkit");
            cmd.args(["-f", "--exit-with-parent", "-i", "127.0.0.1", "-p"])
                .arg(port.to_string())
                .arg("-P")
                .arg(&pidfile);
            for f in filters {
                cmd.arg(format!("--filter={f}"));
            }
            cmd.arg("file").arg(img).args(params);
            let mut child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("nbdkit must be installed (Debian nbdkit; .ci/run installs it)");
            let t0 = Instant::now();
            loop {
                if pidfile.exists() {
                    return Nbdkit { child, port };
                }
                if child.try_wait().unwrap().is_some() {
                    break; // the port was taken meanwhile: another one
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "nbdkit did not start"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("nbdkit could not listen");
    }

    pub fn upstream(&self) -> String {
        format!("127.0.0.1:{}/img", self.port)
    }
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
