//! A hierarchical timing wheel: the timers of every TCP connection of a stack on one
//! structure, with O(1) schedule and cancel and an exact next deadline.
//!
//! # Model
//!
//! Each connection owns one entry, keyed by its dense slot index (`u32` in `0..capacity`),
//! armed at the minimum of its own timers (RTO, persist, delayed ACK, keep-alive,
//! TIME_WAIT); on expiry the connection works out which of them fired. All storage is
//! allocated by [`TimerWheel::new`]; nothing allocates afterwards. Entries are nodes of
//! intrusive doubly linked lists, linked by `u32` indices (no pointers, no `unsafe`).
//!
//! # Layout
//!
//! Time is counted in ticks (`nanos / tick`, rounded down). There are [`LEVELS`] levels of
//! 64 slots; a slot of level `L` spans `64^L` ticks, and each level has a `u64` bitmap of
//! its non-empty slots. An entry due at tick `w`, filed while the wheel is at tick `cur`,
//! goes to the level of the highest base-64 digit in which `w` and `cur` differ (the "xor"
//! placement of the Linux and tokio wheels), in the slot given by that digit of `w`. So
//! level 0 holds the ticks of the current 64-tick block (`cur` itself included: entries due
//! now or in the past are filed at `cur`), and level `L > 0` the ticks of the current
//! `64^(L+1)` block whose digit `L` is greater than that of `cur`.
//!
//! Eleven levels cover all of `u64` (64^11 > 2^64): every deadline has an exact place and
//! nothing is ever out of range. Only the levels a deadline needs are used (a day at a
//! 1 ms tick is level 4 at most); the rest cost one empty bitmap word each.
//!
//! Why not fewer levels with far deadlines clamped into the top level's farthest slot: as
//! time advances, that slot stops being the farthest, and new, nearer entries are filed
//! after it; the "first non-empty slot holds the earliest deadline" rule below then fails
//! for the clamped entries, and keeping it needs a scan or an overflow list.
//!
//! # Ordering, next deadline, advancing
//!
//! With xor placement the spans of non-empty slots never overlap and are ordered by
//! (level, slot): the current level-`L` digit's span contains all of level `L - 1`, and
//! non-empty level-`L` slots come after it. Hence:
//!
//! - [`TimerWheel::next_deadline`] is the minimum over the *first* non-empty slot of the
//!   *lowest* non-empty level: O(levels + entries in that slot), and exact. (A wheel that
//!   files by distance from `cur` loses this: an entry filed high long ago can be due
//!   before one filed low just now, and each level's first slot must be checked.)
//! - [`TimerWheel::expire`] jumps straight to the start of that same slot, found with
//!   `trailing_zeros` on the bitmap, and re-files (cascades) its entries lower if it is
//!   above level 0. Its cost is O(levels) per non-empty slot passed plus the entries moved,
//!   whatever the distance in time.
//!
//! Entries in the level-0 slot of the current tick are compared with the exact `now`: tick
//! rounding never fires an entry early, and one due later in the same tick stays where it
//! is until an `expire` with a `now` at or after its deadline.

use crate::time::{Duration, Instant};
use core::fmt;

/// Number of levels: 64^11 ticks exceed `u64`, so every deadline fits.
pub const LEVELS: usize = 11;

const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const SLOT_MASK: u64 = SLOTS as u64 - 1;
/// The end of a list, and "no node".
const NIL: u32 = u32::MAX;
/// `Node::slot` of an entry that is not scheduled.
const UNSCHEDULED: u16 = u16::MAX;

#[derive(Clone, Copy)]
struct Node {
    /// Exact deadline, nanoseconds.
    deadline: u64,
    prev: u32,
    next: u32,
    /// `level * 64 + slot`, or `UNSCHEDULED`.
    slot: u16,
}

impl Node {
    const EMPTY: Node = Node { deadline: 0, prev: NIL, next: NIL, slot: UNSCHEDULED };
}

/// A hierarchical timing wheel of at most `capacity` entries keyed by `u32` (see the
/// [module documentation](self)).
///
/// Keys `>= capacity` are a caller bug: they trip a `debug_assert!` and are ignored in
/// release builds (schedule and cancel do nothing, `deadline` is `None`).
pub struct TimerWheel {
    nodes: Box<[Node]>,
    /// Head of each slot's list, indexed by `level * 64 + slot`.
    heads: Box<[u32; LEVELS * SLOTS]>,
    /// Per level, bit `s` set iff slot `s` is non-empty.
    occupied: [u64; LEVELS],
    tick_nanos: u64,
    /// The wheel's current tick.
    cur: u64,
    /// The latest `now` seen.
    now: Instant,
    len: usize,
    slot_visits: u64,
    /// No scheduled entry is due before this time (nanoseconds): a lower bound, lowered by
    /// every [`schedule`](Self::schedule) and raised by every [`expire`](Self::expire) that
    /// walks the wheel. An `expire` before it has nothing to fire and returns at once.
    floor: u64,
}

impl TimerWheel {
    /// A wheel for keys `0..capacity` with the given tick, at time `now`.
    ///
    /// The tick sets the bucket width only: deadlines are kept and compared exactly. A zero
    /// tick is taken as 1 ns. `capacity` is clamped to `u32::MAX` (the value `u32::MAX`
    /// marks list ends).
    pub fn new(capacity: usize, tick: Duration, now: Instant) -> TimerWheel {
        let capacity = capacity.min(NIL as usize);
        let tick_nanos = u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX).max(1);
        TimerWheel {
            nodes: vec![Node::EMPTY; capacity].into_boxed_slice(),
            heads: Box::new([NIL; LEVELS * SLOTS]),
            occupied: [0; LEVELS],
            tick_nanos,
            cur: now.total_nanos() / tick_nanos,
            now,
            len: 0,
            slot_visits: 0,
            floor: u64::MAX,
        }
    }

    /// Number of keys: valid keys are `0..capacity`.
    pub fn capacity(&self) -> usize {
        self.nodes.len()
    }

    /// Number of scheduled entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The wheel's current time: the latest `now` given to [`new`](Self::new) or
    /// [`expire`](Self::expire).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The tick (bucket width) in use.
    pub fn tick(&self) -> Duration {
        Duration::from_nanos(self.tick_nanos)
    }

    /// Number of non-empty slots processed (cascaded, fired or checked) since `new`: a
    /// measure of the work done by [`expire`](Self::expire), for tests and metrics.
    pub fn slot_visits(&self) -> u64 {
        self.slot_visits
    }

    /// Schedule `key` at `deadline`, moving it if it is already scheduled. O(1).
    ///
    /// A deadline at or before the wheel's current time fires at the next
    /// [`expire`](Self::expire) (given a `now` not before the deadline).
    pub fn schedule(&mut self, key: u32, deadline: Instant) {
        if !self.valid(key) {
            return;
        }
        if self.nodes[key as usize].slot == UNSCHEDULED {
            self.len += 1;
        } else {
            self.unlink(key);
        }
        self.nodes[key as usize].deadline = deadline.total_nanos();
        self.floor = self.floor.min(deadline.total_nanos());
        self.file(key);
    }

    /// Unschedule `key`; nothing if it is not scheduled. O(1).
    pub fn cancel(&mut self, key: u32) {
        if self.valid(key) && self.nodes[key as usize].slot != UNSCHEDULED {
            self.unlink(key);
            self.len -= 1;
        }
    }

    /// The exact deadline of `key`, if scheduled.
    pub fn deadline(&self, key: u32) -> Option<Instant> {
        let node = self.nodes.get(key as usize)?;
        (node.slot != UNSCHEDULED).then_some(Instant::from_nanos(node.deadline))
    }

    /// The earliest exact deadline among scheduled entries (possibly already past).
    ///
    /// O(levels + entries in the first non-empty slot): see the module documentation for
    /// why that slot holds the minimum.
    pub fn next_deadline(&self) -> Option<Instant> {
        let (slot, _) = self.first_slot()?;
        let mut min = u64::MAX;
        let mut key = self.heads[slot];
        while key != NIL {
            let node = &self.nodes[key as usize];
            min = min.min(node.deadline);
            key = node.next;
        }
        Some(Instant::from_nanos(min))
    }

    /// Advance the wheel to `now` and call `f(key)` once for every entry whose exact
    /// deadline is `<= now`. Each entry is unscheduled before `f` sees its key; `f` cannot
    /// touch the wheel, so callers collect keys and reschedule afterwards.
    ///
    /// Cost: O(levels) per non-empty slot between the previous and the new time, plus the
    /// entries fired or re-filed; empty stretches of any length are skipped. A `now` earlier
    /// than [`now`](Self::now) does not move the wheel back; it still fires entries due by
    /// that `now`.
    ///
    /// Before the earliest deadline (a bound kept by `schedule` and by the last walk) it
    /// returns after one comparison, without moving the wheel: most calls, on a stack that
    /// runs its timers on every pass, find nothing due.
    #[inline]
    pub fn expire(&mut self, now: Instant, f: impl FnMut(u32)) {
        if !self.may_fire(now) {
            self.now = self.now.max(now);
            return;
        }
        self.walk(now, f);
    }

    /// Whether an [`expire`](Self::expire) at `now` might fire anything: false before a
    /// lower bound of every deadline (exact enough that, between timers, it is false).
    #[inline]
    pub fn may_fire(&self, now: Instant) -> bool {
        now.total_nanos() >= self.floor
    }

    /// [`expire`](Self::expire) once something may be due: advance, fire, and raise the
    /// floor to the start of the earliest non-empty slot (every entry left is due after
    /// `now`, and none before the start of its slot's span).
    fn walk(&mut self, now: Instant, mut f: impl FnMut(u32)) {
        self.walk_to(now, &mut f);
        self.floor = match self.first_slot() {
            Some((_, start)) => start.saturating_mul(self.tick_nanos).max(now.total_nanos().saturating_add(1)),
            None => u64::MAX,
        };
    }

    fn walk_to(&mut self, now: Instant, f: &mut impl FnMut(u32)) {
        let target = (now.total_nanos() / self.tick_nanos).max(self.cur);
        self.now = self.now.max(now);
        loop {
            let current = (self.cur & SLOT_MASK) as usize;
            let busy = self.occupied[0] & (1 << current) != 0;
            if self.cur == target {
                if busy {
                    self.fire_due(current, now.total_nanos(), f);
                }
                return;
            }
            // Every entry filed at a tick before `target` is due: its deadline is before
            // (cur + 1) * tick <= target * tick <= now.
            if busy {
                self.fire_all(current, now.total_nanos(), f);
            }
            // The current slot is empty now, so the first non-empty slot starts after `cur`.
            match self.first_slot() {
                Some((slot, start)) if start <= target => {
                    debug_assert!(start > self.cur);
                    self.cur = start;
                    if slot >= SLOTS {
                        self.cascade(slot);
                    }
                }
                // Nothing starts before `target`: every entry keeps its slot.
                _ => self.cur = target,
            }
        }
    }

    fn valid(&self, key: u32) -> bool {
        let valid = (key as usize) < self.nodes.len();
        debug_assert!(valid, "timer key {key} out of range 0..{}", self.nodes.len());
        valid
    }

    /// The first non-empty slot of the lowest non-empty level, as (`level * 64 + slot`,
    /// start tick): the slot with the earliest span. Slots before the current digit of
    /// their level are always empty (and, above level 0, the current one too).
    fn first_slot(&self) -> Option<(usize, u64)> {
        let level = self.occupied.iter().position(|&bits| bits != 0)?;
        let bits = self.occupied[level];
        let shift = level as u32 * SLOT_BITS;
        debug_assert_eq!(bits & (u64::MAX << ((self.cur >> shift) & SLOT_MASK)), bits);
        let slot = u64::from(bits.trailing_zeros());
        // `cur` with its digits up to this level's cleared (the top level's block is 0).
        let block = self.cur.checked_shr(shift + SLOT_BITS).unwrap_or(0).checked_shl(shift + SLOT_BITS).unwrap_or(0);
        Some((level * SLOTS + slot as usize, block + (slot << shift)))
    }

    /// The slot (`level * 64 + slot`) for an entry due at `tick`, relative to `cur`.
    fn slot_for(&self, tick: u64) -> usize {
        let tick = tick.max(self.cur);
        let differ = tick ^ self.cur;
        let level = if differ == 0 { 0 } else { (63 - differ.leading_zeros()) / SLOT_BITS };
        level as usize * SLOTS + ((tick >> (level * SLOT_BITS)) & SLOT_MASK) as usize
    }

    /// Link the unlinked `key` into the slot for its deadline.
    fn file(&mut self, key: u32) {
        let slot = self.slot_for(self.nodes[key as usize].deadline / self.tick_nanos);
        let head = self.heads[slot];
        if head == NIL {
            self.occupied[slot / SLOTS] |= 1 << (slot % SLOTS);
        } else {
            self.nodes[head as usize].prev = key;
        }
        let node = &mut self.nodes[key as usize];
        node.prev = NIL;
        node.next = head;
        node.slot = slot as u16;
        self.heads[slot] = key;
    }

    /// Unlink the scheduled `key` and mark it unscheduled (`len` is the caller's).
    fn unlink(&mut self, key: u32) {
        let Node { prev, next, slot, .. } = self.nodes[key as usize];
        let slot = slot as usize;
        if prev == NIL {
            self.heads[slot] = next;
            if next == NIL {
                self.occupied[slot / SLOTS] &= !(1 << (slot % SLOTS));
            }
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        self.nodes[key as usize] = Node { slot: UNSCHEDULED, prev: NIL, next: NIL, ..self.nodes[key as usize] };
    }

    /// Empty `slot`, returning the head of its former list.
    fn take(&mut self, slot: usize) -> u32 {
        self.slot_visits += 1;
        self.occupied[slot / SLOTS] &= !(1 << (slot % SLOTS));
        core::mem::replace(&mut self.heads[slot], NIL)
    }

    /// Re-file every entry of `slot`, whose span has just begun, relative to `cur`.
    fn cascade(&mut self, slot: usize) {
        let mut key = self.take(slot);
        while key != NIL {
            let next = self.nodes[key as usize].next;
            self.file(key);
            key = next;
        }
    }

    /// Fire every entry of the level-0 `slot`: all are known to be due.
    fn fire_all(&mut self, slot: usize, now: u64, f: &mut impl FnMut(u32)) {
        let mut key = self.take(slot);
        while key != NIL {
            let node = &mut self.nodes[key as usize];
            debug_assert!(node.deadline <= now);
            let next = node.next;
            *node = Node { slot: UNSCHEDULED, prev: NIL, next: NIL, ..*node };
            self.len -= 1;
            f(key);
            key = next;
        }
    }

    /// Fire the entries of the level-0 `slot` whose exact deadline is `<= now`; the others,
    /// due later in the same tick, stay.
    fn fire_due(&mut self, slot: usize, now: u64, f: &mut impl FnMut(u32)) {
        self.slot_visits += 1;
        let mut key = self.heads[slot];
        while key != NIL {
            let Node { deadline, next, .. } = self.nodes[key as usize];
            if deadline <= now {
                self.unlink(key);
                self.len -= 1;
                f(key);
            }
            key = next;
        }
    }
}

impl fmt::Debug for TimerWheel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerWheel")
            .field("capacity", &self.capacity())
            .field("len", &self.len)
            .field("now", &self.now)
            .field("tick", &self.tick())
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    const MS: Duration = Duration::from_millis(1);
    /// No key fired.
    const NONE: [u32; 0] = [];

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    /// Expire at `now` and return the fired keys, sorted.
    fn fire(w: &mut TimerWheel, now: Instant) -> Vec<u32> {
        let mut keys = Vec::new();
        w.expire(now, |k| keys.push(k));
        keys.sort_unstable();
        keys
    }

    #[test]
    fn schedule_expire_cancel() {
        let mut w = TimerWheel::new(8, MS, ms(0));
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
        w.schedule(0, ms(10));
        w.schedule(1, ms(20));
        w.schedule(2, ms(20));
        w.schedule(3, ms(30));
        assert_eq!(w.len(), 4);
        assert_eq!(w.deadline(1), Some(ms(20)));
        assert_eq!(w.next_deadline(), Some(ms(10)));
        assert_eq!(fire(&mut w, ms(9)), NONE);
        assert_eq!(fire(&mut w, ms(10)), [0]);
        assert_eq!(w.deadline(0), None);
        w.cancel(2);
        w.cancel(2);
        w.cancel(7);
        assert_eq!(w.len(), 2);
        assert_eq!(fire(&mut w, ms(25)), [1]);
        assert_eq!(w.now(), ms(25));
        assert_eq!(w.next_deadline(), Some(ms(30)));
        assert_eq!(fire(&mut w, ms(1_000_000)), [3]);
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    /// An expire before every deadline returns without walking the wheel (no slot visited),
    /// and a deadline scheduled earlier than the others still fires on time: the floor it
    /// checks against only moves down on `schedule`, up on a walk.
    #[test]
    fn expire_before_the_floor_walks_nothing() {
        let mut w = TimerWheel::new(8, MS, ms(0));
        assert!(!w.may_fire(ms(1_000_000)), "an empty wheel fires nothing");
        w.schedule(0, ms(5000));
        for t in 1..100 {
            assert_eq!(fire(&mut w, ms(t)), NONE);
        }
        assert_eq!(w.slot_visits(), 0);
        assert_eq!(w.now(), ms(99));
        w.schedule(1, ms(150));
        assert!(!w.may_fire(ms(149)));
        assert!(w.may_fire(ms(150)));
        assert_eq!(fire(&mut w, ms(150)), [1]);
        // After the walk the floor is back near the remaining deadline.
        assert!(!w.may_fire(ms(151)));
        w.schedule(1, ms(120));
        assert_eq!(fire(&mut w, ms(151)), [1], "a deadline already past fires at the next expire");
        assert_eq!(fire(&mut w, ms(4999)), NONE);
        assert_eq!(fire(&mut w, ms(5000)), [0]);
        assert!(!w.may_fire(Instant::from_nanos(u64::MAX - 1)));
    }

    #[test]
    fn reschedule_earlier_and_later() {
        let mut w = TimerWheel::new(4, MS, ms(0));
        w.schedule(0, ms(5_000));
        w.schedule(0, ms(3)); // earlier: moves to a lower level
        assert_eq!(w.len(), 1);
        assert_eq!(w.next_deadline(), Some(ms(3)));
        assert_eq!(fire(&mut w, ms(3)), [0]);
        w.schedule(1, ms(10));
        w.schedule(1, ms(100_000)); // later
        assert_eq!(fire(&mut w, ms(50)), NONE);
        assert_eq!(w.next_deadline(), Some(ms(100_000)));
        assert_eq!(fire(&mut w, ms(99_999)), NONE);
        assert_eq!(fire(&mut w, ms(100_000)), [1]);
        // Fired keys may be rescheduled after `expire` returns.
        w.schedule(1, ms(100_001));
        assert_eq!(fire(&mut w, ms(100_001)), [1]);
    }

    #[test]
    fn past_and_extreme_deadlines() {
        let mut w = TimerWheel::new(4, MS, ms(1_000));
        w.schedule(0, ms(1)); // in the past
        w.schedule(1, ms(1_000)); // now
        w.schedule(2, Instant::from_nanos(u64::MAX));
        w.schedule(3, Instant::from_nanos(u64::MAX));
        assert_eq!(w.next_deadline(), Some(ms(1)));
        assert_eq!(fire(&mut w, ms(1_000)), [0, 1]);
        assert_eq!(w.next_deadline(), Some(Instant::from_nanos(u64::MAX)));
        assert_eq!(fire(&mut w, Instant::from_nanos(u64::MAX - 1)), NONE);
        assert_eq!(fire(&mut w, Instant::from_nanos(u64::MAX)), [2, 3]);
        assert_eq!(fire(&mut w, Instant::from_nanos(u64::MAX)), NONE);
    }

    #[test]
    fn no_early_fire_within_a_tick() {
        let mut w = TimerWheel::new(2, MS, ms(0));
        w.schedule(0, Instant::from_micros(1_500));
        w.schedule(1, Instant::from_micros(1_200));
        assert_eq!(fire(&mut w, Instant::from_micros(1_100)), NONE);
        assert_eq!(fire(&mut w, Instant::from_micros(1_200)), [1]);
        assert_eq!(w.next_deadline(), Some(Instant::from_micros(1_500)));
        assert_eq!(fire(&mut w, Instant::from_micros(1_499)), NONE);
        assert_eq!(fire(&mut w, Instant::from_micros(1_500)), [0]);
    }

    #[test]
    fn time_going_back_does_not_fire_early() {
        let mut w = TimerWheel::new(2, MS, ms(100));
        w.schedule(0, ms(50));
        assert_eq!(fire(&mut w, ms(40)), NONE);
        assert_eq!(w.now(), ms(100));
        assert_eq!(fire(&mut w, ms(50)), [0]);
    }

    /// The trap of wheels that file by distance: an entry filed high, long ago, due before
    /// one filed low, just now. With the xor placement, spans never overlap.
    #[test]
    fn next_deadline_across_levels() {
        let mut w = TimerWheel::new(4, MS, ms(0));
        w.schedule(0, Instant::from_micros(4_100_300)); // tick 4100: level 2, slot 1
        assert_eq!(fire(&mut w, ms(4_000)), []); // slot 1 of level 2 starts at 4096
        w.schedule(1, Instant::from_micros(4_095_700)); // tick 4095: level 1
        w.schedule(2, Instant::from_micros(4_097_900)); // tick 4097: level 2, slot 1
        w.schedule(3, ms(4_000)); // level 0
        assert_eq!(w.next_deadline(), Some(ms(4_000)));
        assert_eq!(fire(&mut w, ms(4_000)), [3]);
        assert_eq!(w.next_deadline(), Some(Instant::from_micros(4_095_700)));
        assert_eq!(fire(&mut w, Instant::from_micros(4_096_000)), [1]);
        // Level-2 slot 1 has been cascaded; both entries are now on level 0.
        assert_eq!(w.next_deadline(), Some(Instant::from_micros(4_097_900)));
        assert_eq!(fire(&mut w, Instant::from_micros(4_097_800)), NONE);
        assert_eq!(fire(&mut w, Instant::from_micros(4_100_299)), [2]);
        assert_eq!(w.next_deadline(), Some(Instant::from_micros(4_100_300)));
        assert_eq!(fire(&mut w, Instant::from_micros(4_100_300)), [0]);
    }

    /// Regression (found by the model test against a clamping design): a far deadline filed
    /// long ago must not hide behind nearer entries filed later.
    #[test]
    fn far_deadlines_at_a_fine_tick() {
        let tick = Duration::from_nanos(1);
        let mut w = TimerWheel::new(4, tick, Instant::ZERO);
        let hour = Instant::from_secs(3_600);
        w.schedule(0, hour);
        w.schedule(1, Instant::from_secs(30));
        w.schedule(2, Instant::from_secs(7_200));
        assert_eq!(w.next_deadline(), Some(Instant::from_secs(30)));
        assert_eq!(fire(&mut w, Instant::from_secs(30)), [1]);
        assert_eq!(fire(&mut w, Instant::from_secs(407)), NONE);
        w.schedule(3, Instant::from_secs(475));
        assert_eq!(w.next_deadline(), Some(Instant::from_secs(475)));
        assert_eq!(fire(&mut w, Instant::from_secs(475)), [3]);
        assert_eq!(w.next_deadline(), Some(hour));
        assert_eq!(fire(&mut w, hour - tick), NONE);
        assert_eq!(w.next_deadline(), Some(hour));
        assert_eq!(fire(&mut w, hour), [0]);
        assert_eq!(fire(&mut w, Instant::from_secs(1_000_000)), [2]);
        // Each entry moves down at most once per level.
        assert!(w.slot_visits() <= 4 * (LEVELS as u64 + 1), "{} slot visits", w.slot_visits());
    }

    #[test]
    fn large_jumps_visit_few_slots() {
        let mut w = TimerWheel::new(100, MS, Instant::ZERO);
        let day = 24 * 3_600_000u64;
        for key in 0..100u32 {
            // Spread over 24 h, off the tick grid.
            w.schedule(key, Instant::from_micros((u64::from(key) * day / 100 + 7) * 1_000 + 333));
        }
        let mut fired = 0;
        for second in 1..=24 * 3_600 + 1 {
            w.expire(Instant::from_secs(second), |_| fired += 1);
        }
        assert_eq!(fired, 100);
        // From tick 0, a day (< 2^30 ticks) files at level 4 at most: at most four cascades
        // and one firing per entry, whatever the number of `expire` calls (86,401).
        assert!(w.slot_visits() <= 100 * 5, "{} slot visits", w.slot_visits());

        // A simulator jumping 10 s at a 1 us tick with a few entries.
        let mut w = TimerWheel::new(4, Duration::from_micros(1), Instant::ZERO);
        for key in 0..4 {
            w.schedule(key, Instant::from_millis(200 + 2_000 * u64::from(key)));
        }
        assert_eq!(fire(&mut w, Instant::from_secs(10)), [0, 1, 2, 3]);
        assert!(w.slot_visits() <= 4 * (LEVELS as u64 + 1), "{} slot visits", w.slot_visits());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "out of range")]
    fn out_of_range_key_is_a_debug_assertion() {
        TimerWheel::new(2, MS, Instant::ZERO).schedule(2, ms(1));
    }

    #[test]
    fn zero_tick_and_zero_capacity() {
        let mut w = TimerWheel::new(0, Duration::ZERO, Instant::ZERO);
        assert_eq!(w.tick(), Duration::from_nanos(1));
        assert_eq!(w.capacity(), 0);
        assert_eq!(w.deadline(0), None);
        assert_eq!(fire(&mut w, ms(5)), NONE);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Schedule(u32, u64),
        /// A deadline before the wheel's time, by this many nanoseconds.
        SchedulePast(u32, u64),
        Cancel(u32),
        Expire(u64),
    }

    const KEYS: u32 = 16;
    const HOUR: u64 = 3_600_000_000_000;

    /// Distances in nanoseconds from zero to days, with jumps, tick-sized steps and the edge
    /// of `u64`.
    fn distance() -> impl Strategy<Value = u64> {
        prop_oneof![
            3 => 0..4_000u64,
            3 => 0..10_000_000u64,
            3 => 0..HOUR,
            1 => 0..100 * HOUR,
            1 => Just(u64::MAX),
        ]
    }

    /// Time steps: as `distance`, without the jump to the end of time that would end most
    /// cases early.
    fn step() -> impl Strategy<Value = u64> {
        prop_oneof![0..4_000u64, 0..10_000_000u64, 0..HOUR, 0..100 * HOUR]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..KEYS, distance()).prop_map(|(k, d)| Op::Schedule(k, d)),
            1 => (0..KEYS, distance()).prop_map(|(k, d)| Op::SchedulePast(k, d)),
            1 => (0..KEYS).prop_map(Op::Cancel),
            3 => step().prop_map(Op::Expire),
        ]
    }

    fn start() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            0..u64::MAX / 2,
            // Just before a 2^36-tick boundary for 1 ns and 1 ms ticks.
            (0..1_000u64).prop_map(|d| (1 << 36) - d),
            (0..1_000u64).prop_map(|d| (1u64 << 36) * 1_000_000 - d),
            (0..HOUR).prop_map(|d| u64::MAX - d),
        ]
    }

    fn tick() -> impl Strategy<Value = u64> {
        prop_oneof![Just(1u64), Just(1_000), Just(1_000_000), 1..3_000_000u64]
    }

    proptest! {
        #![proptest_config(crate::proptest_config(ProptestConfig::with_cases(512)))]

        /// Against a sorted-set model: the same keys fire at every `expire`, never early,
        /// never late, and `next_deadline` is the model's minimum.
        #[test]
        fn matches_a_naive_model(
            tick in tick(),
            start in start(),
            ops in proptest::collection::vec(op(), 1..200),
        ) {
            let mut w = TimerWheel::new(KEYS as usize, Duration::from_nanos(tick), Instant::from_nanos(start));
            let mut by_key: BTreeMap<u32, u64> = BTreeMap::new();
            let mut by_time: BTreeSet<(u64, u32)> = BTreeSet::new();
            let mut now = start;
            for op in ops {
                match op {
                    Op::Schedule(k, d) | Op::SchedulePast(k, d) => {
                        let at = match op {
                            Op::Schedule(..) => now.saturating_add(d),
                            _ => now.saturating_sub(d),
                        };
                        if let Some(old) = by_key.insert(k, at) {
                            by_time.remove(&(old, k));
                        }
                        by_time.insert((at, k));
                        w.schedule(k, Instant::from_nanos(at));
                    }
                    Op::Cancel(k) => {
                        if let Some(old) = by_key.remove(&k) {
                            by_time.remove(&(old, k));
                        }
                        w.cancel(k);
                    }
                    Op::Expire(d) => {
                        now = now.saturating_add(d);
                        let mut want = Vec::new();
                        while let Some(&(at, k)) = by_time.first() {
                            if at > now {
                                break;
                            }
                            by_time.pop_first();
                            by_key.remove(&k);
                            want.push(k);
                        }
                        want.sort_unstable();
                        let got = fire(&mut w, Instant::from_nanos(now));
                        prop_assert_eq!(got, want, "expire at {}", now);
                    }
                }
                prop_assert_eq!(w.len(), by_key.len());
                prop_assert_eq!(w.next_deadline(), by_time.first().map(|&(at, _)| Instant::from_nanos(at)));
                for k in 0..KEYS {
                    prop_assert_eq!(w.deadline(k), by_key.get(&k).map(|&at| Instant::from_nanos(at)));
                }
            }
        }
    }
}
