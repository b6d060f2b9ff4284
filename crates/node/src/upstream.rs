//! Backends over upstream NBD exports: how a level-1 node reaches level-2 nodes.
//!
//! [`UpstreamBackend`] implements the cache's blocking [`cache::Backend`] over the `nbd`
//! crate's pipelined async client. The cache calls backends from tokio's blocking pool, so
//! each call blocks that thread on the runtime (`Handle::block_on`) while other requests
//! keep flowing through the same connection. Requests larger than the protocol's payload
//! limit are split. Several upstreams of one export are striped by
//! [`cache::StripedBackend`] on top. The connection may run over TLS
//! ([`UpstreamBackend::connect_tls`]; the export's `upstream_tls*` settings).

use bytes::Bytes;
use cache::Backend;
use nbd::NbdClient;
use std::io;
use tokio::runtime::Handle;

/// Largest request sent upstream (the NBD servers' usual payload limit).
const MAX_REQUEST: u64 = 32 << 20;

/// An upstream NBD export as a cache backend.
pub struct UpstreamBackend {
    client: NbdClient,
    handle: Handle,
    address: String,
}

fn io_err(e: nbd::ClientError) -> io::Error {
    match e {
        nbd::ClientError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

/// Splits `host:port/name` into the address and the export name.
pub fn parse_address(s: &str) -> Result<(String, String), String> {
    let s = s.strip_prefix("nbd://").unwrap_or(s);
    match s.split_once('/') {
        Some((addr, name)) if !addr.is_empty() => Ok((addr.to_string(), name.to_string())),
        _ => Err(format!("`{s}` is not `host:port/export`")),
    }
}

impl UpstreamBackend {
    /// Connects to `host:port/name`; called from within the runtime.
    pub async fn connect(address: &str) -> io::Result<Self> {
        Self::connect_tls(address, None).await
    }

    /// Connects to `host:port/name`, over TLS as `tls` says (see
    /// [`NbdClient::connect_tls`]); called from within the runtime.
    pub async fn connect_tls(address: &str, tls: Option<&nbd::ClientTls>) -> io::Result<Self> {
        let (addr, name) =
            parse_address(address).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let client = match tls {
            Some(tls) => NbdClient::connect_tls(&addr, &name, tls).await,
            None => NbdClient::connect(addr.as_str(), &name).await,
        }
        .map_err(|e| io::Error::other(format!("upstream {address}: {e}")))?;
        Ok(UpstreamBackend {
            client,
            handle: Handle::current(),
            address: address.to_string(),
        })
    }

    /// The upstream's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    fn chunks(offset: u64, len: u64) -> impl Iterator<Item = (u64, u64)> {
        (0..len.div_ceil(MAX_REQUEST)).map(move |i| {
            let start = i * MAX_REQUEST;
            (offset + start, (len - start).min(MAX_REQUEST))
        })
    }
}

impl UpstreamBackend {
    /// Blocks on `f`: directly on a blocking-pool thread, and through `block_in_place` on a
    /// runtime worker (the node runs cache misses under `block_in_place`).
    fn wait<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        tokio::task::block_in_place(|| self.handle.block_on(f))
    }
}

impl Backend for UpstreamBackend {
    fn size(&self) -> u64 {
        self.client.size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut at = 0usize;
        for (off, n) in Self::chunks(offset, buf.len() as u64) {
            let data = self.wait(self.client.read(off, n as u32)).map_err(io_err)?;
            buf[at..at + n as usize].copy_from_slice(&data);
            at += n as usize;
        }
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut at = 0usize;
        for (off, n) in Self::chunks(offset, data.len() as u64) {
            let part = Bytes::copy_from_slice(&data[at..at + n as usize]);
            self.wait(self.client.write(off, part, false))
                .map_err(io_err)?;
            at += n as usize;
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.wait(self.client.flush()).map_err(io_err)
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        // The cache's contract: a trimmed range reads back as zeros, so write zeroes
        // rather than a discard whose contents the protocol leaves unspecified.
        for (off, n) in Self::chunks(offset, len) {
            self.wait(self.client.write_zeroes(off, n as u32, false))
                .map_err(io_err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            parse_address("127.0.0.1:10811/demo").unwrap(),
            ("127.0.0.1:10811".into(), "demo".into())
        );
        assert_eq!(
            parse_address("nbd://h:1/").unwrap(),
            ("h:1".into(), "".into())
        );
        assert!(parse_address("nohost").is_err());
    }

    #[test]
    fn chunking() {
        let c: Vec<_> = UpstreamBackend::chunks(10, MAX_REQUEST * 2 + 5).collect();
        assert_eq!(
            c,
            vec![
                (10, MAX_REQUEST),
                (10 + MAX_REQUEST, MAX_REQUEST),
                (10 + 2 * MAX_REQUEST, 5)
            ]
        );
    }
}
