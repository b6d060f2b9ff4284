//! Rules: which cache a request goes to (Moirai's `createRule(<source, op, file, range> ->
//! cache)`).
//!
//! A [`RoutingRule`] matches requests by client (`None` = any), operation (`None` = both), export
//! and byte range (`None` = the whole export; bounds must be block-aligned, the end may be
//! the export's size). A request is split per block; each block goes to the cache of the
//! rule that matches it ([`Target::Cached`]). A block no rule matches goes straight to the
//! backend ([`Target::Direct`]) — unless some rule *for another client or operation*
//! covers it, in which case its cache may hold that block, so the request is served
//! coherently through that cache without being cached ([`Target::Coherent`]).
//!
//! Two checks keep routing unambiguous and the data coherent:
//! * two rules of the same export whose ranges overlap must name the same cache (a block
//!   is cached by at most one cache, so there is never a second, stale copy; this is
//!   stricter than Moirai, which leaves coherence between caches to the operator);
//! * two rules of the same export with overlapping ranges must not both match one request
//!   (same or wildcard client and same or wildcard operation).

use crate::error::{CacheError, Result};
use crate::ids::{CacheId, RuleId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Range;

/// A request's operation as rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Reads.
    Read,
    /// Writes (and trims).
    Write,
}

/// Which requests go to a cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutingRule {
    /// The client (NBD peer or tenant name); `None` matches every client.
    pub client: Option<String>,
    /// The operation; `None` matches reads and writes.
    pub op: Option<Op>,
    /// The export.
    pub export: String,
    /// Byte range `[start, end)`; `None` is the whole export.
    pub range: Option<(u64, u64)>,
}

/// Where one block of a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Through this cache, cached.
    Cached(CacheId),
    /// Through this cache, not cached (it may hold the block for another rule).
    Coherent(CacheId),
    /// Straight to the backend.
    Direct,
}

#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub id: RuleId,
    pub rule: RoutingRule,
    pub cache: CacheId,
    pub blocks: Range<u64>,
}

impl Entry {
    #[inline]
    fn matches(&self, client: &str, op: Op) -> bool {
        self.rule.op.is_none_or(|o| o == op)
            && self.rule.client.as_deref().is_none_or(|c| c == client)
    }
}

fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

/// The rules of a node, grouped by export (volume id).
#[derive(Default)]
pub(crate) struct RuleTable {
    by_vol: BTreeMap<u32, Vec<Entry>>,
}

impl RuleTable {
    /// Converts `rule`'s byte range to blocks, checking alignment and bounds.
    pub fn blocks_of(rule: &RoutingRule, block_size: u64, export_size: u64) -> Result<Range<u64>> {
        let blocks = export_size.div_ceil(block_size);
        let Some((start, end)) = rule.range else {
            return Ok(0..blocks);
        };
        let bad = |reason: &str| CacheError::BadRange {
            start,
            end,
            reason: reason.into(),
        };
        if start >= end {
            return Err(bad("empty range (start must be below end)"));
        }
        if end > export_size {
            return Err(bad(&format!("beyond the export's {export_size} bytes")));
        }
        if start % block_size != 0 || (end % block_size != 0 && end != export_size) {
            return Err(bad(&format!(
                "bounds must be multiples of the block size {block_size}"
            )));
        }
        Ok(start / block_size..end.div_ceil(block_size))
    }

    /// Checks a new rule against the existing ones.
    pub fn check(
        &self,
        vol: u32,
        rule: &RoutingRule,
        cache: CacheId,
        blocks: &Range<u64>,
    ) -> Result<()> {
        for e in self.by_vol.get(&vol).into_iter().flatten() {
            if !overlaps(&e.blocks, blocks) {
                continue;
            }
            if e.cache != cache {
                return Err(CacheError::RuleOverlap {
                    existing: e.id,
                    reason: format!(
                        "its range of export `{}` goes to cache {}, not {cache}; a block may be cached by one cache only",
                        rule.export, e.cache
                    ),
                });
            }
            let clients = match (&e.rule.client, &rule.client) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            };
            let ops = match (e.rule.op, rule.op) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            };
            if clients && ops {
                return Err(CacheError::RuleOverlap {
                    existing: e.id,
                    reason: format!(
                        "both match the same client and operation on overlapping ranges of export `{}`",
                        rule.export
                    ),
                });
            }
        }
        Ok(())
    }

    /// Adds a checked rule.
    pub fn insert(&mut self, vol: u32, entry: Entry) {
        self.by_vol.entry(vol).or_default().push(entry);
    }

    /// Removes a rule; returns its volume and entry.
    pub fn remove(&mut self, id: RuleId) -> Option<(u32, Entry)> {
        for (&vol, v) in self.by_vol.iter_mut() {
            if let Some(i) = v.iter().position(|e| e.id == id) {
                let e = v.remove(i);
                if v.is_empty() {
                    self.by_vol.remove(&vol);
                }
                return Some((vol, e));
            }
        }
        None
    }

    /// All rules of a volume.
    pub fn of_vol(&self, vol: u32) -> &[Entry] {
        self.by_vol.get(&vol).map_or(&[], |v| v.as_slice())
    }

    /// Ids of the rules that name `cache`.
    pub fn of_cache(&self, cache: CacheId) -> Vec<RuleId> {
        self.by_vol
            .values()
            .flatten()
            .filter(|e| e.cache == cache)
            .map(|e| e.id)
            .collect()
    }

    /// Every rule with its id and cache.
    pub fn all(&self) -> impl Iterator<Item = &Entry> {
        self.by_vol.values().flatten()
    }

    /// Where `block` of volume `vol` goes for `client` and `op`.
    #[inline]
    pub fn target(rules: &[Entry], client: &str, op: Op, block: u64) -> Target {
        let mut attached = None;
        for e in rules {
            if e.blocks.contains(&block) {
                if e.matches(client, op) {
                    return Target::Cached(e.cache);
                }
                attached = Some(e.cache);
            }
        }
        attached.map_or(Target::Direct, Target::Coherent)
    }

    /// The blocks of `removed` no other rule of `vol` attaches to the same cache.
    pub fn orphaned(&self, vol: u32, removed: &Entry) -> Vec<Range<u64>> {
        let mut left = vec![removed.blocks.clone()];
        for e in self.of_vol(vol).iter().filter(|e| e.cache == removed.cache) {
            left = left
                .into_iter()
                .flat_map(|r| {
                    let mut out = Vec::new();
                    if !overlaps(&r, &e.blocks) {
                        out.push(r);
                        return out;
                    }
                    if r.start < e.blocks.start {
                        out.push(r.start..e.blocks.start);
                    }
                    if e.blocks.end < r.end {
                        out.push(e.blocks.end..r.end);
                    }
                    out
                })
                .collect();
        }
        left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(client: Option<&str>, op: Option<Op>, range: Option<(u64, u64)>) -> RoutingRule {
        RoutingRule {
            client: client.map(Into::into),
            op,
            export: "vol".into(),
            range,
        }
    }

    fn add(t: &mut RuleTable, id: RuleId, r: RoutingRule, cache: CacheId) -> Result<()> {
        let blocks = RuleTable::blocks_of(&r, 10, 1000)?;
        t.check(0, &r, cache, &blocks)?;
        t.insert(
            0,
            Entry {
                id,
                rule: r,
                cache,
                blocks,
            },
        );
        Ok(())
    }

    #[test]
    fn routing_and_overlaps() {
        let mut t = RuleTable::default();
        add(&mut t, 1, rule(Some("a"), None, Some((0, 500))), 7).unwrap();
        add(
            &mut t,
            2,
            rule(Some("b"), Some(Op::Read), Some((0, 200))),
            7,
        )
        .unwrap();
        // same client, overlapping range
        let e = add(
            &mut t,
            3,
            rule(Some("a"), Some(Op::Write), Some((100, 300))),
            7,
        )
        .unwrap_err();
        assert!(e.to_string().contains("rule 1"), "{e}");
        // other cache over the same blocks
        let e = add(&mut t, 3, rule(Some("c"), None, Some((400, 600))), 8).unwrap_err();
        assert!(e.to_string().contains("one cache only"), "{e}");
        add(&mut t, 4, rule(None, None, Some((500, 1000))), 8).unwrap();
        let r = t.of_vol(0);
        assert_eq!(RuleTable::target(r, "a", Op::Read, 3), Target::Cached(7));
        assert_eq!(RuleTable::target(r, "b", Op::Read, 3), Target::Cached(7));
        assert_eq!(RuleTable::target(r, "b", Op::Write, 3), Target::Coherent(7));
        assert_eq!(RuleTable::target(r, "b", Op::Read, 30), Target::Coherent(7));
        assert_eq!(RuleTable::target(r, "z", Op::Read, 50), Target::Cached(8));
        assert_eq!(RuleTable::target(r, "z", Op::Read, 99), Target::Cached(8));
        let (_, e1) = t.remove(1).unwrap();
        assert_eq!(t.orphaned(0, &e1), vec![20..50]);
        assert_eq!(
            RuleTable::target(t.of_vol(0), "a", Op::Read, 30),
            Target::Direct
        );
    }

    #[test]
    fn bad_ranges() {
        let r = rule(None, None, Some((5, 100)));
        assert!(RuleTable::blocks_of(&r, 10, 1000)
            .unwrap_err()
            .to_string()
            .contains("multiples"));
        let r = rule(None, None, Some((100, 100)));
        assert!(RuleTable::blocks_of(&r, 10, 1000)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        let r = rule(None, None, Some((0, 2000)));
        assert!(RuleTable::blocks_of(&r, 10, 1000)
            .unwrap_err()
            .to_string()
            .contains("beyond"));
        let r = rule(None, None, Some((990, 995)));
        assert_eq!(RuleTable::blocks_of(&r, 10, 995).unwrap(), 99..100);
    }
}
