//! A Linux TUN device: IP packets, without a link header, to and from the kernel's network
//! stack. This is what VPN and proxy data planes are handed (Android's `VpnService`, iOS,
//! WireGuard and Tailscale all give out a TUN descriptor, not a TAP).
//!
//! Opened (or created) through `/dev/net/tun` with `IFF_TUN | IFF_NO_PI`: each read is one
//! IPv4 packet whose first byte is its version and header length, each write one packet; no
//! Ethernet header, no ARP. The device reports [`Capabilities::ethernet`] false, and the
//! interface above it then writes no link header and resolves no next hop.
//!
//! Everything else is the [`Tap`](super::Tap)'s, shared rather than repeated: the
//! non-blocking descriptor, batch receive and transmit, [`Tun::wait`], and the two modes.
//! [`TapMode::Offload`] opens it with `IFF_VNET_HDR` and offers `TUN_F_CSUM | TUN_F_TSO4`,
//! and a TUN then does what the TAP does with the virtio-net header ([`vnet`](super::vnet)):
//! checksums left partial or vouched for, TCP/IPv4 segments of up to 64 KiB that the kernel
//! cuts on transmit and hands over uncut on receive, with `csum_start` counted from the
//! IPv4 header (the frame's first byte). [`TapMode::Plain`]: complete, MTU-sized packets.
//!
//! A TUN the process creates disappears when its descriptor closes. Like a TAP, it can be
//! moved to another network namespace (`ip link set NAME netns NS`) after it is opened.

use super::tuntap::{self, Kind, Port, TapCounters, TapMode};
use super::{Batch, Capabilities, Device, DeviceStats};
use crate::buf::{Pool, PoolConfig, PoolConfigError};
use crate::time::{Duration, Instant};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// How a TUN is opened: the same choices as a TAP's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunConfig {
    /// Whether packets carry virtio-net headers (offloads) or not.
    pub mode: TapMode,
    /// The IP MTU of the link (the kernel side's MTU; 1500 unless it was changed).
    pub mtu: usize,
}

impl Default for TunConfig {
    fn default() -> Self {
        TunConfig { mode: TapMode::Offload, mtu: 1500 }
    }
}

impl TunConfig {
    /// Largest packet the kernel may hand over: the MTU, or a 64 KiB GSO packet.
    pub fn max_frame(&self) -> usize {
        tuntap::max_frame(Kind::Tun, self.mode, self.mtu)
    }
}

/// A TUN device; see the [module docs](self).
#[derive(Debug)]
pub struct Tun {
    port: Port,
    config: TunConfig,
}

impl Tun {
    /// A pool for a TUN's receive buffers: `buffers` buffers, each large enough for the
    /// largest packet of `config` after the default headroom.
    pub fn pool_config(config: &TunConfig, buffers: usize) -> PoolConfig {
        tuntap::pool_config(config.max_frame(), buffers)
    }

    /// The receive pool for a TUN with `config`: [`Tun::pool_config`]'s `buffers` buffers,
    /// and in offload mode as many MTU-sized ones beside them as a smaller size class. Every
    /// packet that fits an MTU is read into one of those, so that a packet held in a receive
    /// or out-of-order queue pins an MTU's worth of memory, not 64 KiB; coalesced packets use
    /// the large buffers. (A pool from `pool_config` alone works too, without the class.)
    pub fn receive_pool(config: &TunConfig, buffers: usize) -> Result<Pool, PoolConfigError> {
        tuntap::pool(Kind::Tun, config.mode, config.mtu, buffers)
    }

    /// Open the TUN `name`, creating it if it does not exist (an empty name lets the kernel
    /// choose `tunN`). Received packets go into buffers from `pool`, which must hold
    /// [`TunConfig::max_frame`] bytes after its headroom (see [`Tun::receive_pool`]).
    pub fn open(name: &str, config: TunConfig, pool: Pool) -> io::Result<Tun> {
        let port = Port::open(name, Kind::Tun, config.mode, config.max_frame(), pool)?;
        Ok(Tun { port, config })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.port.name
    }

    /// The settings the TUN was opened with.
    pub fn config(&self) -> &TunConfig {
        &self.config
    }

    /// Whether this open created the interface (so it goes away when the TUN is dropped).
    pub fn created(&self) -> bool {
        self.port.created
    }

    /// The pool received packets are read into.
    pub fn pool(&self) -> &Pool {
        &self.port.pool
    }

    /// Offload counters and receives without a buffer, as a TAP keeps them.
    pub fn counters(&self) -> &TapCounters {
        &self.port.counters
    }

    /// The last I/O error a read or write met (other than "would block"), if any.
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.port.error.take()
    }

    /// Sleep until a packet can be read or `timeout` passes (`None`: no limit); as
    /// [`Tap::wait`](super::Tap::wait).
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        self.port.wait(timeout)
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.port.as_raw_fd()
    }
}

impl Device for Tun {
    /// No Ethernet header. Offload mode: checksum offload and TSO of up to 64 KiB on
    /// transmit, coalesced segments on receive, as a TAP's.
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::ip(self.config.mtu);
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

    /// No link header: a plain TUN's packets are MTU-sized, an offload TUN's up to 64 KiB.
    #[test]
    fn pool_fits_packets_without_link_header() {
        let plain = TunConfig { mode: TapMode::Plain, mtu: 1500 };
        assert_eq!(plain.max_frame(), 1500);
        assert_eq!(TunConfig::default().max_frame(), 65535);
        let small = Pool::new(PoolConfig { buffers: 1, buffer_size: 1600, headroom: 160 }).unwrap();
        let err = Tun::open("ackc-never", plain, small).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "1440 bytes after the headroom cannot hold 1500");
        let c = Tun::pool_config(&plain, 4);
        assert_eq!(c.buffer_size - c.headroom, 1501);
    }
}
