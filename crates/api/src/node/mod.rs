//! The node API's bodies: what a cache node answers and accepts under `/v1/`.
//!
//! | verb | path | request | answer |
//! |---|---|---|---|
//! | GET | `/v1/observations` | | [`NodeObservations`] |
//! | GET | `/v1/node` | | [`NodeInfo`] |
//! | GET | `/v1/tenants` | | `[`[`TenantInfo`]`]` |
//! | GET | `/v1/caches/{c}/curve?window=true&points=N` | | [`CacheCurve`] |
//! | GET | `/v1/caches` | | `[`[`CacheInfo`]`]` |
//! | POST | `/v1/caches` | [`CreateCache`] | [`CacheInfo`] (201; 200 if it exists alike) |
//! | GET, PATCH | `/v1/caches/{id or name}` | [`CachePatch`] (PATCH) | [`CacheInfo`] |
//! | DELETE | `/v1/caches/{id or name}` | | [`Removed`] |
//! | GET | `/v1/rules` | | `[`[`RuleInfo`]`]` |
//! | POST | `/v1/rules` | [`CreateRule`] | [`RuleInfo`] (201) |
//! | DELETE | `/v1/rules/{id}` | | [`Removed`] |
//! | GET | `/v1/exports` | | `[`[`ExportInfo`]`]` |
//! | PATCH | `/v1/exports/{export}/hot_tier` | [`HotTierPatch`] | [`HotTierView`] |
//! | GET | `/v1/proportions` | | [`crate::bandwidth::ProportionsView`] |
//! | PUT | `/v1/proportions` | [`Proportions`] | [`Proportions`] |
//! | POST | `/v1/demote/{export}` | binary records | [`DemoteOutcome`] |
//!
//! Every type that the node writes and a program of ours reads refuses unknown fields;
//! request bodies refuse them too (the error names the field).

//!
//! `observations` holds the controller's poll, `caches` caches, rules and curves, `status`
//! node and tenant counters, health, proportions and demotion answers, `tier` exports and
//! their hot tiers.

mod caches;
mod observations;
mod status;
mod tier;

pub use caches::{
    CacheCurve, CacheInfo, CachePatch, CachePatchEntry, CachePatchOutcome, CacheStats, CachesPatch,
    CachesPatched, CreateCache, CreateRule, CurvePoint, Op, Removed, RuleInfo, WRITE_POLICIES,
};
pub use observations::{
    LatencySum, LatencyView, NodeObservations, PolicyPoints, ServedView, TenantObservations,
    SHARED_CACHE,
};
pub use status::{
    DemoteCounters, DemoteOutcome, DirtyAtRisk, Health, LatencySummary, NodeInfo, Percentiles,
    Proportions, TenantInfo, UpstreamDown,
};
pub use tier::{ExportInfo, HotTierPatch, HotTierView};

#[cfg(test)]
mod tests {
    use super::*;
    use units::ByteSize;

    fn populated() -> NodeObservations {
        NodeObservations {
            version: crate::API_VERSION,
            node: "l1-a".into(),
            level: 1,
            block_size: 4096,
            cache_size: 256 << 20,
            uptime_ms: 12_345,
            epoch: "e1".into(),
            tenants: vec![TenantObservations {
                tenant: "t1".into(),
                cache: Some("vol1".into()),
                size: 64 << 20,
                eviction: Some("lru".into()),
                write_policy: Some("write-back".into()),
                admission: Some("demand".into()),
                resident_blocks: Some(16_384),
                dirty_blocks: Some(2),
                requests: 1000,
                read_bytes: 4_096_000,
                write_bytes: 8192,
                lookups: 1002,
                hits: 600,
                latency: LatencyView {
                    count: 1000,
                    failed: 3,
                    sum_ms: 812.5,
                    p50_ms: 0.4,
                    p99_ms: 6.1,
                    buckets: vec![(400, 600), (6100, 400)],
                    miss_buckets: vec![(6100, 400)],
                },
                served: ServedView {
                    hit: LatencySum {
                        count: 600,
                        sum_ms: 60.0,
                    },
                    miss: LatencySum {
                        count: 400,
                        sum_ms: 752.5,
                    },
                },
                curves: vec![
                    PolicyPoints {
                        policy: "lru".into(),
                        points: vec![(0, 1.0), (4096, 0.5)],
                    },
                    PolicyPoints {
                        policy: "arc".into(),
                        points: vec![(0, 1.0), (4096, 0.25)],
                    },
                ],
                backend: crate::bandwidth::BackendView {
                    requests: 400,
                    bytes: 1_638_400,
                    service_ms: 700.0,
                    queue_ms: 52.5,
                    proportion: Some(0.75),
                },
            }],
            tiers: vec![HotTierView {
                export: "vol1".into(),
                chunk_size: 1 << 20,
                capacity_chunks: 64,
                admission: "mrfu(threshold=3,period=65536,decay=0.5)".into(),
                enabled: true,
                controlled: true,
                threshold: Some(3),
                candidates: Some(17),
                hits: 40,
                misses: 60,
                migrations: 5,
                throttled: 1,
                evictions: 0,
                resident_chunks: 5,
            }],
        }
    }

    #[test]
    fn observations_round_trip_without_loss() {
        let o = populated();
        let text = serde_json::to_string(&o).unwrap();
        let back: NodeObservations = serde_json::from_str(&text).unwrap();
        assert_eq!(back, o);
        assert_eq!(back.tenants[0].key(), "vol1");
        // Every field is on the wire: a field the node writes that the reader lacked
        // would be refused, and one the reader wants but the node left out would be
        // missing.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["tenants"][0]["served"]["miss"]["sum_ms"], 752.5);
        assert_eq!(v["tenants"][0]["backend"]["queue_ms"], 52.5);
        assert_eq!(v["tiers"][0]["candidates"], 17);
        // A node from before tiers were reported omits `tiers`: none.
        let mut untiered = v.clone();
        untiered.as_object_mut().unwrap().remove("tiers");
        let back: NodeObservations = serde_json::from_value(untiered).unwrap();
        assert!(back.tiers.is_empty());
        // A node from before the backend queue omits `backend`: zeros, no proportion.
        let mut old = v.clone();
        old["tenants"][0].as_object_mut().unwrap().remove("backend");
        let back: NodeObservations = serde_json::from_value(old).unwrap();
        assert_eq!(back.tenants[0].backend, Default::default());
        // One from before resident and dirty blocks were reported: not known (`None`),
        // not zero.
        let mut old = v.clone();
        for f in ["resident_blocks", "dirty_blocks"] {
            old["tenants"][0].as_object_mut().unwrap().remove(f);
        }
        let back: NodeObservations = serde_json::from_value(old).unwrap();
        assert_eq!(back.tenants[0].resident_blocks, None);
        assert_eq!(back.tenants[0].dirty_blocks, None);
        assert_eq!(v["tenants"][0]["dirty_blocks"], 2);
        assert_eq!(v["version"], crate::API_VERSION);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let mut v = serde_json::to_value(populated()).unwrap();
        v["tenants"][0]["hitz"] = 3.into();
        let e = serde_json::from_value::<NodeObservations>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("hitz"), "{e}");
        let e = serde_json::from_str::<CachePatch>(r#"{"colour":"red"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("colour"), "{e}");
        let e = serde_json::from_str::<CreateRule>(r#"{"export":"a","cache":"b","ops":"read"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ops"), "{e}");
    }

    #[test]
    fn a_missing_required_field_is_refused() {
        let mut v = serde_json::to_value(populated()).unwrap();
        v["tenants"][0].as_object_mut().unwrap().remove("hits");
        let e = serde_json::from_value::<NodeObservations>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("hits"), "{e}");
    }

    #[test]
    fn an_older_node_without_version_or_write_policy_still_parses() {
        // What nodes wrote before `version` and `write_policy` were reported.
        let text = r#"{"node": "l1-a", "level": 1, "block_size": 4096, "cache_size": 268435456,
    "uptime_ms": 12345, "epoch": "e1",
    "tenants": [{"tenant": "t1", "cache": "t1", "size": 67108864, "eviction": "lru",
       "admission": "demand", "requests": 1000, "read_bytes": 4096000, "write_bytes": 0,
       "lookups": 1000, "hits": 600,
       "latency": {"count": 1000, "sum_ms": 812.5, "p50_ms": 0.4, "p99_ms": 6.1},
       "served": {"hit": {"count": 600, "sum_ms": 60.0}, "miss": {"count": 400, "sum_ms": 752.5}},
       "curves": [{"policy": "lru", "points": [[0, 1.0], [4096, 0.5]]}]}]}"#;
        let o: NodeObservations = serde_json::from_str(text).unwrap();
        assert_eq!(o.version, 1);
        assert_eq!(o.tenants[0].write_policy, None);
        assert_eq!(o.tenants[0].hits, 600);
        assert_eq!(o.tenants[0].served.miss.sum_ms, 752.5);
        assert_eq!(o.tenants[0].curves[0].points[1], (4096, 0.5));
    }

    #[test]
    fn request_bodies_take_sizes_with_units_and_leave_defaults_to_the_node() {
        let c: CreateCache =
            serde_json::from_str(r#"{"name":"t2","size":"8MiB","eviction":"arc"}"#).unwrap();
        assert_eq!(c.size, ByteSize(8 << 20));
        assert_eq!(c.eviction.as_deref(), Some("arc"));
        assert_eq!(c.write_policy, None);
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"name":"t2","size":8388608,"eviction":"arc"}"#
        );
        let p: CachePatch = serde_json::from_str(r#"{"size":1048576}"#).unwrap();
        assert_eq!(p.size, Some(ByteSize(1 << 20)));
        assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"size":1048576}"#);
        let r: CreateRule =
            serde_json::from_str(r#"{"export":"a","cache":"b","op":"read","range":[0,4096]}"#)
                .unwrap();
        assert_eq!(r.op, Some(Op::Read));
        assert_eq!(r.range, Some((0, 4096)));
    }

    #[test]
    fn node_tenant_and_curve_answers_round_trip() {
        let n = NodeInfo {
            level: 2,
            block_size: 4096,
            total_blocks: 1024,
            allocated_blocks: 512,
            uptime_seconds: 1.5,
            bandwidth_bytes_per_sec: 0,
            demote: DemoteCounters {
                queued: 3,
                queue_blocks: 1,
                ..Default::default()
            },
        };
        let back: NodeInfo = serde_json::from_str(&serde_json::to_string(&n).unwrap()).unwrap();
        assert_eq!(back, n);
        let t = TenantInfo {
            export: "v".into(),
            tenant: "t".into(),
            client: "127.0.0.1".into(),
            reads: 5,
            hits: 4,
            misses: 1,
            hit_ratio: 0.8,
            latency: LatencySummary {
                read: Percentiles {
                    count: 5,
                    mean_us: 12.5,
                    p50_us: 10,
                    p99_us: 40,
                    p999_us: 40,
                    max_us: 41,
                },
                write: Percentiles::default(),
            },
            ..Default::default()
        };
        let back: TenantInfo = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        let c: CacheCurve = serde_json::from_str(
            r#"{"cache":1,"windowed":false,"block_size":4096,"status":"no data","points":[]}"#,
        )
        .unwrap();
        assert_eq!(c.status, "no data");
        assert!(c.points.is_empty());
    }

    #[test]
    fn a_cache_without_a_log_parses() {
        let c = CacheInfo {
            id: 3,
            name: "t1".into(),
            size_bytes: 1 << 20,
            ..Default::default()
        };
        let text = serde_json::to_string(&c).unwrap();
        assert!(!text.contains("\"log\""), "{text}");
        assert_eq!(serde_json::from_str::<CacheInfo>(&text).unwrap(), c);
    }
}
