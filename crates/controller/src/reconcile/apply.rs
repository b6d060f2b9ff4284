//! One node made to match what the plan wants on it ([`apply`]), in the order the module
//! above gives, each field its own entry (the resizes and switches of a node batched in
//! one `PATCH /v1/caches`, entry by entry to a node from before the batch) and each
//! refusal kept with its field.

use super::{Action, Desired, NodeOutcome, Refusal, WantCache};
use api::client::{CallError, NodeClient};
use api::node::{
    CacheInfo, CachePatch, CachePatchEntry, CachesPatch, CreateCache, CreateRule, HotTierPatch,
    Proportions,
};
use units::ByteSize;

/// Whether a refusal says the node does not know what it was sent (an older node): an
/// unknown verb or path, or an unknown field of a body.
fn unsupported(e: &CallError) -> bool {
    let why = e.reason();
    match e.status() {
        Some(404) => why.contains("no such endpoint"),
        Some(405) => true,
        Some(400 | 422) => why.contains("unknown field"),
        _ => false,
    }
}

/// What one node's reconcile has done so far.
struct Run<'a> {
    c: &'a NodeClient,
    out: NodeOutcome,
}

impl Run<'_> {
    /// Keeps the action of a call and, if it failed, the refusal of `field`.
    fn note<T>(
        &mut self,
        verb: &str,
        cache: &str,
        detail: String,
        field: String,
        wanted: String,
        r: Result<T, CallError>,
    ) -> Option<T> {
        self.out.actions.push(Action {
            node: self.out.node.clone(),
            verb: verb.into(),
            cache: cache.into(),
            detail,
            result: match &r {
                Ok(_) => "ok".into(),
                Err(e) => e.to_string(),
            },
        });
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.out.refused.push(Refusal {
                    node: self.out.node.clone(),
                    field,
                    wanted,
                    reason: e.reason(),
                    unsupported: unsupported(&e),
                });
                None
            }
        }
    }

    /// `PATCH` of one field of cache `w`.
    fn patch(&mut self, w: &WantCache, field: &str, from: String, to: String, p: CachePatch) {
        let r = self.c.configure_cache(&w.name, &p).map(|_| ());
        self.note_patch(&w.name, field, from, to, r);
    }

    /// Keeps the action of a `PATCH` of `field` of cache `name` and its refusal.
    fn note_patch(
        &mut self,
        name: &str,
        field: &str,
        from: String,
        to: String,
        r: Result<(), CallError>,
    ) {
        let (verb, detail) = match field {
            "size" => ("resize", format!("{from} -> {to}")),
            "eviction" => ("policy", format!("{from} -> {to}")),
            f => (f, format!("{f} {from} -> {to}")),
        };
        self.note(verb, name, detail, format!("caches.{name}.{field}"), to, r);
    }

    /// Sends `batch` as one `PATCH /v1/caches`, each entry kept as its own action and
    /// refusal; to a node from before the batch (the verb unknown, or a field in it),
    /// entry by entry. One entry goes alone.
    fn send(&mut self, batch: Vec<FieldPatch<'_>>) {
        if batch.len() < 2 {
            for e in batch {
                self.patch(e.cache, e.field, e.from, e.to, e.patch);
            }
            return;
        }
        let body = CachesPatch {
            caches: batch
                .iter()
                .map(|e| CachePatchEntry {
                    cache: e.cache.name.clone(),
                    patch: e.patch.clone(),
                })
                .collect(),
        };
        match self.c.configure_caches(&body) {
            Ok(answer) => {
                let mut outcomes = answer.caches.into_iter();
                for e in batch {
                    let r = match outcomes.next() {
                        Some(o) if o.status == 200 => Ok(()),
                        Some(o) => Err(CallError::Status {
                            status: o.status,
                            body: serde_json::json!({ "error": o.error.unwrap_or_default() })
                                .to_string(),
                        }),
                        None => Err(CallError::Contract {
                            path: "/v1/caches".into(),
                            msg: "fewer outcomes than entries".into(),
                        }),
                    };
                    self.note_patch(&e.cache.name, e.field, e.from, e.to, r);
                }
            }
            Err(err) if unsupported(&err) => {
                for e in batch {
                    self.patch(e.cache, e.field, e.from, e.to, e.patch);
                }
            }
            Err(err) => {
                for e in batch {
                    self.note_patch(&e.cache.name, e.field, e.from, e.to, Err(err.clone()));
                }
            }
        }
    }
}

/// One field of one cache to change, as [`Run::send`] batches them.
struct FieldPatch<'a> {
    cache: &'a WantCache,
    field: &'static str,
    from: String,
    to: String,
    patch: CachePatch,
}

impl<'a> FieldPatch<'a> {
    /// Cache `h` resized to what `w` wants.
    fn resize(w: &'a WantCache, h: &CacheInfo) -> FieldPatch<'a> {
        FieldPatch {
            cache: w,
            field: "size",
            from: h.size_bytes.to_string(),
            to: w.size.to_string(),
            patch: CachePatch {
                size: Some(ByteSize(w.size)),
                ..Default::default()
            },
        }
    }
}

/// Makes node `name` match `want`: what it changed, what it refused per field, and its
/// caches as read back after.
pub fn apply(c: &NodeClient, name: &str, want: &Desired) -> NodeOutcome {
    let mut run = Run {
        c,
        out: NodeOutcome {
            node: name.to_string(),
            ..Default::default()
        },
    };
    let caches = match c.caches() {
        Ok(v) => v,
        Err(e) => {
            run.out.unreachable = Some(e);
            return run.out;
        }
    };
    remove_unwanted(&mut run, &caches, want);
    resize_and_create(&mut run, &caches, want);
    // Read back only if something was sent: a node that needed no change holds what was
    // just read (one call fewer per node in a steady interval).
    let changed = !run.out.actions.is_empty();
    let after = if changed { c.caches().ok() } else { None };
    route(&mut run, after.as_deref().unwrap_or(&caches), want);
    proportions(&mut run, want);
    tiers(&mut run, want);
    run.out.applied = if changed { after } else { Some(caches) };
    run.out
}

/// Caches no plan wants (a deleted tenant's, a volume moved elsewhere): their rules
/// first, so no request reaches a cache being removed, then the cache (the node writes
/// its dirty blocks back before it answers).
fn remove_unwanted(run: &mut Run<'_>, caches: &[CacheInfo], want: &Desired) {
    let unwanted: Vec<&CacheInfo> = caches
        .iter()
        .filter(|h| !want.caches.iter().any(|w| w.name == h.name))
        .collect();
    if unwanted.is_empty() {
        return;
    }
    let rules = run.c.rules().unwrap_or_default();
    for h in unwanted {
        for r in rules.iter().filter(|r| r.cache == h.id) {
            let res = run.c.remove_rule(r.id);
            run.note(
                "unrule",
                &h.name,
                format!("rule {}", r.id),
                format!("rules.{}", r.export),
                "removed".into(),
                res,
            );
        }
        // A name outside the rule (left by an older node) cannot be a URL segment
        // (`..` would resolve away): such a cache is removed by its id.
        let key = match api::names::is_valid(&h.name) {
            true => h.name.clone(),
            false => h.id.to_string(),
        };
        let res = run.c.remove_cache(&key);
        run.note(
            "remove",
            &h.name,
            format!("{} bytes, no plan wants it", h.size_bytes),
            format!("caches.{}", h.name),
            "removed".into(),
            res,
        );
    }
}

/// Shrinks first (freeing memory), then creates, then grows and switches of policy, each
/// field its own entry; the shrinks go in one `PATCH /v1/caches`, and so do the rest.
fn resize_and_create(run: &mut Run<'_>, caches: &[CacheInfo], want: &Desired) {
    let mut shrinks = Vec::new();
    for w in &want.caches {
        if let Some(h) = caches.iter().find(|x| x.name == w.name) {
            if w.size < h.size_bytes {
                shrinks.push(FieldPatch::resize(w, h));
            }
        }
    }
    run.send(shrinks);
    let mut rest = Vec::new();
    for w in &want.caches {
        let Some(h) = caches.iter().find(|x| x.name == w.name) else {
            let spec = CreateCache {
                name: w.name.clone(),
                size: ByteSize(w.size),
                eviction: Some(w.eviction.clone()),
                admission: Some(w.admission.clone()),
                write_policy: w.write_policy.clone(),
                exclusive: w.exclusive,
                ..Default::default()
            };
            let detail = format!(
                "{} bytes, {}{}{}",
                w.size,
                w.eviction,
                w.write_policy
                    .as_deref()
                    .map(|p| format!(", {p}"))
                    .unwrap_or_default(),
                if w.exclusive { ", exclusive" } else { "" }
            );
            let r = run.c.create_cache(&spec);
            run.note(
                "create",
                &w.name,
                detail,
                format!("caches.{}", w.name),
                format!("{} bytes", w.size),
                r,
            );
            continue;
        };
        if w.size > h.size_bytes {
            rest.push(FieldPatch::resize(w, h));
        }
        if !h.stats.eviction.is_empty() && h.stats.eviction != w.eviction {
            rest.push(FieldPatch {
                cache: w,
                field: "eviction",
                from: h.stats.eviction.clone(),
                to: w.eviction.clone(),
                patch: CachePatch {
                    eviction: Some(w.eviction.clone()),
                    ..Default::default()
                },
            });
        }
        // A node that does not report the mode is left as it is.
        if !h.stats.exclusive.is_empty() && (h.stats.exclusive != "off") != w.exclusive {
            rest.push(FieldPatch {
                cache: w,
                field: "exclusive",
                from: h.stats.exclusive.clone(),
                to: w.exclusive.to_string(),
                patch: CachePatch {
                    exclusive: Some(w.exclusive),
                    ..Default::default()
                },
            });
        }
        if let Some(wp) = w
            .write_policy
            .as_ref()
            .filter(|wp| !h.stats.write_policy.is_empty() && **wp != h.stats.write_policy)
        {
            rest.push(FieldPatch {
                cache: w,
                field: "write_policy",
                from: h.stats.write_policy.clone(),
                to: wp.clone(),
                patch: CachePatch {
                    write_policy: Some(wp.clone()),
                    ..Default::default()
                },
            });
        }
    }
    run.send(rest);
}

/// Rules: every routed export's requests go to its cache.
fn route(run: &mut Run<'_>, caches: &[CacheInfo], want: &Desired) {
    let rules = match run.c.rules() {
        Ok(v) => v,
        Err(e) => {
            let field = "rules".to_string();
            run.note(
                "rules",
                "",
                "read".into(),
                field,
                "read".into(),
                Err::<(), _>(e),
            );
            return;
        }
    };
    for w in &want.caches {
        let Some(id) = caches.iter().find(|x| x.name == w.name).map(|x| x.id) else {
            continue;
        };
        for export in &w.routes {
            let mine = rules.iter().any(|r| {
                &r.export == export && r.cache == id && r.client.is_none() && r.range == w.range
            });
            if mine {
                continue;
            }
            // A whole-export rule to another cache (or over another range) would overlap:
            // replace it.
            for r in rules.iter().filter(|r| {
                &r.export == export && r.client.is_none() && (r.cache != id || r.range != w.range)
            }) {
                let res = run.c.remove_rule(r.id);
                let field = format!("rules.{export}");
                run.note(
                    "unrule",
                    export,
                    format!("rule {}", r.id),
                    field,
                    "removed".into(),
                    res,
                );
            }
            let rule = CreateRule {
                export: export.clone(),
                cache: w.name.clone(),
                range: w.range,
                ..Default::default()
            };
            let r = match run.c.create_rule(&rule) {
                // A node that does not export the volume: nothing to route (an image's
                // server must export it: that is a refusal).
                Err(CallError::Status { status: 404, .. }) if !w.image => continue,
                r => r,
            };
            let range = w
                .range
                .map(|(a, b)| format!(" [{a}, {b})"))
                .unwrap_or_default();
            // A range the node refuses is a refusal of the rule's `range`.
            let field = match (&r, w.range) {
                (Err(e), Some(_)) if e.status() == Some(400) && e.reason().contains("range") => {
                    format!("rules.{export}.range")
                }
                _ => format!("rules.{export}"),
            };
            run.note(
                "rule",
                export,
                format!("export {export}{range} -> cache {}", w.name),
                field,
                format!("cache {}{range}", w.name),
                r,
            );
        }
    }
}

/// Bandwidth proportions, every interval (the learners may change them every time),
/// sent when they differ from the node's (or it does not say).
fn proportions(run: &mut Run<'_>, want: &Desired) {
    let Some(p) = want.proportions.as_ref() else {
        return;
    };
    let have = run.c.proportions().ok().map(|v| v.proportions);
    let same = |a: &Proportions, b: &Proportions| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|((ka, va), (kb, vb))| ka == kb && (va - vb).abs() < 1e-12)
    };
    if have.as_ref().is_some_and(|h| same(h, p)) {
        return;
    }
    let detail = if p.is_empty() {
        "equal shares".to_string()
    } else {
        p.iter()
            .map(|(t, v)| format!("{t} {v:.4}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let r = run.c.set_proportions(p);
    run.note(
        "proportions",
        "",
        detail.clone(),
        "proportions".into(),
        detail,
        r,
    );
}

/// Each wanted hot tier on or off and at the plan's threshold, sent when the node's
/// differs (the threshold is set in place: candidates keep their counts).
fn tiers(run: &mut Run<'_>, want: &Desired) {
    if want.tiers.is_empty() {
        return;
    }
    let have: Vec<_> = match run.c.exports() {
        Ok(v) => v.into_iter().filter_map(|e| e.hot_tier).collect(),
        Err(e) => {
            let field = "hot_tier".to_string();
            run.note(
                "boost",
                "",
                "read".into(),
                field,
                "read".into(),
                Err::<(), _>(e),
            );
            return;
        }
    };
    for w in &want.tiers {
        let Some(h) = have.iter().find(|h| h.export == w.export) else {
            continue;
        };
        let mut now = h.clone();
        if h.enabled != w.enabled {
            let p = HotTierPatch {
                enabled: Some(w.enabled),
                threshold: None,
            };
            let r = run.c.configure_hot_tier(&w.export, &p);
            let field = format!("hot_tier.{}.enabled", w.export);
            let detail = format!("enabled {} -> {}", h.enabled, w.enabled);
            if let Some(v) = run.note("boost", &w.export, detail, field, w.enabled.to_string(), r) {
                now = v;
            }
        }
        if let Some(t) = w
            .threshold
            .filter(|t| h.threshold != Some(*t) || !h.controlled)
        {
            let p = HotTierPatch {
                enabled: None,
                threshold: Some(t),
            };
            let r = run.c.configure_hot_tier(&w.export, &p);
            let field = format!("hot_tier.{}.threshold", w.export);
            let detail = format!(
                "threshold {} -> {t}",
                h.threshold.map_or("-".into(), |x| x.to_string())
            );
            if let Some(v) = run.note("boost", &w.export, detail, field, t.to_string(), r) {
                now = v;
            }
        }
        run.out.tiers.push(now);
    }
}
