//! The operator's console: one self-contained HTML page (no external assets) that polls
//! the API with the token from its `#token=` fragment and draws the tenants with their SLO
//! status, each volume's miss-ratio curve with the planned size marked, allocations per
//! node over time, latency against target over time, the last decisions with their
//! reasons, and the nodes' health.

/// The page.
pub const PAGE: &str = include_str!("console.html");
