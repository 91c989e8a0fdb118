//! Many handles to one buffer, counted with one atomic step instead of one per handle.
//!
//! A sent offload unit (up to 64 KiB) is cut into MSS-sized views of its one buffer, about
//! 45 handles, and those handles are given up one after another when the ACKs cover them. A
//! locked read-modify-write per handle was most of the cost of both steps in a profile of
//! the relay's download (the `lock incl` of [`PBuf::share`] under 70% of the segment
//! slicing's samples, the `lock decl` of the drop over 60% of the ACK path's release).
//! [`Shares`] takes all the new references with one addition; [`Runs`] gives up
//! consecutive handles to one buffer with one subtraction. The counts stay exact at every
//! point a handle can be observed: a handle is never out without its reference counted.

use super::PBuf;
use core::mem::ManuallyDrop;

/// The most references a buffer may have through [`PBuf::shares`] (as `Arc`'s limit, half
/// the count's range).
const MAX_REFS: u32 = u32::MAX / 2;
use core::sync::atomic::Ordering;

/// `n` new read-only handles to a buffer, whose references were counted together
/// ([`PBuf::shares`]). Each [`next`](Iterator::next) hands one out; the references of the
/// handles not taken are given back when this is dropped.
#[derive(Debug)]
pub struct Shares {
    /// A handle holding one of the counted references, with the source's view.
    proto: ManuallyDrop<PBuf>,
    /// Counted references not handed out yet (the prototype's own included).
    left: u32,
}

impl PBuf {
    /// `n` more read-only handles to this buffer, each with a copy of this view and
    /// metadata, as `n` calls of [`share`](Self::share) would make, with one atomic addition.
    /// Aborts the process if the buffer's count would pass `u32::MAX / 2`.
    pub fn shares(&self, n: u32) -> Shares {
        if n == 0 {
            // Nothing counted: the prototype holds no reference, and is forgotten.
            return Shares { proto: ManuallyDrop::new(self.alias()), left: 0 };
        }
        // Relaxed, as `share`: the new handles derive from a live one.
        let old = self.inner().refcnt[self.index as usize].fetch_add(n, Ordering::Relaxed);
        // The handles come out one at a time, so a count that wrapped would cost no memory
        // first: abort as `Arc` does on overflow, rather than free a buffer still in use.
        if old.checked_add(n).is_none_or(|c| c > MAX_REFS) {
            std::process::abort();
        }
        Shares { proto: ManuallyDrop::new(self.alias()), left: n }
    }

    /// Another handle to this buffer without counting it: the caller has counted it.
    fn alias(&self) -> PBuf {
        PBuf { home: self.home, index: self.index, head: self.head, len: self.len, meta: self.meta }
    }

    /// Whether `other` is a handle to the same buffer.
    #[inline]
    fn same_buffer(&self, other: &PBuf) -> bool {
        self.index == other.index && self.home == other.home
    }
}

impl Iterator for Shares {
    type Item = PBuf;

    #[inline]
    fn next(&mut self) -> Option<PBuf> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(self.proto.alias())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Shares {}

impl Drop for Shares {
    fn drop(&mut self) {
        // SAFETY: taken once, here; nothing uses it after.
        let proto = unsafe { ManuallyDrop::take(&mut self.proto) };
        if self.left == 0 {
            // Every counted reference is out in a handle: the prototype holds none.
            core::mem::forget(proto);
            return;
        }
        // The untaken references but the prototype's own go with one subtraction; the
        // handles out hold theirs, so the count stays positive. Then the prototype's
        // reference goes as any handle's does (the buffer returns if it was the last).
        if self.left > 1 {
            proto.inner().refcnt[proto.index as usize].fetch_sub(self.left - 1, Ordering::Release);
        }
        drop(proto);
    }
}

/// Handles given up one after another, whose consecutive handles to one buffer give up
/// their references with one atomic subtraction: the MSS-sized pieces of one offload unit
/// that an ACK covers. Each [`put`](Self::put) that ends a run returns that run's last
/// handle, holding the run's last reference, for the caller to drop or put into a
/// [`FreeChain`](super::FreeChain); [`finish`](Self::finish) returns the last run's.
/// Dropped unfinished, the last run is released as a drop would.
#[derive(Debug, Default)]
pub struct Runs {
    /// The run's first handle, standing for the run.
    held: Option<PBuf>,
    /// Handles of the same buffer put after it, whose references are still counted.
    more: u32,
}

impl Runs {
    /// No run yet.
    pub const fn new() -> Runs {
        Runs { held: None, more: 0 }
    }

    /// Give up `buf`. `Some`: it began a new run, and the previous run's references but one
    /// are given up; the returned handle holds that one.
    #[inline]
    pub fn put(&mut self, buf: PBuf) -> Option<PBuf> {
        if let Some(held) = &self.held {
            if held.same_buffer(&buf) {
                // Its reference stays counted until the run ends.
                core::mem::forget(buf);
                self.more += 1;
                return None;
            }
        }
        let done = self.settle();
        self.held = Some(buf);
        done
    }

    /// End the last run: its handle, holding its last reference, if there was one.
    #[inline]
    pub fn finish(&mut self) -> Option<PBuf> {
        self.settle()
    }

    /// The current run's references but one given up with one subtraction (Release, as a
    /// drop: the count stays positive, since the returned handle holds one).
    #[inline]
    fn settle(&mut self) -> Option<PBuf> {
        let held = self.held.take()?;
        if self.more > 0 {
            held.inner().refcnt[held.index as usize].fetch_sub(self.more, Ordering::Release);
            self.more = 0;
        }
        Some(held)
    }
}

impl Drop for Runs {
    fn drop(&mut self) {
        drop(self.settle());
    }
}

#[cfg(test)]
mod tests {
    use crate::buf::{FreeChain, Pool, PoolConfig};

    fn pool(n: usize) -> Pool {
        Pool::new(PoolConfig { buffers: n, buffer_size: 256, headroom: 64 }).unwrap()
    }

    #[test]
    fn shares_count_each_handle_and_the_buffer_returns_after_the_last() {
        let p = pool(2);
        let mut b = p.alloc().unwrap();
        b.append_copy_sum(&[7; 100]).unwrap();
        let all: Vec<_> = b.shares(5).collect();
        assert_eq!(all.len(), 5);
        assert!(all.iter().all(|s| s.data() == &[7; 100][..]));
        assert!(!b.is_unique());
        drop(b);
        assert_eq!(p.available(), 1);
        let mut all = all;
        let last = all.pop().unwrap();
        drop(all);
        assert!(last.is_unique());
        drop(last);
        assert_eq!(p.available(), 2);
    }

    #[test]
    fn shares_not_taken_give_their_references_back() {
        let p = pool(1);
        let b = p.alloc().unwrap();
        for taken in 0..4 {
            let mut s = b.shares(3);
            let out: Vec<_> = s.by_ref().take(taken).collect();
            drop(s);
            assert_eq!(out.len(), taken.min(3));
            drop(out);
            assert!(b.is_unique(), "after taking {taken} of 3");
        }
        assert!(b.shares(0).next().is_none());
        assert!(b.is_unique());
        drop(b);
        assert_eq!(p.available(), 1);
    }

    #[test]
    fn runs_release_each_buffer_once_its_last_handle_is_put() {
        let p = pool(3);
        let (a, b, c) = (p.alloc().unwrap(), p.alloc().unwrap(), p.alloc().unwrap());
        // Handles in the order a send queue frees them: a a a b c c, with one handle of
        // c still held elsewhere.
        let mut order: Vec<_> = a.shares(2).collect();
        order.insert(0, a);
        order.push(b);
        let keep = c.share();
        order.extend(c.shares(1));
        order.push(c);
        let mut runs = crate::buf::Runs::new();
        let mut chain = FreeChain::new();
        for h in order {
            if let Some(done) = runs.put(h) {
                chain.put(done);
            }
        }
        if let Some(done) = runs.finish() {
            chain.put(done);
        }
        assert!(runs.finish().is_none());
        assert_eq!(chain.len(), 2, "a and b free; c is still held");
        chain.flush();
        assert_eq!(p.available(), 2);
        assert!(keep.is_unique());
        drop(keep);
        assert_eq!(p.available(), 3);
    }

    #[test]
    fn runs_dropped_unfinished_release_the_last_run() {
        let p = pool(1);
        let a = p.alloc().unwrap();
        let mut runs = crate::buf::Runs::new();
        for h in a.shares(4) {
            assert!(runs.put(h).is_none());
        }
        assert!(runs.put(a).is_none());
        drop(runs);
        assert_eq!(p.available(), 1);
    }
}
