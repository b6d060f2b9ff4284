//! The nbd crate's integration tests: the server spoken to byte by byte, through our
//! client and through real clients (qemu-io, qemu-img, nbdinfo, nbdcopy, fio), over TCP,
//! Unix sockets and TLS, and under hostile loads. One module per area, `common` for the
//! shared helpers.
//!
//! They are one test binary so the dependencies (tokio, rustls, ...) are linked and
//! monomorphised once, not once per file. Run one area with a filter on its module, e.g.
//! `cargo test -p nbd --test integration paths::`.

mod common;

mod block_status;
mod budget;
mod hostile_latency;
mod hostile_memory;
mod paths;
mod pipelining;
mod protocol;
mod real_clients;
mod roundtrip;
mod tls;
