//! Transmission-phase simple replies: encoding (server) and framing (client).
//!
//! Owns the 16-byte simple reply header (`NBD_SIMPLE_REPLY_MAGIC`, error, handle). A
//! successful `NBD_CMD_READ` reply is followed by exactly the requested number of bytes;
//! nothing else carries data. Because the header does not say whether data follows, only
//! the side that knows the pending request (the client's table of in-flight handles) can
//! frame the payload, so [`parse_simple_reply`] stops at the header.
//!
//! Structured replies are never negotiated by this implementation (the server refuses
//! `NBD_OPT_STRUCTURED_REPLY`, the client never asks), so a structured reply magic is a
//! protocol violation here.

use bytes::BufMut;

use crate::wire::{
    be_u32, be_u64, Errno, Parse, ProtocolError, SIMPLE_REPLY_HEADER_LEN, SIMPLE_REPLY_MAGIC,
};

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
}
