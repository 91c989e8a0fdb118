//! Segment arrival (RFC 9293 §3.10.7, RFC 5961, RFC 7323). Each test names the
//! rule it checks and asserts what the RFC requires. Unless a test says otherwise the peer's
//! SYN carries only an MSS option: no window scaling, timestamps or SACK, and every segment
//! the stack sends has no options and an unscaled window field of 65535.

mod common;

use ackclock::tcp::State;
use ackclock::{Error, ListenerHandle, Shutdown, TcpHandle};
use common::script::*;
use std::net::SocketAddrV4;

const WIN: u16 = 65535;

fn state(t: &Script, c: TcpHandle) -> State {
    t.stack.tcp_readiness(c).expect("valid handle").state
}

/// A passive open on port 8080 with a plain SYN (MSS 1000); the connection is accepted.
fn established(t: &mut Script) -> (ListenerHandle, TcpHandle) {
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(WIN).mss(1000));
    assert_eq!(state(t, c), State::Established);
    (l, c)
}

// ---- RFC 7323 §2.2: the window of a SYN-ACK is never scaled. ----

/// RFC 7323 §2.2: "The window field in a segment where the SYN bit is set (i.e., a <SYN> or
/// <SYN,ACK>) MUST NOT be scaled." In a simultaneous open (RFC 9293 §3.5 figure 7) with
/// window scaling negotiated (both SYNs carry the option, the peer's shift is 7), the peer's
/// SYN-ACK arriving in SYN-RECEIVED offers 1000 bytes: SND.WND is 1000, so of 5000 bytes the
/// application writes only 1000 may go out until the window opens.
///
/// Before the fix, slow.rs shifts the SYN-ACK's window by SND.WSCALE (1000 << 7),
/// and 5000 bytes go out at once into a 1000-byte window.
#[test]
fn rfc7323_2_2_synack_window_in_simultaneous_open_is_not_scaled() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let port = t.expect(0, seg("S").seq(0).any_options()).src_port;
    t.inject(5, seg("S").seq(PEER_ISS).win(1000).mss(1000).ws(7).port(port).peer_port(80));
    t.expect(5, seg("S.").seq(0).ack(PEER_ISS + 1).any_options());
    assert_eq!(state(&t, c), State::SynReceived);
    t.inject(10, seg("S.").seq(PEER_ISS).ack(1).win(1000).mss(1000).ws(7).port(port).peer_port(80));
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 1).any_options());
    assert_eq!(state(&t, c), State::Established);
    assert_eq!(t.stack.tcp_info(c).unwrap().snd_wnd, 1000, "SND.WND from an unscaled SYN-ACK window");
    t.stack.tcp_send(c, &[5u8; 5000]).unwrap();
    let sent = t.sent_now();
    let bytes: usize = sent.iter().map(|s| s.len).sum();
    assert_eq!(bytes, 1000, "only the 1000-byte window may be sent: {sent:?}");
}

// ---- RFC 9293 §3.10.7.4 fifth step: the window update needs SND.UNA =< SEG.ACK. ----

/// RFC 9293 §3.10.7.4, fifth step, ESTABLISHED: "If the ACK is a duplicate (SEG.ACK <
/// SND.UNA), it can be ignored. [...] If SND.UNA =< SEG.ACK =< SND.NXT, the send window
/// should be updated. If (SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ and SND.WL2 =< SEG.ACK)),
/// set SND.WND <- SEG.WND [...]". (Linux `tcp_ack`: an old ACK goes to `old_ack`, which
/// never updates the window.)
///
/// We send 2000 bytes. The peer's segment [1, 101) acknowledging all of it (a retransmission,
/// say) arrives first; its older segment [101, 201), sent when only 1000 bytes were
/// acknowledged and its window was closed, arrives after it (reordered). That segment's ACK
/// is old (1001 < SND.UNA = 2001) though acceptable to RFC 5961 §5.2, so its zero window must
/// not replace the 65535 bytes the newer ACK offered: new data goes out at once.
///
/// Before the fix, the window test only compares SND.WL1/WL2, the old segment's
/// SEG.SEQ is above SND.WL1, and SND.WND becomes 0 (the data waits for a persist probe).
#[test]
fn rfc9293_fifth_step_old_ack_does_not_update_the_window() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.stack.tcp_send(c, &[1u8; 2000]).unwrap();
    t.expect(1, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(1000));
    t.expect(1, seg("P.").seq(1001).ack(PEER_ISS + 1).win(WIN).len(1000));
    t.inject(10, seg("P.").seq(PEER_ISS + 1).ack(2001).win(WIN).len(100));
    assert_eq!(t.stack.tcp_info(c).unwrap().flight, 0);
    t.inject(11, seg("P.").seq(PEER_ISS + 101).ack(1001).win(0).len(100));
    t.discard();
    assert_eq!(t.stack.tcp_info(c).unwrap().snd_wnd, 65535, "an old ACK leaves SND.WND alone");
    t.stack.tcp_send(c, &[2u8; 500]).unwrap();
    t.expect(12, seg("P.").seq(2001).ack(PEER_ISS + 201).any_options().len(500));
}

/// RFC 9293 §3.10.7.4
/// fifth step, the SND.WL1/SND.WL2 half of the window rule. An older segment (same ACK, an
/// earlier SEG.SEQ than the one that last set the window) must not shrink it.
#[test]
fn rfc9293_fifth_step_older_sequence_does_not_update_the_window() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    // Out of order first: [101, 201) sets SND.WL1 = PEER_ISS + 101, window 65535.
    t.inject(10, seg("P.").seq(PEER_ISS + 101).ack(1).win(WIN).len(100));
    // Then [1, 101), older (SEG.SEQ < SND.WL1), with a closed window: data, but no window.
    t.inject(11, seg("P.").seq(PEER_ISS + 1).ack(1).win(0).len(100));
    t.discard();
    assert_eq!(t.stack.tcp_info(c).unwrap().snd_wnd, 65535);
    t.stack.tcp_send(c, &[2u8; 500]).unwrap();
    t.expect(12, seg("P.").seq(1).ack(PEER_ISS + 201).any_options().len(500));
}

// ---- RFC 9293 §3.10.7.4 fourth step: SYN in SYN-RECEIVED. ----

/// RFC 9293 §3.10.7.4, fourth ("check the SYN bit"), SYN-RECEIVED STATE: "If the connection
/// was initiated with a passive OPEN, then return this connection to the LISTEN state and
/// return. Otherwise, handle per the directions for synchronized states below." RFC 5961
/// §4's challenge ACK is for the synchronized states (RFC 9293 lists ESTABLISHED through
/// TIME-WAIT under it; RFC 9293 §3.5.2 does not count SYN-RECEIVED as synchronized). Linux
/// (`tcp_check_req`) also drops the request on an in-window SYN (and answers with RST).
///
/// A passive half-open connection gets a SYN inside its window (not the retransmitted SYN
/// at IRS): it is forgotten; the peer's later ACK of our SYN-ACK finds only the listener,
/// which answers `<SEQ=SEG.ACK><CTL=RST>` (§3.10.7.2), and nothing is accepted.
///
/// Before the fix, the SYN draws a challenge ACK and the half-open connection
/// stays, then completes on the ACK.
#[test]
fn rfc9293_fourth_step_syn_in_window_in_passive_syn_received_returns_to_listen() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(10, seg("S").seq(PEER_ISS + 100).win(WIN).mss(1460));
    let sent = t.sent_now();
    assert!(sent.iter().all(|s| s.flags != seg(".").flags), "no challenge ACK in SYN-RECEIVED: {sent:?}");
    assert_eq!(t.stack.tcp().connections(), 0, "returned to LISTEN");
    t.inject(20, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect(20, seg("R").seq(1).win(0));
    assert_eq!(t.stack.tcp_accept(l), Err(Error::WouldBlock));
}

// ---- TIME-WAIT: every retransmitted FIN is acknowledged. ----

/// RFC 9293 §3.10.7.4, first step ("If an incoming segment is not acceptable, an
/// acknowledgment should be sent in reply") and TIME-WAIT ("The only thing that can arrive
/// in this state is a retransmission of the remote FIN. Acknowledge it, and restart the
/// 2 MSL timeout"). The out-of-window ACK rate limit taken from Linux (`tcp_oow_rate_limited`)
/// exempts every segment that occupies sequence space ("Data packets without SYNs are not
/// likely part of an ACK loop": `seq != end_seq`, and END_SEQ counts the FIN), so Linux
/// answers each retransmitted FIN.
///
/// Our ACK of the peer's FIN is lost twice: the peer retransmits its FIN at 300 ms and again
/// at 700 ms (RTO 200 ms doubled). Both must be acknowledged.
///
/// Before the fix, the second FIN falls within 500 ms of the first one's ACK and is
/// not answered (slow.rs and timewait.rs count only payload, not the FIN, as exempt).
#[test]
fn rfc9293_time_wait_acks_every_retransmitted_fin() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.inject(3, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(3, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(state(&t, c), State::TimeWait);
    t.inject(300, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(300, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    t.inject(700, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(700, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
}

/// The same rule for TIME-WAIT kept as a compact entry (the application closed first).
///
/// Before the fix it was not (timewait.rs `tw_segment`).
#[test]
fn rfc9293_compact_time_wait_acks_every_retransmitted_fin() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(WIN).mss(1460));
    t.stack.tcp_close(c).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(2, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    t.expect_nothing(10);
    assert_eq!(t.stack.tcp().time_wait(), 1, "a compact TIME-WAIT entry");
    t.inject(300, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(300, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    t.inject(700, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(700, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
}

/// The same rule in CLOSE-WAIT: the peer's FIN is retransmitted (our ACK of it lost) before
/// our FIN goes out; each retransmission is acknowledged.
///
/// Before the fix it was not (slow.rs, the unacceptable-segment branch).
#[test]
fn rfc9293_close_wait_acks_every_retransmitted_fin() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.inject(3, seg("F.").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect(3, seg(".").seq(1).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(state(&t, c), State::CloseWait);
    t.inject(300, seg("F.").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect(300, seg(".").seq(1).ack(PEER_ISS + 2).win(WIN));
    t.inject(700, seg("F.").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect(700, seg(".").seq(1).ack(PEER_ISS + 2).win(WIN));
}

// ---- RFC 9293 §3.10.7.4 first step: a zero receive window. ----

/// RFC 9293 §3.10.7.4
/// first step, the acceptability table with RCV.WND = 0 ("SEG.LEN = 0, RCV.WND = 0: SEG.SEQ =
/// RCV.NXT"; "SEG.LEN > 0, RCV.WND = 0: not acceptable") and "If the RCV.WND is zero, no
/// segments will be acceptable, but special allowance should be made to accept valid ACKs,
/// URGs, and RSTs". With a 2000-byte receive buffer filled:
/// - data at RCV.NXT is refused and answered with `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>`
///   (window 0), but its ACK is taken;
/// - a dataless segment one past RCV.NXT is not acceptable: answered, its ACK not taken;
/// - a dataless segment at RCV.NXT is acceptable: its ACK is taken.
#[test]
fn rfc9293_first_step_zero_receive_window_acceptability() {
    let mut t = Script::new(ackclock::tcp::TcpConfig { recv_buffer: 2000, ..tcp_config() });
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(WIN).mss(1000));
    let p = PEER_ISS + 1;
    t.stack.tcp_send(c, &[1u8; 100]).unwrap();
    t.expect(1, seg("P.").seq(1).ack(p).win(2000).len(100));
    t.inject(2, seg(".").seq(p).ack(1).win(WIN).len(1000));
    t.inject(2, seg(".").seq(p + 1000).ack(1).win(WIN).len(1000));
    t.expect(2, seg(".").seq(101).ack(p + 2000).win(0));
    assert_eq!(t.stack.tcp_info(c).unwrap().flight, 100);
    // SEG.LEN > 0, RCV.WND = 0, at RCV.NXT: its ACK is taken, its data is not.
    t.inject(10, seg("P.").seq(p + 2000).ack(101).win(WIN).len(10));
    t.expect(10, seg(".").seq(101).ack(p + 2000).win(0));
    assert_eq!(t.stack.tcp_info(c).unwrap().flight, 0);
    t.stack.tcp_send(c, &[2u8; 50]).unwrap();
    t.expect(11, seg("P.").seq(101).ack(p + 2000).win(0).len(50));
    // SEG.LEN = 0, RCV.WND = 0, SEG.SEQ != RCV.NXT: not acceptable, answered, ACK ignored.
    t.inject(20, seg(".").seq(p + 2001).ack(151).win(WIN));
    t.expect(20, seg(".").seq(151).ack(p + 2000).win(0));
    assert_eq!(t.stack.tcp_info(c).unwrap().flight, 50);
    // SEG.LEN = 0, RCV.WND = 0, SEG.SEQ = RCV.NXT: acceptable.
    t.inject(30, seg(".").seq(p + 2000).ack(151).win(WIN));
    t.expect_nothing(30);
    assert_eq!(t.stack.tcp_info(c).unwrap().flight, 0);
    let mut buf = [0u8; 4096];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(2000), "nothing past the window was taken");
}
