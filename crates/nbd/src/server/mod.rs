//! The NBD server: accept loop, connection cap and graceful shutdown.
//!
//! Layout (after mini-redis): this module accepts connections; `negotiate` runs the
//! handshake; `connection` runs the transmission phase of one connection (`admission`
//! decides, for both transmission paths, what happens to each framed request); `command`
//! executes one request against an [`Export`]; [`export`] defines what is served.
//!
//! * **Connection cap.** A semaphore of `max_connections` permits; a permit is taken
//!   *before* `accept`, so when the server is full new clients wait in the kernel's
//!   backlog instead of being accepted and starved.
//! * **Shutdown.** `serve` runs until the `shutdown` future completes. It then stops
//!   accepting, tells every connection through a `watch` channel, and returns only after
//!   each connection has answered every request it had already read (see
//!   `connection`). Connections still negotiating are closed.
//! * **Listeners.** TCP and Unix-domain sockets ([`Listener`]).
//! * **Two transmission paths.** Negotiation is always async. Afterwards, on a
//!   multi-threaded runtime, a connection gets an OS thread with blocking socket I/O
//!   (`threaded`: lowest latency per request, as nbdkit and qemu-nbd do); otherwise, or
//!   with [`ServerConfig::threaded`] off, it stays an async task (`connection`). Both obey
//!   the same admission, ordering and drain rules.
//! * **Negotiation timeout.** A client that has not finished negotiating within
//!   `handshake_timeout` is disconnected, so silent clients cannot hold slots forever.
//! * Accept errors (such as running out of file descriptors) are logged and retried after
//!   a short pause; they never end the server.

mod admission;
mod command;
mod connection;
pub mod export;
mod negotiate;
mod poll;
mod threaded;

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

pub use admission::INLINE_READ_MAX;
pub use export::{BoxFuture, Capabilities, Export, ExportMap, ExportProvider};

/// Limits of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerConfig {
    /// Most connections served at once (default 256).
    pub max_connections: usize,
    /// Most requests executing at once per connection (default 128).
    pub max_in_flight: usize,
    /// Longest a client may take to finish negotiation before it is disconnected, so a
    /// silent client cannot hold a connection slot forever (default 30 s).
    pub handshake_timeout: Duration,
    /// Run each connection's transmission phase on a thread of its own with blocking
    /// socket I/O (see `threaded`), when the runtime is multi-threaded (default true).
    /// Off, or on a current-thread runtime, connections are async tasks.
    pub threaded: bool,
    /// On the threaded path, how long a connection's reader polls its socket for the next
    /// request before blocking (adaptive, see `poll`; zero: never). Trades CPU for the
    /// wake-up latency of queue-depth-1 clients (default 100 µs).
    pub busy_poll: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: 256,
            max_in_flight: 128,
            handshake_timeout: Duration::from_secs(30),
            threaded: true,
            busy_poll: Duration::from_micros(100),
        }
    }
}

/// A socket the server accepts NBD clients on.
#[derive(Debug)]
pub enum Listener {
    /// TCP (the usual `nbd://host:port/name`).
    Tcp(TcpListener),
    /// Unix-domain socket (`nbd+unix:///name?socket=PATH`).
    Unix(UnixListener),
}

impl From<TcpListener> for Listener {
    fn from(l: TcpListener) -> Self {
        Listener::Tcp(l)
    }
}

impl From<UnixListener> for Listener {
    fn from(l: UnixListener) -> Self {
        Listener::Unix(l)
    }
}

/// Serve `exports` on `listener` with default limits until `shutdown` completes, then
/// drain in-flight requests and return.
pub async fn serve(
    listener: impl Into<Listener>,
    exports: Arc<dyn ExportProvider>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_with(listener, exports, ServerConfig::default(), shutdown).await
}

/// [`serve`] with explicit limits.
pub async fn serve_with(
    listener: impl Into<Listener>,
    exports: Arc<dyn ExportProvider>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let listener = listener.into();
    let (stop_tx, stop_rx) = watch::channel(false);
    let limit = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            _ = &mut shutdown => break,
            Some(done) = conns.join_next(), if !conns.is_empty() => log_end(done),
            accepted = accept(&listener, &limit) => match accepted {
                Ok((permit, conn)) => {
                    let exports = exports.clone();
                    let stop = stop_rx.clone();
                    conns.spawn(async move {
                        let res = conn.run(exports, config, stop).await;
                        drop(permit);
                        res
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    let _ = stop_tx.send(true);
    while let Some(done) = conns.join_next().await {
        log_end(done);
    }
    Ok(())
}

fn log_end(done: Result<io::Result<()>, tokio::task::JoinError>) {
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "connection ended with an error"),
        Err(e) => tracing::error!(error = %e, "connection task failed"),
    }
}

enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Accepted {
    async fn run(
        self,
        exports: Arc<dyn ExportProvider>,
        config: ServerConfig,
        stop: watch::Receiver<bool>,
    ) -> io::Result<()> {
        match self {
            Accepted::Tcp(s) => {
                s.set_nodelay(true)?;
                let peer = s
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|_| "tcp".into());
                serve_stream(s, exports, peer, config, stop).await
            }
            Accepted::Unix(s) => serve_stream(s, exports, "unix".into(), config, stop).await,
        }
    }
}

/// What the server needs of an accepted socket beyond async reading and writing.
trait Socket: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    type Read: AsyncRead + Unpin + Send + 'static;
    type Write: AsyncWrite + Unpin + Send + 'static;
    /// Owned halves for the async transmission path.
    fn halves(self) -> (Self::Read, Self::Write);
    /// The socket in blocking mode for the threaded path.
    fn blocking(self) -> io::Result<threaded::BlockingStream>;
}

impl Socket for tokio::net::TcpStream {
    type Read = tokio::net::tcp::OwnedReadHalf;
    type Write = tokio::net::tcp::OwnedWriteHalf;
    fn halves(self) -> (Self::Read, Self::Write) {
        self.into_split()
    }
    fn blocking(self) -> io::Result<threaded::BlockingStream> {
        let s = self.into_std()?;
        s.set_nonblocking(false)?;
        Ok(threaded::BlockingStream::Tcp(s))
    }
}

impl Socket for tokio::net::UnixStream {
    type Read = tokio::net::unix::OwnedReadHalf;
    type Write = tokio::net::unix::OwnedWriteHalf;
    fn halves(self) -> (Self::Read, Self::Write) {
        self.into_split()
    }
    fn blocking(self) -> io::Result<threaded::BlockingStream> {
        let s = self.into_std()?;
        s.set_nonblocking(false)?;
        Ok(threaded::BlockingStream::Unix(s))
    }
}

/// Negotiate on `s`, then run its transmission phase on the path the config and the
/// runtime call for.
async fn serve_stream<S: Socket>(
    mut s: S,
    exports: Arc<dyn ExportProvider>,
    peer: String,
    config: ServerConfig,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let negotiated = {
        let (mut r, mut w) = tokio::io::split(&mut s);
        connection::negotiation(&mut r, &mut w, exports.as_ref(), &peer, &config, &mut stop).await?
    };
    let Some((export, buf)) = negotiated else {
        return Ok(());
    };
    let threaded = config.threaded
        && tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread;
    if threaded {
        threaded::serve(s.blocking()?, buf, export, config, stop).await
    } else {
        let (r, w) = s.halves();
        connection::transmission(r, w, buf, export, config, stop).await
    }
}

async fn accept(
    listener: &Listener,
    limit: &Arc<Semaphore>,
) -> io::Result<(OwnedSemaphorePermit, Accepted)> {
    let permit = limit
        .clone()
        .acquire_owned()
        .await
        .expect("semaphore never closed");
    let conn = match listener {
        Listener::Tcp(l) => Accepted::Tcp(l.accept().await?.0),
        Listener::Unix(l) => Accepted::Unix(l.accept().await?.0),
    };
    Ok((permit, conn))
}
