//! Where the controller's state lives between restarts: a small key-value space written in
//! all-or-nothing batches (tenants, nodes, the `control` state) and an append-only history
//! of decisions.
//!
//! [`SqliteStore`] is the embedded default (one file, `rusqlite` with SQLite bundled):
//! every [`Store::put`] batch is one SQLite transaction, so a rejected or interrupted
//! change leaves the previous values whole.

use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::Mutex;

/// Key of the tenants (JSON list of `TenantConfig`).
pub const TENANTS: &str = "tenants";
/// Key of the node registry (JSON list).
pub const NODES: &str = "nodes";
/// Key of the `control` state (JSON).
pub const STATE: &str = "control_state";

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored value does not parse.
    #[error("stored `{key}`: {msg}")]
    Corrupt {
        /// The key.
        key: String,
        /// What is wrong.
        msg: String,
    },
    /// The backend refused or could not be reached.
    #[error("{0}")]
    Backend(String),
    /// The store's files or directory could not be created or made private.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// One decision kept in the history: the contract's type.
pub use api::controller::HistoryEntry;

/// A persistent store of the controller's state.
pub trait Store: Send + Sync {
    /// The value under `key`.
    fn get(&self, key: &str) -> Result<Option<String>, StoreError>;
    /// Writes every `(key, value)` (`None` deletes) at once, or none.
    fn put(&self, batch: &[(&str, Option<String>)]) -> Result<(), StoreError>;
    /// Appends decisions.
    fn append_history(&self, entries: &[HistoryEntry]) -> Result<(), StoreError>;
    /// The last `limit` decisions, newest last, of `tenant` (or all).
    fn history(&self, tenant: Option<&str>, limit: usize) -> Result<Vec<HistoryEntry>, StoreError>;
    /// What the store is (`sqlite:PATH`).
    fn describe(&self) -> String;
}

/// Reads and parses a JSON value.
pub fn get_json<T: serde::de::DeserializeOwned>(
    s: &dyn Store,
    key: &str,
) -> Result<Option<T>, StoreError> {
    match s.get(key)? {
        None => Ok(None),
        Some(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                key: key.into(),
                msg: e.to_string(),
            }),
    }
}

/// The embedded SQLite store.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: String,
}

impl SqliteStore {
    /// Opens (creating) the database at `path`: the database, its `-wal` and `-shm`
    /// are mode 0600 and a directory created for it 0700 (see [`crate::private`]).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(d) = path.parent() {
            crate::private::create_dir(d)?;
        }
        // Created 0600 before SQLite opens it: SQLite gives `-wal` and `-shm` the
        // database's own mode.
        crate::private::file(path)?;
        crate::private::tighten_dir_of(path)?;
        let conn = Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=NORMAL;
             CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS history (
                 id INTEGER PRIMARY KEY AUTOINCREMENT,
                 interval INTEGER NOT NULL, time REAL NOT NULL,
                 tenant TEXT NOT NULL, detail TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS history_tenant ON history (tenant, id);",
        )?;
        // Files an older controller left readable.
        for f in crate::private::sqlite_files(path) {
            crate::private::tighten(&f)?;
        }
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            path: path.display().to_string(),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Store for SqliteStore {
    fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn()
            .query_row("SELECT value FROM kv WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    fn put(&self, batch: &[(&str, Option<String>)]) -> Result<(), StoreError> {
        let mut c = self.conn();
        let tx = c.transaction()?;
        for (k, v) in batch {
            match v {
                Some(v) => tx.execute(
                    "INSERT INTO kv (key, value) VALUES (?1, ?2)
                     ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    params![k, v],
                )?,
                None => tx.execute("DELETE FROM kv WHERE key = ?1", [k])?,
            };
        }
        tx.commit()?;
        Ok(())
    }

    fn append_history(&self, entries: &[HistoryEntry]) -> Result<(), StoreError> {
        let mut c = self.conn();
        let tx = c.transaction()?;
        {
            // One parse of the statement for the whole batch (a row per volume).
            let mut insert = tx.prepare_cached(
                "INSERT INTO history (interval, time, tenant, detail) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for e in entries {
                insert.execute(params![
                    e.interval as i64,
                    e.time,
                    e.tenant,
                    e.detail.to_string()
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn history(&self, tenant: Option<&str>, limit: usize) -> Result<Vec<HistoryEntry>, StoreError> {
        let c = self.conn();
        let mut st = c.prepare(
            "SELECT interval, time, tenant, detail FROM history
             WHERE (?1 IS NULL OR tenant = ?1) ORDER BY id DESC LIMIT ?2",
        )?;
        let rows = st.query_map(params![tenant, limit as i64], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, f64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (interval, time, tenant, detail) = row?;
            out.push(HistoryEntry {
                interval: interval as u64,
                time,
                tenant,
                detail: serde_json::from_str(&detail).unwrap_or(serde_json::Value::Null),
            });
        }
        out.reverse();
        Ok(out)
    }

    fn describe(&self) -> String {
        format!("sqlite:{}", self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_atomic_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.db");
        {
            let s = SqliteStore::open(&p).unwrap();
            s.put(&[("a", Some("1".into())), ("b", Some("2".into()))])
                .unwrap();
            s.put(&[("a", None)]).unwrap();
            s.append_history(&[
                HistoryEntry {
                    interval: 1,
                    time: 1.0,
                    tenant: "x".into(),
                    detail: serde_json::json!({"l1": 5}),
                },
                HistoryEntry {
                    interval: 1,
                    time: 1.0,
                    tenant: "y".into(),
                    detail: serde_json::json!({"l1": 6}),
                },
            ])
            .unwrap();
        }
        let s = SqliteStore::open(&p).unwrap();
        assert_eq!(s.get("a").unwrap(), None);
        assert_eq!(s.get("b").unwrap().as_deref(), Some("2"));
        let h = s.history(Some("y"), 10).unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].detail["l1"], 6);
        assert_eq!(s.history(None, 10).unwrap().len(), 2);
        assert_eq!(s.history(None, 1).unwrap()[0].tenant, "y");
    }
}
