//! The window-update request: one per connection, embedded, coalesced (DragonFly BSD
//! commit 96c6eb29, "tcp: Implement asynchronized pru_rcvd").
//!
//! An application thread whose read freed receive space does not decide or send the window
//! update itself; it asks the protocol thread to. The request is a flag per connection
//! (allocated with the runtime, never per read) and the connection's slot index on a queue
//! that can hold every connection once:
//!
//! - the reader [`post`](Requests::post)s: `if !pending.swap(true)` it queues the index (and
//!   the caller wakes the protocol thread). A request already pending absorbs the read: many
//!   reads, one message.
//! - the thread running the next round [`take`](Requests::take)s the queued indices and
//!   marks each request done **before** it computes the window and sends. A read that lands
//!   after that finds the flag clear and posts a fresh request, so its space is advertised
//!   too. That thread is the protocol thread, or over the in-memory pipe possibly an
//!   application thread, even the reader itself (see `rounds`): the handshake is the same,
//!   since rounds never overlap (they hold the engine's lock), and the model below holds
//!   for whichever thread runs them.
//!
//! In the other order (compute and send, then mark done) a read that lands in between sees
//! the request still pending, posts nothing, and the space it freed is never advertised: if
//! the window was zero, the peer waits for a persist probe, or forever on a stack without
//! one. That is the race the DragonFly commit fixes. The loom model below checks both orders
//! on this very code (`RUSTFLAGS="--cfg loom" cargo test -p ackclock --release --lib
//! runtime::wnd_update`).

use super::sync::{lock, AtomicBool, Mutex, Ordering};
use std::collections::VecDeque;

/// Window-update requests of up to `n` connections (slot indices `0..n`).
#[derive(Debug)]
pub(crate) struct Requests {
    pending: Box<[AtomicBool]>,
    /// Bounded by construction: an index is queued only by the post that set its flag, so
    /// it is on the queue at most once and the queue never holds more than `n`.
    queue: Mutex<VecDeque<u32>>,
}

impl Requests {
    /// Requests for slots `0..n`, all allocated now.
    pub(crate) fn new(n: usize) -> Requests {
        Requests {
            pending: (0..n).map(|_| AtomicBool::new(false)).collect(),
            queue: Mutex::new(VecDeque::with_capacity(n)),
        }
    }

    /// The reader's side: ask for a window update for `idx`. Returns true if this call
    /// queued the request (the caller then wakes the protocol thread), false if one was
    /// already pending (it will cover this read) or `idx` is out of range.
    pub(crate) fn post(&self, idx: u32) -> bool {
        let Some(flag) = self.pending.get(idx as usize) else { return false };
        if flag.swap(true, Ordering::AcqRel) {
            return false;
        }
        let mut q = lock(&self.queue);
        // Never grows: at most one entry per index (see `queue`).
        q.push_back(idx);
        true
    }

    /// The protocol thread's side, in the order that loses no update: move every queued
    /// request to `out` and mark each done. The caller computes the windows afterwards.
    pub(crate) fn take(&self, out: &mut Vec<u32>) {
        let start = out.len();
        {
            let mut q = lock(&self.queue);
            out.extend(q.drain(..));
        }
        for &idx in &out[start..] {
            self.done(idx);
        }
    }

    /// Whether a request of `idx` is pending.
    pub(crate) fn is_pending(&self, idx: u32) -> bool {
        self.pending.get(idx as usize).is_some_and(|f| f.load(Ordering::Acquire))
    }

    /// Whether any request is queued (under the queue's lock, so that a post after it
    /// sees what the caller did before).
    pub(crate) fn queued(&self) -> bool {
        !lock(&self.queue).is_empty()
    }

    /// One queued request, still pending (the model test's swapped order uses this with
    /// [`done`](Self::done) after the window is computed; the runtime uses [`take`](Self::take)).
    #[cfg_attr(not(all(loom, test)), allow(dead_code))]
    pub(crate) fn pop(&self) -> Option<u32> {
        lock(&self.queue).pop_front()
    }

    /// Mark the request of `idx` done: the next post queues a new one.
    pub(crate) fn done(&self, idx: u32) {
        if let Some(flag) = self.pending.get(idx as usize) {
            flag.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(not(loom))]
    #[test]
    fn posts_coalesce_until_taken() {
        use super::Requests;
        let r = Requests::new(4);
        assert!(r.post(2), "the first post queues");
        assert!(!r.post(2), "a second post while pending is absorbed");
        assert!(r.post(0));
        assert!(!r.post(9), "out of range: ignored, nothing queued");
        let mut out = Vec::with_capacity(4);
        r.take(&mut out);
        assert_eq!(out, vec![2, 0]);
        assert!(r.post(2), "taken means done: the next read posts again");
        assert_eq!(r.pop(), Some(2));
        assert!(!r.post(2), "popped but not done: still pending");
        r.done(2);
        assert!(r.post(2));
    }

    /// The handshake as the runtime runs it: a reader thread frees receive space twice
    /// under the stack lock and posts after each; the protocol thread takes requests and
    /// advertises the free space it finds under the same lock; the eventfd is modelled by
    /// the protocol thread running rounds until it has seen the reader finish. At the end
    /// the advertised window must equal the free space: no update lost.
    #[cfg(loom)]
    mod model {
        use super::super::super::sync::loom_finds;
        use super::super::Requests;
        use loom::sync::atomic::{AtomicBool, Ordering};
        use loom::sync::{Arc, Mutex};

        struct World {
            requests: Requests,
            /// (free receive space, advertised window): the stack, behind its lock.
            stack: Mutex<(usize, usize)>,
            reader_done: AtomicBool,
        }

        fn advertise(w: &World) {
            let mut s = w.stack.lock().unwrap();
            s.1 = s.0;
        }

        /// The runtime's order: take (marks done), then compute and send.
        fn round_done_first(w: &World) {
            let mut taken = Vec::new();
            w.requests.take(&mut taken);
            for _ in taken {
                advertise(w);
            }
        }

        /// The order before the fix: compute and send, then mark done.
        fn round_done_last(w: &World) {
            while let Some(idx) = w.requests.pop() {
                advertise(w);
                w.requests.done(idx);
            }
        }

        fn check(round: fn(&World)) {
            loom::model(move || {
                let w = Arc::new(World {
                    requests: Requests::new(1),
                    stack: Mutex::new((0, 0)),
                    reader_done: AtomicBool::new(false),
                });
                let r = w.clone();
                let reader = loom::thread::spawn(move || {
                    for _ in 0..2 {
                        r.stack.lock().unwrap().0 += 1; // a read frees space
                        r.requests.post(0);
                    }
                    r.reader_done.store(true, Ordering::SeqCst);
                });
                loop {
                    let last = w.reader_done.load(Ordering::SeqCst);
                    round(&w);
                    if last {
                        break;
                    }
                    loom::thread::yield_now();
                }
                reader.join().unwrap();
                let (free, advertised) = *w.stack.lock().unwrap();
                assert_eq!(advertised, free, "a window update was lost");
            });
        }

        #[test]
        fn done_before_compute_loses_no_update() {
            check(round_done_first);
        }

        #[test]
        fn done_after_compute_loses_an_update() {
            loom_finds(|| check(round_done_last), "a window update was lost");
        }
    }
}
