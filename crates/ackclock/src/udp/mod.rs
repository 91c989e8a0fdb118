//! UDP (RFC 768): sockets bound to an address and port, a socket bound to every address and
//! port (a transparent proxy's), datagram queues, and ICMP port unreachable for datagrams no
//! socket takes, rate-limited as Linux does.
//!
//! A received datagram is queued in the frame it arrived in, its view narrowed to the
//! payload: no copy until the application's. Unless the device vouched for it, its checksum
//! is verified during that one copy ([`Udp::recv`]), as TCP's is (Dalton et al. 1993; the
//! sum fused into the copy as in Jacobson 1993): a datagram that fails is dropped and
//! counted there, and the next one is returned instead. A sent datagram is copied once into
//! a packet buffer with its checksum computed in the copy.
//!
//! A socket may be connected to one peer ([`Udp::connect`], as `connect(2)` on a Linux UDP
//! socket): it then takes only that peer's datagrams, and [`Udp::peer_addr`] names the
//! destination of a send without an address.
//!
//! IPv4 fragments are dropped and counted by the interface (there is no reassembly), so a
//! datagram larger than the path MTU cannot be received, and [`Udp::send`] refuses to send
//! one larger than the link MTU ([`UdpError::MessageTooLong`]) rather than fragment it.

mod limit;

use crate::buf::{PBuf, Pool};
use crate::iface::{Interface, TcpIngress};
use crate::phy::Batch;
use crate::stats::{Counters, DropReason};
use crate::time::Instant;
use crate::wire::icmpv4::DstUnreachable;
use crate::wire::{checksum, Icmpv4Repr, IpProtocol, UdpPacket};
use core::net::{Ipv4Addr, SocketAddrV4};
use std::collections::{HashMap, VecDeque};

pub use limit::IcmpLimiter;

/// Bytes a queued datagram is charged beyond its payload (Linux charges an skb's truesize,
/// several hundred bytes more than the data): small datagrams cannot queue without bound.
pub const DATAGRAM_OVERHEAD: usize = 256;

/// The most an ICMP error message may be, its quote of the offending datagram included
/// (RFC 1812 §4.3.2.3: as much as fits 576 bytes; Linux does the same).
const ICMP_ERROR_MAX: usize = 576;

/// UDP's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpConfig {
    /// Sockets open at once at most.
    pub max_sockets: usize,
    /// Bytes a socket's receive queue holds at most, each datagram charged its payload plus
    /// [`DATAGRAM_OVERHEAD`]; past it, datagrams are dropped and counted (Linux's
    /// `rmem_default`, 212,992, and its `RcvbufErrors`).
    pub recv_buffer: usize,
    /// ICMP errors sent per second at most, stack-wide (Linux `icmp_msgs_per_sec`, 1000).
    pub icmp_per_sec: u32,
    /// Burst of ICMP errors allowed stack-wide (Linux `icmp_msgs_burst`, 50).
    pub icmp_burst: u32,
    /// Interval between ICMP errors to one destination, in milliseconds, with a burst of six
    /// (Linux `icmp_ratelimit`, 1000, and `XRLIM_BURST_FACTOR`). 0 turns the per-destination
    /// limit off.
    pub icmp_interval_ms: u32,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            max_sockets: 1024,
            recv_buffer: 212_992,
            icmp_per_sec: 1000,
            icmp_burst: 50,
            icmp_interval_ms: 1000,
        }
    }
}

/// Why a UDP request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpError {
    /// The address and port are bound already, or no ephemeral port is free.
    AddrInUse,
    /// Every socket slot is taken, or the pool has no buffer.
    NoBufferSpace,
    /// The handle is stale.
    InvalidHandle,
    /// Port 0 as a destination, a source the socket may not use, a broadcast destination.
    InvalidArgument,
    /// The datagram does not fit the link MTU, or the path MTU a Datagram Too Big
    /// reported for its destination (no fragmentation); or such a message answered a
    /// datagram sent on this connected socket (Linux's EMSGSIZE).
    MessageTooLong,
    /// No route to the destination (off-link, no gateway).
    Unreachable,
    /// Nothing queued.
    WouldBlock,
    /// The socket is not connected: no peer to name, no address to send to.
    NotConnected,
    /// An ICMP port (or protocol) unreachable answered a datagram sent on this connected
    /// socket: nobody listens at the peer (Linux's ECONNREFUSED).
    Refused,
    /// An ICMP Destination Unreachable with a hard error other than the port's answered a
    /// datagram sent on this connected socket.
    HostUnreachable,
}

/// A socket's slot index and generation (a stale handle is detected, never aliased).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpHandle {
    pub(crate) idx: u32,
    pub(crate) generation: u32,
}

/// A datagram handed to the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes copied into the caller's buffer.
    pub len: usize,
    /// The datagram's length: more than `len` when the buffer was too small and the rest
    /// was discarded (as `MSG_TRUNC` reports).
    pub datagram_len: usize,
    /// Who sent it.
    pub from: SocketAddrV4,
    /// Where it was sent: the socket's address, or for a socket bound with
    /// [`Udp::bind_any`], the original destination.
    pub to: SocketAddrV4,
}

#[derive(Debug)]
struct Datagram {
    /// View = the payload.
    buf: PBuf,
    from: SocketAddrV4,
    to: SocketAddrV4,
    /// Sum of the pseudo-header and UDP header when the payload's checksum is still to be
    /// verified (during the copy out); `None` when verified or absent.
    header_sum: Option<u16>,
}

#[derive(Debug)]
struct Socket {
    local: SocketAddrV4,
    any: bool,
    /// The peer it is connected to: only its datagrams are taken.
    peer: Option<SocketAddrV4>,
    /// An ICMP error for a datagram sent to `peer`, reported once by the next call (Linux's
    /// `sk_err`).
    error: Option<UdpError>,
    queue: VecDeque<Datagram>,
    queued: usize,
}

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    socket: Option<Socket>,
}

/// Every UDP socket of a stack.
#[derive(Debug)]
pub struct Udp {
    config: UdpConfig,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// (address, port) to slot; address 0.0.0.0 for a socket bound to every address.
    binds: HashMap<(Ipv4Addr, u16), u32>,
    /// The socket bound to every address and port, if any.
    any: Option<u32>,
    next_port: u16,
    limiter: IcmpLimiter,
}

const EPHEMERAL: core::ops::RangeInclusive<u16> = 49152..=65535;

impl Udp {
    /// No sockets yet; `seed` picks where the ephemeral-port search starts.
    pub fn new(config: UdpConfig, seed: u64) -> Udp {
        let span = (EPHEMERAL.end() - EPHEMERAL.start()) as u64 + 1;
        Udp {
            config,
            slots: Vec::new(),
            free: Vec::new(),
            binds: HashMap::new(),
            any: None,
            next_port: EPHEMERAL.start() + (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 48) as u16 % span as u16,
            limiter: IcmpLimiter::new(config.icmp_per_sec, config.icmp_burst, config.icmp_interval_ms),
        }
    }

    /// The settings.
    pub fn config(&self) -> &UdpConfig {
        &self.config
    }

    fn socket(&self, h: UdpHandle) -> Result<&Socket, UdpError> {
        match self.slots.get(h.idx as usize) {
            Some(Slot { generation, socket: Some(s) }) if *generation == h.generation => Ok(s),
            _ => Err(UdpError::InvalidHandle),
        }
    }

    fn socket_mut(&mut self, h: UdpHandle) -> Result<&mut Socket, UdpError> {
        match self.slots.get_mut(h.idx as usize) {
            Some(Slot { generation, socket: Some(s) }) if *generation == h.generation => Ok(s),
            _ => Err(UdpError::InvalidHandle),
        }
    }

    fn install(&mut self, socket: Socket) -> Result<UdpHandle, UdpError> {
        let idx = match self.free.pop() {
            Some(i) => i,
            None if self.slots.len() < self.config.max_sockets => {
                self.slots.push(Slot::default());
                self.slots.len() as u32 - 1
            }
            None => return Err(UdpError::NoBufferSpace),
        };
        let slot = &mut self.slots[idx as usize];
        slot.socket = Some(socket);
        Ok(UdpHandle { idx, generation: slot.generation })
    }

    /// Bind to `local` (address 0.0.0.0: every address of the stack; port 0: an ephemeral
    /// port).
    pub fn bind(&mut self, local: SocketAddrV4) -> Result<UdpHandle, UdpError> {
        if self.free.is_empty() && self.slots.len() >= self.config.max_sockets {
            return Err(UdpError::NoBufferSpace);
        }
        let port = match local.port() {
            0 => self.ephemeral(*local.ip())?,
            p => p,
        };
        let key = (*local.ip(), port);
        // A port bound on every address conflicts with one bound on a single address, both
        // ways, as without SO_REUSEADDR.
        let clash = self.binds.contains_key(&key)
            || if local.ip().is_unspecified() {
                self.binds.keys().any(|&(_, p)| p == port)
            } else {
                self.binds.contains_key(&(Ipv4Addr::UNSPECIFIED, port))
            };
        if clash {
            return Err(UdpError::AddrInUse);
        }
        let h = self.install(Socket {
            local: SocketAddrV4::new(key.0, port),
            any: false,
            peer: None,
            error: None,
            queue: VecDeque::new(),
            queued: 0,
        })?;
        self.binds.insert(key, h.idx);
        Ok(h)
    }

    /// Bind to every address and port no other socket takes: with
    /// [`InterfaceConfig::any_destination`](crate::iface::InterfaceConfig::any_destination),
    /// a transparent proxy's socket. [`Received::to`] is each datagram's original
    /// destination, and [`send`](Self::send) may send from any address and port.
    pub fn bind_any(&mut self) -> Result<UdpHandle, UdpError> {
        if self.any.is_some() {
            return Err(UdpError::AddrInUse);
        }
        let h = self.install(Socket {
            local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
            any: true,
            peer: None,
            error: None,
            queue: VecDeque::new(),
            queued: 0,
        })?;
        self.any = Some(h.idx);
        Ok(h)
    }

    fn ephemeral(&mut self, addr: Ipv4Addr) -> Result<u16, UdpError> {
        let span = (EPHEMERAL.end() - EPHEMERAL.start()) as u32 + 1;
        for _ in 0..span {
            let p = self.next_port;
            self.next_port = if p == *EPHEMERAL.end() { *EPHEMERAL.start() } else { p + 1 };
            let taken = self.binds.contains_key(&(addr, p)) || self.binds.contains_key(&(Ipv4Addr::UNSPECIFIED, p));
            let taken = taken || (addr.is_unspecified() && self.binds.keys().any(|&(_, q)| q == p));
            if !taken {
                return Ok(p);
            }
        }
        Err(UdpError::AddrInUse)
    }

    /// Close: the binding is released and queued datagrams are dropped.
    pub fn close(&mut self, h: UdpHandle) -> Result<(), UdpError> {
        self.socket(h)?;
        let slot = &mut self.slots[h.idx as usize];
        let s = slot.socket.take().expect("checked above");
        slot.generation = slot.generation.wrapping_add(1);
        if s.any {
            self.any = None;
        } else {
            self.binds.remove(&(*s.local.ip(), s.local.port()));
        }
        self.free.push(h.idx);
        Ok(())
    }

    /// Connect to `peer`, as `connect(2)` on a Linux UDP socket (`ip4_datagram_connect`):
    /// from now on the socket takes only datagrams whose source is `peer`, and a send
    /// without an address goes to it. A datagram from anyone else goes where it would if
    /// the socket were not there (Linux's `udp_lib_lookup` scores a connected socket above
    /// an unconnected one only for its peer's datagrams): to the socket of
    /// [`bind_any`](Self::bind_any), if there is one, else it draws ICMP port unreachable,
    /// rate-limited as for any closed port. (No other socket can share the port: binds
    /// clash without `SO_REUSEADDR`, as on Linux.)
    ///
    /// Datagrams already queued stay queued, whoever sent them, as on Linux: read them
    /// (or close and rebind) to start clean. A socket bound to 0.0.0.0 becomes bound to
    /// the interface's address, the source its datagrams go out from, as Linux sets the
    /// socket's address from the route: [`local_addr`](Self::local_addr) names it. It may
    /// be connected again, to another peer; there is no way back to unconnected (std has
    /// none either).
    ///
    /// `InvalidArgument` for port 0, 0.0.0.0 or the broadcast address, none of which can be
    /// a peer here (Linux accepts port 0 and fails the sends later, takes 0.0.0.0 for the
    /// host itself, and refuses a broadcast without `SO_BROADCAST`), and for a socket of
    /// [`bind_any`](Self::bind_any), which has no address of its own to connect from. `Unreachable` when there is no route to `peer` (Linux's
    /// `ENETUNREACH`).
    pub fn connect(&mut self, h: UdpHandle, peer: SocketAddrV4, iface: &Interface) -> Result<(), UdpError> {
        let s = self.socket(h)?;
        if s.any || peer.port() == 0 || peer.ip().is_unspecified() || peer.ip().is_broadcast() {
            return Err(UdpError::InvalidArgument);
        }
        if !iface.routes(*peer.ip()) {
            return Err(UdpError::Unreachable);
        }
        let old = s.local;
        if old.ip().is_unspecified() {
            // No other socket holds the port on any address (the bind would have
            // clashed), so the specific key is free.
            self.binds.remove(&(*old.ip(), old.port()));
            self.binds.insert((iface.addr(), old.port()), h.idx);
        }
        let s = self.socket_mut(h)?;
        if old.ip().is_unspecified() {
            s.local = SocketAddrV4::new(iface.addr(), old.port());
        }
        s.peer = Some(peer);
        Ok(())
    }

    /// The peer the socket is connected to ([`connect`](Self::connect)); `NotConnected`
    /// if none, as `getpeername(2)` gives `ENOTCONN`.
    pub fn peer_addr(&self, h: UdpHandle) -> Result<SocketAddrV4, UdpError> {
        self.socket(h)?.peer.ok_or(UdpError::NotConnected)
    }

    /// The bound address (0.0.0.0:0 for [`bind_any`](Self::bind_any)).
    pub fn local_addr(&self, h: UdpHandle) -> Result<SocketAddrV4, UdpError> {
        Ok(self.socket(h)?.local)
    }

    /// Datagrams queued (some may still fail their checksum when read).
    pub fn queued(&self, h: UdpHandle) -> Result<usize, UdpError> {
        Ok(self.socket(h)?.queue.len())
    }

    /// Whether an ICMP error waits to be reported by the next call.
    pub fn error_pending(&self, h: UdpHandle) -> Result<bool, UdpError> {
        Ok(self.socket(h)?.error.is_some())
    }

    /// An ICMP Destination Unreachable quoting a datagram we sent. As Linux without
    /// `IP_RECVERR` (`__udp4_lib_err`): only a socket connected to the quoted destination
    /// hears of it, and only of a hard error (RFC 1122 §4.1.3.3 asks that UDP pass ICMP
    /// errors up; an unconnected socket could not tell which of its peers one concerns):
    /// its next receive or send fails with it, once. Returns whether a socket took it.
    pub(crate) fn icmp_error(&mut self, msg: crate::iface::Unreachable) -> bool {
        let Some((err, true)) = msg.error() else { return false };
        let Some(s) = self.connected(msg.local, msg.remote) else { return false };
        s.error = Some(match err {
            crate::iface::UnreachableError::Net => UdpError::Unreachable,
            crate::iface::UnreachableError::Host => UdpError::HostUnreachable,
            crate::iface::UnreachableError::Refused => UdpError::Refused,
        });
        true
    }

    /// A Datagram Too Big quoting a datagram we sent. Believed only for a socket connected
    /// to the quoted destination (RFC 8085 §5.2: check that the message answers traffic
    /// this socket sent; UDP has no sequence number, so the connected pair is the check,
    /// stricter than Linux's `__udp4_lib_err`, which believes any bound socket, so that a
    /// message forged against a well-known server port cannot shrink the path, and the
    /// TCP connections, to any destination). That socket fails its next call with
    /// [`UdpError::MessageTooLong`] once (EMSGSIZE). Returns whether it was believed: the
    /// caller keeps the destination's path MTU.
    pub(crate) fn too_big(&mut self, msg: crate::iface::TooBig) -> bool {
        let Some(s) = self.connected(msg.local, msg.remote) else { return false };
        s.error = Some(UdpError::MessageTooLong);
        true
    }

    /// The socket bound at `local` and connected to `remote`, which an ICMP error quoting
    /// a datagram between the two concerns (a connect binds the interface's address, so
    /// the exact pair finds it).
    fn connected(&mut self, local: SocketAddrV4, remote: SocketAddrV4) -> Option<&mut Socket> {
        let &idx = self.binds.get(&(*local.ip(), local.port()))?;
        self.slots.get_mut(idx as usize)?.socket.as_mut().filter(|s| s.peer == Some(remote))
    }

    /// A received datagram (its view the UDP header and what follows, up to the IP total
    /// length): queue it for its socket, or answer with ICMP port unreachable.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn input(
        &mut self,
        now: Instant,
        ing: TcpIngress,
        ip_header_len: usize,
        mut frame: PBuf,
        iface: &mut Interface,
        pool: &Pool,
        tx: &mut Batch,
        counters: &mut Counters,
    ) {
        let (src, dst) = (ing.src(), ing.dst());
        let (sport, dport, len, field, header_sum) = {
            let Ok(packet) = UdpPacket::new_checked(frame.data()) else {
                counters.drop(DropReason::Malformed);
                return;
            };
            let len = packet.len();
            let ph = checksum::pseudo_header(src, dst, IpProtocol::UDP.0, len);
            (
                packet.src_port(),
                packet.dst_port(),
                len as usize,
                packet.checksum(),
                checksum::add(ph, packet.header_sum()),
            )
        };
        counters.udp_in += 1;
        let bound = self
            .binds
            .get(&(dst, dport))
            .or_else(|| self.binds.get(&(Ipv4Addr::UNSPECIFIED, dport)).filter(|_| dst == iface.addr()))
            .copied();
        // A connected socket takes only its peer's datagrams; anyone else's go on as if the
        // port were not bound (see `connect`). One field compare, no further lookup.
        let from = SocketAddrV4::new(src, sport);
        let slot = match bound {
            Some(i) if self.slots[i as usize].socket.as_ref().is_some_and(|s| s.peer.is_none_or(|p| p == from)) => {
                Some(i)
            }
            _ => self.any,
        };
        // Unless the device vouched for it (or the sender sent none), the checksum is
        // verified later, in the copy to the application.
        let pending = (field != 0 && !ing.checksum_ok).then_some(header_sum);
        let Some(idx) = slot else {
            // Linux verifies before answering: a corrupted datagram earns no ICMP error.
            let data = &frame.data()[crate::wire::udp::HEADER_LEN..len];
            if pending.is_some_and(|h| checksum::add(h, checksum::sum(data)) != 0xffff) {
                counters.drop(DropReason::BadChecksum);
                return;
            }
            counters.drop(DropReason::UdpNoPort);
            self.port_unreachable(now, src, dst, ip_header_len, frame, iface, pool, tx, counters);
            return;
        };
        let Some(Slot { socket: Some(s), .. }) = self.slots.get_mut(idx as usize) else { return };
        let charge = len - crate::wire::udp::HEADER_LEN + DATAGRAM_OVERHEAD;
        if s.queued + charge > self.config.recv_buffer {
            counters.drop(DropReason::UdpRcvbuf);
            return;
        }
        // Keep exactly the payload: bytes past the length field are not the datagram's.
        if frame.narrow(crate::wire::udp::HEADER_LEN, len - crate::wire::udp::HEADER_LEN).is_err() {
            counters.drop(DropReason::Malformed);
            return;
        }
        s.queued += charge;
        s.queue.push_back(Datagram { buf: frame, from, to: SocketAddrV4::new(dst, dport), header_sum: pending });
    }

    /// ICMP destination unreachable, code 3 (RFC 1122 §4.1.3.1), quoting the datagram's IP
    /// header and as much of it as fits 576 bytes. Never for a broadcast or multicast
    /// destination (RFC 1122 §3.2.2), and only as the rate limits allow.
    #[allow(clippy::too_many_arguments)]
    fn port_unreachable(
        &mut self,
        now: Instant,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ip_header_len: usize,
        mut frame: PBuf,
        iface: &mut Interface,
        pool: &Pool,
        tx: &mut Batch,
        counters: &mut Counters,
    ) {
        if dst.is_broadcast() || dst.is_multicast() || src.is_broadcast() || src.is_multicast() || src.is_unspecified()
        {
            return;
        }
        let directed_broadcast = {
            let c = iface.config();
            let mask = u32::MAX.checked_shl(32 - c.prefix_len as u32).unwrap_or(0);
            c.prefix_len < 31 && u32::from(dst) | mask == u32::MAX && u32::from(dst) & mask == u32::from(c.addr) & mask
        };
        if directed_broadcast {
            return;
        }
        if !self.limiter.allow(now, src) {
            counters.icmp_rate_limited += 1;
            return;
        }
        // The IP header is still in front of the view: take it back.
        if frame.prepend(ip_header_len).is_err() {
            return;
        }
        let quoted = frame.len().min(ICMP_ERROR_MAX - 20 - crate::wire::icmpv4::HEADER_LEN);
        let reply = Icmpv4Repr::DstUnreachable {
            reason: DstUnreachable::PORT,
            next_hop_mtu: 0,
            header: &frame.data()[..quoted],
        };
        // From the address the datagram went to (with any_destination, the host it meant).
        if iface.send_icmp(now, &reply, dst, src, pool, tx, counters) {
            counters.icmp_unreachable_sent += 1;
        }
    }

    /// Copy the next good datagram into `buf` (the rest of a longer one is discarded),
    /// verifying its checksum during the copy; one that fails is dropped and counted, and
    /// the next is tried.
    pub fn recv(&mut self, h: UdpHandle, buf: &mut [u8], counters: &mut Counters) -> Result<Received, UdpError> {
        let s = self.socket_mut(h)?;
        if let Some(e) = s.error.take() {
            return Err(e);
        }
        while let Some(d) = s.queue.pop_front() {
            s.queued -= d.buf.len() + DATAGRAM_OVERHEAD;
            let data = d.buf.data();
            let n = data.len().min(buf.len());
            let good = match d.header_sum {
                None => {
                    buf[..n].copy_from_slice(&data[..n]);
                    true
                }
                Some(header_sum) => {
                    let head = checksum::copy_and_sum(&mut buf[..n], &data[..n]);
                    let tail = checksum::sum(&data[n..]);
                    checksum::add(header_sum, checksum::add_at(head, tail, n)) == 0xffff
                }
            };
            if !good {
                counters.drop(DropReason::BadChecksum);
                continue;
            }
            counters.udp_delivered += 1;
            return Ok(Received { len: n, datagram_len: data.len(), from: d.from, to: d.to });
        }
        Err(UdpError::WouldBlock)
    }

    /// Send `data` to `to` from `from` (`None`: the socket's own address and port, with
    /// 0.0.0.0 meaning the interface's). Only a socket bound with
    /// [`bind_any`](Self::bind_any) may name another source. One copy, the checksum
    /// computed in it.
    #[allow(clippy::too_many_arguments)]
    pub fn send(
        &mut self,
        now: Instant,
        h: UdpHandle,
        data: &[u8],
        from: Option<SocketAddrV4>,
        to: SocketAddrV4,
        iface: &mut Interface,
        pool: &Pool,
        tx: &mut Batch,
        counters: &mut Counters,
    ) -> Result<usize, UdpError> {
        if let Some(e) = self.socket_mut(h)?.error.take() {
            return Err(e);
        }
        let s = self.socket(h)?;
        let own =
            SocketAddrV4::new(if s.local.ip().is_unspecified() { iface.addr() } else { *s.local.ip() }, s.local.port());
        let from = match from {
            None if s.any => return Err(UdpError::InvalidArgument),
            None => own,
            Some(f) if s.any || f == own => f,
            Some(_) => return Err(UdpError::InvalidArgument),
        };
        if to.port() == 0 || from.port() == 0 || to.ip().is_broadcast() || to.ip().is_unspecified() {
            return Err(UdpError::InvalidArgument);
        }
        // No fragmentation, and DF set: a datagram larger than the path MTU would be lost
        // on the way, so it fails here (Linux's `IP_PMTUDISC_DO`), against the link's MTU
        // or a smaller one a Datagram Too Big taught for the destination.
        // No estimate is below the floor: a datagram that short looks nothing up.
        let total = data.len() + crate::wire::udp::HEADER_LEN + 20;
        let floor = crate::iface::pmtu::MIN_PMTU as usize;
        if total > iface.capabilities().mtu || (total > floor && total > iface.path_mtu(*to.ip())) {
            return Err(UdpError::MessageTooLong);
        }
        let mut buf = pool.alloc().map_err(|_| {
            counters.drop(DropReason::NoBuffer);
            UdpError::NoBufferSpace
        })?;
        let data_sum = buf.append_copy_sum(data).map_err(|_| UdpError::MessageTooLong)?;
        let len = (data.len() + crate::wire::udp::HEADER_LEN) as u16;
        let header = buf.prepend(crate::wire::udp::HEADER_LEN).map_err(|_| UdpError::NoBufferSpace)?;
        let mut packet = UdpPacket::new_unchecked(header);
        packet.set_src_port(from.port());
        packet.set_dst_port(to.port());
        packet.set_len(len);
        packet.set_checksum(0);
        let ph = checksum::pseudo_header(*from.ip(), *to.ip(), IpProtocol::UDP.0, len);
        let sum = checksum::add(checksum::add(ph, packet.header_sum()), data_sum);
        // A computed 0 is sent as all ones: 0 means "no checksum" (RFC 768).
        let field = match checksum::finish(sum) {
            0 => 0xffff,
            f => f,
        };
        packet.set_checksum(field);
        match iface.encapsulate(now, &mut buf, *from.ip(), *to.ip(), IpProtocol::UDP, &mut None) {
            Ok(crate::iface::NextHop::Unreachable) => Err(UdpError::Unreachable),
            Ok(next) => {
                counters.udp_out += 1;
                iface.link_output(now, buf, next, pool, tx, counters);
                Ok(data.len())
            }
            Err(_) => Err(UdpError::NoBufferSpace),
        }
    }
}
