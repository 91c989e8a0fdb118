//! Protocol rounds, and who runs them: the protocol thread, or an application thread that
//! has work for the stack and finds nobody else running one (see the module documentation
//! of [`runtime`](super), "Who runs a round").
//!
//! A round (receive, process, window-update requests, timers and output, transmit) needs
//! the device, so the device and the round's scratch space sit in one [`Engine`] behind a
//! mutex of their own, apart from the stack's lock. Who must run the next round is agreed on
//! one atomic word, the [`Bell`]:
//!
//! - `WANTED`: something changed that a round must look at (a frame arrived, a writer queued
//!   data, a reader posted a window-update request).
//! - `RUNNING`: a thread has committed to run rounds; it clears `WANTED` when a round starts
//!   and looks at it again before it stops, so a ring during its round costs nothing but a
//!   flag (no system call) and is never lost.
//! - the number of application threads present (inside a blocking call, or polling): a
//!   present thread runs a round before its call returns or blocks, a polling one whenever
//!   it sees `WANTED`, and one that leaves looks at `WANTED` once more.
//! - `PARKED` (a TAP or TUN): the protocol thread, woken by the device's descriptor, found a
//!   runner, set `WANTED` with it (the runner's next round reads the device) and sleeps
//!   without watching the descriptor; the runner that stops with it set clears it and
//!   signals the protocol thread ([`End::Unpark`]).
//!
//! [`Bell::ring`] signals the protocol thread's eventfd only when `WANTED` was clear and
//! nobody runs or is present: the same lost-wake-up reasoning as the window-update
//! request's (`wnd_update`), one level up. Every transition is one read-modify-write of that
//! word ([`Word`]), so there is no store-then-load race between two variables, and a loom
//! model (below; `RUSTFLAGS="--cfg loom" cargo test -p ackclock --release --lib
//! runtime::rounds`) checks that no ring is lost, and that a present thread leaving
//! without looking at `WANTED` would lose one; a second checks that a parked protocol
//! thread always watches the device again, and that a runner ignoring `End::Unpark` would
//! leave it deaf.

use super::sync::AtomicU32;
use super::sys::EventFd;
use super::{RuntimeDevice, Shared};
use crate::phy::{Batch, Wakeup};
use crate::time::Instant;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;

const WANTED: u32 = 1;
const RUNNING: u32 = 2;
const POLLER: u32 = 4;
/// The protocol thread found a round running, left the device to the runner and sleeps
/// without watching the device's descriptor until the runner stops (a TAP or TUN).
const PARKED: u32 = 1 << 31;

/// What a runner does when it stops running rounds ([`Word::end`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// A round was wanted meanwhile and the caller is the runner again: one more round.
    Again,
    /// Stopped.
    Stop,
    /// Stopped, and the protocol thread had parked: the caller must signal it, so that it
    /// watches the device again.
    Unpark,
}

/// `Shared::sleep_until` while the protocol thread is awake (it looks at the stack before
/// it sleeps, so nobody needs to wake it).
pub(super) const AWAKE: u64 = 0;
/// `Shared::sleep_until` when the protocol thread sleeps without a timer.
pub(super) const NO_TIMER: u64 = u64::MAX;

/// The protocol thread's sleep deadline as stored (`AWAKE` and `NO_TIMER` apart).
pub(super) fn deadline_code(next: Option<Instant>) -> u64 {
    next.map_or(NO_TIMER, |t| t.total_nanos().saturating_add(1).min(NO_TIMER - 1))
}

/// The word that says who runs the next round (see the module documentation). Every
/// transition is one read-modify-write; the loom model below checks that no ring is lost.
#[derive(Debug)]
pub(crate) struct Word(AtomicU32);

impl Word {
    pub(crate) fn new() -> Word {
        Word(AtomicU32::new(0))
    }

    /// A round is wanted. `true`: nobody runs rounds or is present, so the caller must
    /// signal the protocol thread.
    pub(crate) fn ring(&self) -> bool {
        self.0.fetch_or(WANTED, Ordering::AcqRel) == 0
    }

    /// A round is wanted, and the caller is about to [`begin`](Self::begin) running them.
    pub(crate) fn want(&self) {
        self.0.fetch_or(WANTED, Ordering::AcqRel);
    }

    pub(crate) fn wanted(&self) -> bool {
        self.0.load(Ordering::Acquire) & WANTED != 0
    }

    /// Become the thread that runs rounds. `false`: another one is, and it looks at
    /// `wanted` before it stops, so what the caller wanted is covered.
    pub(crate) fn begin(&self) -> bool {
        self.0.fetch_or(RUNNING, Ordering::AcqRel) & RUNNING == 0
    }

    /// A round starts: what was wanted until now, it covers.
    pub(crate) fn round_starts(&self) {
        self.0.fetch_and(!WANTED, Ordering::AcqRel);
    }

    /// Stop running rounds: [`End::Again`] if a round was wanted meanwhile and the caller
    /// is the runner again; [`End::Unpark`] if the protocol thread parked meanwhile (it
    /// wanted a round, so the caller ran one after the park, reading the device).
    pub(crate) fn end(&self) -> End {
        let prev = self.0.fetch_and(!RUNNING, Ordering::AcqRel);
        if prev & WANTED != 0 && self.begin() {
            return End::Again;
        }
        // Cleared by whoever sees it first: one signal per park.
        if prev & PARKED != 0 && self.0.fetch_and(!PARKED, Ordering::AcqRel) & PARKED != 0 {
            return End::Unpark;
        }
        End::Stop
    }

    /// The protocol thread, woken by the device, found another thread running rounds: if
    /// one still runs, want a round (it reads the device) and park. `true`: parked, so the
    /// caller must not watch the device until signalled ([`End::Unpark`]). `false`: nobody
    /// runs rounds now; the caller runs them itself.
    pub(crate) fn park(&self) -> bool {
        self.set_while_running(WANTED | PARKED)
    }

    /// As [`park`](Self::park), without parking (`watch`): if a thread runs rounds, want
    /// one more (it reads the device) and return `true`; the protocol thread then sleeps
    /// as usual, and the runner, present in its call, hands the device back when it leaves.
    /// `false`: nobody runs rounds now.
    pub(crate) fn defer(&self) -> bool {
        self.set_while_running(WANTED)
    }

    /// Set `bits` in the same step that sees a runner; `false` (nothing set) if none runs.
    fn set_while_running(&self, bits: u32) -> bool {
        let mut cur = self.0.load(Ordering::Acquire);
        loop {
            if cur & RUNNING == 0 {
                return false;
            }
            match self.0.compare_exchange_weak(cur, cur | bits, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// The calling thread is present: until it leaves, rings do not signal the protocol
    /// thread.
    pub(crate) fn arrive(&self) {
        self.0.fetch_add(POLLER, Ordering::AcqRel);
    }

    /// The calling thread is no longer present. `true`: a ring came meanwhile, which the
    /// caller must answer (run a round, or signal the protocol thread).
    pub(crate) fn leave(&self) -> bool {
        self.0.fetch_sub(POLLER, Ordering::AcqRel) & WANTED != 0
    }

    /// Whether an application thread is present (inside a call).
    pub(crate) fn present(&self) -> bool {
        self.0.load(Ordering::SeqCst) & !(WANTED | RUNNING | PARKED) != 0
    }

    /// Whether more than `own` presences are counted (the caller's own are `own`): other
    /// application threads are inside calls.
    pub(crate) fn others_present(&self, own: u32) -> bool {
        (self.0.load(Ordering::Relaxed) & !(WANTED | RUNNING | PARKED)) / POLLER > own
    }
}

/// Who runs the next round, and the protocol thread's eventfd for when nobody does.
#[derive(Debug)]
pub(crate) struct Bell {
    word: Word,
    pub(super) eventfd: EventFd,
}

impl Bell {
    pub(super) fn new() -> std::io::Result<Bell> {
        Ok(Bell { word: Word::new(), eventfd: EventFd::new()? })
    }

    /// A round is wanted: make sure someone runs it. A thread in a round or present sees the
    /// flag; otherwise the protocol thread is signalled.
    pub(super) fn ring(&self) {
        if self.word.ring() {
            self.eventfd.wake();
        }
    }
}

impl Wakeup for Bell {
    /// Frames reached the device's empty queue (the in-memory pipe's other end calls this).
    fn wake(&self) {
        self.ring();
    }
}

impl AsRawFd for Bell {
    fn as_raw_fd(&self) -> RawFd {
        self.eventfd.as_raw_fd()
    }
}

/// What a round left for the protocol thread to decide how to sleep.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Outcome {
    /// The earliest timer of the stack or the device.
    pub next: Option<Instant>,
    /// The device had more frames than the batch held, or the transmit ring filled: run
    /// again at once.
    pub more: bool,
    /// The device pushed back: frames wait in the engine's transmit batch.
    pub blocked: bool,
    /// A [`Part::Hold`] round left the held connection's output pending.
    pub held: bool,
}

/// One round, in whichever thread runs it: the device and the round's buffers, boxed once
/// when the runtime starts (so `Shared` is not generic over the device).
pub(super) trait Rounds: Send {
    /// One round, or the part of one `part` says.
    fn round(&mut self, shared: &Shared, part: Part) -> Outcome;
    /// What the last round left.
    fn last(&self) -> Outcome;
    /// The device, when the runtime has stopped.
    fn into_device(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
    /// The device's frame counters.
    fn device_stats(&self) -> crate::phy::DeviceStats;
}

/// Which part of a round to run. A round reads the device and processes the frames
/// (input), then runs the timers and the output and transmits (output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Whole,
    /// Only the input (and the wake-ups it causes): the caller runs the output later,
    /// after its own copy ([`Shared::watch_round`]).
    Input,
    /// Only the output, without reading the device ([`Shared::push_output`]). The round
    /// clears `WANTED` without reading the device: harmless over a TAP or TUN, whose
    /// descriptor stays readable while frames wait, but the in-memory pipe rings only when
    /// its queue goes from empty to not empty, so there a round that reads must follow
    /// ([`Shared::push_output_held`]).
    Output,
    /// The whole round except the output of the connection in this slot, which stays
    /// pending: a blocking reader over the pipe sends it after its copy (the runtime's module
    /// documentation, "The reader's ACK after its copy").
    Hold(u32),
}

/// The device and what a round needs besides the stack.
pub(super) struct Engine<D> {
    pub dev: D,
    pub rx: Batch,
    pub tx: Batch,
    pub taken: Vec<u32>,
    pub last: Outcome,
}

impl<D: RuntimeDevice> Rounds for Engine<D> {
    fn round(&mut self, shared: &Shared, part: Part) -> Outcome {
        let now = shared.clock.now();
        if part != Part::Output {
            self.dev.receive(now, &mut self.rx);
        }
        let more_rx = self.rx.is_full();
        // Requests are marked done here, before any window is computed (see `wnd_update`).
        shared.requests.take(&mut self.taken);
        let held;
        let (next, ring_full) = {
            let mut g = shared.lock();
            let inner = &mut *g;
            let split = (part != Part::Whole).then(|| split_counts(inner.stack.counters()));
            // The batch path: header prediction per frame, and receive aggregation over
            // the batch (`tcp::lro`), as `Stack::receive` does in a single-thread loop.
            inner.stack.process_batch(now, &mut self.rx);
            for &idx in &self.taken {
                shared.window_update_requests.fetch_add(1, Ordering::Relaxed);
                if inner.stack.window_update_now(idx) {
                    shared.window_updates_sent.fetch_add(1, Ordering::Relaxed);
                }
                if shared.sync_window_updates {
                    if let Some(w) = inner.waits.slot(idx) {
                        w.replies += 1;
                    }
                    shared.cvs[idx as usize].read.notify_all();
                }
            }
            self.taken.clear();
            if inner.closed {
                inner.stack.reset_all();
            }
            held = match part {
                Part::Input => false,
                Part::Hold(slot) => inner.stack.dispatch_holding(now, slot),
                _ => {
                    inner.stack.dispatch(now);
                    false
                }
            };
            if let Some((segs, early)) = split {
                let (segs_now, early_now) = split_counts(inner.stack.counters());
                shared.split_round_segments.fetch_add(segs_now - segs, Ordering::Relaxed);
                shared.split_round_acks_early.fetch_add(early_now - early, Ordering::Relaxed);
            }
            if shared.lingering.load(Ordering::Relaxed) && super::stop::drained(&inner.stack) {
                shared.drained.notify_all();
            }
            let ring_full = inner.stack.tx_ring().is_full();
            if self.tx.is_empty() {
                std::mem::swap(inner.stack.tx_ring(), &mut self.tx);
            }
            inner.wake_changed(&shared.cvs, &shared.udp_cvs, &shared.accept_cv);
            let c = inner.stack.counters();
            shared.frames_moved.store(c.frames_in + c.frames_out, Ordering::Relaxed);
            (inner.stack.poll_at(), ring_full)
        };
        if part != Part::Input {
            self.dev.transmit(now, &mut self.tx);
        }
        shared.rounds.fetch_add(1, Ordering::Relaxed);
        let next = match (next, self.dev.poll_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last = Outcome { next, more: more_rx || ring_full, blocked: !self.tx.is_empty(), held };
        self.last
    }

    fn last(&self) -> Outcome {
        self.last
    }

    fn into_device(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        Box::new(self.dev)
    }

    fn device_stats(&self) -> crate::phy::DeviceStats {
        self.dev.stats()
    }
}

/// The counters a split round adds to the runtime's (`RuntimeStats::split_round_segments`).
fn split_counts(k: &crate::stats::Counters) -> (u64, u64) {
    (k.segs_in, k.csum_verified_for_ack)
}

/// An application thread inside a blocking call over the pipe (see [`Shared::arrive`]);
/// dropping it leaves, running a round if a ring came meanwhile. Drop it without the stack's
/// lock held.
pub(super) struct Presence<'a>(&'a Shared);

impl Drop for Presence<'_> {
    fn drop(&mut self) {
        self.0.leave(true);
    }
}

impl Shared {
    /// Run rounds in this thread until nobody wants one, unless another thread already runs
    /// them (it will see what this thread wanted). `false` if another thread runs them.
    pub(super) fn run_rounds(&self, app: bool) -> bool {
        self.run_rounds_with(app, Part::Whole, Part::Whole).is_some()
    }

    /// The protocol thread's [`run_rounds`](Self::run_rounds), the first round only the
    /// part `first` says.
    pub(super) fn run_rounds_first(&self, first: Part) -> bool {
        self.run_rounds_with(false, first, Part::Whole).is_some()
    }

    /// [`run_rounds`](Self::run_rounds), the first round only the part `part` says, the
    /// others the part `then` says. `None` if another thread runs rounds, else whether a
    /// held round left its connection's output pending (the caller owes it).
    ///
    /// Over the in-memory pipe an output round (a reader paying its output) is always
    /// followed by one more round: the output round cleared `WANTED` without reading the
    /// device, and the pipe rings only when its queue was empty, so frames whose ring that
    /// round took would otherwise wait for nobody.
    fn run_rounds_with(&self, app: bool, mut part: Part, then: Part) -> Option<bool> {
        let word = &self.bell.word;
        if !word.begin() {
            return None;
        }
        let mut again = 0;
        let mut owed = false;
        loop {
            word.round_starts();
            {
                let mut engine = super::lock(&self.engine);
                let Some(engine) = engine.as_mut() else {
                    // The protocol thread has stopped: nothing runs rounds any more.
                    return Some(owed);
                };
                let o = engine.round(self, part);
                let ran = part;
                owed |= o.held;
                if ran == Part::Output && self.direct {
                    word.want();
                }
                // An input run stays one while the device has more (its caller owes the
                // output).
                part = then;
                // A timer already due when the round ends (the stack asks to be polled
                // again at once): one more round now, as the protocol thread did, a few
                // times at most before leaving it to the protocol thread's timerfd.
                // Not after an input round: its caller runs the output (the timers
                // included, and the deadline's lowering) right after its copy.
                let now = self.clock.now();
                // (A held round leaves its connection pending, which reads as due: the
                // caller's output sends it.)
                let input = matches!(ran, Part::Input | Part::Hold(_));
                let due = !input && o.next.is_some_and(|t| t <= now) && !o.blocked && again < 8;
                again += 1;
                if app {
                    self.app_rounds.fetch_add(1, Ordering::Relaxed);
                    // The protocol thread sleeps until a deadline published under this lock
                    // before this round: if this round armed an earlier timer, set the
                    // timerfd it also sleeps on (a system call, no wake-up now; the deadline
                    // is lowered, so the timers a bulk transfer re-arms on every round cost
                    // this once per sleep). Frames the device would not take need the
                    // protocol thread now (it waits for the device, not this thread).
                    if o.blocked {
                        self.bell.eventfd.wake();
                    } else if let Some(next) = o.next.filter(|_| !o.more && !due && !input) {
                        self.lower_deadline(next, now);
                    }
                }
                if o.more || due {
                    word.want();
                }
            }
            match word.end() {
                End::Again => {}
                End::Stop => return Some(owed),
                End::Unpark => {
                    self.bell.eventfd.wake();
                    return Some(owed);
                }
            }
        }
    }

    /// An application thread has work for the stack (queued data, a window-update request):
    /// run the round here (over the pipe, or a TAP or TUN with
    /// [`TapRounds::AppThreads`](super::TapRounds) or `Watch`), else ring for the protocol
    /// thread.
    pub(super) fn push(&self) {
        if self.app_run {
            self.app_pushes.fetch_add(1, Ordering::Relaxed);
            self.bell.word.want();
            self.run_rounds(true);
        } else {
            self.bell.ring();
        }
    }

    /// The output a watcher's call owes (`watch`, "Window updates"): a round's output
    /// part, without reading the device (the frames there keep its descriptor readable
    /// for the next watcher, whose round takes them all).
    /// `false`: another thread runs rounds, and its next one (wanted now) does it.
    pub(super) fn push_output(&self) -> bool {
        self.bell.word.want();
        self.run_rounds_with(true, Part::Output, Part::Whole).is_some()
    }

    /// The output a blocking reader over the pipe owes for connection `slot`, after its
    /// copy: as [`push_output`](Self::push_output), and the rounds after it (frames that
    /// arrive meanwhile) hold that connection's output again. `Some(true)`: they held some,
    /// and the caller owes it in turn; `None`: another thread runs rounds, and its next
    /// one does it.
    pub(super) fn push_output_held(&self, slot: u32) -> Option<bool> {
        self.bell.word.want();
        self.run_rounds_with(true, Part::Output, self.hold_part(slot, 1))
    }

    /// A reader's round over the pipe (`own`: the presences the caller holds): held, unless
    /// other application threads are inside calls. Then the reader may wait for a core
    /// between its round and its copy, and an ACK held that long stalls the writer: with
    /// 8 streams, holding whatever the load cost a sixth of the throughput (BENCHMARKS.md).
    fn hold_part(&self, slot: u32, own: u32) -> Part {
        if self.bell.word.others_present(own) {
            Part::Whole
        } else {
            Part::Hold(slot)
        }
    }

    /// The watcher (`watch`) was woken by frames on the device: run the round's input here
    /// and leave its output to the caller, after its copy (`true`). If another thread is
    /// running rounds, it reads the device in its next one (wanted now): wait for its
    /// current round to end instead of waking again and again on the frames it is about to
    /// read (the descriptor stays readable until then), and owe nothing (`false`).
    pub(super) fn watch_round(&self) -> bool {
        self.bell.word.want();
        if self.run_rounds_with(true, Part::Input, Part::Input).is_some() {
            return true;
        }
        drop(super::lock(&self.engine));
        false
    }

    /// An application thread's blocking call over the pipe has started: until it
    /// [`leave`](Self::leave)s, a ring (frames arriving) does not signal the protocol
    /// thread, since this thread runs a round before it returns or blocks (`Presence`).
    pub(super) fn arrive(&self) -> Presence<'_> {
        self.bell.word.arrive();
        Presence(self)
    }

    /// The calling thread stops answering rings: if one came meanwhile and nobody runs a
    /// round, run it here (`can_run`) or, when the caller holds the stack's lock, signal the
    /// protocol thread.
    pub(super) fn leave(&self, can_run: bool) {
        if self.bell.word.leave() {
            if can_run {
                self.run_rounds(true);
            } else {
                self.bell.eventfd.wake();
            }
        }
        self.maybe_hand_off();
    }

    /// Application threads watch the device (`watch`): the caller gave up the role or left
    /// its call; if nobody watches or is inside a call now, make sure the protocol thread
    /// watches the device by `watch::HANDOFF` from now.
    pub(super) fn maybe_hand_off(&self) {
        if self.watch_fd.is_some() && self.watch.nobody(|| self.bell.word.present()) {
            self.hand_off();
        }
    }

    /// The protocol thread, after publishing its deadline: whether an application thread
    /// watches the device or is inside a call (then it sleeps without the descriptor).
    pub(super) fn device_watched(&self) -> bool {
        self.watch_fd.is_some() && !self.watch.nobody(|| self.bell.word.present())
    }

    /// The protocol thread found another thread running rounds while application threads
    /// watch the device ([`Word::defer`]).
    pub(super) fn defer(&self) -> bool {
        self.bell.word.defer()
    }

    /// The protocol thread, woken by the device's descriptor, leaves the device to the
    /// thread running rounds if one does ([`Word::park`]).
    pub(super) fn park(&self) -> bool {
        self.bell.word.park()
    }

    /// Whether application threads about to block poll first (see [`poll`](Self::poll)).
    pub(super) fn polls(&self) -> bool {
        self.direct
    }

    /// Busy-poll for up to [`POLL`](super::POLL) before an application thread blocks, as
    /// Linux's `busy_poll` does: run a round whenever one is wanted (a frame arrived), and
    /// return as soon as any round ran (the caller retries its call), or when the time is
    /// up. Bounded: the caller polls once per call, then waits on its condition variable.
    /// Between looks at the clock it yields the core, so that a thread it waits for on the
    /// same core can run.
    ///
    /// With `hold` (a blocking reader over the pipe, see [`app_rounds`](Self::app_rounds))
    /// its rounds hold its connection's output: `true` when they did, and it owes that.
    pub(super) fn poll(&self, hold: Option<u32>) -> bool {
        let word = &self.bell.word;
        let rounds = self.rounds.load(Ordering::Acquire);
        self.polls.fetch_add(1, Ordering::Relaxed);
        word.arrive();
        let mut owed = false;
        let until = std::time::Instant::now() + super::POLL;
        let answered = 'spin: loop {
            // The clock is read once per 64 looks: it costs more than a look in a VM.
            for _ in 0..64 {
                if word.wanted() {
                    // Present twice: in its call, and polling.
                    owed |= self.app_rounds(hold, 2);
                }
                if self.rounds.load(Ordering::Acquire) != rounds {
                    break 'spin true;
                }
                std::hint::spin_loop();
            }
            if std::time::Instant::now() >= until {
                break false;
            }
            std::thread::yield_now();
        };
        if !answered {
            self.poll_timeouts.fetch_add(1, Ordering::Relaxed);
        }
        // A ring while this thread polled did not signal the protocol thread: if it is still
        // unanswered, answer it here.
        if word.leave() {
            owed |= self.app_rounds(hold, 1);
        }
        owed
    }

    /// Rounds in an application thread: whole ones, or with `hold` whole except the output
    /// of the connection in that slot, for a blocking reader over the pipe, whose ACK waits
    /// for its copy (the runtime's module documentation, "The reader's ACK after its
    /// copy"). `true`: the rounds held that output, and the caller owes it.
    /// `own`: the presences the caller holds ([`hold_part`](Self::hold_part)).
    pub(super) fn app_rounds(&self, hold: Option<u32>, own: u32) -> bool {
        if let Some(slot) = hold {
            let part = self.hold_part(slot, own);
            return self.run_rounds_with(true, part, part) == Some(true);
        }
        self.run_rounds(true);
        false
    }

    /// A blocking reader over the pipe leaves its call: as [`leave`](Self::leave), with the
    /// rounds it runs holding its connection's output (`true`: it owes that).
    pub(super) fn leave_held(&self, slot: u32) -> bool {
        self.bell.word.leave() && self.app_rounds(Some(slot), 0)
    }
}

#[cfg(all(test, loom))]
mod model {
    //! The word, model-checked: a frame arrives (a ring) while an application thread is
    //! present and another runs rounds now and then; the protocol thread runs rounds only
    //! when signalled. Whatever the interleaving, the frame must be processed by someone.
    //! With the present thread ignoring what `leave` reports, loom finds the interleaving
    //! where the frame waits forever (the ring saw a present thread, so it signalled
    //! nobody, and the thread left without looking).
    use super::super::sync::loom_finds;
    use super::{End, Word};
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;

    /// Run rounds as `Shared::run_rounds` does; a round processes the frame, if any.
    /// Returns what the last `end` said (`None`: another thread runs rounds).
    fn run(word: &Word, frame: &AtomicBool) -> Option<End> {
        if !word.begin() {
            return None;
        }
        loop {
            word.round_starts();
            frame.store(false, Ordering::SeqCst);
            match word.end() {
                End::Again => {}
                end => return Some(end),
            }
        }
    }

    /// The other runtime's transmit rings (a frame reaches the empty queue) while `app`
    /// runs in an application thread; then the protocol thread runs rounds if it was
    /// signalled. Whatever the interleaving, the frame must have been processed.
    fn ring_during(app: impl FnOnce(&Word, &AtomicBool) + Send + 'static) {
        let word = Arc::new(Word::new());
        let frame = Arc::new(AtomicBool::new(false));
        let signalled = Arc::new(AtomicBool::new(false));
        let (w, f, s) = (word.clone(), frame.clone(), signalled.clone());
        let ringer = loom::thread::spawn(move || {
            f.store(true, Ordering::SeqCst);
            if w.ring() {
                s.store(true, Ordering::SeqCst);
            }
        });
        let (w, f) = (word.clone(), frame.clone());
        let app = loom::thread::spawn(move || app(&w, &f));
        ringer.join().unwrap();
        app.join().unwrap();
        if signalled.load(Ordering::SeqCst) {
            run(&word, &frame);
        }
        assert!(!frame.load(Ordering::SeqCst), "a frame was left with nobody to process it");
    }

    fn check(answer_on_leave: bool) {
        // An application thread inside a blocking call: present, then it queues data and
        // runs a round itself, then it leaves.
        loom::model(move || {
            ring_during(move |w, f| {
                w.arrive();
                w.want();
                run(w, f);
                if w.leave() && answer_on_leave {
                    run(w, f);
                }
            })
        });
    }

    #[test]
    fn no_ring_is_lost() {
        check(true);
    }

    #[test]
    fn leaving_without_looking_loses_a_ring() {
        loom_finds(|| check(false), "nobody to process it");
    }

    /// Over the pipe, a reader pays the output it owes after its copy while still present in
    /// its call: an output round, which reads no frames, then (`forced`) one more round,
    /// which does. A frame arrives meanwhile; its ring saw a present thread, so it signalled
    /// nobody. Whatever the interleaving, the frame must be processed. Without the forced
    /// round loom finds the interleaving where the output round took the ring and the
    /// reader left with nothing wanted: the pipe rings only when its queue was empty, so
    /// nothing would ever ring for that frame again.
    fn check_output_first(forced: bool) {
        loom::model(move || {
            ring_during(move |w, f| {
                w.arrive();
                // `push_output_held`: want, then rounds, the first one output only.
                w.want();
                if w.begin() {
                    let mut first = true;
                    loop {
                        w.round_starts();
                        if first {
                            first = false;
                            if forced {
                                w.want();
                            }
                        } else {
                            f.store(false, Ordering::SeqCst);
                        }
                        if w.end() != End::Again {
                            break;
                        }
                    }
                }
                // `Call::drop`: the reader leaves, answering a ring that came meanwhile.
                if w.leave() {
                    run(w, f);
                }
            })
        });
    }

    #[test]
    fn an_output_round_is_followed_by_one_that_reads() {
        check_output_first(true);
    }

    #[test]
    fn an_output_round_alone_loses_a_ring() {
        loom_finds(|| check_output_first(false), "nobody to process it");
    }

    /// Parking, over a TAP: a frame arrives on the device while an application thread
    /// writes and runs rounds; the protocol thread, woken by the descriptor, runs a round
    /// itself or parks. Whatever the interleaving, the frame must be processed, and the
    /// protocol thread must end up watching the device again (or a later frame would wait
    /// forever). With the runner ignoring `End::Unpark`, loom finds the interleaving where
    /// the protocol thread stays parked.
    fn check_park(answer_unpark: bool) {
        loom::model(move || {
            let word = Arc::new(Word::new());
            let frame = Arc::new(AtomicBool::new(false));
            let signalled = Arc::new(AtomicBool::new(false));
            let (w, f, s) = (word.clone(), frame.clone(), signalled.clone());
            // The writer: queues data, runs the round itself.
            let app = loom::thread::spawn(move || {
                w.want();
                if run(&w, &f) == Some(End::Unpark) && answer_unpark {
                    s.store(true, Ordering::SeqCst);
                }
            });
            let (w, f, s) = (word.clone(), frame.clone(), signalled.clone());
            // The protocol thread, woken by a frame on the descriptor.
            let proto = loom::thread::spawn(move || {
                f.store(true, Ordering::SeqCst);
                loop {
                    match run(&w, &f) {
                        Some(End::Unpark) => s.store(true, Ordering::SeqCst),
                        Some(_) => {}
                        None if w.park() => return true,
                        None => continue,
                    }
                    return false;
                }
            });
            app.join().unwrap();
            let parked = proto.join().unwrap();
            assert!(!frame.load(Ordering::SeqCst), "a frame was left with nobody to process it");
            assert!(!parked || signalled.load(Ordering::SeqCst), "the protocol thread stays deaf to the device");
        });
    }

    #[test]
    fn a_parked_protocol_thread_is_unparked() {
        check_park(true);
    }

    #[test]
    fn ignoring_unpark_leaves_it_parked() {
        loom_finds(|| check_park(false), "deaf to the device");
    }
}
