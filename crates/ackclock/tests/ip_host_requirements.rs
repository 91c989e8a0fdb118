//! The layers below TCP (IPv4, ICMP, ARP) and UDP against the host requirements, at packet
//! level: each test names the RFC rule it checks. The test plays hosts on the link (and, through a gateway,
//! beyond it), builds raw frames, and reads every frame the stack sends.

mod common;

use ackclock::phy::Capabilities;
use ackclock::wire::{
    checksum, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr, TcpFlags,
    TcpPacket, TcpRepr, UdpPacket, UdpRepr,
};
use common::script::{seg, stack_config, Script, LOCAL, PEER, PEER_ISS, PEER_MAC, PEER_PORT};
use core::net::{Ipv4Addr, SocketAddrV4};

const GATEWAY: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 254);
const GATEWAY_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xfe]);
/// The stack's MAC (`InterfaceConfig::new` derives it from LOCAL).
const US_MAC: EthernetAddress = EthernetAddress([0x02, 0xac, 192, 168, 0, 1]);
/// The directed broadcast address of LOCAL's /24.
const SUBNET_BROADCAST: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 255);

/// A stack at LOCAL/24 with a gateway whose MAC is known (so that anything the stack sends
/// off the link leaves at once and can be seen), and PEER known on the link.
fn script_with(any_destination: bool) -> Script {
    let mut c = stack_config();
    c.iface.gateway = Some(GATEWAY);
    c.iface.any_destination = any_destination;
    let mut t = Script::with_config(c, Capabilities::ethernet(1500));
    t.stack.iface_mut().insert_static_neighbor(GATEWAY, GATEWAY_MAC);
    t
}

/// An Ethernet frame to `dst_mac` carrying an IPv4 packet from `src` to `dst` with
/// `payload` (header checksum filled).
fn ip_frame(
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: IpProtocol,
    payload: &[u8],
) -> Vec<u8> {
    let eth = EthernetRepr { src_addr: src_mac, dst_addr: dst_mac, ethertype: EtherType::IPV4, vlan_id: None };
    let ip = Ipv4Repr::new(src, dst, proto, payload.len());
    let mut f = vec![0u8; 14 + 20 + payload.len()];
    eth.emit(&mut EthernetFrame::new_unchecked(&mut f[..14]));
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]), true);
    f[34..].copy_from_slice(payload);
    f
}

/// A TCP segment (header only) from `src` to `dst`, checksum filled.
fn tcp_bytes(src: Ipv4Addr, dst: Ipv4Addr, flags: TcpFlags, seq: u32, ack: u32, dport: u16) -> Vec<u8> {
    let tcp = TcpRepr {
        src_port: PEER_PORT,
        dst_port: dport,
        seq,
        ack,
        flags,
        window: 65535,
        urgent: 0,
        max_seg_size: if flags.contains(TcpFlags::SYN) { Some(1460) } else { None },
        window_scale: None,
        sack_permitted: false,
        timestamps: None,
        sack_blocks: Default::default(),
        payload: &[],
    };
    let mut b = vec![0u8; tcp.header_len()];
    tcp.emit(&mut TcpPacket::new_unchecked(&mut b[..]), src, dst, true);
    b
}

/// A UDP datagram from `src`:`sport` to `dst`:`dport`, checksum filled.
fn udp_bytes(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 8 + payload.len()];
    b[8..].copy_from_slice(payload);
    UdpRepr { src_port: sport, dst_port: dport }.emit(
        &mut UdpPacket::new_unchecked(&mut b[..]),
        src,
        dst,
        payload.len(),
        true,
    );
    b
}

/// An ICMP echo request, checksum filled.
fn echo_request(ident: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 8 + data.len()];
    b[0] = 8;
    b[4..6].copy_from_slice(&ident.to_be_bytes());
    b[6..8].copy_from_slice(&seq.to_be_bytes());
    b[8..].copy_from_slice(data);
    let c = !checksum::sum(&b);
    b[2..4].copy_from_slice(&c.to_be_bytes());
    b
}

/// One frame the stack sent, decoded enough for these tests.
#[derive(Debug)]
#[allow(dead_code)]
struct Out {
    dst_mac: EthernetAddress,
    ethertype: EtherType,
    /// For IPv4: (source, destination, protocol, payload).
    ip: Option<(Ipv4Addr, Ipv4Addr, IpProtocol, Vec<u8>)>,
}

/// Everything the stack sends now (timers due now included), ARP and ICMP as well as TCP.
fn drain(t: &mut Script) -> Vec<Out> {
    t.stack.dispatch(t.now);
    let mut out = vec![];
    while let Some(frame) = t.stack.tx_ring().pop() {
        let data = common::script::complete_checksum(&frame);
        let eth = EthernetFrame::new_checked(&data[..]).unwrap();
        let ip = (eth.ethertype() == EtherType::IPV4).then(|| {
            let p = Ipv4Packet::new_checked(eth.payload()).unwrap();
            (p.src_addr(), p.dst_addr(), p.protocol(), p.payload().to_vec())
        });
        out.push(Out { dst_mac: eth.dst_addr(), ethertype: eth.ethertype(), ip });
    }
    out
}

fn inject(t: &mut Script, f: &[u8]) {
    t.inject_raw(f);
}

/// Source addresses that do not name a single host (RFC 1122 §3.2.1.3: 0.0.0.0 as a
/// source only while a host learns its address, 127/8 never outside a host, {-1,-1} and
/// the directed broadcast never as a source, class D and E never as a source).
const MARTIANS: [Ipv4Addr; 6] = [
    Ipv4Addr::new(0, 0, 0, 0),
    Ipv4Addr::new(127, 0, 0, 1),
    Ipv4Addr::new(255, 255, 255, 255),
    SUBNET_BROADCAST,
    Ipv4Addr::new(224, 0, 0, 1),
    Ipv4Addr::new(240, 0, 0, 1),
];

/// RFC 1122 §3.2.1.3: "A host MUST silently discard an incoming datagram containing an IP
/// source address that is invalid by the rules of this section." For TCP, a SYN from such
/// a source to a listener must open nothing and send nothing (not a SYN-ACK to a broadcast
/// or loopback address, not an ARP request for a broadcast address).
#[test]
fn rfc1122_3_2_1_3_tcp_syn_from_a_martian_source_is_dropped() {
    let mut bad = vec![];
    for src in MARTIANS {
        let mut t = script_with(false);
        t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
        let syn = tcp_bytes(src, LOCAL, TcpFlags::SYN, PEER_ISS, 0, 8080);
        inject(&mut t, &ip_frame(PEER_MAC, US_MAC, src, LOCAL, IpProtocol::TCP, &syn));
        let out = drain(&mut t);
        if !out.is_empty() {
            bad.push(format!("SYN from {src}: the stack sent {out:?}"));
        }
        // A segment to a closed port from such a source earns no RST either.
        let ack = tcp_bytes(src, LOCAL, TcpFlags::ACK, PEER_ISS, 1, 9999);
        inject(&mut t, &ip_frame(PEER_MAC, US_MAC, src, LOCAL, IpProtocol::TCP, &ack));
        let out = drain(&mut t);
        if !out.is_empty() {
            bad.push(format!("ACK to a closed port from {src}: the stack sent {out:?}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// RFC 1122 §3.2.1.3 (source address validation) and §3.2.2 ("An ICMP error message MUST
/// NOT be sent as the result of receiving ... a datagram whose source address does not
/// define a single host -- e.g., a zero address, a loopback address, a broadcast address, a
/// multicast address, or a Class E address"): a UDP datagram from such a source to a
/// closed port earns no port unreachable, and to an open one is not delivered
/// (§4.1.3.6: a datagram "received with an invalid IP source address (e.g., a broadcast or
/// multicast address) must be discarded by UDP or by the IP layer").
#[test]
fn rfc1122_3_2_2_no_icmp_error_and_no_delivery_for_a_udp_datagram_from_a_martian_source() {
    let mut bad = vec![];
    for src in MARTIANS {
        let mut t = script_with(false);
        let d = udp_bytes(src, 5353, LOCAL, 9, b"x");
        inject(&mut t, &ip_frame(PEER_MAC, US_MAC, src, LOCAL, IpProtocol::UDP, &d));
        let out = drain(&mut t);
        if !out.is_empty() {
            bad.push(format!("UDP from {src} to a closed port: the stack sent {out:?}"));
        }
        let s = t.stack.udp_bind(SocketAddrV4::new(LOCAL, 53)).unwrap();
        let d = udp_bytes(src, 5353, LOCAL, 53, b"x");
        inject(&mut t, &ip_frame(PEER_MAC, US_MAC, src, LOCAL, IpProtocol::UDP, &d));
        if t.stack.udp_readable(s).unwrap() {
            bad.push(format!("UDP from {src} was queued for the application"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// RFC 1122 §3.2.1.3 for ICMP: an echo request from a source that names no single host is
/// discarded (an echo reply to 255.255.255.255 or the subnet broadcast reaches every host
/// on the link: a smurf reflector), and teaches the ARP cache nothing.
#[test]
fn rfc1122_3_2_1_3_echo_request_from_a_martian_source_is_not_answered() {
    let mut bad = vec![];
    for src in MARTIANS {
        let mut t = script_with(false);
        let e = echo_request(1, 1, b"ping");
        inject(&mut t, &ip_frame(PEER_MAC, US_MAC, src, LOCAL, IpProtocol::ICMP, &e));
        let out = drain(&mut t);
        if !out.is_empty() {
            bad.push(format!("echo request from {src}: the stack sent {out:?}"));
        }
        if t.stack.iface().arp().contains(src) {
            bad.push(format!("ARP entry learned for {src}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// RFC 1122 §4.2.3.10: "A TCP implementation MUST silently discard an incoming SYN segment
/// that is addressed to a broadcast or multicast address." With `any_destination` the stack
/// takes segments to any unicast address, but the directed broadcast of its own subnet
/// (192.168.0.255 for 192.168.0.1/24) is not one: no SYN-ACK may come from it.
#[test]
fn rfc1122_4_2_3_10_any_destination_syn_to_the_subnet_broadcast_is_dropped() {
    let mut t = script_with(true);
    let opts = ackclock::tcp::SocketOptions::from_config(t.stack.tcp().config());
    t.stack.tcp_listen_any(8, opts).unwrap();
    let syn = tcp_bytes(PEER, SUBNET_BROADCAST, TcpFlags::SYN, PEER_ISS, 0, 8080);
    inject(&mut t, &ip_frame(PEER_MAC, US_MAC, PEER, SUBNET_BROADCAST, IpProtocol::TCP, &syn));
    let out = drain(&mut t);
    assert!(out.is_empty(), "SYN to the subnet broadcast: the stack sent {out:?}");
    // Control: a SYN to another unicast address is taken.
    let other = Ipv4Addr::new(192, 168, 0, 77);
    let syn = tcp_bytes(PEER, other, TcpFlags::SYN, PEER_ISS, 0, 8080);
    inject(&mut t, &ip_frame(PEER_MAC, US_MAC, PEER, other, IpProtocol::TCP, &syn));
    let out = drain(&mut t);
    assert_eq!(out.len(), 1, "{out:?}");
}

/// RFC 1122 §3.3.6: "A host SHOULD silently discard a datagram that is received via a
/// link-layer broadcast (see Section 2.4) but does not specify an IP multicast or
/// broadcast destination address." A unicast IP packet in a frame to ff:ff:ff:ff:ff:ff
/// (a frame anyone on the link can make every host take) is dropped.
#[test]
fn rfc1122_3_3_6_unicast_ip_in_a_link_broadcast_frame_is_dropped() {
    let mut t = script_with(false);
    t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let bc = EthernetAddress::BROADCAST;
    let syn = tcp_bytes(PEER, LOCAL, TcpFlags::SYN, PEER_ISS, 0, 8080);
    inject(&mut t, &ip_frame(PEER_MAC, bc, PEER, LOCAL, IpProtocol::TCP, &syn));
    let e = echo_request(1, 1, b"ping");
    inject(&mut t, &ip_frame(PEER_MAC, bc, PEER, LOCAL, IpProtocol::ICMP, &e));
    let d = udp_bytes(PEER, 5353, LOCAL, 9, b"x");
    inject(&mut t, &ip_frame(PEER_MAC, bc, PEER, LOCAL, IpProtocol::UDP, &d));
    let out = drain(&mut t);
    assert!(out.is_empty(), "the stack answered link-broadcast unicast packets: {out:?}");
}

/// RFC 826 / RFC 1122 §2.3.2: the ARP cache maps an on-link address to the hardware
/// address that ARP (the host itself) announced. An ICMP echo request relayed by the
/// gateway carries the gateway's MAC as its Ethernet source; taking that as the MAC of the
/// packet's (forgeable) IP source lets any host on the Internet redirect the stack's
/// traffic for a neighbour to the gateway, by pinging it with the neighbour's address as
/// source.
#[test]
fn rfc826_echo_request_relayed_by_the_gateway_does_not_rebind_a_neighbour() {
    let mut t = script_with(false);
    let neighbour = Ipv4Addr::new(192, 168, 0, 9);
    let neighbour_mac = EthernetAddress([0x02, 0, 0, 0, 0, 9]);
    // The neighbour resolves by ARP (a request for us teaches the cache, RFC 826 merge).
    let mut arp = vec![0u8; 14 + 28];
    EthernetRepr {
        src_addr: neighbour_mac,
        dst_addr: EthernetAddress::BROADCAST,
        ethertype: EtherType::ARP,
        vlan_id: None,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut arp[..14]));
    ackclock::wire::ArpRepr {
        operation: ackclock::wire::ArpOperation::REQUEST,
        source_hardware_addr: neighbour_mac,
        source_protocol_addr: neighbour,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: LOCAL,
    }
    .emit(&mut ackclock::wire::ArpPacket::new_unchecked(&mut arp[14..]));
    inject(&mut t, &arp);
    drain(&mut t);
    assert_eq!(t.stack.iface().arp().lookup(t.now, neighbour), Some(neighbour_mac));
    // A forged ping from "the neighbour", relayed by the gateway.
    let e = echo_request(1, 1, b"ping");
    inject(&mut t, &ip_frame(GATEWAY_MAC, US_MAC, neighbour, LOCAL, IpProtocol::ICMP, &e));
    drain(&mut t);
    assert_eq!(
        t.stack.iface().arp().lookup(t.now, neighbour),
        Some(neighbour_mac),
        "an ICMP packet from off the link rebound the neighbour's MAC"
    );
    // Nor does an off-link source get an ARP entry (one per forged source would churn the
    // cache, whose eviction takes the entry closest to expiry, even the gateway's peers').
    let far = Ipv4Addr::new(203, 0, 113, 7);
    inject(&mut t, &ip_frame(GATEWAY_MAC, US_MAC, far, LOCAL, IpProtocol::ICMP, &e));
    let out = drain(&mut t);
    assert_eq!(out.len(), 1, "the echo reply: {out:?}");
    assert!(!t.stack.iface().arp().contains(far), "an ARP entry for an off-link address");
}

/// RFC 1191 §3: "When a host receives a Datagram Too Big message, it MUST reduce its
/// estimate of the PMTU for the relevant path, based on the value of the Next-Hop MTU
/// field in the message." The stack sets DF on every packet (it runs PMTU discovery's
/// first half); a Datagram Too Big quoting one of its in-flight segments (sequence number
/// within SND.UNA..SND.NXT, RFC 5927 §4.1) must make later segments fit the path.
#[test]
fn rfc1191_3_frag_needed_for_an_in_flight_segment_shrinks_the_segments() {
    let mut t = Script::new(Default::default());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460));
    t.stack.tcp_send(c, &vec![7u8; 4 * 1460]).unwrap();
    let first = t.expect(0, seg(".").seq(1).ack(PEER_ISS + 1).len(1460).any_options());
    assert_eq!(first.len, 1460);
    t.discard();
    // The router's Datagram Too Big, quoting the first segment's IP header and 8 bytes.
    let mtu: u16 = 1400;
    let mut quoted = vec![0u8; 28];
    let mut ip = Ipv4Repr::new(LOCAL, PEER, IpProtocol::TCP, 20 + 1460);
    ip.ident = 0;
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut quoted[..20]), true);
    quoted[20..22].copy_from_slice(&8080u16.to_be_bytes());
    quoted[22..24].copy_from_slice(&PEER_PORT.to_be_bytes());
    quoted[24..28].copy_from_slice(&t.local_seq(1).to_be_bytes());
    let mut icmp = vec![0u8; 8 + quoted.len()];
    icmp[0] = 3;
    icmp[1] = 4;
    icmp[6..8].copy_from_slice(&mtu.to_be_bytes());
    icmp[8..].copy_from_slice(&quoted);
    let ck = !checksum::sum(&icmp);
    icmp[2..4].copy_from_slice(&ck.to_be_bytes());
    inject(&mut t, &ip_frame(GATEWAY_MAC, US_MAC, GATEWAY, LOCAL, IpProtocol::ICMP, &icmp));
    // Whatever the stack sends from now on (the retransmission of the lost segment, new
    // data) fits a 1400-byte path.
    let sent: Vec<_> = t.run_to(5_000).into_iter().map(|(_, s)| s).collect();
    assert!(!sent.is_empty(), "nothing sent after the Datagram Too Big");
    for s in &sent {
        assert!(
            s.len + 20 + 20 + s.ts.map_or(0, |_| 12) <= mtu as usize,
            "a {}-byte segment after a Datagram Too Big for MTU {mtu}: {sent:?}",
            s.len
        );
    }
}

/// RFC 1122 §4.2.3.10: "A TCP implementation MUST reject as an error a local OPEN call for
/// an invalid remote IP address (e.g., a broadcast or multicast address)." The limited
/// broadcast is refused; a multicast, class E, loopback or zero-network address, or the
/// directed broadcast of the stack's own subnet, must be too (no SYN to any of them).
#[test]
fn rfc1122_4_2_3_10_connect_to_a_broadcast_or_multicast_address_is_refused() {
    let mut t = script_with(false);
    let mut bad = vec![];
    for remote in MARTIANS {
        let r = t.stack.tcp_connect(SocketAddrV4::new(remote, 80));
        if r.is_ok() {
            bad.push(format!("connect to {remote} accepted"));
        }
    }
    let out = drain(&mut t);
    assert!(bad.is_empty() && out.is_empty(), "{bad:#?}\nsent: {out:?}");
}
