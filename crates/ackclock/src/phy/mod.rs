//! Devices, as rings of pbufs (Afterburner's FIFOs, Dalton et al. 1993).
//!
//! Afterburner (Dalton et al. 1993) hands buffers between host and card through four FIFOs. Here:
//! - **Rx_Ready**: [`Device::receive`] moves a batch of received frames into a [`Batch`].
//! - **Tx_Ready**: [`Device::transmit`] takes a batch of frames to send.
//! - **Tx_Free / Rx_Free**: the free list of the buffers' [`Pool`](crate::buf::Pool). A
//!   device gives a transmitted buffer back by dropping its handle; a device that receives
//!   into its own buffers allocates them from its own pool. A frame that is also held
//!   elsewhere (a segment in a retransmission queue) returns to the pool only when the last
//!   holder lets go.
//!
//! Devices move batches, never one packet per call. A device may hold frames for later
//! (a simulated link's propagation delay): [`Device::poll_at`] says when it next has work.

pub mod gso;
pub mod impair;
pub mod pcap;
pub mod pipe;
#[cfg(target_os = "linux")]
pub mod tap;
#[cfg(target_os = "linux")]
pub mod tun;
#[cfg(target_os = "linux")]
mod tuntap;
#[cfg(target_os = "linux")]
pub mod vnet;

pub use gso::{GsoStats, Segmenter, SoftGso};
pub use impair::{ImpairStats, Impaired, Impairment};
pub use pcap::{Capture, PcapWriter, Resolution};
pub use pipe::{pipe, PipeConfig, PipeEnd};
#[cfg(target_os = "linux")]
pub use tap::{Tap, TapConfig, TapCounters, TapMode};
#[cfg(target_os = "linux")]
pub use tun::{Tun, TunConfig};

use crate::buf::PBuf;
use crate::time::Instant;

/// What a device can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Largest IP packet the link carries in one frame (the IP MTU), e.g. 1500.
    pub mtu: usize,
    /// Frames carry an Ethernet header (a TAP, the pipe, the simulator's links); without one
    /// (a TUN) a frame is an IP packet, and the interface does no ARP.
    pub ethernet: bool,
    /// Received frames have had their IPv4/TCP/UDP checksums verified (or were never at risk
    /// of corruption); the stack may skip verification.
    pub rx_checksum: bool,
    /// The device completes transport checksums of frames marked
    /// [`Flags::CSUM_PARTIAL`](crate::buf::Flags::CSUM_PARTIAL).
    pub tx_checksum: bool,
    /// The device cuts TCP/IPv4 segments up to this many bytes (IP packet length) marked
    /// [`Flags::GSO_TCPV4`](crate::buf::Flags::GSO_TCPV4); 0 when it cannot.
    pub tso_max: usize,
    /// The device may deliver coalesced TCP segments larger than the MTU (LRO/GRO).
    pub rx_coalesce: bool,
}

impl Capabilities {
    /// A plain Ethernet device: MTU 1500, no offloads.
    pub const fn ethernet(mtu: usize) -> Capabilities {
        Capabilities { mtu, ethernet: true, rx_checksum: false, tx_checksum: false, tso_max: 0, rx_coalesce: false }
    }

    /// A device whose frames are IP packets, without a link header (a TUN): MTU `mtu`, no
    /// offloads.
    pub const fn ip(mtu: usize) -> Capabilities {
        Capabilities { ethernet: false, ..Capabilities::ethernet(mtu) }
    }

    /// Length of the link header the interface writes before an IP packet: 14 (Ethernet, untagged)
    /// or 0.
    pub const fn link_header(&self) -> usize {
        if self.ethernet {
            14
        } else {
            0
        }
    }

    /// Largest frame on the wire, without the FCS: Ethernet header (+ one VLAN tag) + MTU,
    /// or the MTU alone without a link header.
    pub const fn max_frame(&self) -> usize {
        if self.ethernet {
            self.mtu + 18
        } else {
            self.mtu
        }
    }
}

/// Counters every device keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceStats {
    /// Frames received from the link and handed to the stack.
    pub rx_frames: u64,
    /// Bytes in the frames counted by `rx_frames`.
    pub rx_bytes: u64,
    /// Frames taken from the stack and sent on the link.
    pub tx_frames: u64,
    /// Bytes in the frames counted by `tx_frames`.
    pub tx_bytes: u64,
    /// Frames dropped on transmit because the device's queue was full.
    pub tx_dropped: u64,
    /// Frames dropped on receive (no buffer, malformed at the device level).
    pub rx_dropped: u64,
}

/// A device: a link endpoint that moves frames in batches.
pub trait Device {
    /// What the device offers.
    fn capabilities(&self) -> Capabilities;

    /// Rx_Ready: move received frames into `rx` until it is full or none are ready.
    /// Returns how many were added.
    fn receive(&mut self, now: Instant, rx: &mut Batch) -> usize;

    /// Tx_Ready: take frames from the front of `tx`. A device that can push back (a socket
    /// that would block) stops early and leaves the rest in `tx`; a device with a fixed-depth
    /// queue and no back-pressure, like a wire, drops what does not fit and counts it in
    /// [`DeviceStats::tx_dropped`]. Returns how many frames were queued for the wire.
    fn transmit(&mut self, now: Instant, tx: &mut Batch) -> usize;

    /// When the device next has something to do on its own (a delayed frame falls due);
    /// `None` when that only happens after a transmit.
    fn poll_at(&self) -> Option<Instant> {
        None
    }

    /// Counters.
    fn stats(&self) -> DeviceStats;
}

/// Something to call when a device has frames for a thread that sleeps until it does: the
/// threaded runtime's eventfd. A device with a file descriptor of its own (TAP, TUN) does not need
/// one; the in-memory pipe calls it ([`PipeEnd::set_wakeup`]) when a frame arrives at an
/// empty end.
pub trait Wakeup: Send + Sync + core::fmt::Debug {
    /// Wake the thread that sleeps for this device's frames.
    fn wake(&self);
}

/// A bounded ring of frames, allocated once. Pushing onto a full batch hands the frame back.
///
/// Its slots are a power of two, so that a position is a mask, not a wrap-around test, and
/// an empty slot is `None` (a frame handle's pointer has a niche, so a slot is no larger
/// than a handle): every frame in and out of the stack passes through two of these rings.
#[derive(Debug)]
pub struct Batch {
    /// `slots.len()` is a power of two at least `capacity` (or 0 for the placeholder).
    slots: Vec<Option<PBuf>>,
    /// Slot of the front frame.
    head: usize,
    /// Frames held.
    len: usize,
    capacity: usize,
}

impl Batch {
    /// A batch that holds at most `capacity` frames. Allocates now, never later.
    pub fn with_capacity(capacity: usize) -> Batch {
        let slots = (0..capacity.next_power_of_two().max(1)).map(|_| None).collect();
        Batch { slots, head: 0, len: 0, capacity }
    }

    /// A batch that holds nothing (no allocation): a placeholder while a batch is moved out.
    #[inline]
    pub const fn empty() -> Batch {
        Batch { slots: Vec::new(), head: 0, len: 0, capacity: 0 }
    }

    /// The slot `i` positions after the front. Only for a batch with a capacity, which has
    /// slots (every caller has checked that it holds a frame or has room for one).
    #[inline]
    fn slot(&mut self, i: usize) -> &mut Option<PBuf> {
        debug_assert!(!self.slots.is_empty());
        let at = (self.head + i) & self.slots.len().wrapping_sub(1);
        // SAFETY: masked by `slots.len() - 1` with `slots.len()` a power of two (not zero,
        // as above), so `at < slots.len()`.
        unsafe { self.slots.get_unchecked_mut(at) }
    }

    /// Put `frame` into the empty slot `i` positions after the front (behind the last
    /// frame, or just in front of the first) and count it: nothing is there to drop.
    #[inline]
    fn fill(&mut self, i: usize, frame: PBuf) {
        let old = self.slot(i).replace(frame);
        debug_assert!(old.is_none());
        core::mem::forget(old);
        self.len += 1;
    }

    /// Add a frame at the back; `Err(frame)` if the batch is full.
    #[inline]
    pub fn push(&mut self, frame: PBuf) -> Result<(), PBuf> {
        if self.len >= self.capacity {
            return Err(frame);
        }
        self.fill(self.len, frame);
        Ok(())
    }

    /// Take the frame at the front.
    #[inline]
    pub fn pop(&mut self) -> Option<PBuf> {
        if self.len == 0 {
            return None;
        }
        let (i, mask) = (self.head, self.slots.len() - 1);
        self.head = (i + 1) & mask;
        self.len -= 1;
        // SAFETY: `head` is always masked, and a batch that holds a frame has slots.
        unsafe { self.slots.get_unchecked_mut(i) }.take()
    }

    /// The frame at the front, left there.
    #[inline]
    pub fn front(&self) -> Option<&PBuf> {
        if self.len == 0 {
            return None;
        }
        self.slots.get(self.head)?.as_ref()
    }

    /// Put a frame back at the front (a device that could not take it after all).
    #[inline]
    pub fn push_front(&mut self, frame: PBuf) -> Result<(), PBuf> {
        if self.len >= self.capacity {
            return Err(frame);
        }
        self.head = self.head.wrapping_sub(1) & self.slots.len().wrapping_sub(1);
        self.fill(0, frame);
        Ok(())
    }

    /// Number of frames in the batch.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no frames.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the batch holds `capacity` frames, so a push would fail.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// Most frames the batch holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Room left.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.capacity - self.len
    }

    /// Iterate over the frames, front first.
    pub fn iter(&self) -> impl Iterator<Item = &PBuf> {
        let mask = self.slots.len().wrapping_sub(1);
        (0..self.len).filter_map(move |i| self.slots[(self.head + i) & mask].as_ref())
    }

    /// Drop every frame (their buffers return to their pools).
    pub fn clear(&mut self) {
        while self.pop().is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::Batch;
    use crate::buf::{PBuf, Pool, PoolConfig};

    fn frame(pool: &Pool, tag: u8) -> PBuf {
        let mut b = pool.alloc().unwrap();
        b.append(1).unwrap()[0] = tag;
        b
    }

    fn tags(b: &Batch) -> Vec<u8> {
        b.iter().map(|f| f.data()[0]).collect()
    }

    /// A ring of 3 frames (4 slots) used many times round: frames come out in the order
    /// they went in, a full ring hands the frame back, a frame put back at the front comes
    /// out first, and every buffer is back in the pool at the end.
    #[test]
    fn frames_come_out_in_order_round_the_ring() {
        let pool = Pool::new(PoolConfig { buffers: 8, ..Default::default() }).unwrap();
        let mut b = Batch::with_capacity(3);
        assert_eq!((b.capacity(), b.len(), b.pop().is_none()), (3, 0, true));
        let mut next = 0u8;
        let mut want = 0u8;
        for round in 0..20 {
            while !b.is_full() {
                b.push(frame(&pool, next)).unwrap();
                next = next.wrapping_add(1);
            }
            assert_eq!(b.remaining(), 0);
            let extra = b.push(frame(&pool, 0xff)).unwrap_err();
            assert_eq!(extra.data(), [0xff], "a full batch hands the frame back");
            drop(extra);
            assert_eq!(tags(&b), [want, want.wrapping_add(1), want.wrapping_add(2)]);
            // Take one or two, and put one back at the front now and then.
            let f = b.pop().unwrap();
            assert_eq!(f.data(), [want]);
            if round % 3 == 0 {
                b.push_front(f).unwrap();
            } else {
                want = want.wrapping_add(1);
                if round % 2 == 0 {
                    assert_eq!(b.pop().unwrap().data(), [want]);
                    want = want.wrapping_add(1);
                }
            }
        }
        b.clear();
        assert!(b.is_empty() && b.iter().next().is_none());
        assert_eq!(pool.available(), 8);
        let mut empty = Batch::empty();
        assert!(empty.push(frame(&pool, 1)).is_err() && empty.pop().is_none() && empty.is_full());
    }
}
