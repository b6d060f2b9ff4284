//! The request model every part of Lachesis speaks: one block I/O request of one tenant's
//! volume, and its two views as cache keys.
//!
//! * **Object mode** (libCacheSim's `--ignore-obj-size`): the whole request is one object of
//!   size 1 whose identity is its starting sector (`offset / 512`) within its volume. On a
//!   libCacheSim `oracleGeneral` trace this key is exactly the record's `obj_id`.
//! * **Block mode** (what a block cache sees): a request covers `ceil(len / block_size)`
//!   blocks (at least one) starting at block `offset / block_size`; each block is one entry.
//!
//! Keys of different volumes never collide for realistic offsets: the volume (and tenant)
//! are mixed into the high bits of the key.

use serde::{Deserialize, Serialize};

/// Size of a sector in bytes; object-mode keys count sectors.
pub const SECTOR: u64 = 512;

/// The operation a request performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Read `len` bytes at `offset`.
    Read,
    /// Write `len` bytes at `offset`.
    Write,
    /// Discard (TRIM / UNMAP) `len` bytes at `offset`: cached copies become invalid.
    Trim,
    /// Make earlier writes durable; touches no data range.
    Flush,
}

impl Op {
    /// Short lower-case name, as printed in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Trim => "trim",
            Op::Flush => "flush",
        }
    }

    /// Whether the request reads or writes data (so a cache looks it up).
    pub fn is_data(self) -> bool {
        matches!(self, Op::Read | Op::Write)
    }
}

/// One block I/O request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Timestamp in microseconds from the trace's own origin.
    pub time_us: u64,
    /// The tenant issuing the request (0 when the trace has a single tenant).
    pub tenant: u32,
    /// The tenant's volume (disk, LUN) the request addresses.
    pub volume: u32,
    /// What the request does.
    pub op: Op,
    /// Byte offset of the first byte within the volume.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
}

/// How requests become cache keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyMode {
    /// Each request is one unit-size object keyed by its starting sector.
    Object,
    /// Each request covers whole blocks of this many bytes; each block is one key.
    Block {
        /// Block size in bytes (a power of two is usual, any non-zero value works).
        block_size: u32,
    },
}

impl KeyMode {
    /// Size in bytes that one cache entry stands for when counting bytes (object mode
    /// counts the request's own length instead, see [`Request::bytes`]).
    pub fn block_size(self) -> Option<u32> {
        match self {
            KeyMode::Object => None,
            KeyMode::Block { block_size } => Some(block_size),
        }
    }
}

/// Mixes a volume identity into the high bits of a key. Zero for tenant 0, volume 0, so
/// single-volume traces keep their natural ids (and match libCacheSim's `obj_id`).
#[inline]
fn volume_salt(tenant: u32, volume: u32) -> u64 {
    let id = ((tenant as u64) << 32) | volume as u64;
    if id == 0 {
        0
    } else {
        // A multiplicative hash spreads neighbouring volume ids over the top bits.
        id.wrapping_mul(0x9E37_79B9_7F4A_7C15) & 0xFFF0_0000_0000_0000
    }
}

impl Request {
    /// A read of `len` bytes at `offset` on tenant 0, volume 0, time 0.
    pub fn read(offset: u64, len: u32) -> Self {
        Request {
            time_us: 0,
            tenant: 0,
            volume: 0,
            op: Op::Read,
            offset,
            len,
        }
    }

    /// The object-mode key: the starting sector, salted by volume.
    #[inline]
    pub fn object_key(&self) -> u64 {
        (self.offset / SECTOR) ^ volume_salt(self.tenant, self.volume)
    }

    /// The first block and the number of blocks the request covers in block mode
    /// (`ceil(len / block_size)`, at least one).
    #[inline]
    pub fn block_range(&self, block_size: u32) -> (u64, u64) {
        let bs = block_size as u64;
        let first = self.offset / bs;
        let count = (self.len as u64).div_ceil(bs).max(1);
        (first, count)
    }

    /// The key of block number `block` of this request's volume.
    #[inline]
    pub fn block_key(&self, block: u64) -> u64 {
        block ^ volume_salt(self.tenant, self.volume)
    }

    /// Calls `f` with every key the request touches under `mode`.
    #[inline]
    pub fn for_each_key(&self, mode: KeyMode, mut f: impl FnMut(u64)) {
        match mode {
            KeyMode::Object => f(self.object_key()),
            KeyMode::Block { block_size } => {
                let (first, count) = self.block_range(block_size);
                let salt = volume_salt(self.tenant, self.volume);
                for b in first..first + count {
                    f(b ^ salt)
                }
            }
        }
    }

    /// Bytes one key of this request stands for: the request length in object mode, the
    /// block size in block mode.
    #[inline]
    pub fn bytes_per_key(&self, mode: KeyMode) -> u64 {
        match mode {
            KeyMode::Object => self.len as u64,
            KeyMode::Block { block_size } => block_size as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_key_is_sector_for_single_volume() {
        let r = Request::read(512 * 1234, 4096);
        assert_eq!(r.object_key(), 1234);
    }

    #[test]
    fn block_range_rounds_up_and_covers_at_least_one() {
        let r = Request::read(8192 + 100, 5000);
        assert_eq!(r.block_range(4096), (2, 2));
        let z = Request::read(4096, 0);
        assert_eq!(z.block_range(4096), (1, 1));
    }

    #[test]
    fn volumes_do_not_collide() {
        let mut a = Request::read(0, 512);
        let mut b = a;
        a.volume = 1;
        b.volume = 2;
        assert_ne!(a.object_key(), b.object_key());
        assert_ne!(a.object_key(), Request::read(0, 512).object_key());
    }
}
