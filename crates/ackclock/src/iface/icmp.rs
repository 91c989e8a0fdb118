//! ICMP at the interface: echo requests answered, a Datagram Too Big (RFC 1191) and any
//! other Destination Unreachable, or a Time Exceeded, quoting our TCP or UDP handed to the
//! transport layer (RFC 1122 §3.2.2.1, §4.1.3.3, §4.2.3.9), everything else counted
//! and ignored.

use super::{Ingress, Interface};
use crate::buf::{PBuf, Pool};
use crate::phy::Batch;
use crate::stats::{Counters, DropReason};
use crate::time::Instant;
use crate::wire::icmpv4::DstUnreachable;
use crate::wire::{EthernetAddress, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet};
use core::net::{Ipv4Addr, SocketAddrV4};

/// An ICMP "fragmentation needed and DF set" (RFC 792; RFC 1191's Datagram Too Big) that
/// quotes a TCP segment or UDP datagram this host sent: the socket pair the quote names,
/// the quoted TCP segment's sequence number, and the MTU the router reported. TCP checks
/// the sequence number against what it has in flight before it believes the MTU (RFC 5927
/// §4.1); UDP, which has none, believes one only for a socket connected to the quoted
/// destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooBig {
    /// TCP or UDP.
    pub protocol: IpProtocol,
    /// The quoted datagram's source: our end of the connection.
    pub local: SocketAddrV4,
    /// The quoted datagram's destination: the peer.
    pub remote: SocketAddrV4,
    /// The quoted TCP segment's sequence number (0 for UDP).
    pub seq: u32,
    /// The next-hop MTU (RFC 1191 §4); 0 from a router older than RFC 1191.
    pub mtu: u16,
}

/// An ICMP Destination Unreachable other than "fragmentation needed" that quotes a TCP
/// segment or UDP datagram this host sent: which transport and socket pair it names, the
/// quoted TCP segment's sequence number (for RFC 5927 §4.1's check), and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreachable {
    /// TCP or UDP.
    pub protocol: IpProtocol,
    /// The quoted datagram's source: our end.
    pub local: SocketAddrV4,
    /// The quoted datagram's destination: the peer.
    pub remote: SocketAddrV4,
    /// The quoted TCP segment's sequence number (0 for UDP).
    pub seq: u32,
    /// The message's code (RFC 792, RFC 1122 §3.2.2.1, RFC 1812 §5.2.7.1).
    pub code: DstUnreachable,
    /// A Time Exceeded (type 11) rather than a Destination Unreachable: taken as a host
    /// unreachable, soft (RFC 1122 §4.2.3.9, and as Linux, EHOSTUNREACH), except that it
    /// says nothing of an outage (no RFC 6069 revert).
    pub time_exceeded: bool,
}

/// What a Destination Unreachable says, as the error a socket reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnreachableError {
    /// The network cannot be reached (Linux's ENETUNREACH).
    Net,
    /// The host cannot be reached, or the path is administratively closed (EHOSTUNREACH).
    Host,
    /// Nobody there: protocol or port unreachable (ECONNREFUSED).
    Refused,
}

impl Unreachable {
    /// The error the message's code stands for, and whether it is a hard error (Linux's
    /// `icmp_err_convert`); `None` for codes past RFC 1812's 15 (ignored, as Linux).
    pub fn error(&self) -> Option<(UnreachableError, bool)> {
        use UnreachableError::{Host, Net, Refused};
        if self.time_exceeded {
            return Some((Host, false));
        }
        Some(match self.code.0 {
            0 | 11 => (Net, false),
            1 | 5 | 12 => (Host, false),
            2 | 3 => (Refused, true),
            // Fragmentation needed: path MTU discovery's (`TooBig`); soft otherwise.
            4 => (Host, false),
            6 | 9 => (Net, true),
            7 | 8 | 10 | 13..=15 => (Host, true),
            _ => return None,
        })
    }
}

impl Interface {
    /// An ICMP message for us: an echo request is answered; a Datagram Too Big quoting a TCP
    /// segment or UDP datagram from us goes up as [`Ingress::TooBig`], any other Destination Unreachable
    /// or Time Exceeded quoting a TCP segment or UDP datagram from us as
    /// [`Ingress::Unreachable`] (TCP and UDP believe it only for what they have in flight or
    /// are connected to, RFC 5927). Everything else (echo replies, unknown types) is
    /// ignored, counted as such (RFC 1122 §3.2.2: an unknown type MUST be silently
    /// discarded).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn icmp_ingress(
        &mut self,
        now: Instant,
        frame: &PBuf,
        src_ip: Ipv4Addr,
        src_mac: Option<EthernetAddress>,
        pool: &Pool,
        tx: &mut Batch,
        counters: &mut Counters,
    ) -> Option<Ingress> {
        let data = frame.data();
        let Ok(packet) = Icmpv4Packet::new_checked(data) else {
            counters.drop(DropReason::Malformed);
            return None;
        };
        let request = match Icmpv4Repr::parse(&packet) {
            Ok(r @ Icmpv4Repr::EchoRequest { .. }) => r,
            Ok(Icmpv4Repr::DstUnreachable { reason: DstUnreachable::FRAG_NEEDED, next_hop_mtu, header }) => {
                let too_big = self.too_big(next_hop_mtu, header);
                if too_big.is_none() {
                    counters.icmp_ignored += 1;
                }
                return too_big.map(Ingress::TooBig);
            }
            Ok(Icmpv4Repr::DstUnreachable { reason, header, .. }) => {
                return self.unreachable(reason, false, header, counters);
            }
            Ok(Icmpv4Repr::TimeExceeded { header, .. }) => {
                return self.unreachable(DstUnreachable::HOST, true, header, counters);
            }
            Ok(_) | Err(crate::wire::Error::Unsupported) => {
                counters.icmp_ignored += 1;
                return None;
            }
            Err(crate::wire::Error::BadChecksum) => {
                counters.drop(DropReason::BadChecksum);
                return None;
            }
            Err(_) => {
                counters.drop(DropReason::Malformed);
                return None;
            }
        };
        let Icmpv4Repr::EchoRequest { ident, seq_no, data } = request else { return None };
        let reply = Icmpv4Repr::EchoReply { ident, seq_no, data };
        // Reply to the MAC the request came from: no ARP round trip for a ping. Only for a
        // neighbour the cache does not know yet: an IP packet's source address is anyone's
        // to forge, and one relayed by a router carries the router's MAC, so it must never
        // rebind an entry ARP made (RFC 826) nor add one for an address off the link.
        if let Some(mac) = src_mac.filter(|_| self.on_link(src_ip) && !self.arp.contains(src_ip)) {
            self.arp.learn(now, src_ip, mac);
        }
        self.send_icmp(now, &reply, self.config.addr, src_ip, pool, tx, counters);
        None
    }

    /// An ICMP error other than a Datagram Too Big (`code`, or a Time Exceeded) quoting
    /// `quote`: [`Ingress::Unreachable`] if it names a TCP segment or UDP datagram of ours,
    /// else counted as ignored.
    fn unreachable(
        &self,
        code: DstUnreachable,
        time_exceeded: bool,
        quote: &[u8],
        counters: &mut Counters,
    ) -> Option<Ingress> {
        let quoted = self.quoted(quote).filter(|q| q.0 == IpProtocol::TCP || q.0 == IpProtocol::UDP);
        let Some((protocol, local, remote, seq)) = quoted else {
            counters.icmp_ignored += 1;
            return None;
        };
        Some(Ingress::Unreachable(Unreachable { protocol, local, remote, seq, code, time_exceeded }))
    }

    /// The socket pair a Datagram Too Big names: its quote must be a TCP segment or UDP
    /// datagram of ours.
    fn too_big(&self, mtu: u16, quote: &[u8]) -> Option<TooBig> {
        match self.quoted(quote)? {
            (protocol @ (IpProtocol::TCP | IpProtocol::UDP), local, remote, seq) => {
                let seq = if protocol == IpProtocol::TCP { seq } else { 0 };
                Some(TooBig { protocol, local, remote, seq, mtu })
            }
            _ => None,
        }
    }

    /// What an ICMP error's quote (an IPv4 header and 8 bytes, checked by the parser) names
    /// if it is a datagram from one of our addresses and not a fragment beyond the first:
    /// its protocol, source and destination ports with the addresses, and the TCP
    /// sequence number in its bytes 4 to 8 (for UDP, its length and checksum: unused).
    fn quoted(&self, quote: &[u8]) -> Option<(IpProtocol, SocketAddrV4, SocketAddrV4, u32)> {
        let ip = Ipv4Packet::new_unchecked(quote);
        let (local, remote) = (ip.src_addr(), ip.dst_addr());
        let ours = local == self.config.addr || self.takes_tcp_for(local);
        let l4 = quote.get(ip.header_len()..)?.first_chunk::<8>()?;
        if !ours || ip.frag_offset() != 0 {
            return None;
        }
        let port = |i: usize| u16::from_be_bytes([l4[i], l4[i + 1]]);
        let seq = u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]);
        Some((ip.protocol(), SocketAddrV4::new(local, port(0)), SocketAddrV4::new(remote, port(2)), seq))
    }

    /// Build `msg` in a fresh buffer and send it from `src` to `dst` (the echo reply here,
    /// UDP's port unreachable). `false`, counted as a drop, when no buffer is free.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_icmp(
        &mut self,
        now: Instant,
        msg: &Icmpv4Repr<'_>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        pool: &Pool,
        tx: &mut Batch,
        counters: &mut Counters,
    ) -> bool {
        let Ok(mut out) = pool.alloc() else {
            counters.drop(DropReason::NoBuffer);
            return false;
        };
        let Ok(bytes) = out.append(msg.buffer_len()) else {
            counters.drop(DropReason::NoBuffer);
            return false;
        };
        msg.emit(&mut Icmpv4Packet::new_unchecked(bytes));
        match self.encapsulate(now, &mut out, src, dst, IpProtocol::ICMP, &mut None) {
            Ok(next) => {
                self.link_output(now, out, next, pool, tx, counters);
                true
            }
            Err(_) => {
                counters.drop(DropReason::NoBuffer);
                false
            }
        }
    }
}
