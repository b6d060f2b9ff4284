//! Dirty data at risk: acknowledged dirty blocks that neither their backend nor the data
//! directory can take, so that they exist nowhere but in this process's memory.
//!
//! The node never lets such blocks go by exiting. Every [`CHECK_EVERY`] it assesses its
//! dirty blocks ([`assess`]):
//!
//! 1. none, or the recovery reserve ([`crate::reserve`]) holds room for all of them: safe
//!    (with the default reserve, the whole cache, this is always so);
//! 2. else the exports holding them are flushed (their dirty blocks written back): if every
//!    flush succeeds, safe;
//! 3. else the reserve is grown to hold what is still dirty: if the disk has room, safe
//!    (a stop can keep them in the recovery file);
//! 4. else the exports whose flush failed are **at risk**.
//!
//! While exports are at risk, writes to them are refused (ENOSPC when the disk is full, EIO
//! otherwise: nothing more is acknowledged that the node could not keep), reads go on,
//! the node logs an error, `/healthz` answers 503 `{"status": "at-risk", "dirty_at_risk":
//! ...}` and `/metrics` shows `lachesis_dirty_at_risk_blocks`; the assessment is retried
//! every second, so the state ends by itself once the backend heals or space is freed.
//!
//! **A stop waits.** From the moment a stop is asked, every write is refused (ESHUTDOWN).
//! If exports are at risk then, the stop waits, serving reads, and assesses again every
//! second ([`wait_while_at_risk`]); only when nothing is at risk does it drain the NBD
//! server and write back or keep what is dirty (`crate::recovery`). A second signal
//! ([`Stop::Discard`]) or `lachesis serve --discard-dirty` (`[node] discard_dirty`) ends
//! the wait: the stop goes on and, if the blocks still cannot be kept, the node exits
//! non-zero naming how many acknowledged blocks were dropped.
//!
//! A flush that does not answer within [`FLUSH_WAIT`] (a hung backend) counts as failed;
//! it is left running, and no other is started for that export until it ends.

use api::node::DirtyAtRisk;
use std::collections::BTreeSet;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

mod assess;

pub use assess::{assess, spawn_monitor, wait_while_at_risk};

/// How often the node assesses its dirty blocks.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The longest an assessment waits for one export's flush.
pub const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// Dirty blocks written back at once by an assessment's flush.
const WRITERS: usize = 4;

/// ESHUTDOWN on Linux: what a write gets once a stop was asked (NBD's `NBD_ESHUTDOWN`).
const ESHUTDOWN: i32 = 108;

/// What a stop was asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Serving.
    Serve,
    /// Stop: write dirty blocks back or keep them; wait while they can be neither.
    Stop,
    /// Stop now, even if dirty blocks can be neither written back nor kept (a second
    /// signal).
    Discard,
}

/// Exports whose dirty blocks neither the backend nor the data directory can take.
#[derive(Clone, Debug, PartialEq)]
pub struct AtRisk {
    /// The exports.
    pub exports: Vec<String>,
    /// Their dirty blocks.
    pub blocks: usize,
    /// Why their backends do not take them.
    pub backend_error: String,
    /// Why the data directory cannot keep them.
    pub room_error: String,
    /// Whether the data directory is full (writes are then refused with ENOSPC).
    pub disk_full: bool,
}

/// The node's knowledge of dirty data at risk, and whether a stop was asked.
#[derive(Default)]
pub struct Risk {
    now: Mutex<Option<(AtRisk, Instant)>>,
    stopping: AtomicBool,
    /// Exports whose flush, started by an assessment, has not ended yet.
    flushing: Arc<Mutex<BTreeSet<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Risk {
    /// What is at risk now, if anything.
    pub fn at_risk(&self) -> Option<AtRisk> {
        lock(&self.now).as_ref().map(|(a, _)| a.clone())
    }

    /// What is at risk now, as `/healthz` shows it.
    pub fn status(&self) -> Option<DirtyAtRisk> {
        lock(&self.now).as_ref().map(|(a, since)| DirtyAtRisk {
            exports: a.exports.clone(),
            blocks: a.blocks,
            backend_error: a.backend_error.clone(),
            room_error: a.room_error.clone(),
            disk_full: a.disk_full,
            since_secs: since.elapsed().as_secs_f64(),
            stop_waiting: self.stopping(),
        })
    }

    /// Whether a stop was asked.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// From now on every write is refused: a stop was asked.
    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// The error a write (or trim, or zeroing) of `export` gets now, if it is refused.
    pub fn refusal(&self, export: &str) -> Option<io::Error> {
        if self.stopping() {
            return Some(io::Error::from_raw_os_error(ESHUTDOWN));
        }
        let now = lock(&self.now);
        let (a, _) = now.as_ref()?;
        if !a.exports.iter().any(|e| e == export) {
            return None;
        }
        let kind = if a.disk_full {
            io::ErrorKind::StorageFull
        } else {
            io::ErrorKind::Other
        };
        Some(io::Error::new(
            kind,
            format!(
                "export `{export}` refuses writes: {} acknowledged dirty block(s) can be neither \
                 written back ({}) nor kept in the data directory ({})",
                a.blocks, a.backend_error, a.room_error
            ),
        ))
    }

    /// Records an assessment, logging when the state begins, changes or ends.
    pub fn set(&self, verdict: Option<AtRisk>) {
        let mut now = lock(&self.now);
        match (now.as_mut(), verdict) {
            (None, None) => {}
            (Some((was, since)), None) => {
                tracing::info!(exports = ?was.exports, after = ?since.elapsed(),
                    "dirty blocks no longer at risk: written back or room to keep them");
                *now = None;
            }
            (Some((was, _)), Some(v)) => {
                if was.exports != v.exports {
                    tracing::error!(exports = ?v.exports, blocks = v.blocks,
                        backend = %v.backend_error, room = %v.room_error,
                        "acknowledged dirty blocks at risk (changed); writes to these exports are refused");
                }
                *was = v;
            }
            (None, Some(v)) => {
                tracing::error!(exports = ?v.exports, blocks = v.blocks,
                    backend = %v.backend_error, room = %v.room_error,
                    "acknowledged dirty blocks at risk: neither the backend nor the data directory \
                     can take them; writes to these exports are refused, reads go on, retrying \
                     every second; heal the backend or free space in the data directory");
                *now = Some((v, Instant::now()));
            }
        }
    }
}
