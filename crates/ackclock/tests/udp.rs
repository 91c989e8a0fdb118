//! UDP (RFC 768) at packet level: the test plays the peer, injects datagrams and reads
//! exactly what the stack sends back (datagrams, ICMP port unreachable), plus 10,000
//! datagrams between two stacks over the in-memory pipe.

mod common;

use ackclock::iface::InterfaceConfig;
use ackclock::phy::{pipe, Capabilities, PipeConfig};
use ackclock::stats::DropReason;
use ackclock::time::{Duration, Instant};
use ackclock::wire::checksum;
use ackclock::wire::{EtherType, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr};
use ackclock::{Error, Stack, StackConfig};
use common::script::{stack_config, Script, LOCAL, PEER, PEER_MAC};
use core::net::{Ipv4Addr, SocketAddrV4};

const PEER_PORT: u16 = 5353;

fn at(ip: Ipv4Addr, port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(ip, port)
}

/// How to damage a datagram built by [`datagram`].
#[derive(Clone, Copy, Default)]
struct Make {
    /// Bytes after the datagram inside the IP packet (the UDP length excludes them).
    trailing: usize,
    /// Flip a payload bit after the checksum was computed.
    corrupt: bool,
    /// Send no checksum (field 0).
    no_checksum: bool,
    /// Override the UDP length field.
    length_field: Option<u16>,
    /// Cut the IP payload to this many bytes (a short header).
    ip_payload: Option<usize>,
}

/// An Ethernet frame carrying `payload` from `from` to `to` by UDP.
fn datagram(t: &Script, from: SocketAddrV4, to: SocketAddrV4, payload: &[u8], m: Make) -> Vec<u8> {
    let mut udp = vec![0u8; 8 + payload.len() + m.trailing];
    udp[8..8 + payload.len()].copy_from_slice(payload);
    let repr = UdpRepr { src_port: from.port(), dst_port: to.port() };
    repr.emit(&mut UdpPacket::new_unchecked(&mut udp[..8 + payload.len()]), *from.ip(), *to.ip(), payload.len(), true);
    if m.no_checksum {
        udp[6..8].copy_from_slice(&[0, 0]);
    }
    if m.corrupt {
        udp[8] ^= 0x10;
    }
    if let Some(l) = m.length_field {
        udp[4..6].copy_from_slice(&l.to_be_bytes());
    }
    if let Some(n) = m.ip_payload {
        udp.truncate(n);
    }
    let ip = Ipv4Repr::new(*from.ip(), *to.ip(), IpProtocol::UDP, udp.len());
    let eth =
        EthernetRepr { src_addr: PEER_MAC, dst_addr: t.stack.iface().mac(), ethertype: EtherType::IPV4, vlan_id: None };
    let mut frame = vec![0u8; 14 + 20 + udp.len()];
    eth.emit(&mut EthernetFrame::new_unchecked(&mut frame[..14]));
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut frame[14..34]), true);
    frame[34..].copy_from_slice(&udp);
    frame
}

/// What the stack sent: (IPv4 source, destination, protocol, IP payload).
fn sent(t: &mut Script) -> Vec<(Ipv4Addr, Ipv4Addr, IpProtocol, Vec<u8>)> {
    t.stack.dispatch(t.now);
    let mut out = Vec::new();
    while let Some(frame) = t.stack.tx_ring().pop() {
        let eth = EthernetFrame::new_checked(frame.data()).unwrap();
        if eth.ethertype() != EtherType::IPV4 {
            continue;
        }
        assert_eq!(eth.dst_addr(), PEER_MAC);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert!(ip.verify_checksum());
        out.push((ip.src_addr(), ip.dst_addr(), ip.protocol(), ip.payload().to_vec()));
    }
    out
}

fn script() -> Script {
    Script::new(Default::default())
}

/// RFC 768: a datagram to a bound port is delivered with its source and destination; the
/// bytes after the UDP length field (inside the IP packet) are not part of it.
#[test]
fn a_datagram_to_a_bound_port_is_delivered_with_both_addresses() {
    let mut t = script();
    let s = t.stack.udp_bind(at(LOCAL, 53)).unwrap();
    let f = datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 53), b"query", Make { trailing: 3, ..Make::default() });
    t.inject_raw(&f);
    assert!(t.stack.udp_readable(s).unwrap());
    let mut buf = [0u8; 64];
    let r = t.stack.udp_recv_from(s, &mut buf).unwrap();
    assert_eq!(&buf[..r.len], b"query");
    assert_eq!((r.len, r.datagram_len, r.from, r.to), (5, 5, at(PEER, PEER_PORT), at(LOCAL, 53)));
    assert_eq!(t.stack.udp_recv_from(s, &mut buf), Err(Error::WouldBlock));
    let c = t.stack.counters();
    assert_eq!((c.udp_in, c.udp_delivered), (1, 1));
}

/// A buffer shorter than the datagram gets its front; the rest is discarded, and
/// `datagram_len` says how long it was (as MSG_TRUNC does). The checksum still covers the
/// whole datagram: a corrupted byte past the cut is caught.
#[test]
fn a_short_buffer_truncates_and_the_checksum_still_covers_the_tail() {
    let mut t = script();
    let s = t.stack.udp_bind(at(Ipv4Addr::UNSPECIFIED, 53)).unwrap();
    let payload: Vec<u8> = (0..1001u32).map(|i| (i * 7) as u8).collect();
    t.inject_raw(&datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 53), &payload, Make::default()));
    let mut buf = [0u8; 101];
    let r = t.stack.udp_recv_from(s, &mut buf).unwrap();
    assert_eq!((r.len, r.datagram_len), (101, 1001));
    assert_eq!(&buf[..], &payload[..101]);

    let mut f = datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 53), &payload, Make::default());
    let last = f.len() - 1;
    f[last] ^= 1; // past what the reader takes
    t.inject_raw(&f);
    assert_eq!(t.stack.udp_recv_from(s, &mut buf), Err(Error::WouldBlock));
    assert_eq!(t.stack.counters().dropped(DropReason::BadChecksum), 1);
}

/// The checksum is verified in the copy to the application: a bad datagram is dropped and
/// counted there, and the good one behind it is returned by the same call. A zero checksum
/// field means none was sent (RFC 768), and is accepted.
#[test]
fn a_bad_checksum_is_dropped_in_the_copy_and_the_next_datagram_returned() {
    let mut t = script();
    let s = t.stack.udp_bind(at(LOCAL, 7)).unwrap();
    let from = at(PEER, PEER_PORT);
    t.inject_raw(&datagram(&t, from, at(LOCAL, 7), b"bad!", Make { corrupt: true, ..Make::default() }));
    t.inject_raw(&datagram(&t, from, at(LOCAL, 7), b"good", Make::default()));
    t.inject_raw(&datagram(&t, from, at(LOCAL, 7), b"none", Make { no_checksum: true, ..Make::default() }));
    let mut buf = [0u8; 16];
    let r = t.stack.udp_recv_from(s, &mut buf).unwrap();
    assert_eq!(&buf[..r.len], b"good");
    let r = t.stack.udp_recv_from(s, &mut buf).unwrap();
    assert_eq!(&buf[..r.len], b"none");
    assert_eq!(t.stack.counters().dropped(DropReason::BadChecksum), 1);
    assert_eq!(t.stack.counters().udp_delivered, 2);
}

/// Malformed datagrams are dropped and counted, never delivered, never a panic: a header
/// shorter than 8 bytes, a length field below 8, a length field past the packet.
#[test]
fn malformed_datagrams_are_counted_drops() {
    let mut t = script();
    let s = t.stack.udp_bind(at(LOCAL, 7)).unwrap();
    let from = at(PEER, PEER_PORT);
    let cases = [
        Make { ip_payload: Some(5), ..Make::default() },
        Make { length_field: Some(4), ..Make::default() },
        Make { length_field: Some(200), ..Make::default() },
    ];
    for m in cases {
        t.inject_raw(&datagram(&t, from, at(LOCAL, 7), b"0123456789", m));
    }
    assert_eq!(t.stack.counters().dropped(DropReason::Malformed), 3);
    assert_eq!(t.stack.udp_recv_from(s, &mut [0u8; 16]), Err(Error::WouldBlock));
    assert!(sent(&mut t).is_empty(), "no reply to a malformed datagram");
}

/// RFC 1122 §4.1.3.1 / RFC 792: a datagram to a port nobody is bound to is answered with
/// ICMP destination unreachable, code 3 (port), from the address it went to, quoting the
/// datagram's IP header and its data (up to 576 bytes in all, RFC 1812 §4.3.2.3).
#[test]
fn a_closed_port_answers_icmp_port_unreachable_quoting_the_datagram() {
    let mut t = script();
    let f = datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 9999), &[0xab; 1000], Make::default());
    t.inject_raw(&f);
    let out = sent(&mut t);
    assert_eq!(out.len(), 1);
    let (src, dst, proto, icmp) = &out[0];
    assert_eq!((*src, *dst, *proto), (LOCAL, PEER, IpProtocol::ICMP));
    assert_eq!((icmp[0], icmp[1]), (3, 3), "destination unreachable, port");
    assert_eq!(checksum::sum(icmp), 0xffff, "ICMP checksum");
    assert_eq!(icmp.len(), 576 - 20, "quote cut to fit 576 bytes");
    assert_eq!(&icmp[8..], &f[14..14 + 576 - 20 - 8], "the original IP header and data");
    assert_eq!(t.stack.counters().icmp_unreachable_sent, 1);
    assert_eq!(t.stack.counters().dropped(DropReason::UdpNoPort), 1);
}

/// Linux's limits: six errors in a burst to one destination, then one a second.
#[test]
fn icmp_port_unreachable_is_rate_limited_per_destination() {
    let mut t = script();
    for _ in 0..20 {
        t.inject_raw(&datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 9999), b"x", Make::default()));
    }
    assert_eq!(sent(&mut t).len(), 6);
    assert_eq!(t.stack.counters().icmp_rate_limited, 14);
    t.now += Duration::from_millis(1000);
    for _ in 0..5 {
        t.inject_raw(&datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 9999), b"x", Make::default()));
    }
    assert_eq!(sent(&mut t).len(), 1, "one more after a second");
    assert_eq!(t.stack.counters().dropped(DropReason::UdpNoPort), 25);
}

/// A corrupted datagram to a closed port earns no ICMP error (Linux verifies first).
#[test]
fn no_icmp_error_for_a_corrupted_datagram() {
    let mut t = script();
    t.inject_raw(&datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 9999), b"x", Make { corrupt: true, ..Make::default() }));
    assert!(sent(&mut t).is_empty());
    assert_eq!(t.stack.counters().dropped(DropReason::BadChecksum), 1);
}

/// udp_send_to: one datagram, from the bound address and port, with a checksum that
/// verifies; the largest that fits the MTU goes, one byte more is MessageTooLong (no
/// fragmentation).
#[test]
fn send_to_builds_one_datagram_with_a_good_checksum() {
    let mut t = script();
    let s = t.stack.udp_bind(at(Ipv4Addr::UNSPECIFIED, 4000)).unwrap();
    assert_eq!(t.stack.udp_send_to(s, b"hello", at(PEER, 53)), Ok(5));
    let out = sent(&mut t);
    assert_eq!(out.len(), 1);
    let (src, dst, proto, udp) = &out[0];
    assert_eq!((*src, *dst, *proto), (LOCAL, PEER, IpProtocol::UDP));
    let p = UdpPacket::new_checked(&udp[..]).unwrap();
    assert_eq!((p.src_port(), p.dst_port(), p.len(), p.payload()), (4000, 53, 13, &b"hello"[..]));
    assert_ne!(p.checksum(), 0);
    assert!(p.verify_checksum(LOCAL, PEER));

    let max = vec![0x5a; 1500 - 20 - 8];
    assert_eq!(t.stack.udp_send_to(s, &max, at(PEER, 53)), Ok(1472));
    assert_eq!(t.stack.udp_send_to(s, &[0; 1473], at(PEER, 53)), Err(Error::MessageTooLong));
    assert_eq!(t.stack.udp_send_to(s, b"x", at(PEER, 0)), Err(Error::InvalidArgument));
    assert_eq!(t.stack.udp_send_to(s, b"x", at(Ipv4Addr::BROADCAST, 53)), Err(Error::InvalidArgument));
    assert_eq!(
        t.stack.udp_send_from(s, b"x", at(Ipv4Addr::new(1, 2, 3, 4), 4000), at(PEER, 53)),
        Err(Error::InvalidArgument)
    );
    assert_eq!(t.stack.udp_send_to(s, b"x", at(Ipv4Addr::new(8, 8, 8, 8), 53)), Err(Error::Unreachable));
    let out = sent(&mut t);
    assert_eq!(out.len(), 1);
    assert!(UdpPacket::new_checked(&out[0].3[..]).unwrap().verify_checksum(LOCAL, PEER));
    assert_eq!(t.stack.counters().udp_out, 2);
}

/// Binding: a taken address and port is AddrInUse, also across the wildcard address; port
/// 0 picks an ephemeral port (RFC 6335 range); close frees the port and stales the handle.
#[test]
fn bind_conflicts_ephemeral_ports_and_stale_handles() {
    let mut t = script();
    let a = t.stack.udp_bind(at(LOCAL, 53)).unwrap();
    assert_eq!(t.stack.udp_bind(at(LOCAL, 53)), Err(Error::AddrInUse));
    assert_eq!(t.stack.udp_bind(at(Ipv4Addr::UNSPECIFIED, 53)), Err(Error::AddrInUse));
    let e = t.stack.udp_bind(at(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    let port = t.stack.udp_local_addr(e).unwrap().port();
    assert!(port >= 49152, "{port}");
    t.stack.udp_close(a).unwrap();
    assert_eq!(t.stack.udp_recv_from(a, &mut [0u8; 4]), Err(Error::InvalidHandle));
    assert_eq!(t.stack.udp_close(a), Err(Error::InvalidHandle));
    let b = t.stack.udp_bind(at(Ipv4Addr::UNSPECIFIED, 53)).unwrap();
    assert_ne!(a, b, "a reused slot has a new generation");
}

/// The receive queue is bounded in bytes (payload plus a fixed charge per datagram, as
/// Linux's rmem): past it, datagrams are dropped and counted (Linux `RcvbufErrors`), and
/// reading makes room again.
#[test]
fn a_full_receive_queue_drops_and_counts() {
    let mut c = stack_config();
    c.udp.recv_buffer = 10 * (100 + ackclock::udp::DATAGRAM_OVERHEAD);
    let mut t = Script::with_config(c, Capabilities::ethernet(1500));
    let s = t.stack.udp_bind(at(LOCAL, 7)).unwrap();
    for i in 0..15u8 {
        t.inject_raw(&datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 7), &[i; 100], Make::default()));
    }
    assert_eq!(t.stack.counters().dropped(DropReason::UdpRcvbuf), 5);
    let mut buf = [0u8; 200];
    for i in 0..10u8 {
        let r = t.stack.udp_recv_from(s, &mut buf).unwrap();
        assert_eq!(&buf[..r.len], &[i; 100][..]);
    }
    t.inject_raw(&datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 7), &[99; 100], Make::default()));
    assert_eq!(t.stack.udp_recv_from(s, &mut buf).unwrap().len, 100);
}

/// A transparent proxy's socket: with `any_destination`, a datagram to any address and
/// port is delivered with its original destination, and the reply goes out from it.
#[test]
fn bind_any_receives_every_destination_and_replies_as_it() {
    let mut c = stack_config();
    c.iface.any_destination = true;
    let mut t = Script::with_config(c, Capabilities::ethernet(1500));
    let any = t.stack.udp_bind_any().unwrap();
    let dns = at(Ipv4Addr::new(8, 8, 8, 8), 53);
    let own = t.stack.udp_bind(at(LOCAL, 7)).unwrap();
    t.inject_raw(&datagram(&t, at(PEER, PEER_PORT), dns, b"q", Make::default()));
    t.inject_raw(&datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 7), b"mine", Make::default()));
    let mut buf = [0u8; 8];
    let r = t.stack.udp_recv_from(any, &mut buf).unwrap();
    assert_eq!((r.from, r.to, &buf[..r.len]), (at(PEER, PEER_PORT), dns, &b"q"[..]));
    assert_eq!(t.stack.udp_recv_from(any, &mut buf), Err(Error::WouldBlock), "a bound port takes its own");
    assert_eq!(t.stack.udp_recv_from(own, &mut buf).unwrap().len, 4);
    assert_eq!(t.stack.udp_send_from(any, b"a", dns, at(PEER, PEER_PORT)), Ok(1));
    let out = sent(&mut t);
    assert_eq!(out.len(), 1);
    let (src, dst, _, udp) = &out[0];
    assert_eq!((*src, *dst), (*dns.ip(), PEER));
    let p = UdpPacket::new_checked(&udp[..]).unwrap();
    assert_eq!((p.src_port(), p.dst_port()), (53, PEER_PORT));
    assert!(p.verify_checksum(*dns.ip(), PEER));
    assert_eq!(t.stack.udp_bind_any(), Err(Error::AddrInUse));
    assert_eq!(
        t.stack.udp_send_to(any, b"a", at(PEER, PEER_PORT)),
        Err(Error::InvalidArgument),
        "an any socket names its source"
    );
}

/// 10,000 datagrams of varied sizes between two stacks over the pipe, read as they arrive:
/// every one arrives, in order, byte-exact (an unimpaired path loses none).
#[test]
fn ten_thousand_datagrams_over_the_pipe_arrive_whole() {
    let (mut da, mut db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let caps = Capabilities::ethernet(1500);
    let (a_ip, b_ip) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let config = |ip| {
        let mut c = StackConfig::new(InterfaceConfig::new(ip, 24));
        c.seed = 3;
        c
    };
    let mut now = Instant::from_secs(1);
    let mut a = Stack::new(config(a_ip), caps, now).unwrap();
    let mut b = Stack::new(config(b_ip), caps, now).unwrap();
    let sa = a.udp_bind(at(a_ip, 1000)).unwrap();
    let sb = b.udp_bind(at(b_ip, 2000)).unwrap();
    // Resolve the neighbour first, so that the measured part starts with a known one (frames
    // parked while ARP runs are bounded: 64 per neighbour).
    a.udp_send_to(sa, b"hello", at(b_ip, 2000)).unwrap();
    let mut buf = vec![0u8; 2048];
    while b.udp_recv_from(sb, &mut buf).is_err() {
        a.poll(now, &mut da);
        b.poll(now, &mut db);
        now += Duration::from_micros(100);
        assert!(now < Instant::from_secs(5), "ARP resolves");
    }
    let body = |i: u32| -> Vec<u8> { (0..(i * 37 % 1400) as usize + 1).map(|k| (i as usize * 31 + k) as u8).collect() };
    let (mut sent_n, mut got) = (0u32, 0u32);
    while got < 10_000 {
        // Send a burst of up to 32, then let both stacks run.
        for _ in 0..32 {
            if sent_n == 10_000 {
                break;
            }
            match a.udp_send_to(sa, &body(sent_n), at(b_ip, 2000)) {
                Ok(_) => sent_n += 1,
                Err(Error::NoBufferSpace) => break,
                Err(e) => panic!("send {sent_n}: {e}"),
            }
        }
        a.poll(now, &mut da);
        b.poll(now, &mut db);
        while let Ok(r) = b.udp_recv_from(sb, &mut buf) {
            assert_eq!(r.from, at(a_ip, 1000));
            assert!(buf[..r.len] == body(got), "datagram {got}");
            got += 1;
        }
        now += Duration::from_micros(100);
        assert!(now < Instant::from_secs(60), "stalled at {got}");
    }
    assert_eq!(b.counters().udp_delivered, 10_001);
    assert_eq!(b.counters().drops(), 0, "{:?}", b.counters());
    assert_eq!(a.counters().udp_out, 10_001);
    assert_eq!(a.iface().arp().pending_dropped, 0);
}

/// A first burst to a neighbour not yet resolved waits for the ARP reply instead of losing
/// all but a few (Linux parks about 90 full-size frames per neighbour, `unres_qlen_bytes`):
/// 32 datagrams sent at once, before any ARP exchange, all arrive.
#[test]
fn a_first_burst_waits_for_arp_and_arrives_whole() {
    let (mut da, mut db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let caps = Capabilities::ethernet(1500);
    let (a_ip, b_ip) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let mut now = Instant::from_secs(1);
    let mut a = Stack::new(StackConfig::new(InterfaceConfig::new(a_ip, 24)), caps, now).unwrap();
    let mut b = Stack::new(StackConfig::new(InterfaceConfig::new(b_ip, 24)), caps, now).unwrap();
    let sa = a.udp_bind(at(a_ip, 1000)).unwrap();
    let sb = b.udp_bind(at(b_ip, 2000)).unwrap();
    for i in 0..32u8 {
        a.udp_send_to(sa, &[i; 100], at(b_ip, 2000)).unwrap();
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 200];
    while got.len() < 32 && now < Instant::from_secs(5) {
        a.poll(now, &mut da);
        b.poll(now, &mut db);
        while let Ok(r) = b.udp_recv_from(sb, &mut buf) {
            got.push(buf[0]);
            assert_eq!(r.len, 100);
        }
        now += Duration::from_millis(1);
    }
    assert_eq!(got, (0..32).collect::<Vec<u8>>(), "every datagram, in order");
    assert_eq!(a.iface().arp().pending_dropped, 0);
}

/// Every datagram queued for `s`: (source, payload).
fn recv_all(t: &mut Script, s: ackclock::udp::UdpHandle) -> Vec<(SocketAddrV4, Vec<u8>)> {
    let mut buf = [0u8; 64];
    let mut got = Vec::new();
    while let Ok(r) = t.stack.udp_recv_from(s, &mut buf) {
        got.push((r.from, buf[..r.len].to_vec()));
    }
    got
}

/// Linux's `udp_lib_lookup`: a connected socket takes only its peer's datagrams. One from
/// another source (here the same host, another port) to the same port is answered as a
/// closed port's: exactly one ICMP port unreachable, quoting it, and a UdpNoPort drop.
#[test]
fn a_connected_socket_takes_only_its_peers_datagrams() {
    let mut t = script();
    let s = t.stack.udp_bind(at(LOCAL, 53)).unwrap();
    t.stack.udp_connect(s, at(PEER, PEER_PORT)).unwrap();
    assert_eq!(t.stack.udp_peer_addr(s), Ok(at(PEER, PEER_PORT)));
    let stranger = datagram(&t, at(PEER, PEER_PORT + 1), at(LOCAL, 53), b"stranger", Make::default());
    t.inject_raw(&stranger);
    t.inject_raw(&datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 53), b"peer", Make::default()));
    assert_eq!(recv_all(&mut t, s), vec![(at(PEER, PEER_PORT), b"peer".to_vec())]);
    let out = sent(&mut t);
    assert_eq!(out.len(), 1, "one ICMP error, nothing else");
    let (src, dst, proto, icmp) = &out[0];
    assert_eq!((*src, *dst, *proto), (LOCAL, PEER, IpProtocol::ICMP));
    assert_eq!((icmp[0], icmp[1]), (3, 3), "destination unreachable, port");
    assert_eq!(&icmp[8..], &stranger[14..], "quotes the stranger's datagram");
    let c = t.stack.counters();
    assert_eq!((c.udp_in, c.udp_delivered, c.icmp_unreachable_sent), (2, 1, 1));
    assert_eq!(c.dropped(DropReason::UdpNoPort), 1);
}

/// Strangers' datagrams to a connected socket's port draw ICMP errors under the same rate
/// limit as a closed port's: six in a burst to one destination.
#[test]
fn icmp_errors_for_a_connected_port_are_rate_limited() {
    let mut t = script();
    let s = t.stack.udp_bind(at(LOCAL, 53)).unwrap();
    t.stack.udp_connect(s, at(PEER, PEER_PORT)).unwrap();
    for _ in 0..10 {
        t.inject_raw(&datagram(&t, at(PEER, 7), at(LOCAL, 53), b"x", Make::default()));
    }
    assert_eq!(sent(&mut t).len(), 6);
    assert_eq!(t.stack.counters().icmp_rate_limited, 4);
    assert_eq!(t.stack.counters().dropped(DropReason::UdpNoPort), 10);
    assert!(recv_all(&mut t, s).is_empty());
}

/// A stranger's datagram to a connected socket's port goes to the socket that would take
/// it were the port not bound: the transparent one of `udp_bind_any`, with its original
/// destination; no ICMP error.
#[test]
fn a_strangers_datagram_to_a_connected_port_goes_to_the_any_socket() {
    let mut c = stack_config();
    c.iface.any_destination = true;
    let mut t = Script::with_config(c, Capabilities::ethernet(1500));
    let any = t.stack.udp_bind_any().unwrap();
    let s = t.stack.udp_bind(at(LOCAL, 53)).unwrap();
    t.stack.udp_connect(s, at(PEER, PEER_PORT)).unwrap();
    t.inject_raw(&datagram(&t, at(PEER, 9), at(LOCAL, 53), b"stranger", Make::default()));
    t.inject_raw(&datagram(&t, at(PEER, PEER_PORT), at(LOCAL, 53), b"peer", Make::default()));
    assert_eq!(recv_all(&mut t, s), vec![(at(PEER, PEER_PORT), b"peer".to_vec())]);
    let mut buf = [0u8; 16];
    let r = t.stack.udp_recv_from(any, &mut buf).unwrap();
    assert_eq!((r.from, r.to, &buf[..r.len]), (at(PEER, 9), at(LOCAL, 53), &b"stranger"[..]));
    assert!(sent(&mut t).is_empty(), "no ICMP error");
    assert_eq!(t.stack.udp_connect(any, at(PEER, PEER_PORT)), Err(Error::InvalidArgument), "an any socket");
}

/// `udp_send` goes to the peer, from the socket's port; a socket bound to 0.0.0.0 is bound
/// to the interface's address once connected (Linux takes it from the route), and a send
/// to another address still works, as on Linux. Connecting again changes the peer.
#[test]
fn send_without_an_address_goes_to_the_peer() {
    let mut t = script();
    let s = t.stack.udp_bind(at(Ipv4Addr::UNSPECIFIED, 4000)).unwrap();
    t.stack.udp_connect(s, at(PEER, 53)).unwrap();
    assert_eq!(t.stack.udp_local_addr(s), Ok(at(LOCAL, 4000)));
    assert_eq!(t.stack.udp_send(s, b"hello"), Ok(5));
    assert_eq!(t.stack.udp_send_to(s, b"other", at(PEER, 54)), Ok(5));
    t.stack.udp_connect(s, at(PEER, 55)).unwrap();
    assert_eq!(t.stack.udp_send(s, b"again"), Ok(5));
    let out = sent(&mut t);
    let got: Vec<_> = out
        .iter()
        .map(|(src, dst, proto, udp)| {
            assert_eq!((*src, *dst, *proto), (LOCAL, PEER, IpProtocol::UDP));
            let p = UdpPacket::new_checked(&udp[..]).unwrap();
            assert!(p.verify_checksum(LOCAL, PEER));
            (p.src_port(), p.dst_port(), p.payload().to_vec())
        })
        .collect();
    assert_eq!(got, vec![(4000, 53, b"hello".to_vec()), (4000, 54, b"other".to_vec()), (4000, 55, b"again".to_vec())]);
    // The port is still the socket's: bound on every address or on this one, it clashes.
    assert_eq!(t.stack.udp_bind(at(Ipv4Addr::UNSPECIFIED, 4000)), Err(Error::AddrInUse));
    assert_eq!(t.stack.udp_bind(at(LOCAL, 4000)), Err(Error::AddrInUse));
    t.stack.udp_close(s).unwrap();
    t.stack.udp_bind(at(Ipv4Addr::UNSPECIFIED, 4000)).expect("closing frees the port");
}

/// Datagrams queued before `connect` stay queued, whoever sent them (Linux does not flush
/// them); later ones from others are refused.
#[test]
fn datagrams_queued_before_connect_stay_queued() {
    let mut t = script();
    let s = t.stack.udp_bind(at(LOCAL, 53)).unwrap();
    t.inject_raw(&datagram(&t, at(PEER, 9), at(LOCAL, 53), b"early", Make::default()));
    t.stack.udp_connect(s, at(PEER, PEER_PORT)).unwrap();
    t.inject_raw(&datagram(&t, at(PEER, 9), at(LOCAL, 53), b"late", Make::default()));
    assert_eq!(recv_all(&mut t, s), vec![(at(PEER, 9), b"early".to_vec())]);
    assert_eq!(t.stack.counters().dropped(DropReason::UdpNoPort), 1);
}

/// Errors: no peer is NotConnected (`ENOTCONN` for getpeername; Linux's send gives
/// `EDESTADDRREQ`); port 0, 0.0.0.0 and the broadcast address are InvalidArgument; an
/// address with no route is Unreachable; a stale handle is InvalidHandle. A failed connect
/// leaves the socket as it was.
#[test]
fn unconnected_sends_and_bad_connect_targets_are_typed_errors() {
    let mut t = script();
    let s = t.stack.udp_bind(at(Ipv4Addr::UNSPECIFIED, 4000)).unwrap();
    assert_eq!(t.stack.udp_peer_addr(s), Err(Error::NotConnected));
    assert_eq!(t.stack.udp_send(s, b"x"), Err(Error::NotConnected));
    for bad in [at(PEER, 0), at(Ipv4Addr::UNSPECIFIED, 53), at(Ipv4Addr::BROADCAST, 53)] {
        assert_eq!(t.stack.udp_connect(s, bad), Err(Error::InvalidArgument), "{bad}");
    }
    assert_eq!(t.stack.udp_connect(s, at(Ipv4Addr::new(8, 8, 8, 8), 53)), Err(Error::Unreachable));
    assert_eq!(t.stack.udp_peer_addr(s), Err(Error::NotConnected));
    assert_eq!(t.stack.udp_local_addr(s), Ok(at(Ipv4Addr::UNSPECIFIED, 4000)), "still on every address");
    assert!(sent(&mut t).is_empty());
    t.stack.udp_close(s).unwrap();
    assert_eq!(t.stack.udp_connect(s, at(PEER, 53)), Err(Error::InvalidHandle));
    assert_eq!(t.stack.udp_peer_addr(s), Err(Error::InvalidHandle));
}
