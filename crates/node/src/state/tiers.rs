//! The exports' hot-chunk tiers as the API shows and changes them: each tier's view
//! ([`api::node::HotTierView`], in `GET /v1/exports` and in the observations) and the
//! verb that sets its threshold or turns placing off (`PATCH
//! /v1/exports/{export}/hot_tier`), checked whole before anything changes.

use super::ControlPlane;
use crate::error::NodeError;
use crate::hot_tier::HotTier;
use api::node::{ExportInfo, HotTierPatch, HotTierView};

/// The contract's view of one export's tier.
pub fn view(export: &str, t: &HotTier) -> HotTierView {
    let s = t.stats();
    HotTierView {
        export: export.to_string(),
        chunk_size: t.chunk_size(),
        capacity_chunks: t.capacity_chunks(),
        admission: t.admission(),
        enabled: s.enabled,
        controlled: s.controlled,
        threshold: s.threshold,
        candidates: s.candidates,
        hits: s.hits,
        misses: s.misses,
        migrations: s.migrations,
        throttled: s.throttled,
        evictions: s.evictions,
        resident_chunks: s.resident_chunks,
    }
}

impl ControlPlane {
    /// Every export, with its tier's view where it has one.
    pub fn export_infos(&self) -> Vec<ExportInfo> {
        self.exports()
            .map(|e| ExportInfo {
                name: e.name.clone(),
                tenant: e.tenant.clone(),
                size: e.size,
                read_only: e.read_only,
                backend: e.backend.clone(),
                hot_tier: self.hot_tier(&e.name).map(|t| view(&e.name, t)),
            })
            .collect()
    }

    /// Every tier's view, by export name.
    pub fn tier_views(&self) -> Vec<HotTierView> {
        self.hot_tiers.iter().map(|(e, t)| view(e, t)).collect()
    }

    /// Applies `patch` to `export`'s tier, all or nothing: an unknown export is
    /// `NotFound`, an export without a tier a `Conflict`, a threshold below one or for a
    /// policy without thresholds `Invalid` (each naming the field), and then nothing
    /// changed.
    pub fn configure_hot_tier(
        &self,
        export: &str,
        patch: &HotTierPatch,
    ) -> Result<HotTierView, NodeError> {
        if self.export(export).is_none() {
            return Err(NodeError::NotFound(format!(
                "export `{export}`: no such export"
            )));
        }
        let t = self.hot_tier(export).ok_or_else(|| {
            NodeError::Conflict(format!(
                "export `{export}` has no hot tier (`[export.hot_tier]` in the node's configuration)"
            ))
        })?;
        if let Some(n) = patch.threshold {
            // Checked before `enabled` is touched, so a refused patch changes nothing.
            t.set_threshold(n).map_err(|e| match e {
                cache::CacheError::Invalid(why) => NodeError::Invalid(format!("hot_tier.{why}")),
                e => NodeError::Cache(e),
            })?;
        }
        if let Some(on) = patch.enabled {
            t.set_enabled(on);
        }
        Ok(view(export, t))
    }
}
