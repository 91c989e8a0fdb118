//! Packet-level tests: SYN cookies (RFC 4987 §3.6). A listener whose SYN queue is full (or
//! every listener, with `SynCookies::Always`) answers a SYN with a SYN-ACK whose ISN is a
//! cookie and keeps no state; the handshake's ACK, if its cookie verifies, rebuilds the
//! connection with the options the peer's SYN offered (window scale and SACK-permitted
//! travel in our TSval when timestamps are on).

mod common;

use ackclock::tcp::{State, SynCookies, TcpConfig};
use ackclock::TcpHandle;
use common::script::*;
use std::net::SocketAddrV4;

const WIN: u16 = 65535;
/// Our window-scale shift: the 256 KiB receive buffer needs 3 (RFC 7323 §2.3).
const OUR_WS: u8 = 3;

fn config(mode: SynCookies) -> TcpConfig {
    let mut c = tcp_config();
    c.syn_cookies = mode;
    c
}

fn full_syn(port: u16) -> Seg {
    seg("S").seq(PEER_ISS).win(WIN).mss(1460).ws(7).sack_ok().ts(100, 0).peer_port(port)
}

/// RFC 4987 §3.6 with RFC 7323 and RFC 2018 options: a SYN offering MSS, window scale,
/// SACK and timestamps is answered at once with a SYN-ACK offering the same, and nothing
/// is held. The ACK echoing our TSval rebuilds the connection: ESTABLISHED, acceptable,
/// with the peer's MSS, both window scales, SACK and timestamps, and the data it carried
/// delivered.
#[test]
fn cookie_handshake_keeps_window_scale_sack_and_timestamps() {
    let mut t = Script::new(config(SynCookies::Always));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, full_syn(PEER_PORT));
    let synack = t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460).ws(OUR_WS).sack_ok().ts(ANY, 100));
    assert_eq!(t.stack.tcp().connections(), 0, "a cookie holds no state");
    assert_eq!(t.stack.counters().syn_cookies_sent, 1);
    let (tsval, _) = synack.ts.unwrap();
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(1).win(1024).ts(110, tsval).len(100));
    let c: TcpHandle = t.stack.tcp_accept(l).expect("the cookie rebuilt the connection");
    assert_eq!(t.stack.counters().syn_cookies_validated, 1);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!(info.state, State::Established);
    assert_eq!((info.smss, info.snd_wscale, info.rcv_wscale), (1460, 7, OUR_WS));
    assert!(info.sack && info.timestamps);
    assert_eq!(info.snd_wnd, 1024 << 7, "the ACK's window is scaled (RFC 7323 §2.2)");
    let mut buf = [0u8; 200];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(100));
    let want: Vec<u8> = (0..100).map(|i| (PEER_ISS as usize + 1 + i) as u8).collect();
    assert_eq!(&buf[..100], &want[..]);
    // Our timestamps carry on from the cookie's TSval, never behind it (RFC 7323 §5.3).
    t.stack.tcp_send(c, b"hello").unwrap();
    let s = t.expect(10, seg("P.").seq(1).ack(PEER_ISS + 101).any_options().len(5));
    let (v, e) = s.ts.unwrap();
    assert!(v.wrapping_sub(tsval) as i32 >= 0 && e == 110, "TSval {v} after cookie TSval {tsval}, TSecr {e}");
}

/// RFC 4987 §3.6 and Linux's default (`tcp_syncookies` = 1): with the SYN queue full
/// (backlog 1, one connection in SYN-RECEIVED) the next SYN gets a cookie instead of being
/// dropped, and its ACK completes a connection the application accepts.
#[test]
fn full_syn_queue_answers_with_a_cookie() {
    let mut t = Script::new(tcp_config());
    assert_eq!(t.stack.tcp().config().syn_cookies, SynCookies::WhenFull);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 1).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40001));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    assert_eq!(t.stack.counters().syn_cookies_sent, 0);
    t.inject(1, seg("S").seq(PEER_ISS).win(WIN).mss(1400).peer_port(40002));
    let s = t.expect(1, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460));
    assert_eq!(s.dst_port, 40002);
    assert_eq!(t.stack.counters().syn_cookies_sent, 1);
    assert_eq!(t.stack.tcp().connections(), 1, "only the first SYN holds state");
    assert_eq!(t.stack.counters().drops_listen_overflow, 0);
    t.inject(5, seg(".").seq(PEER_ISS + 1).ack(s.seq.wrapping_add(1)).win(WIN).peer_port(40002));
    t.expect_nothing(5);
    let c = t.stack.tcp_accept(l).unwrap();
    assert_eq!(t.stack.tcp_tuple(c).unwrap().remote_port, 40002);
    let info = t.stack.tcp_info(c).unwrap();
    // No timestamps: no window scaling or SACK either (RFC 4987 §3.6); the MSS is the
    // table's 1300, the largest at or below the SYN's 1400.
    assert_eq!((info.smss, info.snd_wscale, info.rcv_wscale, info.sack, info.timestamps), (1300, 0, 0, false, false));
    assert_eq!(info.state, State::Established);
}

/// RFC 4987 §3.6: without the timestamp option, the SYN-ACK of a cookie offers neither
/// window scaling nor SACK, whatever the SYN offered: nothing could bring them back.
#[test]
fn without_timestamps_a_cookie_offers_no_window_scale_or_sack() {
    let mut t = Script::new(config(SynCookies::Always));
    t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).ws(7).sack_ok());
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
}

/// Blind ACKs (RFC 4987 §3.6; RFC 9293 §3.10.7.2, LISTEN: an ACK draws
/// `<SEQ=SEG.ACK><CTL=RST>`): after a cookie went out, ACKs whose acknowledgment number or
/// sequence number does not match a cookie, and the right cookie three minutes late, are
/// counted as failed cookies, reset, and open nothing.
#[test]
fn blind_and_expired_cookie_acks_are_counted_and_reset() {
    let mut t = Script::new(config(SynCookies::Always));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    for (i, ack) in [2u32, 0x0100_0001, 0x8000_0000, 0xffff_ffff].into_iter().enumerate() {
        t.inject(1, seg(".").seq(PEER_ISS + 1).ack(ack).win(WIN));
        t.expect(1, seg("R").seq(ack).ack(0).win(0));
        assert_eq!(t.stack.counters().drops_bad_cookie, i as u64 + 1);
    }
    t.inject(2, seg(".").seq(PEER_ISS + 2).ack(1).win(WIN));
    t.expect(2, seg("R").seq(1).ack(0).win(0));
    assert_eq!(t.stack.counters().drops_bad_cookie, 5, "the wrong sequence number fails too");
    // Another SYN keeps the listener checking cookies; the first one has expired.
    t.inject(190_000, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40009));
    t.expect(190_000, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(200_000, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect(200_000, seg("R").seq(1).ack(0).win(0));
    assert_eq!(t.stack.counters().drops_bad_cookie, 6, "a cookie expires within three minutes");
    assert_eq!(t.stack.counters().syn_cookies_validated, 0);
    assert!(t.stack.tcp_accept(l).is_err());
    assert_eq!(t.stack.tcp().connections(), 0);
}

/// Linux's `tcp_synq_no_recent_overflow`: a listener that never sent a cookie treats a
/// stray ACK as LISTEN always does (RFC 9293 §3.10.7.2, RST), without checking a cookie.
#[test]
fn stray_ack_without_recent_cookies_is_not_a_failed_cookie() {
    let mut t = Script::new(tcp_config());
    t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg(".").seq(PEER_ISS + 1).ack(12345).win(WIN));
    t.expect(0, seg("R").seq(12345).ack(0).win(0));
    assert_eq!(t.stack.counters().drops_bad_cookie, 0);
    assert_eq!(t.stack.counters().drops_no_connection, 1);
}

/// Linux (`tcp_conn_request`, `tcp_v4_syn_recv_sock`): a cookie stands in for the SYN
/// queue, not the accept queue. A SYN to a full accept queue is dropped even with
/// `Always`; a valid cookie ACK arriving while it is full is dropped without a reset, and
/// once the application accepted, the peer's next segment completes the connection.
#[test]
fn full_accept_queue_drops_syn_and_holds_off_the_cookie_ack() {
    let mut t = Script::new(config(SynCookies::Always));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 1).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40001));
    let a = t.expect(0, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40002));
    let b = t.expect(0, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(1, seg(".").seq(PEER_ISS + 1).ack(a.seq.wrapping_add(1)).win(WIN).peer_port(40001));
    assert_eq!(t.stack.tcp_acceptable(l), Ok(1), "the accept queue is full");
    t.inject(2, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40003));
    t.expect_nothing(2);
    assert_eq!(t.stack.counters().drops_listen_overflow, 1);
    t.inject(3, seg(".").seq(PEER_ISS + 1).ack(b.seq.wrapping_add(1)).win(WIN).peer_port(40002));
    t.expect_nothing(3);
    assert_eq!(t.stack.counters().drops_listen_overflow, 2);
    assert_eq!(t.stack.tcp().connections(), 1);
    t.stack.tcp_accept(l).unwrap();
    t.inject(4, seg("P.").seq(PEER_ISS + 1).ack(b.seq.wrapping_add(1)).win(WIN).peer_port(40002).len(10));
    let c = t.stack.tcp_accept(l).expect("completed by the data segment");
    assert_eq!(t.stack.tcp_tuple(c).unwrap().remote_port, 40002);
    assert_eq!(t.stack.counters().syn_cookies_validated, 2);
    let mut buf = [0u8; 16];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(10));
}
