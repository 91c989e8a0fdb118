//! A Linux TAP device: the stack's frames go to and come from the kernel's network stack.
//!
//! The device is opened (or created) through `/dev/net/tun` with `IFF_TAP | IFF_NO_PI`, and
//! is non-blocking: [`Device::receive`] reads frames until the kernel has none left or the
//! batch is full, [`Device::transmit`] writes them one `writev` each, and [`Tap::wait`] sleeps
//! in `ppoll(2)` until a frame arrives or a timeout passes.
//!
//! Two modes:
//! - [`TapMode::Offload`] (the default): `IFF_VNET_HDR` with the 12-byte
//!   `virtio_net_hdr_v1` (VIRTIO 1.0 layout, little-endian, `num_buffers` unused by TAP),
//!   and `TUNSETOFFLOAD(TUN_F_CSUM | TUN_F_TSO4)`. The 12-byte form is what a modern virtio
//!   guest uses and what the pool's default headroom was sized for; the 10-byte legacy form
//!   carries the same fields. With it the kernel skips work on our behalf: it hands us
//!   frames whose transport checksum is only the pseudo-header sum (`NEEDS_CSUM`, set as
//!   [`Flags::CSUM_PARTIAL`]: the bytes never left the host, so they are known good), frames
//!   it has verified (`DATA_VALID`, set as [`Flags::CSUM_VERIFIED`]), and TCP/IPv4 segments
//!   of up to 64 KiB that it did not cut into MSS-sized frames (`GSO_TCPV4`, set as
//!   [`Flags::GSO_TCPV4`] with `meta.gso_size`). Receive buffers must therefore hold 64 KiB
//!   frames: the TAP receives into its own [`Pool`], sized with [`Tap::pool_config`]. On
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

use super::{Batch, Capabilities, Device, DeviceStats};
use crate::buf::{Flags, PBuf, Pool, PoolConfig, DEFAULT_HEADROOM};
use crate::time::{Duration, Instant};
use std::ffi::CStr;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// Size of the `virtio_net_hdr_v1` in offload mode.
pub const VNET_HDR_LEN: usize = 12;

/// Largest IP packet the kernel hands over in one GSO frame.
const MAX_GSO_PACKET: usize = 65535;

/// Frames written before checking whether the kernel has frames for us (see
/// [`Tap::transmit`](Device::transmit)).
const TX_BURST: usize = 64;

/// Ethernet header with one VLAN tag.
const MAX_LINK_HEADER: usize = 18;

// virtio_net_hdr flags and GSO types (include/uapi/linux/virtio_net.h).
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_F_DATA_VALID: u8 = 2;
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

/// Whether the kernel and the stack exchange virtio-net headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TapMode {
    /// No header: complete, MTU-sized frames.
    Plain,
    /// virtio-net headers with checksum and TCP segmentation offload.
    #[default]
    Offload,
}

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
        match self.mode {
            TapMode::Plain => self.mtu + MAX_LINK_HEADER,
            TapMode::Offload => MAX_GSO_PACKET.max(self.mtu) + MAX_LINK_HEADER,
        }
    }
}

/// TAP-specific counters, beside [`DeviceStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TapCounters {
    /// Received with `NEEDS_CSUM`: checksum left to us as a pseudo-header sum.
    pub rx_csum_partial: u64,
    /// Received with `DATA_VALID`.
    pub rx_csum_valid: u64,
    /// Received as one coalesced TCP/IPv4 GSO frame.
    pub rx_gso: u64,
    /// Receive attempts that found the pool empty (the frame stays in the kernel's queue).
    pub rx_no_buffer: u64,
    /// Sent with a non-zero virtio-net header (checksum or segmentation offload).
    pub tx_offloaded: u64,
    /// Of those, TCP/IPv4 segments for the kernel to cut (TSO).
    pub tx_gso: u64,
}

/// A TAP device; see the [module docs](self).
pub struct Tap {
    fd: OwnedFd,
    name: String,
    config: TapConfig,
    created: bool,
    pool: Pool,
    /// A receive buffer allocated for a read that found nothing, kept for the next one.
    spare: Option<PBuf>,
    /// Frames written since the last receive.
    tx_since_rx: usize,
    stats: DeviceStats,
    counters: TapCounters,
    error: Option<io::Error>,
}

impl fmt::Debug for Tap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tap")
            .field("fd", &self.fd.as_raw_fd())
            .field("name", &self.name)
            .field("config", &self.config)
            .field("created", &self.created)
            .field("pool", &self.pool)
            .field("stats", &self.stats)
            .finish()
    }
}

/// `struct ifreq` as TUNSETIFF reads it: the name and the flags (a `short`), padded to the
/// union's size.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Tap {
    /// A pool for a TAP's receive buffers: `buffers` buffers, each large enough for the
    /// largest frame of `config` after the default headroom.
    pub fn pool_config(config: &TapConfig, buffers: usize) -> PoolConfig {
        // One spare byte past the largest frame tells a full read from a truncated one.
        PoolConfig { buffers, buffer_size: DEFAULT_HEADROOM + config.max_frame() + 1, headroom: DEFAULT_HEADROOM }
    }

    /// Open the TAP `name`, creating it if it does not exist (an empty name lets the kernel
    /// choose `tapN`). Received frames go into buffers from `pool`, which must hold
    /// [`TapConfig::max_frame`] bytes after its headroom (see [`Tap::pool_config`]).
    pub fn open(name: &str, config: TapConfig, pool: Pool) -> io::Result<Tap> {
        let invalid = |msg: &str| io::Error::new(io::ErrorKind::InvalidInput, msg.to_string());
        if name.len() >= libc::IFNAMSIZ || name.contains(['/', '\0', ' ']) {
            return Err(invalid("bad interface name"));
        }
        if pool.buffer_size() - pool.headroom() <= config.max_frame() {
            return Err(invalid("receive pool buffers too small for this TAP mode (see Tap::pool_config)"));
        }
        let created = name.is_empty() || !Path::new("/sys/class/net").join(name).exists();
        // SAFETY: a NUL-terminated path and plain flags.
        let raw =
            cvt(unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
        // SAFETY: `raw` is a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
        if config.mode == TapMode::Offload {
            flags |= libc::IFF_VNET_HDR;
        }
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags: flags as libc::c_short, _pad: [0; 22] };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: TUNSETIFF reads and writes a `struct ifreq`, which `IfReq` lays out (and is
        // at least as large as).
        cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut IfReq) })?;
        let name = CStr::from_bytes_until_nul(&req.name)
            .map_err(|_| invalid("kernel returned a bad name"))?
            .to_string_lossy()
            .into_owned();
        if config.mode == TapMode::Offload {
            let size = VNET_HDR_LEN as libc::c_int;
            // SAFETY: TUNSETVNETHDRSZ reads an int through the pointer.
            cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &size as *const libc::c_int) })?;
            // The v1 header is little-endian; on a little-endian host this is the native
            // order already, and kernels without cross-endian support refuse the call there.
            if cfg!(target_endian = "big") {
                let le: libc::c_int = 1;
                // SAFETY: TUNSETVNETLE reads an int through the pointer.
                cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETLE, &le as *const libc::c_int) })?;
            }
            let offload = (libc::TUN_F_CSUM | libc::TUN_F_TSO4) as libc::c_ulong;
            // SAFETY: TUNSETOFFLOAD takes its flags by value.
            cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, offload) })?;
        }
        Ok(Tap {
            fd,
            name,
            config,
            created,
            pool,
            spare: None,
            tx_since_rx: 0,
            stats: DeviceStats::default(),
            counters: TapCounters::default(),
            error: None,
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings the TAP was opened with.
    pub fn config(&self) -> &TapConfig {
        &self.config
    }

    /// Whether this open created the interface (so it goes away when the TAP is dropped),
    /// rather than attaching to an existing persistent one.
    pub fn created(&self) -> bool {
        self.created
    }

    /// The pool received frames are read into.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The TAP-specific counters (offloads, receives without a buffer).
    pub fn counters(&self) -> &TapCounters {
        &self.counters
    }

    /// The last I/O error a read or write met (other than "would block"), if any. Frames
    /// are dropped and counted when it happens; this says why.
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }

    /// Sleep until a frame can be read or `timeout` passes (`None`: no limit). Returns
    /// whether a frame is ready; a signal ends the wait early with `Ok(false)`. An error
    /// means the device is gone (e.g. its namespace was deleted).
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts.as_ref().map_or(core::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: one valid pollfd, a valid or null timespec, no signal mask.
        let r = unsafe { libc::ppoll(&mut pfd, 1, ts_ptr, core::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
        }
        if pfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, format!("TAP {} is gone", self.name)));
        }
        Ok(pfd.revents & libc::POLLIN != 0)
    }

    /// Read one frame into `buf` (empty, at the pool's headroom). `Ok(None)`: nothing to
    /// read. `Ok(Some(false))`: a frame was read but dropped.
    fn read_one(&mut self, buf: &mut PBuf) -> io::Result<Option<bool>> {
        let room = buf.tailroom();
        let mut hdr = [0u8; VNET_HDR_LEN];
        let offload = self.config.mode == TapMode::Offload;
        let n = {
            let Ok(data) = buf.append(room) else { return Ok(Some(false)) };
            let iov = [
                libc::iovec { iov_base: hdr.as_mut_ptr().cast(), iov_len: VNET_HDR_LEN },
                libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: data.len() },
            ];
            let iov = if offload { &iov[..] } else { &iov[1..] };
            loop {
                // SAFETY: the iovecs point at `hdr` and at the buffer's writable tail, both
                // live and exclusively borrowed here.
                let r = unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int) };
                if r >= 0 {
                    break r as usize;
                }
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => return Ok(None),
                    _ => return Err(e),
                }
            }
        };
        let hdr_len = if offload { VNET_HDR_LEN } else { 0 };
        // A frame that filled the whole buffer may have been cut short.
        if n < hdr_len || n - hdr_len >= room {
            return Ok(Some(false));
        }
        let len = n - hdr_len;
        let _ = buf.truncate(len);
        if offload && !apply_vnet_header(&hdr, buf, &mut self.counters) {
            return Ok(Some(false));
        }
        Ok(Some(true))
    }

    fn write_one(&mut self, frame: &PBuf) -> io::Result<bool> {
        let mut hdr = [0u8; VNET_HDR_LEN];
        let offload = self.config.mode == TapMode::Offload;
        if offload {
            match vnet_header_for(frame) {
                Some(h) => hdr = h,
                None => {
                    self.stats.tx_dropped += 1;
                    return Ok(true);
                }
            }
            if hdr != [0; VNET_HDR_LEN] {
                self.counters.tx_offloaded += 1;
                self.counters.tx_gso += (hdr[1] != VIRTIO_NET_HDR_GSO_NONE) as u64;
            }
        }
        let data = frame.data();
        let iov = [
            libc::iovec { iov_base: hdr.as_mut_ptr().cast(), iov_len: VNET_HDR_LEN },
            libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() },
        ];
        let iov = if offload { &iov[..] } else { &iov[1..] };
        loop {
            // SAFETY: the iovecs point at live memory that writev only reads.
            let r = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int) };
            if r >= 0 {
                self.stats.tx_frames += 1;
                self.stats.tx_bytes += data.len() as u64;
                return Ok(true);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(false),
                _ => return Err(e),
            }
        }
    }
}

/// Set a received frame's metadata from its virtio-net header. `false`: drop the frame.
fn apply_vnet_header(h: &[u8; VNET_HDR_LEN], buf: &mut PBuf, counters: &mut TapCounters) -> bool {
    let le = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
    let (flags, gso_type, gso_size, csum_start, csum_offset) = (h[0], h[1], le(4), le(6), le(8));
    let len = buf.len();
    if flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
        if csum_start as usize + csum_offset as usize + 2 > len {
            return false;
        }
        buf.meta.flags.insert(Flags::CSUM_PARTIAL);
        buf.meta.csum_start = csum_start;
        buf.meta.csum_offset = csum_offset;
        counters.rx_csum_partial += 1;
    } else if flags & VIRTIO_NET_HDR_F_DATA_VALID != 0 {
        buf.meta.flags.insert(Flags::CSUM_VERIFIED);
        counters.rx_csum_valid += 1;
    }
    match gso_type & !VIRTIO_NET_HDR_GSO_ECN {
        VIRTIO_NET_HDR_GSO_NONE => true,
        VIRTIO_NET_HDR_GSO_TCPV4 if gso_size > 0 => {
            buf.meta.flags.insert(Flags::GSO_TCPV4);
            buf.meta.gso_size = gso_size;
            counters.rx_gso += 1;
            true
        }
        // TSO6 and UFO were not offered (TUNSETOFFLOAD), so these do not come.
        _ => false,
    }
}

/// The virtio-net header for a frame to send; `None` if its offload metadata is unusable.
fn vnet_header_for(frame: &PBuf) -> Option<[u8; VNET_HDR_LEN]> {
    let mut h = [0u8; VNET_HDR_LEN];
    let m = &frame.meta;
    let data = frame.data();
    if m.flags.contains(Flags::CSUM_PARTIAL) {
        let (start, offset) = (m.csum_start as usize, m.csum_offset as usize);
        if start + offset + 2 > data.len() {
            return None;
        }
        h[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        h[6..8].copy_from_slice(&m.csum_start.to_le_bytes());
        h[8..10].copy_from_slice(&m.csum_offset.to_le_bytes());
    }
    if m.flags.contains(Flags::GSO_TCPV4) {
        // As in Linux, a segment to be cut must leave its checksum to the device too; the
        // transport (TCP) header starts at csum_start.
        let start = m.csum_start as usize;
        if !m.flags.contains(Flags::CSUM_PARTIAL) || m.gso_size == 0 || start + 20 > data.len() {
            return None;
        }
        let hdr_len = start + (data[start + 12] >> 4) as usize * 4;
        if hdr_len > data.len() {
            return None;
        }
        h[1] = VIRTIO_NET_HDR_GSO_TCPV4;
        h[2..4].copy_from_slice(&(hdr_len as u16).to_le_bytes());
        h[4..6].copy_from_slice(&m.gso_size.to_le_bytes());
    }
    Some(h)
}

impl AsRawFd for Tap {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
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
            caps.tso_max = MAX_GSO_PACKET;
            caps.rx_coalesce = true;
        }
        caps
    }

    fn receive(&mut self, _now: Instant, rx: &mut Batch) -> usize {
        self.tx_since_rx = 0;
        let mut n = 0;
        while !rx.is_full() {
            let mut buf = match self.spare.take() {
                Some(b) => b,
                None => match self.pool.alloc() {
                    Ok(b) => b,
                    Err(_) => {
                        self.counters.rx_no_buffer += 1;
                        break;
                    }
                },
            };
            match self.read_one(&mut buf) {
                Ok(Some(true)) => {
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += buf.len() as u64;
                    // Cannot fail: the batch is not full.
                    let _ = rx.push(buf);
                    n += 1;
                }
                Ok(Some(false)) => {
                    self.stats.rx_dropped += 1;
                    let _ = buf.reset(self.pool.headroom());
                    self.spare = Some(buf);
                }
                Ok(None) => {
                    let _ = buf.reset(self.pool.headroom());
                    self.spare = Some(buf);
                    break;
                }
                Err(e) => {
                    let _ = buf.reset(self.pool.headroom());
                    self.spare = Some(buf);
                    self.error = Some(e);
                    break;
                }
            }
        }
        n
    }

    /// Writes frames until the batch is empty, the kernel pushes back, or, every
    /// `TX_BURST` (64) frames since the last receive, frames are waiting to be read: then the
    /// rest stays in `tx` for the next call, after a receive. Each frame the kernel's TCP
    /// takes in may make it answer at once, into the TAP's queue toward us, which holds
    /// `txqueuelen` (1000) frames and drops the rest: thousands of writes without a read
    /// would lose the peer's ACKs. A call always writes at least `TX_BURST` frames.
    fn transmit(&mut self, _now: Instant, tx: &mut Batch) -> usize {
        let mut n = 0;
        while let Some(frame) = tx.pop() {
            let check = self.tx_since_rx >= TX_BURST && self.tx_since_rx % TX_BURST == 0;
            if check && self.wait(Some(Duration::ZERO)).unwrap_or(false) {
                let _ = tx.push_front(frame);
                // The next call writes a burst even if no receive comes in between.
                self.tx_since_rx = 0;
                break;
            }
            match self.write_one(&frame) {
                Ok(true) => {
                    n += 1;
                    self.tx_since_rx += 1;
                }
                Ok(false) => {
                    // The kernel pushes back: keep the frame for the next call.
                    let _ = tx.push_front(frame);
                    break;
                }
                Err(e) => {
                    // E.g. EIO while the kernel side is down: a wire would lose it too.
                    self.stats.tx_dropped += 1;
                    self.error = Some(e);
                }
            }
        }
        n
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Pool {
        Pool::new(PoolConfig { buffers: 2, buffer_size: 512, headroom: 64 }).unwrap()
    }

    /// An Ethernet + IPv4 (20) + TCP (32-byte header) frame of `payload` bytes.
    fn frame(pool: &Pool, payload: usize) -> PBuf {
        let mut b = pool.alloc().unwrap();
        let bytes = b.append(14 + 20 + 32 + payload).unwrap();
        bytes.fill(0);
        bytes[14] = 0x45;
        bytes[14 + 20 + 12] = 8 << 4;
        b
    }

    #[test]
    fn vnet_header_for_plain_partial_and_gso_frames() {
        let p = pool();
        let mut f = frame(&p, 100);
        assert_eq!(vnet_header_for(&f), Some([0; VNET_HDR_LEN]));
        f.meta.flags.insert(Flags::CSUM_PARTIAL);
        f.meta.csum_start = 34;
        f.meta.csum_offset = 16;
        assert_eq!(vnet_header_for(&f), Some([1, 0, 0, 0, 0, 0, 34, 0, 16, 0, 0, 0]));
        f.meta.flags.insert(Flags::GSO_TCPV4);
        f.meta.gso_size = 1448;
        let h = vnet_header_for(&f).unwrap();
        assert_eq!(h[1], VIRTIO_NET_HDR_GSO_TCPV4);
        assert_eq!(u16::from_le_bytes([h[2], h[3]]), 34 + 32, "hdr_len covers the TCP header");
        assert_eq!(u16::from_le_bytes([h[4], h[5]]), 1448);
        // A checksum field beyond the frame, or GSO without partial checksum, is refused.
        f.meta.csum_offset = 200;
        assert_eq!(vnet_header_for(&f), None);
        f.meta.csum_offset = 16;
        f.meta.flags.remove(Flags::CSUM_PARTIAL);
        assert_eq!(vnet_header_for(&f), None);
    }

    #[test]
    fn received_vnet_header_sets_meta() {
        let p = pool();
        let mut c = TapCounters::default();
        let mut f = frame(&p, 100);
        let h = [1, VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN, 66, 0, 0xa8, 5, 34, 0, 16, 0, 0, 0];
        assert!(apply_vnet_header(&h, &mut f, &mut c));
        assert!(f.meta.flags.contains(Flags::CSUM_PARTIAL | Flags::GSO_TCPV4));
        assert_eq!((f.meta.csum_start, f.meta.csum_offset, f.meta.gso_size), (34, 16, 1448));
        let mut g = frame(&p, 10);
        assert!(apply_vnet_header(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], &mut g, &mut c));
        assert!(g.meta.flags.contains(Flags::CSUM_VERIFIED));
        assert_eq!((c.rx_csum_partial, c.rx_csum_valid, c.rx_gso), (1, 1, 1));
        // Unknown GSO types and checksum fields outside the frame are dropped.
        drop(g);
        let mut g = frame(&p, 10);
        assert!(!apply_vnet_header(&[0, 4, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0], &mut g, &mut c));
        assert!(!apply_vnet_header(&[1, 0, 0, 0, 0, 0, 200, 0, 16, 0, 0, 0], &mut g, &mut c));
    }

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
