//! The server's side of fixed newstyle negotiation, over a real stream.
//!
//! Drives the pure functions of [`crate::handshake`]: send the greeting (offering
//! `FIXED_NEWSTYLE | NO_ZEROES`), read the client flags, then answer options until one
//! ends negotiation:
//!
//! | option | answer |
//! |---|---|
//! | `EXPORT_NAME` | size, flags (and zeroes) then transmission; unknown name, or a client its allow-list refuses, closes |
//! | `GO` / `INFO` | `REP_INFO(EXPORT)`, `REP_INFO(BLOCK_SIZE)` if asked, `ACK`; `GO` then enters transmission; unknown name → `ERR_UNKNOWN`; client refused by the export's allow-list → `ERR_POLICY` |
//! | `LIST` | one `REP_SERVER` per export the client may open (its allow-list admits it), `ACK` |
//! | `ABORT` | `ACK`, close |
//! | `STARTTLS` | TLS off → `ERR_UNSUP`; already in TLS → `ERR_INVALID`; else `ACK`, and the caller runs the TLS handshake and negotiates again inside it (see `tls`) |
//! | TLS required, not yet in TLS | `ERR_TLS_REQD` to everything but `STARTTLS` and `ABORT`; `EXPORT_NAME` closes |
//! | `STRUCTURED_REPLY` | `ACK`: structured replies from now on (data carried: `ERR_INVALID`) |
//! | `LIST_META_CONTEXT` | before structured replies → `ERR_INVALID`; unknown export → `ERR_UNKNOWN` (`ERR_POLICY` if refused); else `REP_META_CONTEXT(0, "base:allocation")` when no query is given or one is `base:` or `base:allocation`, then `ACK` |
//! | `SET_META_CONTEXT` | clears the selection first; before structured replies → `ERR_INVALID`; unknown export as above; else `REP_META_CONTEXT(1, "base:allocation")` if a query names it, then `ACK`. Block status is allowed in transmission only if the last selection named the export entered |
//! | anything else | `ERR_UNSUP` |
//! | bad option body | `ERR_INVALID` |
//!
//! Bad client flags, bad option magic or oversize options close the connection, as the
//! protocol allows; everything else keeps negotiating. A TLS upgrade forgets structured
//! replies and the selected context, as the protocol asks (the client negotiates them
//! again inside TLS).

use std::io;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::framed::read_parsed;
use crate::handshake::{self, ClientOption};
use crate::reply::ReplyMode;
use crate::server::export::{Export, ExportProvider};
use crate::server::tls::TlsMode;
use crate::wire::{
    info, opt, rep, BASE_ALLOCATION, BASE_ALLOCATION_ID, CLIENT_FLAG_NO_ZEROES,
    HS_FLAG_FIXED_NEWSTYLE, HS_FLAG_NO_ZEROES, MAX_PAYLOAD, PREFERRED_BLOCK,
};

const HANDSHAKE_FLAGS: u16 = HS_FLAG_FIXED_NEWSTYLE | HS_FLAG_NO_ZEROES;

/// Where a connection's negotiation stands across a TLS upgrade.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The server's TLS mode.
    pub(crate) tls: TlsMode,
    /// TLS is established: no greeting is sent again and `STARTTLS` is invalid.
    pub(crate) secured: bool,
    /// The client asked for `NBD_FLAG_C_NO_ZEROES`.
    pub(crate) no_zeroes: bool,
    /// Structured replies were negotiated.
    pub(crate) structured: bool,
    /// The export name `base:allocation` was last selected for, if any.
    pub(crate) meta: Option<String>,
}

impl Session {
    /// A session before negotiation on a server with TLS mode `tls`.
    pub(crate) fn new(tls: TlsMode) -> Self {
        Session {
            tls,
            secured: false,
            no_zeroes: false,
            structured: false,
            meta: None,
        }
    }

    /// How replies are framed on export `name` once transmission starts.
    fn mode(&self, name: &str) -> ReplyMode {
        ReplyMode {
            structured: self.structured,
            block_status: self.structured && self.meta.as_deref() == Some(name),
        }
    }
}

/// How negotiation ended.
pub(crate) enum Negotiated {
    /// Enter transmission on this export, framing replies so.
    Enter(Arc<dyn Export>, ReplyMode),
    /// `NBD_OPT_STARTTLS` was acknowledged: run the TLS handshake, then negotiate again.
    StartTls,
    /// The client aborted or left, or was refused.
    Leave,
}

/// Run negotiation (from the greeting unless `session.secured`).
pub(crate) async fn negotiate<R, W>(
    r: &mut R,
    w: &mut W,
    buf: &mut BytesMut,
    exports: &dyn ExportProvider,
    peer: &str,
    session: &mut Session,
) -> io::Result<Negotiated>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut out = Vec::with_capacity(256);
    if !session.secured {
        handshake::encode_greeting(&mut out, HANDSHAKE_FLAGS);
        w.write_all(&out).await?;
        w.flush().await?;

        let Some((client_flags, used)) = read_parsed(r, buf, |b| {
            handshake::parse_client_flags(b, HANDSHAKE_FLAGS)
        })
        .await?
        else {
            return Ok(Negotiated::Leave);
        };
        buf.advance(used);
        session.no_zeroes = client_flags & CLIENT_FLAG_NO_ZEROES != 0;
    }
    let no_zeroes = session.no_zeroes;
    let tls_missing = session.tls == TlsMode::Required && !session.secured;

    loop {
        let Some((req, used)) = read_parsed(r, buf, handshake::parse_option).await? else {
            return Ok(Negotiated::Leave);
        };
        buf.advance(used);
        out.clear();
        let option = match req.decode() {
            Ok(o) => o,
            Err(e) => {
                tracing::debug!(%e, "invalid option");
                handshake::encode_option_reply(&mut out, req.code, rep::ERR_INVALID, &[]);
                w.write_all(&out).await?;
                w.flush().await?;
                continue;
            }
        };
        let mut enter = None;
        match option {
            ClientOption::StartTls => {
                let answer = match (session.tls, session.secured) {
                    (TlsMode::Off, _) => rep::ERR_UNSUP,
                    (_, true) => rep::ERR_INVALID,
                    _ => rep::ACK,
                };
                handshake::encode_option_reply(&mut out, opt::STARTTLS, answer, &[]);
                w.write_all(&out).await?;
                w.flush().await?;
                if answer == rep::ACK {
                    session.structured = false;
                    session.meta = None;
                    return Ok(Negotiated::StartTls);
                }
                continue;
            }
            ClientOption::Abort => {
                handshake::encode_option_reply(&mut out, opt::ABORT, rep::ACK, &[]);
                // The client may already have closed; a failed write changes nothing.
                let _ = w.write_all(&out).await;
                let _ = w.flush().await;
                return Ok(Negotiated::Leave);
            }
            ClientOption::ExportName(_) if tls_missing => {
                tracing::info!(
                    peer,
                    "NBD_OPT_EXPORT_NAME without TLS, which is required; closing"
                );
                return Ok(Negotiated::Leave);
            }
            _ if tls_missing => {
                tracing::debug!(
                    peer,
                    code = req.code,
                    "option before STARTTLS; TLS is required"
                );
                handshake::encode_option_reply(&mut out, req.code, rep::ERR_TLS_REQD, &[]);
            }
            ClientOption::ExportName(name) => {
                if !exports.admits(&name, peer) {
                    tracing::warn!(
                        peer,
                        export = name,
                        "client not in the export's allow-list; closing"
                    );
                    return Ok(Negotiated::Leave);
                }
                let Some(export) = exports.lookup_for(&name, peer) else {
                    tracing::debug!(name, "NBD_OPT_EXPORT_NAME for unknown export");
                    return Ok(Negotiated::Leave);
                };
                let flags = export.capabilities().transmission_flags();
                handshake::encode_export_name_reply(&mut out, export.size(), flags, no_zeroes);
                enter = Some((export, session.mode(&name)));
            }
            ClientOption::List => {
                // Only the exports this client may open: an allow-list that refuses it
                // hides the export's name too.
                for name in exports
                    .list()
                    .into_iter()
                    .filter(|n| exports.admits(n, peer))
                {
                    let body = handshake::rep_server(&name);
                    handshake::encode_option_reply(&mut out, opt::LIST, rep::SERVER, &body);
                }
                handshake::encode_option_reply(&mut out, opt::LIST, rep::ACK, &[]);
            }
            ClientOption::Info { go, name, requests } => {
                let code = if go { opt::GO } else { opt::INFO };
                if !exports.admits(&name, peer) {
                    tracing::warn!(
                        peer,
                        export = name,
                        "client not in the export's allow-list; refused"
                    );
                    handshake::encode_option_reply(&mut out, code, rep::ERR_POLICY, &[]);
                } else {
                    match exports.lookup_for(&name, peer) {
                        None => {
                            handshake::encode_option_reply(&mut out, code, rep::ERR_UNKNOWN, &[]);
                        }
                        Some(export) => {
                            let flags = export.capabilities().transmission_flags();
                            let body = handshake::info_export(export.size(), flags);
                            handshake::encode_option_reply(&mut out, code, rep::INFO, &body);
                            if requests.contains(&info::BLOCK_SIZE) {
                                let body =
                                    handshake::info_block_size(1, PREFERRED_BLOCK, MAX_PAYLOAD);
                                handshake::encode_option_reply(&mut out, code, rep::INFO, &body);
                            }
                            handshake::encode_option_reply(&mut out, code, rep::ACK, &[]);
                            if go {
                                enter = Some((export, session.mode(&name)));
                            }
                        }
                    }
                }
            }
            ClientOption::StructuredReply => {
                session.structured = true;
                handshake::encode_option_reply(&mut out, req.code, rep::ACK, &[]);
            }
            ClientOption::MetaContext { set, name, queries } => {
                if set {
                    session.meta = None;
                }
                let matches = |q: &String| q == BASE_ALLOCATION || (!set && q == "base:");
                let wanted = if set {
                    queries.iter().any(matches)
                } else {
                    queries.is_empty() || queries.iter().any(matches)
                };
                let answer = if !session.structured {
                    tracing::debug!(peer, "meta context option before structured replies");
                    rep::ERR_INVALID
                } else if !exports.admits(&name, peer) {
                    rep::ERR_POLICY
                } else if exports.lookup_for(&name, peer).is_none() {
                    rep::ERR_UNKNOWN
                } else {
                    if wanted {
                        let id = if set { BASE_ALLOCATION_ID } else { 0 };
                        let body = handshake::rep_meta_context(id, BASE_ALLOCATION);
                        handshake::encode_option_reply(
                            &mut out,
                            req.code,
                            rep::META_CONTEXT,
                            &body,
                        );
                        if set {
                            session.meta = Some(name);
                        }
                    }
                    rep::ACK
                };
                handshake::encode_option_reply(&mut out, req.code, answer, &[]);
            }
            ClientOption::Unknown(_) => {
                handshake::encode_option_reply(&mut out, req.code, rep::ERR_UNSUP, &[]);
            }
        }
        w.write_all(&out).await?;
        w.flush().await?;
        if let Some((e, mode)) = enter {
            return Ok(Negotiated::Enter(e, mode));
        }
    }
}
