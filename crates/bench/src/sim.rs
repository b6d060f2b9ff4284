//! `lachesis bench sim`: the simulator against libCacheSim.
//!
//! Generates (once, cached under the bench directory) a seeded 10 M-request Zipf trace in
//! libCacheSim's oracleGeneral format, then for each policy runs our simulator
//! single-threaded in object mode, libCacheSim's C simulator `cachesim` (when built, see
//! [`SimBench::cachesim`]) and libCacheSim's PyPI bindings on the same file, same size,
//! interleaved `repeat` times, and prints the best throughput of each side and the
//! ratios. Ours and `cachesim`'s are on CPU time: the trace's requests over the CPU
//! seconds (user and system) of the whole child process, start-up, reading the file and
//! exit included, taken from the children's CPU clock the kernel keeps for this process
//! (`/proc/self/stat`), so time spent waiting for a core on a busy machine does not count
//! for either side. The wall-clock rate `cachesim` prints for its own loop is shown
//! beside it. The bindings' rate is wall-clock, timed around `process_trace`. It also measures LRU's memory per cached object as the slope of peak RSS between
//! two cache sizes, each run in a fresh child process so the peaks do not mix. Both sides
//! run as child processes: ours is the `lachesis` executable given in [`SimBench::exe`].
//! Without the `libcachesim` Python package it stops with one line saying what to install.

use crate::error::{bail, Context, Result};
use crate::workload::{ensure_trace, write_synthetic};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The libCacheSim reference script, embedded so the binary can run it from anywhere.
const LIBCACHESIM_REF: &str = include_str!("../../../tools/libcachesim_ref.py");

/// What `bench sim` runs.
#[derive(Clone, Debug)]
pub struct SimBench {
    /// The `lachesis` executable whose `sim` is measured.
    pub exe: PathBuf,
    /// Requests in the generated trace.
    pub requests: u64,
    /// Distinct objects in the generated trace.
    pub objects: u64,
    /// Zipf skew of the generated trace.
    pub alpha: f64,
    /// Cache size in objects.
    pub size: u64,
    /// Policies to compare, comma-separated.
    pub policy: String,
    /// Where the generated trace is kept between runs.
    pub dir: PathBuf,
    /// Python interpreter with `libcachesim` installed.
    pub python: String,
    /// Skip the memory measurement.
    pub no_memory: bool,
    /// Runs of each side per policy, interleaved; the best of each side is compared.
    pub repeat: u32,
    /// libCacheSim's C simulator (`cachesim`, built by `shared/peers/build_cachesim.sh`);
    /// `None` leaves its column out with a line saying how to build it.
    pub cachesim: Option<PathBuf>,
}

#[derive(Deserialize)]
struct Line {
    policy: String,
    miss_ratio: f64,
    requests_per_sec: Option<f64>,
    #[serde(default)]
    peak_rss_bytes: Option<u64>,
    #[serde(default)]
    requests: Option<u64>,
    /// CPU seconds of the whole child process (filled in by this module, not parsed).
    #[serde(skip)]
    cpu_seconds: Option<f64>,
}

/// CPU seconds (user + system) of this process's waited-for children so far: fields 16
/// and 17 (`cutime`, `cstime`) of `/proc/self/stat`, in clock ticks of 1/100 s (Linux's
/// fixed `USER_HZ`). `None` where `/proc` is not there.
fn children_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3, so field n is f[n - 3].
    let cutime: f64 = f.get(13)?.parse().ok()?;
    let cstime: f64 = f.get(14)?.parse().ok()?;
    Some((cutime + cstime) / 100.0)
}

/// Runs `f` (which spawns and waits for one child) and returns its result with the CPU
/// seconds that child used.
fn with_child_cpu<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, Option<f64>)> {
    let before = children_cpu_seconds();
    let out = f()?;
    let cpu = match (before, children_cpu_seconds()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    Ok((out, cpu))
}

fn json_lines(cmd: &mut Command) -> Result<Vec<Line>> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("bad JSON line `{l}`")))
        .collect()
}

fn ours(exe: &Path, trace: &Path, policy: &str, size: u64) -> Result<Line> {
    let mut v = json_lines(
        Command::new(exe)
            .args([
                "sim",
                "--ignore-obj-size",
                "--json",
                "--threads",
                "1",
                "--trace",
            ])
            .arg(trace)
            .args(["--policy", policy, "--size", &size.to_string()]),
    )?;
    v.pop().context("no output from lachesis sim")
}

/// One run of our simulator timed from outside: requests over the whole process's CPU
/// time, start-up and exit included.
fn ours_whole(exe: &Path, trace: &Path, policy: &str, size: u64) -> Result<Line> {
    let (mut line, cpu) = with_child_cpu(|| ours(exe, trace, policy, size))?;
    let requests = line.requests.unwrap_or(0) as f64;
    line.cpu_seconds = cpu;
    line.requests_per_sec = cpu.filter(|&c| c > 0.0).map(|c| requests / c);
    Ok(line)
}

/// libCacheSim's policy name in `cachesim` for ours.
fn cachesim_name(policy: &str) -> &str {
    match policy {
        "2q" => "twoq",
        "s3fifo" => "s3fifo",
        other => other,
    }
}

/// One run of libCacheSim's C simulator: the miss ratio it prints and `requests` over
/// the whole process's CPU time (`requests_per_sec`); the throughput it prints for its
/// own loop (wall-clock) goes in `wall_rate`.
fn cachesim(
    bin: &Path,
    trace: &Path,
    policy: &str,
    size: u64,
    requests: u64,
) -> Result<(Line, f64)> {
    let (mut line, cpu) = with_child_cpu(|| cachesim_run(bin, trace, policy, size))?;
    let wall_rate = line.requests_per_sec.unwrap_or(0.0);
    line.cpu_seconds = cpu;
    line.requests_per_sec = cpu.filter(|&c| c > 0.0).map(|c| requests as f64 / c);
    Ok((line, wall_rate))
}

/// One run of `cachesim`: the miss ratio and throughput it prints.
fn cachesim_run(bin: &Path, trace: &Path, policy: &str, size: u64) -> Result<Line> {
    let mut cmd = Command::new(bin);
    cmd.arg(trace)
        .args(["oracleGeneral", cachesim_name(policy), &size.to_string()])
        .args([
            "--ignore-obj-size",
            "1",
            "--num-thread",
            "1",
            "-o",
            "/dev/null",
        ]);
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}{}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_cachesim(&text)
        .map(|(miss_ratio, mqps)| Line {
            policy: policy.into(),
            miss_ratio,
            requests_per_sec: Some(mqps * 1e6),
            peak_rss_bytes: None,
            requests: None,
            cpu_seconds: None,
        })
        .with_context(|| {
            format!(
                "no `miss ratio .., throughput .. MQPS` in {cmd:?}'s output `{}`",
                text.trim()
            )
        })
}

/// `(miss ratio, M requests/s)` from `cachesim`'s result line.
fn parse_cachesim(out: &str) -> Option<(f64, f64)> {
    let line = out.lines().rev().find(|l| l.contains("throughput"))?;
    let after = |tag: &str| -> Option<f64> {
        let rest = &line[line.find(tag)? + tag.len()..];
        rest.trim_start()
            .split(|c: char| c == ',' || c.is_whitespace())
            .next()?
            .parse()
            .ok()
    };
    Some((after("miss ratio")?, after("throughput")?))
}

fn peer(python: &str, trace: &Path, policy: &str, size: u64) -> Result<Line> {
    let mut v = json_lines(
        Command::new(python)
            .args(["-c", LIBCACHESIM_REF, "--trace"])
            .arg(trace)
            .args(["--policy", policy, "--size", &size.to_string()]),
    )
    .context("the libCacheSim peer (pip install libcachesim)")?;
    v.pop().context("no output from the libCacheSim peer")
}

/// Runs `bench sim` and prints its table.
pub fn run(b: &SimBench) -> Result<()> {
    check_peer(&b.python)?;
    std::fs::create_dir_all(&b.dir).with_context(|| format!("creating {}", b.dir.display()))?;
    let spec = format!(
        "zipf:alpha={},objects={},requests={},seed=42",
        b.alpha, b.objects, b.requests
    );
    let trace = b.dir.join(format!(
        "zipf-a{}-n{}-r{}.oracleGeneral.bin",
        b.alpha, b.objects, b.requests
    ));
    ensure_trace(&trace, &spec)?;
    println!(
        "trace: {} — {} requests, Zipf({}) over {} objects; cache {} objects, object mode, 1 thread",
        trace.display(),
        b.requests,
        b.alpha,
        b.objects,
        b.size
    );
    match &b.cachesim {
        Some(c) => println!("C peer: {}", c.display()),
        None => println!(
            "C peer: not built (bash shared/peers/build_cachesim.sh, then --cachesim PATH); its columns are left out"
        ),
    }
    println!(
        "{:<7} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>8} {:>8} {:>8}",
        "policy",
        "lachesis",
        "cachesim",
        "vs C",
        "C loop",
        "pypi",
        "vs py",
        "miss",
        "C miss",
        "py miss"
    );
    println!(
        "{:<7} {:>9} {:>9} {:>7} {:>9} {:>9}   M req/s, best of {} interleaved runs each; lachesis and cachesim: per CPU second of the whole process; C loop: cachesim's own wall-clock figure; pypi: wall-clock",
        "",
        "cpu",
        "cpu",
        "",
        "wall",
        "wall",
        b.repeat.max(1)
    );
    let best = |old: Option<Line>, new: Line| match old {
        Some(x) if x.requests_per_sec >= new.requests_per_sec => Some(x),
        _ => Some(new),
    };
    for p in b.policy.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (mut o, mut c, mut t) = (None::<Line>, None::<Line>, None::<Line>);
        let mut c_wall = 0.0f64;
        for _ in 0..b.repeat.max(1) {
            o = best(o, ours_whole(&b.exe, &trace, p, b.size)?);
            if let Some(bin) = &b.cachesim {
                let (line, wall) = cachesim(bin, &trace, p, b.size, b.requests)?;
                c_wall = c_wall.max(wall);
                c = best(c, line);
            }
            t = best(t, peer(&b.python, &trace, p, b.size)?);
        }
        let (o, t) = (o.context("no run")?, t.context("no run")?);
        let rate = |l: &Line| l.requests_per_sec.unwrap_or(0.0);
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        let ro = rate(&o);
        let (c_rate, c_ratio, c_loop, c_miss) = match &c {
            Some(c) => (
                format!("{:.2}", rate(c) / 1e6),
                format!("{:.2}x", ratio(ro, rate(c))),
                format!("{:.2}", c_wall / 1e6),
                format!("{:.4}", c.miss_ratio),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        println!(
            "{:<7} {:>9.2} {:>9} {:>7} {:>9} {:>9.2} {:>6.2}x {:>8.4} {:>8} {:>8.4}",
            o.policy,
            ro / 1e6,
            c_rate,
            c_ratio,
            c_loop,
            rate(&t) / 1e6,
            ratio(ro, rate(&t)),
            o.miss_ratio,
            c_miss,
            t.miss_ratio
        );
    }
    if !b.no_memory {
        memory_slope(&b.exe, &b.dir)?;
    }
    Ok(())
}

/// LRU's bytes per cached object: peak RSS at 2 M and 1 M objects, on a trace of 3 M
/// distinct objects touched in turn (so both caches fill), divided by the difference.
fn memory_slope(exe: &Path, dir: &Path) -> Result<()> {
    let trace = dir.join("loop-3m.oracleGeneral.bin");
    if !trace.exists() {
        write_synthetic("loop:objects=3000000,requests=6000000", &trace)?;
    }
    let mut peak = Vec::new();
    for size in [1_000_000u64, 2_000_000] {
        let v = json_lines(
            Command::new(exe)
                .args([
                    "sim",
                    "--ignore-obj-size",
                    "--json",
                    "--threads",
                    "1",
                    "--report-memory",
                    "--policy",
                    "lru",
                    "--size",
                    &size.to_string(),
                    "--trace",
                ])
                .arg(&trace),
        )?;
        let rss = v
            .last()
            .and_then(|l| l.peak_rss_bytes)
            .context("peak RSS not reported (needs Linux /proc)")?;
        peak.push((size, rss));
    }
    let slope = (peak[1].1 as f64 - peak[0].1 as f64) / (peak[1].0 - peak[0].0) as f64;
    println!(
        "lru memory: peak RSS {:.1} MiB at {} objects, {:.1} MiB at {} objects: {:.1} bytes per cached object (target <= 64)",
        peak[0].1 as f64 / 1048576.0,
        peak[0].0,
        peak[1].1 as f64 / 1048576.0,
        peak[1].0,
        slope
    );
    Ok(())
}

/// Stops with one line saying what to install when `python` cannot import `libcachesim`
/// (instead of the reference script's traceback as the error).
fn check_peer(python: &str) -> Result<()> {
    let out = Command::new(python)
        .args(["-c", "import libcachesim"])
        .output()
        .with_context(|| format!("the libCacheSim peer needs Python: cannot run `{python}`"))?;
    if !out.status.success() {
        bail!(
            "the libCacheSim peer is missing: `{python} -c 'import libcachesim'` failed; install it with `{python} -m pip install libcachesim` (or give --python)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_cpu_clock_counts_a_child() {
        // A child that burns CPU for a moment shows up in the children's clock.
        let (out, cpu) = with_child_cpu(|| {
            Command::new("sh")
                .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
                .status()
                .context("running sh")
        })
        .unwrap();
        assert!(out.success());
        let cpu = cpu.expect("/proc/self/stat readable on Linux");
        assert!(cpu > 0.0 && cpu < 60.0, "{cpu}");
    }

    #[test]
    fn reads_cachesim_result_line() {
        let out = "t.bin LRU cache size   100000,          9990000 req, miss ratio 0.3147, throughput 12.85 MQPS\n";
        assert_eq!(parse_cachesim(out), Some((0.3147, 12.85)));
        assert_eq!(parse_cachesim("no result"), None);
    }
}
