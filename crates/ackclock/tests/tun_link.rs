//! A link without a link header (a TUN): frames are IPv4 packets from their first byte, the
//! interface writes no Ethernet header, sends no ARP, and routes every destination through
//! the link (it is point to point). TCP behaves exactly as over Ethernet, packet for packet.

mod common;

use ackclock::buf::Flags;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::Capabilities;
use ackclock::stats::DropReason;
use ackclock::time::Instant;
use ackclock::wire::{Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr};
use ackclock::{Stack, StackConfig};
use common::script::{seg, stack_config, tcp_config, Script, LOCAL, PEER, PEER_ISS};
use core::net::{Ipv4Addr, SocketAddrV4};

fn tun_script() -> Script {
    let mut c = stack_config();
    c.tcp = tcp_config();
    Script::with_config(c, Capabilities::ip(1500))
}

/// RFC 9293 §3.10.7.2 (LISTEN, a SYN) and RFC 9293 §3.7.1 (the MSS option): over a TUN the
/// handshake is the Ethernet one, and the MSS a 1500-byte MTU allows is 1500 - 20 - 20 = 1460,
/// with no link header taken from it.
#[test]
fn handshake_and_data_over_ip_frames() {
    let mut t = tun_script();
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(65535).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(65535).mss(1460));
    t.inject(1, seg(".").seq(PEER_ISS + 1).ack(1).win(65535));
    let h = t.stack.tcp_accept(l).unwrap();
    // Data in, in order: header prediction takes it from the bare IPv4 packet (RFC 9293
    // §3.10.7.4, eighth step; the ACK is delayed for the second full segment, RFC 1122 §4.2.3.2).
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(1).win(65535).len(1460));
    t.inject(2, seg(".").seq(PEER_ISS + 1 + 1460).ack(1).win(65535).len(1460));
    assert_eq!(t.stack.counters().fast_path_data, 2, "both segments took the fast path");
    let mut buf = [0u8; 4096];
    assert_eq!(t.stack.tcp_recv(h, &mut buf).unwrap(), 2920);
    t.expect(2, seg(".").seq(1).ack(PEER_ISS + 1 + 2920).win(65535));
    // Data out: one MSS-sized segment, its IPv4 header at byte 0.
    t.stack.tcp_send(h, &[7; 1460]).unwrap();
    let sent = t.expect(3, seg("P.").seq(1).ack(PEER_ISS + 1 + 2920).win(65535).len(1460));
    assert_eq!(sent.payload, vec![7; 1460]);
}

/// A stack on a TUN announces nothing (no gratuitous ARP), and its SYN to an address outside
/// its prefix, with no gateway set, goes straight out as an IPv4 packet: every destination is
/// through the link.
#[test]
fn no_arp_and_every_destination_is_on_the_link() {
    let now = Instant::from_secs(1);
    let mut c = StackConfig::new(InterfaceConfig::new(Ipv4Addr::new(10, 0, 0, 2), 24));
    c.seed = 3;
    let mut stack = Stack::new(c, Capabilities::ip(1500), now).unwrap();
    stack.dispatch(now);
    assert!(stack.tx_ring().is_empty(), "no gratuitous ARP on a link without one");
    let far = SocketAddrV4::new(Ipv4Addr::new(198, 51, 100, 7), 443);
    stack.tcp_connect(far).unwrap();
    stack.dispatch(now);
    let syn = stack.tx_ring().pop().expect("the SYN, not an ARP request");
    let ip = Ipv4Packet::new_checked(syn.data()).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!((ip.src_addr(), ip.dst_addr(), ip.protocol()), (Ipv4Addr::new(10, 0, 0, 2), *far.ip(), IpProtocol::TCP));
    assert_eq!(ip.total_len() as usize, syn.len(), "nothing before or after the IPv4 packet");
    assert!(stack.tx_ring().is_empty());
    assert_eq!(stack.iface().arp().pending_len(), 0);
}

/// TSO over a TUN: the frame handed to the device marks its TCP header at byte 20, the
/// virtio-net header's `csum_start` for a packet without a link header.
#[test]
fn tso_frames_mark_the_tcp_header_after_the_ip_header() {
    let mut c = stack_config();
    c.tcp = tcp_config();
    c.pool.buffer_size = 64 * 1024 + ackclock::buf::DEFAULT_HEADROOM;
    c.pool.buffers = 64;
    let caps = Capabilities { tx_checksum: true, tso_max: 65535, ..Capabilities::ip(1500) };
    let mut t = Script::with_config(c, caps);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let h = t.accept_with(l, seg("S").win(65535).mss(1460));
    t.stack.tcp_send(h, &[1; 4 * 1460]).unwrap();
    t.stack.dispatch(t.now);
    let frame = t.stack.tx_ring().pop().expect("a TSO frame");
    assert!(frame.meta.flags.contains(Flags::GSO_TCPV4 | Flags::CSUM_PARTIAL));
    assert_eq!((frame.meta.csum_start, frame.meta.csum_offset, frame.meta.gso_size), (20, 16, 1460));
    assert_eq!(frame.data()[0], 0x45);
    let payload = frame.len() - 20 - 20;
    assert!(payload > 1460 && payload % 1460 == 0, "whole segments, more than one: {payload}");
}

/// RFC 792 (echo) and RFC 1122 §3.2.2.6: a ping over a TUN is answered with an IPv4 packet,
/// addresses swapped, identifier, sequence number and data echoed.
#[test]
fn ping_is_answered_without_link_header() {
    let mut t = tun_script();
    let req = Icmpv4Repr::EchoRequest { ident: 0x1234, seq_no: 9, data: b"ackclock over a tun" };
    let mut bytes = vec![0u8; 20 + req.buffer_len()];
    Ipv4Repr::new(PEER, LOCAL, IpProtocol::ICMP, req.buffer_len())
        .emit(&mut Ipv4Packet::new_unchecked(&mut bytes[..20]), true);
    req.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[20..]));
    t.inject_raw(&bytes);
    t.stack.dispatch(t.now);
    let reply = t.stack.tx_ring().pop().expect("an echo reply");
    let ip = Ipv4Packet::new_checked(reply.data()).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!((ip.src_addr(), ip.dst_addr(), ip.protocol()), (LOCAL, PEER, IpProtocol::ICMP));
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    let want = Icmpv4Repr::EchoReply { ident: 0x1234, seq_no: 9, data: b"ackclock over a tun" };
    assert_eq!(Icmpv4Repr::parse(&icmp).unwrap(), want);
    assert!(t.stack.tx_ring().is_empty());
}

/// Bad input on a TUN is a counted drop: an empty frame and a cut IPv4 header are malformed;
/// an IPv6 packet (version 6) and an ARP request in an Ethernet frame (Ethernet bytes on a
/// link that has none: its first byte, 0xff, reads as version 15) are unknown protocols.
/// Nothing is sent back.
#[test]
fn bad_frames_are_counted_drops() {
    let mut t = tun_script();
    t.inject_raw(&[]);
    t.inject_raw(&[0x45, 0, 0, 40, 0, 0]);
    let mut v6 = [0u8; 60];
    v6[0] = 0x60;
    t.inject_raw(&v6);
    let mut arp = [0u8; 42];
    arp[..6].fill(0xff);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    t.inject_raw(&arp);
    let c = t.stack.counters();
    assert_eq!(c.dropped(DropReason::Malformed), 2);
    assert_eq!(c.dropped(DropReason::UnknownProtocol), 2, "IPv6, and a first byte 0xff (version 15)");
    t.stack.dispatch(t.now);
    assert!(t.stack.tx_ring().is_empty());
}

/// RFC 1122 §3.2.2: an ICMP message of a type the stack has no use for (timestamp request,
/// time exceeded) is silently discarded, and counted as ignored, not as malformed; a message
/// cut short is malformed. Nothing is sent back.
#[test]
fn icmp_types_without_use_are_ignored_not_malformed() {
    let mut t = tun_script();
    let packet = |icmp: &[u8]| {
        let mut bytes = vec![0u8; 20 + icmp.len()];
        Ipv4Repr::new(PEER, LOCAL, IpProtocol::ICMP, icmp.len())
            .emit(&mut Ipv4Packet::new_unchecked(&mut bytes[..20]), true);
        bytes[20..].copy_from_slice(icmp);
        // The ICMP checksum over the message (RFC 792), where it has room for one.
        if icmp.len() >= 4 {
            let sum = !ackclock::wire::checksum::sum(&bytes[20..]);
            bytes[22..24].copy_from_slice(&sum.to_be_bytes());
        }
        bytes
    };
    let mut timestamp = [0u8; 20];
    timestamp[0] = 13;
    let mut time_exceeded = [0u8; 36];
    time_exceeded[0] = 11;
    time_exceeded[8] = 0x45;
    t.inject_raw(&packet(&timestamp));
    t.inject_raw(&packet(&time_exceeded));
    t.inject_raw(&packet(&[8, 0, 0]));
    let c = t.stack.counters();
    assert_eq!(c.icmp_ignored, 2);
    assert_eq!(c.dropped(DropReason::Malformed), 1, "the 3-byte message");
    t.stack.dispatch(t.now);
    assert!(t.stack.tx_ring().is_empty());
}
