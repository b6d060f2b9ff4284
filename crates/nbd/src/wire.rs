//! Wire constants and small value types of the NBD protocol.
//!
//! This module owns every number that appears on the wire: the magics, the handshake and
//! transmission flag bits, option and option-reply codes, information types, command codes,
//! command flags and the error values of the transmission phase. It has no behaviour beyond
//! converting between those numbers and Rust types; parsing of whole messages lives in
//! [`crate::handshake`], [`crate::request`] and [`crate::reply`].
//!
//! The values follow the NBD protocol document (`doc/proto.md` of the reference
//! implementation, "Values" section). All integers on the wire are big-endian.

/// `NBDMAGIC`, the first 8 bytes a server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: second greeting word of newstyle negotiation and the prefix of every option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic that opens every option reply of fixed newstyle negotiation.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic that opens every transmission-phase request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic that opens every simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of structured reply chunks (sent once the client negotiated
/// `NBD_OPT_STRUCTURED_REPLY`).
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;
/// Size of a structured reply chunk header (magic, flags, type, handle, length).
pub const STRUCTURED_REPLY_HEADER_LEN: usize = 20;

/// Size of a transmission request header.
pub const REQUEST_HEADER_LEN: usize = 28;
/// Size of a simple reply header.
pub const SIMPLE_REPLY_HEADER_LEN: usize = 16;
/// Size of an option request header (magic, option, length).
pub const OPTION_HEADER_LEN: usize = 16;
/// Size of an option reply header (magic, option, type, length).
pub const OPTION_REPLY_HEADER_LEN: usize = 20;

/// Largest READ or WRITE payload this implementation accepts (2^25, the protocol's
/// interoperable maximum). Larger reads get `EINVAL`; a larger write cannot be skipped
/// safely, so it gets `EINVAL` and the connection is closed.
pub const MAX_PAYLOAD: u32 = 1 << 25;
/// Largest option data accepted during negotiation; larger options end the session.
pub const MAX_OPTION_LEN: u32 = 64 * 1024;
/// Longest export name accepted (the protocol's string limit).
pub const MAX_NAME_LEN: usize = 4096;
/// Preferred block size advertised in `NBD_INFO_BLOCK_SIZE`.
pub const PREFERRED_BLOCK: u32 = 4096;

/// Handshake flag: server supports fixed newstyle.
pub const HS_FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: server can omit the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const HS_FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: client speaks fixed newstyle.
pub const CLIENT_FLAG_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: client does not want the 124 zero bytes.
pub const CLIENT_FLAG_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags of an export, the 16-bit field sent when entering transmission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TransmissionFlags(pub u16);

impl TransmissionFlags {
    /// Always set.
    pub const HAS_FLAGS: u16 = 1 << 0;
    /// Export is read-only.
    pub const READ_ONLY: u16 = 1 << 1;
    /// Server understands `NBD_CMD_FLUSH`.
    pub const SEND_FLUSH: u16 = 1 << 2;
    /// Server understands `NBD_CMD_FLAG_FUA`.
    pub const SEND_FUA: u16 = 1 << 3;
    /// Export behaves like a rotational disk.
    pub const ROTATIONAL: u16 = 1 << 4;
    /// Server understands `NBD_CMD_TRIM`.
    pub const SEND_TRIM: u16 = 1 << 5;
    /// Server understands `NBD_CMD_WRITE_ZEROES`.
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    /// Flush and FUA are visible across all connections to the export.
    pub const CAN_MULTI_CONN: u16 = 1 << 8;

    /// Whether every bit of `bit` is set.
    pub fn has(self, bit: u16) -> bool {
        self.0 & bit == bit
    }
}

/// Option codes a client sends during negotiation.
pub mod opt {
    /// Choose an export and end negotiation (no error reporting).
    pub const EXPORT_NAME: u32 = 1;
    /// Abort negotiation.
    pub const ABORT: u32 = 2;
    /// List exports.
    pub const LIST: u32 = 3;
    /// Upgrade to TLS.
    pub const STARTTLS: u32 = 5;
    /// Describe an export.
    pub const INFO: u32 = 6;
    /// Describe an export and enter transmission.
    pub const GO: u32 = 7;
    /// Ask for structured replies.
    pub const STRUCTURED_REPLY: u32 = 8;
    /// List the metadata contexts of an export.
    pub const LIST_META_CONTEXT: u32 = 9;
    /// Select the metadata contexts `NBD_CMD_BLOCK_STATUS` reports.
    pub const SET_META_CONTEXT: u32 = 10;
}

/// Option reply types sent by the server.
pub mod rep {
    /// Option accepted / list finished.
    pub const ACK: u32 = 1;
    /// One export of a `NBD_OPT_LIST` answer.
    pub const SERVER: u32 = 2;
    /// One information item of a `NBD_OPT_INFO` / `NBD_OPT_GO` answer.
    pub const INFO: u32 = 3;
    /// One metadata context of a `NBD_OPT_LIST_META_CONTEXT` / `SET_META_CONTEXT` answer.
    pub const META_CONTEXT: u32 = 4;
    /// Bit set on every error reply.
    pub const ERR_BIT: u32 = 1 << 31;
    /// Unknown option.
    pub const ERR_UNSUP: u32 = ERR_BIT | 1;
    /// Forbidden by policy.
    pub const ERR_POLICY: u32 = ERR_BIT | 2;
    /// Syntactically or semantically invalid option.
    pub const ERR_INVALID: u32 = ERR_BIT | 3;
    /// Unsupported on this platform.
    pub const ERR_PLATFORM: u32 = ERR_BIT | 4;
    /// TLS required.
    pub const ERR_TLS_REQD: u32 = ERR_BIT | 5;
    /// No such export.
    pub const ERR_UNKNOWN: u32 = ERR_BIT | 6;
    /// Server is shutting down.
    pub const ERR_SHUTDOWN: u32 = ERR_BIT | 7;
    /// Block size information must be requested.
    pub const ERR_BLOCK_SIZE_REQD: u32 = ERR_BIT | 8;
    /// Request or reply too large.
    pub const ERR_TOO_BIG: u32 = ERR_BIT | 9;
}

/// Information types inside `NBD_REP_INFO`.
pub mod info {
    /// Size and transmission flags (mandatory).
    pub const EXPORT: u16 = 0;
    /// Canonical name.
    pub const NAME: u16 = 1;
    /// Human-readable description.
    pub const DESCRIPTION: u16 = 2;
    /// Minimum, preferred and maximum block sizes.
    pub const BLOCK_SIZE: u16 = 3;
}

/// Command flag: force unit access (reply only once the data is durable).
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flag: `WRITE_ZEROES` must not punch a hole.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// Command flag: `BLOCK_STATUS` wants one extent only, no longer than the request.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

/// The one metadata context this implementation offers.
pub const BASE_ALLOCATION: &str = "base:allocation";
/// The id the server gives `base:allocation` in `NBD_REP_META_CONTEXT`.
pub const BASE_ALLOCATION_ID: u32 = 1;
/// `base:allocation` status flag: the extent is not allocated in the backend storage.
pub const STATE_HOLE: u32 = 1 << 0;
/// `base:allocation` status flag: the extent reads as zeroes.
pub const STATE_ZERO: u32 = 1 << 1;

/// Structured reply flag: the last chunk of a reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;

/// Structured reply chunk types.
pub mod reply_type {
    /// No payload; the final chunk of a successful reply.
    pub const NONE: u16 = 0;
    /// Data of a read: offset then bytes.
    pub const OFFSET_DATA: u16 = 1;
    /// A run of zeroes of a read: offset and length.
    pub const OFFSET_HOLE: u16 = 2;
    /// Block status descriptors of one metadata context.
    pub const BLOCK_STATUS: u16 = 5;
    /// An error: value, message length, message.
    pub const ERROR: u16 = (1 << 15) | 1;
    /// An error at an offset.
    pub const ERROR_OFFSET: u16 = (1 << 15) | 2;
}

/// A transmission-phase command type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// `NBD_CMD_READ` (0).
    Read,
    /// `NBD_CMD_WRITE` (1); carries a payload.
    Write,
    /// `NBD_CMD_DISC` (2); no reply.
    Disconnect,
    /// `NBD_CMD_FLUSH` (3).
    Flush,
    /// `NBD_CMD_TRIM` (4).
    Trim,
    /// `NBD_CMD_WRITE_ZEROES` (6).
    WriteZeroes,
    /// `NBD_CMD_BLOCK_STATUS` (7); answered with a structured reply.
    BlockStatus,
    /// Any other code; answered with `EINVAL`.
    Unknown(u16),
}

impl Command {
    /// Decode a wire command code.
    pub fn from_code(code: u16) -> Self {
        match code {
            0 => Command::Read,
            1 => Command::Write,
            2 => Command::Disconnect,
            3 => Command::Flush,
            4 => Command::Trim,
            6 => Command::WriteZeroes,
            7 => Command::BlockStatus,
            other => Command::Unknown(other),
        }
    }

    /// The wire command code.
    pub fn code(self) -> u16 {
        match self {
            Command::Read => 0,
            Command::Write => 1,
            Command::Disconnect => 2,
            Command::Flush => 3,
            Command::Trim => 4,
            Command::WriteZeroes => 6,
            Command::BlockStatus => 7,
            Command::Unknown(c) => c,
        }
    }
}

/// Error values of the transmission phase (the `error` field of a reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Errno {
    /// `NBD_EPERM` (1): write to a read-only export.
    Perm,
    /// `NBD_EIO` (5): the backend failed.
    Io,
    /// `NBD_ENOMEM` (12).
    NoMem,
    /// `NBD_EINVAL` (22): bad request, out of range read or trim, unknown command or flag.
    Inval,
    /// `NBD_ENOSPC` (28): write past the end of the export.
    NoSpc,
    /// `NBD_EOVERFLOW` (75).
    Overflow,
    /// `NBD_ENOTSUP` (95).
    NotSup,
    /// `NBD_ESHUTDOWN` (108): server is shutting down.
    Shutdown,
    /// Any other value a server sent (clients treat it like `EINVAL`).
    Other(u32),
}

impl Errno {
    /// The wire value.
    pub fn code(self) -> u32 {
        match self {
            Errno::Perm => 1,
            Errno::Io => 5,
            Errno::NoMem => 12,
            Errno::Inval => 22,
            Errno::NoSpc => 28,
            Errno::Overflow => 75,
            Errno::NotSup => 95,
            Errno::Shutdown => 108,
            Errno::Other(c) => c,
        }
    }

    /// Decode a non-zero wire value.
    pub fn from_code(code: u32) -> Self {
        match code {
            1 => Errno::Perm,
            5 => Errno::Io,
            12 => Errno::NoMem,
            22 => Errno::Inval,
            28 => Errno::NoSpc,
            75 => Errno::Overflow,
            95 => Errno::NotSup,
            108 => Errno::Shutdown,
            c => Errno::Other(c),
        }
    }

    /// Map a backend I/O error to the closest NBD error value.
    pub fn from_io(err: &std::io::Error) -> Self {
        use std::io::ErrorKind;
        // EDQUOT (122) and EFBIG (27) map to ENOSPC, as the protocol asks; ENOSPC is 28.
        if let Some(28 | 27 | 122) = err.raw_os_error() {
            return Errno::NoSpc;
        }
        // ESHUTDOWN (108): the server is stopping.
        if err.raw_os_error() == Some(108) {
            return Errno::Shutdown;
        }
        match err.kind() {
            ErrorKind::PermissionDenied => Errno::Perm,
            ErrorKind::InvalidInput => Errno::Inval,
            ErrorKind::OutOfMemory => Errno::NoMem,
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge => {
                Errno::NoSpc
            }
            ErrorKind::Unsupported => Errno::NotSup,
            _ => Errno::Io,
        }
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Errno::Perm => "EPERM",
            Errno::Io => "EIO",
            Errno::NoMem => "ENOMEM",
            Errno::Inval => "EINVAL",
            Errno::NoSpc => "ENOSPC",
            Errno::Overflow => "EOVERFLOW",
            Errno::NotSup => "ENOTSUP",
            Errno::Shutdown => "ESHUTDOWN",
            Errno::Other(c) => return write!(f, "NBD error {c}"),
        };
        f.write_str(name)
    }
}

/// Result of running a parser over a byte buffer that may not hold a whole message yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse<T> {
    /// The buffer holds a whole message: the value and how many bytes it used.
    Done(T, usize),
    /// More bytes are needed; `needed` is the total buffer length that would let parsing
    /// make progress (a hint for reserving capacity).
    Incomplete {
        /// Total number of bytes the buffer must hold before trying again.
        needed: usize,
    },
}

/// A violation of the protocol that the receiver cannot recover from (the byte stream can
/// no longer be framed), so the connection must be closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// A magic number did not match.
    #[error("bad magic {found:#x}, expected {expected:#x}")]
    BadMagic {
        /// Value expected at this point.
        expected: u64,
        /// Value received.
        found: u64,
    },
    /// A write payload or option body is too large to accept.
    #[error("{what} of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Which field.
        what: &'static str,
        /// Declared length.
        len: u64,
        /// Accepted maximum.
        max: u64,
    },
    /// A write whose payload exceeds [`MAX_PAYLOAD`]; the server answers `EINVAL` to
    /// `handle` and closes, since skipping the payload would let a client stall it.
    #[error("write of {len} bytes exceeds the maximum payload")]
    OversizeWrite {
        /// Handle of the offending request.
        handle: u64,
        /// Declared length.
        len: u32,
    },
    /// Client flags with unknown bits.
    #[error("unknown client flags {0:#x}")]
    BadClientFlags(u32),
    /// Any other malformed message.
    #[error("malformed message: {0}")]
    Malformed(&'static str),
}

pub(crate) fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

pub(crate) fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

pub(crate) fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_codes_round_trip() {
        for code in 0..16u16 {
            assert_eq!(Command::from_code(code).code(), code);
        }
        assert_eq!(Command::from_code(6), Command::WriteZeroes);
        assert_eq!(Command::from_code(5), Command::Unknown(5));
        assert_eq!(Command::from_code(7), Command::BlockStatus);
    }

    #[test]
    fn errno_values_match_protocol() {
        assert_eq!(Errno::Perm.code(), 1);
        assert_eq!(Errno::Io.code(), 5);
        assert_eq!(Errno::Inval.code(), 22);
        assert_eq!(Errno::NoSpc.code(), 28);
        assert_eq!(Errno::Shutdown.code(), 108);
        for c in [1, 5, 12, 22, 28, 75, 95, 108, 7] {
            assert_eq!(Errno::from_code(c).code(), c);
        }
        let e = std::io::Error::from_raw_os_error(28);
        assert_eq!(Errno::from_io(&e), Errno::NoSpc);
        let e = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "ro");
        assert_eq!(Errno::from_io(&e), Errno::Perm);
        let e = std::io::Error::other("disk on fire");
        assert_eq!(Errno::from_io(&e), Errno::Io);
        let e = std::io::Error::from_raw_os_error(108);
        assert_eq!(Errno::from_io(&e), Errno::Shutdown);
    }
}
