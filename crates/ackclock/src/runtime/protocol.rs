//! The protocol thread's loop: rounds of receive, process, output and transmit, then sleep
//! until the device, a ring or a timer (see the module documentation of `runtime`).

use super::idle::IdleMemory;
use super::{lock, rounds, sys, Shared, AWAKE};
use core::time::Duration;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How long the protocol thread spins for a wake before it sleeps in ppoll.
const SPIN: Duration = Duration::from_micros(50);

/// The protocol thread: rounds of receive, process, output, transmit, then sleep until the
/// device, a ring or a timer.
pub(super) fn protocol_thread(shared: Arc<Shared>, device_fd: Option<RawFd>, mut idle: Option<IdleMemory>) {
    let fds: Vec<RawFd> = [shared.bell.as_raw_fd(), shared.timer.as_raw_fd()].into_iter().chain(device_fd).collect();
    let mut app_rounds_seen = 0;
    loop {
        // Awake: nobody needs to signal a timer to this thread until it sleeps again. Then
        // consume the wake-up; rings that land after this are seen by the rounds below.
        shared.sleep_until.store(AWAKE, Ordering::Release);
        shared.bell.eventfd.drain();
        shared.timer.drain();
        if shared.stopping.load(Ordering::Acquire) {
            // The last round resets what is open (`closed` is set) and sends the resets
            // (what the device would not take is lost, as at process exit); then the device
            // is dropped and no thread runs rounds any more.
            let mut engine = lock(&shared.engine);
            if let Some(mut e) = engine.take() {
                e.round(&shared, rounds::Part::Whole);
                *lock(&shared.stopped_device) = Some(e.into_device());
            }
            return;
        }
        // `false`: an application thread is running rounds. It runs them until nobody wants
        // one (`more` included) and fires the timers due meanwhile, so this thread goes to
        // sleep rather than loop on what that thread's rounds left: looping here while it
        // runs was a busy loop of eventfd and timerfd reads.
        // While a task watches the device, the rounds here begin with the output only:
        // they fire the timers and send what is pending, and read the device only if a
        // round is wanted after that (`owed::TaskWatch`).
        let ran = shared.run_rounds_first(shared.protocol_first_part());
        if !ran && shared.watch_fd.is_some() {
            // Application threads watch the device: the runner reads it in one more round,
            // and every runner is inside a call or watching, so the last to leave hands the
            // device back (`watch`). Sleep without the descriptor while that holds; no park
            // and no signal to wait for.
            //
            // "No timer" is published before the runner is asked for that round, and the
            // word's read-modify-writes order the two: the round starts after the runner's
            // own read-modify-write of the word (`end` or `round_starts`) has seen this
            // one, so it sees the store, and every round an application thread runs ends by
            // lowering the published deadline to its next timer and arming the timerfd
            // (`run_rounds`). So this thread sleeps without the engine's lock: taking it
            // meant waiting for the runner's round, a futex wait and wake on each of these
            // wake-ups.
            shared.sleep_until.store(rounds::NO_TIMER, Ordering::SeqCst);
            if !shared.defer() {
                continue;
            }
            shared.parks.fetch_add(1, Ordering::Relaxed);
            // Output owed to a watching task whose backstop found this thread awake.
            let backstop = shared.owed_backstop();
            sleep(&shared, if shared.device_watched() { &fds[..2] } else { &fds[..] }, false, backstop);
            continue;
        } else if !ran && device_fd.is_some() && shared.park() {
            // Over a TAP or TUN an application thread runs rounds, and reads the device in
            // them: leave the device to it rather than wake on every frame it is about to
            // read. Its last round signals this thread when it stops (`End::Unpark`); its
            // rounds fire the timers meanwhile.
            shared.parks.fetch_add(1, Ordering::Relaxed);
            sleep(&shared, &fds[..2], false, None);
            continue;
        }
        // What the last round (this thread's or an application thread's) left, and the
        // deadline published under the engine's lock, so that a later round in another
        // thread that arms an earlier timer sees it and sets the timerfd (`run_rounds`).
        let o = {
            let engine = lock(&shared.engine);
            let Some(e) = engine.as_ref() else { return };
            let o = e.last();
            shared.sleep_until.store(rounds::deadline_code(o.next), Ordering::Release);
            o
        };
        if o.more && ran {
            continue;
        }
        let blocked = o.blocked;
        let mut timeout = o.next.map(|t| t.saturating_duration_since(shared.clock.now()));
        if blocked {
            // The device pushed back: wait until it can take frames (or a timer), but
            // not for the output the untaken frames keep "pending" now.
            timeout = Some(timeout.unwrap_or(Duration::MAX).max(Duration::from_millis(1)));
        } else if timeout == Some(Duration::ZERO) {
            if ran {
                continue;
            }
            // Due while another thread runs rounds: its rounds fire due timers. Look again
            // in a millisecond rather than loop while it runs (its later deadlines are
            // compared with the past one published above, so none would set the timerfd).
            timeout = Some(Duration::from_millis(1));
        }
        // Output owed to the device's watching task: the first owed call lowers the
        // published deadline to the backstop's, but found none to lower if it came while
        // this thread was awake. Looked at after publishing, behind a SeqCst fence that
        // pairs with the caller's (`owed::TaskWatch::owed_now`): the store above need be
        // no stronger.
        if let Some(b) = shared.owed_backstop() {
            timeout = Some(timeout.map_or(b, |t| t.min(b)));
        }
        // A quiet device: give idle packet memory back once it has been quiet long enough,
        // and wake for that if nothing else would.
        if let Some(due) = idle.as_mut().and_then(|i| i.check(&shared)) {
            timeout = Some(timeout.map_or(due, |t| t.min(due)));
        }
        // Spin a little before sleeping: on two cores the reader or writer on the other one
        // usually posts within microseconds, and a wake-up from ppoll costs more than that
        // on an idle core (as Linux's busy polling, net.core.busy_poll). A wake rings the
        // eventfd's flag as well as the descriptor, so the spin needs no system call. Not
        // when application threads ran rounds since this thread last slept: they run the
        // rounds themselves and poll before they block, so this thread was only woken for
        // a ring that came while none was present, and spinning would take a core from them.
        let app_rounds = shared.app_rounds.load(Ordering::Relaxed);
        let spin = app_rounds == app_rounds_seen;
        app_rounds_seen = app_rounds;
        if spin && !blocked && device_fd.is_none() && timeout.is_none_or(|t| t > SPIN) {
            let until = std::time::Instant::now() + SPIN;
            while !shared.bell.eventfd.rung() && std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
            if shared.bell.eventfd.rung() {
                continue;
            }
        }
        // While an application thread watches the device or is inside a call, sleep without
        // the descriptor (its frames would wake both); the last one out lowers the deadline
        // published above (`watch`; checked after publishing it).
        let watched = !blocked && shared.device_watched();
        // A window-update request a reader left for the next round (`watch`): after
        // publishing the deadline, look at the queue; a reader that posts after this sees
        // the deadline and lowers it (the queue's lock orders the two).
        if shared.watch_fd.is_some() && shared.requests.queued() {
            continue;
        }
        sleep(&shared, if watched { &fds[..2] } else { &fds[..] }, blocked, timeout);
    }
}

/// The protocol thread sleeps on `fds` (see `sys::wait`), counted. If ppoll fails on the
/// valid descriptor set there is nothing sensible to sleep on: run the next round at the
/// next timer, within 10 ms, instead of spinning.
fn sleep(shared: &Shared, fds: &[RawFd], want_out: bool, timeout: Option<Duration>) {
    shared.sleeps.fetch_add(1, Ordering::Relaxed);
    if sys::wait(fds, want_out, timeout).is_err() {
        std::thread::sleep(timeout.unwrap_or(Duration::from_millis(1)).min(Duration::from_millis(10)));
    }
}
