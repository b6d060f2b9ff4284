//! The identifiers of a node's control objects: caches and rules. They live apart from
//! [`crate::node`] so that errors and rules can name them without depending on the node.

/// Identifies a cache of a node.
pub type CacheId = u64;
/// Identifies a rule of a node.
pub type RuleId = u64;
