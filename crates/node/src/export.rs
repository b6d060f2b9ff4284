//! The NBD face of the node: every export of the node's [`ControlPlane`] served through its
//! caches, with the client's address as the rules' client.
//!
//! A connection's export is looked up per client ([`nbd::ExportProvider::lookup_for`]), so
//! the [`CacheExport`] it gets carries the client (the peer's IP, or `unix`) that the
//! cache's rules match on and the tenant counters are kept under. The cache's data path is
//! blocking (backends may block on disks or on upstream NBD connections), so each request
//! runs under `block_in_place` (on a current-thread runtime, on the blocking pool); the
//! connection keeps many in flight and replies out of order. On nbd's threaded path (few
//! connections, the usual case) a request that reaches here already runs on a connection
//! thread of its own, kept between requests, where `block_in_place` just runs it: a miss
//! costs no thread hand-off beyond the nbd leader's. Whether a read is in memory
//! is decided once, by the connection: it offers each small read to
//! [`Export::read_now`], which finds and copies it in one hold of its partition's lock
//! ([`cache::CacheNode::with_resident`]) so the connection serves it inline, with no
//! hand-off at all; a large one is lent to the connection
//! ([`Export::read_now_borrowed`]), which sends it from the cache's memory without
//! copying it first. Only what those decline reaches [`Export::read`], which goes
//! straight to the cache's ordinary read.
//! Latency is timed around the whole request (including any wait for the backend, which
//! happens below the cache, in [`crate::bandwidth`]). Every request is timed once
//! (`CacheExport::timed`) into one recorder (the export's and client's, `latency`: its
//! histogram and the hit/miss sums), a read as a hit when every block was in memory
//! (served by `read_now`, or found by the cache's read) and as a miss otherwise, a miss
//! also into the tenant's misses' histogram (`observe`); its blocks are fed once to the
//! tenant's profiler.
//! Writes, trims and zeroings are refused, before they reach the cache, while their
//! export's dirty blocks are at risk or once a stop was asked ([`crate::risk`]).
//! Block status (`base:allocation`) comes from [`cache::CacheNode::block_status`]: the
//! backend's holes (a file image's, from `lseek`; other backends report all data), less
//! every block a cache holds dirty, so data not yet written back is never called a hole.

use crate::latency::Latency;
use crate::latency::LatencyClass;
use crate::observe::TenantObserver;
use crate::state::ControlPlane;
use bytes::Bytes;
use cache::CacheError;
use nbd::server::export::{BoxFuture, Extent};
use nbd::wire::{STATE_HOLE, STATE_ZERO};
use nbd::{Capabilities, Export, ExportProvider};
use std::io;
use std::sync::Arc;
use std::time::Instant;

/// Largest resident read copied out ([`Export::read_now`]), under one hold of a
/// partition's lock: the largest read a connection offers to `read_now`. Larger hits
/// are lent ([`Export::read_now_borrowed`]) in the connection's own pieces of up to 1 MiB.
const READ_PIECE: usize = nbd::INLINE_READ_MAX as usize;

/// Maps a cache error to the I/O error the NBD layer turns into an errno.
pub fn io_error(e: CacheError) -> io::Error {
    match e {
        CacheError::Io { source, .. } => source,
        CacheError::OutOfRange { .. } => io::Error::new(io::ErrorKind::InvalidInput, e.to_string()),
        CacheError::ReadOnly(_) => io::Error::new(io::ErrorKind::PermissionDenied, e.to_string()),
        other => io::Error::other(other.to_string()),
    }
}

/// The client name rules see for an NBD peer: the IP without the port.
pub fn client_of(peer: &str) -> String {
    match peer.parse::<std::net::SocketAddr>() {
        Ok(a) => a.ip().to_string(),
        Err(_) => peer.to_string(),
    }
}

/// Each export's client allow-list (`[[export]] allow`); an export not listed admits
/// every client.
pub type AllowLists = std::collections::HashMap<String, nbd::server::allow::AllowList>;

/// The node's exports, looked up per client, with their allow-lists.
pub struct NodeExports(pub Arc<ControlPlane>, pub Arc<AllowLists>);

impl ExportProvider for NodeExports {
    fn admits(&self, name: &str, peer: &str) -> bool {
        let name = if name.is_empty() {
            match self.0.exports().next() {
                Some(e) => e.name.as_str(),
                None => return true,
            }
        } else {
            name
        };
        self.1.get(name).is_none_or(|l| l.admits(peer))
    }

    fn lookup(&self, name: &str) -> Option<Arc<dyn Export>> {
        self.lookup_for(name, "unknown")
    }

    fn lookup_for(&self, name: &str, peer: &str) -> Option<Arc<dyn Export>> {
        let name = if name.is_empty() {
            self.0.exports().next()?.name.clone()
        } else {
            name.to_string()
        };
        let info = self.0.export(&name)?;
        let client = client_of(peer);
        let observer = self.0.observer(&info.tenant)?.clone();
        Some(Arc::new(CacheExport {
            latency: observer.recorder(&name, &client),
            observer,
            key_base: self.0.key_base(&name),
            size: info.size,
            read_only: info.read_only,
            export: name.into(),
            client: client.into(),
            state: self.0.clone(),
        }))
    }

    fn list(&self) -> Vec<String> {
        self.0.exports().map(|e| e.name.clone()).collect()
    }
}

/// One export as one client sees it.
pub struct CacheExport {
    state: Arc<ControlPlane>,
    export: Arc<str>,
    client: Arc<str>,
    size: u64,
    read_only: bool,
    latency: Arc<Latency>,
    observer: Arc<TenantObserver>,
    key_base: u64,
}

impl CacheExport {
    /// Times one request that took `took`: into its one recorder (and a miss into the
    /// tenant's misses' histogram).
    fn timed(&self, write: bool, service: LatencyClass, took: std::time::Duration) {
        self.observer.record(&self.latency, write, service, took);
    }

    /// Feeds the blocks of `[offset, offset + len)` to the tenant's profiler.
    fn profile(&self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let bs = self.state.cache_node().block_size() as u64;
        let base = self.key_base;
        self.observer
            .access((offset / bs..=(offset + len - 1) / bs).map(|b| base | b));
    }

    /// Runs `f` as one request, timed into the latency histograms (`write`: the write
    /// one).
    async fn run<T: Send + 'static>(
        &self,
        write: bool,
        f: impl FnOnce(&cache::CacheNode, &str, &str) -> Result<T, CacheError> + Send + 'static,
    ) -> io::Result<T> {
        self.run_as(write, |_| LatencyClass::Other, f).await
    }

    /// [`CacheExport::run`], with `kind` telling from the answer how the request was
    /// served (for the tenant's hit/miss latency split).
    async fn run_as<T: Send + 'static>(
        &self,
        write: bool,
        kind: impl FnOnce(&T) -> LatencyClass,
        f: impl FnOnce(&cache::CacheNode, &str, &str) -> Result<T, CacheError> + Send + 'static,
    ) -> io::Result<T> {
        let start = Instant::now();
        let node = self.state.cache_node().clone();
        let (export, client) = (self.export.clone(), self.client.clone());
        let multi_thread = tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread;
        let out = if multi_thread {
            // The request blocks this worker; tokio hands the worker's other tasks to
            // another thread. One hand-off instead of spawn_blocking's two: measured
            // 70 k against 42 k misses per second at queue depth 32 (`bench nbd`).
            tokio::task::block_in_place(|| f(&node, &export, &client)).map_err(io_error)
        } else {
            tokio::task::spawn_blocking(move || f(&node, &export, &client))
                .await
                .map_err(|e| io::Error::other(format!("cache task failed: {e}")))?
                .map_err(io_error)
        };
        match &out {
            Ok(v) => self.timed(write, kind(v), start.elapsed()),
            // An error answered at once is no fast request: counted apart, not timed.
            Err(_) => self.latency.fail(),
        }
        out
    }

    /// Runs `f` on the cache's blocking data path, untimed (for queries that are no I/O
    /// of the tenant's, such as block status).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&cache::CacheNode, &str) -> Result<T, CacheError> + Send + 'static,
    ) -> io::Result<T> {
        let node = self.state.cache_node().clone();
        let export = self.export.clone();
        if tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread
        {
            tokio::task::block_in_place(|| f(&node, &export)).map_err(io_error)
        } else {
            tokio::task::spawn_blocking(move || f(&node, &export))
                .await
                .map_err(|e| io::Error::other(format!("cache task failed: {e}")))?
                .map_err(io_error)
        }
    }

    /// Runs `f` on the `len` bytes at `offset` if they are all in memory (timing the read
    /// as a request); `None` if not.
    fn resident(
        &self,
        offset: u64,
        len: usize,
        f: impl FnOnce(cache::Lent<'_>),
    ) -> Option<io::Result<()>> {
        let start = Instant::now();
        match self
            .state
            .cache_node()
            .with_resident(&self.export, &self.client, offset, len, f)
        {
            Ok(Some(())) => {
                self.timed(false, LatencyClass::Hit, start.elapsed());
                self.profile(offset, len as u64);
                Some(Ok(()))
            }
            Ok(None) => None,
            Err(e) => Some(Err(io_error(e))),
        }
    }
}

impl Export for CacheExport {
    fn size(&self) -> u64 {
        self.size
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: self.read_only,
            ..Capabilities::default()
        }
    }

    fn read(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<Bytes>> {
        // The connection offered a small read to `read_now` first: it is not all in
        // memory, so it is not checked again here.
        self.profile(offset, len as u64);
        Box::pin(async move {
            self.run_as(
                false,
                |(_, hit)| {
                    if *hit {
                        LatencyClass::Hit
                    } else {
                        LatencyClass::Miss
                    }
                },
                move |node, export, client| {
                    let mut buf = vec![0u8; len as usize];
                    let o = node.read_outcome(export, client, offset, &mut buf)?;
                    Ok((Bytes::from(buf), o.misses == 0))
                },
            )
            .await
            .map(|(data, _)| data)
        })
    }

    fn read_now(&self, offset: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        if buf.len() > READ_PIECE {
            // Larger hits are lent (`read_now_borrowed`), which the threaded path tries
            // first: one that was not lent is not resident, and copying it here in
            // pieces would count the hits of its first pieces twice.
            return None;
        }
        self.resident(offset, buf.len(), |lent| lent.copy_to(buf))
    }

    fn read_now_borrowed(
        &self,
        offset: u64,
        len: usize,
        out: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<io::Result<()>> {
        self.resident(offset, len, |lent| {
            let slices: Vec<&[u8]> = lent.slices().collect();
            out(&slices)
        })
    }

    fn write(&self, offset: u64, data: Bytes, fua: bool) -> BoxFuture<'_, io::Result<()>> {
        if let Some(e) = self.state.risk().refusal(&self.export) {
            return Box::pin(async move { Err(e) });
        }
        self.profile(offset, data.len() as u64);
        Box::pin(self.run(true, move |node, export, client| {
            node.write(export, client, offset, &data, fua)
        }))
    }

    fn flush(&self) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(self.run(true, move |node, export, _| node.flush(export)))
    }

    fn trim(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<()>> {
        if let Some(e) = self.state.risk().refusal(&self.export) {
            return Box::pin(async move { Err(e) });
        }
        Box::pin(self.run(true, move |node, export, client| {
            node.trim(export, client, offset, len as u64)
        }))
    }

    fn block_status(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<Vec<Extent>>> {
        Box::pin(async move {
            let runs = self
                .blocking(move |node, export| node.block_status(export, offset, len as u64))
                .await?;
            Ok(runs
                .into_iter()
                .map(|(n, hole)| Extent {
                    // The runs cover at most the request's `len`, a u32.
                    length: n.min(len as u64) as u32,
                    flags: if hole { STATE_HOLE | STATE_ZERO } else { 0 },
                })
                .collect())
        })
    }

    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> BoxFuture<'_, io::Result<()>> {
        if let Some(e) = self.state.risk().refusal(&self.export) {
            return Box::pin(async move { Err(e) });
        }
        Box::pin(self.run(true, move |node, export, client| {
            // Whole blocks are discarded (they read back as zeros); partial blocks at the
            // ends are written with zeros.
            let bs = node.block_size() as u64;
            let end = offset + len as u64;
            let first_full = offset.div_ceil(bs) * bs;
            let last_full = end / bs * bs;
            let zeros =
                |at: u64, n: u64| node.write(export, client, at, &vec![0; n as usize], false);
            if first_full < last_full {
                if offset < first_full {
                    zeros(offset, first_full - offset)?;
                }
                node.trim(export, client, first_full, last_full - first_full)?;
                if last_full < end {
                    zeros(last_full, end - last_full)?;
                }
            } else {
                zeros(offset, len as u64)?;
            }
            if fua {
                node.flush(export)?;
            }
            Ok(())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_is_the_ip() {
        assert_eq!(client_of("127.0.0.1:51234"), "127.0.0.1");
        assert_eq!(client_of("[::1]:9"), "::1");
        assert_eq!(client_of("unix"), "unix");
    }
}
