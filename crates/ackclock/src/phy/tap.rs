//! A Linux TAP device: the stack's frames go to and come from the kernel's network stack.
//!
//! The device is opened (or created) through `/dev/net/tun` with `IFF_TAP | IFF_NO_PI`, and
//! is non-blocking: [`Device::receive`] reads frames until the kernel has none left or the
//! batch is full, [`Device::transmit`] writes them one `writev` each, and [`Tap::wait`] sleeps
//! in `ppoll(2)` until a frame arrives or a timeout passes.
//!
//! Two modes:
//! - [`TapMode::Offload`] (the default): `IFF_VNET_HDR` with the 12-byte
//!   `virtio_net_hdr_v1` ([`vnet`](super::vnet)), and `TUNSETOFFLOAD(TUN_F_CSUM | TUN_F_TSO4)`.
//!   The 12-byte form is what a modern virtio guest uses and what the pool's default headroom
//!   was sized for; the 10-byte legacy form carries the same fields. With it the kernel skips work on our behalf: it hands us
//!   frames whose transport checksum is only the pseudo-header sum (`NEEDS_CSUM`, set as
//!   [`Flags::CSUM_PARTIAL`]: the bytes never left the host, so they are known good), frames
//!   it has verified (`DATA_VALID`, set as [`Flags::CSUM_VERIFIED`]), and TCP/IPv4 segments
//!   of up to 64 KiB that it did not cut into MSS-sized frames (`GSO_TCPV4`, set as
//!   [`Flags::GSO_TCPV4`] with `meta.gso_size`). Receive buffers must therefore hold 64 KiB
//!   frames: the TAP receives into its own [`Pool`], made with [`Tap::receive_pool`]. On
//!   transmit, frames flagged `CSUM_PARTIAL` / `GSO_TCPV4` get the matching header and the
//!   kernel completes the checksum or cuts the segment; other frames get a zero header.
//! - [`TapMode::Plain`]: no header; every frame is complete and MTU-sized both ways.
//!
//! The header travels in its own `iovec` (`readv`/`writev`), so transmitted buffers, which
//! a retransmission queue may share read-only, are never written, and received frames start
//! at the pool's headroom like any other.
//!
//! A TAP the process creates disappears when its descriptor closes (it is not made
//! persistent). It can be moved to another network namespace (`ip link set NAME netns NS`)
//! after it is opened: the descriptor keeps working, and the kernel side of the link then
//! lives in that namespace.
//!
//! The descriptor, its reads and writes and the virtio-net header are shared with
//! [`Tun`](super::Tun), which carries IP packets without an Ethernet header.

use super::tuntap::{self, Kind, Port};
use super::{Batch, Capabilities, Device, DeviceStats};
#[cfg(doc)]
use crate::buf::Flags;
use crate::buf::{Pool, PoolConfig, PoolConfigError};
use crate::time::{Duration, Instant};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

pub use super::tuntap::{TapCounters, TapMode};
pub use super::vnet::VNET_HDR_LEN;

/// How a TAP is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapConfig {
    /// Whether frames carry virtio-net headers (offloads) or not.
    pub mode: TapMode,
    /// The IP MTU of the link (the kernel side's MTU; 1500 unless it was changed).
    pub mtu: usize,
}

impl Default for TapConfig {
    fn default() -> Self {
        TapConfig { mode: TapMode::Offload, mtu: 1500 }
    }
}

impl TapConfig {
    /// Largest frame (Ethernet header included) the kernel may hand over.
    pub fn max_frame(&self) -> usize {
        tuntap::max_frame(Kind::Tap, self.mode, self.mtu)
    }
}

/// A TAP device; see the [module docs](self).
#[derive(Debug)]
pub struct Tap {
    port: Port,
    config: TapConfig,
}

impl Tap {
    /// A pool for a TAP's receive buffers: `buffers` buffers, each large enough for the
    /// largest frame of `config` after the default headroom.
    pub fn pool_config(config: &TapConfig, buffers: usize) -> PoolConfig {
        tuntap::pool_config(config.max_frame(), buffers)
    }

    /// The receive pool for a TAP with `config`: [`Tap::pool_config`]'s `buffers` buffers,
    /// and in offload mode as many MTU-sized ones beside them as a smaller size class. Every
    /// frame that fits an MTU is read into one of those, so that a frame held in a receive
    /// or out-of-order queue pins an MTU's worth of memory, not 64 KiB; coalesced frames use
    /// the large buffers. (A pool from `pool_config` alone works too, without the class.)
    pub fn receive_pool(config: &TapConfig, buffers: usize) -> Result<Pool, PoolConfigError> {
        tuntap::pool(Kind::Tap, config.mode, config.mtu, buffers)
    }

    /// Open the TAP `name`, creating it if it does not exist (an empty name lets the kernel
    /// choose `tapN`). Received frames go into buffers from `pool`, which must hold
    /// [`TapConfig::max_frame`] bytes after its headroom (see [`Tap::receive_pool`]).
    pub fn open(name: &str, config: TapConfig, pool: Pool) -> io::Result<Tap> {
        let port = Port::open(name, Kind::Tap, config.mode, config.max_frame(), pool)?;
        Ok(Tap { port, config })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.port.name
    }

    /// The settings the TAP was opened with.
    pub fn config(&self) -> &TapConfig {
        &self.config
    }

    /// Whether this open created the interface (so it goes away when the TAP is dropped),
    /// rather than attaching to an existing persistent one.
    pub fn created(&self) -> bool {
        self.port.created
    }

    /// The pool received frames are read into.
    pub fn pool(&self) -> &Pool {
        &self.port.pool
    }

    /// The TAP-specific counters (offloads, receives without a buffer).
    pub fn counters(&self) -> &TapCounters {
        &self.port.counters
    }

    /// The last I/O error a read or write met (other than "would block"), if any. Frames
    /// are dropped and counted when it happens; this says why.
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.port.error.take()
    }

    /// Sleep until a frame can be read or `timeout` passes (`None`: no limit). Returns
    /// whether a frame is ready; a signal ends the wait early with `Ok(false)`. An error
    /// means the device is gone (e.g. its namespace was deleted).
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        self.port.wait(timeout)
    }
}

impl AsRawFd for Tap {
    fn as_raw_fd(&self) -> RawFd {
        self.port.as_raw_fd()
    }
}

impl Device for Tap {
    /// Offload mode: the kernel completes checksums and cuts TCP/IPv4 segments of up to
    /// 64 KiB that we send, and may hand us coalesced segments. Received checksums are
    /// vouched for per frame ([`Flags::CSUM_PARTIAL`], [`Flags::CSUM_VERIFIED`]), not for
    /// every frame, so `rx_checksum` stays false.
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::ethernet(self.config.mtu);
        if self.config.mode == TapMode::Offload {
            caps.tx_checksum = true;
            caps.tso_max = tuntap::MAX_GSO_PACKET;
            caps.rx_coalesce = true;
        }
        caps
    }

    fn receive(&mut self, _now: Instant, rx: &mut Batch) -> usize {
        self.port.receive(rx)
    }

    /// Writes frames until the batch is empty, the kernel pushes back, or the kernel has
    /// frames for us after a burst of writes (see the shared descriptor's `transmit`): each
    /// frame the kernel's TCP takes in may make it answer at once, into a queue toward us of
    /// `txqueuelen` (1000) frames.
    fn transmit(&mut self, _now: Instant, tx: &mut Batch) -> usize {
        self.port.transmit(tx)
    }

    fn stats(&self) -> DeviceStats {
        self.port.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_must_fit_the_mode() {
        let offload = TapConfig::default();
        let small = Pool::new(PoolConfig { buffers: 1, buffer_size: 4096, headroom: 160 }).unwrap();
        let err = Tap::open("ackc-never", offload, small).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let c = Tap::pool_config(&offload, 4);
        assert!(c.buffer_size - c.headroom > 65535 + 14);
        let plain = TapConfig { mode: TapMode::Plain, mtu: 1500 };
        assert!(Tap::pool_config(&plain, 4).buffer_size < 2048);
    }
}
