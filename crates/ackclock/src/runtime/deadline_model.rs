//! Two handshakes on the protocol thread's published deadline (`Shared::sleep_until`),
//! model-checked (`RUSTFLAGS="--cfg loom" cargo test -p ackclock --release --lib
//! runtime::deadline_model`):
//!
//! - **A runner's timers.** The protocol thread, woken while an application thread runs
//!   rounds over a watched device, publishes "no timer" and then asks the runner for one
//!   more round, without the engine's lock; each round an application thread runs ends by
//!   lowering the published deadline to its next timer. Whatever the interleaving, the
//!   protocol thread must sleep no later than the timer the rounds armed. Asking first and
//!   publishing after, loom finds the runner's last round done before the publication, and
//!   the timer lost.
//! - **A window update left for the next round.** A reader over a watched device posts its
//!   request without running a round, and lowers the deadline to the hand-off's if its
//!   call ends with the request pending; the protocol thread publishes its deadline and
//!   then looks at the request queue. Whatever the interleaving, the request is taken, or
//!   the protocol thread wakes by the hand-off. Looking at the queue first, loom finds it
//!   asleep until its own, later deadline with the request pending.

use super::rounds::{Word, AWAKE, NO_TIMER};
use super::sync::loom_finds;
use super::watch::lower;
use super::wnd_update::Requests;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// The timer the runner's rounds arm, and the hand-off's deadline, as deadline codes.
const TIMER: u64 = 100;
const HANDOFF: u64 = 50;
/// The protocol thread's own deadline, later than both.
const OWN: u64 = 1000;

fn check_runner(publish_first: bool) {
    loom::model(move || {
        let word = Arc::new(Word::new());
        let until = Arc::new(AtomicU64::new(AWAKE));
        assert!(word.begin());
        let (w, u) = (word.clone(), until.clone());
        // The application thread running rounds: each arms the timer, then lowers.
        let runner = loom::thread::spawn(move || loop {
            w.round_starts();
            lower(&u, TIMER);
            if w.end() != super::rounds::End::Again {
                return;
            }
        });
        // The protocol thread, woken meanwhile.
        if publish_first {
            until.store(NO_TIMER, Ordering::SeqCst);
        }
        let deferred = word.defer();
        if !publish_first {
            until.store(NO_TIMER, Ordering::SeqCst);
        }
        runner.join().unwrap();
        if !deferred {
            // Nobody ran rounds any more: it runs its own and publishes the last outcome.
            until.store(TIMER, Ordering::SeqCst);
        }
        assert!(until.load(Ordering::SeqCst) <= TIMER, "the runner's timer was lost");
    });
}

#[test]
fn a_deferring_protocol_thread_keeps_the_runners_timer() {
    check_runner(true);
}

#[test]
fn deferring_before_publishing_loses_the_timer() {
    loom_finds(|| check_runner(false), "timer was lost");
}

fn check_request(publish_first: bool) {
    loom::model(move || {
        let requests = Arc::new(Requests::new(1));
        let until = Arc::new(AtomicU64::new(AWAKE));
        let (r, u) = (requests.clone(), until.clone());
        // The reader: a read freed space; it posts, and its call ends with the request
        // pending (`read_impl`'s hand-off).
        let reader = loom::thread::spawn(move || {
            r.post(0);
            if r.is_pending(0) {
                lower(&u, HANDOFF);
            }
        });
        // The protocol thread, about to sleep after a round.
        let taken = if publish_first {
            until.store(OWN, Ordering::Release);
            requests.queued()
        } else {
            let queued = requests.queued();
            until.store(OWN, Ordering::Release);
            queued
        };
        reader.join().unwrap();
        if taken {
            // It runs another round instead of sleeping: the request is taken.
            let mut out = Vec::new();
            requests.take(&mut out);
        }
        assert!(
            !requests.is_pending(0) || until.load(Ordering::SeqCst) <= HANDOFF,
            "a request was left pending while the protocol thread sleeps on"
        );
    });
}

#[test]
fn a_deferred_window_update_is_taken_or_handed_off() {
    check_request(true);
}

#[test]
fn looking_at_the_queue_first_strands_the_request() {
    loom_finds(|| check_request(false), "left pending");
}
