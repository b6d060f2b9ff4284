//! A partition's role in a pair of exclusive levels ([`Exclusive`]: off, upper or lower)
//! and where an upper partition's clean victims go ([`DemoteSink`]). What each mode does
//! on the data path is in `demote` (evictions and demoted inserts) and `read` (a lower
//! partition's reads).

use std::sync::Arc;

/// Where an upper partition sends its clean victims. Called under the partition's lock:
/// it must not block (queue the bytes, or refuse).
pub trait DemoteSink: Send + Sync {
    /// Takes a clean block of `export` at byte `offset` (block-aligned; `data` is the
    /// block, shorter for a partial last block). False if it refused (queue full).
    fn demote(&self, export: &str, offset: u64, data: &[u8]) -> bool;
}

/// A partition's role in a pair of exclusive levels (see the module doc).
#[derive(Clone, Default)]
pub enum Exclusive {
    /// An ordinary cache.
    #[default]
    Off,
    /// Clean victims go to the sink.
    Upper(Arc<dyn DemoteSink>),
    /// Reads do not keep what they serve.
    Lower,
}

impl Exclusive {
    /// `off`, `upper` or `lower`.
    pub fn name(&self) -> &'static str {
        match self {
            Exclusive::Off => "off",
            Exclusive::Upper(_) => "upper",
            Exclusive::Lower => "lower",
        }
    }
}

impl std::fmt::Debug for Exclusive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
