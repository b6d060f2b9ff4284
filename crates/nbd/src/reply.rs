//! Transmission-phase replies: simple replies and structured reply chunks, encoding
//! (server) and framing (client and tests).
//!
//! Owns the 16-byte simple reply header (`NBD_SIMPLE_REPLY_MAGIC`, error, handle). A
//! successful `NBD_CMD_READ` simple reply is followed by exactly the requested number of
//! bytes; nothing else carries data. Because the header does not say whether data follows,
//! only the side that knows the pending request (the client's table of in-flight handles)
//! can frame the payload, so [`parse_simple_reply`] stops at the header.
//!
//! Once a client negotiated `NBD_OPT_STRUCTURED_REPLY` ([`ReplyMode::structured`]), the
//! server frames replies as [`ReplyHeader`] says: a read's data as one
//! `NBD_REPLY_TYPE_OFFSET_DATA` chunk flagged DONE (never split, never holes), a
//! zero-length read as `NBD_REPLY_TYPE_NONE`, block status as one
//! `NBD_REPLY_TYPE_BLOCK_STATUS` chunk ([`encode_block_status`]), every error as
//! `NBD_REPLY_TYPE_ERROR` without a message; other successes keep the simple reply, which
//! the protocol allows for replies without payload. The client of this crate never asks
//! for structured replies; [`parse_chunk_header`] frames chunks for tests and tools.

use bytes::BufMut;

use crate::request::RequestHeader;
use crate::wire::{
    be_u16, be_u32, be_u64, reply_type, Command, Errno, Parse, ProtocolError, REPLY_FLAG_DONE,
    SIMPLE_REPLY_HEADER_LEN, SIMPLE_REPLY_MAGIC, STRUCTURED_REPLY_HEADER_LEN,
    STRUCTURED_REPLY_MAGIC,
};

/// How a connection frames its replies, fixed when negotiation ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplyMode {
    /// The client negotiated `NBD_OPT_STRUCTURED_REPLY`.
    pub structured: bool,
    /// The client selected `base:allocation` for the export it entered, so it may send
    /// `NBD_CMD_BLOCK_STATUS` (only ever true with `structured`).
    pub block_status: bool,
}

/// Longest reply header: a structured `OFFSET_DATA` chunk header with its offset.
pub const REPLY_HEADER_MAX: usize = STRUCTURED_REPLY_HEADER_LEN + 8;

/// The bytes that open a reply, before its data (if any): a simple reply header or a
/// structured chunk header (with the offset of `OFFSET_DATA`, or the error value of
/// `ERROR`), as [`ReplyMode`] calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    buf: [u8; REPLY_HEADER_MAX],
    len: usize,
}

impl ReplyHeader {
    /// The header of a successful reply to `h` followed by `data_len` bytes (a read's
    /// data, or a block status payload from [`encode_block_status`]).
    pub fn success(mode: ReplyMode, h: &RequestHeader, data_len: usize) -> Self {
        let mut r = ReplyHeader {
            buf: [0; REPLY_HEADER_MAX],
            len: 0,
        };
        if !mode.structured {
            r.put(&simple_reply_bytes(h.handle, None));
            return r;
        }
        match h.command {
            Command::Read if data_len > 0 => {
                r.chunk(reply_type::OFFSET_DATA, h.handle, 8 + data_len as u32);
                r.put(&h.offset.to_be_bytes());
            }
            Command::Read => r.chunk(reply_type::NONE, h.handle, 0),
            Command::BlockStatus => r.chunk(reply_type::BLOCK_STATUS, h.handle, data_len as u32),
            _ => r.put(&simple_reply_bytes(h.handle, None)),
        }
        r
    }

    /// The header of a failed reply to `handle` (nothing follows it).
    pub fn error(mode: ReplyMode, handle: u64, e: Errno) -> Self {
        let mut r = ReplyHeader {
            buf: [0; REPLY_HEADER_MAX],
            len: 0,
        };
        if mode.structured {
            r.chunk(reply_type::ERROR, handle, 6);
            r.put(&e.code().to_be_bytes());
            r.put(&0u16.to_be_bytes());
        } else {
            r.put(&simple_reply_bytes(handle, Some(e)));
        }
        r
    }

    /// The header of a successful read of `len > 0` bytes in `mode`, without building it.
    pub fn read_len(mode: ReplyMode) -> usize {
        if mode.structured {
            REPLY_HEADER_MAX
        } else {
            SIMPLE_REPLY_HEADER_LEN
        }
    }

    /// The encoded bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn put(&mut self, b: &[u8]) {
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }

    fn chunk(&mut self, kind: u16, handle: u64, length: u32) {
        self.put(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
        self.put(&REPLY_FLAG_DONE.to_be_bytes());
        self.put(&kind.to_be_bytes());
        self.put(&handle.to_be_bytes());
        self.put(&length.to_be_bytes());
    }
}

/// One `base:allocation` block status descriptor: `length` bytes with status `flags`
/// ([`crate::wire::STATE_HOLE`], [`crate::wire::STATE_ZERO`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Bytes the status applies to (non-zero on the wire).
    pub length: u32,
    /// Status flags.
    pub flags: u32,
}

/// Most descriptors one block status reply carries; a client asks again from where the
/// reply stopped (the protocol lets a server answer less than the whole range).
pub const MAX_EXTENTS: usize = 8192;

/// The payload of an `NBD_REPLY_TYPE_BLOCK_STATUS` chunk for a request of `length` bytes:
/// context id, then descriptors. Extents are cleaned up on the way: empty ones dropped,
/// neighbours with equal flags merged, the total clipped to `length`, at most
/// [`MAX_EXTENTS`] (one with `req_one`). `None` when no extent is left (the export
/// described nothing).
pub fn encode_block_status(
    context: u32,
    extents: &[Extent],
    length: u32,
    req_one: bool,
) -> Option<Vec<u8>> {
    let mut out: Vec<Extent> = Vec::new();
    let mut left = length;
    for e in extents {
        let n = e.length.min(left);
        if n == 0 {
            continue;
        }
        left -= n;
        match out.last_mut() {
            Some(last) if last.flags == e.flags => last.length += n,
            _ => out.push(Extent {
                length: n,
                flags: e.flags,
            }),
        }
        if left == 0 {
            break;
        }
    }
    out.truncate(if req_one { 1 } else { MAX_EXTENTS });
    if out.is_empty() {
        return None;
    }
    let mut b = Vec::with_capacity(4 + 8 * out.len());
    b.put_u32(context);
    for e in out {
        b.put_u32(e.length);
        b.put_u32(e.flags);
    }
    Some(b)
}

/// A decoded structured reply chunk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Chunk flags (`NBD_REPLY_FLAG_DONE`).
    pub flags: u16,
    /// Chunk type (`NBD_REPLY_TYPE_*`).
    pub kind: u16,
    /// Handle of the request this answers.
    pub handle: u64,
    /// Payload bytes that follow.
    pub length: u32,
}

/// Frame one structured reply chunk header (the payload is the caller's business).
pub fn parse_chunk_header(buf: &[u8]) -> Result<Parse<ChunkHeader>, ProtocolError> {
    if buf.len() < STRUCTURED_REPLY_HEADER_LEN {
        return Ok(Parse::Incomplete {
            needed: STRUCTURED_REPLY_HEADER_LEN,
        });
    }
    let magic = be_u32(buf);
    if magic != STRUCTURED_REPLY_MAGIC {
        return Err(ProtocolError::BadMagic {
            expected: STRUCTURED_REPLY_MAGIC as u64,
            found: magic as u64,
        });
    }
    Ok(Parse::Done(
        ChunkHeader {
            flags: be_u16(&buf[4..]),
            kind: be_u16(&buf[6..]),
            handle: be_u64(&buf[8..]),
            length: be_u32(&buf[16..]),
        },
        STRUCTURED_REPLY_HEADER_LEN,
    ))
}

/// A decoded simple reply header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimpleReply {
    /// Handle of the request this answers.
    pub handle: u64,
    /// `None` on success, else the NBD error value.
    pub error: Option<Errno>,
}

/// Write a simple reply header; a successful read's data follows it.
pub fn encode_simple_reply(buf: &mut impl BufMut, handle: u64, error: Option<Errno>) {
    buf.put_u32(SIMPLE_REPLY_MAGIC);
    buf.put_u32(error.map_or(0, Errno::code));
    buf.put_u64(handle);
}

/// The header as a fixed array (for vectored writes without a buffer).
pub fn simple_reply_bytes(handle: u64, error: Option<Errno>) -> [u8; SIMPLE_REPLY_HEADER_LEN] {
    let mut b = [0u8; SIMPLE_REPLY_HEADER_LEN];
    b[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.map_or(0, Errno::code).to_be_bytes());
    b[8..].copy_from_slice(&handle.to_be_bytes());
    b
}

/// Frame one simple reply header (payload, if any, is the caller's business).
pub fn parse_simple_reply(buf: &[u8]) -> Result<Parse<SimpleReply>, ProtocolError> {
    if buf.len() < SIMPLE_REPLY_HEADER_LEN {
        return Ok(Parse::Incomplete {
            needed: SIMPLE_REPLY_HEADER_LEN,
        });
    }
    let magic = be_u32(buf);
    if magic != SIMPLE_REPLY_MAGIC {
        return Err(ProtocolError::BadMagic {
            expected: SIMPLE_REPLY_MAGIC as u64,
            found: magic as u64,
        });
    }
    let code = be_u32(&buf[4..]);
    let error = (code != 0).then(|| Errno::from_code(code));
    Ok(Parse::Done(
        SimpleReply {
            handle: be_u64(&buf[8..]),
            error,
        },
        SIMPLE_REPLY_HEADER_LEN,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = Vec::new();
        encode_simple_reply(&mut b, 0xdead_beef, Some(Errno::NoSpc));
        assert_eq!(
            &b[..],
            &simple_reply_bytes(0xdead_beef, Some(Errno::NoSpc))[..]
        );
        assert_eq!(&b[..8], &[0x67, 0x44, 0x66, 0x98, 0, 0, 0, 28]);
        assert_eq!(
            parse_simple_reply(&b).unwrap(),
            Parse::Done(
                SimpleReply {
                    handle: 0xdead_beef,
                    error: Some(Errno::NoSpc)
                },
                16
            )
        );
        assert_eq!(
            parse_simple_reply(&b[..15]).unwrap(),
            Parse::Incomplete { needed: 16 }
        );
        b[0] = 0x66;
        assert!(parse_simple_reply(&b).is_err());
    }

    fn req(command: Command, offset: u64, length: u32) -> RequestHeader {
        RequestHeader {
            flags: 0,
            command,
            handle: 9,
            offset,
            length,
        }
    }

    #[test]
    fn structured_headers() {
        let plain = ReplyMode::default();
        let st = ReplyMode {
            structured: true,
            block_status: true,
        };
        let r = req(Command::Read, 4096, 512);
        assert_eq!(
            ReplyHeader::success(plain, &r, 512).bytes(),
            &simple_reply_bytes(9, None)[..]
        );
        let h = ReplyHeader::success(st, &r, 512);
        assert_eq!(h.bytes().len(), ReplyHeader::read_len(st));
        let Parse::Done(c, 20) = parse_chunk_header(h.bytes()).unwrap() else {
            panic!("not a chunk")
        };
        assert_eq!(
            c,
            ChunkHeader {
                flags: REPLY_FLAG_DONE,
                kind: reply_type::OFFSET_DATA,
                handle: 9,
                length: 520
            }
        );
        assert_eq!(&h.bytes()[20..], &4096u64.to_be_bytes());
        // A write's success stays simple; errors become ERROR chunks.
        let w = ReplyHeader::success(st, &req(Command::Write, 0, 1), 0);
        assert_eq!(w.bytes(), &simple_reply_bytes(9, None)[..]);
        let e = ReplyHeader::error(st, 9, Errno::Inval);
        assert_eq!(e.bytes().len(), 26);
        let Parse::Done(c, _) = parse_chunk_header(e.bytes()).unwrap() else {
            panic!("not a chunk")
        };
        assert_eq!((c.kind, c.length), (reply_type::ERROR, 6));
        assert_eq!(&e.bytes()[20..], &[0, 0, 0, 22, 0, 0]);
        let z = ReplyHeader::success(st, &req(Command::Read, 0, 0), 0);
        assert_eq!(&z.bytes()[6..8], &reply_type::NONE.to_be_bytes());
    }

    #[test]
    fn block_status_payload_is_merged_and_clipped() {
        let e = |length, flags| Extent { length, flags };
        let b = encode_block_status(1, &[e(0, 0), e(512, 3), e(512, 3), e(4096, 0)], 2048, false)
            .unwrap();
        assert_eq!(
            b,
            [0, 0, 0, 1, 0, 0, 4, 0, 0, 0, 0, 3, 0, 0, 4, 0, 0, 0, 0, 0]
        );
        let one = encode_block_status(1, &[e(512, 3), e(512, 0)], 2048, true).unwrap();
        assert_eq!(one.len(), 12);
        assert_eq!(encode_block_status(1, &[e(0, 1)], 10, false), None);
    }
}
