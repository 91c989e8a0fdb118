//! Output owed to the task that watches the device (`tokio::watch_device`): the flag and
//! waker through which a task's call leaves its output to the watcher on its thread.
//! Built on `runtime::sync`, so that the loom model below runs this code.

use super::sync::{fence, lock, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};
use std::task::Waker;

/// The task that watches the device (`tokio::watch_device`), as the tasks on its thread
/// see it.
///
/// A write or a read's window-update request from such a task owes output. Ringing for it
/// would wake the protocol thread, whose round then reads the device too: the frames would
/// go back to the other core, and the next write would ring again (`ackclock serve`'s
/// chargen on a plain TUN ran 19,617 rounds there against 3,440 in the watcher). Instead the
/// call marks the output owed and wakes the watcher, which sends it when next polled, after
/// the calling task yields: one output half for all the calls the tasks made meanwhile, on
/// the thread that made them. Only for tasks on the watcher's thread (a call on another
/// thread rings as before), and only for calls that do not then wait for the output
/// (tokio's non-blocking calls): a blocking call on the watcher's thread would wait for a
/// watcher that cannot run. A backstop bounds the wait when nothing polls the watcher (the
/// thread's `block_on` returned right after the call, or it blocks on something else): the
/// first owed call lowers the protocol thread's deadline to [`OWED_BACKSTOP`] from now, and
/// the protocol thread's round then sends what is still pending. While a task watches, the
/// protocol thread's rounds begin with the output only and read the device only if a round
/// is wanted after it, so these wake-ups (at most one per backstop interval) do not take
/// the frames from the watcher.
///
/// Whoever sends takes the flag *before* its output, as the window-update request is marked
/// done before the window is computed (DragonFly BSD commit 96c6eb29): a call that queues
/// during that output then owes anew, wakes the watcher again and sets a new backstop. Taken
/// after, such a call would find the flag still set, owe nothing new, and its bytes would
/// wait for an unrelated wake-up (the model below finds it).
#[derive(Debug, Default)]
pub(super) struct TaskWatch {
    /// The watcher's thread ([`thread_token`]), 0 without a watcher.
    thread: AtomicUsize,
    /// Output owed by calls since the watcher last sent.
    owed: AtomicBool,
    /// The watcher's id and waker, as of its last poll.
    waker: Mutex<Option<(u64, Waker)>>,
    /// The id in `waker` (0: none), read without its lock: a watcher whose thread and waker
    /// are published already skips the lock on its next poll.
    owner: AtomicU64,
}

/// How long output owed to the watching task may wait for it before the protocol thread
/// sends it (see [`TaskWatch`]).
pub(super) const OWED_BACKSTOP: std::time::Duration = std::time::Duration::from_millis(10);

/// A token of the calling thread: the address of a thread-local, distinct for every live
/// thread.
pub(super) fn thread_token() -> usize {
    std::thread_local!(static TOKEN: u8 = const { 0 });
    TOKEN.with(|t| t as *const u8 as usize)
}

/// What [`TaskWatch::owe`] did with a call's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Owed {
    /// Not taken (no watcher on this thread): ring as before.
    No,
    /// Taken, the first since the watcher last sent: the caller sets the backstop.
    First,
    /// Taken, owed already.
    Again,
}

impl TaskWatch {
    /// A task's call owes output: the watcher takes it if it runs on this thread.
    pub(super) fn owe(&self) -> Owed {
        self.owe_on(thread_token())
    }

    /// [`owe`](Self::owe) from the thread `token`.
    fn owe_on(&self, token: usize) -> Owed {
        if self.thread.load(Ordering::Acquire) != token {
            return Owed::No;
        }
        if self.owed.swap(true, Ordering::AcqRel) {
            // Owed already: the watcher was woken for it.
            return Owed::Again;
        }
        match &*lock(&self.waker) {
            Some((_, w)) => {
                w.wake_by_ref();
                // Between the flag and the caller's look at the protocol thread's published
                // deadline (`lower_deadline`), as [`owed_now`](Self::owed_now) between that
                // deadline and the flag: either the caller sees the deadline and lowers it,
                // or the protocol thread sees the flag.
                fence(Ordering::SeqCst);
                Owed::First
            }
            None => {
                self.owed.store(false, Ordering::Release);
                Owed::No
            }
        }
    }

    /// The watcher `id` is being polled on this thread, woken by `waker`. The thread is
    /// published with the waker, under its lock, so that calls see one watcher's pair; on
    /// the common poll, where this watcher published this thread and waker already
    /// (`seen`, the watcher's own record), nothing is taken.
    pub(super) fn polled(&self, id: u64, waker: &Waker, seen: &mut Option<(usize, Waker)>) {
        self.polled_on(thread_token(), id, waker, seen)
    }

    /// [`polled`](Self::polled) on the thread `token`.
    fn polled_on(&self, token: usize, id: u64, waker: &Waker, seen: &mut Option<(usize, Waker)>) {
        if self.owner.load(Ordering::Acquire) == id
            && self.thread.load(Ordering::Acquire) == token
            && seen.as_ref().is_some_and(|(t, w)| *t == token && w.will_wake(waker))
        {
            return;
        }
        let mut w = lock(&self.waker);
        *w = Some((id, waker.clone()));
        self.owner.store(id, Ordering::Release);
        self.thread.store(token, Ordering::Release);
        drop(w);
        *seen = Some((token, waker.clone()));
    }

    /// Whether a task watches the device: the protocol thread's rounds then begin with the
    /// output only, leaving the frames to it.
    pub(super) fn watching(&self) -> bool {
        self.thread.load(Ordering::Acquire) != 0
    }

    /// Whether output is owed now: the protocol thread asks after publishing its deadline,
    /// and sleeps at most [`OWED_BACKSTOP`] if so. The first owed call lowers that deadline
    /// to the backstop's, but a lowering finds nothing to lower while the thread is awake
    /// (between its wake-up and the publication), and would be lost without this look.
    pub(super) fn owed_now(&self) -> bool {
        fence(Ordering::SeqCst);
        self.owed.load(Ordering::Relaxed)
    }

    /// Take the owed output (the caller sends it now): whether there was any. Taken before
    /// the round that sends it, so that a call after that round's output owes anew.
    pub(super) fn take_owed(&self) -> bool {
        self.owed.swap(false, Ordering::AcqRel)
    }

    /// The watcher `id` ends: forget it if it is the one calls see. `true`: output was owed
    /// to it, and the caller must ring for it.
    pub(super) fn gone(&self, id: u64) -> bool {
        let mut w = lock(&self.waker);
        if !matches!(&*w, Some((i, _)) if *i == id) {
            return false;
        }
        self.thread.store(0, Ordering::Release);
        self.owner.store(0, Ordering::Release);
        *w = None;
        drop(w);
        self.take_owed()
    }
}

#[cfg(all(test, loom))]
mod model {
    //! The owed flag, model-checked: a task on the watcher's thread queues data twice, each
    //! call owing output; the protocol thread, awake, runs a round (for a timer, a ring or
    //! the backstop), then publishes its deadline and goes to sleep; the watcher is polled
    //! again after the task yields, or never (its thread's `block_on` returned), or is
    //! dropped. The first owed call lowers the published deadline to the backstop's, which
    //! wakes the sleeping thread, and finds nothing to lower while the thread is awake.
    //! Whatever the interleaving, every queued byte must be sent: by a round that has not
    //! run when the model ends only if something will wake the thread for it (a lowered
    //! deadline, a ring, or its own look at the flag after publishing). Sending before
    //! taking the flag, or sleeping without that look, loom finds bytes stranded.
    use super::super::sync::loom_finds;
    use super::{Owed, TaskWatch};
    use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use loom::sync::Arc;
    use std::task::{Wake, Waker};

    /// The task's and watcher's thread.
    const TASK: usize = 1;
    const WATCHER: u64 = 7;

    struct Woken(AtomicBool);

    impl Wake for Woken {
        fn wake(self: std::sync::Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            self.0.swap(true, Ordering::SeqCst);
        }
    }

    /// The model's flags are set with swaps, not stores: loom 0.7 can order a store between
    /// the read and the write of another thread's swap, losing it (tokio-rs/loom#254).
    #[derive(Default)]
    struct World {
        tw: TaskWatch,
        /// Bytes queued by the task, and bytes an output has sent (all queued at its start).
        queued: AtomicU32,
        sent: AtomicU32,
        /// The protocol thread published its deadline (it is going to sleep).
        asleep: AtomicBool,
        /// Its wake-ups: the deadline lowered by the backstop, a ring, its own look.
        lowered: AtomicBool,
        ring: AtomicBool,
        looked: AtomicBool,
    }

    impl World {
        fn output(&self) {
            self.sent.fetch_max(self.queued.load(Ordering::SeqCst), Ordering::SeqCst);
        }

        /// The protocol thread's round (`protocol_first_part`): while a task watches, it
        /// takes the owed flag first (`take_first`), or after its output.
        fn protocol_round(&self, take_first: bool) {
            let watching = self.tw.watching();
            if watching && take_first {
                self.tw.take_owed();
            }
            self.output();
            if watching && !take_first {
                self.tw.take_owed();
            }
        }

        /// A task's write (`kick_from_task`): the first owed call lowers the deadline if
        /// the thread has published one (`watch::lower` does nothing while it is awake).
        fn write(&self) {
            self.queued.fetch_add(1, Ordering::SeqCst);
            match self.tw.owe_on(TASK) {
                Owed::First => {
                    if self.asleep.load(Ordering::SeqCst) {
                        self.lowered.swap(true, Ordering::SeqCst);
                    }
                }
                Owed::Again => {}
                Owed::No => _ = self.ring.swap(true, Ordering::SeqCst),
            }
        }
    }

    #[derive(Clone, Copy)]
    enum Watcher {
        /// Polled again after the task yields.
        Polled,
        /// Never polled again.
        Idle,
        /// Dropped after the task yields (`DeviceWatch::drop`).
        Dropped,
    }

    fn check(take_first: bool, look: bool, watcher: Watcher) {
        loom::model(move || {
            let world = Arc::new(World::default());
            let woken = std::sync::Arc::new(Woken(AtomicBool::new(false)));
            let waker = Waker::from(woken.clone());
            let mut seen = None;
            world.tw.polled_on(TASK, WATCHER, &waker, &mut seen);
            let w = world.clone();
            let proto = loom::thread::spawn(move || {
                // Awake: one round, then the deadline published (`protocol_thread`), then
                // the look at the flag (`owed_backstop`).
                w.protocol_round(take_first);
                w.asleep.swap(true, Ordering::SeqCst);
                if look && w.tw.owed_now() {
                    w.looked.swap(true, Ordering::SeqCst);
                }
            });
            world.write();
            world.write();
            match watcher {
                Watcher::Polled => {
                    if woken.0.swap(false, Ordering::SeqCst) && world.tw.take_owed() {
                        world.output();
                    }
                }
                Watcher::Idle => {}
                Watcher::Dropped => {
                    if world.tw.gone(WATCHER) {
                        world.ring.swap(true, Ordering::SeqCst);
                    }
                }
            }
            proto.join().unwrap();
            // The sleeping thread wakes for what is set (its timer, the bell).
            let wakes = [&world.lowered, &world.ring, &world.looked];
            if wakes.iter().any(|f| f.load(Ordering::SeqCst)) {
                world.protocol_round(take_first);
            }
            let (q, s) = (world.queued.load(Ordering::SeqCst), world.sent.load(Ordering::SeqCst));
            assert_eq!(s, q, "queued bytes stranded: {s} of {q} sent");
        });
    }

    #[test]
    fn owed_output_is_sent_by_the_watcher() {
        check(true, true, Watcher::Polled);
    }

    #[test]
    fn owed_output_is_sent_by_the_backstop_without_the_watcher() {
        check(true, true, Watcher::Idle);
    }

    #[test]
    fn owed_output_is_sent_when_the_watcher_is_dropped() {
        check(true, true, Watcher::Dropped);
    }

    #[test]
    fn sending_before_taking_the_flag_strands_bytes() {
        loom_finds(|| check(false, true, Watcher::Idle), "stranded");
    }

    #[test]
    fn sleeping_without_a_look_at_the_flag_strands_bytes() {
        loom_finds(|| check(true, false, Watcher::Idle), "stranded");
    }
}
