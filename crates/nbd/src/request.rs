//! Transmission-phase requests: framing, encoding and validation against an export.
//!
//! Owns the 28-byte request header (`NBD_REQUEST_MAGIC`, command flags, type, handle,
//! offset, length) and the rule that a `NBD_CMD_WRITE` header is followed by `length`
//! payload bytes. [`parse_request`] frames one request from a byte buffer without I/O:
//! it reports [`Parse::Incomplete`] until the header *and* any write payload are buffered,
//! so the connection can then split the frame off its buffer without copying the payload.
//!
//! Two kinds of failure are kept apart. A broken stream (bad magic, a write payload larger
//! than [`MAX_PAYLOAD`] that cannot be skipped safely) is a [`ProtocolError`] and ends the
//! connection. A well-framed request that the export cannot honour (past the end, write to
//! a read-only export, unknown command or flag, unsupported command) is checked by
//! [`RequestHeader::check`] and answered with the NBD error value the protocol document's
//! "Error values" section prescribes; the connection goes on.

use bytes::BufMut;

use crate::wire::{
    be_u16, be_u32, be_u64, Command, Errno, Parse, ProtocolError, TransmissionFlags, CMD_FLAG_FUA,
    CMD_FLAG_NO_HOLE, CMD_FLAG_REQ_ONE, MAX_PAYLOAD, REQUEST_HEADER_LEN, REQUEST_MAGIC,
};

/// A decoded request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// Command flags (`NBD_CMD_FLAG_*`).
    pub flags: u16,
    /// Command type.
    pub command: Command,
    /// Opaque handle (cookie) echoed in the reply.
    pub handle: u64,
    /// Byte offset into the export.
    pub offset: u64,
    /// Length in bytes (payload length for writes).
    pub length: u32,
}

impl RequestHeader {
    /// Whether the request asks for force-unit-access.
    pub fn fua(&self) -> bool {
        self.flags & CMD_FLAG_FUA != 0
    }

    /// Bytes of payload that follow this header on the wire.
    pub fn payload_len(&self) -> usize {
        if self.command == Command::Write {
            self.length as usize
        } else {
            0
        }
    }

    /// Bytes of data the reply carries (the length of a read).
    pub fn read_len(&self) -> usize {
        if self.command == Command::Read {
            self.length as usize
        } else {
            0
        }
    }

    /// Check the request against an export of `size` bytes with transmission `flags`.
    ///
    /// Order of checks: unknown command, unsupported flag, unsupported command, read-only
    /// (`EPERM`), oversize read or zero-length block status (`EINVAL`), range past the end
    /// (`EINVAL` for read, trim and block status, `ENOSPC` for write and write-zeroes).
    /// Whether block status may be asked at all (a metadata context was selected) is the
    /// connection's business, not the header's.
    pub fn check(&self, size: u64, flags: TransmissionFlags) -> Result<(), Errno> {
        let mut allowed = 0;
        if flags.has(TransmissionFlags::SEND_FUA) {
            allowed |= CMD_FLAG_FUA;
        }
        let needs = match self.command {
            Command::Unknown(_) => return Err(Errno::Inval),
            Command::Read | Command::Disconnect => 0,
            Command::BlockStatus => {
                allowed |= CMD_FLAG_REQ_ONE;
                0
            }
            Command::Write => TransmissionFlags::HAS_FLAGS,
            Command::Flush => TransmissionFlags::SEND_FLUSH,
            Command::Trim => TransmissionFlags::SEND_TRIM,
            Command::WriteZeroes => {
                allowed |= CMD_FLAG_NO_HOLE;
                TransmissionFlags::SEND_WRITE_ZEROES
            }
        };
        if self.flags & !allowed != 0 || !flags.has(needs) {
            return Err(Errno::Inval);
        }
        let writes = matches!(
            self.command,
            Command::Write | Command::Trim | Command::WriteZeroes
        );
        if writes && flags.has(TransmissionFlags::READ_ONLY) {
            return Err(Errno::Perm);
        }
        if self.command == Command::Read && self.length > MAX_PAYLOAD {
            return Err(Errno::Inval);
        }
        if self.command == Command::BlockStatus && self.length == 0 {
            return Err(Errno::Inval);
        }
        let ranged = !matches!(self.command, Command::Flush | Command::Disconnect);
        let end = self.offset.checked_add(self.length as u64);
        if ranged && !matches!(end, Some(e) if e <= size) {
            return Err(match self.command {
                Command::Write | Command::WriteZeroes => Errno::NoSpc,
                _ => Errno::Inval,
            });
        }
        Ok(())
    }
}

/// Frame one request. `Done` covers the header plus, for writes, the payload.
pub fn parse_request(buf: &[u8]) -> Result<Parse<RequestHeader>, ProtocolError> {
    if buf.len() < REQUEST_HEADER_LEN {
        return Ok(Parse::Incomplete {
            needed: REQUEST_HEADER_LEN,
        });
    }
    let magic = be_u32(buf);
    if magic != REQUEST_MAGIC {
        return Err(ProtocolError::BadMagic {
            expected: REQUEST_MAGIC as u64,
            found: magic as u64,
        });
    }
    let header = RequestHeader {
        flags: be_u16(&buf[4..]),
        command: Command::from_code(be_u16(&buf[6..])),
        handle: be_u64(&buf[8..]),
        offset: be_u64(&buf[16..]),
        length: be_u32(&buf[24..]),
    };
    if header.command == Command::Write && header.length > MAX_PAYLOAD {
        return Err(ProtocolError::OversizeWrite {
            handle: header.handle,
            len: header.length,
        });
    }
    let total = REQUEST_HEADER_LEN + header.payload_len();
    if buf.len() < total {
        return Ok(Parse::Incomplete { needed: total });
    }
    Ok(Parse::Done(header, total))
}

/// Write a request header (the caller appends the payload of a write).
pub fn encode_request(buf: &mut impl BufMut, h: &RequestHeader) {
    buf.put_u32(REQUEST_MAGIC);
    buf.put_u16(h.flags);
    buf.put_u16(h.command.code());
    buf.put_u64(h.handle);
    buf.put_u64(h.offset);
    buf.put_u32(h.length);
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: TransmissionFlags = TransmissionFlags(
        TransmissionFlags::HAS_FLAGS
            | TransmissionFlags::SEND_FLUSH
            | TransmissionFlags::SEND_FUA
            | TransmissionFlags::SEND_TRIM
            | TransmissionFlags::SEND_WRITE_ZEROES,
    );

    fn hdr(command: Command, offset: u64, length: u32) -> RequestHeader {
        RequestHeader {
            flags: 0,
            command,
            handle: 7,
            offset,
            length,
        }
    }

    #[test]
    fn write_waits_for_payload() {
        let h = hdr(Command::Write, 4096, 10);
        let mut b = Vec::new();
        encode_request(&mut b, &h);
        assert_eq!(parse_request(&b).unwrap(), Parse::Incomplete { needed: 38 });
        b.extend_from_slice(&[1; 10]);
        assert_eq!(parse_request(&b).unwrap(), Parse::Done(h, 38));
    }

    #[test]
    fn bad_magic_and_oversize_write_are_fatal() {
        let mut b = Vec::new();
        encode_request(&mut b, &hdr(Command::Read, 0, 1));
        b[0] ^= 1;
        assert!(matches!(
            parse_request(&b),
            Err(ProtocolError::BadMagic { .. })
        ));
        let mut b = Vec::new();
        encode_request(&mut b, &hdr(Command::Write, 0, MAX_PAYLOAD + 1));
        assert_eq!(
            parse_request(&b),
            Err(ProtocolError::OversizeWrite {
                handle: 7,
                len: MAX_PAYLOAD + 1
            })
        );
    }

    #[test]
    fn check_maps_errors() {
        let size = 1 << 20;
        assert_eq!(hdr(Command::Read, size - 512, 512).check(size, ALL), Ok(()));
        assert_eq!(
            hdr(Command::Read, size - 511, 512).check(size, ALL),
            Err(Errno::Inval)
        );
        assert_eq!(
            hdr(Command::Trim, size, 1).check(size, ALL),
            Err(Errno::Inval)
        );
        assert_eq!(
            hdr(Command::Write, size, 1).check(size, ALL),
            Err(Errno::NoSpc)
        );
        assert_eq!(
            hdr(Command::WriteZeroes, u64::MAX, 2).check(size, ALL),
            Err(Errno::NoSpc)
        );
        let ro = TransmissionFlags(ALL.0 | TransmissionFlags::READ_ONLY);
        assert_eq!(hdr(Command::Write, 0, 1).check(size, ro), Err(Errno::Perm));
        assert_eq!(hdr(Command::Trim, 0, 1).check(size, ro), Err(Errno::Perm));
        assert_eq!(hdr(Command::Read, 0, 1).check(size, ro), Ok(()));
        assert_eq!(
            hdr(Command::Unknown(9), 0, 0).check(size, ALL),
            Err(Errno::Inval)
        );
        assert_eq!(
            hdr(Command::Read, 0, MAX_PAYLOAD + 1).check(u64::MAX, ALL),
            Err(Errno::Inval)
        );
        let plain = TransmissionFlags(TransmissionFlags::HAS_FLAGS);
        assert_eq!(
            hdr(Command::Flush, 0, 0).check(size, plain),
            Err(Errno::Inval)
        );
        let mut fua = hdr(Command::Write, 0, 1);
        fua.flags = CMD_FLAG_FUA;
        assert_eq!(fua.check(size, ALL), Ok(()));
        assert_eq!(fua.check(size, plain), Err(Errno::Inval));
        fua.flags = 1 << 4;
        assert_eq!(fua.check(size, ALL), Err(Errno::Inval));
        // Block status: REQ_ONE allowed, zero length and past the end refused.
        let mut bs = hdr(Command::BlockStatus, 0, 4096);
        assert_eq!(bs.check(size, plain), Ok(()));
        bs.flags = CMD_FLAG_REQ_ONE;
        assert_eq!(bs.check(size, ro), Ok(()));
        assert_eq!(
            hdr(Command::BlockStatus, 0, 0).check(size, ALL),
            Err(Errno::Inval)
        );
        assert_eq!(
            hdr(Command::BlockStatus, size - 4096, 4097).check(size, ALL),
            Err(Errno::Inval)
        );
        let mut read_one = hdr(Command::Read, 0, 1);
        read_one.flags = CMD_FLAG_REQ_ONE;
        assert_eq!(read_one.check(size, ALL), Err(Errno::Inval));
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(mut bytes in proptest::collection::vec(0u8..=255, 0..80), magic: bool) {
            if magic && bytes.len() >= 4 {
                bytes[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
            }
            if let Ok(Parse::Done(h, used)) = parse_request(&bytes) {
                proptest::prop_assert!(used <= bytes.len());
                let _ = h.check(1 << 20, ALL);
            }
        }
    }
}
