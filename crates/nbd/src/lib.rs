//! The NBD (Network Block Device) protocol for Lachesis: both ends.
//!
//! Tenants reach a level-1 cache node over NBD, and level-1 nodes reach level-2 nodes
//! over NBD (see `ARCHITECTURE.md`). This crate owns the protocol and nothing about
//! caching. It is layered like mini-redis, so each layer can be tested alone:
//!
//! | module | owns |
//! |---|---|
//! | [`wire`] | magics, flags, codes, error values, the [`wire::Parse`] outcome |
//! | [`handshake`] | fixed newstyle negotiation messages, pure parse/encode |
//! | [`request`] | transmission request framing and validation, pure |
//! | [`reply`] | simple replies and structured reply chunks, block status payloads, pure |
//! | [`server`] | [`Server::builder`], the one entry point; accept loop, negotiation I/O, connections (threaded with blocking sockets, or async), node-wide limits (bytes in flight, worker threads), command execution, the [`server::Export`] trait |
//! | [`client`] | the pipelined [`client::NbdClient`] |
//! | [`mem`], [`file`](mod@file) | two exports: sparse memory and a positional-I/O file |
//!
//! Parsers work on byte slices and never do I/O; an incomplete buffer is an ordinary
//! [`wire::Parse::Incomplete`], and malformed input is an error value, never a panic.
//! Follows the NBD protocol document of the reference implementation (`doc/proto.md`):
//! fixed newstyle negotiation with `NBD_OPT_GO`/`INFO`/`LIST`/`ABORT`/`EXPORT_NAME`, simple
//! replies, commands READ, WRITE (FUA), FLUSH, TRIM, WRITE_ZEROES and DISC. Structured
//! replies (`NBD_OPT_STRUCTURED_REPLY`: a read is one `OFFSET_DATA` chunk, an error an
//! `ERROR` chunk) and the `base:allocation` metadata context (`NBD_OPT_LIST_META_CONTEXT`,
//! `NBD_OPT_SET_META_CONTEXT`, `NBD_CMD_BLOCK_STATUS` answered from
//! [`server::Export::block_status`]) on the server side. TLS with `NBD_OPT_STARTTLS`
//! (`rustls`; off, optional or required) and per-export client allow-lists (CIDR). Not
//! implemented: oldstyle negotiation, other metadata contexts, reads split into data and
//! hole chunks, extended headers; the client asks for neither structured replies nor
//! block status. The client upgrades with `NBD_OPT_STARTTLS` when asked to
//! ([`NbdClient::connect_tls`], [`ClientTls`]).

pub mod client;
pub mod file;
mod framed;
pub mod handshake;
pub mod mem;
pub mod reply;
pub mod request;
pub mod server;
pub mod wire;

pub use client::{ClientError, NbdClient};
pub use file::FileExport;
pub use mem::MemExport;
pub use server::tls::{ClientTls, TlsError};
pub use server::{
    Capabilities, Export, ExportMap, ExportProvider, Limits, LimitsGauge, Listener, Server,
    ServerBuilder, ServerConfig, Tls, TlsMode, INLINE_READ_MAX,
};
pub use wire::{Errno, TransmissionFlags};
