//! The blocking part of one arm, as root: the FUSE export, loop device and ext4 on `pg`'s
//! volume, PostgreSQL in a memory cgroup, the scanning neighbour and `pgbench`, each
//! command's failure an [`AppsError`], and all of it undone in reverse order when done.

use super::reports::{latencies, neighbour_mbps, tps_of, Latencies};
use super::{pg_bin, step, AppsError, AppsOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd`, failing with its stderr unless it exits 0; returns its stdout.
fn run(arm: &str, what: &str, cmd: &mut Command) -> Result<String, AppsError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| step(arm, what, e))?;
    if !out.status.success() {
        return Err(step(
            arm,
            what,
            format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What an arm set up outside the process, undone in reverse order when dropped.
struct Teardown {
    pg_bin: PathBuf,
    daemon: Option<Child>,
    loop_dev: Option<String>,
    mounted: Option<PathBuf>,
    postgres: Option<PathBuf>,
    cgroup: Option<PathBuf>,
    neighbour: Option<Child>,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        if let Some(mut n) = self.neighbour.take() {
            let _ = n.kill();
            let _ = n.wait();
        }
        if let Some(data) = self.postgres.take() {
            let _ = Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(self.pg_bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "-w", "stop"])
                .output();
        }
        if let Some(m) = self.mounted.take() {
            let _ = Command::new("umount").arg(&m).output();
        }
        if let Some(l) = self.loop_dev.take() {
            let _ = Command::new("losetup").args(["-d", &l]).output();
        }
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
        if let Some(c) = self.cgroup.take() {
            let _ = std::fs::remove_dir(&c);
        }
    }
}

/// The blocking part of one arm: the file system, PostgreSQL, the neighbour, pgbench.
pub(super) fn bench_arm(
    opts: &AppsOptions,
    arm: &str,
    index: usize,
    dir: &Path,
    l1: std::net::SocketAddr,
) -> Result<(Latencies, f64, f64), AppsError> {
    let bin = pg_bin().ok_or_else(|| step(arm, "PostgreSQL", "not installed"))?;
    let mut td = Teardown {
        pg_bin: bin.clone(),
        daemon: None,
        loop_dev: None,
        mounted: None,
        postgres: None,
        cgroup: None,
        neighbour: None,
    };
    let img = dir.join("pg.img");
    std::fs::write(&img, b"").map_err(|e| step(arm, "the FUSE mount point", e))?;
    td.daemon = Some(
        Command::new("qemu-storage-daemon")
            .arg("--blockdev")
            .arg(format!(
                "driver=nbd,server.type=inet,server.host={},server.port={},export=pg,node-name=pg,cache.direct=on",
                l1.ip(),
                l1.port()
            ))
            .arg("--export")
            .arg(format!(
                "type=fuse,id=pg,node-name=pg,mountpoint={},writable=on",
                img.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| step(arm, "qemu-storage-daemon", e))?,
    );
    let t0 = Instant::now();
    while std::fs::metadata(&img).map_or(0, |m| m.len()) == 0 {
        if t0.elapsed() > Duration::from_secs(20) {
            return Err(step(
                arm,
                "qemu-storage-daemon",
                "the FUSE export did not appear",
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let dev = run(
        arm,
        "losetup",
        Command::new("losetup")
            .args(["-f", "--show", "--direct-io=off"])
            .arg(&img),
    )?
    .trim()
    .to_string();
    td.loop_dev = Some(dev.clone());
    run(
        arm,
        "mkfs.ext4",
        Command::new("mkfs.ext4").args([
            "-q",
            "-E",
            "lazy_itable_init=0,lazy_journal_init=0",
            &dev,
        ]),
    )?;
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).map_err(|e| step(arm, "the mount point", e))?;
    run(arm, "mount", Command::new("mount").arg(&dev).arg(&mnt))?;
    td.mounted = Some(mnt.clone());
    let (data, sock, logs) = (mnt.join("data"), dir.join("sock"), dir.join("logs"));
    for d in [&sock, &logs] {
        std::fs::create_dir_all(d).map_err(|e| step(arm, "a directory", e))?;
    }
    run(
        arm,
        "chown",
        Command::new("chown")
            .arg("postgres:postgres")
            .arg(&mnt)
            .arg(&sock)
            .arg(&logs)
            .arg(dir),
    )?;
    let cg = PathBuf::from(format!(
        "/sys/fs/cgroup/memory/lachesis-apps-{}-{index}",
        std::process::id()
    ));
    std::fs::create_dir_all(&cg).map_err(|e| step(arm, "a memory cgroup", e))?;
    td.cgroup = Some(cg.clone());
    std::fs::write(
        cg.join("memory.limit_in_bytes"),
        opts.memory_limit.to_string(),
    )
    .map_err(|e| step(arm, "the cgroup's memory limit", e))?;
    let as_pg = |what: &str, args: &[String], cwd: &Path| -> Result<String, AppsError> {
        // Joins the cgroup, then runs as postgres; its children stay in the cgroup.
        let mut script = format!(
            "echo $$ > {}/cgroup.procs && exec runuser -u postgres --",
            cg.display()
        );
        for a in args {
            script.push_str(" '");
            script.push_str(&a.replace('\'', "'\\''"));
            script.push('\'');
        }
        run(
            arm,
            what,
            Command::new("sh").arg("-c").arg(script).current_dir(cwd),
        )
    };
    let s = |x: &Path| x.display().to_string();
    as_pg(
        "initdb",
        &[
            s(&bin.join("initdb")),
            "-D".into(),
            s(&data),
            "-A".into(),
            "trust".into(),
            "-U".into(),
            "postgres".into(),
            "--no-sync".into(),
        ],
        dir,
    )?;
    let port = (54_320 + index).to_string();
    as_pg(
        "pg_ctl start",
        &[
            s(&bin.join("pg_ctl")),
            "-D".into(),
            s(&data),
            "-l".into(),
            s(&logs.join("postgres.log")),
            "-w".into(),
            "-o".into(),
            format!(
                "-k {} -p {port} -c listen_addresses= -c shared_buffers=16MB -c synchronous_commit=off",
                s(&sock)
            ),
            "start".into(),
        ],
        dir,
    )?;
    td.postgres = Some(data.clone());
    let pgbench = |extra: &[&str]| -> Vec<String> {
        let mut a = vec![
            s(&bin.join("pgbench")),
            "-h".into(),
            s(&sock),
            "-p".into(),
            port.clone(),
        ];
        a.extend(extra.iter().map(|x| x.to_string()));
        a.push("postgres".into());
        a
    };
    as_pg(
        "pgbench -i",
        &pgbench(&["-i", "-q", "-s", &opts.scale.to_string()]),
        &logs,
    )?;
    // The neighbour, from now to the end.
    let scan_for = opts.warmup + opts.duration + Duration::from_secs(30);
    let fio_out = dir.join("fio.json");
    td.neighbour = Some(
        Command::new("fio")
            .args([
                "--name=scan",
                "--ioengine=nbd",
                &format!("--uri=nbd://{}:{}/scan", l1.ip(), l1.port()),
                "--rw=read",
                "--bs=64k",
                "--iodepth=1",
                "--time_based",
                &format!("--runtime={}", scan_for.as_secs()),
                "--output-format=json",
                &format!("--output={}", fio_out.display()),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| step(arm, "fio", e))?,
    );
    std::thread::sleep(opts.warmup);
    let threads = opts.clients.min(2).to_string();
    let out = as_pg(
        "pgbench",
        &pgbench(&[
            "-T",
            &opts.duration.as_secs().max(1).to_string(),
            "-c",
            &opts.clients.to_string(),
            "-j",
            &threads,
            "-l",
            "--log-prefix=pgbench_log",
        ]),
        &logs,
    )?;
    let tps = tps_of(&out).ok_or_else(|| step(arm, "pgbench", format!("no tps in: {out}")))?;
    let lat = latencies(&logs, "pgbench_log");
    // The neighbour's rate so far: stop it, then read its report.
    let mbps = match td.neighbour.take() {
        Some(mut f) => {
            // SIGINT-free stop: fio writes its JSON when killed with SIGTERM.
            let _ = Command::new("kill").arg(f.id().to_string()).output();
            let _ = f.wait();
            neighbour_mbps(&fio_out)
        }
        None => 0.0,
    };
    drop(td);
    Ok((lat, tps, mbps))
}
