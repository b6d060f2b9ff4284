//! Errors of the cache crate. Every variant names what was wrong and, where it helps, the
//! fix (the amount that would fit, the rule that overlaps, the known policies).

use crate::ids::{CacheId, RuleId};
use policy::PolicyError;

/// An error of the block cache or its control API.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// No cache has this id.
    #[error("unknown cache {0}")]
    UnknownCache(CacheId),
    /// No rule has this id.
    #[error("unknown rule {0}")]
    UnknownRule(RuleId),
    /// No export has this name.
    #[error("unknown export `{0}`")]
    UnknownExport(String),
    /// An export with this name is already registered.
    #[error("export `{0}` is already registered")]
    ExportExists(String),
    /// An export cannot be removed while rules name it.
    #[error("export `{export}` is still named by {rules} rule(s); remove them first")]
    ExportInUse {
        /// The export.
        export: String,
        /// How many rules name it.
        rules: usize,
    },
    /// A cache of zero blocks was requested.
    #[error("cache size must be at least one block")]
    ZeroSize,
    /// The caches' sizes would exceed the node's cache size.
    #[error(
        "cache size {requested} blocks does not fit: {available} of the node's {total} blocks are free"
    )]
    Oversized {
        /// Blocks requested for this cache.
        requested: usize,
        /// Blocks not allocated to other caches.
        available: usize,
        /// The node's total cache size in blocks.
        total: usize,
    },
    /// The eviction-policy spec is not valid.
    #[error("eviction policy: {0}")]
    Policy(#[from] PolicyError),
    /// A new rule overlaps an existing one.
    #[error("rule overlaps rule {existing}: {reason}")]
    RuleOverlap {
        /// The existing rule.
        existing: RuleId,
        /// Why the two cannot coexist.
        reason: String,
    },
    /// A rule's range is malformed.
    #[error("bad rule range {start}..{end}: {reason}")]
    BadRange {
        /// Start byte.
        start: u64,
        /// End byte (exclusive).
        end: u64,
        /// What is wrong.
        reason: String,
    },
    /// A request reaches past the end of its export.
    #[error("request {offset}+{len} is out of range for export `{export}` of {size} bytes")]
    OutOfRange {
        /// The export.
        export: String,
        /// Request offset.
        offset: u64,
        /// Request length.
        len: u64,
        /// Export size in bytes.
        size: u64,
    },
    /// A write was routed to a read-only cache.
    #[error("cache {0} is read-only: route writes elsewhere (a rule with op=read)")]
    ReadOnly(CacheId),
    /// A configuration value is invalid.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// A cache cannot be removed because its dirty blocks cannot be written back; it stays,
    /// with its data.
    #[error("cache {cache} holds {blocks} dirty block(s) that cannot be written back ({reason}); it was not removed")]
    DirtyUnwritable {
        /// The cache.
        cache: CacheId,
        /// Its dirty blocks.
        blocks: usize,
        /// Why the write-back failed.
        reason: String,
    },
    /// The durable write log failed (the write was not acknowledged).
    #[error("write log {path}: {source}")]
    Log {
        /// The log's configured path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The backend failed.
    #[error("backend I/O of export `{export}`: {source}")]
    Io {
        /// The export whose backend failed.
        export: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Result of the cache crate.
pub type Result<T, E = CacheError> = std::result::Result<T, E>;
