//! A cache's durable write log at creation: what an earlier run left in it replayed
//! through the node, the exports it names flushed, the replayed files deleted, and a new
//! log attached.

use super::ControlPlane;
use crate::error::NodeError;
use cache::CacheId;
use std::path::Path;
use std::sync::Arc;

impl ControlPlane {
    /// Replays what an earlier run left in the durable write log at `path` (relative to
    /// the data directory) straight through the node (the new cache has no rule yet, so
    /// the records reach the backends or the caches routing them), flushes the exports
    /// they name, deletes the replayed files and attaches a new log to cache `id`. A
    /// torn tail is ignored with a warning; a corrupt record, an unknown export or a
    /// backend that refuses the data is an error naming the file.
    pub(super) fn open_log(&self, id: CacheId, path: &Path) -> Result<(), NodeError> {
        let path = match &self.data_dir {
            Some(d) if path.is_relative() => d.join(path),
            _ => path.to_path_buf(),
        };
        let err = |file: &Path, msg: String| NodeError::Config {
            file: file.display().to_string(),
            msg,
        };
        let gens = cache::write_log::generations(&path).map_err(|e| err(&path, e.to_string()))?;
        let mut exports = std::collections::BTreeSet::new();
        let mut replayed = 0usize;
        for (_, file) in &gens {
            let f = cache::write_log::read_log(file).map_err(|e| err(file, e.to_string()))?;
            if let Some(t) = &f.torn_tail {
                tracing::warn!(file = %file.display(), "write log: ignoring a torn last record ({t})");
            }
            for (i, r) in f.records.iter().enumerate() {
                let (export, res) = match r {
                    cache::write_log::LogRecord::Write {
                        export,
                        offset,
                        data,
                    } => (
                        export,
                        self.cache.write(export, "log-replay", *offset, data, false),
                    ),
                    cache::write_log::LogRecord::Trim {
                        export,
                        offset,
                        len,
                    } => (export, self.cache.trim(export, "log-replay", *offset, *len)),
                };
                res.map_err(|e| err(file, format!("replaying record {i}: {e}")))?;
                exports.insert(export.clone());
                replayed += 1;
            }
        }
        for e in &exports {
            self.cache
                .flush(e)
                .map_err(|e| err(&path, format!("flushing the replayed writes: {e}")))?;
        }
        for (_, file) in &gens {
            std::fs::remove_file(file).map_err(|e| err(file, e.to_string()))?;
        }
        if !gens.is_empty() {
            tracing::info!(log = %path.display(), files = gens.len(), records = replayed, "replayed the write log");
        }
        let log = cache::write_log::WriteLog::create(&path, &[])
            .map_err(|e| err(&path, e.to_string()))?;
        self.cache.set_log(id, Some(Arc::new(log)))?;
        Ok(())
    }
}
