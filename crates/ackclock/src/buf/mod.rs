//! Packet buffers (pbufs): one contiguous frame per buffer (Afterburner, Dalton et al. 1993).
//!
//! A [`Pool`] carves N fixed-size buffers out of one allocation at start-up. A [`PBuf`] is a
//! handle to one buffer plus its own *view* (where the data starts and how long it is, inside
//! the buffer) and [`Meta`]data (cached checksum and its coverage, offload flags).
//!
//! Ownership:
//! - A handle fresh from [`Pool::alloc`] is the only one for its buffer and may write it:
//!   prepend headers into the headroom, append payload, [`PBuf::data_mut`].
//! - [`PBuf::share`] makes a second, read-only handle to the same bytes (a reference count).
//!   A sent segment stays in the retransmission queue while a device transmits the same
//!   buffer, as Afterburner keeps sent data on the card until it is acknowledged (Dalton et al. 1993).
//!   While a buffer is shared, writes fail with [`BufError::Shared`]; views and metadata
//!   stay per handle, so the receiver of a frame can trim its view of a buffer its sender
//!   still holds.
//! - Dropping the last handle returns the buffer to its pool; handing it to a [`FreeChain`]
//!   returns it together with others, in one step. Handles are not `Clone` and release
//!   only when consumed (dropped, or moved into the chain), so double release and use after
//!   release cannot be written in safe code.

mod chain;
mod pool;
mod shares;
pub(crate) mod sync;

pub use chain::FreeChain;
pub use pool::{
    small_class_config, Pool, PoolConfig, PoolConfigError, PoolExhausted, DEFAULT_BUFFER_SIZE, DEFAULT_HEADROOM,
    SMALL_CLASS_ABOVE,
};
pub use shares::Shares;

use crate::wire::checksum;
use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::{fence, Ordering};
use pool::PoolInner;

/// Why a view operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufError {
    /// Not enough headroom to prepend.
    NoHeadroom,
    /// Not enough room after the data to append.
    NoTailroom,
    /// A trim or range beyond the data.
    OutOfRange,
    /// The bytes are shared with another handle and cannot be written.
    Shared,
}

impl fmt::Display for BufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BufError::NoHeadroom => "no headroom",
            BufError::NoTailroom => "no tailroom",
            BufError::OutOfRange => "range outside the buffer data",
            BufError::Shared => "buffer is shared",
        })
    }
}

impl std::error::Error for BufError {}

/// Per-handle flags.
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Flags(u16);

impl Flags {
    /// `Meta::sum` holds the sum of `sum_len` bytes at buffer offset `sum_start`.
    pub const SUM_CACHED: Flags = Flags(1 << 0);
    /// Receive: the device (or the stack) has verified the transport checksum.
    pub const CSUM_VERIFIED: Flags = Flags(1 << 1);
    /// Transmit: the transport checksum field holds only the pseudo-header sum; the device
    /// completes it over `csum_start..` and writes it at `csum_start + csum_offset`
    /// (virtio-net NEEDS_CSUM). On receive from a TAP it means the same, and that the data is
    /// known good.
    pub const CSUM_PARTIAL: Flags = Flags(1 << 2);
    /// A TCP/IPv4 segment larger than one MSS, to be cut at `gso_size` by the device
    /// (transmit), or coalesced by it (receive).
    pub const GSO_TCPV4: Flags = Flags(1 << 3);

    /// No flags set.
    pub const fn empty() -> Flags {
        Flags(0)
    }
    /// Whether every flag set in `other` is also set in `self`.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Set every flag set in `other`.
    pub fn insert(&mut self, other: Flags) {
        self.0 |= other.0;
    }
    /// Clear every flag set in `other`.
    pub fn remove(&mut self, other: Flags) {
        self.0 &= !other.0;
    }
    /// The flags as raw bits (bit 0 is [`Flags::SUM_CACHED`]).
    pub const fn bits(self) -> u16 {
        self.0
    }
}

impl core::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Flags::SUM_CACHED, "SUM_CACHED"),
            (Flags::CSUM_VERIFIED, "CSUM_VERIFIED"),
            (Flags::CSUM_PARTIAL, "CSUM_PARTIAL"),
            (Flags::GSO_TCPV4, "GSO_TCPV4"),
        ];
        let mut first = true;
        for (flag, name) in names {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// Per-handle packet metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meta {
    /// Which of the fields below are valid and what the device is asked to do with this packet.
    pub flags: Flags,
    /// Cached ones'-complement sum (see [`crate::wire::checksum`]) of the buffer bytes
    /// `[sum_start, sum_start + sum_len)`, in buffer offsets, so it survives prepending
    /// headers. Valid when `flags` has [`Flags::SUM_CACHED`].
    pub sum: u16,
    /// Buffer offset of the first byte covered by `sum`.
    pub sum_start: u32,
    /// Number of bytes covered by `sum`.
    pub sum_len: u32,
    /// Checksum offload: where the checksummed region starts, counted from the data start.
    pub csum_start: u16,
    /// Checksum offload: where the checksum field is, counted from `csum_start`.
    pub csum_offset: u16,
    /// Segmentation offload: payload bytes per segment.
    pub gso_size: u16,
}

/// A handle to one packet buffer; see the [module docs](self).
pub struct PBuf {
    /// The pool: alive while this buffer is out of it (see the pool module's "Who frees
    /// the pool"), so no reference count of its own.
    home: NonNull<PoolInner>,
    index: u32,
    head: u32,
    len: u32,
    /// Metadata of this handle's view.
    pub meta: Meta,
}

// SAFETY: a handle reaches its pool only through the pool's atomics and the buffer's bytes;
// it writes the bytes only while it is the buffer's sole handle (`refcnt` 1), and handles
// pass buffers between threads with Release/Acquire on those counts and the free list, as
// the `Arc<PoolInner>` it replaces did.
unsafe impl Send for PBuf {}
// SAFETY: see above; `&PBuf` only reads.
unsafe impl Sync for PBuf {}

impl PBuf {
    /// A handle to buffer `index` of `home`, just allocated (its count already 1).
    #[inline]
    fn new(home: NonNull<PoolInner>, index: u32) -> PBuf {
        // SAFETY: the caller just took the buffer out of this live pool.
        let head = unsafe { home.as_ref() }.headroom;
        PBuf { home, index, head, len: 0, meta: Meta::default() }
    }

    /// The pool this buffer came from.
    #[inline]
    fn inner(&self) -> &PoolInner {
        // SAFETY: a pool's memory lives until its last buffer is back, and this handle
        // holds one of the references that keep this buffer out.
        unsafe { self.home.as_ref() }
    }

    /// The data bytes of this view.
    #[inline]
    pub fn data(&self) -> &[u8] {
        // SAFETY: head + len <= buffer_size is kept by every view operation. Writes happen
        // only through `&mut self` of a handle whose buffer is unshared, so no write can
        // alias this shared borrow.
        unsafe {
            core::slice::from_raw_parts(self.inner().buffer_ptr(self.index).add(self.head as usize), self.len as usize)
        }
    }

    /// The data bytes, writable if this is the only handle to the buffer.
    #[inline]
    pub fn data_mut(&mut self) -> Result<&mut [u8], BufError> {
        let (head, len) = (self.head as usize, self.len as usize);
        self.bytes_mut(head, len)
    }

    /// Bytes of the buffer at `[start, start + len)` (buffer offsets), if unshared.
    #[inline]
    fn bytes_mut(&mut self, start: usize, len: usize) -> Result<&mut [u8], BufError> {
        if !self.is_unique() {
            return Err(BufError::Shared);
        }
        // SAFETY: unshared, just checked; in bounds (the callers check).
        Ok(unsafe { self.bytes_unshared(start, len) })
    }

    /// Bytes of the buffer at `[start, start + len)` (buffer offsets), without asking again
    /// whether it is shared: for callers that just asked (a header written in front of every
    /// frame sent, or bytes appended, should not pay for it twice).
    ///
    /// # Safety
    /// [`is_unique`](Self::is_unique) returned true for this handle since it last could have
    /// been shared, and `start + len` is within the buffer.
    #[inline]
    unsafe fn bytes_unshared(&mut self, start: usize, len: usize) -> &mut [u8] {
        debug_assert!(start + len <= self.inner().buffer_size as usize);
        // SAFETY: in bounds (the caller's contract); this handle is the only one (refcount
        // 1, Acquire pairs with the Release of dropped handles), and it is borrowed mutably
        // for the returned lifetime, so it cannot be shared meanwhile.
        unsafe { core::slice::from_raw_parts_mut(self.inner().buffer_ptr(self.index).add(start), len) }
    }

    /// Give up this handle's reference to its buffer; whether it was the last, so that the
    /// buffer is free and goes back to its pool (the caller's to do: `PBuf`'s drop, or a
    /// `FreeChain`). As `Arc::drop`: Release so our reads of the bytes happen before the
    /// next owner's writes, and an Acquire fence for the last handle.
    #[inline]
    fn release_ref(&self) -> bool {
        if self.inner().refcnt[self.index as usize].fetch_sub(1, Ordering::Release) != 1 {
            return false;
        }
        fence(Ordering::Acquire);
        true
    }

    /// Whether this is the only handle to its buffer.
    #[inline]
    pub fn is_unique(&self) -> bool {
        self.inner().refcnt[self.index as usize].load(Ordering::Acquire) == 1
    }

    /// A second, read-only handle to the same bytes, with a copy of this view and metadata.
    #[inline]
    pub fn share(&self) -> PBuf {
        // Relaxed, as for `Arc::clone`: the new handle is derived from a live one. The pool
        // is not counted again: it lives while the buffer is out.
        self.inner().refcnt[self.index as usize].fetch_add(1, Ordering::Relaxed);
        self.alias()
    }

    /// Length of the data.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the data is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes in front of the data.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.head as usize
    }

    /// Bytes after the data.
    #[inline]
    pub fn tailroom(&self) -> usize {
        (self.inner().buffer_size - self.head - self.len) as usize
    }

    /// Total size of the buffer.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.inner().buffer_size as usize
    }

    /// Offset of the data start inside the buffer.
    #[inline]
    pub fn offset(&self) -> usize {
        self.head as usize
    }

    /// Whether the pool this buffer came from is down to its last quarter of free buffers:
    /// a holder that may let go (out-of-order data) should, before the pool's owner (a device
    /// receiving) finds none.
    #[inline]
    pub fn pool_low(&self) -> bool {
        let (free, count) = self.inner().occupancy();
        free < count / 4
    }

    /// Which buffer of its pool this is (for traces and tests).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Grow the data by `n` bytes at the front (into the headroom) and return them.
    #[inline(always)]
    pub fn prepend(&mut self, n: usize) -> Result<&mut [u8], BufError> {
        if n > self.head as usize {
            return Err(BufError::NoHeadroom);
        }
        if !self.is_unique() {
            return Err(BufError::Shared);
        }
        self.head -= n as u32;
        self.len += n as u32;
        let head = self.head as usize;
        // SAFETY: unshared, just checked; in bounds (the new head is at or after the
        // buffer's start, and `n` bytes end at the old head).
        Ok(unsafe { self.bytes_unshared(head, n) })
    }

    /// Grow the data by `n` bytes at the end and return them. The bytes hold whatever the
    /// buffer held before; callers overwrite them.
    #[inline]
    pub fn append(&mut self, n: usize) -> Result<&mut [u8], BufError> {
        if n > self.tailroom() {
            return Err(BufError::NoTailroom);
        }
        if !self.is_unique() {
            return Err(BufError::Shared);
        }
        let start = (self.head + self.len) as usize;
        self.len += n as u32;
        // SAFETY: unshared, just checked; in bounds (`n` fits the tailroom).
        Ok(unsafe { self.bytes_unshared(start, n) })
    }

    /// Append a copy of `src`, without a sum (for a device that completes checksums).
    pub fn append_copy(&mut self, src: &[u8]) -> Result<(), BufError> {
        self.append(src.len())?.copy_from_slice(src);
        Ok(())
    }

    /// Append a copy of `src`, summing it during the copy (the single copy of Dalton et al. 1993), and
    /// extend the cached sum to cover it. Returns the sum of `src` alone.
    ///
    /// The cached sum covers one contiguous run: if it did not end where `src` lands, it is
    /// restarted at `src`.
    pub fn append_copy_sum(&mut self, src: &[u8]) -> Result<u16, BufError> {
        let start = self.head + self.len;
        let dst = self.append(src.len())?;
        let s = checksum::copy_and_sum(dst, src);
        let m = &mut self.meta;
        if m.flags.contains(Flags::SUM_CACHED) && m.sum_start + m.sum_len == start {
            m.sum = checksum::add_at(m.sum, s, m.sum_len as usize);
            m.sum_len += src.len() as u32;
        } else {
            m.flags.insert(Flags::SUM_CACHED);
            m.sum = s;
            m.sum_start = start;
            m.sum_len = src.len() as u32;
        }
        Ok(s)
    }

    /// The cached sum, if it covers exactly the data bytes `[from, len)` of this view.
    #[inline]
    pub fn cached_sum_from(&self, from: usize) -> Option<u16> {
        let m = &self.meta;
        let covers = m.flags.contains(Flags::SUM_CACHED)
            && m.sum_start as usize == self.head as usize + from
            && (m.sum_start + m.sum_len) == self.head + self.len;
        covers.then_some(m.sum)
    }

    /// Drop `n` bytes from the front of this view (e.g. a header that has been processed).
    #[inline]
    pub fn trim_front(&mut self, n: usize) -> Result<(), BufError> {
        if n > self.len as usize {
            return Err(BufError::OutOfRange);
        }
        self.head += n as u32;
        self.len -= n as u32;
        Ok(())
    }

    /// Narrow the view to the `len` bytes that start `off` bytes into it (a `trim_front`
    /// and a `truncate` with one range check). Nothing changes on error.
    #[inline]
    pub fn narrow(&mut self, off: usize, len: usize) -> Result<(), BufError> {
        let have = self.len as usize;
        if off > have || len > have - off {
            return Err(BufError::OutOfRange);
        }
        self.head += off as u32;
        self.len = len as u32;
        Ok(())
    }

    /// Drop `n` bytes from the front whose sum is `removed_sum`, keeping the cached sum valid
    /// for the rest by ones'-complement subtraction instead of re-reading the bytes.
    pub fn trim_front_summed(&mut self, n: usize, removed_sum: u16) -> Result<(), BufError> {
        let covered = self.cached_sum_from(0);
        self.trim_front(n)?;
        if let Some(whole) = covered {
            // whole = removed + (rest, shifted by n bytes): rest = whole - removed, unshifted.
            let rest_shifted = checksum::add(whole, !removed_sum);
            let m = &mut self.meta;
            m.sum = if n % 2 == 1 { rest_shifted.swap_bytes() } else { rest_shifted };
            m.sum_start += n as u32;
            m.sum_len -= n as u32;
        }
        Ok(())
    }

    /// Shorten this view to `len` bytes (e.g. to drop Ethernet padding).
    #[inline]
    pub fn truncate(&mut self, len: usize) -> Result<(), BufError> {
        if len > self.len as usize {
            return Err(BufError::OutOfRange);
        }
        self.len = len as u32;
        Ok(())
    }

    /// Reset an unshared buffer to empty, with `headroom` bytes in front, keeping nothing of
    /// the old view or metadata. For devices that recycle their own receive buffers.
    pub fn reset(&mut self, headroom: usize) -> Result<(), BufError> {
        if headroom > self.inner().buffer_size as usize {
            return Err(BufError::OutOfRange);
        }
        if !self.is_unique() {
            return Err(BufError::Shared);
        }
        self.head = headroom as u32;
        self.len = 0;
        self.meta = Meta::default();
        Ok(())
    }
}

impl Drop for PBuf {
    #[inline]
    fn drop(&mut self) {
        if self.release_ref() {
            // SAFETY: the buffer is ours alone and still out, so the pool is alive; the
            // push is this handle's last touch of it.
            unsafe { PoolInner::push_chain(self.home, self.index, self.index, 1) };
        }
    }
}

impl fmt::Debug for PBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PBuf")
            .field("index", &self.index)
            .field("offset", &self.head)
            .field("len", &self.len)
            .field("meta", &self.meta)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small pool for the buffer module's tests.
    pub(super) fn pool(n: usize) -> Pool {
        Pool::new(PoolConfig { buffers: n, buffer_size: 256, headroom: 64 }).unwrap()
    }

    #[test]
    fn config_is_checked() {
        let bad =
            |buffers, buffer_size, headroom| Pool::new(PoolConfig { buffers, buffer_size, headroom }).unwrap_err();
        assert_eq!(bad(0, 256, 0), PoolConfigError::BadCount);
        assert_eq!(bad(1, 64, 64), PoolConfigError::BadSize);
        assert_eq!(bad(usize::MAX / 2, 1 << 20, 0), PoolConfigError::BadCount);
        // A mapping the kernel refuses (1 PiB). Miri stops at an allocation it cannot make
        // instead of failing it.
        #[cfg(not(miri))]
        assert_eq!(bad(1 << 30, 1 << 20, 0), PoolConfigError::OutOfMemory);
        let p = Pool::new(PoolConfig { buffers: 3, buffer_size: 100, headroom: 10 }).unwrap();
        assert_eq!(p.buffer_size(), 128, "rounded up to a cache line");
    }

    /// A small size class beside a pool of large buffers: `alloc_small` takes from it, falls
    /// back to the large buffers once it is empty, and its buffers go back to it; a class
    /// must be smaller and keep the headroom.
    #[test]
    fn small_class_serves_small_frames_and_falls_back_when_empty() {
        let large = PoolConfig { buffers: 4, buffer_size: 64 * 1024, headroom: 160 };
        let small = small_class_config(large, 2);
        assert_eq!(small.buffer_size, 256);
        let bad = |small| Pool::with_small_class(large, small).unwrap_err();
        assert_eq!(bad(PoolConfig { buffers: 2, buffer_size: 128 * 1024, headroom: 160 }), PoolConfigError::BadSize);
        assert_eq!(bad(PoolConfig { buffers: 2, buffer_size: 256, headroom: 64 }), PoolConfigError::BadSize);
        let p = Pool::with_small_class(large, small).unwrap();
        let class = p.small_class().unwrap().clone();
        let (a, b) = (p.alloc_small().unwrap(), p.alloc_small().unwrap());
        assert!(class.owns(&a) && class.owns(&b));
        assert_eq!((a.headroom(), a.tailroom()), (160, 96));
        let c = p.alloc_small().unwrap();
        assert!(p.owns(&c), "the class is empty: a large buffer instead");
        assert_eq!((class.available(), p.available()), (0, 3));
        drop((a, b, c));
        assert_eq!((class.available(), p.available()), (2, 4));
        assert!(Pool::new(large).unwrap().small_class().is_none());
        // Resident bytes count the class too.
        let mut d = p.alloc_small().unwrap();
        d.append(96).unwrap().fill(1);
        drop(d);
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            let in_class = class.resident_bytes().unwrap();
            assert!(in_class >= 4096, "the written small buffer's page");
            assert!(p.resident_bytes().unwrap() >= in_class);
        }
    }

    /// A pool reserves its memory and touches a buffer's pages only when the buffer is
    /// written, so 1 GiB of 64 KiB buffers costs nothing resident until used, and reuse of
    /// the most recently freed buffer keeps the resident set at the most in use at once.
    #[test]
    #[cfg(target_os = "linux")]
    #[cfg_attr(miri, ignore = "asks the kernel what is resident (mincore), which Miri does not model")]
    fn memory_is_touched_only_when_used() {
        let p = Pool::new(PoolConfig { buffers: 16 * 1024, buffer_size: 64 * 1024, headroom: 0 }).unwrap();
        assert_eq!(p.resident_bytes(), Some(0), "a fresh pool is address space only");
        for _ in 0..1000 {
            let mut b = p.alloc().unwrap();
            b.append(64 * 1024).unwrap().fill(0xa5);
        }
        // One buffer at a time, the same one each time (64 KiB, plus at most the pages a
        // buffer straddles when the page size is larger than a buffer).
        let resident = p.resident_bytes().unwrap();
        assert!((64 * 1024..=64 * 1024 + 2 * 65536).contains(&resident), "{resident}");
        let held: Vec<PBuf> = (0..100)
            .map(|_| {
                let mut b = p.alloc().unwrap();
                b.append(4096).unwrap().fill(1);
                b
            })
            .collect();
        let resident = p.resident_bytes().unwrap();
        assert!((100 * 4096..=(100 + 16) * 64 * 1024).contains(&resident), "{resident}");
        drop(held);

        // After the burst, release_free gives the touched buffers back, keeping 16 free
        // buffers at the bottom of the list (untouched ones: they cost nothing).
        let released = p.release_free(16);
        assert!(released >= 100 * 4096, "{released}");
        assert_eq!(p.resident_bytes(), Some(0));
        assert_eq!(p.available(), p.capacity(), "every buffer is back on the free list");
        // Released buffers work as before and read as zeros.
        let mut b = p.alloc().unwrap();
        assert!(b.append(64 * 1024).unwrap().iter().all(|&x| x == 0));
        // With everything in use but `keep`, there is nothing to release.
        assert_eq!(p.release_free(p.capacity()), 0);
    }

    #[test]
    fn exhaustion_is_an_error_not_a_fallback() {
        let p = pool(2);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        assert_eq!(p.available(), 0);
        assert_eq!(p.alloc().unwrap_err(), PoolExhausted);
        assert_eq!(p.exhausted_count(), 1);
        drop(a);
        assert_eq!(p.available(), 1);
        let c = p.alloc().unwrap();
        assert_ne!(c.index(), b.index());
        drop((b, c));
        assert_eq!(p.available(), 2);
    }

    #[test]
    fn headroom_prepend_append() {
        let p = pool(1);
        let mut b = p.alloc().unwrap();
        assert_eq!((b.headroom(), b.len(), b.tailroom(), b.capacity()), (64, 0, 192, 256));
        b.append(4).unwrap().copy_from_slice(b"data");
        b.prepend(2).unwrap().copy_from_slice(b"hd");
        assert_eq!(b.data(), b"hddata");
        assert_eq!(b.headroom(), 62);
        assert_eq!(b.prepend(63).unwrap_err(), BufError::NoHeadroom);
        assert_eq!(b.append(189).unwrap_err(), BufError::NoTailroom);
        b.trim_front(2).unwrap();
        b.truncate(3).unwrap();
        assert_eq!(b.data(), b"dat");
        assert_eq!(b.trim_front(4).unwrap_err(), BufError::OutOfRange);
        assert_eq!(b.truncate(4).unwrap_err(), BufError::OutOfRange);
    }

    #[test]
    fn shared_bytes_are_read_only_and_views_are_per_handle() {
        let p = pool(1);
        let mut a = p.alloc().unwrap();
        a.append(5).unwrap().copy_from_slice(b"hello");
        let mut b = a.share();
        assert!(!a.is_unique() && !b.is_unique());
        assert_eq!(a.data_mut().unwrap_err(), BufError::Shared);
        assert_eq!(a.prepend(1).unwrap_err(), BufError::Shared);
        assert_eq!(b.append(1).unwrap_err(), BufError::Shared);
        b.trim_front(1).unwrap();
        b.meta.flags.insert(Flags::CSUM_VERIFIED);
        assert_eq!(a.data(), b"hello");
        assert_eq!(b.data(), b"ello");
        assert!(!a.meta.flags.contains(Flags::CSUM_VERIFIED));
        drop(a);
        assert_eq!(p.available(), 0, "still held by the shared handle");
        assert!(b.is_unique());
        b.data_mut().unwrap()[0] = b'E';
        assert_eq!(b.data(), b"Ello");
        drop(b);
        assert_eq!(p.available(), 1);
    }

    #[test]
    fn append_copy_sum_caches_the_payload_sum() {
        let p = pool(1);
        let mut b = p.alloc().unwrap();
        let s1 = b.append_copy_sum(b"abc").unwrap();
        assert_eq!(s1, checksum::sum(b"abc"));
        b.append_copy_sum(b"defg").unwrap();
        assert_eq!(b.cached_sum_from(0), Some(checksum::sum(b"abcdefg")));
        // Headers prepended later do not disturb the cached payload sum.
        b.prepend(20).unwrap().fill(0xee);
        assert_eq!(b.cached_sum_from(20), Some(checksum::sum(b"abcdefg")));
        assert_eq!(b.cached_sum_from(0), None);
        b.truncate(25).unwrap();
        assert_eq!(b.cached_sum_from(20), None, "coverage no longer matches the view");
    }

    #[test]
    fn trim_front_summed_keeps_the_cached_sum_exact() {
        let p = pool(1);
        let data: Vec<u8> = (0..150u32).map(|i| (i * 37 + 11) as u8).collect();
        for n in [1usize, 2, 3, 57, 100, 149] {
            let mut b = p.alloc().unwrap();
            b.append_copy_sum(&data).unwrap();
            b.trim_front_summed(n, checksum::sum(&data[..n])).unwrap();
            let want = checksum::sum(&data[n..]);
            // Ones'-complement zero has two forms; compare as values that verify alike.
            let got = b.cached_sum_from(0).unwrap();
            assert!(got == want || (got == 0xffff && want == 0) || (got == 0 && want == 0xffff), "n={n}");
        }
    }

    #[test]
    fn reset_recycles_a_unique_buffer() {
        let p = pool(1);
        let mut b = p.alloc().unwrap();
        b.append(10).unwrap();
        b.meta.gso_size = 1448;
        b.reset(8).unwrap();
        assert_eq!((b.headroom(), b.len(), b.meta), (8, 0, Meta::default()));
        let c = b.share();
        assert_eq!(b.reset(8).unwrap_err(), BufError::Shared);
        drop(c);
    }

    #[test]
    fn handles_cross_threads() {
        let p = pool(64);
        // Fewer under Miri, which interprets every step (its race checks need only a few).
        let n: u32 = if cfg!(miri) { 300 } else { 10_000 };
        let (tx, rx) = std::sync::mpsc::channel::<PBuf>();
        let producer = {
            let p = p.clone();
            std::thread::spawn(move || {
                for i in 0..n {
                    loop {
                        if let Ok(mut b) = p.alloc() {
                            b.append(4).unwrap().copy_from_slice(&i.to_be_bytes());
                            tx.send(b).unwrap();
                            break;
                        }
                        std::thread::yield_now();
                    }
                }
            })
        };
        for i in 0..n {
            let b = rx.recv().unwrap();
            assert_eq!(b.data(), &i.to_be_bytes());
        }
        producer.join().unwrap();
        assert_eq!(p.available(), 64);
    }
}
