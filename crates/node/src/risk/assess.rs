//! The assessment of dirty blocks at risk, needing the node's state: flushing an export
//! with a deadline, one assessment, the monitor that repeats it, and a stop's wait. What
//! the verdict is and what it refuses is the parent module's.

use super::{lock, AtRisk, Risk, Stop, CHECK_EVERY, FLUSH_WAIT, WRITERS};
use crate::reserve::{self, Reserve};
use crate::state::ControlPlane;
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Instant;

impl Risk {
    /// Flushes `export` on a thread of its own and waits up to [`FLUSH_WAIT`]; a flush
    /// still running from an earlier assessment is not doubled.
    fn flush(&self, state: &Arc<ControlPlane>, export: &str) -> Result<(), String> {
        if !lock(&self.flushing).insert(export.to_string()) {
            return Err(format!(
                "an earlier flush has not answered for over {} s",
                FLUSH_WAIT.as_secs()
            ));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (st, e, flushing) = (state.clone(), export.to_string(), self.flushing.clone());
        let spawned = std::thread::Builder::new()
            .name("risk-flush".into())
            .spawn(move || {
                let res = st.cache_node().flush_parallel(&e, WRITERS);
                lock(&flushing).remove(&e);
                let _ = tx.send(res.map_err(|err| err.to_string()));
            });
        if let Err(err) = spawned {
            lock(&self.flushing).remove(export);
            return Err(err.to_string());
        }
        match rx.recv_timeout(FLUSH_WAIT) {
            Ok(res) => res,
            Err(_) => Err(format!(
                "the backend did not answer a flush within {} s",
                FLUSH_WAIT.as_secs()
            )),
        }
    }
}

/// One assessment (see the module docs): `None` when every dirty block can be written back
/// or kept, else what is at risk. Blocks while flushing (up to [`FLUSH_WAIT`] per export).
pub fn assess(state: &Arc<ControlPlane>, reserve: &Reserve) -> Option<AtRisk> {
    let node = state.cache_node();
    let bs = node.block_size() as u64;
    let dirty = node.dirty_blocks() as u64;
    if dirty == 0 || reserve.holds(reserve::size_for_blocks(dirty, bs)) {
        return None;
    }
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    let mut backend_error = None;
    for (export, n) in node.dirty_by_export() {
        if let Err(e) = state.risk().flush(state, &export) {
            backend_error.get_or_insert(e);
            refused.insert(export, n);
        }
    }
    let backend_error = backend_error?;
    let left = node.dirty_blocks() as u64;
    match reserve.grow(reserve::size_for_blocks(left, bs)) {
        Ok(()) => None,
        Err(e) => Some(AtRisk {
            blocks: refused.values().sum(),
            exports: refused.into_keys().collect(),
            backend_error,
            disk_full: e.source.kind() == io::ErrorKind::StorageFull
                || e.source.raw_os_error() == Some(28),
            room_error: format!("{}: {}", e.path.display(), e.source),
        }),
    }
}

/// Assesses the node every [`CHECK_EVERY`] on a thread of its own, until the node is
/// dropped; a stop takes over the assessments ([`wait_while_at_risk`]).
pub fn spawn_monitor(
    state: &Arc<ControlPlane>,
    reserve: Arc<Reserve>,
) -> io::Result<std::thread::JoinHandle<()>> {
    let weak = Arc::downgrade(state);
    std::thread::Builder::new()
        .name("dirty-risk".into())
        .spawn(move || loop {
            std::thread::sleep(CHECK_EVERY);
            let Some(state) = weak.upgrade() else { return };
            if state.risk().stopping() {
                return;
            }
            let verdict = assess(&state, &reserve);
            state.risk().set(verdict);
        })
}

/// At a stop: assesses the node again and again, every [`CHECK_EVERY`], while exports are
/// at risk, unless `discard` or a [`Stop::Discard`] comes through `stop`. Returns whether
/// the stop goes on with blocks still at risk (they may then be dropped).
pub async fn wait_while_at_risk(
    state: &Arc<ControlPlane>,
    reserve: &Arc<Reserve>,
    stop: &mut tokio::sync::watch::Receiver<Stop>,
    discard: bool,
) -> bool {
    let mut waited = None;
    loop {
        let (st, r) = (state.clone(), reserve.clone());
        let assessing = tokio::task::spawn_blocking(move || assess(&st, &r));
        let verdict = tokio::select! {
            v = assessing => v.ok().flatten(),
            Ok(_) = stop.wait_for(|s| *s == Stop::Discard) => state.risk().at_risk(),
        };
        state.risk().set(verdict);
        let Some(s) = state.risk().at_risk() else {
            if let Some(t0) = waited {
                tracing::info!(waited = ?Instant::elapsed(&t0), "the stop goes on: no dirty block at risk any more");
            }
            return false;
        };
        let why = if discard {
            Some("--discard-dirty")
        } else if *stop.borrow() == Stop::Discard {
            Some("a second signal")
        } else {
            None
        };
        if let Some(why) = why {
            tracing::error!(blocks = s.blocks, exports = ?s.exports,
                "the stop goes on at the operator's request ({why}) although acknowledged dirty blocks are at risk");
            return true;
        }
        if waited.is_none() {
            waited = Some(Instant::now());
            tracing::error!(blocks = s.blocks, exports = ?s.exports,
                "the stop waits: acknowledged dirty blocks exist nowhere else; reads are served, writes refused; \
                 heal the backend or free space in the data directory, or send a second signal (or start with \
                 --discard-dirty) to drop them");
        }
        tokio::select! {
            _ = tokio::time::sleep(CHECK_EVERY) => {}
            Ok(()) = stop.changed() => {}
        }
    }
}
