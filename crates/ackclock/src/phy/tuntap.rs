//! What a TAP and a TUN share: a non-blocking descriptor on `/dev/net/tun`, optionally with
//! virtio-net headers ([`vnet`](super::vnet)), read and written a frame per `readv`/`writev`
//! into and out of pool buffers. [`Tap`](super::Tap) and [`Tun`](super::Tun) differ only in
//! the flag they open it with (`IFF_TAP`: Ethernet frames; `IFF_TUN`: IP packets) and in the
//! capabilities they report.

use super::vnet::{apply_vnet_header, vnet_header_for, VIRTIO_NET_HDR_GSO_NONE, VNET_HDR_LEN};
use super::{Batch, DeviceStats};
use crate::buf::{PBuf, Pool, PoolConfig, PoolConfigError, DEFAULT_HEADROOM};
use crate::time::Duration;
use std::ffi::CStr;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// Largest IP packet the kernel hands over in one GSO frame.
pub(super) const MAX_GSO_PACKET: usize = 65535;

/// Frames written before checking whether the kernel has frames for us (see
/// [`Port::transmit`]).
const TX_BURST: usize = 64;

/// Whether the kernel and the stack exchange virtio-net headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TapMode {
    /// No header: complete, MTU-sized frames.
    Plain,
    /// virtio-net headers with checksum and TCP segmentation offload.
    #[default]
    Offload,
}

/// Which kind of device: frames with an Ethernet header, or bare IP packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Tap,
    Tun,
}

impl Kind {
    /// Longest link header of a frame: Ethernet with one VLAN tag, or none.
    pub(super) const fn link_header(self) -> usize {
        match self {
            Kind::Tap => 18,
            Kind::Tun => 0,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Tap => "TAP",
            Kind::Tun => "TUN",
        }
    }
}

/// Largest frame (link header included) the kernel may hand over to a device of `kind`.
pub(super) const fn max_frame(kind: Kind, mode: TapMode, mtu: usize) -> usize {
    let ip = match mode {
        TapMode::Plain => mtu,
        TapMode::Offload => {
            if mtu > MAX_GSO_PACKET {
                mtu
            } else {
                MAX_GSO_PACKET
            }
        }
    };
    ip + kind.link_header()
}

/// A pool for receive buffers holding `max_frame`-byte frames.
pub(super) fn pool_config(max_frame: usize, buffers: usize) -> PoolConfig {
    // One spare byte past the largest frame tells a full read from a truncated one.
    PoolConfig { buffers, buffer_size: DEFAULT_HEADROOM + max_frame + 1, headroom: DEFAULT_HEADROOM }
}

/// The receive pool of a device of `kind` in `mode` with `mtu`: in offload mode, buffers for
/// coalesced frames of up to 64 KiB with a class of MTU-sized buffers beside them, into
/// which every frame that fits is read (see `Port::receive`); in plain mode, MTU-sized
/// buffers only.
pub(super) fn pool(kind: Kind, mode: TapMode, mtu: usize, buffers: usize) -> Result<Pool, PoolConfigError> {
    let large = pool_config(max_frame(kind, mode, mtu), buffers);
    let mtu_frame = mtu + kind.link_header();
    if mode == TapMode::Offload && large.buffer_size > DEFAULT_HEADROOM + mtu_frame {
        let small = PoolConfig { buffers, buffer_size: DEFAULT_HEADROOM + mtu_frame, headroom: DEFAULT_HEADROOM };
        Pool::with_small_class(large, small)
    } else {
        Pool::new(large)
    }
}

/// Where [`Port::read_one`] put a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Landed {
    /// In the small-class buffer.
    Small,
    /// In the large buffer.
    Large,
    /// Nowhere: truncated, or a virtio-net header we cannot honour (counted).
    Dropped,
}

/// Counters of a TAP or TUN, beside [`DeviceStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TapCounters {
    /// Received with `NEEDS_CSUM`: checksum left to us as a pseudo-header sum.
    pub rx_csum_partial: u64,
    /// Received with `DATA_VALID`.
    pub rx_csum_valid: u64,
    /// Received as one coalesced TCP/IPv4 GSO frame.
    pub rx_gso: u64,
    /// Read into the receive pool's small class, the MTU-sized buffers beside the 64 KiB ones
    /// (see `Tap::receive_pool`).
    pub rx_small: u64,
    /// Receive attempts that found the pool empty (the frame stays in the kernel's queue).
    pub rx_no_buffer: u64,
    /// Sent with a non-zero virtio-net header (checksum or segmentation offload).
    pub tx_offloaded: u64,
    /// Of those, TCP/IPv4 segments for the kernel to cut (TSO).
    pub tx_gso: u64,
}

/// The descriptor and its rings; see the [module docs](self).
pub(super) struct Port {
    fd: OwnedFd,
    kind: Kind,
    pub(super) name: String,
    pub(super) mode: TapMode,
    pub(super) created: bool,
    pub(super) pool: Pool,
    /// A receive buffer allocated for a read that found nothing, kept for the next one.
    spare: Option<PBuf>,
    /// The same for the pool's small class (MTU-sized buffers, when it has one).
    spare_small: Option<PBuf>,
    /// Frames written since the last receive.
    tx_since_rx: usize,
    pub(super) stats: DeviceStats,
    pub(super) counters: TapCounters,
    pub(super) error: Option<io::Error>,
}

impl fmt::Debug for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(self.kind.name())
            .field("fd", &self.fd.as_raw_fd())
            .field("name", &self.name)
            .field("mode", &self.mode)
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

impl Port {
    /// Open the device `name` of `kind`, creating it if it does not exist (an empty name lets
    /// the kernel choose). Received frames go into buffers from `pool`, which must hold
    /// `max_frame` bytes after its headroom.
    pub(super) fn open(name: &str, kind: Kind, mode: TapMode, max_frame: usize, pool: Pool) -> io::Result<Port> {
        let invalid = |msg: &str| io::Error::new(io::ErrorKind::InvalidInput, msg.to_string());
        if name.len() >= libc::IFNAMSIZ || name.contains(['/', '\0', ' ']) {
            return Err(invalid("bad interface name"));
        }
        if pool.buffer_size() - pool.headroom() <= max_frame {
            return Err(invalid("receive pool buffers too small for this mode (see pool_config)"));
        }
        let created = name.is_empty() || !Path::new("/sys/class/net").join(name).exists();
        // SAFETY: a NUL-terminated path and plain flags.
        let raw =
            cvt(unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
        // SAFETY: `raw` is a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut flags = libc::IFF_NO_PI
            | match kind {
                Kind::Tap => libc::IFF_TAP,
                Kind::Tun => libc::IFF_TUN,
            };
        if mode == TapMode::Offload {
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
        if mode == TapMode::Offload {
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
            // Offered to the kernel, these let it hand us TCP/IPv4 segments it did not cut
            // (and checksums it did not complete), and let us hand it the same; a TUN takes
            // them as a TAP does.
            let offload = (libc::TUN_F_CSUM | libc::TUN_F_TSO4) as libc::c_ulong;
            // SAFETY: TUNSETOFFLOAD takes its flags by value.
            cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, offload) })?;
        }
        Ok(Port {
            fd,
            kind,
            name,
            mode,
            created,
            pool,
            spare: None,
            spare_small: None,
            tx_since_rx: 0,
            stats: DeviceStats::default(),
            counters: TapCounters::default(),
            error: None,
        })
    }

    /// Sleep until a frame can be read or `timeout` passes (`None`: no limit). Returns
    /// whether a frame is ready; a signal ends the wait early with `Ok(false)`. An error
    /// means the device is gone (e.g. its namespace was deleted).
    pub(super) fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
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
            let msg = format!("{} {} is gone", self.kind.name(), self.name);
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, msg));
        }
        Ok(pfd.revents & libc::POLLIN != 0)
    }

    /// Read one frame into `buf` (empty, at the pool's headroom). `Ok(None)`: nothing to
    /// read. `Ok(Some(false))`: a frame was read but dropped.
    /// Read one frame: into `small` if it fits there, else into `large` (see [`Landed`]).
    /// `Ok(None)`: nothing to read.
    ///
    /// With a small buffer, one readv(2) scatters the frame over the small buffer's room and
    /// then the large buffer past the same length: a frame that fits the small buffer stays
    /// there and the large one is untouched; a longer one has its first part moved into the
    /// large buffer (an MTU's worth, under 3% of a 64 KiB frame).
    fn read_one(&mut self, small: Option<&mut PBuf>, large: &mut PBuf) -> io::Result<Option<Landed>> {
        let room = large.tailroom();
        let mut hdr = [0u8; VNET_HDR_LEN];
        let offload = self.mode == TapMode::Offload;
        let hdr_len = if offload { VNET_HDR_LEN } else { 0 };
        let Ok(data) = large.append(room) else { return Ok(Some(Landed::Dropped)) };
        let mut small = small.filter(|b| b.tailroom() < room);
        let small_room = small.as_ref().map_or(0, |b| b.tailroom());
        let first = match small.as_deref_mut() {
            Some(b) => match b.append(small_room) {
                Ok(d) => d.as_mut_ptr(),
                Err(_) => return Ok(Some(Landed::Dropped)),
            },
            None => core::ptr::null_mut(),
        };
        let mut iov = [libc::iovec { iov_base: core::ptr::null_mut(), iov_len: 0 }; 3];
        let mut k = 0;
        if offload {
            iov[k] = libc::iovec { iov_base: hdr.as_mut_ptr().cast(), iov_len: VNET_HDR_LEN };
            k += 1;
        }
        if small_room > 0 {
            iov[k] = libc::iovec { iov_base: first.cast(), iov_len: small_room };
            k += 1;
        }
        iov[k] = libc::iovec { iov_base: data[small_room..].as_mut_ptr().cast(), iov_len: room - small_room };
        k += 1;
        let n = loop {
            // SAFETY: the iovecs point at `hdr`, at the small buffer's writable tail and at
            // the large buffer's, all live and exclusively borrowed here.
            let r = unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), k as libc::c_int) };
            if r >= 0 {
                break r as usize;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(None),
                _ => return Err(e),
            }
        };
        // A frame that filled the whole buffer may have been cut short.
        if n < hdr_len || n - hdr_len >= room {
            return Ok(Some(Landed::Dropped));
        }
        let len = n - hdr_len;
        let (frame, landed) = match small.take() {
            Some(b) if len <= small_room => (b, Landed::Small),
            Some(b) => {
                data[..small_room].copy_from_slice(&b.data()[..small_room]);
                (large, Landed::Large)
            }
            None => (large, Landed::Large),
        };
        let _ = frame.truncate(len);
        if offload && !apply_vnet_header(&hdr, frame, &mut self.counters) {
            return Ok(Some(Landed::Dropped));
        }
        Ok(Some(landed))
    }

    fn write_one(&mut self, frame: &PBuf) -> io::Result<bool> {
        let mut hdr = [0u8; VNET_HDR_LEN];
        let offload = self.mode == TapMode::Offload;
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

    pub(super) fn receive(&mut self, rx: &mut Batch) -> usize {
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
            // With a small class, a frame that fits it lands there (a full small class
            // only means reading into the large buffer alone).
            let mut small = self.spare_small.take().or_else(|| self.pool.small_class()?.alloc().ok());
            let read = self.read_one(small.as_mut(), &mut buf);
            let (landed, spare) = match read {
                Ok(Some(Landed::Small)) => {
                    self.counters.rx_small += 1;
                    (small.take(), Some(buf))
                }
                Ok(Some(Landed::Large)) => (Some(buf), None),
                _ => (None, Some(buf)),
            };
            if let Some(mut b) = small {
                let _ = b.reset(self.pool.headroom());
                self.spare_small = Some(b);
            }
            if let Some(mut b) = spare {
                let _ = b.reset(self.pool.headroom());
                self.spare = Some(b);
            }
            match read {
                Ok(Some(Landed::Dropped)) => self.stats.rx_dropped += 1,
                Ok(Some(_)) => {
                    if let Some(frame) = landed {
                        self.stats.rx_frames += 1;
                        self.stats.rx_bytes += frame.len() as u64;
                        // Cannot fail: the batch is not full.
                        let _ = rx.push(frame);
                        n += 1;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.error = Some(e);
                    break;
                }
            }
        }
        n
    }

    /// Writes frames until the batch is empty, the kernel pushes back, or, every
    /// [`TX_BURST`] (64) frames since the last receive, frames are waiting to be read: then the
    /// rest stays in `tx` for the next call, after a receive. Each frame the kernel's TCP
    /// takes in may make it answer at once, into the TAP's queue toward us, which holds
    /// `txqueuelen` (1000) frames and drops the rest: thousands of writes without a read
    /// would lose the peer's ACKs. A call always writes at least `TX_BURST` frames.
    pub(super) fn transmit(&mut self, tx: &mut Batch) -> usize {
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
}

impl AsRawFd for Port {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
