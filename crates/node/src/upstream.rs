//! Backends over upstream NBD exports: how a level-1 node reaches level-2 nodes.
//!
//! [`UpstreamBackend`] implements the cache's blocking [`cache::Backend`] over the `nbd`
//! crate's pipelined async client. The cache calls backends from tokio's blocking pool, so
//! each call blocks that thread on the runtime (`Handle::block_on`) while other requests
//! keep flowing through the same connection. Requests larger than the protocol's payload
//! limit are split. Several upstreams of one export are striped by
//! [`cache::StripedBackend`] on top, each member with a link of its own. The connection
//! may run over TLS ([`UpstreamBackend::connect_tls`]; the export's `upstream_tls*`
//! settings).
//!
//! **UpstreamLinks heal.** Each backend owns a [`UpstreamLink`]: the current connection, or none while the
//! upstream is away. A request whose connection breaks (the socket closes or errs, or the
//! upstream answers `ESHUTDOWN` while it stops) marks the link down and starts one
//! reconnecting task, which dials again with exponential backoff (50 ms doubling to 5 s,
//! each wait drawn between half and all of it, so many nodes do not redial in step). A
//! new connection must show the same export size, else it is refused and the task goes
//! on trying (an image that shrank or was replaced is not written to). Requests are safe
//! to replay in NBD (reads, writes and zeroing at fixed offsets, flushes), so a request
//! whose connection broke is sent again on the new one; while the link has been down for
//! less than `[node] upstream_wait` (default 5 s) requests wait for it, after that they
//! fail at once with an error naming the upstream and how long it has been away, until it
//! is back.
//!
//! **Unflushed writes are replayed.** A write the upstream acknowledged is durable there
//! only once a flush covers it; an upstream that restarts may have lost it. The link keeps
//! a journal of the writes (and zeroings) acknowledged since the last successful flush, up
//! to [`JOURNAL_LIMIT`] bytes of data, and replays it, oldest first, on a new connection
//! before any other request uses it. When the journal overflowed (its oldest entries were
//! dropped) and the connection was then lost, the node cannot prove those writes survived:
//! the next flush fails with an error saying so (the writer is told), once.
//!
//! A write is journaled only if the connection that acknowledged it is still the link's
//! current one, checked under the lock that marks a link down. An acknowledgement read
//! from a connection that was lost meanwhile may come after the reconnecting task took the
//! journal to replay (the upstream answered, then restarted and forgot it): such a write is
//! sent again on the new connection instead, so a later flush never vouches for a write the
//! new connection never saw.
//!
//! While any link is down the node reports `degraded` on `/healthz` and
//! `lachesis_upstream_up 0` on `/metrics` ([`UpstreamLinks`]).

use bytes::Bytes;
use cache::Backend;
use nbd::{ClientError, Errno, NbdClient};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::runtime::Handle;

/// Largest request sent upstream (the NBD servers' usual payload limit).
const MAX_REQUEST: u64 = 32 << 20;

/// Most bytes of acknowledged, unflushed writes a link keeps to replay after a reconnect.
pub const JOURNAL_LIMIT: usize = 32 << 20;

/// First wait between reconnection attempts; it doubles up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Longest wait between reconnection attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Longest a connection attempt (TCP, TLS, handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long requests wait for a link that went down, by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(5);

/// Why an upstream address is not usable.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not `host:port/export`")]
pub struct AddressError(String);

/// Splits `host:port/name` into the address and the export name.
pub fn parse_address(s: &str) -> Result<(String, String), AddressError> {
    let s = s.strip_prefix("nbd://").unwrap_or(s);
    match s.split_once('/') {
        Some((addr, name)) if !addr.is_empty() => Ok((addr.to_string(), name.to_string())),
        _ => Err(AddressError(s.to_string())),
    }
}

/// One acknowledged, unflushed write (or zeroing, `data` none).
struct Entry {
    seq: u64,
    offset: u64,
    len: u64,
    data: Option<Bytes>,
}

#[derive(Default)]
struct Journal {
    entries: VecDeque<Entry>,
    bytes: usize,
    next_seq: u64,
    /// Highest sequence number dropped for want of room (0: none).
    dropped_upto: u64,
    /// A connection was lost while dropped writes were not yet flushed.
    lost: bool,
}

impl Journal {
    fn push(&mut self, offset: u64, len: u64, data: Option<Bytes>) {
        self.next_seq += 1;
        let size = data.as_ref().map_or(0, |d| d.len()) + 32;
        self.bytes += size;
        self.entries.push_back(Entry {
            seq: self.next_seq,
            offset,
            len,
            data,
        });
        while self.bytes > JOURNAL_LIMIT {
            let Some(e) = self.entries.pop_front() else {
                break;
            };
            self.bytes -= e.data.as_ref().map_or(0, |d| d.len()) + 32;
            self.dropped_upto = e.seq;
        }
    }

    /// A flush sent when `next_seq` was `upto` succeeded: what it covers is durable.
    fn flushed(&mut self, upto: u64) {
        while self.entries.front().is_some_and(|e| e.seq <= upto) {
            let e = self.entries.pop_front().expect("front");
            self.bytes -= e.data.as_ref().map_or(0, |d| d.len()) + 32;
        }
        if self.dropped_upto <= upto {
            self.dropped_upto = 0;
        }
    }
}

/// The connection of a link, if any, and its generation (bumped at every reconnect).
struct Current {
    client: Option<Arc<NbdClient>>,
    generation: u64,
    down_since: Option<Instant>,
    reconnecting: bool,
    last_error: Option<String>,
}

/// A link to one upstream export that reconnects (see the module docs).
pub struct UpstreamLink {
    address: String,
    addr: String,
    name: String,
    tls: Option<nbd::ClientTls>,
    handle: Handle,
    size: u64,
    wait: Duration,
    current: Mutex<Current>,
    changed: Condvar,
    journal: Mutex<Journal>,
    reconnects: AtomicU64,
    replayed: AtomicU64,
    failures: AtomicU64,
    /// Called between a write's acknowledgement and its journaling (tests only: the race
    /// of the module docs made deterministic).
    #[cfg(test)]
    after_ack: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

/// A link's state as `/healthz` and `/metrics` show it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LinkStatus {
    /// The upstream (`host:port/export`).
    pub upstream: String,
    /// Whether a connection is up.
    pub up: bool,
    /// Seconds since it went down (0 while up).
    pub down_secs: f64,
    /// Connections made again after a loss.
    pub reconnects: u64,
    /// Journaled writes sent again on new connections.
    pub replayed_writes: u64,
    /// Connections lost.
    pub failures: u64,
    /// Why the last connection or attempt failed.
    pub last_error: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `e` means the connection is gone (as opposed to the upstream refusing this
/// one request).
fn connection_lost(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Io(_)
            | ClientError::Disconnected
            | ClientError::Protocol(_)
            | ClientError::Server(Errno::Shutdown)
    )
}

fn io_err(address: &str, e: ClientError) -> io::Error {
    match e {
        ClientError::Io(e) => io::Error::new(e.kind(), format!("upstream {address}: {e}")),
        ClientError::Server(Errno::NoSpc) => io::Error::new(
            io::ErrorKind::StorageFull,
            format!("upstream {address}: no space"),
        ),
        other => io::Error::other(format!("upstream {address}: {other}")),
    }
}

/// A pseudo-random fraction in [0.5, 1) for jitter (no RNG dependency: a fresh
/// `RandomState` is seeded randomly by the standard library).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    0.5 + (h.finish() >> 11) as f64 / (1u64 << 53) as f64 / 2.0
}

impl UpstreamLink {
    async fn dial(
        addr: &str,
        name: &str,
        tls: Option<&nbd::ClientTls>,
    ) -> Result<NbdClient, ClientError> {
        let connect = async {
            match tls {
                Some(tls) => NbdClient::connect_tls(addr, name, tls).await,
                None => NbdClient::connect(addr, name).await,
            }
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Ok(r) => r,
            Err(_) => Err(ClientError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no handshake within {CONNECT_TIMEOUT:?}"),
            ))),
        }
    }

    /// The upstream's address (`host:port/export`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The link's state now.
    pub fn status(&self) -> LinkStatus {
        let c = lock(&self.current);
        LinkStatus {
            upstream: self.address.clone(),
            up: c.client.is_some(),
            down_secs: c.down_since.map_or(0.0, |t| t.elapsed().as_secs_f64()),
            reconnects: self.reconnects.load(Ordering::Relaxed),
            replayed_writes: self.replayed.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            last_error: c.last_error.clone(),
        }
    }

    /// The current connection, waiting for one while the link has been down for less
    /// than `wait`.
    fn client(self: &Arc<Self>) -> io::Result<(u64, Arc<NbdClient>)> {
        let mut c = lock(&self.current);
        loop {
            if let Some(client) = &c.client {
                return Ok((c.generation, client.clone()));
            }
            let since = c.down_since.unwrap_or_else(Instant::now);
            let left = self.wait.saturating_sub(since.elapsed());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    format!(
                        "upstream {} is unreachable (down for {:.1} s, reconnecting): {}",
                        self.address,
                        since.elapsed().as_secs_f64(),
                        c.last_error.as_deref().unwrap_or("connection lost")
                    ),
                ));
            }
            c = self
                .changed
                .wait_timeout(c, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The connection of `generation` broke with `err`: mark the link down (once) and
    /// start reconnecting.
    fn lost(self: &Arc<Self>, generation: u64, err: &ClientError) {
        let mut c = lock(&self.current);
        if c.generation != generation || c.client.is_none() && c.reconnecting {
            return;
        }
        if let Some(old) = c.client.take() {
            self.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(upstream = %self.address, error = %err,
                "upstream connection lost; reconnecting");
            // Let the old connection's tasks end.
            self.handle.spawn(async move {
                let _ = old.disconnect().await;
            });
            let mut j = lock(&self.journal);
            if j.dropped_upto > 0 {
                j.lost = true;
            }
        }
        c.down_since.get_or_insert_with(Instant::now);
        c.last_error = Some(err.to_string());
        if !c.reconnecting {
            c.reconnecting = true;
            self.handle.spawn(Self::reconnect(Arc::downgrade(self)));
        }
    }

    /// Dials until a connection with the same export size is up and the journal is
    /// replayed on it, then installs it. Holds the link weakly: a node that stops ends it.
    async fn reconnect(link: std::sync::Weak<Self>) {
        let mut backoff = BACKOFF_MIN;
        let mut attempts = 0u64;
        loop {
            tokio::time::sleep(backoff.mul_f64(jitter())).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
            attempts += 1;
            let Some(this) = link.upgrade() else {
                return;
            };
            let err = match Self::dial(&this.addr, &this.name, this.tls.as_ref()).await {
                Ok(client) if client.size() != this.size => format!(
                    "the export is {} bytes now, was {} bytes: refusing it (shrunk or replaced?)",
                    client.size(),
                    this.size
                ),
                Ok(client) => match this.replay(&client).await {
                    Ok(n) => {
                        let client = Arc::new(client);
                        let mut c = lock(&this.current);
                        let down = c.down_since.take().map(|t| t.elapsed());
                        c.client = Some(client.clone());
                        c.generation += 1;
                        c.reconnecting = false;
                        this.watch(c.generation, &client);
                        this.reconnects.fetch_add(1, Ordering::Relaxed);
                        this.replayed.fetch_add(n, Ordering::Relaxed);
                        tracing::info!(upstream = %this.address, attempts, replayed = n,
                            down = ?down, "upstream connection restored");
                        this.changed.notify_all();
                        return;
                    }
                    Err(e) => format!("replaying unflushed writes: {e}"),
                },
                Err(e) => e.to_string(),
            };
            if attempts == 1 || attempts.is_multiple_of(20) {
                tracing::warn!(upstream = %this.address, attempts, error = %err,
                    "upstream still unreachable");
            }
            lock(&this.current).last_error = Some(err);
        }
    }

    /// Notices the end of `client` (connection `generation`) without a request: the link
    /// goes down and reconnects at once.
    fn watch(self: &Arc<Self>, generation: u64, client: &NbdClient) {
        let ended = client.closed();
        let link = Arc::downgrade(self);
        self.handle.spawn(async move {
            ended.await;
            if let Some(link) = link.upgrade() {
                link.lost(generation, &ClientError::Disconnected);
            }
        });
    }

    /// Sends the journal's writes again on `client`, oldest first; returns how many.
    async fn replay(&self, client: &NbdClient) -> Result<u64, ClientError> {
        let entries: Vec<(u64, u64, Option<Bytes>)> = lock(&self.journal)
            .entries
            .iter()
            .map(|e| (e.offset, e.len, e.data.clone()))
            .collect();
        for (offset, len, data) in &entries {
            match data {
                Some(d) => client.write(*offset, d.clone(), false).await?,
                None => client.write_zeroes(*offset, *len as u32, false).await?,
            }
        }
        Ok(entries.len() as u64)
    }

    /// Runs `op` on the current connection, again on a new one when the connection
    /// breaks (every NBD request is safe to replay).
    fn run<T, F, Fut>(self: &Arc<Self>, op: F) -> io::Result<T>
    where
        F: Fn(Arc<NbdClient>) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        self.run_then(op, |_| true)
    }

    /// [`Link::run`], then `done(generation)` once `op` succeeded on the connection of
    /// `generation`; `false` sends `op` again, on the current connection.
    fn run_then<T, F, Fut>(self: &Arc<Self>, op: F, done: impl Fn(u64) -> bool) -> io::Result<T>
    where
        F: Fn(Arc<NbdClient>) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        loop {
            let (generation, client) = self.client()?;
            let res = tokio::task::block_in_place(|| self.handle.block_on(op(client)));
            match res {
                Ok(v) if done(generation) => return Ok(v),
                Ok(_) => {}
                Err(e) if connection_lost(&e) => self.lost(generation, &e),
                Err(e) => return Err(io_err(&self.address, e)),
            }
        }
    }

    /// Sends a write (`data`) or a zeroing (`None`) of `len` bytes at `offset` with `op`
    /// and journals it, provided the connection that acknowledged it is still the current
    /// one (see the module docs); otherwise sends it again on the new connection.
    fn write_journaled<F, Fut>(
        self: &Arc<Self>,
        offset: u64,
        len: u64,
        data: Option<Bytes>,
        op: F,
    ) -> io::Result<()>
    where
        F: Fn(Arc<NbdClient>) -> Fut,
        Fut: std::future::Future<Output = Result<(), ClientError>>,
    {
        self.run_then(op, |generation| {
            #[cfg(test)]
            if let Some(hook) = lock(&self.after_ack).as_ref() {
                hook();
            }
            // Under the lock `lost` takes: a connection still current has not been given
            // up, so the replay of any reconnection to come takes this entry along.
            let c = lock(&self.current);
            if c.generation != generation || c.client.is_none() {
                return false;
            }
            lock(&self.journal).push(offset, len, data.clone());
            true
        })
    }
}

/// Every upstream link of a node, by export, for `/healthz` and `/metrics`.
#[derive(Default)]
pub struct UpstreamLinks(Mutex<Vec<(String, Arc<UpstreamLink>)>>);

impl UpstreamLinks {
    /// Adds `link` as one of `export`'s upstreams.
    pub fn add(&self, export: &str, link: Arc<UpstreamLink>) {
        lock(&self.0).push((export.to_string(), link));
    }

    /// Every link's state, with its export.
    pub fn status(&self) -> Vec<(String, LinkStatus)> {
        lock(&self.0)
            .iter()
            .map(|(e, l)| (e.clone(), l.status()))
            .collect()
    }
}

/// An upstream NBD export as a cache backend.
pub struct UpstreamBackend {
    link: Arc<UpstreamLink>,
}

impl UpstreamBackend {
    /// Connects to `host:port/name`; called from within the runtime.
    pub async fn connect(address: &str) -> io::Result<Self> {
        Self::connect_tls(address, None, DEFAULT_WAIT).await
    }

    /// Connects to `host:port/name`, over TLS as `tls` says (see
    /// [`NbdClient::connect_tls`]); requests wait up to `wait` for a link that went down.
    /// Called from within the runtime. The first connection must succeed.
    pub async fn connect_tls(
        address: &str,
        tls: Option<&nbd::ClientTls>,
        wait: Duration,
    ) -> io::Result<Self> {
        let (addr, name) =
            parse_address(address).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let client = UpstreamLink::dial(&addr, &name, tls)
            .await
            .map_err(|e| io::Error::other(format!("upstream {address}: {e}")))?;
        let link = UpstreamLink {
            address: address.to_string(),
            addr,
            name,
            tls: tls.cloned(),
            handle: Handle::current(),
            size: client.size(),
            wait,
            current: Mutex::new(Current {
                client: Some(Arc::new(client)),
                generation: 0,
                down_since: None,
                reconnecting: false,
                last_error: None,
            }),
            changed: Condvar::new(),
            journal: Mutex::new(Journal::default()),
            reconnects: AtomicU64::new(0),
            replayed: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            #[cfg(test)]
            after_ack: Mutex::new(None),
        };
        let link = Arc::new(link);
        if let Some(client) = &lock(&link.current).client {
            link.watch(0, client);
        }
        Ok(UpstreamBackend { link })
    }

    /// The upstream's address.
    pub fn address(&self) -> &str {
        &self.link.address
    }

    /// The link, for health reports.
    pub fn link(&self) -> Arc<UpstreamLink> {
        self.link.clone()
    }

    fn chunks(offset: u64, len: u64) -> impl Iterator<Item = (u64, u64)> {
        (0..len.div_ceil(MAX_REQUEST)).map(move |i| {
            let start = i * MAX_REQUEST;
            (offset + start, (len - start).min(MAX_REQUEST))
        })
    }
}

impl Backend for UpstreamBackend {
    fn size(&self) -> u64 {
        self.link.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut at = 0usize;
        for (off, n) in Self::chunks(offset, buf.len() as u64) {
            let data = self
                .link
                .run(|c| async move { c.read(off, n as u32).await })?;
            buf[at..at + n as usize].copy_from_slice(&data);
            at += n as usize;
        }
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut at = 0usize;
        for (off, n) in Self::chunks(offset, data.len() as u64) {
            let part = Bytes::copy_from_slice(&data[at..at + n as usize]);
            let p = part.clone();
            self.link.write_journaled(off, n, Some(part), move |c| {
                let p = p.clone();
                async move { c.write(off, p, false).await }
            })?;
            at += n as usize;
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        let upto = lock(&self.link.journal).next_seq;
        self.link.run(|c| async move { c.flush().await })?;
        let mut j = lock(&self.link.journal);
        if std::mem::take(&mut j.lost) {
            j.flushed(upto);
            return Err(io::Error::other(format!(
                "upstream {}: the connection was lost with more than {} MiB of acknowledged \
                 writes not yet flushed, and the upstream may have lost some of them",
                self.link.address,
                JOURNAL_LIMIT >> 20
            )));
        }
        j.flushed(upto);
        Ok(())
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        // The cache's contract: a trimmed range reads back as zeros, so write zeroes
        // rather than a discard whose contents the protocol leaves unspecified.
        for (off, n) in Self::chunks(offset, len) {
            self.link.write_journaled(off, n, None, |c| async move {
                c.write_zeroes(off, n as u32, false).await
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
