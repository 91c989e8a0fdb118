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
use std::collections::VecDeque;

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
#[derive(Debug)]
pub struct Batch {
    frames: VecDeque<PBuf>,
    capacity: usize,
}

impl Batch {
    /// A batch that holds at most `capacity` frames. Allocates now, never later.
    pub fn with_capacity(capacity: usize) -> Batch {
        Batch { frames: VecDeque::with_capacity(capacity), capacity }
    }

    /// A batch that holds nothing (no allocation): a placeholder while a batch is moved out.
    #[inline]
    pub const fn empty() -> Batch {
        Batch { frames: VecDeque::new(), capacity: 0 }
    }

    /// Add a frame at the back; `Err(frame)` if the batch is full.
    #[inline]
    pub fn push(&mut self, frame: PBuf) -> Result<(), PBuf> {
        if self.frames.len() >= self.capacity {
            return Err(frame);
        }
        self.frames.push_back(frame);
        Ok(())
    }

    /// Take the frame at the front.
    #[inline]
    pub fn pop(&mut self) -> Option<PBuf> {
        self.frames.pop_front()
    }

    /// Put a frame back at the front (a device that could not take it after all).
    #[inline]
    pub fn push_front(&mut self, frame: PBuf) -> Result<(), PBuf> {
        if self.frames.len() >= self.capacity {
            return Err(frame);
        }
        self.frames.push_front(frame);
        Ok(())
    }

    /// Number of frames in the batch.
    #[inline]
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether the batch holds no frames.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Whether the batch holds `capacity` frames, so a push would fail.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.frames.len() >= self.capacity
    }

    /// Most frames the batch holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Room left.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.capacity - self.frames.len()
    }

    /// Iterate over the frames, front first.
    pub fn iter(&self) -> impl Iterator<Item = &PBuf> {
        self.frames.iter()
    }

    /// Drop every frame (their buffers return to their pools).
    pub fn clear(&mut self) {
        self.frames.clear();
    }
}
