//! The buffer pool: N fixed-size buffers in one allocation made at start-up, and a
//! lock-free free list of their indices.
//!
//! The free list is Afterburner's Tx_Free/Rx_Free FIFO (Dalton et al. 1993): a buffer is free when no
//! handle refers to it, and dropping the last [`PBuf`] handle pushes it back. Nothing here
//! allocates after [`Pool::new`].
//!
//! **Two ends, two cache lines.** A pool is often filled on one thread and emptied on
//! another: a runtime's writer allocates the segments its reader's stack frees, over the
//! in-memory pipe. With one list head, every allocation and every free was an atomic
//! read-modify-write of the same cache line (and of one free count), which moved between
//! the two cores for each buffer. So allocations pop from one list and frees push onto
//! another, each with its own count on a cache line of its own. An allocation that finds
//! freed buffers waiting takes all of them with one swap: the most recently freed for
//! itself, the rest in front of its list. So the buffers used are still the ones freed a
//! moment ago (warm in the cache, and resident), and a freeing thread's line is taken once
//! per batch it freed, not once per buffer.
//!
//! **Size classes.** A pool may carry a pool of smaller buffers beside it
//! ([`Pool::with_small_class`]), as a slab allocator keeps a cache per size: a stack whose
//! pool holds 64 KiB buffers for segmentation offload builds its pure ACKs and other
//! segments without payload in 256-byte buffers ([`Pool::alloc_small`]), and a TAP or TUN
//! receiving coalesced frames into 64 KiB buffers reads every frame that fits an MTU into an
//! MTU-sized one. So a 66-byte ACK, or a 1,514-byte frame held in a receive queue, never pins
//! 64 KiB.
//!
//! **Who frees the pool.** A buffer handle holds no reference count on its pool. With an
//! `Arc` per handle, every allocation, share and free also wrote the `Arc`'s count, one cache
//! line for the whole pool, which moved between cores as often as buffers did, and cost a
//! locked instruction per handle even on one thread. The pool's memory must still outlive
//! its last buffer, and the two counts the free list keeps already say how many buffers are
//! out: `taken - given`. So the [`Pool`] handles (its owners) are counted, and when the last
//! one goes no allocation can follow; it adds `BIAS - taken` to `given` in one atomic
//! operation. From then on `given` reaches exactly `BIAS` when the last buffer comes back,
//! and whichever of the two (the last owner, or the free that brings the last buffer home)
//! sees that value frees the pool; the other never touches it again. Before that moment
//! `given <= taken < BIAS`, so no free can mistake it.
//!
//! **Untouched until used.** A buffer that was never allocated is on neither list: the
//! allocating end hands out `fresh`, `fresh + 1`, ... only when both lists are empty (or
//! look so to an allocation racing another's take-over: harmless, a buffer made resident a
//! little early), and its link and count live in zero-filled memory no one writes before.
//! So a pool of 32,768 buffers costs, until the load needs them, the address space of its
//! buffers and of its 8 bytes per buffer of links and counts, and the memory of the buffers
//! in use: the pool a relay sizes for its busiest moment no longer costs 256 KiB of RAM at
//! start.

use super::sync::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use super::PBuf;
use core::fmt;
use core::ptr::NonNull;
#[cfg(test)]
use std::sync::Arc;

/// End of the free list; also the index of a handle whose buffer went into a [`FreeChain`](super::FreeChain).
pub(super) const NIL: u32 = u32::MAX;

/// Buffers start on cache-line boundaries.
const ALIGN: usize = 64;

/// Default headroom: a VLAN-tagged Ethernet header (18) + IPv4 with full options (60) + TCP
/// with full options (60) is 138 bytes; a virtio-net header for TAP offload adds 12. 160 fits
/// all of it and keeps the payload of an untagged option-less frame 8-byte aligned.
pub const DEFAULT_HEADROOM: usize = 160;

/// Default buffer size: headroom plus a 1500-byte IP packet and its Ethernet header, rounded
/// up to a cache line multiple.
pub const DEFAULT_BUFFER_SIZE: usize = 1728;

/// Pools whose buffers are at least this large get a small class (see
/// [`StackConfig::small_buffers`](crate::StackConfig::small_buffers)).
pub const SMALL_CLASS_ABOVE: usize = 4096;

/// Bytes a small-class buffer holds behind its headroom: the longest frame without payload
/// is an Ethernet header with a VLAN tag, IPv4 with options and TCP with options (18 + 60 +
/// 60), and it is built in the headroom; this is room for a short ARP or ICMP frame besides.
const SMALL_ROOM: usize = 96;

/// The small class beside a pool of `large` buffers: `buffers` buffers with the same
/// headroom and `SMALL_ROOM` (96) bytes behind it (256 bytes with the default headroom).
pub fn small_class_config(large: PoolConfig, buffers: usize) -> PoolConfig {
    PoolConfig { buffers, buffer_size: (large.headroom + SMALL_ROOM).next_multiple_of(64), headroom: large.headroom }
}

/// How a pool is carved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Number of buffers.
    pub buffers: usize,
    /// Bytes per buffer, headroom included. Rounded up to a multiple of 64.
    pub buffer_size: usize,
    /// Bytes reserved in front of the data of a newly allocated buffer, so that headers
    /// can be prepended in place.
    pub headroom: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig { buffers: 1024, buffer_size: DEFAULT_BUFFER_SIZE, headroom: DEFAULT_HEADROOM }
    }
}

/// Why a pool could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolConfigError {
    /// Zero buffers, or more than `u32::MAX - 1`.
    BadCount,
    /// Headroom not smaller than the buffer, or a buffer larger than 4 GiB.
    BadSize,
    /// The allocation failed or its size overflows.
    OutOfMemory,
}

impl fmt::Display for PoolConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoolConfigError::BadCount => "bad buffer count",
            PoolConfigError::BadSize => "bad buffer size or headroom",
            PoolConfigError::OutOfMemory => "cannot allocate the pool",
        })
    }
}

impl std::error::Error for PoolConfigError {}

/// Every buffer of the pool is in use. The caller counts it and drops what it was doing;
/// the pool never falls back to the heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolExhausted;

impl fmt::Display for PoolExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("packet buffer pool exhausted")
    }
}

impl std::error::Error for PoolExhausted {}

/// A pool of packet buffers. Cheap to clone (a count of its owners). Its memory lives
/// until the last owner is gone and every [`PBuf`] is back (see the module documentation).
pub struct Pool {
    inner: NonNull<PoolInner>,
}

// SAFETY: a `Pool` is shared access to a `PoolInner`, which is `Sync`.
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

impl Clone for Pool {
    fn clone(&self) -> Pool {
        // Relaxed, as for `Arc::clone`: the new owner is derived from a live one.
        self.inner().owners.fetch_add(1, Ordering::Relaxed);
        Pool { inner: self.inner }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // As `Arc`'s drop: Release, then an Acquire fence for the last owner, so that every
        // owner's allocations (`taken`) are seen by the one that orphans the pool.
        if self.inner().owners.fetch_sub(1, Ordering::Release) == 1 {
            fence(Ordering::Acquire);
            // SAFETY: the pool lives while it has an owner, and this was the last.
            unsafe { PoolInner::orphan(self.inner) }
        }
    }
}

pub(super) struct PoolInner {
    region: Region,
    pub(super) buffer_size: u32,
    pub(super) headroom: u32,
    count: u32,
    /// Handles per buffer; 0 when free.
    pub(super) refcnt: Box<[AtomicU32]>,
    /// Free-list links (both lists).
    next: Box<[AtomicU32]>,
    /// Where allocations pop.
    take: Padded<TakeEnd>,
    /// Where frees push.
    give: Padded<GiveEnd>,
    exhausted: AtomicU64,
    /// `Pool` handles (owners) alive.
    owners: AtomicUsize,
    /// The smaller size class beside this one, if any.
    small: Option<Pool>,
    /// Counts the pool's deallocation, for tests that watch who frees it.
    #[cfg(test)]
    freed: std::sync::OnceLock<Arc<std::sync::atomic::AtomicUsize>>,
}

/// One cache line to itself, so that the two ends of the free list do not share one.
#[repr(align(64))]
struct Padded<T>(T);

/// The allocating end: a Treiber stack of free buffers and the count popped from it.
struct TakeEnd {
    /// (ABA tag << 32) | index of the first free buffer.
    head: AtomicU64,
    /// Buffers taken since the pool was made.
    taken: AtomicU64,
    /// Buffers `fresh..count` were never taken, and are on no list.
    fresh: AtomicU32,
}

/// The freeing end: buffers freed since an allocation last took them, and the count freed.
struct GiveEnd {
    /// (last << 32) | first of the freed buffers' list, or `EMPTY`. Pushes put a chain in
    /// front and keep `last`; an allocation swaps the whole list out.
    list: AtomicU64,
    /// Buffers given back since the pool was made; once the last owner is gone, `BIAS`
    /// minus the buffers still out (see the module documentation).
    given: AtomicU64,
}

/// What `given` reaches when the last buffer of a pool without owners comes home. Above
/// any count of buffers taken.
const BIAS: u64 = 1 << 63;

/// No freed buffers waiting.
const EMPTY: u64 = ((NIL as u64) << 32) | NIL as u64;

// SAFETY: the buffer memory is only written through a handle that is the sole reference to
// its buffer (checked by `refcnt`), and handed between threads with Release/Acquire on the
// free list and the reference counts, so sharing the pool between threads is sound.
unsafe impl Send for PoolInner {}
// SAFETY: see above.
unsafe impl Sync for PoolInner {}

impl Pool {
    /// Reserve every buffer up front: the address space at once, the memory as buffers are
    /// first used (see the module documentation).
    pub fn new(config: PoolConfig) -> Result<Pool, PoolConfigError> {
        Pool::build(config, None)
    }

    /// Bytes per buffer for `config`: its size rounded up to a cache line.
    fn buffer_bytes(config: &PoolConfig) -> Result<usize, PoolConfigError> {
        config.buffer_size.checked_next_multiple_of(ALIGN).ok_or(PoolConfigError::BadSize)
    }

    fn build(config: PoolConfig, small: Option<Pool>) -> Result<Pool, PoolConfigError> {
        if config.buffers == 0 || config.buffers >= NIL as usize {
            return Err(PoolConfigError::BadCount);
        }
        let size = Pool::buffer_bytes(&config)?;
        if config.headroom >= size || size > u32::MAX as usize {
            return Err(PoolConfigError::BadSize);
        }
        let total = size.checked_mul(config.buffers).ok_or(PoolConfigError::OutOfMemory)?;
        let region = Region::new(total)?;
        let count = config.buffers as u32;
        // Links and counts of buffers never taken are never read: zero-filled memory that
        // stays untouched until a buffer is first used (see the module documentation).
        let (next, refcnt) = (zeroed_atomics(count)?, zeroed_atomics(count)?);
        let inner = Box::new(PoolInner {
            region,
            buffer_size: size as u32,
            headroom: config.headroom as u32,
            count,
            refcnt,
            next,
            take: Padded(TakeEnd {
                head: AtomicU64::new(NIL as u64),
                taken: AtomicU64::new(0),
                fresh: AtomicU32::new(0),
            }),
            give: Padded(GiveEnd { list: AtomicU64::new(EMPTY), given: AtomicU64::new(0) }),
            exhausted: AtomicU64::new(0),
            owners: AtomicUsize::new(1),
            small,
            #[cfg(test)]
            freed: std::sync::OnceLock::new(),
        });
        Ok(Pool { inner: NonNull::from(Box::leak(inner)) })
    }

    /// The pool's shared state.
    #[inline]
    pub(super) fn inner(&self) -> &PoolInner {
        // SAFETY: the pool lives while it has an owner, and `self` is one.
        unsafe { self.inner.as_ref() }
    }

    /// A pool of `large` buffers with a class of `small` ones beside it (see the module
    /// documentation). The small buffers must be smaller and keep the same headroom, so a
    /// frame is laid out the same in either.
    pub fn with_small_class(large: PoolConfig, small: PoolConfig) -> Result<Pool, PoolConfigError> {
        let small = Pool::new(small)?;
        let size = Pool::buffer_bytes(&large)?;
        if small.buffer_size() >= size || small.headroom() != large.headroom {
            return Err(PoolConfigError::BadSize);
        }
        Pool::build(large, Some(small))
    }

    /// The class of smaller buffers beside this pool, if it has one.
    pub fn small_class(&self) -> Option<&Pool> {
        self.inner().small.as_ref()
    }

    /// A buffer for a frame of at most the small class's room (a segment without payload,
    /// an ARP frame): from the small class, or from this pool when it has none or the
    /// small class is empty.
    #[inline]
    pub fn alloc_small(&self) -> Result<PBuf, PoolExhausted> {
        match &self.inner().small {
            // Without a class this is `alloc`, inline, as before there were classes.
            None => self.alloc(),
            Some(small) => self.alloc_in_class(small),
        }
    }

    #[inline(never)]
    fn alloc_in_class(&self, small: &Pool) -> Result<PBuf, PoolExhausted> {
        small.alloc().or_else(|_| self.alloc())
    }

    /// Take a free buffer: empty, with the pool's headroom in front of its data.
    #[inline]
    pub fn alloc(&self) -> Result<PBuf, PoolExhausted> {
        match self.inner().pop() {
            Some(index) => Ok(PBuf::new(self.inner, index)),
            None => {
                self.inner().exhausted.fetch_add(1, Ordering::Relaxed);
                Err(PoolExhausted)
            }
        }
    }

    /// Number of buffers.
    pub fn capacity(&self) -> usize {
        self.inner().count as usize
    }

    /// Number of free buffers (exact when no other thread is allocating or freeing).
    pub fn available(&self) -> usize {
        self.inner().free()
    }

    /// Bytes per buffer.
    pub fn buffer_size(&self) -> usize {
        self.inner().buffer_size as usize
    }

    /// Headroom of a freshly allocated buffer.
    pub fn headroom(&self) -> usize {
        self.inner().headroom as usize
    }

    /// How many times [`Pool::alloc`] found the pool empty.
    pub fn exhausted_count(&self) -> u64 {
        self.inner().exhausted.load(Ordering::Relaxed)
    }

    /// Give the memory of free buffers back to the operating system, keeping `keep` free
    /// buffers as they are: those at the bottom of the free list, after the buffers never
    /// used (which cost nothing, and count among the `keep`). Returns the bytes released.
    ///
    /// For a quiet moment, not a hot path (it allocates an index list and makes a system
    /// call per run of adjacent buffers): after a burst, the buffers it used stay resident
    /// because the free list reuses the most recently freed first; this returns them, so a
    /// process's memory follows its load down as well as up. The buffers released are the
    /// ones at the top of the free list, taken off it while they are released and put back
    /// after, so `keep` buffers stay available to other threads meanwhile. A released buffer
    /// reads as zeros and costs a page fault per page when next used.
    ///
    /// The small class, if any, releases its own free buffers beyond `keep` too.
    pub fn release_free(&self, keep: usize) -> usize {
        let small = self.inner().small.as_ref().map_or(0, |s| s.release_free(keep));
        small + self.release_own(keep)
    }

    fn release_own(&self, keep: usize) -> usize {
        let inner = self.inner();
        let mut taken = Vec::new();
        // Buffers never taken are untouched: only the listed ones are released.
        while inner.free() > keep {
            match inner.pop_with::<false>() {
                Some(i) => taken.push(i),
                None => break,
            }
        }
        taken.sort_unstable();
        let size = inner.buffer_size as usize;
        let mut released = 0;
        let mut run = 0;
        while run < taken.len() {
            let mut end = run + 1;
            while end < taken.len() && taken[end] == taken[end - 1] + 1 {
                end += 1;
            }
            released += inner.region.release(taken[run] as usize * size, (taken[end - 1] as usize + 1) * size);
            run = end;
        }
        for &i in taken.iter().rev() {
            // `pop` handed each out with one reference; no PBuf was made, so none drops it.
            inner.refcnt[i as usize].store(0, Ordering::Relaxed);
            // SAFETY: the pool lives while `self` owns it.
            unsafe { PoolInner::push_chain(self.inner, i, i, 1) };
        }
        released
    }

    /// Bytes of the pool's memory resident in RAM now, from mincore(2): what its buffers
    /// cost, as opposed to the address space reserved. `None` where that cannot be asked.
    /// Allocates a page map; not for a hot path. The small class, if any, is counted in.
    pub fn resident_bytes(&self) -> Option<usize> {
        let small = match &self.inner().small {
            Some(s) => s.resident_bytes()?,
            None => 0,
        };
        Some(small + self.inner().region.resident_bytes()?)
    }

    /// Whether `buf` came from this pool.
    pub fn owns(&self, buf: &PBuf) -> bool {
        self.inner == buf.home
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("capacity", &self.capacity())
            .field("available", &self.available())
            .field("buffer_size", &self.buffer_size())
            .field("headroom", &self.headroom())
            .finish()
    }
}

impl PoolInner {
    /// Free buffers, and buffers in all.
    pub(super) fn occupancy(&self) -> (usize, usize) {
        (self.free(), self.count as usize)
    }

    /// Free buffers: exact when no other thread is allocating or freeing. A racing read
    /// may be off by the buffers in flight, never wrap. (Asked of a pool without owners,
    /// through a buffer still out, it says the pool is full: nothing will allocate again.)
    #[inline]
    fn free(&self) -> usize {
        let taken = self.take.0.taken.load(Ordering::Relaxed);
        let given = self.give.0.given.load(Ordering::Relaxed);
        ((self.count as u64 + given).saturating_sub(taken) as usize).min(self.count as usize)
    }

    /// Treiber-stack pop; the tag in the high half of `head` defeats ABA. Buffers freed
    /// since the last allocation come first (see the module documentation), then the
    /// allocating list, then a buffer never taken before.
    #[inline]
    fn pop(&self) -> Option<u32> {
        self.pop_with::<true>()
    }

    /// [`pop`](Self::pop), taking a buffer never taken before only if `FRESH`.
    #[inline(always)]
    fn pop_with<const FRESH: bool>(&self) -> Option<u32> {
        let take = &self.take.0;
        let index = match self.give.0.list.load(Ordering::Relaxed) {
            EMPTY => self.pop_head::<FRESH>()?,
            _ => match self.take_freed() {
                Some(i) => i,
                None => self.pop_head::<FRESH>()?,
            },
        };
        take.taken.fetch_add(1, Ordering::Relaxed);
        self.refcnt[index as usize].store(1, Ordering::Relaxed);
        Some(index)
    }

    /// Pop the allocating list; when it is empty, take over what was freed meanwhile, or
    /// (`FRESH`) a buffer never taken before.
    #[inline]
    fn pop_head<const FRESH: bool>(&self) -> Option<u32> {
        let head = &self.take.0.head;
        let mut cur = head.load(Ordering::Acquire);
        loop {
            let index = cur as u32;
            if index == NIL {
                return match self.take_freed() {
                    None if FRESH => self.take_fresh(),
                    taken => taken,
                };
            }
            let next = self.next[index as usize].load(Ordering::Relaxed);
            let new = (((cur >> 32) + 1) << 32) | next as u64;
            match head.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(index),
                Err(h) => cur = h,
            }
        }
    }

    /// A buffer never taken before, while there are any (the lists are empty). Its link and
    /// count are zero-filled and its memory zero, written by no one: nothing to order.
    #[cold]
    #[inline(never)]
    fn take_fresh(&self) -> Option<u32> {
        let fresh = &self.take.0.fresh;
        let mut f = fresh.load(Ordering::Relaxed);
        while f < self.count {
            match fresh.compare_exchange_weak(f, f + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(f),
                Err(x) => f = x,
            }
        }
        None
    }

    /// Take every buffer freed since the last take with one swap of the freeing end: the
    /// first (the most recently freed) for the caller, the rest in front of the allocating
    /// list. A thread that frees one buffer and allocates one costs a push and this swap,
    /// as a single list's push and pop did.
    #[inline]
    fn take_freed(&self) -> Option<u32> {
        // Acquire: the freed buffers' contents and links, written before their push.
        let list = self.give.0.list.swap(EMPTY, Ordering::Acquire);
        let (first, last) = (list as u32, (list >> 32) as u32);
        if first == NIL {
            return None;
        }
        if first != last {
            self.put_in_front(self.next[first as usize].load(Ordering::Relaxed), last);
        }
        Some(first)
    }

    /// Link the list `first`..`last` (taken from the freeing end) in front of the
    /// allocating list.
    #[inline(never)]
    fn put_in_front(&self, first: u32, last: u32) {
        let head = &self.take.0.head;
        let mut cur = head.load(Ordering::Relaxed);
        loop {
            self.next[last as usize].store(cur as u32, Ordering::Relaxed);
            let new = (((cur >> 32) + 1) << 32) | first as u64;
            // Release: the links just written happen before any pop that reads them.
            match head.compare_exchange_weak(cur, new, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(h) => cur = h,
            }
        }
    }

    /// Push `n` buffers at once onto the freeing end of `this`: `first`, linked through
    /// `next` to `last` (links the caller wrote with [`link`](Self::link)), in one
    /// compare-and-swap, then count them given. No other thread can see the chain's links
    /// before the swap publishes them. (No ABA here: a push only ever links in front of the
    /// value it replaces, which is the list's current first buffer whatever happened in
    /// between.)
    ///
    /// # Safety
    /// The `n` buffers are out of the pool (taken, and not yet counted given), so `this` is
    /// alive until they are counted; the caller does not touch the pool afterwards, which
    /// this call may have freed.
    #[inline]
    pub(super) unsafe fn push_chain(this: NonNull<PoolInner>, first: u32, last: u32, n: u32) {
        // SAFETY: alive until the count below (the caller's contract).
        let inner = unsafe { this.as_ref() };
        let give = &inner.give.0;
        let mut cur = give.list.load(Ordering::Relaxed);
        loop {
            let (old_first, old_last) = (cur as u32, (cur >> 32) as u32);
            inner.next[last as usize].store(old_first, Ordering::Relaxed);
            let tail = if old_first == NIL { last } else { old_last };
            let new = ((tail as u64) << 32) | first as u64;
            // Release: whatever was written into the buffers, and the chain's links, happen
            // before their next owner's reads.
            match give.list.compare_exchange_weak(cur, new, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(c) => cur = c,
            }
        }
        // SAFETY: still alive, as above, and this is the free's last touch of the pool.
        unsafe { PoolInner::add_given(this, n as u64) }
    }

    /// Add `n` to `given`, as the caller's last touch of the pool `this` (through the
    /// counter alone, as `Arc`'s drop does): once added, a pool without owners may be freed
    /// by another thread. Whoever makes `given` reach `BIAS` frees it: the free that brings
    /// the last buffer home, or the last owner (see the module documentation). AcqRel: the
    /// one that frees is ordered after every access to the pool's memory by those that added
    /// before it.
    ///
    /// # Safety
    /// `this` is alive (an owner, or buffers out not yet counted), and the caller does not
    /// touch it afterwards.
    #[inline]
    unsafe fn add_given(this: NonNull<PoolInner>, n: u64) {
        // SAFETY: alive (the caller's contract); only the counter is borrowed.
        let given = unsafe { &(*this.as_ptr()).give.0.given };
        if given.fetch_add(n, Ordering::AcqRel).wrapping_add(n) == BIAS {
            // SAFETY: no owner is left and every buffer is home.
            unsafe { PoolInner::dealloc(this) }
        }
    }

    /// The last owner of `this` is going: no buffer will be taken again. Free the pool now
    /// if every buffer is home, or leave it to the free that brings the last one back.
    ///
    /// # Safety
    /// Called once, by the last owner, which does not touch the pool afterwards.
    unsafe fn orphan(this: NonNull<PoolInner>) {
        // SAFETY: alive: it has an owner until this returns.
        let taken = unsafe { this.as_ref() }.take.0.taken.load(Ordering::Relaxed);
        // From here, `given` reaches BIAS exactly when the last buffer out comes home.
        // SAFETY: alive, and this is the last owner's last touch of it.
        unsafe { PoolInner::add_given(this, BIAS - taken) }
    }

    /// Free the pool's memory (and drop its small class's owner).
    ///
    /// # Safety
    /// No owner is left, every buffer is home, and nothing else will touch the pool.
    unsafe fn dealloc(this: NonNull<PoolInner>) {
        // SAFETY: made by `Box::leak` in `Pool::build`; the caller's contract says this is
        // the one and last use.
        let inner = unsafe { Box::from_raw(this.as_ptr()) };
        #[cfg(test)]
        if let Some(freed) = inner.freed.get() {
            freed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        drop(inner);
    }

    /// Link free buffer `index` in front of `next` in a chain not yet on the free list.
    #[inline]
    pub(super) fn link(&self, index: u32, next: u32) {
        self.next[index as usize].store(next, Ordering::Relaxed);
    }

    /// Start of buffer `index`.
    #[inline]
    pub(super) fn buffer_ptr(&self, index: u32) -> *mut u8 {
        // SAFETY: index < count, so the offset stays inside the allocation.
        unsafe { self.region.base.as_ptr().add(index as usize * self.buffer_size as usize) }
    }
}

/// `n` atomics reading 0, in zero-filled memory that is not written: pages of it that are
/// never used are never made resident. `OutOfMemory` if it cannot be had. (Under loom,
/// whose atomics are objects of its model, made one by one.)
fn zeroed_atomics(n: u32) -> Result<Box<[AtomicU32]>, PoolConfigError> {
    #[cfg(not(all(loom, test)))]
    {
        use std::alloc::{alloc_zeroed, Layout};
        // Zeroed memory from the allocator (calloc), not written here: fresh pages stay
        // untouched (glibc maps allocations of 128 KiB and more on their own, zero-filled
        // by the kernel; a smaller one reused from its heap is cleared).
        let layout = Layout::array::<AtomicU32>(n as usize).map_err(|_| PoolConfigError::OutOfMemory)?;
        // SAFETY: `n > 0` (checked by `build`), so the layout is not zero-sized.
        let p = unsafe { alloc_zeroed(layout) }.cast::<AtomicU32>();
        if p.is_null() {
            return Err(PoolConfigError::OutOfMemory);
        }
        // SAFETY: `p` is a live allocation of the global allocator with `[AtomicU32; n]`'s
        // layout, all zero bytes, which are a valid `AtomicU32` each; the box frees it with
        // the same layout.
        Ok(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(p, n as usize)) })
    }
    #[cfg(all(loom, test))]
    {
        Ok((0..n).map(|_| AtomicU32::new(0)).collect())
    }
}

/// The zero-filled memory behind a pool, `len` bytes aligned to at least [`ALIGN`].
struct Region {
    base: NonNull<u8>,
    len: usize,
}

impl Region {
    /// An anonymous private mapping: page-aligned, zero-filled by the kernel on first touch,
    /// and `MAP_NORESERVE` so that a large reserve does not count against overcommit limits
    /// before it is used.
    #[cfg(target_os = "linux")]
    fn new(len: usize) -> Result<Region, PoolConfigError> {
        // Miri maps only MAP_PRIVATE|MAP_ANONYMOUS; MAP_NORESERVE is overcommit accounting
        // alone, and the memory is the same without it.
        #[cfg(not(miri))]
        const FLAGS: libc::c_int = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        #[cfg(miri)]
        const FLAGS: libc::c_int = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: a fresh anonymous mapping aliases nothing; failure is MAP_FAILED.
        let p = unsafe { libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, FLAGS, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(PoolConfigError::OutOfMemory);
        }
        Ok(Region { base: NonNull::new(p.cast()).ok_or(PoolConfigError::OutOfMemory)?, len })
    }

    #[cfg(all(target_os = "linux", not(miri)))]
    fn resident_bytes(&self) -> Option<usize> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
        let mut map = vec![0u8; self.len.div_ceil(page)];
        // SAFETY: the range is our own mapping, and `map` has one byte per page of it.
        let rc = unsafe { libc::mincore(self.base.as_ptr().cast(), self.len, map.as_mut_ptr()) };
        (rc == 0).then(|| map.iter().filter(|&&b| b & 1 != 0).count() * page)
    }

    /// Elsewhere (and under Miri, which has no mincore), not known.
    #[cfg(any(not(target_os = "linux"), miri))]
    fn resident_bytes(&self) -> Option<usize> {
        None
    }

    /// Drop the pages wholly inside bytes `start..end` of the region (MADV_DONTNEED: the
    /// next touch maps a fresh zero page). Returns the bytes given back.
    #[cfg(target_os = "linux")]
    fn release(&self, start: usize, end: usize) -> usize {
        // SAFETY: sysconf has no memory-safety preconditions.
        let Ok(page) = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }) else { return 0 };
        let (first, last) = (start.next_multiple_of(page), end.min(self.len) / page * page);
        if first >= last {
            return 0;
        }
        // SAFETY: the pages lie inside our mapping and belong only to buffers the caller
        // holds off the free list, so nothing reads or writes them meanwhile.
        #[cfg(not(miri))]
        let rc = unsafe { libc::madvise(self.base.as_ptr().add(first).cast(), last - first, libc::MADV_DONTNEED) };
        // Miri has no madvise: zero the pages, which is what they read as after it (and a
        // write Miri checks against any access to them meanwhile).
        #[cfg(miri)]
        let rc = {
            // SAFETY: as above.
            unsafe { self.base.as_ptr().add(first).write_bytes(0, last - first) };
            0
        };
        if rc == 0 {
            last - first
        } else {
            0
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn release(&self, _start: usize, _end: usize) -> usize {
        0
    }

    /// Elsewhere, the heap: correct, but the allocator may touch every page.
    #[cfg(not(target_os = "linux"))]
    fn new(len: usize) -> Result<Region, PoolConfigError> {
        let layout = std::alloc::Layout::from_size_align(len, ALIGN).map_err(|_| PoolConfigError::OutOfMemory)?;
        // SAFETY: `len` is non-zero (buffers >= 1, size >= 64).
        let base = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).ok_or(PoolConfigError::OutOfMemory)?;
        Ok(Region { base, len })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // The pool is freed only once every buffer is home, so none is in use here.
        #[cfg(target_os = "linux")]
        // SAFETY: mapped in `Region::new` with this length. munmap fails only for bad
        // arguments, which these are not; there is nothing to do about it in a destructor.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
        #[cfg(not(target_os = "linux"))]
        // SAFETY: allocated in `Region::new` with this layout.
        unsafe {
            std::alloc::dealloc(self.base.as_ptr(), std::alloc::Layout::from_size_align_unchecked(self.len, ALIGN))
        }
    }
}

/// Count `pool`'s deallocation in the returned counter (tests that watch who frees it).
#[cfg(test)]
pub(super) fn watch(pool: &Pool) -> Arc<std::sync::atomic::AtomicUsize> {
    let freed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    assert!(pool.inner().freed.set(freed.clone()).is_ok(), "watched once");
    freed
}

#[cfg(test)]
mod tests;

/// The free list's two ends, model-checked: a buffer freed on another thread while this
/// thread frees one and allocates until the pool is empty. Whatever the interleaving, every
/// buffer must be allocated exactly once in the end. The broken variant takes the freed
/// list in two steps (a load, then a store of the empty list) instead of one swap: loom
/// finds the interleaving where a buffer freed between the two is lost.
#[cfg(all(loom, test))]
mod model {
    use super::super::sync::loom_finds;
    use super::*;

    /// `PoolInner::pop` with the freed list taken in two steps.
    fn pop_taking_in_two_steps(p: &PoolInner) -> Option<u32> {
        let list = p.give.0.list.load(Ordering::Acquire);
        if list == EMPTY {
            return p.pop();
        }
        p.give.0.list.store(EMPTY, Ordering::Relaxed);
        let (first, last) = (list as u32, (list >> 32) as u32);
        if first != last {
            p.put_in_front(p.next[first as usize].load(Ordering::Relaxed), last);
        }
        p.refcnt[first as usize].store(1, Ordering::Relaxed);
        Some(first)
    }

    fn check(pop: fn(&PoolInner) -> Option<u32>) {
        loom::model(move || {
            let pool = Pool::new(PoolConfig { buffers: 3, buffer_size: 128, headroom: 0 }).unwrap();
            let home = pool.inner;
            let p = pool.inner();
            let (a, b) = (p.pop().unwrap(), p.pop().unwrap());
            let freer = {
                let pool = pool.clone();
                loom::thread::spawn(move || {
                    pool.inner().refcnt[b as usize].store(0, Ordering::Relaxed);
                    // SAFETY: `b` is out, and `pool` owns the pool besides.
                    unsafe { PoolInner::push_chain(pool.inner, b, b, 1) };
                })
            };
            p.refcnt[a as usize].store(0, Ordering::Relaxed);
            // SAFETY: as above.
            unsafe { PoolInner::push_chain(home, a, a, 1) };
            let mut got = Vec::new();
            while let Some(i) = pop(p) {
                got.push(i);
            }
            freer.join().unwrap();
            while let Some(i) = pop(p) {
                got.push(i);
            }
            got.sort_unstable();
            assert_eq!(got, [0, 1, 2], "a buffer was lost or handed out twice");
        });
    }

    /// The last owner goes while another thread frees the last buffers out, one alone and
    /// two in a chain: whatever the interleaving, the pool is freed exactly once, after
    /// both.
    #[test]
    fn the_pool_is_freed_once_by_whoever_is_last() {
        loom::model(|| {
            let pool = Pool::new(PoolConfig { buffers: 3, buffer_size: 128, headroom: 0 }).unwrap();
            let freed = watch(&pool);
            let held: Vec<PBuf> = (0..3).map(|_| pool.alloc().unwrap()).collect();
            let freer = loom::thread::spawn(move || {
                let mut held = held.into_iter();
                drop(held.next());
                let mut chain = crate::buf::FreeChain::new();
                held.for_each(|b| chain.put(b));
            });
            drop(pool);
            freer.join().unwrap();
            assert_eq!(freed.load(std::sync::atomic::Ordering::Relaxed), 1, "freed never, or twice");
        });
    }

    #[test]
    fn every_freed_buffer_comes_back_once() {
        check(PoolInner::pop);
    }

    #[test]
    fn taking_the_freed_list_in_two_steps_loses_a_buffer() {
        loom_finds(|| check(pop_taking_in_two_steps), "a buffer was lost");
    }
}
