//! What the server serves: the [`Export`] trait, its [`Capabilities`], and the
//! [`ExportProvider`] that maps names to exports.
//!
//! **Async without `async-trait`.** The server holds exports as `Arc<dyn Export>` (one
//! type for memory, files, caches and upstream NBD), so the trait must be object-safe.
//! Native `async fn` in traits is not, and its futures carry no `Send` bound a spawned
//! task could rely on. Each I/O method therefore returns a [`BoxFuture`]
//! (`Pin<Box<dyn Future + Send>>`): one small allocation per request, the same cost the
//! `async-trait` crate would add, without the macro. Implementations write
//! `Box::pin(async move { ... })`.
//!
//! **Contract.** The connection validates every request before calling the export: ranges
//! lie within `0..size()`, writes never reach a read-only export, `flush`/`trim`/
//! `write_zeroes` are called only when the capability is advertised. A method returns
//! only once its effect is visible to later reads on any connection; with `fua == true`,
//! only once it is durable. `flush` makes every write that has *completed* before it was
//! called durable. Errors are `std::io::Error`s, mapped to NBD error values by
//! [`crate::wire::Errno::from_io`].

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

pub use crate::reply::Extent;
use crate::wire::TransmissionFlags;

/// A boxed, `Send` future borrowed from the export.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What an export can do; turned into transmission flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Writes, trims and write-zeroes are refused with `EPERM`.
    pub read_only: bool,
    /// `flush` and FUA are meaningful (advertises `SEND_FLUSH` and `SEND_FUA`).
    pub flush: bool,
    /// `trim` is supported.
    pub trim: bool,
    /// `write_zeroes` is supported.
    pub write_zeroes: bool,
    /// Flush/FUA on one connection covers writes made on every connection.
    pub multi_conn: bool,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            read_only: false,
            flush: true,
            trim: true,
            write_zeroes: true,
            multi_conn: true,
        }
    }
}

impl Capabilities {
    /// The transmission flags advertising these capabilities.
    pub fn transmission_flags(&self) -> TransmissionFlags {
        let mut f = TransmissionFlags::HAS_FLAGS;
        if self.read_only {
            f |= TransmissionFlags::READ_ONLY;
        }
        if self.flush {
            f |= TransmissionFlags::SEND_FLUSH | TransmissionFlags::SEND_FUA;
        }
        if self.trim && !self.read_only {
            f |= TransmissionFlags::SEND_TRIM;
        }
        if self.write_zeroes && !self.read_only {
            f |= TransmissionFlags::SEND_WRITE_ZEROES;
        }
        if self.multi_conn {
            f |= TransmissionFlags::CAN_MULTI_CONN;
        }
        TransmissionFlags(f)
    }
}

/// A block device served over NBD. See the module docs for the contract.
pub trait Export: Send + Sync + 'static {
    /// Size in bytes (fixed for the life of a connection).
    fn size(&self) -> u64;

    /// What the export supports.
    fn capabilities(&self) -> Capabilities;

    /// Read `len` bytes at `offset`.
    fn read(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<Bytes>>;

    /// Read `buf.len()` bytes at `offset` into `buf` *only if* that needs no waiting (the
    /// data is in memory); `None` means "use [`Export::read`]". Both transmission paths
    /// offer every read of at most [`INLINE_READ_MAX`](crate::server::INLINE_READ_MAX)
    /// bytes here first, once, and answer it on the reading thread or task, copying
    /// straight into the reply, so a cache hit costs no hand-off; [`Export::read`] gets
    /// such a read only after this declined it, so it need not look in memory again.
    /// `Some(Ok(()))` must fill all of `buf`. The default never answers.
    fn read_now(&self, offset: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        let _ = (offset, buf);
        None
    }

    /// Like [`Export::read_now`] without the copy: if all `len` bytes at `offset` are in
    /// memory, the export calls `out` once with them as slices of its own memory, in
    /// order, while it holds whatever keeps them valid, so `out` must not block. The
    /// threaded path sends large hits this way, piece by piece, straight from the cache to
    /// the socket. `None` means `out` was not called (use another way); an error is
    /// returned without calling it. The default never answers.
    fn read_now_borrowed(
        &self,
        offset: u64,
        len: usize,
        out: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<io::Result<()>> {
        let _ = (offset, len, out);
        None
    }

    /// Write `data` at `offset`; durable before returning when `fua`.
    fn write(&self, offset: u64, data: Bytes, fua: bool) -> BoxFuture<'_, io::Result<()>>;

    /// Make every completed write durable.
    fn flush(&self) -> BoxFuture<'_, io::Result<()>>;

    /// Discard `len` bytes at `offset` (contents afterwards are unspecified by NBD; the
    /// exports of this crate return zeroes).
    fn trim(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<()>>;

    /// Set `len` bytes at `offset` to zero; durable before returning when `fua`.
    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> BoxFuture<'_, io::Result<()>>;

    /// The `base:allocation` status of `len > 0` bytes at `offset`, as consecutive extents
    /// from `offset` ([`crate::wire::STATE_HOLE`], [`crate::wire::STATE_ZERO`]); they may
    /// cover less than `len` (the client asks again from where they stop) but must cover
    /// something. Writes that completed before the call must show as data: never report
    /// a hole over data a write put anywhere (a cache's dirty blocks included). The
    /// default says "allocated, contents unknown" for the whole range, which is always
    /// true.
    fn block_status(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<Vec<Extent>>> {
        let _ = offset;
        Box::pin(async move {
            Ok(vec![Extent {
                length: len,
                flags: 0,
            }])
        })
    }
}

/// Looks up exports by name for the handshake.
pub trait ExportProvider: Send + Sync + 'static {
    /// The export called `name` ("" is the default export), if any.
    fn lookup(&self, name: &str) -> Option<Arc<dyn Export>>;

    /// The export called `name` as seen by the client at `peer` (`ip:port` for TCP,
    /// `unix` for a Unix-domain socket). Providers that route by client (a cache node's
    /// rules match on the client) override this; the default ignores the peer.
    fn lookup_for(&self, name: &str, peer: &str) -> Option<Arc<dyn Export>> {
        let _ = peer;
        self.lookup(name)
    }

    /// Whether the client at `peer` may use the export called `name` (a per-export
    /// allow-list, see `allow`); a refused client gets `NBD_REP_ERR_POLICY`. The default
    /// admits everyone.
    fn admits(&self, name: &str, peer: &str) -> bool {
        let _ = (name, peer);
        true
    }

    /// Names of all exports, for `NBD_OPT_LIST`.
    fn list(&self) -> Vec<String>;
}

/// A fixed map from names to exports, with an optional default for the empty name.
#[derive(Default, Clone)]
pub struct ExportMap {
    exports: BTreeMap<String, Arc<dyn Export>>,
    default: Option<String>,
}

impl ExportMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add (or replace) an export; the first one added also becomes the default.
    pub fn insert(&mut self, name: impl Into<String>, export: Arc<dyn Export>) -> &mut Self {
        let name = name.into();
        if self.default.is_none() {
            self.default = Some(name.clone());
        }
        self.exports.insert(name, export);
        self
    }

    /// Builder form of [`ExportMap::insert`].
    pub fn with(mut self, name: impl Into<String>, export: Arc<dyn Export>) -> Self {
        self.insert(name, export);
        self
    }
}

impl ExportProvider for ExportMap {
    fn lookup(&self, name: &str) -> Option<Arc<dyn Export>> {
        let name = if name.is_empty() {
            self.default.as_deref()?
        } else {
            name
        };
        self.exports.get(name).cloned()
    }

    fn list(&self) -> Vec<String> {
        self.exports.keys().cloned().collect()
    }
}
