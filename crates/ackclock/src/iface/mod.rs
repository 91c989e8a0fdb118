//! The interface layer: Ethernet, ARP, IPv4 and ICMP, and demultiplexing to TCP.
//!
//! Received frames are checked link layer first, then IPv4, then trimmed in place so that
//! the view handed to TCP is exactly the TCP segment (the IPv4 total length decides, so
//! Ethernet padding never reaches TCP). Outgoing IP packets get their IPv4 and Ethernet
//! headers written into the headroom of the same buffer.
//!
//! On a device without a link header ([`Capabilities::ethernet`] false: a TUN) a frame is an
//! IPv4 packet from its first byte. There is no Ethernet header to check or write and no
//! ARP: the link is point to point, so every destination is reached through it, the prefix
//! and gateway route nothing, and a frame goes to the device as soon as it is built.

pub mod arp;
mod icmp;
pub mod pmtu;
mod prebuilt;

pub use icmp::{TooBig, Unreachable, UnreachableError};
pub use prebuilt::Prebuilt;

pub use arp::{ArpCache, ArpConfig, CachedHop};
pub use pmtu::{PathMtuCache, PathMtuConfig};

use crate::buf::{BufError, Flags, PBuf, Pool};
use crate::phy::{Batch, Capabilities};
use crate::stats::{Counters, DropReason};
use crate::time::Instant;
use crate::wire::{
    checksum, ethernet, ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr,
    IpProtocol, Ipv4Packet, Ipv4Repr,
};
use core::net::Ipv4Addr;

/// Addresses and settings of one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterfaceConfig {
    /// The interface's Ethernet address: the source of its frames and the answer to ARP requests for `addr`.
    pub mac: EthernetAddress,
    /// The interface's IPv4 address.
    pub addr: Ipv4Addr,
    /// Length of the network prefix in bits (0 to 32); destinations inside it are on the link.
    pub prefix_len: u8,
    /// Next hop for destinations outside the prefix; without one they are unreachable.
    pub gateway: Option<Ipv4Addr>,
    /// TTL of sent packets (Linux default 64).
    pub ttl: u8,
    /// Settings of the neighbour (ARP) cache.
    pub arp: ArpConfig,
    /// Settings of the path MTU cache (RFC 1191 §5, §6.3).
    pub path_mtu: PathMtuConfig,
    /// Take TCP segments addressed to any unicast IPv4 address, not only `addr`, and answer
    /// from the address they were sent to: a transparent proxy's interface (tun2socks-style),
    /// where the host routes whole networks to the stack. ICMP and ARP stay `addr`'s.
    pub any_destination: bool,
}

impl InterfaceConfig {
    /// An interface with address `addr/prefix_len` and a locally administered MAC derived
    /// from the address.
    pub fn new(addr: Ipv4Addr, prefix_len: u8) -> InterfaceConfig {
        let o = addr.octets();
        InterfaceConfig {
            mac: EthernetAddress([0x02, 0xac, o[0], o[1], o[2], o[3]]),
            addr,
            prefix_len: prefix_len.min(32),
            gateway: None,
            ttl: 64,
            arp: ArpConfig::default(),
            path_mtu: PathMtuConfig::default(),
            any_destination: false,
        }
    }
}

/// Where an outgoing frame goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextHop {
    /// The destination MAC is written; the frame can go to the device.
    Resolved,
    /// The MAC of this address is unknown: park the frame and ask.
    Unresolved(Ipv4Addr),
    /// No route: outside the prefix and no gateway.
    Unreachable,
}

/// A received TCP segment, after link and IP processing: its addresses (the frame's view
/// is now exactly the TCP segment; the frame stays where it is, not moved through layers).
#[derive(Debug, Clone, Copy)]
pub struct TcpIngress {
    /// Source then destination address, as on the wire (the connection cache's key).
    addrs: [u8; 8],
    /// Length of the TCP segment.
    pub len: u32,
    /// The device vouched for the transport checksum.
    pub checksum_ok: bool,
}

/// What [`Interface::ingress`] hands up to a transport: the frame's view is then exactly
/// the segment or datagram.
#[derive(Debug, Clone, Copy)]
pub enum Ingress {
    /// A TCP segment.
    Tcp(TcpIngress),
    /// A UDP datagram: its addresses, length and checksum state (the same pseudo-header
    /// facts a TCP segment has), and the length of the IPv4 header in front of it, which
    /// an ICMP error quotes.
    Udp(TcpIngress, usize),
    /// An ICMP Datagram Too Big quoting one of our TCP segments or UDP datagrams (path MTU
    /// discovery, RFC 1191).
    TooBig(TooBig),
    /// Any other ICMP Destination Unreachable quoting one of our TCP segments or UDP
    /// datagrams.
    Unreachable(Unreachable),
}

/// Where the TCP segment of a frame that passed [`Interface::common_tcp`] starts: after an
/// untagged Ethernet header and a 20-byte IPv4 header.
pub(crate) const COMMON_TCP_OFFSET: usize = 14 + 20;

/// Where the TCP segment of a packet that passed [`Interface::common_tcp_ip`] starts: after
/// a 20-byte IPv4 header, on a link without a link header.
pub(crate) const COMMON_TCP_OFFSET_IP: usize = 20;
/// Where [`Interface::common_tcp_tagged`]'s TCP segment starts: behind an 802.1Q tag.
pub(crate) const COMMON_TCP_OFFSET_TAGGED: usize = 14 + 4 + 20;

/// Whether the 20-byte IPv4 header that ends `frame` (behind an untagged Ethernet header, or
/// alone) verifies: its five words, summed in native order (RFC 1071 §2(B): the
/// ones'-complement sum does not depend on byte order), fold to all ones.
#[inline(always)]
pub(crate) fn ipv4_header_ok<const N: usize>(frame: &[u8; N]) -> bool {
    let w = |i: usize| u32::from_ne_bytes([frame[i], frame[i + 1], frame[i + 2], frame[i + 3]]) as u64;
    let o = N - 20;
    checksum::fold(w(o) + w(o + 4) + w(o + 8) + w(o + 12) + w(o + 16)) == 0xffff
}

/// What the device vouched for on `frame` (`rx_checksum`: it verifies every frame): (the
/// IPv4 header and the transport checksum are verified, the transport checksum is good).
#[inline(always)]
pub(crate) fn checksum_state_of(rx_checksum: bool, frame: &PBuf) -> (bool, bool) {
    let flags = frame.meta.flags;
    let verified = rx_checksum || flags.contains(Flags::CSUM_VERIFIED);
    (verified, verified || flags.contains(Flags::CSUM_PARTIAL))
}

impl TcpIngress {
    /// The segment from `src` to `dst`, `len` bytes long, with `checksum_ok` if its checksum is already verified.
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr, len: u32, checksum_ok: bool) -> TcpIngress {
        let (s, d) = (src.octets(), dst.octets());
        TcpIngress { addrs: [s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3]], len, checksum_ok }
    }

    /// Source address of the segment's IPv4 header.
    pub fn src(&self) -> Ipv4Addr {
        let a = &self.addrs;
        Ipv4Addr::new(a[0], a[1], a[2], a[3])
    }

    /// Destination address of the segment's IPv4 header.
    pub fn dst(&self) -> Ipv4Addr {
        let a = &self.addrs;
        Ipv4Addr::new(a[4], a[5], a[6], a[7])
    }

    /// Both addresses in one word, for the connection cache.
    #[inline(always)]
    pub(crate) fn addr_key(&self) -> u64 {
        u64::from_ne_bytes(self.addrs)
    }
}

/// The interface.
#[derive(Debug)]
pub struct Interface {
    config: InterfaceConfig,
    caps: Capabilities,
    mask: u32,
    /// Our MAC and address as `common_tcp` loads them from a frame.
    mac_word: u64,
    addr_word: u32,
    /// The neighbour cache that resolves next hops to Ethernet addresses.
    pub(crate) arp: ArpCache,
    /// What Datagram Too Big messages taught per destination.
    pub(crate) pmtu: PathMtuCache,
    ip_ident: u16,
}

impl Interface {
    /// An interface with these settings, on a device with these capabilities.
    pub fn new(config: InterfaceConfig, caps: Capabilities) -> Interface {
        let mask = if config.prefix_len == 0 { 0 } else { u32::MAX << (32 - config.prefix_len as u32) };
        let m = config.mac.0;
        // Without a link header no frame carries our MAC: a word no 48-bit load can equal
        // makes `common_tcp` refuse every frame, at no cost on Ethernet (the stack then tries
        // `common_tcp_ip`).
        let mac_word = match caps.ethernet {
            true => {
                u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as u64 | (u16::from_ne_bytes([m[4], m[5]]) as u64) << 32
            }
            false => u64::MAX,
        };
        let addr_word = u32::from_ne_bytes(config.addr.octets());
        Interface {
            config,
            caps,
            mask,
            mac_word,
            addr_word,
            arp: ArpCache::new(config.arp),
            pmtu: PathMtuCache::new(config.path_mtu),
            ip_ident: 0,
        }
    }

    /// The interface's settings.
    pub fn config(&self) -> &InterfaceConfig {
        &self.config
    }

    /// The ARP cache, to look at (entries, frames parked for a next hop, counters).
    pub fn arp(&self) -> &ArpCache {
        &self.arp
    }

    /// The path MTU cache: what Datagram Too Big messages taught about each destination.
    pub fn path_mtus(&self) -> &PathMtuCache {
        &self.pmtu
    }

    /// The IPv4 MTU towards `dst`: the link's, or less while a Datagram Too Big's estimate
    /// for it holds (RFC 1191).
    pub fn path_mtu(&self, dst: Ipv4Addr) -> usize {
        let link = self.caps.mtu;
        self.pmtu.get(dst).map_or(link, |m| link.min(m as usize))
    }

    /// A believed Datagram Too Big reported `mtu` towards `dst`: kept as the destination's
    /// estimate, floored at [`pmtu::MIN_PMTU`], if below the link's MTU (see
    /// [`PathMtuCache::learn`]). Returns whether an estimate changed.
    pub(crate) fn learn_path_mtu(&mut self, now: Instant, dst: Ipv4Addr, mtu: u16) -> bool {
        let mtu = mtu.max(pmtu::MIN_PMTU);
        (mtu as usize) < self.caps.mtu && self.pmtu.learn(now, dst, mtu)
    }

    /// A permanent ARP entry: `ip` is at `mac` and is never asked for (as `ip neigh add ...
    /// nud permanent`), for a peer whose address is known, or a link that does no ARP.
    pub fn insert_static_neighbor(&mut self, ip: Ipv4Addr, mac: EthernetAddress) {
        self.arp.insert_static(ip, mac);
    }

    /// The capabilities of the device below the interface.
    pub fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// The interface's IPv4 address.
    pub fn addr(&self) -> Ipv4Addr {
        self.config.addr
    }

    /// The interface's Ethernet address.
    pub fn mac(&self) -> EthernetAddress {
        self.config.mac
    }

    /// Whether a packet to `ip` has somewhere to go: over a link without a link header
    /// (every destination), on the link, or through the default gateway.
    pub fn routes(&self, ip: Ipv4Addr) -> bool {
        !self.caps.ethernet || self.on_link(ip) || self.config.gateway.is_some()
    }

    fn on_link(&self, ip: Ipv4Addr) -> bool {
        (ip.to_bits() ^ self.config.addr.to_bits()) & self.mask == 0
    }

    /// Whether `ip` is the directed broadcast address of the interface's subnet
    /// ({<Network-number>, -1}, RFC 1122 §3.2.1.3 (d)); a /31 or /32 has none.
    #[inline]
    fn is_subnet_broadcast(&self, ip: Ipv4Addr) -> bool {
        self.config.prefix_len < 31 && self.on_link(ip) && ip.to_bits() | self.mask == u32::MAX
    }

    /// Whether `src` cannot be the source address of a datagram from another host (RFC 1122
    /// §3.2.1.3: {0, 0} and {0, Host} only while a host learns its address, {127, any}
    /// never outside a host, {-1, -1} and the directed broadcast never as a source; class
    /// D and E are no host's). Such datagrams MUST be silently discarded (§3.2.1.3, §4.1.3.6,
    /// §4.2.3.10), and never answered with an ICMP error (§3.2.2).
    #[inline]
    pub(crate) fn martian_source(&self, src: Ipv4Addr) -> bool {
        let first = src.octets()[0];
        first == 0 || first == 127 || first >= 224 || self.is_subnet_broadcast(src)
    }

    /// Process a received frame. For a TCP segment or a UDP datagram, the frame's view is
    /// trimmed to it and its addresses are returned for the transport; ARP and ICMP are
    /// answered here (replies go into `tx`); anything else is counted and dropped.
    #[inline]
    pub fn ingress(
        &mut self,
        now: Instant,
        frame: &mut PBuf,
        pool: &Pool,
        tx: &mut Batch,
        counters: &mut Counters,
    ) -> Option<Ingress> {
        if !self.caps.ethernet {
            return self.ip_ingress(now, frame, pool, tx, counters);
        }
        let (ethertype, eth_len, link_broadcast) = {
            let Ok(eth) = EthernetFrame::new_checked(frame.data()) else {
                counters.drop(DropReason::Malformed);
                return None;
            };
            let dst = eth.dst_addr();
            if dst != self.config.mac && !dst.is_broadcast() {
                counters.drop(DropReason::NotForUs);
                return None;
            }
            (eth.ethertype(), eth.header_len(), dst.is_broadcast())
        };
        match ethertype {
            // RFC 1122 §3.3.6: a datagram received via a link-layer broadcast that is not to
            // an IP broadcast or multicast address SHOULD be silently discarded; the stack
            // takes no IP broadcast or multicast, so every one in such a frame goes.
            EtherType::IPV4 if link_broadcast => {
                counters.drop(DropReason::NotForUs);
                None
            }
            EtherType::IPV4 => self.ipv4_ingress(now, frame, eth_len, pool, tx, counters),
            EtherType::ARP => {
                let _ = frame.trim_front(eth_len);
                self.arp_ingress(now, frame, pool, tx, counters);
                None
            }
            _ => {
                counters.drop(DropReason::UnknownProtocol);
                None
            }
        }
    }

    /// A frame on a link without a link header: an IPv4 packet, or dropped (an IPv6 packet
    /// a TUN hands over is counted as an unknown protocol).
    fn ip_ingress(
        &mut self,
        now: Instant,
        frame: &mut PBuf,
        pool: &Pool,
        tx: &mut Batch,
        counters: &mut Counters,
    ) -> Option<Ingress> {
        match frame.data().first().map(|b| b >> 4) {
            Some(4) => self.ipv4_ingress(now, frame, 0, pool, tx, counters),
            Some(_) => {
                counters.drop(DropReason::UnknownProtocol);
                None
            }
            None => {
                counters.drop(DropReason::Malformed);
                None
            }
        }
    }

    /// Whether TCP segments (and UDP datagrams) to `dst`, not our address, are ours: with
    /// `any_destination` (a transparent proxy), to any unicast address.
    #[inline]
    fn takes_tcp_for(&self, dst: Ipv4Addr) -> bool {
        self.config.any_destination
            && !dst.is_broadcast()
            && !dst.is_multicast()
            && !dst.is_unspecified()
            && !self.is_subnet_broadcast(dst)
    }

    #[inline(always)]
    fn checksum_state(&self, frame: &PBuf) -> (bool, bool) {
        checksum_state_of(self.caps.rx_checksum, frame)
    }

    /// The common frame in one pass over its first 34 bytes: untagged IPv4 with a 20-byte
    /// header, to our MAC and our address (or, with `any_destination`, any unicast one),
    /// TCP with at least a 20-byte header, not a fragment, total length within the frame,
    /// header checksum good. It only accepts, with the outcome the full checks would have;
    /// anything else (broadcast, VLAN, IP options, a bad sum, ...) goes to them, and they
    /// decide and count the drop. The TCP segment starts at byte [`COMMON_TCP_OFFSET`].
    #[inline(always)]
    pub(crate) fn common_tcp(&self, frame: &PBuf) -> Option<TcpIngress> {
        let data = frame.data();
        let h = data.first_chunk::<34>()?;
        // Whole words in wire order, compared with constants in wire order: no byte swaps.
        let ne16 = |i: usize| u16::from_ne_bytes([h[i], h[i + 1]]);
        let ne32 = |i: usize| u32::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let mac = ne32(0) as u64 | (ne16(4) as u64) << 32;
        // Bytes 12..16: EtherType IPv4, version 4, a 20-byte header (the DSCP/ECN byte is free).
        let type_ver = ne32(12) & u32::from_ne_bytes([0xff, 0xff, 0xff, 0]);
        let frag = ne16(20) & u16::from_ne_bytes([0x3f, 0xff]); // MF and offset (is_fragment)
        let total_len = u16::from_be_bytes([h[16], h[17]]) as usize;
        if mac != self.mac_word
            || type_ver != u32::from_ne_bytes([0x08, 0x00, 0x45, 0])
            || h[23] != IpProtocol::TCP.0
            || frag != 0
            || total_len < 40
            || total_len > data.len() - 14
        {
            return None;
        }
        let dst = ne32(30);
        if dst != self.addr_word && !self.takes_tcp_for(Ipv4Addr::from(dst.to_ne_bytes())) {
            return None;
        }
        let (verified, checksum_ok) = self.checksum_state(frame);
        if !verified && !ipv4_header_ok(h) {
            return None;
        }
        // The IPv4 header's last eight bytes: source and destination address.
        let addrs = *h.last_chunk::<8>()?;
        Some(TcpIngress { addrs, len: total_len as u32 - 20, checksum_ok })
    }

    /// [`common_tcp`](Self::common_tcp) on a link without a link header: the same checks on
    /// the first 20 bytes, an IPv4 header at offset 0 (no MAC, no EtherType). The TCP segment
    /// starts at byte [`COMMON_TCP_OFFSET_IP`].
    #[inline(always)]
    pub(crate) fn common_tcp_ip(&self, frame: &PBuf) -> Option<TcpIngress> {
        self.common_ip(frame.data(), frame)
    }

    /// [`common_tcp`](Self::common_tcp) for a frame with an 802.1Q tag (any VLAN: the stack
    /// takes tagged frames as the full path does), for receive aggregation: the IPv4 checks
    /// start behind the tag, so the total length is compared with the frame without its
    /// four bytes (the length check the Myri10GE LRO patch fixed, Gallatin 2008). The TCP
    /// segment starts at byte [`COMMON_TCP_OFFSET_TAGGED`].
    #[inline(never)]
    pub(crate) fn common_tcp_tagged(&self, frame: &PBuf) -> Option<TcpIngress> {
        let data = frame.data();
        let h = data.first_chunk::<18>()?;
        let mac = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as u64 | (u16::from_ne_bytes([h[4], h[5]]) as u64) << 32;
        if mac != self.mac_word || h[12..14] != [0x81, 0x00] || h[16..18] != [0x08, 0x00] {
            return None;
        }
        self.common_ip(data.get(18..)?, frame)
    }

    /// The IPv4 part of the common checks, on `ip` (the packet from its first byte, to the
    /// end of the frame).
    #[inline(always)]
    fn common_ip(&self, ip: &[u8], frame: &PBuf) -> Option<TcpIngress> {
        let h = ip.first_chunk::<20>()?;
        let ne16 = |i: usize| u16::from_ne_bytes([h[i], h[i + 1]]);
        let ne32 = |i: usize| u32::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let frag = ne16(6) & u16::from_ne_bytes([0x3f, 0xff]); // MF and offset (is_fragment)
        let total_len = u16::from_be_bytes([h[2], h[3]]) as usize;
        if h[0] != 0x45 || h[9] != IpProtocol::TCP.0 || frag != 0 || total_len < 40 || total_len > ip.len() {
            return None;
        }
        let dst = ne32(16);
        if dst != self.addr_word && !self.takes_tcp_for(Ipv4Addr::from(dst.to_ne_bytes())) {
            return None;
        }
        let (verified, checksum_ok) = self.checksum_state(frame);
        if !verified && !ipv4_header_ok(h) {
            return None;
        }
        let addrs = *h.last_chunk::<8>()?;
        Some(TcpIngress { addrs, len: total_len as u32 - 20, checksum_ok })
    }

    /// IPv4 (RFC 791, RFC 1122 §3.2.1): version, header length, total length (which also
    /// drops Ethernet padding), fragments, destination, header checksum. Only the fields the
    /// stack uses are read.
    #[inline]
    fn ipv4_ingress(
        &mut self,
        now: Instant,
        frame: &mut PBuf,
        eth_len: usize,
        pool: &Pool,
        tx: &mut Batch,
        counters: &mut Counters,
    ) -> Option<Ingress> {
        let (verified, checksum_ok) = self.checksum_state(frame);
        let (src, dst, protocol, header_len, total_len) = {
            let Ok(ip) = Ipv4Packet::new_checked(&frame.data()[eth_len..]) else {
                counters.drop(DropReason::Malformed);
                return None;
            };
            if !verified && !ip.verify_checksum() {
                counters.drop(DropReason::BadChecksum);
                return None;
            }
            (ip.src_addr(), ip.dst_addr(), ip.protocol(), ip.header_len(), ip.total_len() as usize)
        };
        let transport = protocol == IpProtocol::TCP || protocol == IpProtocol::UDP;
        if dst != self.config.addr && !(transport && self.takes_tcp_for(dst)) {
            counters.drop(DropReason::NotForUs);
            return None;
        }
        if self.martian_source(src) {
            counters.drop(DropReason::Martian);
            return None;
        }
        if Ipv4Packet::new_unchecked(&frame.data()[eth_len..]).is_fragment() {
            counters.drop(DropReason::Fragment);
            return None;
        }
        if protocol == IpProtocol::ICMP {
            let src_mac = (eth_len > 0).then(|| EthernetAddress::from_bytes(&frame.data()[6..12]));
            let _ = frame.narrow(eth_len + header_len, total_len - header_len);
            return self.icmp_ingress(now, frame, src, src_mac, pool, tx, counters);
        }
        if !transport {
            counters.drop(DropReason::UnknownProtocol);
            return None;
        }
        // Keep exactly the segment or datagram: the total length decides, padding is dropped.
        let _ = frame.narrow(eth_len + header_len, total_len - header_len);
        let ing = TcpIngress::new(src, dst, (total_len - header_len) as u32, checksum_ok);
        Some(if protocol == IpProtocol::TCP { Ingress::Tcp(ing) } else { Ingress::Udp(ing, header_len) })
    }

    fn arp_ingress(&mut self, now: Instant, frame: &PBuf, pool: &Pool, tx: &mut Batch, counters: &mut Counters) {
        let Ok(packet) = ArpPacket::new_checked(frame.data()) else {
            counters.drop(DropReason::Malformed);
            return;
        };
        let Ok(arp) = ArpRepr::parse(&packet) else {
            counters.drop(DropReason::Malformed);
            return;
        };
        let for_us = arp.target_protocol_addr == self.config.addr;
        // RFC 826 "merge": refresh a sender we have an entry for (expired or not); learn it
        // if the packet is for us.
        if for_us || self.arp.contains(arp.source_protocol_addr) {
            self.arp.learn(now, arp.source_protocol_addr, arp.source_hardware_addr);
            self.send_parked(now, arp.source_protocol_addr, tx, pool, counters);
        }
        if for_us && arp.operation == ArpOperation::REQUEST {
            let reply = ArpRepr {
                operation: ArpOperation::REPLY,
                source_hardware_addr: self.config.mac,
                source_protocol_addr: self.config.addr,
                target_hardware_addr: arp.source_hardware_addr,
                target_protocol_addr: arp.source_protocol_addr,
            };
            self.send_arp(reply, arp.source_hardware_addr, pool, tx, counters);
        }
    }

    fn send_arp(&mut self, arp: ArpRepr, dst: EthernetAddress, pool: &Pool, tx: &mut Batch, counters: &mut Counters) {
        let Ok(mut out) = pool.alloc_small() else {
            counters.drop(DropReason::NoBuffer);
            return;
        };
        let eth = EthernetRepr { src_addr: self.config.mac, dst_addr: dst, ethertype: EtherType::ARP, vlan_id: None };
        let len = eth.header_len() + arp.buffer_len();
        let Ok(bytes) = out.append(len) else {
            counters.drop(DropReason::NoBuffer);
            return;
        };
        let (head, body) = bytes.split_at_mut(eth.header_len());
        eth.emit(&mut EthernetFrame::new_unchecked(head));
        arp.emit(&mut ArpPacket::new_unchecked(body));
        push(tx, out, counters);
    }

    /// Announce our address (gratuitous ARP request, RFC 5227 §3).
    pub fn announce(&mut self, pool: &Pool, tx: &mut Batch, counters: &mut Counters) {
        if !self.caps.ethernet {
            return;
        }
        let arp = ArpRepr {
            operation: ArpOperation::REQUEST,
            source_hardware_addr: self.config.mac,
            source_protocol_addr: self.config.addr,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: self.config.addr,
        };
        self.send_arp(arp, EthernetAddress::BROADCAST, pool, tx, counters);
    }

    /// Write IPv4 and Ethernet headers in front of `buf`, whose data is the IP payload, from
    /// `src` (the interface's address, or with `any_destination` the one a peer connected
    /// to). The checksum of the payload is the caller's (TCP fills its own). `hop` is the
    /// sender's remembered next hop ([`CachedHop`]; a connection keeps one), refreshed
    /// when the ARP cache changed. Without a link header only the IPv4 header is written,
    /// and the packet is always [`NextHop::Resolved`]: the link is point to point.
    pub fn encapsulate(
        &mut self,
        now: Instant,
        buf: &mut PBuf,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        hop: &mut Option<CachedHop>,
    ) -> Result<NextHop, BufError> {
        // The sender's own headers, while its hop holds: a copy and three stores.
        if let Some((pre, ident)) = self.prebuilt(now, hop, src, dst, protocol) {
            let payload = buf.len();
            pre.write(buf.prepend(pre.len())?, payload, ident);
            return Ok(NextHop::Resolved);
        }
        self.encapsulate_built(now, buf, src, dst, protocol, hop)
    }

    /// The link and IPv4 headers `hop` keeps for a packet from `src` to `dst`, with the
    /// identification to give it (taken), while they are valid: the next hop resolved to
    /// the same neighbour and the entry fresh. The frame is then [`NextHop::Resolved`].
    /// `None` sends the caller through [`encapsulate`](Self::encapsulate), which builds
    /// them (and keeps them in `hop`).
    #[inline(always)]
    pub fn prebuilt<'h>(
        &mut self,
        now: Instant,
        hop: &'h Option<CachedHop>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
    ) -> Option<(&'h Prebuilt, u16)> {
        let pre = self.prebuilt_valid(now, hop, src, dst, protocol)?;
        Some((pre, self.take_ident()))
    }

    /// [`prebuilt`](Self::prebuilt) without taking an identification: for a sender that
    /// writes several frames with these headers at the same `now`, taking one
    /// ([`take_ident`](Self::take_ident)) for each.
    #[inline(always)]
    pub(crate) fn prebuilt_valid<'h>(
        &self,
        now: Instant,
        hop: &'h Option<CachedHop>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
    ) -> Option<&'h Prebuilt> {
        let h = hop.as_ref()?;
        (h.gen == self.arp.gen() && h.expires.is_none_or(|t| t > now) && h.pre.fits(src, dst, protocol.0))
            .then_some(&h.pre)
    }

    /// The IPv4 identification of the next frame: a counter, one step per frame, as every
    /// frame this interface builds takes it.
    #[inline(always)]
    pub(crate) fn take_ident(&mut self) -> u16 {
        let ident = self.ip_ident;
        self.ip_ident = ident.wrapping_add(1);
        ident
    }

    /// [`encapsulate`](Self::encapsulate) field by field; the headers written are kept in
    /// `hop` for the sender's next frames when the next hop is resolved.
    #[inline(never)]
    fn encapsulate_built(
        &mut self,
        now: Instant,
        buf: &mut PBuf,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        hop: &mut Option<CachedHop>,
    ) -> Result<NextHop, BufError> {
        if !self.caps.ethernet {
            self.emit_ipv4(buf, src, dst, protocol)?;
            let h = hop.insert(CachedHop::point_to_point(self.arp.gen(), dst));
            h.pre = prebuilt::Prebuilt::capture(buf.data(), 0);
            return Ok(NextHop::Resolved);
        }
        let next_hop = if self.on_link(dst) {
            dst
        } else {
            match self.config.gateway {
                Some(gw) => gw,
                None => return Ok(NextHop::Unreachable),
            }
        };
        self.emit_ipv4(buf, src, dst, protocol)?;
        let mac = self.arp.lookup_cached(now, next_hop, hop);
        let eth = EthernetRepr {
            src_addr: self.config.mac,
            dst_addr: mac.unwrap_or(EthernetAddress([0; 6])),
            ethertype: EtherType::IPV4,
            vlan_id: None,
        };
        eth.emit(&mut EthernetFrame::new_unchecked(buf.prepend(ethernet::HEADER_LEN)?));
        if let (Some(_), Some(h)) = (mac, hop.as_mut()) {
            h.pre = prebuilt::Prebuilt::capture(buf.data(), ethernet::HEADER_LEN);
        }
        Ok(if mac.is_some() { NextHop::Resolved } else { NextHop::Unresolved(next_hop) })
    }

    /// Prepend the IPv4 header of a packet whose payload is `buf`'s data.
    #[inline(always)]
    fn emit_ipv4(
        &mut self,
        buf: &mut PBuf,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
    ) -> Result<(), BufError> {
        let ip = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol,
            payload_len: buf.len(),
            ttl: self.config.ttl,
            ident: self.ip_ident,
            dont_frag: true,
            dscp_ecn: 0,
            fragment: None,
        };
        self.ip_ident = self.ip_ident.wrapping_add(1);
        ip.emit(&mut Ipv4Packet::new_unchecked(buf.prepend(ip.header_len())?), true);
        Ok(())
    }

    /// Send a frame built by [`encapsulate`](Self::encapsulate): to the device if resolved,
    /// else parked while an ARP request goes out.
    pub fn link_output(
        &mut self,
        now: Instant,
        frame: PBuf,
        next: NextHop,
        pool: &Pool,
        tx: &mut Batch,
        counters: &mut Counters,
    ) {
        match next {
            NextHop::Resolved => push(tx, frame, counters),
            NextHop::Unreachable => counters.drop(DropReason::NotForUs),
            NextHop::Unresolved(ip) => {
                if self.arp.park(now, ip, frame) {
                    let arp = ArpRepr {
                        operation: ArpOperation::REQUEST,
                        source_hardware_addr: self.config.mac,
                        source_protocol_addr: self.config.addr,
                        target_hardware_addr: EthernetAddress([0; 6]),
                        target_protocol_addr: ip,
                    };
                    self.send_arp(arp, EthernetAddress::BROADCAST, pool, tx, counters);
                }
            }
        }
    }

    fn send_parked(&mut self, now: Instant, ip: Ipv4Addr, tx: &mut Batch, pool: &Pool, counters: &mut Counters) {
        let Some(mac) = self.arp.lookup(now, ip) else { return };
        // Handed over one by one, not collected first: a refresh of an expired entry must not
        // allocate (no allocation per packet).
        self.arp.take_pending(ip, |mut frame| {
            // A parked frame may be shared with a retransmission queue; then its header is
            // rewritten in a copy.
            if !frame.is_unique() {
                let Ok(mut copy) = pool.alloc() else {
                    counters.drop(DropReason::NoBuffer);
                    return;
                };
                match copy.append(frame.len()) {
                    Ok(dst) => dst.copy_from_slice(frame.data()),
                    Err(_) => {
                        counters.drop(DropReason::NoBuffer);
                        return;
                    }
                }
                copy.meta = frame.meta;
                counters.tx_copies += 1;
                frame = copy;
            }
            if let Ok(bytes) = frame.data_mut() {
                bytes[..6].copy_from_slice(&mac.0);
            }
            push(tx, frame, counters);
        });
    }
}

/// Queue a frame for the device, counting it, or counting the drop when the batch is full.
#[inline]
pub(crate) fn push(tx: &mut Batch, frame: PBuf, counters: &mut Counters) {
    match tx.push(frame) {
        Ok(()) => counters.frames_out += 1,
        Err(_) => counters.tx_dropped += 1,
    }
}

/// The sum of the IPv4 pseudo-header for a TCP segment of `len` bytes.
#[inline]
pub(crate) fn tcp_pseudo_sum(src: Ipv4Addr, dst: Ipv4Addr, len: usize) -> u16 {
    checksum::pseudo_header(src, dst, IpProtocol::TCP.0, len as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::PoolConfig;
    use crate::time::Duration;

    const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

    fn arp_frame(pool: &Pool, op: ArpOperation, mac: EthernetAddress, target: Ipv4Addr) -> PBuf {
        let arp = ArpRepr {
            operation: op,
            source_hardware_addr: mac,
            source_protocol_addr: PEER,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: target,
        };
        let eth = EthernetRepr {
            src_addr: mac,
            dst_addr: EthernetAddress::BROADCAST,
            ethertype: EtherType::ARP,
            vlan_id: None,
        };
        let mut f = pool.alloc().unwrap();
        let bytes = f.append(eth.header_len() + arp.buffer_len()).unwrap();
        let (head, body) = bytes.split_at_mut(eth.header_len());
        eth.emit(&mut EthernetFrame::new_unchecked(head));
        arp.emit(&mut ArpPacket::new_unchecked(body));
        f
    }

    /// RFC 826's merge: a sender we hold an entry for is refreshed by any ARP packet it
    /// sends, even after the entry expired; a stranger's packet for someone else teaches us
    /// nothing; one for us is learned (and answered).
    #[test]
    fn arp_merge_refreshes_known_senders_even_expired_ones() {
        let pool = Pool::new(PoolConfig { buffers: 16, ..PoolConfig::default() }).unwrap();
        let mut iface = Interface::new(InterfaceConfig::new(US, 24), Capabilities::ethernet(1500));
        let (mut tx, mut counters) = (Batch::with_capacity(8), Counters::default());
        let (old, new) = (EthernetAddress([2, 0, 0, 0, 0, 9]), EthernetAddress([2, 0, 0, 0, 0, 10]));
        let t = Instant::from_secs(1);
        let other = Ipv4Addr::new(10, 0, 0, 77);
        iface.ingress(t, &mut arp_frame(&pool, ArpOperation::REQUEST, old, other), &pool, &mut tx, &mut counters);
        assert_eq!(iface.arp.lookup(t, PEER), None, "a stranger asking for someone else");
        iface.ingress(t, &mut arp_frame(&pool, ArpOperation::REQUEST, old, US), &pool, &mut tx, &mut counters);
        assert_eq!(iface.arp.lookup(t, PEER), Some(old));
        assert_eq!(tx.len(), 1, "the request for us is answered");
        let later = t + Duration::from_secs(120);
        assert_eq!(iface.arp.lookup(later, PEER), None, "expired");
        // A gratuitous ARP (target = sender) with a new MAC: not for us, but PEER is known.
        let mut g = arp_frame(&pool, ArpOperation::REQUEST, new, PEER);
        iface.ingress(later, &mut g.share(), &pool, &mut tx, &mut counters);
        assert_eq!(iface.arp.lookup(later, PEER), Some(new));
        g = arp_frame(&pool, ArpOperation::REPLY, old, other);
        iface.ingress(later, &mut g, &pool, &mut tx, &mut counters);
        assert_eq!(iface.arp.lookup(later, PEER), Some(old), "refreshed again by a reply to someone else");
    }

    /// A sender's prebuilt headers (Jacobson 1993's header template) give the frame the full
    /// build gives: the same bytes but the IPv4 identification, which counts on, and the
    /// header checksum that follows it. Until the hop changes: a new ARP entry for the peer
    /// (another MAC) rebuilds them, and an expired entry is not used.
    #[test]
    fn prebuilt_headers_write_the_frame_the_full_build_writes() {
        let pool = Pool::new(PoolConfig { buffers: 16, ..PoolConfig::default() }).unwrap();
        for caps in [Capabilities::ethernet(1500), Capabilities::ip(1500)] {
            let mut iface = Interface::new(InterfaceConfig::new(US, 24), caps);
            let t = Instant::from_secs(1);
            iface.arp.learn(t, PEER, EthernetAddress([2, 0, 0, 0, 0, 9]));
            let mut hop = None;
            let frame = |iface: &mut Interface, hop: &mut Option<CachedHop>, at: Instant, len: usize| {
                let mut b = pool.alloc().unwrap();
                b.append(len).unwrap().fill(0x5a);
                let next = iface.encapsulate(at, &mut b, US, PEER, IpProtocol::TCP, hop).unwrap();
                assert_eq!(next, NextHop::Resolved);
                b.data().to_vec()
            };
            for (i, len) in [40, 1460, 0, 52, 1400].into_iter().enumerate() {
                let fast = frame(&mut iface, &mut hop, t, len);
                let full = frame(&mut iface, &mut None, t, len);
                let link = if caps.ethernet { 14 } else { 0 };
                assert!(hop.is_some_and(|h| h.pre.fits(US, PEER, IpProtocol::TCP.0)), "kept after frame {i}");
                // The identification counts on by one per frame; all else is equal.
                let id = |f: &[u8]| u16::from_be_bytes([f[link + 4], f[link + 5]]);
                assert_eq!(id(&full), id(&fast).wrapping_add(1));
                let mut fast_next = fast.clone();
                fast_next[link + 4..link + 6].copy_from_slice(&id(&full).to_be_bytes());
                let ip = Ipv4Packet::new_unchecked(&mut fast_next[link..link + 20]);
                let mut ip = ip;
                ip.fill_checksum();
                assert_eq!(fast_next, full, "frame {i} of {len} bytes");
                assert!(Ipv4Packet::new_unchecked(&fast[link..]).verify_checksum());
            }
            if caps.ethernet {
                // The peer moved: its frames go to the new MAC.
                let moved = EthernetAddress([2, 0, 0, 0, 0, 10]);
                iface.arp.learn(t, PEER, moved);
                assert_eq!(&frame(&mut iface, &mut hop, t, 40)[..6], &moved.0);
                // Expired: no frame goes out on the old entry.
                let mut b = pool.alloc().unwrap();
                let late = t + Duration::from_secs(3600);
                let next = iface.encapsulate(late, &mut b, US, PEER, IpProtocol::TCP, &mut hop).unwrap();
                assert_eq!(next, NextHop::Unresolved(PEER));
            }
        }
    }
}
