//! The client's side of the negotiation: the greeting and client flags, then
//! `NBD_OPT_GO` (or `NBD_OPT_EXPORT_NAME`) for the export. See the [`super`] module doc.

use std::io;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::ClientError;
use crate::framed::read_parsed;
use crate::handshake::{self, InfoItem};
use crate::wire::{
    opt, rep, ProtocolError, TransmissionFlags, CLIENT_FLAG_FIXED_NEWSTYLE, CLIENT_FLAG_NO_ZEROES,
    HS_FLAG_FIXED_NEWSTYLE, HS_FLAG_NO_ZEROES,
};

/// The host part of `host:port` (`[v6]:port` included), for TLS.
pub(super) fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Read the greeting and send the client flags; returns (fixed newstyle, no zeroes).
pub(super) async fn greet<R, W>(
    r: &mut R,
    w: &mut W,
    buf: &mut BytesMut,
) -> Result<(bool, bool), ClientError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let eof = || ClientError::Io(io::ErrorKind::UnexpectedEof.into());
    let (hflags, used) = read_parsed(r, buf, handshake::parse_greeting)
        .await?
        .ok_or_else(eof)?;
    buf.advance(used);
    let fixed = hflags & HS_FLAG_FIXED_NEWSTYLE != 0;
    let no_zeroes = hflags & HS_FLAG_NO_ZEROES != 0;
    let mut cflags = 0;
    if fixed {
        cflags |= CLIENT_FLAG_FIXED_NEWSTYLE;
    }
    if no_zeroes {
        cflags |= CLIENT_FLAG_NO_ZEROES;
    }
    w.write_all(&cflags.to_be_bytes()).await?;
    w.flush().await?;
    Ok((fixed, no_zeroes))
}

/// Open `export` after the greeting: `NBD_OPT_GO`, else `NBD_OPT_EXPORT_NAME`.
pub(super) async fn negotiate<R, W>(
    r: &mut R,
    w: &mut W,
    buf: &mut BytesMut,
    export: &str,
    fixed: bool,
    no_zeroes: bool,
) -> Result<(u64, TransmissionFlags), ClientError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let eof = || ClientError::Io(io::ErrorKind::UnexpectedEof.into());
    let mut out = Vec::with_capacity(64 + export.len());
    if fixed {
        let body = handshake::encode_info_request(export, &[]);
        handshake::encode_option(&mut out, opt::GO, &body);
        w.write_all(&out).await?;
        w.flush().await?;
        let mut info = None;
        loop {
            let (reply, used) = read_parsed(r, buf, handshake::parse_option_reply)
                .await?
                .ok_or_else(eof)?;
            buf.advance(used);
            match reply.reply_type {
                rep::INFO => {
                    if let InfoItem::Export { size, flags } = handshake::parse_info(&reply.data)? {
                        info = Some((size, flags));
                    }
                }
                rep::ACK => {
                    return info.ok_or(ClientError::Protocol(ProtocolError::Malformed(
                        "NBD_OPT_GO acknowledged without NBD_INFO_EXPORT",
                    )));
                }
                rep::ERR_UNKNOWN => return Err(ClientError::UnknownExport(export.into())),
                rep::ERR_UNSUP => break,
                reply_type => {
                    return Err(ClientError::OptionRefused {
                        option: opt::GO,
                        reply: reply_type,
                    })
                }
            }
        }
        out.clear();
    }
    handshake::encode_option(&mut out, opt::EXPORT_NAME, export.as_bytes());
    w.write_all(&out).await?;
    w.flush().await?;
    match read_parsed(r, buf, |b| handshake::parse_export_name_reply(b, no_zeroes)).await {
        Ok(Some((v, used))) => {
            buf.advance(used);
            Ok(v)
        }
        // A server that does not know the export closes the connection.
        Ok(None) => Err(ClientError::UnknownExport(export.into())),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            Err(ClientError::UnknownExport(export.into()))
        }
        Err(e) => Err(e.into()),
    }
}
