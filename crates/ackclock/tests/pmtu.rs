//! Path MTU discovery (RFC 1191), TCP's half: a router's Datagram Too Big (ICMP type 3,
//! code 4) for a segment in flight lowers the connection's segment size and sends the
//! dropped data again in the new size; one that fails RFC 5927 §4.1's check, or reports an
//! MTU no smaller, changes nothing. Packet level: the stack at LOCAL/24, the peer and the
//! router on the link; the peer's SYN carries MSS 1460 and no other option.

mod common;

use ackclock::wire::{checksum, IpProtocol, Ipv4Packet, Ipv4Repr};
use ackclock::TcpHandle;
use common::script::*;
use core::net::{Ipv4Addr, SocketAddrV4};

const WIN: u16 = 65535;

/// An accepted connection on port 8080 with `n` bytes written and their segments taken.
fn sending(n: usize) -> (Script, TcpHandle) {
    let mut t = Script::new(tcp_config());
    let (_, c) = serve(&mut t);
    t.stack.tcp_send(c, &vec![7u8; n]).unwrap();
    (t, c)
}

/// A listener on port 8080 and the connection it accepted from the peer (SYN with MSS 1460).
fn serve(t: &mut Script) -> (ackclock::ListenerHandle, TcpHandle) {
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(WIN).mss(1460));
    (l, c)
}

/// At 5 ms, the router's Datagram Too Big reporting `mtu` for our segment at `rel`.
fn router_says(t: &mut Script, rel: u32, mtu: u16) {
    let f = too_big(t, LOCAL, rel, mtu);
    t.at(5);
    t.inject_raw(&f);
}

/// The router's Datagram Too Big for the segment at relative sequence number `rel` that
/// `src` sent to PEER, reporting `mtu`.
fn too_big(t: &Script, src: Ipv4Addr, rel: u32, mtu: u16) -> Vec<u8> {
    let mut quote = vec![0u8; 28];
    Ipv4Repr::new(src, PEER, IpProtocol::TCP, 20 + 1460).emit(&mut Ipv4Packet::new_unchecked(&mut quote[..20]), true);
    quote[20..22].copy_from_slice(&8080u16.to_be_bytes());
    quote[22..24].copy_from_slice(&PEER_PORT.to_be_bytes());
    quote[24..28].copy_from_slice(&t.local_seq(rel).to_be_bytes());
    let mut icmp = vec![3, 4, 0, 0, 0, 0];
    icmp.extend_from_slice(&mtu.to_be_bytes());
    icmp.extend_from_slice(&quote);
    icmp_from_router(icmp)
}

/// RFC 1191 §6.1: "the TCP layer [...] must use the new PMTU value" once a Datagram Too Big
/// reports it; the segment it dropped is sent again in the new size at once. MTU 1400
/// leaves 1360 bytes of payload: each 1460-byte segment in flight goes again as 1360 and
/// 100, from SND.UNA, and the congestion window is what it was (no congestion was seen:
/// Linux `tcp_simple_retransmit`).
#[test]
fn a_too_big_for_a_segment_in_flight_resends_it_in_the_new_size() {
    let (mut t, c) = sending(2 * 1460);
    t.expect(0, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(1460));
    t.expect(0, seg("P.").seq(1461).ack(PEER_ISS + 1).win(WIN).len(1460));
    let cwnd = t.stack.tcp_info(c).unwrap().cwnd;
    let f = too_big(&t, LOCAL, 1461, 1400);
    t.at(5);
    t.inject_raw(&f);
    t.expect(5, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(1360));
    t.expect(5, seg(".").seq(1361).ack(PEER_ISS + 1).win(WIN).len(100));
    t.expect(5, seg(".").seq(1461).ack(PEER_ISS + 1).win(WIN).len(1360));
    t.expect(5, seg("P.").seq(2821).ack(PEER_ISS + 1).win(WIN).len(100));
    t.expect_nothing(6);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.smss, info.eff_mss, info.cwnd), (1360, 1360, cwnd));
    assert_eq!(t.stack.counters().pmtu_reductions, 1);
    // New data goes in the new size too.
    t.stack.tcp_send(c, &[9u8; 2000]).unwrap();
    t.expect(7, seg(".").seq(2921).ack(PEER_ISS + 1).win(WIN).len(1360));
    t.expect(7, seg("P.").seq(4281).ack(PEER_ISS + 1).win(WIN).len(640));
}

/// A FIN queued with a segment that is cut goes with the last piece only.
#[test]
fn the_fin_goes_with_the_last_piece() {
    let (mut t, c) = sending(2 * 1460);
    t.stack.tcp_close(c).unwrap();
    t.expect(0, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(1460));
    t.expect(0, seg("FP.").seq(1461).ack(PEER_ISS + 1).win(WIN).len(1460));
    let f = too_big(&t, LOCAL, 1, 1000);
    t.at(5);
    t.inject_raw(&f);
    t.expect(5, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(960));
    t.expect(5, seg(".").seq(961).ack(PEER_ISS + 1).win(WIN).len(500));
    t.expect(5, seg(".").seq(1461).ack(PEER_ISS + 1).win(WIN).len(960));
    t.expect(5, seg("FP.").seq(2421).ack(PEER_ISS + 1).win(WIN).len(500));
    t.expect_nothing(6);
}

/// RFC 5927 §4.1: believe a Datagram Too Big only if the sequence number it quotes is in
/// flight (SND.UNA =< SEQ < SND.MAX). One quoting acknowledged data, or data never sent,
/// changes nothing and draws nothing.
#[test]
fn a_too_big_quoting_no_segment_in_flight_is_not_believed() {
    let (mut t, c) = sending(2 * 1460);
    t.discard();
    t.inject(5, seg(".").seq(PEER_ISS + 1).ack(1461).win(WIN));
    for rel in [1, 2921, 100_000] {
        let f = too_big(&t, LOCAL, rel, 1000);
        t.inject_raw(&f);
    }
    t.expect_nothing(6);
    assert_eq!(t.stack.tcp_info(c).unwrap().eff_mss, 1460);
    assert_eq!((t.stack.counters().pmtu_reductions, t.stack.counters().pmtu_ignored), (0, 3));
    assert!(t.stack.iface().path_mtus().is_empty(), "an unbelieved message teaches the cache nothing");
}

/// The MTU is not taken below 552 (Linux `ip_rt_min_pmtu`; RFC 5927 §7.2: a forged message
/// must not cut a connection into tiny segments), and a router older than RFC 1191, which
/// reports 0, gets the same floor: 512 bytes of payload.
#[test]
fn the_mtu_is_floored_at_552() {
    for mtu in [0, 68, 300] {
        let (mut t, c) = sending(1460);
        t.discard();
        let f = too_big(&t, LOCAL, 1, mtu);
        t.at(5);
        t.inject_raw(&f);
        t.expect(5, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(512));
        t.expect(5, seg(".").seq(513).ack(PEER_ISS + 1).win(WIN).len(512));
        t.expect(5, seg("P.").seq(1025).ack(PEER_ISS + 1).win(WIN).len(436));
        assert_eq!(t.stack.tcp_info(c).unwrap().eff_mss, 512, "MTU {mtu}");
    }
}

/// An MTU no smaller than the one in use, a quote of a datagram another host sent, or one
/// of a connection that does not exist: nothing changes.
#[test]
fn other_too_bigs_change_nothing() {
    let (mut t, c) = sending(1460);
    t.discard();
    let ignored = t.stack.counters().icmp_ignored;
    let frames = [too_big(&t, LOCAL, 1, 1500), too_big(&t, LOCAL, 1, 9000), too_big(&t, PEER, 1, 1000)];
    for f in frames {
        t.inject_raw(&f);
    }
    let mut other = too_big(&t, LOCAL, 1, 1000);
    // The quote's source port (after the ICMP header and the quoted IPv4 header) names
    // another connection; the ICMP checksum is made again.
    other[34 + 8 + 20..34 + 8 + 22].copy_from_slice(&8081u16.to_be_bytes());
    other[34 + 2..34 + 4].fill(0);
    let sum = !checksum::sum(&other[34..]);
    other[34 + 2..34 + 4].copy_from_slice(&sum.to_be_bytes());
    t.inject_raw(&other);
    t.expect_nothing(5);
    assert_eq!(t.stack.tcp_info(c).unwrap().eff_mss, 1460);
    let n = t.stack.counters();
    assert_eq!((n.pmtu_reductions, n.pmtu_ignored, n.icmp_ignored - ignored), (0, 3, 1));
    // The believed one reported no MTU below the link's: nothing to remember either.
    assert!(t.stack.iface().path_mtus().is_empty());
}

/// A second connection from the peer, from port `port`, accepted on the listener `l` of
/// port 8080 (SYN with MSS 1460 and no other option); returns its handle and its ISS,
/// relative to the first connection's.
fn accept_another(t: &mut Script, l: ackclock::ListenerHandle, port: u16) -> (TcpHandle, u32) {
    let at = t.ms();
    t.inject(at, seg("S").peer_port(port).seq(PEER_ISS).win(WIN).mss(1460));
    let synack = t.expect(at, seg("S.").any_options().ack(PEER_ISS + 1));
    assert_eq!(synack.dst_port, port);
    t.inject(at, seg(".").peer_port(port).seq(PEER_ISS + 1).ack(synack.seq + 1).win(WIN));
    (t.stack.tcp_accept(l).expect("the second connection"), synack.seq)
}

/// RFC 1191 §5: the path MTU is kept per destination. After a Datagram Too Big for one
/// connection, a connection opened later to the same peer sends segments of the learned
/// size from its first one (its handshake's MSS still says 1460), instead of losing them
/// to learn it again; it may never grow past the learned size while the estimate holds.
#[test]
fn a_later_connection_to_the_peer_starts_at_the_learned_size() {
    let mut t = Script::new(tcp_config());
    let (l, c) = serve(&mut t);
    t.stack.tcp_send(c, &[7u8; 1460]).unwrap();
    t.discard();
    router_says(&mut t, 1, 1400);
    t.discard();
    assert_eq!(t.stack.iface().path_mtus().get(PEER), Some(1400));
    assert_eq!(t.stack.iface().path_mtu(PEER), 1400);
    let (d, iss) = accept_another(&mut t, l, PEER_PORT + 1);
    let info = t.stack.tcp_info(d).unwrap();
    assert_eq!((info.smss, info.eff_mss), (1360, 1360));
    t.stack.tcp_send(d, &[9u8; 2000]).unwrap();
    let first = t.expect(6, seg(".").seq(iss + 1).ack(PEER_ISS + 1).win(WIN).len(1360));
    assert_eq!(first.dst_port, PEER_PORT + 1);
    t.expect(6, seg("P.").seq(iss + 1361).ack(PEER_ISS + 1).win(WIN).len(640));
    t.expect_nothing(7);
    assert_eq!(t.stack.counters().pmtu_reductions, 1);
}

/// A connection already open to the peer follows the learned size before it next sends
/// (as Linux's sockets follow their route's MTU at their next send): it loses no segment of
/// its own to the narrow path, and sends nothing again for it.
#[test]
fn an_open_connection_to_the_peer_follows_before_it_next_sends() {
    let mut t = Script::new(tcp_config());
    let (l, c) = serve(&mut t);
    let (d, iss) = accept_another(&mut t, l, PEER_PORT + 1);
    t.stack.tcp_send(c, &[7u8; 1460]).unwrap();
    t.discard();
    let f = too_big(&t, LOCAL, 1, 1000);
    t.at(5);
    t.inject_raw(&f);
    t.expect(5, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(960));
    t.expect(5, seg("P.").seq(961).ack(PEER_ISS + 1).win(WIN).len(500));
    assert_eq!(t.stack.tcp_info(d).unwrap().eff_mss, 1460, "idle: it has not looked yet");
    t.stack.tcp_send(d, &[9u8; 1460]).unwrap();
    t.expect(6, seg(".").seq(iss + 1).ack(PEER_ISS + 1).win(WIN).len(960));
    t.expect(6, seg("P.").seq(iss + 961).ack(PEER_ISS + 1).win(WIN).len(500));
    t.expect_nothing(7);
    assert_eq!(t.stack.tcp_info(d).unwrap().eff_mss, 960);
    let n = t.stack.counters();
    assert_eq!((n.pmtu_reductions, n.pmtu_followed), (1, 1));
}

/// RFC 1191 §6.3: "a host MUST attempt to detect increases" and should not try before
/// "at least 5 minutes, 10 minutes recommended"; Linux forgets the estimate after
/// `ip_rt_mtu_expires`, 600 s. Until then the connection sends at the learned size; from
/// then on at the size its handshake set, its own and any other connection to the peer.
#[test]
fn the_estimate_expires_after_ten_minutes_and_the_size_grows_back() {
    let (mut t, c) = sending(1460);
    t.discard();
    router_says(&mut t, 1, 1400);
    t.expect(5, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(1360));
    t.expect(5, seg("P.").seq(1361).ack(PEER_ISS + 1).win(WIN).len(100));
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(1461).win(WIN));
    // 599.9 s after the message: still the learned size.
    t.at(600_004);
    t.stack.tcp_send(c, &[1u8; 1460]).unwrap();
    t.expect(600_004, seg(".").seq(1461).ack(PEER_ISS + 1).win(WIN).len(1360));
    t.expect(600_004, seg("P.").seq(2821).ack(PEER_ISS + 1).win(WIN).len(100));
    t.inject(600_004, seg(".").seq(PEER_ISS + 1).ack(2921).win(WIN));
    assert_eq!(t.stack.iface().path_mtus().get(PEER), Some(1400));
    // Ten minutes after it: forgotten (the stack polled then), and the connection's size
    // is its handshake's again.
    t.expect_nothing(600_005);
    t.stack.tcp_send(c, &[2u8; 1460]).unwrap();
    t.expect(600_005, seg("P.").seq(2921).ack(PEER_ISS + 1).win(WIN).len(1460));
    t.expect_nothing(600_006);
    assert_eq!(t.stack.iface().path_mtus().get(PEER), None);
    assert_eq!(t.stack.tcp_info(c).unwrap().smss, 1460);
    assert_eq!(t.stack.counters().pmtu_followed, 1);
    assert_eq!(t.stack.iface().path_mtus().counts(), (1, 1, 0));
}

/// With the cache off (capacity 0) a Datagram Too Big still lowers its own connection
/// (RFC 1191 §6.1), and nothing else learns it.
#[test]
fn without_a_cache_each_connection_learns_alone() {
    let mut cfg = stack_config();
    cfg.tcp = tcp_config();
    cfg.iface.path_mtu.capacity = 0;
    let mut t = Script::with_config(cfg, ackclock::phy::Capabilities::ethernet(1500));
    let (l, c) = serve(&mut t);
    t.stack.tcp_send(c, &[7u8; 1460]).unwrap();
    t.discard();
    router_says(&mut t, 1, 1400);
    t.expect(5, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(1360));
    t.discard();
    let (d, _) = accept_another(&mut t, l, PEER_PORT + 1);
    assert_eq!(t.stack.tcp_info(d).unwrap().eff_mss, 1460);
    assert!(t.stack.iface().path_mtus().is_empty());
}

/// RFC 4821 §1 / RFC 2923 §2.1: a path that drops full-size segments without a Datagram
/// Too Big. With `mtu_probing` (Linux `tcp_mtu_probing` = 1) the third retransmission
/// timeout in a row (Linux `tcp_retries1`) lowers the size to 1,024 bytes (Linux
/// `tcp_base_mss`) and resends from SND.UNA in it; the next timeout halves it (and no
/// further than 512). Without the option the segments stay full size.
#[test]
fn rfc4821_repeated_timeouts_suspect_a_black_hole() {
    for probing in [false, true] {
        let mut cfg = tcp_config();
        cfg.mtu_probing = probing;
        let mut t = Script::new(cfg);
        let (_, c) = serve(&mut t);
        t.stack.tcp_send(c, &[7u8; 1460]).unwrap();
        let mut sent = vec![];
        for (ms, s) in t.run_to(20_000) {
            assert_eq!(s.seq, 1, "only retransmissions from SND.UNA");
            sent.push((ms, s.len));
        }
        let sizes: Vec<usize> = sent.iter().map(|&(_, n)| n).collect();
        if probing {
            // The RTO (200 ms here) backing off: the segment and two retransmissions at
            // full size; the third timeout's at 1,024; the fourth's and later at 512.
            let at: Vec<u64> = sent.iter().map(|&(ms, _)| ms).collect();
            assert_eq!(at, [1, 201, 601, 1401, 3001, 6201, 12601]);
            assert_eq!(sizes, [1460, 1460, 1460, 1024, 512, 512, 512], "{sent:?}");
            assert_eq!(t.stack.counters().mtu_black_holes, 2);
            assert_eq!(t.stack.tcp_info(c).unwrap().smss, 512);
        } else {
            assert!(sizes.iter().all(|&n| n == 1460), "{sent:?}");
            assert_eq!(t.stack.counters().mtu_black_holes, 0);
        }
    }
}
