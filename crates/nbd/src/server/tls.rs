//! TLS for NBD: `NBD_OPT_STARTTLS` with `rustls`.
//!
//! Owns the server's TLS setting ([`TlsMode`]), its certificate and key ([`Tls`], read
//! from PEM files), the client's side ([`ClientTls`]: the CA it trusts and an optional
//! client certificate, used by [`crate::NbdClient::connect_tls`]) and the [`TlsError`]
//! naming what was wrong with them. The negotiation (`negotiate`) applies the mode:
//!
//! * `off`: `NBD_OPT_STARTTLS` is answered `NBD_REP_ERR_UNSUP`; everything runs in clear.
//! * `optional`: a client may upgrade with `NBD_OPT_STARTTLS` or go on in clear.
//! * `required`: before TLS, every option but `NBD_OPT_STARTTLS` and `NBD_OPT_ABORT` is
//!   answered `NBD_REP_ERR_TLS_REQD`, and `NBD_OPT_EXPORT_NAME` (which has no error reply)
//!   closes the connection; a client cannot reach an export, nor list them, in clear.
//!
//! After the server's `NBD_REP_ACK` to `NBD_OPT_STARTTLS` the TLS handshake runs on the
//! same socket and negotiation starts again inside TLS (without a new greeting, as the
//! protocol says). Bytes the client sent after `STARTTLS` but before the handshake would
//! be plaintext injected into the secured session, so such a connection is closed. A
//! second `STARTTLS` inside TLS gets `NBD_REP_ERR_INVALID`. A connection that negotiated
//! TLS runs its transmission phase on the async path (`connection`), which works on any
//! stream; the threaded path needs the bare socket.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Whether a server offers or insists on TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// No TLS (`NBD_OPT_STARTTLS` is unsupported).
    #[default]
    Off,
    /// Clients may upgrade with `NBD_OPT_STARTTLS`.
    Optional,
    /// Clients must upgrade before anything else.
    Required,
}

impl std::str::FromStr for TlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(TlsMode::Off),
            "optional" => Ok(TlsMode::Optional),
            "required" => Ok(TlsMode::Required),
            other => Err(format!(
                "`{other}` is not a TLS mode (off, optional or required)"
            )),
        }
    }
}

/// What was wrong with a certificate or key.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read, or an item of it is not PEM.
    #[error("{path}: {source}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// A file that must hold certificates holds none.
    #[error("{path}: no PEM certificate in the file")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A CA file's certificate cannot be a root of trust.
    #[error("{path}: not a usable CA certificate: {source}")]
    CaCertificate {
        /// The file.
        path: PathBuf,
        /// What rustls found wrong.
        #[source]
        source: rustls::Error,
    },
    /// rustls refused the certificate chain or key.
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// A server's TLS mode with its certificate and key.
#[derive(Clone)]
pub struct Tls {
    /// Off, optional or required.
    pub mode: TlsMode,
    /// The rustls server configuration (certificate chain and key).
    pub config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("mode", &self.mode).finish()
    }
}

impl Tls {
    /// `mode` with the certificate chain of `cert` and the private key of `key` (PEM).
    pub fn from_pem_files(mode: TlsMode, cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let certs = certificates_in(cert)?;
        let key_der = key_in(key)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key_der)?;
        Ok(Tls {
            mode,
            config: Arc::new(config),
        })
    }

    /// Accept the TLS handshake on `s`.
    pub(crate) async fn accept<S>(&self, s: S) -> io::Result<tokio_rustls::server::TlsStream<S>>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
            .accept(s)
            .await
    }
}

/// A client's TLS: the mode (optional: upgrade if the server offers it; required: refuse
/// to go on in clear), the CA certificates it trusts for the server and, optionally, a
/// certificate and key of its own.
#[derive(Clone)]
pub struct ClientTls {
    /// Optional or required (off: [`crate::NbdClient::connect_tls`] runs in clear).
    pub mode: TlsMode,
    /// The rustls client configuration.
    pub config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("mode", &self.mode)
            .finish()
    }
}

impl ClientTls {
    /// `mode`, trusting the CA certificates of `ca` (PEM), presenting `client` (a
    /// certificate chain and a key, PEM) if given.
    pub fn from_pem_files(
        mode: TlsMode,
        ca: &Path,
        client: Option<(&Path, &Path)>,
    ) -> Result<Self, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        for c in certificates_in(ca)? {
            roots.add(c).map_err(|source| TlsError::CaCertificate {
                path: ca.to_path_buf(),
                source,
            })?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
        let config = match client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                builder.with_client_auth_cert(certificates_in(cert)?, key_in(key)?)?
            }
        };
        Ok(ClientTls {
            mode,
            config: Arc::new(config),
        })
    }

    /// Run the TLS handshake on `s` with a server that must prove it is `host` (a DNS name
    /// or an IP address).
    pub(crate) async fn connect<S>(
        &self,
        host: &str,
        s: S,
    ) -> io::Result<tokio_rustls::client::TlsStream<S>>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{host}` is not a server name for TLS: {e}"),
            )
        })?;
        tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(name, s)
            .await
    }
}

/// The certificates of a PEM file, at least one.
fn certificates_in(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |source| TlsError::Pem {
        path: path.to_path_buf(),
        source,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The private key of a PEM file.
fn key_in(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|source| TlsError::Pem {
        path: path.to_path_buf(),
        source,
    })
}
