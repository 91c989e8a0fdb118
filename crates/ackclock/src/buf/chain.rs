//! Buffers given back together: a run of handles released into a [`FreeChain`] is linked
//! into a chain as each goes in, and the chain goes onto its pool's free list with one
//! compare-and-swap, instead of one per buffer.
//!
//! For a receive path that frees many buffers in one step: the segments a merged ACK
//! acknowledged leave the send queue together, and a batch's pure ACKs are done with one
//! after the other. Each handle still gives up its reference as it goes in (a buffer another
//! handle shares is not chained, and goes back when that handle drops, as before); only the
//! last reference's return to the free list is deferred, to [`FreeChain::flush`] or the
//! chain's drop. Until then the chained buffers are neither in use nor available
//! ([`Pool::available`](super::Pool::available) does not count them), so a holder flushes
//! before anything that may allocate.

use super::pool::{PoolInner, NIL};
use super::PBuf;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

/// A chain of freed buffers of one pool, not yet on its free list (see the module
/// documentation). Empty, it holds nothing; its pool stays alive while it holds buffers,
/// which are not back yet. Buffers of another pool than the chain's flush the chain first
/// and begin a new one.
#[derive(Default)]
pub struct FreeChain {
    /// The pool of the chained buffers: `Some` exactly when `n > 0`.
    pool: Option<NonNull<PoolInner>>,
    /// The buffer put last, the chain's head.
    first: u32,
    /// The buffer put first, whose link the push sets.
    last: u32,
    /// Buffers in the chain.
    n: u32,
}

impl FreeChain {
    /// An empty chain.
    pub const fn new() -> FreeChain {
        FreeChain { pool: None, first: NIL, last: NIL, n: 0 }
    }

    /// Buffers in the chain, not yet back on their free list.
    pub fn len(&self) -> usize {
        self.n as usize
    }

    /// Whether the chain holds no buffer.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Give up `buf`: its reference is dropped at once, as dropping it would, and if it was
    /// the last one, the buffer joins the chain instead of going back to its pool now.
    #[inline]
    pub fn put(&mut self, buf: PBuf) {
        // The handle's reference is given up here, not by its drop (its fields own nothing
        // else): its whole drop, out of line, per buffer would cost about what the chain
        // saves.
        let buf = ManuallyDrop::new(buf);
        let (home, i) = (buf.home, buf.index);
        if !buf.release_ref() {
            return;
        }
        if self.pool == Some(home) {
            buf.inner().link(i, self.first);
            self.first = i;
            self.n += 1;
            return;
        }
        self.begin(home, i);
    }

    /// Begin a new chain with free buffer `i` of `pool`, after flushing the chain of another
    /// pool if there was one. Out of line, so that `put` needs no registers saved on its
    /// common path.
    #[inline(never)]
    fn begin(&mut self, pool: NonNull<PoolInner>, i: u32) {
        self.flush();
        self.pool = Some(pool);
        self.first = i;
        self.last = i;
        self.n = 1;
    }

    /// Put the chained buffers back on their pool's free list (one compare-and-swap) and
    /// let go of the pool.
    #[inline]
    pub fn flush(&mut self) {
        if let Some(pool) = self.pool.take() {
            let n = core::mem::take(&mut self.n);
            // SAFETY: the chained buffers are out of their pool until this pushes them, so
            // it is alive; the chain lets go of it here.
            unsafe { PoolInner::push_chain(pool, self.first, self.last, n) };
        }
    }
}

// SAFETY: the chain holds free buffers of its pool (a `Sync` type) and hands them to the
// pool's atomics, from whichever thread flushes it.
unsafe impl Send for FreeChain {}
// SAFETY: `&FreeChain` only reads its length.
unsafe impl Sync for FreeChain {}

impl Drop for FreeChain {
    fn drop(&mut self) {
        self.flush();
    }
}

impl core::fmt::Debug for FreeChain {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FreeChain").field("len", &self.n).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pool;
    use super::super::{Pool, PoolConfig};
    use super::*;
    use std::sync::atomic::Ordering;

    /// Chained buffers are neither in use nor available until the flush, which returns them
    /// all; then they are handed out again, most recently put first, each exactly once.
    #[test]
    fn a_chain_goes_back_whole_at_the_flush() {
        let p = pool(8);
        let bufs: Vec<PBuf> = (0..5).map(|_| p.alloc().unwrap()).collect();
        let indices: Vec<u32> = bufs.iter().map(PBuf::index).collect();
        let mut chain = FreeChain::new();
        for b in bufs {
            chain.put(b);
        }
        assert_eq!((chain.len(), p.available()), (5, 3));
        chain.flush();
        assert_eq!((chain.len(), p.available()), (0, 8));
        chain.flush();
        assert_eq!(p.available(), 8, "a second flush has nothing to give back");
        let again: Vec<u32> = (0..5).map(|_| p.alloc().unwrap().index()).collect();
        // Each `alloc` above frees its buffer at once, so it is the same buffer each time.
        assert!(again.iter().all(|&i| i == indices[4]));
        let held: Vec<PBuf> = (0..8).map(|_| p.alloc().unwrap()).collect();
        let mut seen: Vec<u32> = held.iter().map(PBuf::index).collect();
        assert_eq!(&seen[..5], &[indices[4], indices[3], indices[2], indices[1], indices[0]]);
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 8, "no buffer handed out twice");
        assert_eq!(p.alloc().unwrap_err(), crate::buf::PoolExhausted);
    }

    /// A shared buffer is not chained: the chain drops one reference, and the buffer goes
    /// back when its other handle drops, as a plain drop would have it.
    #[test]
    fn a_shared_buffer_goes_back_with_its_last_handle() {
        let p = pool(2);
        let a = p.alloc().unwrap();
        let b = a.share();
        let mut chain = FreeChain::new();
        chain.put(a);
        assert!(chain.is_empty() && b.is_unique());
        chain.put(b);
        assert_eq!((chain.len(), p.available()), (1, 1));
        drop(chain);
        assert_eq!(p.available(), 2, "dropping the chain flushes it");
    }

    /// A pool whose last owner is gone lives on while a buffer is out, whether that buffer
    /// is held, shared or chained, and is freed exactly once by the last one back; a pool
    /// with every buffer home is freed by its last owner at once.
    #[test]
    fn the_last_buffer_or_the_last_owner_frees_the_pool() {
        let p = pool(8);
        let freed = super::super::pool::watch(&p);
        let count = || freed.load(Ordering::Relaxed);
        let mut chain = FreeChain::new();
        let a = p.alloc().unwrap();
        let shared = a.share();
        let (mut b, c) = (p.alloc().unwrap(), p.alloc().unwrap());
        drop(p.clone());
        drop(p);
        assert_eq!(count(), 0, "four handles on three buffers are out");
        b.append(3).unwrap().copy_from_slice(b"abc");
        chain.put(a);
        chain.put(c);
        drop(shared);
        assert_eq!((count(), b.data()), (0, &b"abc"[..]), "one buffer held, two chained");
        drop(b);
        assert_eq!(count(), 0, "two chained buffers are still out");
        chain.flush();
        assert_eq!(count(), 1, "the flush brought the last ones home");

        let q = pool(2);
        let freed = super::super::pool::watch(&q);
        drop(q.alloc().unwrap());
        let r = q.clone();
        drop(q);
        assert_eq!(freed.load(Ordering::Relaxed), 0, "an owner is left");
        drop(r);
        assert_eq!(freed.load(Ordering::Relaxed), 1, "every buffer home: the last owner frees it");
    }

    /// Buffers of two pools (a size class beside its pool): each goes back to its own, the
    /// chain flushing at every change of pool; and the chain keeps a pool alive.
    #[test]
    fn each_buffer_goes_back_to_its_own_pool() {
        let large = PoolConfig { buffers: 3, buffer_size: 8192, headroom: 64 };
        let p = Pool::with_small_class(large, crate::buf::small_class_config(large, 3)).unwrap();
        let class = p.small_class().unwrap().clone();
        let mut chain = FreeChain::new();
        chain.put(p.alloc().unwrap());
        chain.put(p.alloc().unwrap());
        chain.put(p.alloc_small().unwrap());
        assert_eq!((p.available(), class.available(), chain.len()), (3, 2, 1));
        chain.put(p.alloc().unwrap());
        assert_eq!((p.available(), class.available(), chain.len()), (2, 3, 1));
        chain.flush();
        assert_eq!((p.available(), class.available()), (3, 3));

        let q = pool(2);
        let freed = super::super::pool::watch(&q);
        chain.put(q.alloc().unwrap());
        drop(q);
        assert_eq!(freed.load(Ordering::Relaxed), 0, "the chain's buffer keeps its pool");
        chain.flush();
        assert_eq!(freed.load(Ordering::Relaxed), 1);

        // The small class lives as long as its pool, and goes with it.
        let class_freed = super::super::pool::watch(&class);
        let small = class.alloc().unwrap();
        drop((p, class));
        assert_eq!(class_freed.load(Ordering::Relaxed), 0, "a small buffer is out");
        drop(small);
        assert_eq!(class_freed.load(Ordering::Relaxed), 1);
    }

    /// Threads allocating, writing their mark, checking it, and freeing in chains of
    /// random length or one at a time: no buffer is ever handed to two holders at once,
    /// and every buffer is back at the end.
    #[test]
    fn chains_and_single_frees_cross_threads() {
        let p = pool(32);
        // Fewer under Miri, which interprets every step (its race checks need only a few).
        let rounds: u32 = if cfg!(miri) { 300 } else { 20_000 };
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let p = p.clone();
                std::thread::spawn(move || {
                    let mut chain = FreeChain::new();
                    let mut held = Vec::new();
                    let mut x = t as u32 + 1;
                    for round in 0..rounds {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        if let Ok(mut b) = p.alloc() {
                            b.append(4).unwrap().copy_from_slice(&[t, round as u8, 0xa5, t]);
                            held.push(b);
                        }
                        if held.len() > (x % 6) as usize {
                            for b in held.drain(..) {
                                assert_eq!(b.data(), &[t, b.data()[1], 0xa5, t], "another thread wrote it");
                                if x & 1 == 0 {
                                    chain.put(b);
                                } else {
                                    drop(b);
                                }
                            }
                            if x & 2 == 0 {
                                chain.flush();
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(p.available(), 32);
    }
}
