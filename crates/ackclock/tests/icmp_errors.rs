//! ICMP Destination Unreachable for our own TCP segments and UDP datagrams (RFC 1122
//! §3.2.2.1, §4.1.3.3, §4.2.3.9; RFC 5461; RFC 5927 §4.1), as Linux's `tcp_v4_err` and
//! `__udp4_lib_err` take them: a connection attempt ends at once, a synchronized connection
//! keeps the error for its timeout, a connected UDP socket's next call fails with it, and a
//! message quoting nothing in flight changes nothing. Packet level: the stack at LOCAL/24,
//! the peer and a router on the link. Before, every such message was counted as ignored:
//! a connect to an unreachable host waited out its SYN retries (over two minutes).

mod common;

use ackclock::udp::UdpHandle;
use ackclock::wire::{IpProtocol, Ipv4Packet, Ipv4Repr};
use ackclock::{Error, TcpHandle};
use common::script::*;
use core::net::{Ipv4Addr, SocketAddrV4};

/// A port the peer serves on.
const PORT: u16 = 80;

/// The router's Destination Unreachable with `code`, quoting a `protocol` datagram from
/// `src` to `dst` whose transport header starts with the ports and then `word` (a TCP
/// sequence number; for UDP its length and checksum).
fn unreachable(code: u8, protocol: IpProtocol, src: SocketAddrV4, dst: SocketAddrV4, word: u32) -> Vec<u8> {
    icmp_error(3, code, protocol, src, dst, word)
}

/// An ICMP error of `icmp_type` and `code` quoting as [`unreachable`] does.
fn icmp_error(
    icmp_type: u8,
    code: u8,
    protocol: IpProtocol,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    word: u32,
) -> Vec<u8> {
    let mut quote = vec![0u8; 28];
    Ipv4Repr::new(*src.ip(), *dst.ip(), protocol, 20 + 40).emit(&mut Ipv4Packet::new_unchecked(&mut quote[..20]), true);
    quote[20..22].copy_from_slice(&src.port().to_be_bytes());
    quote[22..24].copy_from_slice(&dst.port().to_be_bytes());
    quote[24..28].copy_from_slice(&word.to_be_bytes());
    let mut icmp = vec![icmp_type, code, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&quote);
    icmp_from_router(icmp)
}

/// A connect to PEER:80 with its SYN taken: the handle, our port and our ISS.
fn connecting() -> (Script, TcpHandle, u16, u32) {
    connecting_with(tcp_config())
}

fn connecting_with(cfg: ackclock::tcp::TcpConfig) -> (Script, TcpHandle, u16, u32) {
    let mut t = Script::new(cfg);
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, PORT)).unwrap();
    let syn = t.expect(0, seg("S").seq(0).any_options());
    let iss = t.local_seq(0);
    (t, c, syn.src_port, iss)
}

fn ours(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(LOCAL, port)
}

fn theirs() -> SocketAddrV4 {
    SocketAddrV4::new(PEER, PORT)
}

/// RFC 5461 §4.1 (and Linux `tcp_v4_err`, SYN-SENT): a Destination Unreachable for our SYN
/// ends the attempt at once with the error it stands for; nothing more is sent. Port
/// unreachable is a refusal, host unreachable "no route to host", network unreachable its
/// own.
#[test]
fn rfc5461_4_1_a_connect_ends_at_the_first_unreachable_for_its_syn() {
    for (code, want) in
        [(1, Error::HostUnreachable), (3, Error::Refused), (0, Error::Unreachable), (13, Error::HostUnreachable)]
    {
        let (mut t, c, port, iss) = connecting();
        t.at(5);
        t.inject_raw(&unreachable(code, IpProtocol::TCP, ours(port), theirs(), iss));
        let r = t.stack.tcp_readiness(c).unwrap();
        assert_eq!((r.error, r.closed), (Some(want), true), "code {code}");
        assert_eq!(t.stack.tcp_send(c, b"x"), Err(want), "code {code}");
        let k = t.stack.counters();
        assert_eq!((k.icmp_connect_aborts, k.failed_opens, k.icmp_ignored), (1, 1, 0), "code {code}");
        assert!(t.run_to(5000).is_empty(), "no SYN retry after the abort (code {code})");
    }
}

/// RFC 5927 §4.1: the quoted segment must be one in flight. A message quoting another
/// sequence number (a blind forgery), another port, or a code past RFC 1812's 15 changes
/// nothing: the SYN is retried as before.
#[test]
fn rfc5927_4_1_an_unreachable_quoting_nothing_in_flight_is_ignored() {
    let (mut t, c, port, iss) = connecting();
    t.at(5);
    t.inject_raw(&unreachable(1, IpProtocol::TCP, ours(port), theirs(), iss.wrapping_add(1000)));
    t.inject_raw(&unreachable(1, IpProtocol::TCP, ours(port.wrapping_add(1)), theirs(), iss));
    t.inject_raw(&unreachable(16, IpProtocol::TCP, ours(port), theirs(), iss));
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, None);
    assert_eq!(t.stack.counters().icmp_ignored, 3);
    t.expect(1000, seg("S").seq(0).any_options());
}

/// An established connection.
fn established() -> (Script, TcpHandle, u16) {
    established_with(tcp_config())
}

fn established_with(cfg: ackclock::tcp::TcpConfig) -> (Script, TcpHandle, u16) {
    let (mut t, c, port, _) = connecting_with(cfg);
    t.inject(1, seg("S.").seq(PEER_ISS).ack(1).win(65535).mss(1460).port(port).peer_port(PORT));
    t.expect(1, seg(".").seq(1).ack(PEER_ISS + 1).any_options());
    (t, c, port)
}

/// RFC 1122 §4.2.3.9: network and host unreachable are soft errors, and "TCP MUST NOT abort
/// the connection"; RFC 5927 §5.2 takes the hard ones as soft too once synchronized. The
/// connection goes on; when its retransmissions run out with nothing heard from the peer
/// since, the error reported is the router's, not `TimedOut` (Linux `sk_err_soft`).
#[test]
fn rfc1122_4_2_3_9_an_established_connection_keeps_the_error_for_its_timeout() {
    let (mut t, c, port) = established();
    t.stack.tcp_send(c, &[5u8; 100]).unwrap();
    t.expect(2, seg("P.").seq(1).ack(PEER_ISS + 1).len(100).any_options());
    t.at(3);
    t.inject_raw(&unreachable(3, IpProtocol::TCP, ours(port), theirs(), t.local_seq(1)));
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, None, "not aborted");
    assert_eq!(t.stack.counters().icmp_soft_errors, 1);
    // The retransmission timer runs on: it retransmits, and gives up in the end.
    t.expect(1003, seg("P.").seq(1).ack(PEER_ISS + 1).len(100).any_options());
    t.run_to(20 * 60 * 1000);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, Some(Error::Refused));
}

/// The soft error is forgotten once the peer is heard from again: a later timeout is a
/// plain `TimedOut` (Linux clears `sk_err_soft` on an acceptable ACK).
#[test]
fn rfc1122_4_2_3_9_a_soft_error_older_than_the_last_segment_received_is_not_reported() {
    let (mut t, c, port) = established();
    t.stack.tcp_send(c, &[5u8; 100]).unwrap();
    t.expect(2, seg("P.").seq(1).ack(PEER_ISS + 1).len(100).any_options());
    t.at(3);
    t.inject_raw(&unreachable(1, IpProtocol::TCP, ours(port), theirs(), t.local_seq(1)));
    t.inject(4, seg(".").seq(PEER_ISS + 1).ack(101).win(65535).port(port).peer_port(PORT));
    t.stack.tcp_send(c, &[6u8; 100]).unwrap();
    t.run_to(20 * 60 * 1000);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, Some(Error::TimedOut));
}

fn udp_connected(t: &mut Script) -> UdpHandle {
    let s = t.stack.udp_bind(ours(5000)).unwrap();
    t.stack.udp_connect(s, SocketAddrV4::new(PEER, 53)).unwrap();
    assert_eq!(t.stack.udp_send(s, b"query"), Ok(5));
    s
}

/// RFC 1122 §4.1.3.3 (UDP MUST pass ICMP errors to the application), as Linux without
/// `IP_RECVERR`: a port unreachable for a connected socket's datagram makes its next call
/// fail with `Refused`, once; the socket reads as ready so that a blocked reader wakes.
#[test]
fn rfc1122_4_1_3_3_a_connected_udp_socket_hears_of_port_unreachable_once() {
    let mut t = Script::new(tcp_config());
    let s = udp_connected(&mut t);
    t.discard();
    t.inject_raw(&unreachable(3, IpProtocol::UDP, ours(5000), SocketAddrV4::new(PEER, 53), 0));
    assert_eq!(t.stack.udp_readable(s), Ok(true));
    let mut buf = [0u8; 64];
    assert_eq!(t.stack.udp_recv_from(s, &mut buf), Err(Error::Refused));
    assert_eq!(t.stack.udp_recv_from(s, &mut buf), Err(Error::WouldBlock), "reported once");
    assert_eq!(t.stack.udp_readable(s), Ok(false));
    assert_eq!(t.stack.counters().icmp_udp_errors, 1);
    // The next one fails a send instead.
    t.inject_raw(&unreachable(10, IpProtocol::UDP, ours(5000), SocketAddrV4::new(PEER, 53), 0));
    assert_eq!(t.stack.udp_send(s, b"again"), Err(Error::HostUnreachable));
    assert_eq!(t.stack.udp_send(s, b"again"), Ok(5));
}

/// Linux `__udp4_lib_err`: soft errors (network or host unreachable) are not reported to a
/// UDP socket, nor is any error to a socket that is not connected to the quoted
/// destination (it could not tell which peer the error concerns).
#[test]
fn udp_soft_errors_and_unconnected_sockets_hear_nothing() {
    let mut t = Script::new(tcp_config());
    let s = udp_connected(&mut t);
    let u = t.stack.udp_bind(ours(6000)).unwrap();
    assert_eq!(t.stack.udp_send_to(u, b"hello", SocketAddrV4::new(PEER, 53)), Ok(5));
    t.discard();
    t.inject_raw(&unreachable(1, IpProtocol::UDP, ours(5000), SocketAddrV4::new(PEER, 53), 0));
    t.inject_raw(&unreachable(3, IpProtocol::UDP, ours(5000), SocketAddrV4::new(PEER, 54), 0));
    t.inject_raw(&unreachable(3, IpProtocol::UDP, ours(6000), SocketAddrV4::new(PEER, 53), 0));
    assert_eq!(t.stack.udp_readable(s), Ok(false));
    assert_eq!(t.stack.udp_readable(u), Ok(false));
    let k = t.stack.counters();
    assert_eq!((k.icmp_udp_errors, k.icmp_ignored), (0, 3));
}

/// A router's Datagram Too Big (RFC 1191) reporting `mtu` for a UDP datagram from `src`
/// to `dst`.
fn udp_too_big(src: SocketAddrV4, dst: SocketAddrV4, mtu: u16) -> Vec<u8> {
    let mut quote = vec![0u8; 28];
    Ipv4Repr::new(*src.ip(), *dst.ip(), IpProtocol::UDP, 20 + 8 + 1472)
        .emit(&mut Ipv4Packet::new_unchecked(&mut quote[..20]), true);
    quote[20..22].copy_from_slice(&src.port().to_be_bytes());
    quote[22..24].copy_from_slice(&dst.port().to_be_bytes());
    let mut icmp = vec![3, 4, 0, 0, 0, 0];
    icmp.extend_from_slice(&mtu.to_be_bytes());
    icmp.extend_from_slice(&quote);
    icmp_from_router(icmp)
}

/// RFC 1191 §5 for UDP: a Datagram Too Big for a connected socket's datagram to its peer
/// sets the destination's path MTU for every socket and connection to it, and the socket
/// fails its next call with EMSGSIZE, once. With DF set and no fragmentation, a datagram
/// larger than the path MTU then fails at once (Linux's `IP_PMTUDISC_DO`) instead of
/// vanishing on the way. Stricter than Linux (RFC 8085 §5.2): one naming an unconnected
/// socket, or a connected one's other destination, teaches nothing, so that a message
/// forged against a well-known port cannot shrink the path to anyone.
#[test]
fn rfc1191_a_datagram_too_big_for_udp_sets_the_path_mtu() {
    let mut t = Script::new(tcp_config());
    let s = udp_connected(&mut t);
    let u = t.stack.udp_bind(ours(6000)).unwrap();
    let dns = SocketAddrV4::new(PEER, 53);
    assert_eq!(t.stack.udp_send_to(u, &[0u8; 1472], dns), Ok(1472), "the link's MTU");
    t.discard();
    t.inject_raw(&udp_too_big(ours(5000), dns, 1280));
    assert_eq!((t.stack.iface().path_mtu(PEER), t.stack.counters().pmtu_udp), (1280, 1));
    assert_eq!(t.stack.udp_readable(s), Ok(true));
    let mut buf = [0u8; 64];
    assert_eq!(t.stack.udp_recv_from(s, &mut buf), Err(Error::MessageTooLong));
    assert_eq!(t.stack.udp_readable(s), Ok(false), "reported once");
    assert_eq!(t.stack.udp_readable(u), Ok(false), "an unconnected socket is not told");
    assert_eq!(t.stack.udp_send_to(u, &[0u8; 1253], dns), Err(Error::MessageTooLong));
    assert_eq!(t.stack.udp_send_to(u, &[0u8; 1252], dns), Ok(1252));
    assert_eq!(t.stack.udp_send(s, &[0u8; 1252]), Ok(1252));
    let other = Ipv4Addr::new(192, 168, 0, 3);
    assert_eq!(t.stack.udp_send_to(u, &[0u8; 1472], SocketAddrV4::new(other, 53)), Ok(1472));
    // An unconnected socket's port, the connected one's other destination, no socket.
    t.inject_raw(&udp_too_big(ours(6000), SocketAddrV4::new(other, 53), 600));
    t.inject_raw(&udp_too_big(ours(5000), SocketAddrV4::new(other, 53), 600));
    t.inject_raw(&udp_too_big(ours(7000), SocketAddrV4::new(other, 53), 600));
    assert_eq!(t.stack.iface().path_mtu(other), 1500);
    assert_eq!(t.stack.udp_readable(s), Ok(false));
    assert_eq!((t.stack.counters().pmtu_ignored, t.stack.counters().pmtu_udp), (3, 1));
}

/// The time (ms) and what the stack sends next, stepping 1 ms at a time up to `limit`.
fn next_sent(t: &mut Script, limit: u64) -> (u64, Sent) {
    while t.ms() < limit {
        let next = t.ms() + 1;
        if let Some(first) = t.run_to(next).into_iter().next() {
            return first;
        }
    }
    panic!("nothing sent by {limit} ms")
}

/// RFC 6069 §3 (TCP-LD): a host or network unreachable for the retransmission of SND.UNA's
/// segment while the timer is backed off takes one backoff back, and the timer runs from
/// that retransmission with the shorter RTO; if that time has passed, the segment goes
/// again at once. So a connection across an outage keeps probing at its pre-outage pace.
#[test]
fn rfc6069_3_an_unreachable_for_a_retransmission_reverts_one_backoff() {
    let (mut t, c, port) = established();
    t.stack.tcp_send(c, &[5u8; 100]).unwrap();
    t.expect(2, seg("P.").seq(1).ack(PEER_ISS + 1).len(100).any_options());
    let rto = t.stack.tcp_info(c).unwrap().rto.as_millis() as u64;
    let (r1, s) = next_sent(&mut t, 10_000);
    assert_eq!((s.seq, s.len), (1, 100), "the first retransmission");
    assert_eq!(t.stack.tcp_info(c).unwrap().rto.as_millis() as u64, 2 * rto, "backed off");
    // The router says the host is unreachable, quoting it, 10 ms later.
    t.at(r1 + 10);
    t.inject_raw(&unreachable(1, IpProtocol::TCP, ours(port), theirs(), t.local_seq(1)));
    assert_eq!(t.stack.tcp_info(c).unwrap().rto.as_millis() as u64, rto, "one backoff taken back");
    let (r2, _) = next_sent(&mut t, r1 + 4 * rto);
    assert_eq!(r2, r1 + rto, "the timer runs from the retransmission with the reverted RTO");
    // Now backed off again (2 RTO); an unreachable after one RTO has passed: at once.
    t.at(r2 + rto + 5);
    t.inject_raw(&unreachable(0, IpProtocol::TCP, ours(port), theirs(), t.local_seq(1)));
    let (r3, s) = next_sent(&mut t, r2 + 4 * rto);
    assert_eq!((r3, s.seq), (r2 + rto + 6, 1), "sent at the next timer run");
    let k = t.stack.counters();
    assert_eq!((k.icmp_rto_reverts, k.icmp_soft_errors), (2, 2));
    // A port unreachable is no path outage: no revert.
    t.at(r3 + 10);
    t.inject_raw(&unreachable(3, IpProtocol::TCP, ours(port), theirs(), t.local_seq(1)));
    assert_eq!(t.stack.counters().icmp_rto_reverts, 2);
}

/// A listener on LOCAL:8080 and the peer's SYN, answered: the listener and the SYN-ACK's
/// sequence number (absolute).
fn syn_received() -> (Script, ackclock::ListenerHandle, u32) {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(65535).mss(1460));
    t.expect(0, seg("S.").any_options().ack(PEER_ISS + 1));
    let iss = t.local_seq(0);
    (t, l, iss)
}

/// Linux `tcp_v4_err`, TCP_NEW_SYN_RECV: `tcp_req_err(sk, seq, abort)` with abort true for
/// network and host unreachable (codes 0 and 1, and time exceeded / parameter problem):
/// the request is dropped silently (`inet_csk_reqsk_queue_drop`), and its SYN-ACK is not
/// retransmitted to a host the router just said it cannot reach. (Found by review: the
/// first version kept it on these codes and dropped it on the hard ones.)
#[test]
fn linux_tcp_req_err_host_unreachable_drops_a_passive_syn_received() {
    for code in [0u8, 1] {
        let (mut t, _l, iss) = syn_received();
        t.at(5);
        t.inject_raw(&unreachable(code, IpProtocol::TCP, ours(8080), SocketAddrV4::new(PEER, PEER_PORT), iss));
        let resent: Vec<_> =
            t.run_to(10_000).into_iter().filter(|(_, s)| s.flags.contains(ackclock::wire::TcpFlags::SYN)).collect();
        assert!(resent.is_empty(), "code {code}: Linux drops the request; SYN-ACK retransmitted: {resent:?}");
    }
}

/// Linux `tcp_req_err` with abort false (port/protocol unreachable and the administrative
/// codes are *not* in the abort list for a request socket): the request stays, and the
/// peer's ACK still completes the handshake. RFC 5927 §4.1/§5.2 also argues against
/// letting a blind ICMP hard error kill state.
#[test]
fn linux_tcp_req_err_port_unreachable_keeps_a_passive_syn_received() {
    let (mut t, l, iss) = syn_received();
    t.at(5);
    t.inject_raw(&unreachable(3, IpProtocol::TCP, ours(8080), SocketAddrV4::new(PEER, PEER_PORT), iss));
    t.inject(6, seg(".").seq(PEER_ISS + 1).ack(1).win(65535));
    assert!(t.stack.tcp_accept(l).is_ok(), "the handshake completes, as on Linux");
}

/// With RFC 6069's reverts the retransmission limit is a time, not a count: the time the
/// `max_retries` backed-off expiries would have taken (Linux `retransmits_timed_out`).
/// Each revert shortens the next wait, so counting would end a connection across an outage
/// sooner the more the routers report it, the opposite of what TCP-LD is for. Here
/// `max_retries` is 3 and the RTO 200 ms: without reverts the connection gives up at
/// 200 + 400 + 800 + 1,600 = 3,000 ms after the data was sent; with an unreachable for every
/// retransmission it retransmits more often, and gives up no sooner.
#[test]
fn rfc6069_reverts_do_not_end_the_connection_sooner() {
    let cfg = ackclock::tcp::TcpConfig { max_retries: 3, ..tcp_config() };
    let (mut t, c, port) = established_with(cfg);
    t.stack.tcp_send(c, &[5u8; 100]).unwrap();
    t.expect(2, seg("P.").seq(1).ack(PEER_ISS + 1).len(100).any_options());
    assert_eq!(t.stack.tcp_info(c).unwrap().rto.as_millis(), 200);
    let mut retransmissions = 0;
    while t.stack.tcp_readiness(c).unwrap().error.is_none() {
        let now = t.ms();
        let Some((at, s)) = t.run_to(now + 1).into_iter().next() else { continue };
        assert_eq!((s.seq, s.len), (1, 100));
        retransmissions += 1;
        t.at(at + 1);
        t.inject_raw(&unreachable(1, IpProtocol::TCP, ours(port), theirs(), t.local_seq(1)));
        assert!(at < 10_000, "never gave up");
    }
    let gave_up = t.ms();
    assert!(retransmissions > 3, "{retransmissions} retransmissions: the reverts shortened the waits");
    assert!((3002..3010).contains(&gave_up), "gave up at {gave_up} ms, not before 3,002");
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, Some(ackclock::Error::HostUnreachable));
}

/// RFC 1122 §4.2.3.9: Time Exceeded "should be handled the same way as Destination
/// Unreachable codes 0, 1, 5": a soft error. As Linux (`tcp_v4_err`, EHOSTUNREACH): a
/// connect whose SYN it quotes ends with HostUnreachable; on an established connection it
/// is kept for the timeout, but, saying nothing of an outage, reverts no backoff (RFC
/// 6069 is for destination unreachables); a UDP socket is not told (soft).
#[test]
fn rfc1122_4_2_3_9_time_exceeded_is_a_soft_host_unreachable() {
    let (mut t, c, port, iss) = connecting();
    t.at(5);
    t.inject_raw(&icmp_error(11, 0, IpProtocol::TCP, ours(port), theirs(), iss));
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, Some(Error::HostUnreachable));
    assert_eq!(t.stack.counters().icmp_connect_aborts, 1);

    let (mut t, c, port) = established();
    t.stack.tcp_send(c, &[5u8; 100]).unwrap();
    t.expect(2, seg("P.").seq(1).ack(PEER_ISS + 1).len(100).any_options());
    let (r1, _) = next_sent(&mut t, 10_000);
    t.at(r1 + 10);
    t.inject_raw(&icmp_error(11, 0, IpProtocol::TCP, ours(port), theirs(), t.local_seq(1)));
    let k = t.stack.counters();
    assert_eq!((k.icmp_soft_errors, k.icmp_rto_reverts), (1, 0));
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, None);

    let mut t = Script::new(tcp_config());
    let s = udp_connected(&mut t);
    t.discard();
    t.inject_raw(&icmp_error(11, 0, IpProtocol::UDP, ours(5000), SocketAddrV4::new(PEER, 53), 0));
    assert_eq!(t.stack.udp_readable(s), Ok(false));
    assert_eq!(t.stack.counters().icmp_ignored, 1);
}
