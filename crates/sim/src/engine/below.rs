//! Below level 2: a storage server's disk, one operation per contiguous run of a tenant's
//! blocks in its own region, and the hot-chunk tier in front of it (hits served from the
//! tier's device, admitted chunks copied up as background work).
//!
//! Does not own: the stations' queueing (`crate::queue`), which blocks miss (`serve`).

use super::hierarchy::Server;
use super::key_of;
use crate::scenario::TenantSpec;
use policy::Access;

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

/// Reads missed blocks from the hot tier or the disk; migrations to the tier are
/// reserved as background work.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_below(
    server: &mut Server,
    spec: &TenantSpec,
    tenant: usize,
    blocks: &[u64],
    n: u64,
    bs: u64,
    at: f64,
) -> f64 {
    let boosted = server
        .tier
        .as_ref()
        .is_some_and(|t| t.volumes.as_ref().map_or(true, |v| v[tenant]));
    let (true, Some(tier)) = (boosted, server.tier.as_mut()) else {
        return disk_runs(server, spec, tenant, blocks, n, bs, at, false);
    };
    let mut from_disk = Vec::new();
    let mut done = at;
    let mut migrate = Vec::new();
    let cb = tier.chunk_blocks;
    for &b in blocks {
        let chunk = key_of(tenant, b / cb);
        match tier.cache.access(chunk, |_, _| {}) {
            Access::Hit(_) => {
                tier.hits += 1;
                done = done.max(tier.dev.serve(0, at, 0, bs, false));
            }
            Access::Inserted(_) => {
                tier.migrations += 1;
                migrate.push(b / cb);
                from_disk.push(b);
            }
            Access::Bypassed => from_disk.push(b),
        }
    }
    done = done.max(disk_runs(
        server, spec, tenant, &from_disk, n, bs, at, false,
    ));
    for c in migrate {
        // Copy the whole chunk: read it from the disk, write it to the tier.
        let first = c * cb;
        let chunk_blocks: Vec<u64> = (first..first + cb).collect();
        let t = disk_runs(server, spec, tenant, &chunk_blocks, n, bs, done, false);
        let tier = server.tier.as_mut().expect("tier");
        tier.dev.serve(0, t, first * bs, cb * bs, true);
    }
    done
}
