//! ICMP at the interface: echo requests answered, a Datagram Too Big (RFC 1191) handed to
//! TCP, everything else counted and ignored.

use super::{Ingress, Interface};
use crate::buf::{PBuf, Pool};
use crate::phy::Batch;
use crate::stats::{Counters, DropReason};
use crate::time::Instant;
use crate::wire::icmpv4::DstUnreachable;
use crate::wire::{EthernetAddress, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet};
use core::net::{Ipv4Addr, SocketAddrV4};

/// An ICMP "fragmentation needed and DF set" (RFC 792; RFC 1191's Datagram Too Big) that
/// quotes a TCP segment this host sent: the connection the quote names, the quoted
/// segment's sequence number, and the MTU the router reported. TCP checks the sequence
/// number against what it has in flight before it believes the MTU (RFC 5927 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooBig {
    /// The quoted datagram's source: our end of the connection.
    pub local: SocketAddrV4,
    /// The quoted datagram's destination: the peer.
    pub remote: SocketAddrV4,
    /// The quoted segment's sequence number.
    pub seq: u32,
    /// The next-hop MTU (RFC 1191 §4); 0 from a router older than RFC 1191.
    pub mtu: u16,
}

impl Interface {
    /// An ICMP message for us: an echo request is answered; a Datagram Too Big quoting a TCP
    /// segment from us goes up as [`Ingress::TooBig`]. Everything else (echo replies, other
    /// unreachables, unknown types) is ignored, counted as such (RFC 1122 §3.2.2: an unknown
    /// type MUST be silently discarded); no other ICMP message changes any state, which
    /// also keeps forged ones harmless (RFC 5927).
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

    /// The connection a Datagram Too Big names: its quote (an IPv4 header and 8 bytes,
    /// checked by the parser) must be a TCP segment from one of our addresses, not a
    /// fragment beyond the first.
    fn too_big(&self, mtu: u16, quote: &[u8]) -> Option<TooBig> {
        let ip = Ipv4Packet::new_unchecked(quote);
        let (local, remote) = (ip.src_addr(), ip.dst_addr());
        let ours = local == self.config.addr || self.takes_tcp_for(local);
        if ip.protocol() != IpProtocol::TCP || !ours || ip.frag_offset() != 0 {
            return None;
        }
        let tcp = &quote[ip.header_len()..];
        let port = |i: usize| u16::from_be_bytes([tcp[i], tcp[i + 1]]);
        Some(TooBig {
            local: SocketAddrV4::new(local, port(0)),
            remote: SocketAddrV4::new(remote, port(2)),
            seq: u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
            mtu,
        })
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
