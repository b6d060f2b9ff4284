//! The handshake phase, both ends, as pure functions over byte buffers.
//!
//! Owns the framing and meaning of every message of *fixed newstyle* negotiation: the
//! server greeting (`NBDMAGIC`, `IHAVEOPT`, handshake flags), the client flags, option
//! requests (`IHAVEOPT`, code, length, data) and option replies (reply magic, option, type,
//! length, data), the reply to the old `NBD_OPT_EXPORT_NAME`, and the `NBD_REP_INFO` and
//! `NBD_REP_SERVER` bodies. It does no I/O: the server's negotiation loop
//! (`server::connection`) and the client's (`client`) feed it the bytes they have read, so
//! the whole phase can be tested and fuzzed byte by byte.
//!
//! Parsers return [`Parse::Incomplete`] when the buffer ends early (an ordinary outcome);
//! [`ProtocolError`] only when the stream can no longer be framed (bad magic, oversize
//! option). A well-framed option with a bad body decodes to [`OptionError`], which the
//! server answers with `NBD_REP_ERR_INVALID` and keeps negotiating.
//!
//! Follows the "Handshake" and "Values" sections of the NBD protocol document. Oldstyle
//! negotiation is not implemented; `NBD_OPT_STARTTLS` is decoded here and carried out by
//! the server (`server::tls`). `NBD_OPT_STRUCTURED_REPLY`, `NBD_OPT_LIST_META_CONTEXT`
//! and `NBD_OPT_SET_META_CONTEXT` are decoded here ([`ClientOption::MetaContext`],
//! [`encode_meta_context_request`], [`rep_meta_context`]); what the server answers is in
//! `server::negotiate`.

use bytes::BufMut;

use crate::wire::{
    be_u16, be_u32, be_u64, info, opt, Parse, ProtocolError, TransmissionFlags,
    CLIENT_FLAG_FIXED_NEWSTYLE, CLIENT_FLAG_NO_ZEROES, IHAVEOPT, MAX_NAME_LEN, MAX_OPTION_LEN,
    NBD_MAGIC, OPTION_HEADER_LEN, OPTION_REPLY_HEADER_LEN, OPTION_REPLY_MAGIC,
};

/// Length of the server greeting: two magics and the handshake flags.
pub const GREETING_LEN: usize = 18;

/// Write the server greeting with the given handshake flags.
pub fn encode_greeting(buf: &mut impl BufMut, handshake_flags: u16) {
    buf.put_u64(NBD_MAGIC);
    buf.put_u64(IHAVEOPT);
    buf.put_u16(handshake_flags);
}

/// Client side: parse the server greeting and return its handshake flags.
pub fn parse_greeting(buf: &[u8]) -> Result<Parse<u16>, ProtocolError> {
    if buf.len() < GREETING_LEN {
        return Ok(Parse::Incomplete {
            needed: GREETING_LEN,
        });
    }
    check_magic(NBD_MAGIC, be_u64(buf))?;
    check_magic(IHAVEOPT, be_u64(&buf[8..]))?;
    Ok(Parse::Done(be_u16(&buf[16..]), GREETING_LEN))
}

/// Server side: parse the client's 32-bit flags, rejecting bits the server did not offer.
pub fn parse_client_flags(buf: &[u8], handshake_flags: u16) -> Result<Parse<u32>, ProtocolError> {
    if buf.len() < 4 {
        return Ok(Parse::Incomplete { needed: 4 });
    }
    let flags = be_u32(buf);
    let mut allowed = CLIENT_FLAG_FIXED_NEWSTYLE;
    if handshake_flags & crate::wire::HS_FLAG_NO_ZEROES != 0 {
        allowed |= CLIENT_FLAG_NO_ZEROES;
    }
    if flags & !allowed != 0 {
        return Err(ProtocolError::BadClientFlags(flags));
    }
    Ok(Parse::Done(flags, 4))
}

/// An option request as framed on the wire: its code and its raw data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionRequest {
    /// Option code (`NBD_OPT_*`).
    pub code: u32,
    /// Option data (at most [`MAX_OPTION_LEN`] bytes).
    pub data: Vec<u8>,
}

/// Server side: frame one option request.
pub fn parse_option(buf: &[u8]) -> Result<Parse<OptionRequest>, ProtocolError> {
    if buf.len() < OPTION_HEADER_LEN {
        return Ok(Parse::Incomplete {
            needed: OPTION_HEADER_LEN,
        });
    }
    check_magic(IHAVEOPT, be_u64(buf))?;
    let code = be_u32(&buf[8..]);
    let len = be_u32(&buf[12..]);
    if len > MAX_OPTION_LEN {
        return Err(ProtocolError::TooLarge {
            what: "option data",
            len: len as u64,
            max: MAX_OPTION_LEN as u64,
        });
    }
    let total = OPTION_HEADER_LEN + len as usize;
    if buf.len() < total {
        return Ok(Parse::Incomplete { needed: total });
    }
    let data = buf[OPTION_HEADER_LEN..total].to_vec();
    Ok(Parse::Done(OptionRequest { code, data }, total))
}

/// Client side: write one option request.
pub fn encode_option(buf: &mut impl BufMut, code: u32, data: &[u8]) {
    buf.put_u64(IHAVEOPT);
    buf.put_u32(code);
    buf.put_u32(data.len() as u32);
    buf.put_slice(data);
}

/// Body of an `NBD_OPT_INFO` / `NBD_OPT_GO` request: export name and requested info types.
pub fn encode_info_request(name: &str, requests: &[u16]) -> Vec<u8> {
    let mut d = Vec::with_capacity(6 + name.len() + 2 * requests.len());
    d.put_u32(name.len() as u32);
    d.put_slice(name.as_bytes());
    d.put_u16(requests.len() as u16);
    for r in requests {
        d.put_u16(*r);
    }
    d
}

/// An option request whose body has been decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientOption {
    /// `NBD_OPT_EXPORT_NAME`: enter transmission on this export (no error path).
    ExportName(String),
    /// `NBD_OPT_ABORT`.
    Abort,
    /// `NBD_OPT_LIST`.
    List,
    /// `NBD_OPT_INFO` (`go == false`) or `NBD_OPT_GO` (`go == true`).
    Info {
        /// Whether transmission starts after a successful reply.
        go: bool,
        /// Export name ("" = default export).
        name: String,
        /// Requested `NBD_INFO_*` types.
        requests: Vec<u16>,
    },
    /// `NBD_OPT_STRUCTURED_REPLY`.
    StructuredReply,
    /// `NBD_OPT_STARTTLS`.
    StartTls,
    /// `NBD_OPT_LIST_META_CONTEXT` (`set == false`) or `NBD_OPT_SET_META_CONTEXT`.
    MetaContext {
        /// Whether this selects (`SET`) rather than lists.
        set: bool,
        /// Export name.
        name: String,
        /// Queries (`namespace:leaf`).
        queries: Vec<String>,
    },
    /// Any other option code (answered with `NBD_REP_ERR_UNSUP`).
    Unknown(u32),
}

/// A well-framed option whose body is invalid; answered with `NBD_REP_ERR_INVALID`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid option {code}: {reason}")]
pub struct OptionError {
    /// The option code.
    pub code: u32,
    /// What was wrong.
    pub reason: &'static str,
}

impl OptionRequest {
    /// Decode the option body.
    pub fn decode(&self) -> Result<ClientOption, OptionError> {
        let bad = |reason| OptionError {
            code: self.code,
            reason,
        };
        let d = &self.data[..];
        match self.code {
            opt::EXPORT_NAME => Ok(ClientOption::ExportName(name_from(d).map_err(bad)?)),
            opt::ABORT => Ok(ClientOption::Abort),
            opt::LIST if d.is_empty() => Ok(ClientOption::List),
            opt::LIST => Err(bad("NBD_OPT_LIST carries no data")),
            opt::STARTTLS if d.is_empty() => Ok(ClientOption::StartTls),
            opt::STARTTLS => Err(bad("NBD_OPT_STARTTLS carries no data")),
            opt::STRUCTURED_REPLY if d.is_empty() => Ok(ClientOption::StructuredReply),
            opt::STRUCTURED_REPLY => Err(bad("NBD_OPT_STRUCTURED_REPLY carries no data")),
            opt::LIST_META_CONTEXT | opt::SET_META_CONTEXT => {
                let (name, queries) = meta_context_from(d).map_err(bad)?;
                Ok(ClientOption::MetaContext {
                    set: self.code == opt::SET_META_CONTEXT,
                    name,
                    queries,
                })
            }
            opt::INFO | opt::GO => {
                if d.len() < 6 {
                    return Err(bad("info request shorter than 6 bytes"));
                }
                let name_len = be_u32(d) as usize;
                if name_len > d.len() - 6 {
                    return Err(bad("export name longer than the option"));
                }
                let name = name_from(&d[4..4 + name_len]).map_err(bad)?;
                let rest = &d[4 + name_len..];
                let n = be_u16(rest) as usize;
                if rest.len() != 2 + 2 * n {
                    return Err(bad("information request count does not match length"));
                }
                let requests = rest[2..].chunks_exact(2).map(be_u16).collect();
                Ok(ClientOption::Info {
                    go: self.code == opt::GO,
                    name,
                    requests,
                })
            }
            other => Ok(ClientOption::Unknown(other)),
        }
    }
}

/// Most queries one meta context option may carry.
const MAX_QUERIES: usize = 64;

fn meta_context_from(d: &[u8]) -> Result<(String, Vec<String>), &'static str> {
    // A length-prefixed string at the front of `d`, and what follows it.
    fn string(d: &[u8]) -> Result<(String, &[u8]), &'static str> {
        if d.len() < 4 {
            return Err("meta context option cut short");
        }
        let n = be_u32(d) as usize;
        if n > d.len() - 4 {
            return Err("string longer than the option");
        }
        Ok((name_from(&d[4..4 + n])?, &d[4 + n..]))
    }
    let (name, rest) = string(d)?;
    if rest.len() < 4 {
        return Err("meta context option without a query count");
    }
    let count = be_u32(rest) as usize;
    if count > MAX_QUERIES {
        return Err("too many meta context queries");
    }
    let mut rest = &rest[4..];
    let mut queries = Vec::with_capacity(count);
    for _ in 0..count {
        let (q, r) = string(rest)?;
        queries.push(q);
        rest = r;
    }
    if !rest.is_empty() {
        return Err("bytes after the last meta context query");
    }
    Ok((name, queries))
}

/// Body of an `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT` request.
pub fn encode_meta_context_request(name: &str, queries: &[&str]) -> Vec<u8> {
    let mut d = Vec::new();
    d.put_u32(name.len() as u32);
    d.put_slice(name.as_bytes());
    d.put_u32(queries.len() as u32);
    for q in queries {
        d.put_u32(q.len() as u32);
        d.put_slice(q.as_bytes());
    }
    d
}

/// Body of `NBD_REP_META_CONTEXT`: the context id, then its name (not length-prefixed).
pub fn rep_meta_context(id: u32, name: &str) -> Vec<u8> {
    let mut d = Vec::with_capacity(4 + name.len());
    d.put_u32(id);
    d.put_slice(name.as_bytes());
    d
}

fn name_from(bytes: &[u8]) -> Result<String, &'static str> {
    if bytes.len() > MAX_NAME_LEN {
        return Err("export name longer than 4096 bytes");
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| "export name is not UTF-8")
}

/// Server side: write one option reply.
pub fn encode_option_reply(buf: &mut impl BufMut, option: u32, reply_type: u32, data: &[u8]) {
    buf.put_u64(OPTION_REPLY_MAGIC);
    buf.put_u32(option);
    buf.put_u32(reply_type);
    buf.put_u32(data.len() as u32);
    buf.put_slice(data);
}

/// Body of `NBD_REP_INFO` / `NBD_INFO_EXPORT`.
pub fn info_export(size: u64, flags: TransmissionFlags) -> [u8; 12] {
    let mut d = [0u8; 12];
    d[..2].copy_from_slice(&info::EXPORT.to_be_bytes());
    d[2..10].copy_from_slice(&size.to_be_bytes());
    d[10..].copy_from_slice(&flags.0.to_be_bytes());
    d
}

/// Body of `NBD_REP_INFO` / `NBD_INFO_BLOCK_SIZE`.
pub fn info_block_size(minimum: u32, preferred: u32, maximum: u32) -> [u8; 14] {
    let mut d = [0u8; 14];
    d[..2].copy_from_slice(&info::BLOCK_SIZE.to_be_bytes());
    d[2..6].copy_from_slice(&minimum.to_be_bytes());
    d[6..10].copy_from_slice(&preferred.to_be_bytes());
    d[10..].copy_from_slice(&maximum.to_be_bytes());
    d
}

/// Body of `NBD_REP_SERVER`: the export name, length-prefixed.
pub fn rep_server(name: &str) -> Vec<u8> {
    let mut d = Vec::with_capacity(4 + name.len());
    d.put_u32(name.len() as u32);
    d.put_slice(name.as_bytes());
    d
}

/// Server side: the reply to `NBD_OPT_EXPORT_NAME` (size, flags, 124 zeroes unless the
/// client negotiated `NBD_FLAG_C_NO_ZEROES`).
pub fn encode_export_name_reply(
    buf: &mut impl BufMut,
    size: u64,
    flags: TransmissionFlags,
    no_zeroes: bool,
) {
    buf.put_u64(size);
    buf.put_u16(flags.0);
    if !no_zeroes {
        buf.put_bytes(0, 124);
    }
}

/// Client side: parse the reply to `NBD_OPT_EXPORT_NAME` into (size, flags).
pub fn parse_export_name_reply(
    buf: &[u8],
    no_zeroes: bool,
) -> Result<Parse<(u64, TransmissionFlags)>, ProtocolError> {
    let total = if no_zeroes { 10 } else { 134 };
    if buf.len() < total {
        return Ok(Parse::Incomplete { needed: total });
    }
    Ok(Parse::Done(
        (be_u64(buf), TransmissionFlags(be_u16(&buf[8..]))),
        total,
    ))
}

/// An option reply as framed on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionReply {
    /// The option this answers.
    pub option: u32,
    /// Reply type (`NBD_REP_*`).
    pub reply_type: u32,
    /// Reply data.
    pub data: Vec<u8>,
}

/// Client side: frame one option reply.
pub fn parse_option_reply(buf: &[u8]) -> Result<Parse<OptionReply>, ProtocolError> {
    if buf.len() < OPTION_REPLY_HEADER_LEN {
        return Ok(Parse::Incomplete {
            needed: OPTION_REPLY_HEADER_LEN,
        });
    }
    check_magic(OPTION_REPLY_MAGIC, be_u64(buf))?;
    let option = be_u32(&buf[8..]);
    let reply_type = be_u32(&buf[12..]);
    let len = be_u32(&buf[16..]);
    if len > MAX_OPTION_LEN {
        return Err(ProtocolError::TooLarge {
            what: "option reply",
            len: len as u64,
            max: MAX_OPTION_LEN as u64,
        });
    }
    let total = OPTION_REPLY_HEADER_LEN + len as usize;
    if buf.len() < total {
        return Ok(Parse::Incomplete { needed: total });
    }
    Ok(Parse::Done(
        OptionReply {
            option,
            reply_type,
            data: buf[OPTION_REPLY_HEADER_LEN..total].to_vec(),
        },
        total,
    ))
}

/// A decoded `NBD_REP_INFO` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfoItem {
    /// `NBD_INFO_EXPORT`.
    Export {
        /// Export size in bytes.
        size: u64,
        /// Transmission flags.
        flags: TransmissionFlags,
    },
    /// `NBD_INFO_BLOCK_SIZE`.
    BlockSize {
        /// Minimum block size.
        minimum: u32,
        /// Preferred block size.
        preferred: u32,
        /// Maximum payload.
        maximum: u32,
    },
    /// Any other information type (ignored by clients).
    Other(u16),
}

/// Decode the body of an `NBD_REP_INFO` reply.
pub fn parse_info(data: &[u8]) -> Result<InfoItem, ProtocolError> {
    if data.len() < 2 {
        return Err(ProtocolError::Malformed(
            "NBD_REP_INFO shorter than 2 bytes",
        ));
    }
    match be_u16(data) {
        info::EXPORT if data.len() == 12 => Ok(InfoItem::Export {
            size: be_u64(&data[2..]),
            flags: TransmissionFlags(be_u16(&data[10..])),
        }),
        info::BLOCK_SIZE if data.len() == 14 => Ok(InfoItem::BlockSize {
            minimum: be_u32(&data[2..]),
            preferred: be_u32(&data[6..]),
            maximum: be_u32(&data[10..]),
        }),
        info::EXPORT | info::BLOCK_SIZE => {
            Err(ProtocolError::Malformed("NBD_REP_INFO of the wrong length"))
        }
        other => Ok(InfoItem::Other(other)),
    }
}

fn check_magic(expected: u64, found: u64) -> Result<(), ProtocolError> {
    if expected == found {
        Ok(())
    } else {
        Err(ProtocolError::BadMagic { expected, found })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::HS_FLAG_FIXED_NEWSTYLE;

    #[test]
    fn greeting_round_trip_and_incomplete() {
        let mut b = Vec::new();
        encode_greeting(&mut b, 3);
        assert_eq!(&b[..8], b"NBDMAGIC");
        assert_eq!(&b[8..16], b"IHAVEOPT");
        for cut in 0..b.len() {
            assert_eq!(
                parse_greeting(&b[..cut]).unwrap(),
                Parse::Incomplete { needed: 18 }
            );
        }
        assert_eq!(parse_greeting(&b).unwrap(), Parse::Done(3, 18));
    }

    #[test]
    fn client_flags_reject_unoffered_bits() {
        let f = 3u32.to_be_bytes();
        assert!(parse_client_flags(&f, HS_FLAG_FIXED_NEWSTYLE).is_err());
        assert_eq!(parse_client_flags(&f, 3).unwrap(), Parse::Done(3, 4));
        assert!(parse_client_flags(&8u32.to_be_bytes(), 3).is_err());
    }

    #[test]
    fn go_option_round_trip() {
        let mut b = Vec::new();
        encode_option(&mut b, opt::GO, &encode_info_request("disk", &[3]));
        let Parse::Done(req, used) = parse_option(&b).unwrap() else {
            panic!("incomplete")
        };
        assert_eq!(used, b.len());
        assert_eq!(
            req.decode().unwrap(),
            ClientOption::Info {
                go: true,
                name: "disk".into(),
                requests: vec![3]
            }
        );
        assert!(matches!(
            parse_option(&b[..b.len() - 1]).unwrap(),
            Parse::Incomplete { needed } if needed == b.len()
        ));
    }

    #[test]
    fn malformed_info_is_invalid_not_fatal() {
        let req = OptionRequest {
            code: opt::INFO,
            data: vec![0, 0, 0, 9, b'a', 0, 0],
        };
        assert!(req.decode().is_err());
        let req = OptionRequest {
            code: opt::LIST,
            data: vec![1],
        };
        assert!(req.decode().is_err());
        let req = OptionRequest {
            code: 99,
            data: vec![],
        };
        assert_eq!(req.decode().unwrap(), ClientOption::Unknown(99));
    }

    #[test]
    fn meta_context_options_decode() {
        let body = encode_meta_context_request("disk", &["base:allocation", "qemu:dirty"]);
        let req = OptionRequest {
            code: opt::SET_META_CONTEXT,
            data: body.clone(),
        };
        assert_eq!(
            req.decode().unwrap(),
            ClientOption::MetaContext {
                set: true,
                name: "disk".into(),
                queries: vec!["base:allocation".into(), "qemu:dirty".into()]
            }
        );
        // Cut anywhere, or with a byte too many, it is invalid, never a panic.
        for cut in 0..body.len() {
            let req = OptionRequest {
                code: opt::LIST_META_CONTEXT,
                data: body[..cut].to_vec(),
            };
            assert!(req.decode().is_err(), "cut at {cut}");
        }
        let mut long = body;
        long.push(0);
        let req = OptionRequest {
            code: opt::LIST_META_CONTEXT,
            data: long,
        };
        assert!(req.decode().is_err());
        assert_eq!(rep_meta_context(1, "base:allocation")[..4], [0, 0, 0, 1]);
    }

    #[test]
    fn oversize_option_is_fatal() {
        let mut b = Vec::new();
        b.put_u64(IHAVEOPT);
        b.put_u32(opt::GO);
        b.put_u32(MAX_OPTION_LEN + 1);
        assert!(matches!(
            parse_option(&b),
            Err(ProtocolError::TooLarge { .. })
        ));
    }

    #[test]
    fn info_items_decode() {
        let e = info_export(1 << 30, TransmissionFlags(0x10d));
        assert_eq!(
            parse_info(&e).unwrap(),
            InfoItem::Export {
                size: 1 << 30,
                flags: TransmissionFlags(0x10d)
            }
        );
        let b = info_block_size(1, 4096, 1 << 25);
        assert_eq!(
            parse_info(&b).unwrap(),
            InfoItem::BlockSize {
                minimum: 1,
                preferred: 4096,
                maximum: 1 << 25
            }
        );
        assert!(parse_info(&e[..11]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn option_parser_never_panics(bytes in proptest::collection::vec(0u8..=255, 0..64)) {
            if let Ok(Parse::Done(req, used)) = parse_option(&bytes) {
                proptest::prop_assert!(used <= bytes.len());
                let _ = req.decode();
            }
            let _ = parse_option_reply(&bytes);
            let _ = parse_info(&bytes);
        }
    }
}
