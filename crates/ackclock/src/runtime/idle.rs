//! Packet memory given back when the device is quiet
//! ([`RuntimeConfig::keep_idle_memory`](super::RuntimeConfig::keep_idle_memory)).

use super::{Shared, IDLE_MEMORY_AFTER, IDLE_MEMORY_KEPT};
use crate::buf::Pool;
use core::time::Duration;
use std::sync::atomic::Ordering;

/// The protocol thread's watch on a quiet device ([`RuntimeConfig::keep_idle_memory`]).
pub(super) struct IdleMemory {
    /// The stack's pool and the device's.
    pools: Vec<Pool>,
    /// Frames moved when the thread last saw a change, and when that was.
    seen: u64,
    since: std::time::Instant,
    /// Memory was given back since then.
    released: bool,
}

impl IdleMemory {
    /// A watch over `pools` (the stack's, and the device's if it has one), quiet since now.
    pub(super) fn new(pools: Vec<Pool>) -> IdleMemory {
        IdleMemory { pools, seen: 0, since: std::time::Instant::now(), released: false }
    }

    /// Look at the frames moved now: give the pools' idle memory back once they have not
    /// changed for [`IDLE_MEMORY_AFTER`], and say how long until that is due (`None`:
    /// nothing to wait for).
    pub(super) fn check(&mut self, shared: &Shared) -> Option<Duration> {
        let moved = shared.frames_moved.load(Ordering::Relaxed);
        let now = std::time::Instant::now();
        if moved != self.seen {
            (self.seen, self.since, self.released) = (moved, now, false);
        }
        if self.released {
            return None;
        }
        let due = self.since + IDLE_MEMORY_AFTER;
        if now < due {
            return Some(due - now);
        }
        self.released = true;
        let bytes: usize =
            self.pools.iter().map(|p| p.release_free((IDLE_MEMORY_KEPT / p.buffer_size()).max(16))).sum();
        shared.idle_memory_releases.fetch_add(1, Ordering::Relaxed);
        shared.idle_memory_released.fetch_add(bytes as u64, Ordering::Relaxed);
        None
    }
}
