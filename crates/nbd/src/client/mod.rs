//! [`NbdClient`]: a pipelined NBD client (used by level-1 nodes to reach level-2 nodes).
//!
//! **Handshake.** Fixed newstyle: read the greeting, send client flags (`FIXED_NEWSTYLE`,
//! and `NO_ZEROES` when offered), then `NBD_OPT_GO` for the export. A server that answers
//! `NBD_REP_ERR_UNSUP` gets the old `NBD_OPT_EXPORT_NAME` instead; `NBD_REP_ERR_UNKNOWN`
//! (or a server that closes after `EXPORT_NAME`) is [`ClientError::UnknownExport`].
//! Structured replies are not requested, so every reply is a simple reply.
//!
//! **TLS.** [`NbdClient::connect_tls`] sends `NBD_OPT_STARTTLS` right after the client
//! flags and, on `NBD_REP_ACK`, runs the TLS handshake ([`ClientTls`]: the CA it trusts,
//! optionally a client certificate) and the rest of the negotiation and the whole
//! transmission phase inside it. A server that refuses `STARTTLS` gets
//! [`ClientError::TlsRefused`] when TLS is required; with TLS optional the client goes on
//! in clear. A failed handshake (a server certificate the CA did not sign, say) is
//! [`ClientError::Tls`]; nothing is ever sent in clear after `STARTTLS`.
//!
//! **Pipelining.** Any number of tasks may call the request methods at once on a shared
//! `&NbdClient`, and one task may have many requests out at once: [`NbdClient::start_read`]
//! (and [`NbdClient::start_write`]) sends a request and returns an [`InFlight`] to await its reply
//! later, and [`NbdClient::read_many`] sends a whole list of reads before waiting for the
//! first reply, so a level-1 node's misses to one upstream overlap on one connection
//! instead of queueing behind each other (N reads against a server that takes 5 ms each
//! finish in about 5 ms, not N × 5: `tests/integration/pipelining.rs`, against `nbdkit`'s
//! `delay` filter). Each request takes a slot in a slab of in-flight requests; the handle
//! on the wire is `generation << 32 | slot`, so matching a reply is an index, not a hash
//! lookup, and a stale or forged handle is detected by its generation. A writer task
//! owns the socket's write half and batches requests into one flush when several are
//! queued; a reader task frames replies, takes the slot named by the handle (learning
//! from it how many data bytes follow a successful read), and completes the caller's
//! oneshot channel. Replies may arrive in any order. Per request the only allocations are
//! the oneshot channel and, for reads, the data itself (split without copying from the
//! reader's buffer). A semaphore bounds requests on the wire (default 128); its permit
//! goes with the request's slot and is returned by the reader when the reply arrives, not
//! when the caller looks at it, so a caller that starts more requests than that before
//! awaiting any is never stuck behind its own unread replies.
//!
//! **Cancellation.** Dropping a request future (a timeout, say) is safe: channel space is
//! reserved before a slot is taken, the writer task writes whole requests only, and a
//! reply for an abandoned request just frees its slot. Writing from the caller's task
//! under a lock would save a wake-up but could leave half a request on the wire if the
//! caller were cancelled mid-write, so the writer task stays.
//!
//! **Ending.** [`NbdClient::disconnect`] sends `NBD_CMD_DISC`; requests already sent
//! still get their replies (the server drains), later ones fail with
//! [`ClientError::Disconnected`]. If the connection breaks, every pending request fails
//! with the same error, and [`NbdClient::closed`] completes (a keeper of the client, such
//! as a node's upstream link, learns of it without sending a request).

mod negotiate;
mod tasks;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs, UnixStream};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::framed::read_parsed;
use crate::handshake;
use crate::request::RequestHeader;
use crate::server::tls::{ClientTls, TlsMode};
use crate::wire::{
    opt, rep, Command, Errno, ProtocolError, TransmissionFlags, CMD_FLAG_FUA, MAX_PAYLOAD,
};
use negotiate::{greet, host_of, negotiate};
use tasks::{read_replies, write_requests};

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Socket error.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The server broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// The server has no export of that name.
    #[error("the server has no export named {0:?}")]
    UnknownExport(String),
    /// The server refused an option with an error reply.
    #[error("the server refused option {option} with reply type {reply:#x}")]
    OptionRefused {
        /// Option code.
        option: u32,
        /// Error reply type.
        reply: u32,
    },
    /// The server answered the request with an NBD error value.
    #[error("the server answered {0}")]
    Server(Errno),
    /// The request cannot be sent to this export (unsupported command or flag, length
    /// above the maximum payload).
    #[error("request not supported by this export: {0}")]
    Unsupported(&'static str),
    /// The connection is closed.
    #[error("the connection is closed")]
    Disconnected,
    /// TLS is required and the server refused `NBD_OPT_STARTTLS`.
    #[error("TLS is required but the server refused NBD_OPT_STARTTLS (reply type {reply:#x})")]
    TlsRefused {
        /// The server's reply type.
        reply: u32,
    },
    /// The TLS handshake failed.
    #[error("TLS handshake failed: {0}")]
    Tls(io::Error),
}

type Reply = Result<Bytes, ClientError>;

struct Pending {
    done: oneshot::Sender<Reply>,
    read_len: u32,
    /// This request's place on the wire, given back when its slot is taken (the reply
    /// came, or the connection ended).
    _permit: OwnedSemaphorePermit,
}

struct Slot {
    generation: u32,
    pending: Option<Pending>,
}

#[derive(Default)]
struct Slots {
    slots: Vec<Slot>,
    free: Vec<u32>,
    closed: bool,
}

struct Shared {
    slots: Mutex<Slots>,
    permits: Arc<Semaphore>,
    /// Sent `true` when the connection has ended.
    ended: tokio::sync::watch::Sender<bool>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self, pending: Pending) -> Option<u64> {
        let mut s = self.lock();
        if s.closed {
            return None;
        }
        let idx = match s.free.pop() {
            Some(i) => i,
            None => {
                s.slots.push(Slot {
                    generation: 0,
                    pending: None,
                });
                (s.slots.len() - 1) as u32
            }
        };
        let slot = &mut s.slots[idx as usize];
        slot.pending = Some(pending);
        Some(((slot.generation as u64) << 32) | idx as u64)
    }

    fn take(&self, handle: u64) -> Option<Pending> {
        let mut s = self.lock();
        let idx = (handle & 0xffff_ffff) as usize;
        let slot = s.slots.get_mut(idx)?;
        if slot.generation != (handle >> 32) as u32 {
            return None;
        }
        let p = slot.pending.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        s.free.push(idx as u32);
        Some(p)
    }

    fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        for slot in &mut s.slots {
            if let Some(p) = slot.pending.take() {
                let _ = p.done.send(Err(ClientError::Disconnected));
            }
        }
        drop(s);
        self.ended.send_replace(true);
    }
}

struct Outgoing {
    header: RequestHeader,
    payload: Option<Bytes>,
}

/// A request on the wire whose reply has not been awaited yet ([`NbdClient::start_read`]
/// and the other `start_*` methods): [`InFlight::reply`] waits for it. Dropping it
/// abandons the reply (the request still completes on the server, and its slot is freed
/// when the reply arrives).
#[must_use = "the reply is lost unless awaited with `reply`"]
pub struct InFlight {
    rx: oneshot::Receiver<Reply>,
}

impl InFlight {
    /// Waits for the reply: the data of a read, empty for the other commands.
    pub async fn reply(self) -> Result<Bytes, ClientError> {
        self.rx.await.map_err(|_| ClientError::Disconnected)?
    }
}

/// A connected, pipelined NBD client. Share it by reference or `Arc` between tasks.
pub struct NbdClient {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Outgoing>,
    /// Set by `disconnect`; later requests fail at once.
    closed: AtomicBool,
    reader: Mutex<Option<JoinHandle<()>>>,
    size: u64,
    flags: TransmissionFlags,
}

/// Most requests a client has on the wire at once; more wait for a reply to free a place.
pub const MAX_IN_FLIGHT: usize = 128;

impl NbdClient {
    /// Connect over TCP and open `export`.
    pub async fn connect(addr: impl ToSocketAddrs, export: &str) -> Result<Self, ClientError> {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let (r, w) = s.into_split();
        Self::handshake(r, w, export).await
    }

    /// Connect over TCP to `addr` (`host:port`) and open `export`, upgrading to TLS first
    /// as `tls` says (see the module docs); the server must prove it is `host`.
    pub async fn connect_tls(
        addr: &str,
        export: &str,
        tls: &ClientTls,
    ) -> Result<Self, ClientError> {
        let mut s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let (fixed, no_zeroes) = {
            let (mut r, mut w) = s.split();
            greet(&mut r, &mut w, &mut buf).await?
        };
        if tls.mode == TlsMode::Off {
            let (r, w) = s.into_split();
            return Self::open(r, w, buf, export, fixed, no_zeroes).await;
        }
        let mut out = Vec::new();
        handshake::encode_option(&mut out, opt::STARTTLS, &[]);
        s.write_all(&out).await?;
        s.flush().await?;
        let eof = || ClientError::Io(io::ErrorKind::UnexpectedEof.into());
        let (reply, used) = read_parsed(&mut s, &mut buf, handshake::parse_option_reply)
            .await?
            .ok_or_else(eof)?;
        buf.advance(used);
        if reply.reply_type != rep::ACK {
            if tls.mode == TlsMode::Required {
                return Err(ClientError::TlsRefused {
                    reply: reply.reply_type,
                });
            }
            let (r, w) = s.into_split();
            return Self::open(r, w, buf, export, fixed, no_zeroes).await;
        }
        if !buf.is_empty() {
            return Err(ClientError::Protocol(ProtocolError::Malformed(
                "bytes after the STARTTLS acknowledgement, before TLS",
            )));
        }
        let host = host_of(addr);
        let secured = tls.connect(host, s).await.map_err(ClientError::Tls)?;
        let (r, w) = tokio::io::split(secured);
        Self::open(r, w, buf, export, fixed, no_zeroes).await
    }

    /// Connect over a Unix-domain socket and open `export`.
    pub async fn connect_unix(path: impl AsRef<Path>, export: &str) -> Result<Self, ClientError> {
        let (r, w) = UnixStream::connect(path).await?.into_split();
        Self::handshake(r, w, export).await
    }

    /// Run the handshake on an already connected stream, then start the reader and
    /// writer tasks.
    pub async fn handshake<R, W>(mut r: R, mut w: W, export: &str) -> Result<Self, ClientError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let (fixed, no_zeroes) = greet(&mut r, &mut w, &mut buf).await?;
        Self::open(r, w, buf, export, fixed, no_zeroes).await
    }

    /// Open `export` (after the greeting), then start the reader and writer tasks.
    async fn open<R, W>(
        mut r: R,
        mut w: W,
        mut buf: BytesMut,
        export: &str,
        fixed: bool,
        no_zeroes: bool,
    ) -> Result<Self, ClientError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (size, flags) = negotiate(&mut r, &mut w, &mut buf, export, fixed, no_zeroes).await?;
        let shared = Arc::new(Shared {
            slots: Mutex::new(Slots::default()),
            permits: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            ended: tokio::sync::watch::channel(false).0,
        });
        let (tx, rx) = mpsc::channel(MAX_IN_FLIGHT);
        tokio::spawn(write_requests(w, rx));
        let reader = tokio::spawn(read_replies(r, buf, shared.clone()));
        Ok(NbdClient {
            shared,
            tx,
            closed: AtomicBool::new(false),
            reader: Mutex::new(Some(reader)),
            size,
            flags,
        })
    }

    /// Completes when the connection has ended (the server closed it, the socket failed,
    /// or after [`NbdClient::disconnect`]): a caller that keeps a client can notice a lost
    /// server without sending a request.
    /// The future holds no reference to the client.
    pub fn closed(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shared.ended.subscribe();
        async move {
            let _ = rx.wait_for(|ended| *ended).await;
        }
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        *self.shared.ended.borrow()
    }

    /// Export size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Transmission flags the server sent.
    pub fn flags(&self) -> TransmissionFlags {
        self.flags
    }

    /// Read `len` bytes at `offset`.
    pub async fn read(&self, offset: u64, len: u32) -> Result<Bytes, ClientError> {
        self.start_read(offset, len).await?.reply().await
    }

    /// Sends a read of `len` bytes at `offset` and returns without waiting for its reply
    /// (it waits only for a place on the wire when [`MAX_IN_FLIGHT`] requests are out).
    pub async fn start_read(&self, offset: u64, len: u32) -> Result<InFlight, ClientError> {
        if len > MAX_PAYLOAD {
            return Err(ClientError::Unsupported(
                "read longer than the maximum payload",
            ));
        }
        self.send(Command::Read, 0, offset, len, None).await
    }

    /// Reads every `(offset, len)` of `ranges`: all are sent before the first reply is
    /// awaited, so they are served concurrently, in one round trip when the server
    /// allows. The results are in the order of `ranges`; one failed read fails only its
    /// own entry.
    pub async fn read_many(&self, ranges: &[(u64, u32)]) -> Vec<Result<Bytes, ClientError>> {
        let mut sent = Vec::with_capacity(ranges.len());
        for &(offset, len) in ranges {
            sent.push(self.start_read(offset, len).await);
        }
        let mut out = Vec::with_capacity(sent.len());
        for s in sent {
            out.push(match s {
                Ok(r) => r.reply().await,
                Err(e) => Err(e),
            });
        }
        out
    }

    /// Write `data` at `offset`; with `fua`, the reply waits until the data is durable.
    pub async fn write(
        &self,
        offset: u64,
        data: impl Into<Bytes>,
        fua: bool,
    ) -> Result<(), ClientError> {
        self.start_write(offset, data, fua)
            .await?
            .reply()
            .await
            .map(drop)
    }

    /// Sends a write of `data` at `offset` (see [`NbdClient::write`]) and returns without
    /// waiting for its reply.
    pub async fn start_write(
        &self,
        offset: u64,
        data: impl Into<Bytes>,
        fua: bool,
    ) -> Result<InFlight, ClientError> {
        let data = data.into();
        if data.len() > MAX_PAYLOAD as usize {
            return Err(ClientError::Unsupported(
                "write longer than the maximum payload",
            ));
        }
        let flags = self.fua_flag(fua)?;
        let len = data.len() as u32;
        self.send(Command::Write, flags, offset, len, Some(data))
            .await
    }

    /// Make every completed write durable.
    pub async fn flush(&self) -> Result<(), ClientError> {
        self.need(TransmissionFlags::SEND_FLUSH, "flush")?;
        self.request(Command::Flush, 0, 0, 0, None).await.map(drop)
    }

    /// Discard `len` bytes at `offset`.
    pub async fn trim(&self, offset: u64, len: u32) -> Result<(), ClientError> {
        self.need(TransmissionFlags::SEND_TRIM, "trim")?;
        self.request(Command::Trim, 0, offset, len, None)
            .await
            .map(drop)
    }

    /// Zero `len` bytes at `offset`.
    pub async fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> Result<(), ClientError> {
        self.need(TransmissionFlags::SEND_WRITE_ZEROES, "write zeroes")?;
        let flags = self.fua_flag(fua)?;
        self.request(Command::WriteZeroes, flags, offset, len, None)
            .await
            .map(drop)
    }

    /// Send `NBD_CMD_DISC` and wait until the server has answered every request already
    /// sent and closed the connection.
    pub async fn disconnect(&self) -> Result<(), ClientError> {
        if !self.closed.swap(true, Ordering::AcqRel) {
            let header = RequestHeader {
                flags: 0,
                command: Command::Disconnect,
                handle: 0,
                offset: 0,
                length: 0,
            };
            let _ = self
                .tx
                .send(Outgoing {
                    header,
                    payload: None,
                })
                .await;
        }
        let reader = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(reader) = reader {
            let _ = reader.await;
        }
        Ok(())
    }

    fn need(&self, bit: u16, what: &'static str) -> Result<(), ClientError> {
        if self.flags.has(bit) {
            Ok(())
        } else {
            Err(ClientError::Unsupported(what))
        }
    }

    fn fua_flag(&self, fua: bool) -> Result<u16, ClientError> {
        if !fua {
            return Ok(0);
        }
        self.need(TransmissionFlags::SEND_FUA, "FUA")?;
        Ok(CMD_FLAG_FUA)
    }

    async fn request(
        &self,
        command: Command,
        flags: u16,
        offset: u64,
        length: u32,
        payload: Option<Bytes>,
    ) -> Result<Bytes, ClientError> {
        self.send(command, flags, offset, length, payload)
            .await?
            .reply()
            .await
    }

    /// Queues one request for the writer task and returns its reply's receiver.
    async fn send(
        &self,
        command: Command,
        flags: u16,
        offset: u64,
        length: u32,
        payload: Option<Bytes>,
    ) -> Result<InFlight, ClientError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ClientError::Disconnected);
        }
        let permit = self
            .shared
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ClientError::Disconnected)?;
        // Reserve channel space before taking a slot: if this future is dropped while
        // waiting, no slot is left behind, and once reserved the send cannot block.
        let send = self
            .tx
            .reserve()
            .await
            .map_err(|_| ClientError::Disconnected)?;
        let (done, rx) = oneshot::channel();
        let read_len = if command == Command::Read { length } else { 0 };
        let handle = self
            .shared
            .register(Pending {
                done,
                read_len,
                _permit: permit,
            })
            .ok_or(ClientError::Disconnected)?;
        let header = RequestHeader {
            flags,
            command,
            handle,
            offset,
            length,
        };
        send.send(Outgoing { header, payload });
        Ok(InFlight { rx })
    }
}
