//! The decision history written behind the interval: each interval hands its report's
//! rows to one writer thread ([`HistoryWriter`]), which turns them into history entries
//! (a row per volume and one `*` row) and appends them to the store, so the interval
//! ends once the plan is applied and the state persisted, not once ten thousand rows are
//! in the database.
//!
//! Bounded: at most [`PENDING`] intervals wait to be written; an interval that finds
//! the queue full waits for the writer (a store slower than the intervals slows the
//! loop rather than growing memory). A failed append is logged and returned by the next
//! [`HistoryWriter::append`], so the interval after it reports the error. Reads go
//! through [`HistoryWriter::flush`] first: what an interval recorded is readable once
//! its `tick` has returned. A thread with a channel, written here because it is a loop
//! over `std::sync::mpsc` and the store's calls are blocking.

use crate::error::ServiceError;
use crate::store::{HistoryEntry, Store, StoreError};
use api::controller::Row;
use std::sync::mpsc::{sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Intervals whose history may wait to be written at once.
pub const PENDING: usize = 2;

/// One interval's decisions to record.
pub struct Batch {
    /// The interval number.
    pub interval: u64,
    /// Seconds since the Unix epoch.
    pub time: f64,
    /// A row per volume.
    pub rows: Vec<Row>,
    /// The `*` row's detail (the whole plan).
    pub summary: serde_json::Value,
}

impl Batch {
    /// The history entries of the batch.
    pub fn entries(self) -> Vec<HistoryEntry> {
        let (interval, time) = (self.interval, self.time);
        self.rows
            .into_iter()
            .map(|r| HistoryEntry {
                interval,
                time,
                detail: serde_json::to_value(&r).unwrap_or_default(),
                tenant: r.tenant,
            })
            .chain(std::iter::once(HistoryEntry {
                interval,
                time,
                tenant: "*".into(),
                detail: self.summary,
            }))
            .collect()
    }
}

enum Message {
    Append(Batch),
    Flush(Sender<()>),
}

/// The writer thread and the way to it.
pub struct HistoryWriter {
    tx: Mutex<Option<SyncSender<Message>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    failed: Arc<Mutex<Option<StoreError>>>,
}

impl HistoryWriter {
    /// Starts the writer over `store`.
    pub fn start(store: Arc<dyn Store>) -> std::io::Result<HistoryWriter> {
        let (tx, rx) = sync_channel(PENDING);
        let failed = Arc::new(Mutex::new(None));
        let seen = failed.clone();
        let thread = std::thread::Builder::new()
            .name("history".into())
            .spawn(move || write_all(&*store, rx, &seen))?;
        Ok(HistoryWriter {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            failed,
        })
    }

    fn send(&self, m: Message) -> Result<(), ServiceError> {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match tx {
            Some(tx) => tx
                .send(m)
                .map_err(|_| ServiceError::Internal("the history writer has stopped".into())),
            None => Err(ServiceError::Internal(
                "the history writer has stopped".into(),
            )),
        }
    }

    /// Queues an interval's decisions (waiting while [`PENDING`] intervals are queued);
    /// an earlier append that failed is returned instead, and this one is still queued.
    pub fn append(&self, batch: Batch) -> Result<(), ServiceError> {
        self.send(Message::Append(batch))?;
        match self.failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Waits until everything queued so far is written.
    pub fn flush(&self) -> Result<(), ServiceError> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.send(Message::Flush(tx))?;
        rx.recv()
            .map_err(|_| ServiceError::Internal("the history writer has stopped".into()))
    }
}

impl Drop for HistoryWriter {
    /// Writes what is queued, then stops the thread.
    fn drop(&mut self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

fn write_all(store: &dyn Store, rx: Receiver<Message>, failed: &Mutex<Option<StoreError>>) {
    for m in rx {
        match m {
            Message::Append(b) => {
                let interval = b.interval;
                if let Err(e) = store.append_history(&b.entries()) {
                    tracing::error!(interval, %e, "the interval's history could not be written");
                    *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
            }
            Message::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    fn batch(interval: u64, tenants: &[&str]) -> Batch {
        Batch {
            interval,
            time: 1.0,
            rows: tenants
                .iter()
                .map(|t| Row {
                    tenant: t.to_string(),
                    l1_size: 4096 * interval,
                    ..Default::default()
                })
                .collect(),
            summary: serde_json::json!({"scheme": "fair"}),
        }
    }

    #[test]
    fn every_interval_is_readable_after_a_flush_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("c.db")).unwrap());
        let w = HistoryWriter::start(store.clone()).unwrap();
        for k in 1..=5 {
            w.append(batch(k, &["a", "b"])).unwrap();
        }
        w.flush().unwrap();
        let a = store.history(Some("a"), 100).unwrap();
        assert_eq!(
            a.iter().map(|e| e.interval).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        assert_eq!(a[4].detail["l1_size"], 5 * 4096);
        let all = store.history(Some("*"), 100).unwrap();
        assert_eq!(all.len(), 5);
        assert_eq!(all[0].detail["scheme"], "fair");
        // What is queued at drop is written.
        w.append(batch(6, &["a"])).unwrap();
        drop(w);
        assert_eq!(store.history(Some("a"), 100).unwrap().len(), 6);
    }
}
