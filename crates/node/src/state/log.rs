//! A cache's durable write log at creation: what an earlier run left in it replayed
//! through the node, the exports it names flushed (or, when the backend refuses them, the
//! records kept in the recovery file for the start to write through the caches), the
//! replayed files deleted, and a new log attached.

use super::ControlPlane;
use crate::error::NodeError;
use cache::write_log::LogRecord;
use cache::{CacheId, DirtyBlock};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

impl ControlPlane {
    /// Replays what an earlier run left in the durable write log at `path` (relative to
    /// the data directory) straight through the node (the new cache has no rule yet, so
    /// the records reach the backends or the caches routing them), flushes the exports
    /// they name, deletes the replayed files and attaches a new log to cache `id`. A
    /// torn tail is ignored with a warning; a corrupt record or an unknown export is an
    /// error naming the file.
    ///
    /// At a start (`at_start`), a backend that refuses the records (a write or the flush
    /// fails: it is down, or full) does not stop it: the records, newest last, go into the recovery file
    /// ahead of what it held (which is newer: a stop wrote it after these records), that
    /// file is synced before the log's files are deleted, and the start's
    /// [`crate::recovery::replay_recovery`] writes them through the caches once the rules
    /// exist (into this cache's new log where it routes them), so reads see them and
    /// nothing exists only in memory. A crash after the file is synced and before the log's
    /// files are gone replays the log again at the next start: its records go ahead of the
    /// file's blocks once more, the same ones the file holds already, so the newest bytes
    /// still win. Later (a cache created through the API, with no rule
    /// yet) such a backend is an error and the log's files are left as they are.
    pub(super) fn open_log(
        &self,
        id: CacheId,
        path: &Path,
        at_start: bool,
    ) -> Result<(), NodeError> {
        let path = match &self.data_dir {
            Some(d) if path.is_relative() => d.join(path),
            _ => path.to_path_buf(),
        };
        let gens = cache::write_log::generations(&path).map_err(|e| at(&path, e.to_string()))?;
        let mut records = Vec::new();
        for (_, file) in &gens {
            let f = cache::write_log::read_log(file).map_err(|e| at(file, e.to_string()))?;
            if let Some(t) = &f.torn_tail {
                tracing::warn!(file = %file.display(), "write log: ignoring a torn last record ({t})");
            }
            records.extend(f.records);
        }
        match self.replay_through(&records) {
            Ok(()) => {}
            Err(cache::CacheError::Io { export, source }) if at_start => {
                let recovery = match &self.data_dir {
                    Some(d) => d.join(crate::RECOVERY_FILE),
                    None => Path::new(crate::RECOVERY_FILE).to_path_buf(),
                };
                let blocks = self.keep_for_recovery(&records, &recovery)?;
                tracing::warn!(
                    log = %path.display(), %export, error = %source, blocks,
                    recovery = %recovery.display(),
                    "the backend refuses the write log's records; they are kept in the recovery file and written through the caches at this start"
                );
            }
            Err(e) => return Err(at(&path, format!("replaying the write log: {e}"))),
        }
        for (_, file) in &gens {
            std::fs::remove_file(file).map_err(|e| at(file, e.to_string()))?;
        }
        if !gens.is_empty() {
            tracing::info!(log = %path.display(), files = gens.len(), records = records.len(), "replayed the write log");
        }
        let log =
            cache::write_log::WriteLog::create(&path, &[]).map_err(|e| at(&path, e.to_string()))?;
        self.cache.set_log(id, Some(Arc::new(log)))?;
        Ok(())
    }

    /// Writes `records` straight through the node, in order, then flushes every export
    /// they name.
    fn replay_through(&self, records: &[LogRecord]) -> Result<(), cache::CacheError> {
        let mut exports = std::collections::BTreeSet::new();
        for r in records {
            match r {
                LogRecord::Write {
                    export,
                    offset,
                    data,
                } => {
                    self.cache
                        .write(export, "log-replay", *offset, data, false)?;
                    exports.insert(export);
                }
                LogRecord::Trim {
                    export,
                    offset,
                    len,
                } => {
                    self.cache.trim(export, "log-replay", *offset, *len)?;
                    exports.insert(export);
                }
            }
        }
        for e in exports {
            self.cache.flush(e)?;
        }
        Ok(())
    }

    /// Puts `records` (a trim as the zeros it reads back as) in the recovery file at
    /// `file`, ahead of the blocks it holds, and syncs it; returns how many extents it
    /// added. A write superseded by a later one of the same extent is left out.
    fn keep_for_recovery(&self, records: &[LogRecord], file: &Path) -> Result<usize, NodeError> {
        let bs = self.cache.block_size() as u64;
        let mut kept: Vec<Option<DirtyBlock>> = Vec::new();
        let mut newest: HashMap<(String, u64, usize), usize> = HashMap::new();
        let mut zeros = 0u64;
        let mut keep = |b: DirtyBlock| {
            let key = (b.export.clone(), b.offset, b.data.len());
            if let Some(old) = newest.insert(key, kept.len()) {
                kept[old] = None;
            }
            kept.push(Some(b));
        };
        for r in records {
            match r {
                LogRecord::Write {
                    export,
                    offset,
                    data,
                } => keep(DirtyBlock {
                    export: export.clone(),
                    offset: *offset,
                    data: data.clone(),
                }),
                LogRecord::Trim {
                    export,
                    offset,
                    len,
                } => {
                    zeros += len;
                    if zeros > MAX_TRIMMED_KEPT {
                        return Err(at(
                            file,
                            format!(
                                "the write log's trims cover more than {MAX_TRIMMED_KEPT} bytes: too much to keep as zeros while the backend refuses them"
                            ),
                        ));
                    }
                    let end = offset + len;
                    let mut o = *offset;
                    while o < end {
                        let n = (bs - o % bs).min(end - o);
                        keep(DirtyBlock {
                            export: export.clone(),
                            offset: o,
                            data: vec![0; n as usize],
                        });
                        o += n;
                    }
                }
            }
        }
        let mut blocks: Vec<DirtyBlock> = kept.into_iter().flatten().collect();
        let added = blocks.len();
        if file.exists() {
            blocks.extend(cache::recovery::read(file).map_err(|e| at(file, e.to_string()))?);
        }
        cache::recovery::write(file, &blocks).map_err(|e| at(file, e.to_string()))?;
        Ok(added)
    }
}

/// The most trimmed bytes a write log may carry into the recovery file (as zeros) when
/// the backend refuses them: past it the start fails naming the log (a whole-disk discard
/// would otherwise become a file the size of the disk).
const MAX_TRIMMED_KEPT: u64 = 256 << 20;

/// An error about `file`.
fn at(file: &Path, msg: String) -> NodeError {
    NodeError::Config {
        file: file.display().to_string(),
        msg,
    }
}
