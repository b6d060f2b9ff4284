//! What a stop keeps and the next start replays: at a stop every dirty block is written
//! back by the deadline, or kept in the recovery file ([`RECOVERY_FILE`], written into the
//! space [`crate::reserve`] held) and the stop fails naming the count; at a start, before
//! any client is served, the file's blocks are written through the caches and settled
//! (see [`cache::recovery`] for why the file is consumed exactly once).

use crate::error::NodeError;
use crate::reserve;
use crate::state::ControlPlane;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a stop ended that did not write every dirty block back.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    /// The blocks are in the recovery file; the next start replays them.
    #[error("{blocks} dirty block(s) could not be written back ({why}); kept in {}, replayed at the next start", file.display())]
    Kept {
        /// How many.
        blocks: usize,
        /// Why they were not written back.
        why: String,
        /// The recovery file.
        file: PathBuf,
    },
    /// The blocks could be neither written back nor kept: they exist nowhere else. A stop
    /// waits and tries again unless told to drop them ([`crate::risk`]).
    #[error("{blocks} dirty block(s) could not be written back ({why}) nor kept in {}: {source}", file.display())]
    NotKept {
        /// How many.
        blocks: usize,
        /// Why they were not written back.
        why: String,
        /// The recovery file.
        file: PathBuf,
        /// Why the file could not be written.
        source: std::io::Error,
    },
    /// Another failure of the stop (a thread, the recovery file's removal).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Dirty blocks that could not be written back at the last stop, in the data directory
/// (see [`cache::recovery`]); the next start replays them.
pub const RECOVERY_FILE: &str = "recovery.bin";

/// Dirty blocks written back at once at a stop (parallel batches, see
/// [`cache::CachePartition::write_back_parallel`]).
pub const STOP_WRITERS: usize = 16;

/// At shutdown: write every dirty block back by `deadline` (in parallel batches, one
/// export after another), or keep what is not on the backends by then in `file` and
/// fail, naming the count and the file (so the process exits non-zero and nothing is
/// dropped). A backend that hangs ends the same way: the write-back thread is left
/// behind and the file is written from memory.
///
/// The recovery file a start replayed is settled by each successful flush; what is left
/// of it (exports that did not flush) is kept with the newest bytes the cache has for
/// those blocks, together with every dirty block and the blocks written back during this
/// stop to a backend that did not flush. When nothing is left, any recovery file is
/// removed, so a stale one can never be replayed over newer data (see
/// [`cache::recovery`]).
pub(crate) fn write_back_or_keep(
    state: &Arc<ControlPlane>,
    file: &Path,
    reserve: &reserve::Reserve,
    deadline: std::time::Instant,
    timeout: std::time::Duration,
) -> Result<(), StopError> {
    // Which blocks are dirty now: once written back they are durable only when their
    // export's flush succeeds.
    let at_stop: Vec<(String, u64, usize)> = state
        .cache_node()
        .dirty_data()
        .into_iter()
        .map(|b| (b.export, b.offset, b.data.len()))
        .collect();
    let names: Vec<String> = state.exports().map(|e| e.name.clone()).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    let st = state.clone();
    let todo = names.clone();
    std::thread::Builder::new()
        .name("stop-write-back".into())
        .spawn(move || {
            for e in todo {
                let res = st.cache_node().flush_parallel(&e, STOP_WRITERS);
                if tx.send((e, res)).is_err() {
                    return;
                }
            }
        })?;
    let mut flushed = std::collections::BTreeSet::new();
    let mut failed = None;
    let mut timed_out = false;
    for _ in &names {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok((e, Ok(()))) => {
                flushed.insert(e);
            }
            Ok((e, Err(err))) => {
                tracing::error!(export = %e, %err, "write-back at shutdown failed");
                failed.get_or_insert(err.to_string());
            }
            Err(_) => {
                timed_out = true;
                break;
            }
        }
    }
    let unsure: Vec<(String, u64, usize)> = at_stop
        .into_iter()
        .filter(|(e, _, _)| !flushed.contains(e))
        .collect();
    let blocks = blocks_to_keep(
        state,
        &state.cache_node().pending_recovery(),
        &unsure,
        !timed_out,
    );
    if timed_out {
        let why = format!(
            "not on the backends within node.stop_timeout = \"{}\"; {} of {} export(s) flushed",
            humantime::format_duration(timeout),
            flushed.len(),
            names.len()
        );
        if blocks.is_empty() {
            tracing::warn!("{why}, but no dirty block is held");
            state.cache_node().keep_recovery(file, &[])?;
            return Ok(());
        }
        return keep(state, file, reserve, &blocks, why);
    }
    let Some(err) = failed else {
        if blocks.is_empty() {
            state.cache_node().keep_recovery(file, &[])?;
            return Ok(());
        }
        // Flushed, yet something is dirty again: keep it all the same.
        return keep(
            state,
            file,
            reserve,
            &blocks,
            "dirty after the last flush".to_string(),
        );
    };
    if blocks.is_empty() {
        // Nothing is held dirty: every acknowledged write already left this node, and a
        // backend that cannot flush now (an upstream that went away) is not data we drop.
        state.cache_node().keep_recovery(file, &[])?;
        tracing::warn!(%err, "flush at shutdown failed, but no dirty block is held");
        return Ok(());
    }
    keep(state, file, reserve, &blocks, err)
}

/// The blocks a recovery file written now must hold, each with the newest bytes the
/// cache has: the `pending` blocks of the file a start replayed (their old bytes if the
/// cache cannot tell), the `unsure` blocks (dirty when the stop began, of exports that
/// did not flush; skipped if the cache cannot tell), then every dirty block. With
/// `full_read` the cache may read the backend; without it only memory is used (the
/// backend may hang). A block listed twice keeps its last bytes.
fn blocks_to_keep(
    state: &ControlPlane,
    pending: &[cache::DirtyBlock],
    unsure: &[(String, u64, usize)],
    full_read: bool,
) -> Vec<cache::DirtyBlock> {
    let mut out: Vec<cache::DirtyBlock> = Vec::new();
    let mut at: std::collections::HashMap<(String, u64), usize> = Default::default();
    let mut put = |b: cache::DirtyBlock| match at.get(&(b.export.clone(), b.offset)) {
        Some(&i) => out[i] = b,
        None => {
            at.insert((b.export.clone(), b.offset), out.len());
            out.push(b);
        }
    };
    let now = |export: &str, offset: u64, len: usize| -> Option<Vec<u8>> {
        let mut buf = vec![0; len];
        let got = if full_read {
            state
                .cache_node()
                .read(export, "recovery", offset, &mut buf)
                .is_ok()
        } else {
            matches!(
                state
                    .cache_node()
                    .read_if_resident(export, "recovery", offset, &mut buf),
                Ok(true)
            )
        };
        got.then_some(buf)
    };
    for b in pending {
        let data = now(&b.export, b.offset, b.data.len()).unwrap_or_else(|| {
            tracing::warn!(export = %b.export, offset = b.offset,
                "cannot read a block of the recovery file back; keeping the file's bytes");
            b.data.clone()
        });
        put(cache::DirtyBlock {
            export: b.export.clone(),
            offset: b.offset,
            data,
        });
    }
    for (export, offset, len) in unsure {
        match now(export, *offset, *len) {
            Some(data) => put(cache::DirtyBlock {
                export: export.clone(),
                offset: *offset,
                data,
            }),
            None => tracing::warn!(%export, offset,
                "a block written back during the stop to a backend that did not flush is no longer in memory"),
        }
    }
    for b in state.cache_node().dirty_data() {
        put(b);
    }
    out
}

/// Saves `blocks` in `file`, written into the space `reserve` held (its file renamed and
/// overwritten in place, so a write-back still running cannot take that space between a
/// release and the write), and returns the error that names them and the file.
fn keep(
    state: &ControlPlane,
    file: &Path,
    reserve: &reserve::Reserve,
    blocks: &[cache::DirtyBlock],
    why: String,
) -> Result<(), StopError> {
    tracing::info!(
        bytes = reserve.size(),
        "recovery reserve used for the recovery file"
    );
    // Whatever is left of the reserve (none, once it became the file) is given back.
    let kept = reserve.use_for(|space| {
        state
            .cache_node()
            .keep_recovery_in(file, blocks, Some(space))
    });
    if let Err(source) = kept {
        return Err(StopError::NotKept {
            blocks: blocks.len(),
            why,
            file: file.to_path_buf(),
            source,
        });
    }
    tracing::error!(blocks = blocks.len(), file = %file.display(), "dirty blocks kept for the next start");
    Err(StopError::Kept {
        blocks: blocks.len(),
        why,
        file: file.to_path_buf(),
    })
}

/// At start, before any client is served: write the blocks a previous stop kept in
/// `file` through the caches. Blocks that went to a cache with a durable write log are
/// in that log now and leave the file; the rest stay pending with the cache node, which
/// drops each export's blocks from the file once a flush of the export succeeds (tried
/// here first, for every export the file names). See [`cache::recovery`] for why this
/// consumes the file exactly once.
pub(crate) fn replay_recovery(state: &ControlPlane, file: &Path) -> Result<(), NodeError> {
    if !file.exists() {
        return Ok(());
    }
    let at = |msg: String| NodeError::Config {
        file: file.display().to_string(),
        msg,
    };
    let blocks = cache::recovery::read(file).map_err(|e| at(e.to_string()))?;
    let total = blocks.len();
    let mut kept = Vec::new();
    for b in blocks {
        state
            .cache_node()
            .write(&b.export, "recovery", b.offset, &b.data, false)
            .map_err(|e| {
                at(format!(
                    "replaying a block of `{}` at {}: {e}",
                    b.export, b.offset
                ))
            })?;
        let logged = state
            .cache_node()
            .logged(&b.export, "recovery", b.offset, b.data.len() as u64)
            .unwrap_or(false);
        if !logged {
            kept.push(b);
        }
    }
    if kept.is_empty() {
        cache::recovery::remove(file).map_err(|e| at(e.to_string()))?;
        tracing::info!(blocks = total, file = %file.display(), "replayed the recovery file into the write logs");
        return Ok(());
    }
    if kept.len() < total {
        cache::recovery::write(file, &kept).map_err(|e| at(e.to_string()))?;
    }
    let exports: std::collections::BTreeSet<String> =
        kept.iter().map(|b| b.export.clone()).collect();
    state
        .cache_node()
        .adopt_recovery(cache::recovery::Pending::new(file.to_path_buf(), kept));
    for e in &exports {
        if let Err(err) = state.cache_node().flush(e) {
            tracing::warn!(export = %e, %err, "the backend refuses the replayed blocks; they stay dirty in the cache");
        }
    }
    let left = state.cache_node().pending_recovery().len();
    if left == 0 {
        tracing::info!(blocks = total, file = %file.display(), "replayed the recovery file");
    } else {
        tracing::warn!(blocks = total, left, file = %file.display(), "replayed the recovery file into the caches; the file keeps the blocks the backends still refuse until a flush succeeds");
    }
    Ok(())
}
