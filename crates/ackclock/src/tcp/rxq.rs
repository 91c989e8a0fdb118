//! The receive queue: in-order segments waiting for the application.
//!
//! Appending is the last step of header prediction's data case (Jacobson 1993), so it must be a
//! few stores, inlined: a `VecDeque::push_back` is a call that is not inlined, and moves the
//! 56-byte entry through the stack (BENCHMARKS.md, "Receive path", has the measurement).

use super::seq::SeqNumber;
use super::tcb::{RxSeg, Unverified};
use crate::buf::PBuf;
use core::fmt;

/// A queue of [`RxSeg`]s: a vector whose front part (before `head`) has been read.
///
/// Appending is `Vec::push`, which writes the new entry in place: no drop of an old value
/// and no copy through the stack. Reading from the front takes entries out (leaving `None`)
/// and moves `head`; the vector is emptied when the reader catches up and compacted when the
/// read part is at least half of it, so each entry is moved at most about once more.
#[derive(Default)]
pub(crate) struct RxQueue {
    v: Vec<Option<RxSeg>>,
    /// Index in `v` of the front entry.
    head: usize,
}

impl RxQueue {
    /// An empty queue; it allocates on the first push.
    pub fn new() -> RxQueue {
        RxQueue { v: Vec::new(), head: 0 }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.v.len() - self.head
    }

    /// Entries the storage holds without growing.
    pub fn capacity(&self) -> usize {
        self.v.capacity()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.v.len() == self.head
    }

    /// Append at the back.
    #[inline(always)]
    pub fn push_back(&mut self, seg: RxSeg) {
        self.make_room();
        self.v.push(Some(seg));
    }

    /// Before a push into a full vector, drop the read part instead of growing: the vector
    /// then grows only with the number of unread entries (bounded by the receive window), so
    /// its size follows the deepest the queue has been, not when the reader happened to read.
    #[inline(always)]
    fn make_room(&mut self) {
        if self.v.len() == self.v.capacity() && self.head > 0 {
            self.compact();
        }
    }

    #[inline(never)]
    fn compact(&mut self) {
        self.v.drain(..self.head);
        self.head = 0;
    }

    /// Append a received frame whose payload is the `len` bytes at `off` (its view is cut to
    /// them in place, and its offload flags cleared).
    #[inline(always)]
    pub fn push_frame(&mut self, seq: SeqNumber, buf: PBuf, off: u32, len: u32, unverified: Option<Unverified>) {
        self.make_room();
        self.v.push(Some(RxSeg { seq, buf, unverified }));
        if let Some(Some(e)) = self.v.last_mut() {
            let _ = e.buf.narrow(off as usize, len as usize);
            e.buf.meta.flags = Default::default();
        }
    }

    /// After a removal: forget the read part when nothing is left, or when it is at least
    /// half of the vector.
    fn settle(&mut self) {
        if self.head == self.v.len() {
            // Every entry is a `None` left by `pop_front` (the ones after `head` were
            // popped from the back): nothing to drop, so no drop loop over them.
            debug_assert!(self.v.iter().all(Option::is_none));
            // SAFETY: 0 <= capacity, and the entries forgotten own nothing (above).
            unsafe { self.v.set_len(0) };
            self.head = 0;
        } else if self.head >= 32 && self.head * 2 >= self.v.len() {
            self.compact();
        }
    }

    pub fn pop_front(&mut self) -> Option<RxSeg> {
        let s = self.v.get_mut(self.head)?.take();
        self.head += 1;
        self.settle();
        s
    }

    pub fn pop_back(&mut self) -> Option<RxSeg> {
        if self.is_empty() {
            return None;
        }
        let s = self.v.pop().flatten();
        self.settle();
        s
    }

    pub fn get(&self, i: usize) -> Option<&RxSeg> {
        self.v.get(self.head.checked_add(i)?)?.as_ref()
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut RxSeg> {
        self.v.get_mut(self.head.checked_add(i)?)?.as_mut()
    }

    pub fn front(&self) -> Option<&RxSeg> {
        self.get(0)
    }

    pub fn front_mut(&mut self) -> Option<&mut RxSeg> {
        self.get_mut(0)
    }

    pub fn back_mut(&mut self) -> Option<&mut RxSeg> {
        if self.is_empty() {
            return None;
        }
        self.v.last_mut()?.as_mut()
    }

    /// Drop every segment (their buffers go back to the pool); the vector stays allocated.
    pub fn clear(&mut self) {
        self.v.clear();
        self.head = 0;
    }

    pub fn iter(&self) -> impl Iterator<Item = &RxSeg> {
        self.v[self.head..].iter().flatten()
    }
}

impl core::ops::Index<usize> for RxQueue {
    type Output = RxSeg;
    /// Panics when `i` is out of range, as `VecDeque` does.
    fn index(&self, i: usize) -> &RxSeg {
        self.get(i).expect("receive queue index out of range")
    }
}

impl core::ops::IndexMut<usize> for RxQueue {
    fn index_mut(&mut self, i: usize) -> &mut RxSeg {
        self.get_mut(i).expect("receive queue index out of range")
    }
}

impl fmt::Debug for RxQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};
    use crate::tcp::seq::SeqNumber;

    fn seg(pool: &Pool, seq: u32) -> RxSeg {
        RxSeg { seq: SeqNumber(seq), buf: pool.alloc().unwrap(), unverified: None }
    }

    /// Order is kept across compaction and growth, from both ends, and every buffer goes
    /// back to the pool.
    #[test]
    fn fifo_across_compaction_and_growth() {
        let pool = Pool::new(PoolConfig { buffers: 64, buffer_size: 256, headroom: 0 }).unwrap();
        let mut q = RxQueue::new();
        let mut model = std::collections::VecDeque::new();
        let mut next = 0u32;
        // Push/pop patterns that empty, compact and grow the vector at several sizes.
        for round in 0..200u32 {
            let pushes = (round * 7) % 11;
            for _ in 0..pushes {
                if pool.available() == 0 {
                    break;
                }
                q.push_back(seg(&pool, next));
                model.push_back(next);
                next += 1;
            }
            let pops = (round * 5) % 9;
            for k in 0..pops {
                let (got, want) =
                    if k % 3 == 2 { (q.pop_back(), model.pop_back()) } else { (q.pop_front(), model.pop_front()) };
                assert_eq!(got.map(|s| s.seq.0), want);
            }
            assert_eq!(q.len(), model.len());
            let seqs: Vec<u32> = q.iter().map(|s| s.seq.0).collect();
            assert_eq!(seqs, model.iter().copied().collect::<Vec<_>>());
            assert_eq!(q.front().map(|s| s.seq.0), model.front().copied());
            assert_eq!(q.back_mut().map(|s| s.seq.0), model.back().copied());
        }
        assert_eq!(pool.available() + q.len(), 64);
        q.clear();
        assert!(q.is_empty() && q.front().is_none() && q.pop_front().is_none() && q.pop_back().is_none());
        assert_eq!(pool.available(), 64);
        assert!(q.get(0).is_none());
    }
}
