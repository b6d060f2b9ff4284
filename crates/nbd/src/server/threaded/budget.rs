//! The payload budget of one connection's handed-off requests: a request takes its
//! payload's share before it is handed off and gives it back once its reply is on the
//! socket, so a client that never collects its replies costs bounded memory.

use std::sync::{Condvar, Mutex};

use super::lock;
use crate::server::admission::IN_FLIGHT_KIB;

/// The payload budget of one connection's handed-off requests, in KiB.
pub(super) struct Budget {
    pub(super) used_kib: Mutex<u32>,
    pub(super) freed: Condvar,
}

impl Budget {
    fn lock(&self) -> std::sync::MutexGuard<'_, u32> {
        lock(&self.used_kib)
    }

    /// Take `kib` without waiting, if it is free.
    pub(super) fn try_acquire(&self, kib: u32) -> bool {
        let mut used = self.lock();
        let ok = *used + kib <= IN_FLIGHT_KIB;
        if ok {
            *used += kib;
        }
        ok
    }

    /// Wait for `kib` (at most the whole budget).
    pub(super) fn acquire(&self, kib: u32) {
        let mut used = self.lock();
        while *used + kib > IN_FLIGHT_KIB {
            used = self.freed.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        *used += kib;
    }

    pub(super) fn release(&self, kib: u32) {
        *self.lock() -= kib;
        self.freed.notify_all();
    }
}
