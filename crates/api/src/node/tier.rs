//! Exports and their hot-chunk tiers (SANCACHE's boosting): what `GET /v1/exports`
//! lists, what the observations carry of each tier, and the body that sets a tier's
//! threshold or turns it off.

use serde::{Deserialize, Serialize};

/// One export as `GET /v1/exports` lists it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExportInfo {
    /// NBD export name.
    pub name: String,
    /// Owning tenant.
    pub tenant: String,
    /// Size in bytes.
    pub size: u64,
    /// Writes refused.
    pub read_only: bool,
    /// What serves it (`file:PATH`, `nbd:ADDR/NAME`, `stripe(...)`).
    pub backend: String,
    /// Its hot tier, if it has one.
    // Default: the node leaves the field out for an export without a tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_tier: Option<HotTierView>,
}

/// One export's hot tier: its settings and its counters, cumulative since the node
/// started (a controller takes differences between polls, per period).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HotTierView {
    /// The export the tier serves.
    pub export: String,
    /// Bytes per chunk.
    pub chunk_size: u64,
    /// Chunks the fast backend holds.
    pub capacity_chunks: u64,
    /// Its placement policy, canonical (`mrfu(threshold=3,...)`).
    pub admission: String,
    /// Placing chunks (`false`: boosting is off for the volume; resident chunks are still
    /// served and kept exact, none is placed).
    pub enabled: bool,
    /// The threshold was set by a controller (its own rule, if adaptive, no longer runs).
    pub controlled: bool,
    /// Accesses a chunk needs before it is placed (`None`: the policy has none).
    pub threshold: Option<u32>,
    /// Keys the policy holds counts for (`None`: it counts none).
    pub candidates: Option<u64>,
    /// Chunk touches that found the chunk resident.
    pub hits: u64,
    /// Chunk touches that did not.
    pub misses: u64,
    /// Chunks copied into the tier.
    pub migrations: u64,
    /// Admitted misses dropped by the migration rate limit.
    pub throttled: u64,
    /// Resident chunks evicted to make room.
    pub evictions: u64,
    /// Chunks resident now.
    pub resident_chunks: u64,
}

/// The body of `PATCH /v1/exports/{export}/hot_tier`: absent fields stay as they are.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HotTierPatch {
    /// Placing chunks on or off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The placement threshold, at least 1, set in place: candidates keep their counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u32>,
}
