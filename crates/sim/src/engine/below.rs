//! Below level 2: a storage server's disk, one operation per contiguous run of a tenant's
//! blocks in its own region, and the hot-chunk tier in front of it (hits served from the
//! tier's device, admitted chunks copied up in the background, the tier exclusive of the
//! RAM cache; the tier's own rules are in `tier`).
//!
//! Does not own: the stations' queueing (`crate::queue`), which blocks miss (`serve`).

use super::hierarchy::Server;
use super::key_of;
use super::tier::Touch;
use crate::scenario::TenantSpec;

/// The byte offset on the server's disk of a tenant's block (stripes of `su` blocks
/// dealt round-robin over `n` servers; each tenant in its own region).
fn disk_offset(spec: &TenantSpec, tenant: usize, n: u64, block: u64, bs: u64) -> u64 {
    let su = spec.stripe_blocks;
    let local = (block / su / n) * su + block % su;
    ((tenant as u64) << 36) + local * bs
}

/// Serves `blocks` (sorted or not) at the disk, one operation per contiguous run; returns
/// the last completion.
#[allow(clippy::too_many_arguments)]
pub(super) fn disk_runs(
    server: &mut Server,
    spec: &TenantSpec,
    tenant: usize,
    blocks: &[u64],
    n: u64,
    bs: u64,
    at: f64,
    write: bool,
) -> f64 {
    let class = tenant;
    let mut done = at;
    let mut k = 0;
    while k < blocks.len() {
        let start = disk_offset(spec, tenant, n, blocks[k], bs);
        let mut len = bs;
        while k + 1 < blocks.len() && disk_offset(spec, tenant, n, blocks[k + 1], bs) == start + len
        {
            len += bs;
            k += 1;
        }
        done = done.max(server.disk.serve(class, at, start, len, write));
        k += 1;
    }
    done
}

/// What reading below level 2 did for one request's missed blocks.
pub(super) struct FromBelow {
    /// When the last block is there.
    pub(super) done: f64,
    /// Blocks served by the hot tier.
    pub(super) tier_blocks: u64,
    /// Migrations the reads started.
    pub(super) migrations: u64,
}

/// Reads tenant `tenant`'s missed `blocks` from the hot tier or the disk
/// ([`super::tier`]): each chunk the request touches is one access; resident chunks are
/// read from the tier's device, the rest from the disk, and the migrations admitted misses
/// start are copied in the background after the request's own reads.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_below(
    server: &mut Server,
    spec: &TenantSpec,
    tenant: usize,
    blocks: &[u64],
    n: u64,
    bs: u64,
    at: f64,
) -> FromBelow {
    let boosted = server.tier.as_ref().is_some_and(|t| t.boosts(tenant));
    let (true, Some(tier)) = (boosted, server.tier.as_mut()) else {
        let done = disk_runs(server, spec, tenant, blocks, n, bs, at, false);
        return FromBelow {
            done,
            tier_blocks: 0,
            migrations: 0,
        };
    };
    let cb = tier.chunk_blocks;
    let mut from_disk = Vec::new();
    let mut from_tier = Vec::new();
    let mut migrate = Vec::new();
    let mut done = at;
    // One access per chunk the request touches (its blocks come in runs by chunk).
    let mut k = 0;
    while k < blocks.len() {
        let c = blocks[k] / cb;
        let mut j = k + 1;
        while j < blocks.len() && blocks[j] / cb == c {
            j += 1;
        }
        let piece = &blocks[k..j];
        match tier.touch(key_of(tenant, c), at) {
            Touch::Hit(from) => {
                let len = piece.len() as u64 * bs;
                done = done.max(tier.dev.serve(0, from, c * cb * bs, len, false));
                from_tier.extend_from_slice(piece);
            }
            Touch::Miss { migrate: thread } => {
                from_disk.extend_from_slice(piece);
                if let Some(t) = thread {
                    migrate.push((c, t));
                }
            }
        }
        k = j;
    }
    let out = FromBelow {
        done: done.max(disk_runs(
            server, spec, tenant, &from_disk, n, bs, at, false,
        )),
        tier_blocks: from_tier.len() as u64,
        migrations: migrate.len() as u64,
    };
    // Exclusive of the RAM cache: what the tier serves is not kept at level 2.
    drop_clean(server, tenant, from_tier.iter().copied());
    for (c, thread) in migrate {
        // In the background: read the whole chunk from the disk (queued behind the
        // request's own reads), write it to the tier; the chunk's clean blocks then leave
        // level 2.
        let first = c * cb;
        let chunk: Vec<u64> = (first..first + cb).collect();
        let t_read = disk_runs(server, spec, tenant, &chunk, n, bs, at, false);
        let tier = server.tier.as_mut().expect("boosted");
        let ready = tier.dev.serve(0, t_read, first * bs, cb * bs, true);
        tier.place(key_of(tenant, c), thread, ready);
        drop_clean(server, tenant, first..first + cb);
    }
    out
}

/// Removes tenant `tenant`'s clean copies of `blocks` from its level-2 partition on
/// `server` (the hot tier holds them; dirty ones stay until written back).
fn drop_clean(server: &mut Server, tenant: usize, blocks: impl Iterator<Item = u64>) {
    let Some(p) = server.level.of_tenant[tenant] else {
        return;
    };
    let part = &mut server.level.parts[p];
    for b in blocks {
        let key = key_of(tenant, b);
        if let Some(slot) = part.cache.lookup(key) {
            if !part.dirty.get(slot as usize).copied().unwrap_or(false) {
                part.take(key);
            }
        }
    }
}

/// Whether tenant `tenant`'s block `block` belongs to a chunk the server's hot tier holds
/// (its clean copies then stay out of level 2).
pub(super) fn in_tier(server: &Server, tenant: usize, block: u64) -> bool {
    server
        .tier
        .as_ref()
        .is_some_and(|t| t.boosts(tenant) && t.holds(key_of(tenant, block / t.chunk_blocks)))
}
