//! Packet-level tests: TIME-WAIT kept as compact state once the application has closed the
//! connection (as Linux's minisockets): it holds no connection slot, has its own limit, and
//! still answers as RFC 9293 §3.10.7.4 says TIME-WAIT answers. (The state machine's
//! TIME-WAIT tests with a handle still held are in tcp_states.rs.)

mod common;

use ackclock::tcp::TcpConfig;
use ackclock::time::Duration;
use ackclock::ListenerHandle;
use common::script::*;
use std::net::SocketAddrV4;

const WIN: u16 = 65535;

fn config(f: impl FnOnce(&mut TcpConfig)) -> TcpConfig {
    let mut c = tcp_config();
    f(&mut c);
    c
}

/// A passive open from `port` at `ms`, closed by the application first, through FIN-WAIT
/// to TIME-WAIT: returns our ISS (relative to the script's first).
fn closed_to_time_wait(t: &mut Script, l: ListenerHandle, port: u16, ms: u64) -> u32 {
    let p = |s: Seg| s.peer_port(port);
    t.inject(ms, p(seg("S").seq(PEER_ISS).win(WIN).mss(1460)));
    let iss = t.expect(ms, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460)).seq;
    t.inject(ms, p(seg(".").seq(PEER_ISS + 1).ack(iss.wrapping_add(1)).win(WIN)));
    let c = t.stack.tcp_accept(l).unwrap();
    t.stack.tcp_close(c).unwrap();
    t.expect(ms, seg("F.").seq(iss.wrapping_add(1)).ack(PEER_ISS + 1).win(WIN));
    t.inject(ms, p(seg("F.").seq(PEER_ISS + 1).ack(iss.wrapping_add(2)).win(WIN)));
    t.expect(ms, seg(".").seq(iss.wrapping_add(2)).ack(PEER_ISS + 2).win(WIN));
    iss
}

/// Linux behaviour (`tcp_time_wait`: the socket gives way to a `tcp_timewait_sock`), no RFC
/// rule: with `max_connections` 1, a connection in TIME-WAIT does not keep the next one
/// out, and still acknowledges a retransmitted FIN (RFC 9293 §3.10.7.4, TIME-WAIT).
#[test]
fn time_wait_holds_no_connection_slot() {
    let mut t = Script::new(config(|c| c.max_connections = 1));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let iss = closed_to_time_wait(&mut t, l, 40001, 0);
    assert_eq!(t.stack.tcp().time_wait(), 1);
    assert_eq!(t.stack.tcp().connections(), 1, "connections() counts TIME-WAIT entries");
    t.inject(10, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40002));
    let s = t.expect(10, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460));
    assert_eq!(s.dst_port, 40002);
    assert_eq!(t.stack.counters().drops_no_buffer, 0);
    t.inject(20, seg("F.").seq(PEER_ISS + 1).ack(iss.wrapping_add(2)).win(WIN).peer_port(40001));
    let a = t.expect(20, seg(".").seq(iss.wrapping_add(2)).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(a.dst_port, 40001);
}

/// Linux's `tcp_max_tw_buckets` (no RFC rule): past `max_time_wait` entries the oldest is
/// dropped early and counted; its 4-tuple is then unknown (an ACK to the listener draws
/// RST, RFC 9293 §3.10.7.2) while the younger ones still acknowledge a retransmitted FIN.
#[test]
fn time_wait_limit_drops_the_oldest_entry() {
    let mut t = Script::new(config(|c| c.max_time_wait = 2));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let iss: Vec<u32> = [(40001, 10), (40002, 20), (40003, 30)]
        .into_iter()
        .map(|(port, ms)| closed_to_time_wait(&mut t, l, port, ms))
        .collect();
    assert_eq!(t.stack.tcp().time_wait(), 2);
    assert_eq!(t.stack.counters().time_wait_overflow, 1);
    let fin = |i: usize, port: u16| seg("F.").seq(PEER_ISS + 1).ack(iss[i].wrapping_add(2)).win(WIN).peer_port(port);
    t.inject(40, fin(0, 40001));
    t.expect(40, seg("R").seq(iss[0].wrapping_add(2)).win(0));
    t.inject(41, fin(2, 40003));
    t.expect(41, seg(".").seq(iss[2].wrapping_add(2)).ack(PEER_ISS + 2).win(WIN));
    t.inject(42, fin(1, 40002));
    t.expect(42, seg(".").seq(iss[1].wrapping_add(2)).ack(PEER_ISS + 2).win(WIN));
}

/// RFC 5961 §3.2 in TIME-WAIT: an RST in the window but not at RCV.NXT draws a challenge
/// ACK and changes nothing; an RST at RCV.NXT ends TIME-WAIT at once (RFC 9293
/// §3.10.7.4; Linux's default, RFC 1337's advice to ignore it is not taken).
#[test]
fn time_wait_rst_exact_ends_it_inexact_draws_a_challenge() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let iss = closed_to_time_wait(&mut t, l, 40001, 0);
    t.inject(10, seg("R").seq(PEER_ISS + 100).peer_port(40001));
    t.expect(10, seg(".").seq(iss.wrapping_add(2)).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(t.stack.counters().drops_bad_rst, 1);
    assert_eq!(t.stack.tcp().time_wait(), 1);
    t.inject(20, seg("R").seq(PEER_ISS + 2).peer_port(40001));
    t.expect_nothing(20);
    assert_eq!(t.stack.tcp().time_wait(), 0);
    assert_eq!(t.stack.tcp().connections(), 0);
}

/// RFC 9293 §3.4.2: the entry lasts 2 MSL from the last FIN (entered at 5 ms, MSL 1 s) and
/// then its 4-tuple is closed again; RFC 9293 §3.10.7.4: a retransmitted FIN restarts it.
#[test]
fn time_wait_entry_expires_after_two_msl_restarted_by_a_fin() {
    let mut t = Script::new(config(|c| c.msl = Duration::from_secs(1)));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let iss = closed_to_time_wait(&mut t, l, 40001, 5);
    t.inject(1000, seg("F.").seq(PEER_ISS + 1).ack(iss.wrapping_add(2)).win(WIN).peer_port(40001));
    t.expect(1000, seg(".").seq(iss.wrapping_add(2)).ack(PEER_ISS + 2).win(WIN));
    t.expect_nothing(2999);
    assert_eq!(t.stack.tcp().time_wait(), 1, "2 MSL count from the retransmitted FIN");
    t.expect_nothing(3001);
    assert_eq!(t.stack.tcp().time_wait(), 0);
    assert_eq!(t.stack.poll_at(), None, "nothing left to wake up for");
}

/// RFC 6191 §2 (timestamps, RFC 7323): a SYN for a 4-tuple in TIME-WAIT whose sequence
/// number is not above RCV.NXT still opens a new incarnation when its timestamp is newer
/// than TS.Recent; one with an older timestamp is only acknowledged (RFC 5961 §4.2, with
/// PAWS: RFC 7323 §5.3).
#[test]
fn time_wait_reopens_on_syn_with_newer_timestamp() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(WIN).mss(1460).ts(1000, 0));
    t.stack.tcp_close(c).unwrap();
    let fin = t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).any_options());
    let (tsval, _) = fin.ts.unwrap();
    t.inject(2, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN).ts(1010, tsval));
    t.expect(2, seg(".").seq(2).ack(PEER_ISS + 2).any_options());
    assert_eq!(t.stack.tcp().time_wait(), 1);
    // An old SYN: lower sequence number, older timestamp.
    t.inject(100, seg("S").seq(PEER_ISS - 5000).win(WIN).mss(1460).ts(900, 0));
    let a = t.expect(100, seg(".").seq(2).ack(PEER_ISS + 2).any_options());
    assert_eq!(a.ts.unwrap().1, 1010, "TS.Recent stays the FIN's");
    assert_eq!(t.stack.tcp().time_wait(), 1);
    // A new one: lower sequence number, newer timestamp.
    t.inject(200, seg("S").seq(PEER_ISS - 5000).win(WIN).mss(1460).ts(5000, 0));
    let s = t.expect(200, seg("S.").ack(PEER_ISS - 4999).any_options());
    assert!((s.seq as i32) > 2, "the new ISS {} is above the old SND.NXT", s.seq as i32);
    assert_eq!(t.stack.tcp().time_wait(), 0);
    assert_eq!(t.stack.tcp().connections(), 1);
}

/// RFC 9293 §3.4.2 / RFC 6056: an active open never picks a local port whose 4-tuple is in
/// TIME-WAIT; naming that port explicitly is refused.
#[test]
fn active_open_skips_a_tuple_in_time_wait() {
    let mut t = Script::new(config(|c| c.ephemeral_ports = (50000, 50001)));
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let port = t.expect(0, seg("S").seq(0).any_options()).src_port;
    let p = |s: Seg| s.port(port).peer_port(80);
    t.inject(0, p(seg("S.").seq(PEER_ISS).ack(1).win(WIN).mss(1460)));
    t.expect(0, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.stack.tcp_close(c).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, p(seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN)));
    t.expect(2, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(t.stack.tcp().time_wait(), 1);
    for _ in 0..3 {
        let c2 = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
        let other = t.expect(3, seg("S").any_options()).src_port;
        assert_ne!(other, port);
        t.stack.tcp_abort(c2).unwrap();
        t.stack.tcp_close(c2).ok();
    }
    let opts = ackclock::tcp::SocketOptions::from_config(t.stack.tcp().config());
    let again = t.stack.tcp_connect_with(SocketAddrV4::new(PEER, 80), Some(port), opts);
    assert_eq!(again.err(), Some(ackclock::Error::AddrInUse));
}
