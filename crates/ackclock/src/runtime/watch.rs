//! Over a TAP or TUN, an application thread that blocks watches the device itself
//! ([`TapRounds::Watch`](super::TapRounds), the default), so that one busy
//! connection runs as the single-thread loop does: the thread that waits for the peer's
//! frames reads them, processes them, copies its data and sends its ACKs and window updates,
//! with no hand-off to the protocol thread and back.
//!
//! **Who watches.** At most one thread at a time, the *watcher*, sleeps in ppoll(2) on the
//! device's descriptor and on an eventfd of its own; other blocked threads sleep on their
//! eventfd only. The role goes to the thread that blocks most recently: a call's first wait
//! takes it even from another watcher (the newest waiter is the one whose data the next
//! frames most likely carry; the one it was taken from wakes once, on the next frame, and
//! then sleeps without the device), and later waits of the same call take it only when it
//! is free. A watcher woken by the device runs a round itself (reading the device, waking
//! the other waiters whose readiness changed) and tries its call again.
//!
//! **The protocol thread** still runs the timers and answers rings, but sleeps without the
//! device's descriptor while a watcher exists or an application thread is inside a call
//! ([`Watch::nobody`]); else every frame would wake it as well as the thread that is about
//! to read it (a call that runs a round, as every write does, reads the device in it).
//!
//! **When the watcher's call ends** it gives up the role, and when the last thread inside a
//! call leaves, nobody watches the device until a thread blocks or calls again. The thread usually comes back within microseconds (a
//! discard or echo loop, a writer with more to write), so waking the protocol thread at
//! every call's end would be a hand-off per read, the cost this mode exists to avoid.
//! Instead the last thread out lowers the protocol thread's deadline to [`HANDOFF`] from
//! now, unless it is earlier already (the timerfd the protocol thread sleeps on: one system
//! call, no wake-up now, and none at all while a lowered deadline is pending). If no thread
//! watches by then, the protocol thread watches the device again. So frames wait at most
//! `HANDOFF` for a thread that left to do other work, and the protocol thread wakes at most
//! once per `HANDOFF` while watchers come and go.
//!
//! **Window updates.** A watcher's round runs the input half only (read the device,
//! process, wake the waiters), and its call owes the output half: the thread copies its
//! data first, and then sends. So, as in the single-thread loop, the ACK of the data it read
//! goes out after the copy that verified its checksum (no separate pass over the payload:
//! an ACK must not cover unverified data, Jacobson 1993's checksum in the copy), and carries
//! the window the copy opened: one segment where there were two. A read that frees receive
//! space posts its socket's window-update request (DragonFly BSD commit 96c6eb29) and runs
//! no round for it: the owed output half takes it, or the next round. No thread sleeps on a
//! pending request or an owed output (it sends them first), and a call that ends with its
//! socket's request pending hands off as above, so the protocol thread takes it within
//! [`HANDOFF`] if the thread calls no more; the protocol thread looks at the request queue
//! after publishing its deadline (a loom model, `deadline_model`, checks both orders).
//!
//! **The race this must not lose** (a loom model below): a departing thread clears its
//! part (the role, its presence) and then reads the others' and the protocol thread's
//! deadline; the protocol thread publishes its deadline and then reads the role and the
//! presence, each with a sequentially consistent fence between. So either the protocol
//! thread sees nobody and watches the device, or the last thread out sees the deadline it
//! is about to sleep until and lowers it (of two threads leaving at once, at least one sees
//! the other gone). In the other order (read the deadline, then clear), both can miss each
//! other: the protocol thread sleeps without the device until its own timer while nobody
//! watches.

use super::sync::{fence, AtomicU64, Ordering};
use core::time::Duration;

/// How long frames may wait for a watcher to come back before the protocol thread watches
/// the device again (see the module documentation).
pub(crate) const HANDOFF: Duration = Duration::from_millis(1);

/// `owner` when nobody watches.
const NOBODY: u64 = 0;

/// Which thread watches the device.
#[derive(Debug)]
pub(crate) struct Watch {
    owner: AtomicU64,
}

impl Watch {
    pub(crate) fn new() -> Watch {
        Watch { owner: AtomicU64::new(NOBODY) }
    }

    /// Take the role, from whoever has it.
    pub(crate) fn take(&self, id: u64) {
        self.owner.store(id, Ordering::SeqCst);
    }

    /// Take the role if nobody has it. `true`: the caller has it (now or already).
    pub(crate) fn take_if_free(&self, id: u64) -> bool {
        match self.owner.compare_exchange(NOBODY, id, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => true,
            Err(now) => now == id,
        }
    }

    /// Whether `id` has the role.
    pub(crate) fn owns(&self, id: u64) -> bool {
        self.owner.load(Ordering::SeqCst) == id
    }

    /// `id`'s call ends: give up the role if it still has it. `true`: it had.
    pub(crate) fn release(&self, id: u64) -> bool {
        self.owner.compare_exchange(id, NOBODY, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    }

    /// Whether nobody watches the device and no application thread is inside a call
    /// (`present`, read after the fence). Asked by a thread that just gave up the role or
    /// left its call (`true`: it must hand the device back, [`lower`]), and by the protocol
    /// thread after publishing its deadline (`true`: it watches the device itself).
    pub(crate) fn nobody(&self, present: impl FnOnce() -> bool) -> bool {
        fence(Ordering::SeqCst);
        self.owner.load(Ordering::SeqCst) == NOBODY && !present()
    }
}

/// Lower the protocol thread's published deadline (`Shared::sleep_until`, as
/// `rounds::deadline_code` codes it) to `code`. `true`: lowered, and the caller must arm the
/// timerfd. `AWAKE` (0) is never lowered: an awake protocol thread looks at everything
/// before it sleeps.
pub(crate) fn lower(sleep_until: &AtomicU64, code: u64) -> bool {
    let mut cur = sleep_until.load(Ordering::SeqCst);
    loop {
        if cur == super::rounds::AWAKE || cur <= code {
            return false;
        }
        match sleep_until.compare_exchange_weak(cur, code, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
}

#[cfg(all(test, loom))]
mod model {
    //! The hand-off, model-checked: a watcher's call ends while the protocol thread decides
    //! how to sleep. Whatever the interleaving, the protocol thread must either watch the
    //! device or sleep until a deadline no later than the hand-off's. With the watcher
    //! reading the deadline before giving up the role, loom finds the interleaving where
    //! it sleeps without the device until its own, later timer.
    use super::super::sync::loom_finds;
    use super::{lower, Watch};
    use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
    use loom::sync::Arc;

    const FAR: u64 = 1_000_000;
    const HANDOFF_AT: u64 = 10;

    fn check(release_first: bool) {
        loom::model(move || {
            let watch = Arc::new(Watch::new());
            let until = Arc::new(AtomicU64::new(super::super::rounds::AWAKE));
            // Application threads inside a call (the `rounds::Word`'s count).
            let present = Arc::new(AtomicU32::new(1));
            watch.take(7);
            let (w, u, p) = (watch.clone(), until.clone(), present.clone());
            // The watcher's call ends: it gives up the role (`Call`'s drop), then leaves
            // the call (`Presence`'s drop); after each, the last one out hands off.
            let departing = loom::thread::spawn(move || {
                let is_present = || p.load(Ordering::SeqCst) != 0;
                if release_first {
                    if w.release(7) && w.nobody(is_present) {
                        lower(&u, HANDOFF_AT);
                    }
                    p.fetch_sub(1, Ordering::SeqCst);
                    if w.nobody(is_present) {
                        lower(&u, HANDOFF_AT);
                    }
                } else {
                    // Broken: the deadline read before the role is given up and the call
                    // left.
                    let seen = u.load(Ordering::SeqCst);
                    w.release(7);
                    p.fetch_sub(1, Ordering::SeqCst);
                    if seen != super::super::rounds::AWAKE && seen > HANDOFF_AT {
                        u.store(HANDOFF_AT, Ordering::SeqCst);
                    }
                }
            });
            // The protocol thread: publish the deadline, then decide.
            until.store(FAR, Ordering::SeqCst);
            let watches_device = watch.nobody(|| present.load(Ordering::SeqCst) != 0);
            departing.join().unwrap();
            let wakes_at = until.load(Ordering::SeqCst);
            assert!(watches_device || wakes_at <= HANDOFF_AT, "nobody watches the device");
        });
    }

    #[test]
    fn a_departing_watcher_hands_the_device_back() {
        check(true);
    }

    #[test]
    fn reading_the_deadline_first_loses_the_device() {
        loom_finds(|| check(false), "nobody watches the device");
    }
}

/// A watcher id no thread or task has had, never [`NOBODY`].
pub(crate) fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(NOBODY + 1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// How an application thread sleeps in this mode: on an eventfd of its own (and the device's
/// descriptor while it is the watcher), woken by a waker registered as its socket's, so a
/// round in any thread that changes the socket's readiness signals it.
pub(crate) struct Watcher {
    /// Unique per thread, never [`NOBODY`].
    pub id: u64,
    efd: std::sync::Arc<WakeFd>,
    pub waker: std::task::Waker,
}

/// A watcher's eventfd as a waker. A thread never signals its own eventfd: a wake-up from a
/// round it runs itself only marks it woken ([`take_self_woken`]), and the thread looks at
/// that mark before it sleeps. Signalling itself would cost a write now, and later a ppoll
/// that returns at once and a read; not looking would lose the wake-up (a reader whose
/// socket became readable in the round its own thread ran between registering and
/// sleeping slept on, its window closed, until something else woke it).
struct WakeFd {
    fd: super::sys::EventFd,
    /// The [`Watcher::id`] of the thread that sleeps on it.
    owner: u64,
}

std::thread_local! {
    /// The calling thread's [`Watcher::id`], once it has a watcher.
    static CURRENT: core::cell::Cell<u64> = const { core::cell::Cell::new(NOBODY) };
    /// A round this thread ran woke this thread's own socket (see [`WakeFd`]).
    static SELF_WOKEN: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

impl WakeFd {
    fn wake(&self) {
        if CURRENT.with(|c| c.get()) != self.owner {
            crate::phy::Wakeup::wake(&self.fd);
        } else {
            SELF_WOKEN.set(true);
        }
    }
}

/// Whether a round this thread ran woke its own socket since the last call; clears the mark.
/// A thread clears it when it registers its waker and looks at it before it sleeps.
pub(crate) fn take_self_woken() -> bool {
    SELF_WOKEN.replace(false)
}

impl std::task::Wake for WakeFd {
    fn wake(self: std::sync::Arc<Self>) {
        WakeFd::wake(&self);
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        WakeFd::wake(self);
    }
}

impl Watcher {
    fn new() -> Option<Watcher> {
        let id = next_id();
        let efd = std::sync::Arc::new(WakeFd { fd: super::sys::EventFd::new().ok()?, owner: id });
        let waker = std::task::Waker::from(efd.clone());
        CURRENT.with(|c| c.set(id));
        Some(Watcher { id, efd, waker })
    }

    /// The eventfd's descriptor.
    pub fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.efd.fd)
    }

    /// Consume the signals so far.
    pub fn drain(&self) {
        self.efd.fd.drain();
    }

    /// Run `f` with the calling thread's watcher (`None` if its eventfd could not be made;
    /// the thread then waits on its socket's condition variable).
    pub fn with<R>(f: impl FnOnce(Option<&Watcher>) -> R) -> R {
        thread_local! {
            static ME: Option<Watcher> = Watcher::new();
        }
        ME.with(|me| f(me.as_ref()))
    }
}
