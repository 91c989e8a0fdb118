//! Who waits on which socket, and the readiness they saw: blocked threads (on the socket
//! slot's condition variables) and async tasks (their wakers). One table per kind of socket
//! (TCP connections, UDP sockets), indexed by slot.

use std::sync::Condvar;
use std::task::Waker;

pub(super) const READABLE: u8 = 1;
pub(super) const READ_CLOSED: u8 = 2;
pub(super) const CLOSED: u8 = 4;
pub(super) const ERROR: u8 = 8;
pub(super) const WRITABLE: u8 = 16;
pub(super) const SYNCHRONIZED: u8 = 32;
pub(super) const BUFFERS: u8 = 64;
pub(super) const GONE: u8 = 128;
pub(super) const READ_MASK: u8 = READABLE | READ_CLOSED | CLOSED | ERROR | GONE;
pub(super) const WRITE_MASK: u8 = WRITABLE | CLOSED | ERROR | SYNCHRONIZED | BUFFERS | GONE;

/// Per socket slot: the condition variables its readers and writers wait on.
#[derive(Debug, Default)]
pub(super) struct SlotCv {
    pub read: Condvar,
    pub write: Condvar,
}

/// Who may be waiting on a slot, and the readiness they saw.
#[derive(Debug, Clone)]
pub(super) struct SlotWait<H> {
    h: Option<H>,
    read: bool,
    write: bool,
    /// A thread may be blocked on the slot's readers' (writers') condition variable: only
    /// then is it notified, since std's `notify_all` is a futex system call even when
    /// nobody waits (tasks and threads watching the device wait with wakers instead).
    read_thread: bool,
    write_thread: bool,
    read_seen: u8,
    write_seen: u8,
    listed: bool,
    /// Index in `Waiters::waiting` while listed.
    pos: u32,
    /// Window-update replies sent (the synchronous mode's reader waits for the next).
    pub replies: u64,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
    /// Wakers of further tasks waiting at once (tokio's `readable()`/`recv_from()` from
    /// several tasks sharing a socket): empty, and never allocated, with one task per side.
    more_wakers: Vec<Waker>,
}

impl<H> Default for SlotWait<H> {
    fn default() -> Self {
        SlotWait {
            h: None,
            read: false,
            write: false,
            read_thread: false,
            write_thread: false,
            read_seen: 0,
            write_seen: 0,
            listed: false,
            pos: 0,
            replies: 0,
            read_waker: None,
            write_waker: None,
            more_wakers: Vec::new(),
        }
    }
}

/// The waiters of one kind of socket.
#[derive(Debug)]
pub(super) struct Waiters<H> {
    /// Per slot, grown up to `slots` when a socket first takes the slot (the runtime asks for
    /// its entry when it accepts, connects or binds one, so that no first wait on the data
    /// path allocates): a runtime sized for 100,000 connections does not write 100,000
    /// entries at start (256 KiB for a relay's default table).
    waits: Vec<SlotWait<H>>,
    slots: usize,
    /// Slots with `read` or `write` set.
    waiting: Vec<u32>,
    /// A writer registered while the pool had no free buffer: its readiness changes when
    /// any buffer comes back, which no per-socket event reports.
    pub starved: bool,
}

impl<H: Copy> Waiters<H> {
    pub fn new(slots: usize) -> Waiters<H> {
        // `waiting` is reserved whole (never written, so never resident until used): a push
        // on the data path never allocates.
        Waiters { waits: Vec::new(), slots, waiting: Vec::with_capacity(slots), starved: false }
    }

    /// The entry of `slot`, made if it is the first use of it (`None` past the table).
    pub fn slot(&mut self, slot: u32) -> Option<&mut SlotWait<H>> {
        let i = slot as usize;
        if i >= self.waits.len() && i < self.slots {
            self.waits.resize_with(i + 1, SlotWait::default);
        }
        self.waits.get_mut(i)
    }

    /// Register the calling thread (`waker == None`) or task as waiting to read
    /// (`write == false`) or write on `h`, whose readiness is `bits` now, until it differs.
    pub fn register(&mut self, h: H, slot: u32, bits: u8, write: bool, waker: Option<&Waker>) {
        if self.slot(slot).is_none() {
            return;
        }
        let w = &mut self.waits[slot as usize];
        w.h = Some(h);
        let stored = if write {
            w.write = true;
            w.write_thread |= waker.is_none();
            w.write_seen = bits & WRITE_MASK;
            self.starved |= bits & BUFFERS == 0;
            &mut w.write_waker
        } else {
            w.read = true;
            w.read_thread |= waker.is_none();
            w.read_seen = bits & READ_MASK;
            &mut w.read_waker
        };
        if let Some(waker) = waker {
            // A task polled again keeps its waker: no clone (a reference count) per poll.
            // Another task waiting on the same side is kept too, not replaced: each must be
            // woken (a replaced waker is a lost wake-up).
            match stored {
                None => *stored = Some(waker.clone()),
                Some(s) if s.will_wake(waker) => {}
                Some(_) if w.more_wakers.iter().any(|m| m.will_wake(waker)) => {}
                Some(_) => w.more_wakers.push(waker.clone()),
            }
        }
        if !w.listed {
            w.listed = true;
            w.pos = self.waiting.len() as u32;
            self.waiting.push(slot);
        }
    }

    /// Wake the waiters of `slot` if its readiness (`bits`) differs from what they saw;
    /// `true` when nobody waits on it any more.
    fn check(&mut self, slot: usize, cvs: &[SlotCv], bits: &impl Fn(H) -> u8) -> bool {
        let w = &mut self.waits[slot];
        let now = w.h.map_or(GONE, bits);
        if w.read && now & READ_MASK != w.read_seen {
            if std::mem::take(&mut w.read_thread) {
                cvs[slot].read.notify_all();
            }
            if let Some(waker) = w.read_waker.take() {
                waker.wake();
            }
            w.more_wakers.drain(..).for_each(Waker::wake);
            w.read = false;
        }
        if w.write && now & WRITE_MASK != w.write_seen {
            if std::mem::take(&mut w.write_thread) {
                cvs[slot].write.notify_all();
            }
            if let Some(waker) = w.write_waker.take() {
                waker.wake();
            }
            w.more_wakers.drain(..).for_each(Waker::wake);
            w.write = false;
        }
        !(w.read || w.write)
    }

    /// Take `slot` off the waiting list (O(1): the last entry moves into its place).
    fn unlist(&mut self, slot: usize) {
        let pos = self.waits[slot].pos as usize;
        self.waits[slot].listed = false;
        self.waiting.swap_remove(pos);
        if let Some(&moved) = self.waiting.get(pos) {
            self.waits[moved as usize].pos = pos as u32;
        }
    }

    /// After an event on `slot` (its readiness may have changed): wake its waiters if it
    /// did. O(1), so a round costs O(events), not O(waiters).
    pub fn changed(&mut self, slot: u32, cvs: &[SlotCv], bits: impl Fn(H) -> u8) {
        let slot = slot as usize;
        if self.waits.get(slot).is_some_and(|w| w.listed) && self.check(slot, cvs, &bits) {
            self.unlist(slot);
        }
    }

    /// Wake every waiter of `slot`, whatever its readiness (another thread changed what its
    /// calls will return, e.g. a shutdown); they look again.
    pub fn wake_slot(&mut self, slot: u32, cvs: &[SlotCv]) {
        let s = slot as usize;
        let Some(w) = self.waits.get_mut(s) else { return };
        if !w.listed {
            return;
        }
        cvs[s].read.notify_all();
        cvs[s].write.notify_all();
        for waker in [w.read_waker.take(), w.write_waker.take()].into_iter().flatten() {
            waker.wake();
        }
        w.more_wakers.drain(..).for_each(Waker::wake);
        w.read = false;
        w.write = false;
        w.read_thread = false;
        w.write_thread = false;
        self.unlist(s);
    }

    /// Wake the waiters whose socket's readiness (`bits`) differs from what they saw, looking
    /// at every waiting socket: for sockets without per-socket events (UDP), and for
    /// writers starved of buffers when buffers came back.
    pub fn wake_changed(&mut self, cvs: &[SlotCv], bits: impl Fn(H) -> u8) {
        self.starved = false;
        let mut i = 0;
        while i < self.waiting.len() {
            let slot = self.waiting[i] as usize;
            if self.check(slot, cvs, &bits) {
                self.unlist(slot);
            } else {
                i += 1;
            }
        }
    }

    /// Each slot a blocked thread registered on: `f(slot, reader, writer)`.
    pub fn each_thread(&self, mut f: impl FnMut(usize, bool, bool)) {
        for &slot in &self.waiting {
            let w = &self.waits[slot as usize];
            if w.read_thread || w.write_thread {
                f(slot as usize, w.read_thread, w.write_thread);
            }
        }
    }

    /// Shutdown: wake every task that waits (blocked threads are woken by the caller).
    pub fn wake_all_tasks(&mut self) {
        for w in self.waits.iter_mut() {
            for waker in [w.read_waker.take(), w.write_waker.take()].into_iter().flatten() {
                waker.wake();
            }
            w.more_wakers.drain(..).for_each(Waker::wake);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table grows on a slot's first use, up to its size: a runtime sized for many
    /// connections writes no entry for those it never had.
    #[test]
    fn entries_are_made_on_first_use() {
        let mut w = Waiters::<u32>::new(100_000);
        assert_eq!(w.waits.len(), 0);
        w.register(7, 5, WRITABLE, true, None);
        assert_eq!(w.waits.len(), 6);
        assert_eq!(w.slot(5).map(|s| s.h), Some(Some(7)));
        assert_eq!(w.slot(3).map(|s| s.h), Some(None), "a slot below is there, unused");
        assert!(w.slot(100_000).is_none(), "past the table");
        w.register(8, 100_000, WRITABLE, true, None);
        assert_eq!(w.waits.len(), 6, "nothing registered past the table");
        let cvs: Vec<SlotCv> = (0..6).map(|_| SlotCv::default()).collect();
        w.changed(5, &cvs, |_| 0);
        assert!(w.waiting.is_empty(), "the writer saw its readiness change and left the list");
    }
}
