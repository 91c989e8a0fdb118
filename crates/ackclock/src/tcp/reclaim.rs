//! Giving an idle connection's queue storage back.
//!
//! A connection's send and receive queues are vectors of segment handles, and they keep
//! their capacity when they drain: the data path allocates nothing in steady state, and a
//! bulk transfer drains and refills its queues all the time. The out-of-order queue, once a
//! connection has needed one, is kept for the same reason (freeing it at each drain would
//! allocate once per loss episode). What a queue grew to during a transfer would then stay
//! with the connection for as long as it is open: about 30 KB after a bulk transfer through
//! 256 KiB buffers, on a connection that may then sit idle for hours.
//!
//! So a connection that queues data, either way, is listed here, once. A sweep, at most once
//! every [`RECLAIM_IDLE`] and only while the list is not empty, gives back the storage of every listed
//! connection that has had all queues empty and sent and received nothing for
//! [`RECLAIM_IDLE`]: the connection is then as small as one that never carried data. A
//! connection that is still busy stays listed; one that is idle leaves the list, and the
//! sweep stops with the last of them, so an idle stack arms no timer (the per-poll work
//! follows the events, not the connection count). The hysteresis keeps reallocation out of
//! transfers: ten seconds is longer than the stalls of a transfer under loss (a backed-off
//! retransmission timer), so a connection regrows its queues only after a real pause.
//!
//! Linux gives a socket's memory back as its queues drain (`sk_mem_reclaim`), and its queues
//! are lists of buffers with no storage of their own; this is the same end state, reached
//! after ten to twenty idle seconds.

use super::rxq::RxQueue;
use super::tcb::{LazyOoo, Tcb};
use super::Tcp;
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// How long a connection stays quiet, queues empty, before its queue storage is given back;
/// also the sweep's period.
pub(crate) const RECLAIM_IDLE: Duration = Duration::from_secs(10);

impl Tcb {
    /// Queue storage this connection holds beyond its fixed size.
    fn holds_queue_storage(&self) -> bool {
        self.sndq.capacity() > 0 || self.rcvq.capacity() > 0 || self.ooo.is_allocated()
    }

    /// Nothing queued either way, and no segment sent or received since `since`.
    fn quiet_since(&self, since: Instant) -> bool {
        self.sndq.is_empty()
            && self.rcvq.is_empty()
            && self.ooo.is_empty()
            && self.last_send <= since
            && self.last_rcv <= since
    }

    /// Free the drained queues' storage.
    fn release_queue_storage(&mut self) {
        debug_assert!(self.sndq.is_empty() && self.rcvq.is_empty() && self.ooo.is_empty());
        self.sndq = VecDeque::new();
        self.snd_nxt_idx = 0;
        self.rcvq = RxQueue::new();
        self.ooo = LazyOoo::default();
    }
}

impl Tcp {
    /// Connection `idx` queued data: list it for the idle sweep.
    #[inline]
    pub(crate) fn note_queued(&mut self, idx: u32) {
        self.reclaim.mark(idx);
    }

    /// The sweep, when due (from `run_timers`, so at every dispatch): give back the storage
    /// of the listed connections that have been quiet for [`RECLAIM_IDLE`]; keep the busy
    /// ones listed. Returns how many connections gave storage back.
    pub(crate) fn reclaim_idle(&mut self, now: Instant) -> usize {
        if self.reclaim.is_empty() {
            self.reclaim_at = None;
            return 0;
        }
        match self.reclaim_at {
            Some(at) if at <= now => {}
            Some(_) => return 0,
            None => {
                self.reclaim_at = Some(now + RECLAIM_IDLE);
                return 0;
            }
        }
        let since = now - RECLAIM_IDLE;
        let slots = &mut self.slots;
        let mut released = 0;
        self.reclaim.retain(|idx| {
            let Some(tcb) = slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else { return false };
            if !tcb.holds_queue_storage() {
                return false;
            }
            if !tcb.quiet_since(since) {
                return true;
            }
            tcb.release_queue_storage();
            released += 1;
            false
        });
        self.counters.conn_storage_reclaimed += released as u64;
        self.reclaim_at = (!self.reclaim.is_empty()).then(|| now + RECLAIM_IDLE);
        released
    }

    /// When the sweep next runs, if a connection is listed.
    pub(crate) fn reclaim_deadline(&self, now: Instant) -> Option<Instant> {
        if self.reclaim.is_empty() {
            None
        } else {
            Some(self.reclaim_at.unwrap_or(now + RECLAIM_IDLE))
        }
    }
}
