//! Stopping a runtime: at once ([`Runtime::shutdown`]), or after the connections whose
//! streams were dropped have finished closing ([`Runtime::shutdown_linger`]); then taking
//! the device back ([`Runtime::take_device`]).

use super::{lock, Runtime, RuntimeDevice};
use crate::phy::Wakeup;
use crate::stack::Stack;
use core::time::Duration;
use std::sync::atomic::Ordering;

/// Whether nothing is left of the stack's connections but TIME-WAIT entries: every close
/// has run its FIN exchange (RFC 9293 §3.6), or given up, or been reset.
pub(super) fn drained(stack: &Stack) -> bool {
    let tcp = stack.tcp();
    tcp.connections() <= tcp.time_wait()
}

impl Runtime {
    /// Stop: reset what is open, send the resets, wake every blocked thread with
    /// `ConnectionAborted`, and join the protocol thread. Idempotent; drop calls it.
    pub fn shutdown(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        {
            let mut g = self.shared.lock();
            g.closed = true;
            g.wake_all_tasks();
            self.shared.wake_all(&mut g);
        }
        self.shared.stopping.store(true, Ordering::Release);
        self.shared.bell.eventfd.wake();
        let _ = thread.join();
        // Anyone who slipped in before `closed` was seen is woken again.
        let mut g = self.shared.lock();
        g.wake_all_tasks();
        self.shared.wake_all(&mut g);
    }

    /// Stop gracefully: wait up to `linger` for every connection to finish closing (a
    /// dropped stream's FIN sent after its queued data and acknowledged, the peer's FIN
    /// answered; TIME-WAIT entries do not count), then [`shutdown`](Self::shutdown), which
    /// resets whatever is still open. As `SO_LINGER` with a timeout does for one socket,
    /// for the whole stack: a program that drops its streams and exits this way lets its
    /// last bytes and FINs arrive, where a plain shutdown would reset them. Streams still
    /// held are not closed by this; drop them first. Returns whether every connection
    /// finished closing in time.
    pub fn shutdown_linger(&mut self, linger: Duration) -> bool {
        if self.thread.is_none() {
            return false;
        }
        let shared = &*self.shared;
        let until = std::time::Instant::now() + linger;
        shared.lingering.store(true, Ordering::Relaxed);
        let mut g = shared.lock();
        let done = loop {
            if drained(&g.stack) {
                break true;
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break false;
            }
            // Rounds run in other threads (the protocol thread's timers and the device
            // wake it) and notify `drained` under this lock, after looking at the stack.
            g = shared.drained.wait_timeout(g, left).unwrap_or_else(|e| e.into_inner()).0;
        };
        drop(g);
        shared.lingering.store(false, Ordering::Relaxed);
        self.shutdown();
        done
    }

    /// The device the runtime was started with, once it has stopped
    /// ([`shutdown`](Self::shutdown) or [`shutdown_linger`](Self::shutdown_linger)): for its
    /// counters, or a capture to flush. `None` while it runs, when taken already, or when
    /// `D` is not the device's type.
    pub fn take_device<D: RuntimeDevice>(&mut self) -> Option<D> {
        if self.thread.is_some() {
            return None;
        }
        let mut slot = lock(&self.shared.stopped_device);
        match slot.take()?.downcast::<D>() {
            Ok(d) => Some(*d),
            Err(other) => {
                *slot = Some(other);
                None
            }
        }
    }
}
