//! Write policies of a partition (Moirai's `createCache(size, eviction, write policy)`).
//!
//! * [`WritePolicy::WriteBack`]: a write lands in the cache, marked dirty, and is
//!   acknowledged at once; the backend gets it on eviction, FLUSH, FUA, shrink, policy
//!   change or removal. A partial write to a block that is not resident reads the block
//!   first (read-modify-write) so the cache only ever holds whole, correct blocks.
//! * [`WritePolicy::WriteThrough`]: the write goes to the backend and is acknowledged after
//!   it completes; a whole-block write is also placed in the cache (write-allocate), a
//!   partial write updates a resident copy and does not allocate.
//! * [`WritePolicy::WriteAround`]: the write goes to the backend and any cached copy is
//!   invalidated; only reads populate the cache.
//! * [`WritePolicy::ReadOnly`]: the cache is for a data set declared read-only (Moirai's
//!   consolidated shared data set): reads are cached and a write routed to it is refused
//!   with an error. Writes that match no rule still reach the backend and keep the cache
//!   coherent (see `node`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How a partition handles writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WritePolicy {
    /// Cache the write, mark it dirty, write it to the backend later.
    WriteBack,
    /// Write to the backend, then update the cache.
    WriteThrough,
    /// Write to the backend and invalidate the cached copy.
    WriteAround,
    /// Refuse writes; cache reads only.
    ReadOnly,
}

impl WritePolicy {
    /// All policies.
    pub const ALL: [WritePolicy; 4] = [
        WritePolicy::WriteBack,
        WritePolicy::WriteThrough,
        WritePolicy::WriteAround,
        WritePolicy::ReadOnly,
    ];

    /// The canonical name.
    pub fn name(self) -> &'static str {
        match self {
            WritePolicy::WriteBack => "write-back",
            WritePolicy::WriteThrough => "write-through",
            WritePolicy::WriteAround => "write-around",
            WritePolicy::ReadOnly => "read-only",
        }
    }
}

impl fmt::Display for WritePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for WritePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let n = s.trim().to_ascii_lowercase().replace('_', "-");
        match n.as_str() {
            "write-back" | "wb" | "writeback" => Ok(WritePolicy::WriteBack),
            "write-through" | "wt" | "writethrough" => Ok(WritePolicy::WriteThrough),
            "write-around" | "wa" | "writearound" => Ok(WritePolicy::WriteAround),
            "read-only" | "ro" | "readonly" => Ok(WritePolicy::ReadOnly),
            _ => Err(format!(
                "unknown write policy `{s}` (known: write-back, write-through, write-around, read-only)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in WritePolicy::ALL {
            assert_eq!(p.name().parse::<WritePolicy>().unwrap(), p);
        }
        assert_eq!("WB".parse::<WritePolicy>().unwrap(), WritePolicy::WriteBack);
        let e = "sometimes".parse::<WritePolicy>().unwrap_err();
        assert!(e.contains("sometimes") && e.contains("write-around"), "{e}");
    }
}
