//! Many handles to one buffer, counted with one atomic step instead of one per handle.
//!
//! A sent offload unit (up to 64 KiB) is cut into MSS-sized views of its one buffer, about
//! 45 handles. A locked read-modify-write per handle was most of the cost of the cut in a
//! profile of the relay's download (the `lock incl` of [`PBuf::share`] under 70% of the
//! segment slicing's samples). [`Shares`] takes all the new references with one addition.
//! The counts stay exact at every point a handle can be observed: a handle is never out
//! without its reference counted. (Giving the pieces back in runs, one subtraction per
//! buffer, was measured too and not kept: on the receive path's pure ACKs, whose segments
//! each have their own buffer, the run's bookkeeping cost 45 instructions an ACK,
//! `scripts/callgrind-rxpath`.)

use super::PBuf;
use core::mem::ManuallyDrop;
use core::sync::atomic::Ordering;

/// The most references a buffer may have through [`PBuf::shares`] (as `Arc`'s limit, half
/// the count's range).
const MAX_REFS: u32 = u32::MAX / 2;

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
    #[inline]
    pub(super) fn alias(&self) -> PBuf {
        PBuf { home: self.home, index: self.index, head: self.head, len: self.len, meta: self.meta }
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

#[cfg(test)]
mod tests {
    use crate::buf::tests::pool;

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
}
