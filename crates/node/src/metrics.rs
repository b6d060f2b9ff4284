//! The Prometheus metrics endpoint, in the text exposition format (version 0.0.4).
//!
//! Written by hand rather than with a metrics crate: every counter already lives in the
//! cache crate (partition counters under their locks, tenant atomics) and in the latency
//! histograms; a registry would have to mirror each of them on every change. The scrape
//! takes a snapshot and prints it, which is all the format needs. Every tenant series
//! (counters, latency histograms, and requests answered with an error, which are in no
//! latency series) carries `export` and `tenant` labels, summed over
//! the export's clients; a client's address is a label (`client`) only with `[node]
//! metrics_client_labels = true`, since `/metrics` answers without a token. The
//! process's resident memory, threads, open descriptors and CPU time come from
//! `/proc/self` under Prometheus's conventional `process_*` names. The NBD server's
//! node-wide budget of bytes in flight (in flight, limit, peak, waits) and its connections
//! and workers are the `lachesis_nbd_*` series; the links to upstream NBD exports (up,
//! seconds down, reconnects, replayed writes) the `lachesis_upstream_*` series; dirty blocks
//! at risk (`crate::risk`) `lachesis_dirty_at_risk_*` and a stop asked `lachesis_node_stopping`.

use crate::latency::Latency;
use crate::state::ControlPlane;
use cache::TenantSnapshot;
use std::fmt::Write;
use std::sync::Arc;

/// Histogram bucket bounds for request latency, in microseconds.
const LATENCY_BOUNDS_US: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
];

/// Escapes a label value.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A metric read off a cache's counters: name, help, getter.
type CacheMetric = (
    &'static str,
    &'static str,
    fn(&api::node::CacheStats) -> u64,
);

struct Out(String);

impl Out {
    fn help(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: impl std::fmt::Display) {
        let l: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
            .collect();
        if l.is_empty() {
            let _ = writeln!(self.0, "{name} {v}");
        } else {
            let _ = writeln!(self.0, "{name}{{{}}} {v}", l.join(","));
        }
    }
}

/// The NBD server's node-wide budget of request and reply bytes in flight, and its workers.
fn nbd_budget(o: &mut Out, g: &nbd::LimitsGauge) {
    let gauges: [(&str, &str, u64); 6] = [
        (
            "lachesis_nbd_in_flight_bytes",
            "Request and reply payload bytes held by NBD requests in flight, node-wide.",
            g.in_flight_bytes,
        ),
        (
            "lachesis_nbd_in_flight_limit_bytes",
            "The node-wide budget of payload bytes in flight (in_flight_budget).",
            g.limit_bytes,
        ),
        (
            "lachesis_nbd_in_flight_peak_bytes",
            "The most payload bytes ever in flight at once.",
            g.peak_in_flight_bytes,
        ),
        (
            "lachesis_nbd_connections",
            "NBD connections in their transmission phase.",
            g.connections as u64,
        ),
        (
            "lachesis_nbd_threaded_connections",
            "NBD connections served on threads of their own (the rest are async tasks).",
            g.threaded_connections as u64,
        ),
        (
            "lachesis_nbd_workers",
            "NBD worker threads beyond each connection's own.",
            g.workers as u64,
        ),
    ];
    for (name, help, v) in gauges {
        o.help(name, "gauge", help);
        o.sample(name, &[], v);
    }
    o.help(
        "lachesis_nbd_budget_waits_total",
        "counter",
        "NBD requests that waited for room in the in-flight budget.",
    );
    o.sample("lachesis_nbd_budget_waits_total", &[], g.waits);
}

/// Dirty blocks neither the backend nor the data directory can take ([`crate::risk`]).
fn dirty_at_risk(o: &mut Out, state: &ControlPlane) {
    let r = state.risk().status();
    o.help(
        "lachesis_dirty_at_risk_blocks",
        "gauge",
        "Acknowledged dirty blocks that can be neither written back nor kept in the data \
         directory (their exports refuse writes; a stop waits for them). 0 normally.",
    );
    o.sample(
        "lachesis_dirty_at_risk_blocks",
        &[],
        r.as_ref().map_or(0, |r| r.blocks),
    );
    o.help(
        "lachesis_dirty_at_risk_seconds",
        "gauge",
        "Seconds dirty blocks have been at risk (0 while none is).",
    );
    o.sample(
        "lachesis_dirty_at_risk_seconds",
        &[],
        r.as_ref().map_or(0.0, |r| r.since_secs),
    );
    o.help(
        "lachesis_node_stopping",
        "gauge",
        "1 once a stop was asked (writes are refused), 0 while serving.",
    );
    o.sample(
        "lachesis_node_stopping",
        &[],
        u8::from(state.risk().stopping()),
    );
}

/// The links to upstream NBD exports: up or not, reconnects, replayed writes.
fn upstream_links(o: &mut Out, state: &ControlPlane) {
    let links = state.upstreams().status();
    if links.is_empty() {
        return;
    }
    type Get = fn(&crate::upstream::LinkStatus) -> f64;
    let series: [(&str, &str, &str, Get); 4] = [
        (
            "lachesis_upstream_up",
            "gauge",
            "1 while the link to the upstream NBD export is connected, 0 while it reconnects.",
            |l| if l.up { 1.0 } else { 0.0 },
        ),
        (
            "lachesis_upstream_down_seconds",
            "gauge",
            "Seconds the link to the upstream has been down (0 while up).",
            |l| l.down_secs,
        ),
        (
            "lachesis_upstream_reconnects_total",
            "counter",
            "Connections to the upstream made again after a loss.",
            |l| l.reconnects as f64,
        ),
        (
            "lachesis_upstream_replayed_writes_total",
            "counter",
            "Acknowledged, unflushed writes sent again to the upstream after a reconnect.",
            |l| l.replayed_writes as f64,
        ),
    ];
    for (name, kind, help, get) in series {
        o.help(name, kind, help);
        for (export, l) in &links {
            o.sample(
                name,
                &[("export", export), ("upstream", &l.upstream)],
                get(l),
            );
        }
    }
}

/// Renders every metric of the node.
pub fn render(state: &ControlPlane) -> String {
    let mut o = Out(String::with_capacity(4096));
    let level = state.level().to_string();
    o.help(
        "lachesis_node_info",
        "gauge",
        "Static facts about the node.",
    );
    o.sample(
        "lachesis_node_info",
        &[("level", &level), ("version", env!("CARGO_PKG_VERSION"))],
        1,
    );
    o.help(
        "lachesis_node_cache_blocks",
        "gauge",
        "Cache blocks of the node.",
    );
    o.sample(
        "lachesis_node_cache_blocks",
        &[("state", "total")],
        state.cache_node().total_blocks(),
    );
    o.sample(
        "lachesis_node_cache_blocks",
        &[("state", "allocated")],
        state.cache_node().allocated_blocks(),
    );
    o.help(
        "lachesis_node_uptime_seconds",
        "gauge",
        "Seconds since the node started.",
    );
    o.sample(
        "lachesis_node_uptime_seconds",
        &[],
        state.started().elapsed().as_secs_f64(),
    );

    if let Some(limits) = &state.nbd_limits() {
        nbd_budget(&mut o, &limits.gauge());
    }
    upstream_links(&mut o, state);
    dirty_at_risk(&mut o, state);

    let caches = state.caches();
    let gauges: [CacheMetric; 4] = [
        (
            "lachesis_cache_capacity_blocks",
            "Capacity of the cache in blocks.",
            |s| s.capacity,
        ),
        ("lachesis_cache_resident_blocks", "Blocks held.", |s| {
            s.resident
        }),
        ("lachesis_cache_dirty_blocks", "Dirty blocks held.", |s| {
            s.dirty
        }),
        (
            "lachesis_cache_writing_back_blocks",
            "Evicted dirty blocks being written back.",
            |s| s.writing_back,
        ),
    ];
    for (name, help, f) in gauges {
        o.help(name, "gauge", help);
        for c in &caches {
            o.sample(name, &[("cache", &c.name), ("level", &level)], f(&c.stats));
        }
    }
    let counters: [CacheMetric; 7] = [
        (
            "lachesis_cache_hits_total",
            "Block lookups found in the cache.",
            |s| s.hits,
        ),
        (
            "lachesis_cache_misses_total",
            "Block lookups not found.",
            |s| s.misses,
        ),
        (
            "lachesis_cache_read_bytes_total",
            "Bytes read through the cache.",
            |s| s.read_bytes,
        ),
        (
            "lachesis_cache_write_bytes_total",
            "Bytes written through the cache.",
            |s| s.write_bytes,
        ),
        ("lachesis_cache_evictions_total", "Blocks evicted.", |s| {
            s.evictions
        }),
        (
            "lachesis_cache_writebacks_total",
            "Dirty blocks written to the backend.",
            |s| s.writebacks,
        ),
        (
            "lachesis_cache_writeback_errors_total",
            "Failed write-backs (retried).",
            |s| s.writeback_errors,
        ),
    ];
    for (name, help, f) in counters {
        o.help(name, "counter", help);
        for c in &caches {
            o.sample(name, &[("cache", &c.name), ("level", &level)], f(&c.stats));
        }
    }

    // Exclusive levels (`demote`): per cache, then the level-1 queue.
    let demote: [CacheMetric; 6] = [
        (
            "lachesis_cache_demoted_total",
            "Clean victims queued for level 2.",
            |s| s.demoted,
        ),
        (
            "lachesis_cache_demote_dropped_total",
            "Clean victims not demoted (queue full or no level-2 API).",
            |s| s.demote_dropped,
        ),
        (
            "lachesis_cache_demote_skipped_total",
            "Clean victims not demoted (a write of the block was in flight).",
            |s| s.demote_skipped,
        ),
        (
            "lachesis_cache_demoted_in_total",
            "Demoted blocks inserted clean.",
            |s| s.demoted_in,
        ),
        (
            "lachesis_cache_demote_refreshed_total",
            "Demoted blocks already held, moved to MRU.",
            |s| s.demote_refreshed,
        ),
        (
            "lachesis_cache_dropped_on_read_total",
            "Blocks dropped after serving a read (lower exclusive level).",
            |s| s.dropped_on_read,
        ),
    ];
    for (name, help, f) in demote {
        o.help(name, "counter", help);
        for c in &caches {
            o.sample(name, &[("cache", &c.name), ("level", &level)], f(&c.stats));
        }
    }
    let d = state.demoter().counters();
    o.help(
        "lachesis_demote_blocks_total",
        "counter",
        "Blocks on the demote path to level 2, by outcome.",
    );
    for (outcome, v) in [
        ("queued", d.queued),
        ("dropped", d.dropped),
        ("no_target", d.no_target),
        ("cancelled", d.cancelled),
        ("sent", d.sent),
        ("failed", d.failed),
    ] {
        o.sample("lachesis_demote_blocks_total", &[("outcome", outcome)], v);
    }
    o.help(
        "lachesis_demote_queue_blocks",
        "gauge",
        "Blocks waiting to be demoted.",
    );
    o.sample("lachesis_demote_queue_blocks", &[], d.queue_blocks);

    let tenants = by_client_or_not(state);
    o.help(
        "lachesis_tenant_requests_total",
        "counter",
        "Requests of a tenant (export, client).",
    );
    o.help(
        "lachesis_tenant_bytes_total",
        "counter",
        "Bytes moved for a tenant.",
    );
    o.help(
        "lachesis_tenant_block_lookups_total",
        "counter",
        "Block hits and misses of a tenant at this node's level.",
    );
    for t in &tenants {
        let base = labels(t, &[]);
        let with = |k: &'static str, v: &'static str| {
            let mut l = base.to_vec();
            l.push((k, v));
            l
        };
        o.sample(
            "lachesis_tenant_requests_total",
            &with("op", "read"),
            t.counters.reads,
        );
        o.sample(
            "lachesis_tenant_requests_total",
            &with("op", "write"),
            t.counters.writes,
        );
        o.sample(
            "lachesis_tenant_bytes_total",
            &with("op", "read"),
            t.counters.read_bytes,
        );
        o.sample(
            "lachesis_tenant_bytes_total",
            &with("op", "write"),
            t.counters.write_bytes,
        );
        let mut hit = with("result", "hit");
        hit.push(("level", &level));
        o.sample("lachesis_tenant_block_lookups_total", &hit, t.counters.hits);
        let mut miss = with("result", "miss");
        miss.push(("level", &level));
        o.sample(
            "lachesis_tenant_block_lookups_total",
            &miss,
            t.counters.misses,
        );
    }
    o.help(
        "lachesis_tenant_latency_seconds",
        "histogram",
        "Request latency of a tenant at this node.",
    );
    for t in &tenants {
        for (op, write) in [("read", false), ("write", true)] {
            let (counts, n, sum) = t.latency(write);
            let base = labels(t, &[("op", op)]);
            for (b, c) in LATENCY_BOUNDS_US.iter().zip(&counts) {
                let le = format!("{}", *b as f64 / 1e6);
                let mut l = base.to_vec();
                l.push(("le", &le));
                o.sample("lachesis_tenant_latency_seconds_bucket", &l, c);
            }
            let mut l = base.to_vec();
            l.push(("le", "+Inf"));
            o.sample("lachesis_tenant_latency_seconds_bucket", &l, n);
            o.sample("lachesis_tenant_latency_seconds_sum", &base, sum);
            o.sample("lachesis_tenant_latency_seconds_count", &base, n);
        }
    }
    o.help(
        "lachesis_tenant_failed_requests_total",
        "counter",
        "Requests of a tenant answered with an error (in no latency series).",
    );
    for t in &tenants {
        let failed: u64 = t.latencies.iter().map(|l| l.sums().failed).sum();
        o.sample(
            "lachesis_tenant_failed_requests_total",
            &labels(t, &[]),
            failed,
        );
    }
    process(&mut o);
    o.0
}

/// The process's own figures, read from `/proc/self` (absent where there is none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessFigures {
    /// Resident set size in bytes.
    pub rss_bytes: Option<u64>,
    /// Threads.
    pub threads: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// User plus system CPU seconds.
    pub cpu_seconds: Option<f64>,
}

/// Reads the process's figures.
pub fn process_figures() -> ProcessFigures {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let cpu_seconds = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name (which may hold spaces, inside parentheses):
            // utime and stime are the 12th and 13th, in clock ticks (100 per second on
            // Linux's user ABI).
            let rest = &s[s.rfind(')')? + 1..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            Some(ticks as f64 / 100.0)
        });
    ProcessFigures {
        rss_bytes: field("VmRSS:").map(|kib| kib * 1024),
        threads: field("Threads:"),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64),
        cpu_seconds,
    }
}

fn process(o: &mut Out) {
    let p = process_figures();
    if let Some(v) = p.rss_bytes {
        o.help(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
        );
        o.sample("process_resident_memory_bytes", &[], v);
    }
    if let Some(v) = p.threads {
        o.help("process_threads", "gauge", "Threads of the process.");
        o.sample("process_threads", &[], v);
    }
    if let Some(v) = p.open_fds {
        o.help(
            "process_open_fds",
            "gauge",
            "Open file descriptors (sockets included).",
        );
        o.sample("process_open_fds", &[], v);
    }
    if let Some(v) = p.cpu_seconds {
        o.help(
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time spent, in seconds.",
        );
        o.sample("process_cpu_seconds_total", &[], v);
    }
}

/// One tenant series of `/metrics`: an export's tenant and one client's counters, or the
/// sum over its clients.
struct Series {
    export: String,
    tenant: String,
    /// The client's address (`None`: summed over the export's clients).
    client: Option<String>,
    /// The latency recorders of its clients.
    latencies: Vec<Arc<Latency>>,
    counters: TenantSnapshot,
}

impl Series {
    /// Its latency histogram of reads or writes: counts under [`LATENCY_BOUNDS_US`],
    /// requests and their summed seconds, over its clients.
    fn latency(&self, write: bool) -> (Vec<u64>, u64, f64) {
        let mut out = (vec![0; LATENCY_BOUNDS_US.len()], 0, 0.0);
        for l in &self.latencies {
            let (counts, n, sum) = l.buckets(write, LATENCY_BOUNDS_US);
            for (a, b) in out.0.iter_mut().zip(counts) {
                *a += b;
            }
            out.1 += n;
            out.2 += sum;
        }
        out
    }
}

/// Its labels (`export`, `client` if kept, `tenant`) and `extra`.
fn labels<'a>(t: &'a Series, extra: &[(&'static str, &'a str)]) -> Vec<(&'static str, &'a str)> {
    let mut l = vec![("export", t.export.as_str())];
    if let Some(c) = &t.client {
        l.push(("client", c.as_str()));
    }
    l.push(("tenant", t.tenant.as_str()));
    l.extend_from_slice(extra);
    l
}

/// The tenant series: one per (export, client) with `metrics_client_labels`, else one
/// per export summed over its clients.
fn by_client_or_not(state: &ControlPlane) -> Vec<Series> {
    let keep = state.metrics_client_labels();
    let mut out: Vec<Series> = Vec::new();
    for t in state.tenant_rows() {
        let found = out
            .iter_mut()
            .find(|s| !keep && s.export == t.export && s.tenant == t.tenant);
        match found {
            Some(s) => {
                s.latencies.push(t.latency);
                s.counters += t.counters;
            }
            None => out.push(Series {
                client: keep.then_some(t.client),
                latencies: vec![t.latency],
                export: t.export,
                tenant: t.tenant,
                counters: t.counters,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_figures_are_read() {
        let p = process_figures();
        assert!(p.rss_bytes.unwrap() > 1 << 20, "{p:?}");
        assert!(p.threads.unwrap() >= 1, "{p:?}");
        assert!(p.open_fds.unwrap() >= 3, "{p:?}");
        assert!(p.cpu_seconds.unwrap() >= 0.0, "{p:?}");
    }

    #[test]
    fn escapes_labels() {
        assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
