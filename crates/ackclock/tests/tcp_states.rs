//! Packet-level tests: the connection state machine (RFC 9293 §3.3.2 figure 5), opening and
//! closing in every order, aborts, TIME-WAIT, resets to closed ports and listeners, RFC 5961's
//! defences, the listen queues, and socket handles.
//!
//! Unless a test says otherwise the peer's SYN carries only an MSS option, so neither window
//! scaling, timestamps nor SACK are in use: every segment the stack sends has no options and
//! (its 256 KiB receive buffer being larger) an unscaled window field of 65535.

mod common;

use ackclock::tcp::{State, SynCookies, TcpConfig};
use ackclock::time::Duration;
use ackclock::{Error, ListenerHandle, Shutdown, TcpHandle};
use common::script::*;
use std::net::SocketAddrV4;

/// The window field of every segment we send in these tests.
const WIN: u16 = 65535;

fn state(t: &Script, c: TcpHandle) -> State {
    t.stack.tcp_readiness(c).expect("valid handle").state
}

/// A passive open on port 8080 (backlog 8) with a plain SYN; the connection is accepted.
fn established(t: &mut Script) -> (ListenerHandle, TcpHandle) {
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(WIN).mss(1460));
    assert_eq!(state(t, c), State::Established);
    (l, c)
}

/// An active open to PEER:80 completed by a plain SYN-ACK at the current time; returns the
/// handle and our ephemeral port.
fn connected(t: &mut Script) -> (TcpHandle, u16) {
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let now = t.ms();
    let port = t.expect(now, seg("S").seq(0).any_options()).src_port;
    t.inject(now, seg("S.").seq(PEER_ISS).ack(1).win(WIN).mss(1460).port(port).peer_port(80));
    t.expect(now, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    assert_eq!(state(t, c), State::Established);
    (c, port)
}

fn config(f: impl FnOnce(&mut TcpConfig)) -> TcpConfig {
    let mut c = tcp_config();
    f(&mut c);
    c
}

/// The pattern `Script::inject` puts in a payload starting at `seq`.
fn pattern(seq: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize + i) as u8).collect()
}

// ---- Rule 1: every state and the transitions of figure 5. ----

/// RFC 9293 §3.3.2 (figure 5), §3.5 (figure 6), §3.10.7.2: LISTEN answers a SYN with
/// `<SEQ=ISS><ACK=SEG.SEQ+1><CTL=SYN,ACK>` and holds the connection in SYN-RECEIVED, where it
/// is not yet acceptable; the ACK of our SYN makes it ESTABLISHED and queues it for accept.
#[test]
fn passive_open_goes_listen_syn_received_established() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    assert_eq!(t.stack.tcp_accept(l), Err(Error::WouldBlock));
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    assert_eq!(t.stack.tcp().connections(), 1, "SYN-RECEIVED holds a connection");
    assert_eq!(t.stack.tcp_acceptable(l), Ok(0), "a SYN-RECEIVED connection is not acceptable");
    assert_eq!(t.stack.tcp_accept(l), Err(Error::WouldBlock));
    t.inject(5, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect_nothing(5);
    assert_eq!(t.stack.tcp_acceptable(l), Ok(1));
    let c = t.stack.tcp_accept(l).unwrap();
    assert_eq!(state(&t, c), State::Established);
    let tuple = t.stack.tcp_tuple(c).unwrap();
    assert_eq!(
        (tuple.local_addr, tuple.local_port, tuple.remote_addr, tuple.remote_port),
        (LOCAL, 8080, PEER, PEER_PORT)
    );
    assert_eq!(t.stack.counters().passive_opens, 1);
    t.stack.tcp_send(c, b"hi").unwrap();
    t.expect(6, seg("P.").seq(1).ack(PEER_ISS + 1).win(WIN).len(2));
}

/// RFC 9293 §3.3.2 (figure 5: SYN-RECEIVED --rcv RST--> LISTEN), §3.10.7.4 second check: an
/// RST at RCV.NXT ends a passively opened half-open connection silently; the listener keeps
/// listening and its SYN queue slot is free again (backlog 1).
#[test]
fn rst_in_syn_received_returns_to_listen() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 1).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(10, seg("R").seq(PEER_ISS + 1));
    t.expect_nothing(10);
    assert_eq!(t.stack.tcp().connections(), 0);
    assert_eq!(t.stack.counters().resets_received, 1);
    assert_eq!(t.stack.tcp_accept(l), Err(Error::WouldBlock));
    t.inject(20, seg("S").seq(PEER_ISS + 7000).win(WIN).mss(1460).peer_port(40001));
    let s = t.expect(20, seg("S.").ack(PEER_ISS + 7001).win(WIN).mss(1460));
    assert_eq!(s.dst_port, 40001);
    // Only the new half-open connection retransmits its SYN-ACK; the reset one is gone.
    t.expect_nothing(1019);
    let r = t.expect(1020, seg("S.").seq(s.seq).ack(PEER_ISS + 7001).win(WIN).mss(1460));
    assert_eq!(r.dst_port, 40001);
}

/// RFC 9293 §3.3.2 (figure 5: CLOSED --OPEN/snd SYN--> SYN-SENT --rcv SYN,ACK/snd ACK-->
/// ESTABLISHED), §3.10.7.3. A retransmitted SYN-ACK (our ACK was lost) is an old segment in
/// ESTABLISHED and draws `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>` again (§3.10.7.4 first check).
#[test]
fn active_open_goes_syn_sent_established() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    assert_eq!(state(&t, c), State::SynSent);
    let syn = t.expect(0, seg("S").seq(0).win(WIN).any_options());
    assert_eq!(syn.dst_port, 80);
    assert!((49152..=65535).contains(&syn.src_port), "an ephemeral port: {}", syn.src_port);
    let port = syn.src_port;
    t.expect_nothing(19);
    assert_eq!(state(&t, c), State::SynSent);
    t.inject(20, seg("S.").seq(PEER_ISS).ack(1).win(WIN).mss(1460).port(port).peer_port(80));
    t.expect(20, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    assert_eq!(state(&t, c), State::Established);
    assert_eq!(t.stack.counters().active_opens, 1);
    t.inject(300, seg("S.").seq(PEER_ISS).ack(1).win(WIN).mss(1460).port(port).peer_port(80));
    t.expect(300, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    assert_eq!(state(&t, c), State::Established);
    t.expect_nothing(5000);
}

/// RFC 9293 §3.3.2 (figure 5: SYN-SENT --rcv SYN/snd SYN,ACK--> SYN-RECEIVED), §3.5 figure 7,
/// §3.10.7.3 fourth check: a SYN without ACK in SYN-SENT is a simultaneous open: SYN-RECEIVED,
/// and our SYN again with the ACK, `<SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>`, offering only the
/// options the peer's SYN offered. The peer's ACK of our SYN then makes it ESTABLISHED.
#[test]
fn simultaneous_open_syn_received_then_ack() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let port = t.expect(0, seg("S").seq(0).any_options()).src_port;
    t.inject(5, seg("S").seq(PEER_ISS).win(WIN).mss(1460).port(port).peer_port(80));
    t.expect(5, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    assert_eq!(state(&t, c), State::SynReceived);
    let r = t.stack.tcp_readiness(c).unwrap();
    assert!(!r.writable && !r.readable && !r.closed);
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN).port(port).peer_port(80));
    t.expect_nothing(10);
    assert_eq!(state(&t, c), State::Established);
    assert!(t.stack.tcp_readiness(c).unwrap().writable);
    assert_eq!((t.stack.counters().active_opens, t.stack.counters().passive_opens), (1, 0));
    t.stack.tcp_send(c, b"x").unwrap();
    t.expect(11, seg("P.").seq(1).ack(PEER_ISS + 1).win(WIN).len(1));
}

/// RFC 9293 §3.5 figure 7 (line 6): in a simultaneous open the peer, itself SYN-RECEIVED,
/// answers our SYN with `<SEQ=IRS><ACK=ISS+1><CTL=SYN,ACK>`. It acknowledges our SYN, so
/// SYN-RECEIVED becomes ESTABLISHED (Linux's `tcp_validate_incoming` passes exactly this
/// SYN-ACK); its SYN is old and is acknowledged with `<SEQ=ISS+1><ACK=IRS+1><CTL=ACK>` — not
/// with our SYN-ACK again, as if it were a retransmitted SYN.
#[test]
fn simultaneous_open_synack_in_syn_received_establishes() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let port = t.expect(0, seg("S").seq(0).any_options()).src_port;
    t.inject(5, seg("S").seq(PEER_ISS).win(WIN).mss(1460).port(port).peer_port(80));
    t.expect(5, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(10, seg("S.").seq(PEER_ISS).ack(1).win(WIN).mss(1460).port(port).peer_port(80));
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.expect_nothing(10);
    assert_eq!(state(&t, c), State::Established);
}

/// RFC 9293 §3.3.2 (figure 5: SYN-RECEIVED --CLOSE/snd FIN--> FIN-WAIT-1), §3.10.4 CLOSE in
/// SYN-RECEIVED: with nothing queued, a FIN goes out at once; the peer's ACK of SYN and FIN
/// leads to FIN-WAIT-2.
#[test]
fn close_in_syn_received_sends_fin() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let port = t.expect(0, seg("S").seq(0).any_options()).src_port;
    t.inject(5, seg("S").seq(PEER_ISS).win(WIN).mss(1460).port(port).peer_port(80));
    t.expect(5, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    assert_eq!(state(&t, c), State::FinWait1);
    t.expect(6, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(2).win(WIN).port(port).peer_port(80));
    t.expect_nothing(10);
    assert_eq!(state(&t, c), State::FinWait2);
}

/// RFC 9293 §3.3.2 (figure 5: SYN-SENT --CLOSE--> CLOSED), §3.10.4: closing during an active
/// open deletes the connection without sending anything; the peer's late SYN-ACK then finds
/// no connection and draws `<SEQ=SEG.ACK><CTL=RST>` (§3.10.7.1).
#[test]
fn close_in_syn_sent_deletes_the_connection() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let port = t.expect(0, seg("S").seq(0).any_options()).src_port;
    t.stack.tcp_close(c).unwrap();
    assert_eq!(t.stack.tcp_readiness(c), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp().connections(), 0);
    t.expect_nothing(3000);
    t.inject(3100, seg("S.").seq(PEER_ISS).ack(1).win(WIN).mss(1460).port(port).peer_port(80));
    t.expect(3100, seg("R").seq(1).win(0));
}

/// RFC 9293 §3.6 (figure 12), §3.3.2: our close: ESTABLISHED --CLOSE/snd FIN--> FIN-WAIT-1
/// --rcv ACK of FIN--> FIN-WAIT-2 --rcv FIN/snd ACK--> TIME-WAIT; the application reads the
/// end of stream.
#[test]
fn active_close_goes_fin_wait_1_fin_wait_2_time_wait() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    assert_eq!(state(&t, c), State::FinWait1);
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect_nothing(2);
    assert_eq!(state(&t, c), State::FinWait2);
    t.inject(3, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(3, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(state(&t, c), State::TimeWait);
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 8]), Ok(0), "end of stream");
    t.expect_nothing(1000);
}

/// RFC 9293 §3.10.7.4 eighth step (FIN-WAIT-1: "If our FIN has been ACKed ... enter
/// TIME-WAIT"): a FIN that also acknowledges our FIN goes straight to TIME-WAIT.
#[test]
fn fin_ack_of_our_fin_goes_from_fin_wait_1_to_time_wait() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(2, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(state(&t, c), State::TimeWait);
}

/// RFC 9293 §3.6 (figure 12, the other side), §3.3.2: the peer's close: ESTABLISHED --rcv
/// FIN/snd ACK--> CLOSE-WAIT (we may still send) --CLOSE/snd FIN--> LAST-ACK --rcv ACK of
/// FIN--> CLOSED. A CLOSED connection still held by the application is released by close.
#[test]
fn passive_close_goes_close_wait_last_ack_closed() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.inject(10, seg("F.").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(state(&t, c), State::CloseWait);
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 8]), Ok(0));
    t.stack.tcp_send(c, b"bye").unwrap();
    t.expect(11, seg("P.").seq(1).ack(PEER_ISS + 2).win(WIN).len(3));
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    assert_eq!(state(&t, c), State::LastAck);
    t.expect(12, seg("F.").seq(4).ack(PEER_ISS + 2).win(WIN));
    t.inject(20, seg(".").seq(PEER_ISS + 2).ack(5).win(WIN));
    t.expect_nothing(20);
    assert_eq!(state(&t, c), State::Closed);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, None, "an orderly end");
    assert_eq!(t.stack.tcp().connections(), 1, "held until the application closes it");
    t.stack.tcp_close(c).unwrap();
    assert_eq!(t.stack.tcp().connections(), 0);
    t.expect_nothing(100_000);
}

/// RFC 9293 §3.6 (figure 13), §3.3.2 (FIN-WAIT-1 --rcv FIN/snd ACK--> CLOSING --rcv ACK of
/// FIN--> TIME-WAIT): both sides close at once; CLOSING retransmits its unacknowledged FIN
/// when the retransmission timer expires (RFC 6298 §5.4).
#[test]
fn simultaneous_close_goes_through_closing() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    // The peer's FIN crossed ours: it does not acknowledge our FIN.
    t.inject(2, seg("F.").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect(2, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(state(&t, c), State::Closing);
    // The peer's ACK of our FIN is lost: CLOSING retransmits the FIN after the RTO, which
    // is the 200 ms minimum (the handshake measured an RTT of 0 ms).
    assert_eq!(t.stack.tcp_info(c).unwrap().rto, Duration::from_millis(200));
    t.expect_nothing(200);
    t.expect(201, seg("F.").seq(1).ack(PEER_ISS + 2).win(WIN));
    t.inject(210, seg(".").seq(PEER_ISS + 2).ack(2).win(WIN));
    t.expect_nothing(210);
    assert_eq!(state(&t, c), State::TimeWait);
    t.expect_nothing(5000);
}

/// RFC 9293 §3.6 ("CLOSE ... the user may continue to RECEIVE until told that the remote
/// side has closed"), §3.10.7.4: after shutdown(Write) the connection keeps taking the peer's
/// data in FIN-WAIT-1 and FIN-WAIT-2, and acknowledges it (at once: quick ACKs on the
/// connection's first data, Linux `tcp_event_data_recv`), until its FIN.
#[test]
fn half_close_keeps_receiving_until_the_peers_fin() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    assert_eq!(t.stack.tcp_send(c, b"late"), Err(Error::InvalidState));
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    // Data in FIN-WAIT-1 (our FIN not yet acknowledged).
    t.inject(2, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(100));
    t.expect(2, seg(".").seq(2).ack(PEER_ISS + 101).win(WIN));
    assert_eq!(state(&t, c), State::FinWait1);
    t.inject(50, seg(".").seq(PEER_ISS + 101).ack(2).win(WIN));
    assert_eq!(state(&t, c), State::FinWait2);
    // Data in FIN-WAIT-2.
    t.inject(60, seg("P.").seq(PEER_ISS + 101).ack(2).win(WIN).len(200));
    t.expect(60, seg(".").seq(2).ack(PEER_ISS + 301).win(WIN));
    let r = t.stack.tcp_readiness(c).unwrap();
    assert!(r.readable && !r.read_closed && !r.writable);
    let mut buf = [0u8; 400];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(300));
    assert_eq!(buf[..100], pattern(PEER_ISS + 1, 100)[..]);
    assert_eq!(buf[100..300], pattern(PEER_ISS + 101, 200)[..]);
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Err(Error::WouldBlock));
    t.inject(200, seg("F.").seq(PEER_ISS + 301).ack(2).win(WIN));
    t.expect(200, seg(".").seq(2).ack(PEER_ISS + 302).win(WIN));
    assert_eq!(state(&t, c), State::TimeWait);
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(0));
}

// ---- Rule 2: aborts. ----

/// RFC 9293 §3.10.4 ABORT in ESTABLISHED: `<SEQ=SND.NXT><CTL=RST>` (with `<ACK=RCV.NXT>` and
/// the ACK bit, as Linux's `tcp_send_active_reset`), the connection is deleted, the handle
/// is dead; later segments from the peer find no connection and draw RST (§3.10.7.1).
#[test]
fn abort_in_established_sends_rst_and_forgets() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.inject(1, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(10));
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 10]), Ok(10));
    t.stack.tcp_send(c, b"12345").unwrap();
    // The data goes out with the ACK of the peer's 10 bytes.
    t.expect(2, seg("P.").seq(1).ack(PEER_ISS + 11).win(WIN).len(5));
    t.stack.tcp_abort(c).unwrap();
    t.expect(3, seg("R.").seq(6).ack(PEER_ISS + 11).win(0));
    assert_eq!(t.stack.tcp_readiness(c), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_abort(c), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp().connections(), 0);
    assert_eq!(t.stack.counters().resets_sent, 1);
    t.expect_nothing(5000);
    t.inject(5000, seg("P.").seq(PEER_ISS + 11).ack(1).win(WIN).len(10));
    t.expect(5000, seg("R").seq(1).win(0));
}

/// RFC 9293 §3.10.4 (CLOSE may abort), RFC 2525 §2.17, Linux `tcp_close`: closing with
/// received data unread resets the connection, `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=RST,ACK>`,
/// so the peer learns that its data was not consumed; no FIN is sent.
#[test]
fn close_with_unread_data_sends_rst() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.inject(1, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(10));
    t.stack.tcp_close(c).unwrap();
    t.expect(1, seg("R.").seq(1).ack(PEER_ISS + 11).win(0));
    t.expect_nothing(1000);
    assert_eq!(t.stack.tcp_readiness(c), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp().connections(), 0);
}

/// Linux behaviour: shutdown(Read) alone does not touch the receive path (data still
/// arriving is taken in, and writing goes on); once the write side is shut down too
/// (FIN-WAIT-1/2 with RCV_SHUTDOWN, as after close), data resets the connection with
/// `<SEQ=SND.NXT><CTL=RST>` and the application sees `Reset` (RFC 1122 §4.2.2.13).
#[test]
fn data_resets_only_once_both_halves_are_shut() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.stack.tcp_shutdown(c, Shutdown::Read).unwrap();
    t.expect_nothing(5);
    assert_eq!(state(&t, c), State::Established);
    t.inject(10, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(10));
    let _ = t.run_to(300);
    assert_eq!(state(&t, c), State::Established, "shutdown(Read) alone: no reset");
    assert_eq!(t.stack.tcp_send(c, b"x"), Ok(1));
    let _ = t.run_to(600);
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    let _ = t.run_to(700);
    t.inject(710, seg("P.").seq(PEER_ISS + 11).ack(3).win(WIN).len(10));
    let sent = t.run_to(720);
    assert!(sent.iter().any(|(_, s)| s.flags.contains(ackclock::wire::tcp::TcpFlags::RST)), "{sent:?}");
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!((r.state, r.error, r.closed), (State::Closed, Some(Error::Reset), true));
    assert_eq!(t.stack.tcp_send(c, b"x"), Err(Error::Reset));
}

// ---- Rule 3: TIME-WAIT. ----

fn to_time_wait(t: &mut Script) -> (ListenerHandle, TcpHandle) {
    let (l, c) = established(t);
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.inject(3, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(3, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(state(t, c), State::TimeWait);
    (l, c)
}

/// RFC 9293 §3.4.2, §3.10.7.4: TIME-WAIT lasts 2 MSL (here MSL = 1 s, entered at 3 ms),
/// then the connection is deleted and its 4-tuple is closed again.
#[test]
fn time_wait_lasts_two_msl() {
    let mut t = Script::new(config(|c| c.msl = Duration::from_secs(1)));
    let (_l, c) = to_time_wait(&mut t);
    let r = t.stack.tcp_readiness(c).unwrap();
    assert!(r.closed && r.read_closed && !r.writable);
    t.stack.tcp_close(c).unwrap();
    assert_eq!(t.stack.tcp_readiness(c), Err(Error::InvalidHandle));
    t.expect_nothing(2002);
    assert_eq!(t.stack.tcp().connections(), 1, "still TIME-WAIT just before 2 MSL");
    t.expect_nothing(2004);
    assert_eq!(t.stack.tcp().connections(), 0, "gone after 2 MSL");
    // The port still listens: an ACK draws <SEQ=SEG.ACK><CTL=RST>.
    t.inject(2100, seg(".").seq(PEER_ISS + 2).ack(2).win(WIN));
    t.expect(2100, seg("R").seq(2).win(0));
}

/// RFC 9293 §3.10.7.4 eighth step (TIME-WAIT: "Restart the 2 MSL time-wait timeout"), Linux
/// `tcp_timewait_state_process`: a retransmitted FIN (our last ACK was lost) is acknowledged
/// again and TIME-WAIT restarts its 2 MSL from then.
#[test]
fn time_wait_acks_retransmitted_fin_and_restarts_two_msl() {
    let mut t = Script::new(config(|c| c.msl = Duration::from_secs(1)));
    let (_l, c) = to_time_wait(&mut t);
    t.stack.tcp_close(c).unwrap();
    t.inject(1500, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(1500, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    t.expect_nothing(2100);
    assert_eq!(t.stack.tcp().connections(), 1, "2 MSL counts from the retransmitted FIN");
    t.expect_nothing(3499);
    assert_eq!(t.stack.tcp().connections(), 1);
    t.expect_nothing(3501);
    assert_eq!(t.stack.tcp().connections(), 0);
}

/// RFC 1122 §4.2.2.13, RFC 6191, Linux `tcp_timewait_state_process`: in TIME-WAIT an old
/// duplicate SYN (below RCV.NXT) is only acknowledged, but a SYN with a higher sequence
/// number reopens the connection: the TIME-WAIT state is dropped and the listener answers
/// with the SYN-ACK of a new incarnation, whose ISS lies above the old one's sequence space.
#[test]
fn time_wait_reopens_on_syn_with_higher_sequence() {
    let mut t = Script::new(tcp_config());
    let (l, c) = to_time_wait(&mut t);
    t.stack.tcp_close(c).unwrap();
    t.inject(100, seg("S").seq(PEER_ISS - 5000).win(WIN).mss(1460));
    t.expect(100, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(t.stack.tcp().connections(), 1);
    t.inject(200, seg("S").seq(PEER_ISS + 100_000).win(WIN).mss(1460));
    let s = t.expect(200, seg("S.").ack(PEER_ISS + 100_001).win(WIN).mss(1460));
    assert_eq!((s.src_port, s.dst_port), (8080, PEER_PORT));
    assert!((s.seq as i32) > 2, "new ISS {} (relative) must be above the old SND.NXT 2", s.seq as i32);
    t.expect_nothing(200);
    assert_eq!(t.stack.tcp().connections(), 1, "the TIME-WAIT connection gave way to the new one");
    t.inject(210, seg(".").seq(PEER_ISS + 100_001).ack(s.seq.wrapping_add(1)).win(WIN));
    let c2 = t.stack.tcp_accept(l).unwrap();
    assert_eq!(state(&t, c2), State::Established);
    assert_eq!(t.stack.counters().passive_opens, 2);
    t.stack.tcp_send(c2, b"again").unwrap();
    t.expect(211, seg("P.").seq(s.seq.wrapping_add(1)).ack(PEER_ISS + 100_001).win(WIN).len(5));
}

/// RFC 1122 §4.2.2.13 ("assigns its initial sequence number for the new connection to be
/// larger than the largest sequence number it used on the previous connection incarnation"),
/// Linux (`tw_snd_nxt + 65535 + 2`): after a transfer of 100 000 bytes in a few
/// milliseconds — more than the RFC 6528 clock (one tick per 4 µs) advanced — the new
/// incarnation's ISS must still lie above the old SND.NXT, or the peer could take old
/// duplicates for new data.
#[test]
fn time_wait_reopen_iss_is_above_the_old_sequence_space() {
    let mut t = Script::new(tcp_config());
    let (l, c) = established(&mut t);
    let total = 100_000u32;
    let mut queued = 0;
    while queued < total as usize {
        queued += t.stack.tcp_send(c, &vec![7u8; total as usize - queued]).unwrap();
    }
    let mut ms = 1;
    let mut acked = 1u32;
    while acked < total + 1 {
        t.at_us(ms * 1000);
        let end = t.sent_now().iter().map(|s| s.seq + s.len as u32).max().expect("data goes out");
        acked = end;
        t.inject(ms, seg(".").seq(PEER_ISS + 1).ack(acked).win(WIN));
        ms += 1;
        assert!(ms < 100, "transfer stalled at {acked}");
    }
    t.stack.tcp_close(c).unwrap();
    let fin = total + 1;
    t.expect(ms, seg("F.").seq(fin).ack(PEER_ISS + 1).win(WIN));
    t.inject(ms, seg("F.").seq(PEER_ISS + 1).ack(fin + 1).win(WIN));
    t.expect(ms, seg(".").seq(fin + 1).ack(PEER_ISS + 2).win(WIN));
    t.inject(ms + 10, seg("S").seq(PEER_ISS + 100_000).win(WIN).mss(1460));
    let s = t.expect(ms + 10, seg("S.").ack(PEER_ISS + 100_001).win(WIN).mss(1460));
    assert!(
        (s.seq.wrapping_sub(fin + 1) as i32) > 0,
        "new ISS {} (relative to the old ISS) is not above the old SND.NXT {}",
        s.seq as i32,
        fin + 1
    );
    assert_eq!(t.stack.tcp_acceptable(l), Ok(0));
}

/// Linux `tcp_v4_rcv` (TCP_TW_SYN without a listener falls through to TCP_TW_ACK), RFC 5961
/// §4.2: a higher SYN to a TIME-WAIT connection can reopen it only through a listener; with
/// none (our side opened actively) TIME-WAIT stays and answers with
/// `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>`, never an RST.
#[test]
fn time_wait_without_listener_acks_a_higher_syn() {
    let mut t = Script::new(tcp_config());
    let (c, port) = connected(&mut t);
    let peer = |s: Seg| s.port(port).peer_port(80);
    t.stack.tcp_close(c).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, peer(seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN)));
    t.expect(2, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    t.inject(100, peer(seg("S").seq(PEER_ISS + 100_000).win(WIN).mss(1460)));
    t.expect(100, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    t.expect_nothing(100);
    assert_eq!(t.stack.tcp().connections(), 1, "still in TIME-WAIT");
    assert_eq!(t.stack.counters().resets_sent, 0);
}

/// Linux behaviour and the socket contract ("the slot ... stays, CLOSED, until the
/// application closes it"), no RFC rule; the reopening itself is RFC 1122 §4.2.2.13 and
/// RFC 6191. A TIME-WAIT reincarnation never touches the application's socket: when a new SYN
/// reopens a TIME-WAIT connection whose handle the application still holds, that handle
/// stays valid and still yields the unread data and the end of stream.
#[test]
fn time_wait_reopen_keeps_the_old_handle_readable() {
    let mut t = Script::new(tcp_config());
    let (l, c) = established(&mut t);
    t.inject(1, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(10));
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    t.expect(2, seg("F.").seq(1).ack(PEER_ISS + 11).win(WIN));
    t.inject(3, seg("F.").seq(PEER_ISS + 11).ack(2).win(WIN));
    t.expect(3, seg(".").seq(2).ack(PEER_ISS + 12).win(WIN));
    assert_eq!(state(&t, c), State::TimeWait);
    t.inject(200, seg("S").seq(PEER_ISS + 100_000).win(WIN).mss(1460));
    let s = t.expect(200, seg("S.").ack(PEER_ISS + 100_001).win(WIN).mss(1460));
    let mut buf = [0u8; 16];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(10), "the old connection's unread data");
    assert_eq!(buf[..10], pattern(PEER_ISS + 1, 10)[..]);
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(0));
    t.stack.tcp_close(c).unwrap();
    t.inject(210, seg(".").seq(PEER_ISS + 100_001).ack(s.seq.wrapping_add(1)).win(WIN));
    let c2 = t.stack.tcp_accept(l).unwrap();
    assert_eq!(state(&t, c2), State::Established);
}

// ---- Rule 4: closed ports and listeners. ----

/// RFC 9293 §3.10.7.1 (CLOSED): a segment to a port with no connection or listener draws
/// `<SEQ=SEG.ACK><CTL=RST>` if it has ACK, else `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`
/// (SYN and FIN count in SEG.LEN); an RST draws nothing.
#[test]
fn segments_to_a_closed_port_draw_rst() {
    let mut t = Script::new(tcp_config());
    t.iss = Some(0); // our sequence numbers are absolute here
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).port(9999));
    t.expect(0, seg("R.").seq(0).ack(PEER_ISS + 1).win(0));
    t.inject(1, seg(".").seq(PEER_ISS).ack(777).port(9999));
    t.expect(1, seg("R").seq(777).win(0));
    t.inject(2, seg("P.").seq(PEER_ISS).ack(5).len(10).port(9999));
    t.expect(2, seg("R").seq(5).win(0));
    t.inject(3, seg("F").seq(PEER_ISS).len(10).port(9999));
    t.expect(3, seg("R.").seq(0).ack(PEER_ISS + 11).win(0));
    t.inject(4, seg("R").seq(PEER_ISS).port(9999));
    t.inject(5, seg("R.").seq(PEER_ISS).ack(9).port(9999));
    t.expect_nothing(5);
    assert_eq!(t.stack.counters().resets_sent, 4);
    assert_eq!(t.stack.tcp().connections(), 0);
}

/// RFC 9293 §3.10.7.2 (LISTEN): an ACK draws `<SEQ=SEG.ACK><CTL=RST>`, an RST is ignored,
/// and neither creates a connection; the listener still answers the next SYN.
#[test]
fn listener_resets_acks_and_ignores_rsts() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.iss = Some(0);
    t.inject(0, seg(".").seq(PEER_ISS).ack(12345).win(WIN));
    t.expect(0, seg("R").seq(12345).win(0));
    t.inject(1, seg("P.").seq(PEER_ISS).ack(99).win(WIN).len(20));
    t.expect(1, seg("R").seq(99).win(0));
    t.inject(2, seg("R").seq(PEER_ISS));
    t.inject(3, seg("R.").seq(PEER_ISS).ack(5));
    t.expect_nothing(3);
    assert_eq!(t.stack.counters().resets_sent, 2);
    assert_eq!(t.stack.tcp().connections(), 0);
    assert_eq!(t.stack.tcp_accept(l), Err(Error::WouldBlock));
    t.iss = None;
    t.inject(10, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(10, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
}

// ---- Rule 5: RFC 5961 §3, RST. ----

/// RFC 5961 §3.2, RFC 9293 §3.10.7.4 second check: an RST exactly at RCV.NXT resets the
/// connection: nothing is sent, it is CLOSED, and the socket calls report `Reset`.
#[test]
fn rst_at_rcv_nxt_resets_the_connection() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.inject(10, seg("R").seq(PEER_ISS + 1));
    t.expect_nothing(10);
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!((r.state, r.error), (State::Closed, Some(Error::Reset)));
    assert!(r.readable && r.closed && r.read_closed && !r.writable);
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 8]), Err(Error::Reset));
    assert_eq!(t.stack.tcp_send(c, b"x"), Err(Error::Reset));
    let k = t.stack.counters();
    assert_eq!((k.resets_received, k.established_resets, k.challenge_acks), (1, 1, 0));
    t.stack.tcp_close(c).unwrap();
    assert_eq!(t.stack.tcp().connections(), 0);
    t.expect_nothing(5000);
}

/// RFC 5961 §3.2: an RST inside the window but not at RCV.NXT draws a challenge ACK,
/// `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>`, and changes nothing (also at the window's last
/// byte, RCV.NXT + RCV.WND - 1).
#[test]
fn rst_in_window_draws_challenge_ack() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.inject(10, seg("R").seq(PEER_ISS + 1 + 1000));
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(11, seg("R.").seq(PEER_ISS + 1 + 65534).ack(1));
    t.expect(11, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.expect_nothing(12);
    assert_eq!(state(&t, c), State::Established);
    let k = t.stack.counters();
    assert_eq!((k.challenge_acks, k.drops_bad_rst, k.resets_received), (2, 2, 0));
    // The connection is intact: data still flows both ways.
    t.inject(20, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(5));
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 8]), Ok(5));
    t.stack.tcp_send(c, b"ok").unwrap();
    t.expect(20, seg("P.").seq(1).ack(PEER_ISS + 6).win(WIN).len(2));
}

/// RFC 5961 §3.2 ("If the RST bit is set and the sequence number is outside the current
/// receive window, silently drop the segment"): just right of the window (RCV.NXT + RCV.WND)
/// and just left of it (RCV.NXT - 1).
#[test]
fn rst_outside_window_is_dropped_silently() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.inject(10, seg("R").seq(PEER_ISS + 1 + 65535));
    t.inject(11, seg("R").seq(PEER_ISS));
    t.inject(12, seg("R.").seq(PEER_ISS + 1 + 1_000_000).ack(1));
    t.expect_nothing(100);
    assert_eq!(state(&t, c), State::Established);
    let k = t.stack.counters();
    assert_eq!((k.challenge_acks, k.resets_received, k.resets_sent), (0, 0, 0));
}

/// RFC 9293 §3.10.7.3 (SYN-SENT, first and second checks), RFC 5961 §3.2: an RST is believed
/// only if its ACK acknowledges our SYN; without ACK, or with an unacceptable one, it is
/// dropped (and an RST is never answered). The acceptable one refuses the connection.
#[test]
fn rst_in_syn_sent_needs_an_acceptable_ack() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let port = t.expect(0, seg("S").seq(0).any_options()).src_port;
    t.inject(10, seg("R").seq(0).port(port).peer_port(80));
    t.inject(11, seg("R.").seq(0).ack(0).port(port).peer_port(80));
    t.inject(12, seg("R.").seq(0).ack(2).port(port).peer_port(80));
    t.expect_nothing(12);
    assert_eq!(state(&t, c), State::SynSent);
    assert_eq!(t.stack.counters().resets_received, 0);
    t.inject(20, seg("R.").seq(0).ack(1).port(port).peer_port(80));
    t.expect_nothing(20);
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!((r.state, r.error, r.closed), (State::Closed, Some(Error::Refused), true));
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 8]), Err(Error::Refused));
    assert_eq!(t.stack.tcp_send(c, b"x"), Err(Error::Refused));
    let k = t.stack.counters();
    assert_eq!((k.resets_received, k.failed_opens), (1, 1));
    t.expect_nothing(10_000);
}

// ---- Rule 6: RFC 5961 §4 and §7. ----

/// RFC 5961 §4.2: a SYN in a synchronized state draws a challenge ACK,
/// `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>`, never a reset; the connection is unchanged.
#[test]
fn syn_in_established_draws_challenge_ack() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.inject(10, seg("S").seq(PEER_ISS + 1 + 500).win(WIN).mss(1460));
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.expect_nothing(100);
    assert_eq!(state(&t, c), State::Established);
    let k = t.stack.counters();
    assert_eq!((k.challenge_acks, k.resets_sent, k.resets_received), (1, 0, 0));
    t.inject(200, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(3));
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 8]), Ok(3));
}

/// RFC 5961 §4.2 ("If the SYN bit is set, irrespective of the sequence number, TCP MUST send
/// an ACK (also referred to as challenge ACK)"), §7: a SYN outside the window is a challenge
/// ACK too, so it is counted and rate limited like the others (limit 1 here: the second
/// one in the same second is suppressed).
#[test]
fn syn_outside_window_draws_rate_limited_challenge_ack() {
    let mut t = Script::new(config(|c| c.challenge_ack_limit = 1));
    let (_l, c) = established(&mut t);
    t.inject(10, seg("S").seq(PEER_ISS.wrapping_add(0x4000_0000)).win(WIN).mss(1460));
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(20, seg("S").seq(PEER_ISS.wrapping_add(0x5000_0000)).win(WIN).mss(1460));
    t.expect_nothing(20);
    assert_eq!(state(&t, c), State::Established);
    let k = t.stack.counters();
    assert_eq!((k.challenge_acks, k.challenge_acks_suppressed), (1, 1));
}

/// RFC 5961 §7 with Linux's randomised budget (since 4.7, against CVE-2016-5696): with
/// `challenge_ack_limit` 2, each second allows ⌈2/2⌉ plus a draw below 2, so 1 or 2
/// challenge ACKs, across RSTs and SYNs alike: the first ones in a second are answered with
/// `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>`, the rest counted as suppressed, and a second
/// later the budget is drawn again. Over twenty seconds both budgets occur (the draw is
/// keyed by the stack's seed, so this run repeats exactly).
#[test]
fn challenge_acks_are_rate_limited() {
    let mut t = Script::new(config(|c| c.challenge_ack_limit = 2));
    let (_l, c) = established(&mut t);
    let mut budgets = vec![];
    for second in 0..20u64 {
        let mut answered = vec![];
        for i in 0..4u64 {
            let ms = 100 + 1000 * second + i;
            if i % 2 == 0 {
                t.inject(ms, seg("R").seq(PEER_ISS + 1 + 1000));
            } else {
                t.inject(ms, seg("S").seq(PEER_ISS + 1 + 2000).win(WIN).mss(1460));
            }
            let sent = t.sent_now();
            for s in &sent {
                assert_eq!((s.flags, s.seq, s.ack, s.win, s.len), (seg(".").flags, 1, PEER_ISS + 1, WIN, 0), "{s:?}");
            }
            assert!(sent.len() <= 1, "{sent:?}");
            answered.push(sent.len() == 1);
        }
        let budget = answered.iter().filter(|&&a| a).count();
        assert!((1..=2).contains(&budget), "second {second}: {answered:?}");
        assert!(answered[..budget].iter().all(|&a| a), "second {second}: the first ones are answered: {answered:?}");
        budgets.push(budget as u64);
    }
    assert!(budgets.contains(&1) && budgets.contains(&2), "the budget is drawn each second: {budgets:?}");
    let k = t.stack.counters();
    let sent: u64 = budgets.iter().sum();
    assert_eq!((k.challenge_acks, k.challenge_acks_suppressed), (sent, 80 - sent));
    assert_eq!(state(&t, c), State::Established);
}

// ---- Rule 7: RFC 5961 §5, ACK validation. ----

/// RFC 5961 §5.2, RFC 9293 §3.10.7.4 fifth step ("If the ACK acknowledges something not yet
/// sent (SEG.ACK > SND.NXT), then send an ACK, drop the segment, and return"): the segment's
/// data is not taken and nothing it acknowledges counts.
#[test]
fn ack_of_unsent_data_is_answered_and_dropped() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.stack.tcp_send(c, b"12345").unwrap();
    t.expect(1, seg("P.").seq(1).ack(PEER_ISS + 1).win(WIN).len(5));
    t.inject(10, seg("P.").seq(PEER_ISS + 1).ack(100).win(WIN).len(10));
    t.expect(10, seg(".").seq(6).ack(PEER_ISS + 1).win(WIN));
    t.expect_nothing(11);
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 16]), Err(Error::WouldBlock), "the data was dropped");
    assert_eq!(t.stack.tcp_info(c).unwrap().flight, 5, "nothing acknowledged");
    assert_eq!(t.stack.counters().drops_bad_ack, 1);
    assert_eq!(state(&t, c), State::Established);
    // The real ACK still works.
    t.inject(20, seg(".").seq(PEER_ISS + 1).ack(6).win(WIN));
    assert_eq!(t.stack.tcp_info(c).unwrap().flight, 0);
    t.expect_nothing(3000);
}

/// RFC 5961 §5.2: acceptable ACKs lie in [SND.UNA - MAX.SND.WND, SND.NXT]. With the peer's
/// window at 1000 bytes and SND.UNA at ISS+2001, an ACK of ISS+1001 is an old duplicate and
/// ignored, while ISS+1000 is too old: challenge ACK, and the segment (with its data) is
/// dropped.
#[test]
fn ack_older_than_max_window_draws_challenge_ack() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(1000).mss(1000));
    t.stack.tcp_send(c, &[1u8; 1000]).unwrap();
    t.expect(1, seg("P.").seq(1).ack(PEER_ISS + 1).win(WIN).len(1000));
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(1001).win(1000));
    t.stack.tcp_send(c, &[2u8; 1000]).unwrap();
    t.expect(3, seg("P.").seq(1001).ack(PEER_ISS + 1).win(WIN).len(1000));
    t.inject(4, seg(".").seq(PEER_ISS + 1).ack(2001).win(1000));
    assert_eq!(t.stack.tcp_info(c).unwrap().flight, 0);
    // SND.UNA - MAX.SND.WND exactly: acceptable, a harmless old ACK.
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(1001).win(1000));
    t.expect_nothing(10);
    assert_eq!(t.stack.counters().challenge_acks, 0);
    // One below: too old.
    t.inject(20, seg("P.").seq(PEER_ISS + 1).ack(1000).win(1000).len(10));
    t.expect(20, seg(".").seq(2001).ack(PEER_ISS + 1).win(WIN));
    t.expect_nothing(21);
    let k = t.stack.counters();
    assert_eq!((k.challenge_acks, k.drops_bad_ack), (1, 1));
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 16]), Err(Error::WouldBlock), "the data was dropped");
    assert_eq!(state(&t, c), State::Established);
}

// ---- Rule 8: SYN-RECEIVED. ----

/// RFC 9293 §3.10.7.4 (SYN-RECEIVED, first check: the old SYN is unacceptable and answered),
/// Linux `tcp_check_req`: a retransmitted SYN (our SYN-ACK was lost) gets the same SYN-ACK
/// again, and no second connection is created.
#[test]
fn syn_received_answers_retransmitted_syn_with_synack() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(300, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(300, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.expect_nothing(300);
    assert_eq!(t.stack.tcp().connections(), 1, "still the one half-open connection");
    t.inject(310, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN));
    let c = t.stack.tcp_accept(l).unwrap();
    assert_eq!(state(&t, c), State::Established);
}

/// RFC 6298 §5.5 (backoff), RFC 9293 §3.8.1, Linux `tcp_synack_retries`: an unanswered
/// SYN-ACK is retransmitted after 1 s, 2 s, 4 s, ...; after `synack_retries` (3) the
/// half-open connection disappears silently, freeing its SYN queue slot (backlog 1).
#[test]
fn synack_retransmits_with_backoff_then_half_open_disappears() {
    let mut t = Script::new(config(|c| c.synack_retries = 3));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 1).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    for at in [1000, 3000, 7000] {
        t.expect_nothing(at - 1);
        t.expect(at, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    }
    t.expect_nothing(14_999);
    assert_eq!(t.stack.tcp().connections(), 1);
    t.expect_nothing(15_001);
    assert_eq!(t.stack.tcp().connections(), 0, "dropped without an RST");
    assert_eq!(t.stack.counters().resets_sent, 0);
    // The late ACK finds only the listener: <SEQ=SEG.ACK><CTL=RST>.
    t.inject(16_000, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect(16_000, seg("R").seq(1).win(0));
    assert_eq!(t.stack.tcp_accept(l), Err(Error::WouldBlock));
    t.inject(16_100, seg("S").seq(PEER_ISS + 9).win(WIN).mss(1460).peer_port(40001));
    let s = t.expect(16_100, seg("S.").ack(PEER_ISS + 10).win(WIN).mss(1460));
    assert_eq!(s.dst_port, 40001, "the SYN queue slot is free again");
}

/// RFC 9293 §3.10.7.4 fifth step (SYN-RECEIVED: "If the segment acknowledgment is not
/// acceptable, form a reset segment <SEQ=SEG.ACK><CTL=RST> and send it"); the connection
/// stays SYN-RECEIVED and completes with the right ACK.
#[test]
fn syn_received_resets_an_ack_not_acknowledging_our_syn() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(5).win(WIN));
    t.expect(10, seg("R").seq(5).win(0));
    t.inject(11, seg(".").seq(PEER_ISS + 1).ack(0).win(WIN));
    t.expect(11, seg("R").seq(0).win(0));
    t.expect_nothing(12);
    assert_eq!(t.stack.tcp_acceptable(l), Ok(0));
    assert_eq!(t.stack.tcp().connections(), 1);
    t.inject(20, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN));
    let c = t.stack.tcp_accept(l).unwrap();
    assert_eq!(state(&t, c), State::Established);
}

// ---- Rule 9: SYN-SENT. ----

/// RFC 9293 §3.8.1, RFC 6298 §5.5, Linux `tcp_syn_retries`: after `syn_retries` (2)
/// retransmissions (1 s, then 2 s later) the active open fails with `TimedOut`, silently.
#[test]
fn syn_retries_exhausted_times_out() {
    let mut t = Script::new(config(|c| c.syn_retries = 2));
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    t.expect(0, seg("S").seq(0).any_options());
    t.expect_nothing(999);
    t.expect(1000, seg("S").seq(0).any_options());
    t.expect_nothing(2999);
    t.expect(3000, seg("S").seq(0).any_options());
    t.expect_nothing(6999);
    assert_eq!(state(&t, c), State::SynSent);
    t.expect_nothing(7001);
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!((r.state, r.error, r.closed), (State::Closed, Some(Error::TimedOut), true));
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 4]), Err(Error::TimedOut));
    assert_eq!(t.stack.tcp_send(c, b"x"), Err(Error::TimedOut));
    assert_eq!(t.stack.counters().failed_opens, 1);
    assert_eq!(t.stack.counters().resets_sent, 0);
    t.stack.tcp_close(c).unwrap();
    assert_eq!(t.stack.tcp().connections(), 0);
}

/// RFC 9293 §3.10.7.3 (SYN-SENT, first check): a SYN-ACK whose ACK does not acknowledge our
/// SYN (SEG.ACK =< ISS or SEG.ACK > SND.NXT) draws `<SEQ=SEG.ACK><CTL=RST>` and changes
/// nothing; the right SYN-ACK then completes the open.
#[test]
fn synack_with_bad_ack_draws_rst() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let port = t.expect(0, seg("S").seq(0).any_options()).src_port;
    let synack = |ack| seg("S.").seq(PEER_ISS).ack(ack).win(WIN).mss(1460).port(port).peer_port(80);
    t.inject(10, synack(0));
    t.expect(10, seg("R").seq(0).win(0));
    t.inject(11, synack(2));
    t.expect(11, seg("R").seq(2).win(0));
    t.inject(12, synack(0x8000_0000));
    t.expect(12, seg("R").seq(0x8000_0000).win(0));
    t.expect_nothing(13);
    assert_eq!(state(&t, c), State::SynSent);
    t.inject(20, synack(1));
    t.expect(20, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    assert_eq!(state(&t, c), State::Established);
}

// ---- Rule 10: listen queues. ----

/// Linux behaviour (`tcp_conn_request` without SYN cookies, `tcp_syncookies` = 0), no RFC
/// rule: RFC 9293 §3.10.7.2 does not bound the SYN queue. With backlog 2, a third
/// concurrent SYN is dropped silently (counted), and once a slot frees up its
/// retransmission is answered. (With SYN cookies, the default, see tcp_syncookie.rs.)
#[test]
fn syn_beyond_backlog_is_dropped_silently() {
    let mut t = Script::new(config(|c| c.syn_cookies = SynCookies::Never));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 2).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40001));
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40002));
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40003));
    let sent = t.sent_now();
    let ports: Vec<u16> = sent.iter().map(|s| s.dst_port).collect();
    assert_eq!(ports, [40001, 40002], "{sent:?}");
    assert!(sent.iter().all(|s| s.flags == seg("S.").flags && s.ack == PEER_ISS + 1));
    assert_eq!(t.stack.counters().drops_listen_overflow, 1);
    assert_eq!(t.stack.tcp().connections(), 2);
    // The first completes and is accepted: the SYN queue has room again.
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(sent[0].seq.wrapping_add(1)).win(WIN).peer_port(40001));
    let c1 = t.stack.tcp_accept(l).unwrap();
    assert_eq!(t.stack.tcp_tuple(c1).unwrap().remote_port, 40001);
    t.inject(500, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40003));
    let s3 = t.expect(500, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460));
    assert_eq!(s3.dst_port, 40003);
    assert_eq!(t.stack.counters().drops_listen_overflow, 1);
}

/// Linux behaviour (`tcp_check_req`/`tcp_v4_syn_recv_sock` with the accept queue full and
/// `tcp_abort_on_overflow` off), no RFC rule; the SYN-ACK retransmission is RFC 6298 §5.
/// The handshake's final ACK is dropped and the connection stays SYN-RECEIVED; it
/// retransmits its SYN-ACK, and once the application has accepted, the peer's next ACK
/// completes it.
#[test]
fn final_ack_dropped_while_accept_queue_full() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 2).unwrap();
    let syn = |p: u16| seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(p);
    let mut iss = std::collections::HashMap::new();
    let synacks = |t: &mut Script, iss: &mut std::collections::HashMap<u16, u32>| {
        for s in t.sent_now() {
            assert_eq!((s.flags, s.ack), (seg("S.").flags, PEER_ISS + 1), "{s:?}");
            iss.insert(s.dst_port, s.seq);
        }
    };
    t.inject(0, syn(40001));
    t.inject(0, syn(40002));
    synacks(&mut t, &mut iss);
    let ack = |p: u16, iss: u32| seg(".").seq(PEER_ISS + 1).ack(iss.wrapping_add(1)).win(WIN).peer_port(p);
    t.inject(10, ack(40001, iss[&40001]));
    t.inject(20, syn(40003));
    synacks(&mut t, &mut iss);
    assert_eq!(iss.len(), 3);
    t.inject(30, ack(40002, iss[&40002]));
    assert_eq!(t.stack.tcp_acceptable(l), Ok(2), "the accept queue is full");
    let drops = t.stack.counters().drops_listen_overflow;
    t.inject(40, ack(40003, iss[&40003]));
    t.expect_nothing(40);
    assert_eq!(t.stack.counters().drops_listen_overflow, drops + 1, "the final ACK was dropped");
    assert_eq!(t.stack.tcp_acceptable(l), Ok(2));
    assert_eq!(t.stack.tcp().connections(), 3);
    // Still SYN-RECEIVED: the SYN-ACK timer runs (1 s after the SYN at 20 ms).
    t.expect_nothing(1019);
    let r = t.expect(1020, seg("S.").seq(iss[&40003]).ack(PEER_ISS + 1).win(WIN).mss(1460));
    assert_eq!(r.dst_port, 40003);
    let c1 = t.stack.tcp_accept(l).unwrap();
    assert_eq!(t.stack.tcp_tuple(c1).unwrap().remote_port, 40001);
    t.inject(1030, ack(40003, iss[&40003]));
    t.expect_nothing(1030);
    assert_eq!(t.stack.tcp_acceptable(l), Ok(2));
    let c2 = t.stack.tcp_accept(l).unwrap();
    let c3 = t.stack.tcp_accept(l).unwrap();
    assert_eq!(t.stack.tcp_tuple(c2).unwrap().remote_port, 40002);
    assert_eq!(t.stack.tcp_tuple(c3).unwrap().remote_port, 40003);
    assert_eq!(state(&t, c3), State::Established);
    t.expect_nothing(5000);
}

/// RFC 9293 §3.10.7.4 (a valid RST deletes the TCB) and BSD's `soabort` (a connection
/// reset before it is accepted leaves the queue; Linux would hand it out reset), no RFC rule
/// for the queue: with backlog 2, ten connections in turn complete the handshake and are
/// reset unaccepted; none is ever accepted, and each frees its place in the backlog. A new
/// half-open connection in the slot of a reset one is not acceptable until its own
/// handshake completes.
#[test]
fn connections_reset_before_accept_leave_the_accept_queue() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 2).unwrap();
    for k in 0..10u32 {
        let (p, iss) = (41000 + k as u16, PEER_ISS + 10_000 * k);
        t.inject(k as u64, seg("S").seq(iss).win(WIN).mss(1460).peer_port(p));
        let s = t.expect(k as u64, seg("S.").ack(iss + 1).win(WIN).mss(1460));
        t.inject(k as u64, seg(".").seq(iss + 1).ack(s.seq.wrapping_add(1)).win(WIN).peer_port(p));
        assert_eq!(t.stack.tcp_acceptable(l), Ok(1), "connection {k} is queued");
        t.inject(k as u64, seg("R").seq(iss + 1).peer_port(p));
        assert_eq!(t.stack.tcp_acceptable(l), Ok(0), "connection {k} left the queue");
        assert_eq!(t.stack.tcp().connections(), 0);
    }
    assert_eq!(t.stack.counters().drops_listen_overflow, 0, "the reset ones hold no backlog place");
    assert_eq!(t.stack.tcp_accept(l), Err(Error::WouldBlock));
    // Queued, reset, and its slot taken by a half-open connection: nothing to accept.
    t.inject(20, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(42000));
    let a = t.expect(20, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(20, seg(".").seq(PEER_ISS + 1).ack(a.seq.wrapping_add(1)).win(WIN).peer_port(42000));
    t.inject(21, seg("R").seq(PEER_ISS + 1).peer_port(42000));
    t.inject(22, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(42001));
    let b = t.expect(22, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460));
    assert_eq!(t.stack.tcp().connections(), 1);
    assert_eq!(t.stack.tcp_accept(l), Err(Error::WouldBlock), "a half-open connection is not acceptable");
    t.inject(23, seg(".").seq(PEER_ISS + 1).ack(b.seq.wrapping_add(1)).win(WIN).peer_port(42001));
    let c = t.stack.tcp_accept(l).unwrap();
    assert_eq!(t.stack.tcp_tuple(c).unwrap().remote_port, 42001);
    assert_eq!(state(&t, c), State::Established);
    assert_eq!(t.stack.tcp_accept(l), Err(Error::WouldBlock));
}

/// RFC 9293 §3.4 (connections are identified by both sockets): one listener serves twenty
/// connections from different peer ports at once, each with its own sequence space, and
/// data is delivered to the right one.
#[test]
fn twenty_connections_on_one_listener() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 32).unwrap();
    let ports: Vec<u16> = (41000..41020).collect();
    for &p in &ports {
        t.inject(0, seg("S").seq(PEER_ISS + p as u32).win(WIN).mss(1460).peer_port(p));
    }
    let mut iss = std::collections::HashMap::new();
    for s in t.sent_now() {
        assert_eq!((s.flags, s.ack, s.src_port), (seg("S.").flags, PEER_ISS + s.dst_port as u32 + 1, 8080), "{s:?}");
        assert!(iss.insert(s.dst_port, s.seq).is_none(), "one SYN-ACK per connection");
    }
    assert_eq!(iss.len(), 20);
    for &p in &ports {
        let ack = iss[&p].wrapping_add(1);
        t.inject(5, seg(".").seq(PEER_ISS + p as u32 + 1).ack(ack).win(WIN).peer_port(p));
    }
    t.expect_nothing(5);
    assert_eq!(t.stack.tcp_acceptable(l), Ok(20));
    assert_eq!(t.stack.counters().passive_opens, 20);
    let mut by_port = std::collections::HashMap::new();
    while let Ok(c) = t.stack.tcp_accept(l) {
        by_port.insert(t.stack.tcp_tuple(c).unwrap().remote_port, c);
    }
    assert_eq!(by_port.len(), 20);
    for &p in &ports {
        let msg = format!("hello from {p}");
        t.inject_payload(
            10,
            seg("P.").seq(PEER_ISS + p as u32 + 1).ack(iss[&p].wrapping_add(1)).win(WIN).peer_port(p),
            msg.as_bytes(),
        );
    }
    // Each connection acknowledges its own data (at once: its first data, a quick ACK as
    // Linux's `tcp_event_data_recv` sends it).
    let acks = t.sent_now();
    assert_eq!(acks.len(), 20);
    t.expect_nothing(100);
    for a in &acks {
        let p = a.dst_port;
        let len = format!("hello from {p}").len() as u32;
        assert_eq!(
            (a.flags, a.seq, a.ack),
            (seg(".").flags, iss[&p].wrapping_add(1), PEER_ISS + p as u32 + 1 + len),
            "{a:?}"
        );
    }
    for &p in &ports {
        let mut buf = [0u8; 64];
        let n = t.stack.tcp_recv(by_port[&p], &mut buf).unwrap();
        assert_eq!(&buf[..n], format!("hello from {p}").as_bytes());
    }
}

/// RFC 9293 §3.5 (figure 6 line 5: data may ride on the handshake's final ACK): the data
/// is queued, readable once the connection is accepted, and acknowledged (at once: the
/// connection's first data, a quick ACK as Linux's `tcp_event_data_recv` sends it).
#[test]
fn final_ack_of_passive_open_may_carry_data() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(10, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(20));
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 21).win(WIN));
    t.expect_nothing(100);
    let c = t.stack.tcp_accept(l).unwrap();
    let mut buf = [0u8; 32];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(20));
    assert_eq!(buf[..20], pattern(PEER_ISS + 1, 20)[..]);
}

/// RFC 9293 §3.8.6.2.2 (receiver SWS avoidance: move the right edge only by min(buffer/2,
/// MSS) or more) and RFC 5681 §4.2 (delayed ACKs): without window scaling the window field
/// is already at its 65535 maximum, so reading a small segment opens nothing worth
/// announcing: the segment is acknowledged by the delayed ACK, not at once by a "window
/// update" carrying the same window. (Quick ACKs, which acknowledge a connection's first
/// data at once, are off: the delayed ACK is part of the subject.)
#[test]
fn reading_sends_no_window_update_when_the_window_cannot_grow() {
    let mut t = Script::new(config(|c| c.quick_acks = false));
    let (_l, c) = established(&mut t);
    t.inject(10, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(100));
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 128]), Ok(100));
    t.expect_nothing(49);
    t.expect(50, seg(".").seq(1).ack(PEER_ISS + 101).win(WIN));
    t.expect_nothing(100);
}

// ---- Rule 11: orphans in FIN-WAIT-2. ----

/// Linux `tcp_fin_timeout` (RFC 9293 §3.10.7.4 leaves FIN-WAIT-2 unbounded; an orphan would
/// otherwise live forever): after close(), FIN-WAIT-2 lasts `fin_wait_2_timeout` (5 s here),
/// then the connection disappears silently and a late FIN draws an RST.
#[test]
fn orphan_fin_wait_2_times_out() {
    let mut t = Script::new(config(|c| c.fin_wait_2_timeout = Duration::from_secs(5)));
    let (_l, c) = established(&mut t);
    t.stack.tcp_close(c).unwrap();
    assert_eq!(t.stack.tcp_readiness(c), Err(Error::InvalidHandle));
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect_nothing(5009);
    assert_eq!(t.stack.tcp().connections(), 1, "FIN-WAIT-2 until the timeout");
    t.expect_nothing(5011);
    assert_eq!(t.stack.tcp().connections(), 0, "gone after fin_wait_2_timeout");
    t.inject(6000, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(6000, seg("R").seq(2).win(0));
}

/// Linux behaviour (`tcp_close` in FIN-WAIT-2), no RFC rule: RFC 9293 §3.10.7.4 leaves
/// FIN-WAIT-2 unbounded. A connection half-closed earlier (shutdown(Write), FIN
/// acknowledged) and then closed becomes an orphan in FIN-WAIT-2, and the same timeout
/// bounds it from the close.
#[test]
fn close_in_fin_wait_2_starts_the_orphan_timeout() {
    let mut t = Script::new(config(|c| c.fin_wait_2_timeout = Duration::from_secs(5)));
    let (_l, c) = established(&mut t);
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(2).win(WIN));
    assert_eq!(state(&t, c), State::FinWait2);
    t.inject(100, seg(".").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.stack.tcp_close(c).unwrap();
    t.expect_nothing(5099);
    assert_eq!(t.stack.tcp().connections(), 1);
    t.expect_nothing(5101);
    assert_eq!(t.stack.tcp().connections(), 0, "gone fin_wait_2_timeout after close()");
}

// ---- Rule 12: handles and readiness. ----

/// The socket API's contract (socket module docs), no RFC rule: a handle used after close
/// is `InvalidHandle` for every call, also once its slot serves a new connection; a
/// listener handle after unlisten likewise.
#[test]
fn handle_is_invalid_after_close() {
    let mut t = Script::new(tcp_config());
    let (l, c) = established(&mut t);
    t.stack.tcp_abort(c).unwrap();
    t.expect(0, seg("R.").seq(1).ack(PEER_ISS + 1).win(0));
    let mut buf = [0u8; 4];
    assert_eq!(t.stack.tcp_send(c, b"x"), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_shutdown(c, Shutdown::Both), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_close(c), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_abort(c), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_readiness(c), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_info(c).err(), Some(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_tuple(c).err(), Some(Error::InvalidHandle));
    // A new connection (likely in the same slot) does not revive the old handle.
    t.inject(10, seg("S").seq(PEER_ISS + 50_000).win(WIN).mss(1460).peer_port(40001));
    let s = t.expect(10, seg("S.").ack(PEER_ISS + 50_001).win(WIN).mss(1460));
    t.inject(11, seg(".").seq(PEER_ISS + 50_001).ack(s.seq.wrapping_add(1)).win(WIN).peer_port(40001));
    let c2 = t.stack.tcp_accept(l).unwrap();
    assert_ne!(c2, c);
    assert_eq!(state(&t, c2), State::Established);
    assert_eq!(t.stack.tcp_readiness(c), Err(Error::InvalidHandle));
    // An orderly close also kills the handle at once.
    t.stack.tcp_close(c2).unwrap();
    assert_eq!(t.stack.tcp_send(c2, b"x"), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_recv(c2, &mut buf), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_close(c2), Err(Error::InvalidHandle));
    t.stack.tcp_unlisten(l).unwrap();
    assert_eq!(t.stack.tcp_accept(l), Err(Error::InvalidHandle));
    assert_eq!(t.stack.tcp_unlisten(l), Err(Error::InvalidHandle));
}

/// The readiness contract (socket module docs), no RFC rule; the states are RFC 9293
/// §3.3.2's. Through a connection's life: SYN-SENT, ESTABLISHED, data waiting, CLOSE-WAIT
/// with data then after it, LAST-ACK, CLOSED.
#[test]
fn readiness_flags_in_each_phase() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let flags = |t: &Script| {
        let r = t.stack.tcp_readiness(c).unwrap();
        (r.state, r.readable, r.writable, r.read_closed, r.closed, r.error)
    };
    assert_eq!(flags(&t), (State::SynSent, false, false, false, false, None));
    let port = t.expect(0, seg("S").seq(0).any_options()).src_port;
    let peer = |s: Seg| s.port(port).peer_port(80);
    t.inject(10, peer(seg("S.").seq(PEER_ISS).ack(1).win(WIN).mss(1460)));
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN));
    assert_eq!(flags(&t), (State::Established, false, true, false, false, None));
    t.inject(20, peer(seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(4)));
    assert_eq!(flags(&t), (State::Established, true, true, false, false, None));
    t.inject(21, peer(seg("F.").seq(PEER_ISS + 5).ack(1).win(WIN)));
    t.expect(21, seg(".").seq(1).ack(PEER_ISS + 6).win(WIN));
    assert_eq!(flags(&t), (State::CloseWait, true, true, false, false, None), "data before the FIN");
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 8]), Ok(4));
    assert_eq!(flags(&t), (State::CloseWait, true, true, true, false, None), "end of stream is readable");
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 8]), Ok(0));
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    assert_eq!(flags(&t), (State::LastAck, true, false, true, false, None));
    t.expect(22, seg("F.").seq(1).ack(PEER_ISS + 6).win(WIN));
    t.inject(30, peer(seg(".").seq(PEER_ISS + 6).ack(2).win(WIN)));
    assert_eq!(flags(&t), (State::Closed, true, false, true, true, None));
    t.expect_nothing(100);
}

// ---- Rule 13: the connection table. ----

/// RFC 9293 §3.10.1 (a passive OPEN may leave the local socket's address unspecified) and
/// BSD's `in_pcblookup`: a listener on 0.0.0.0 accepts a connection to the stack's address;
/// the connection's local address is that address, never the wildcard.
#[test]
fn wildcard_listener_accepts_connections_to_the_stack_address() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(1, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN));
    let c = t.stack.tcp_accept(l).unwrap();
    let tuple = t.stack.tcp_tuple(c).unwrap();
    assert_eq!((tuple.local_addr, tuple.local_port), (LOCAL, 8080));
    t.inject(2, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(10));
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 16]), Ok(10));
    // Another port has no listener, wildcard or not: RST (its sequence number is absolute).
    t.iss = Some(0);
    t.inject(3, seg("S").seq(PEER_ISS).win(WIN).mss(1460).port(8081));
    t.expect(3, seg("R.").seq(0).ack(PEER_ISS + 1).win(0));
}

/// BSD behaviour (`in_pcblookup`: the most specific match wins), no RFC rule. With
/// listeners on LOCAL:8080 and 0.0.0.0:8080, a SYN to LOCAL:8080 goes to the specific one;
/// once it is closed, the wildcard listener takes the next SYN.
#[test]
fn specific_listener_is_preferred_over_the_wildcard() {
    let mut t = Script::new(tcp_config());
    let any = t.stack.tcp_listen(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 8080), 8).unwrap();
    let specific = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40001));
    let s = t.expect(0, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(1, seg(".").seq(PEER_ISS + 1).ack(s.seq.wrapping_add(1)).win(WIN).peer_port(40001));
    assert_eq!((t.stack.tcp_acceptable(specific), t.stack.tcp_acceptable(any)), (Ok(1), Ok(0)));
    t.stack.tcp_unlisten(specific).unwrap();
    t.expect(1, seg("R.").seq(s.seq.wrapping_add(1)).ack(PEER_ISS + 1).win(0));
    t.inject(2, seg("S").seq(PEER_ISS).win(WIN).mss(1460).peer_port(40002));
    let s = t.expect(2, seg("S.").ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(3, seg(".").seq(PEER_ISS + 1).ack(s.seq.wrapping_add(1)).win(WIN).peer_port(40002));
    assert_eq!(t.stack.tcp_acceptable(any), Ok(1));
}

/// The one-entry last-hit cache (BSD's `tcp_last_inpcb`) in front of the 4-tuple hash: two
/// connections whose segments alternate miss it every time and must each get their own
/// bytes; a connection reset while it is the cached one must not catch the segments of the
/// new connection that reuses its 4-tuple (RFC 9293 §3.4: a new incarnation).
#[test]
fn interleaved_connections_and_a_stale_last_hit() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let mut conns = vec![];
    for (i, p) in [40001u16, 40002].into_iter().enumerate() {
        let iss = PEER_ISS + 100_000 * i as u32;
        t.inject(0, seg("S").seq(iss).win(WIN).mss(1460).peer_port(p));
        let s = t.expect(0, seg("S.").ack(iss + 1).win(WIN).mss(1460));
        t.inject(0, seg(".").seq(iss + 1).ack(s.seq.wrapping_add(1)).win(WIN).peer_port(p));
        conns.push((p, iss + 1, s.seq.wrapping_add(1), t.stack.tcp_accept(l).unwrap()));
    }
    // Five segments each, alternating A B A B ...: all in order, on the fast path.
    let fast = t.stack.counters().fast_path_data;
    for k in 0..5u32 {
        for (i, &(p, rcv, snd, _)) in conns.iter().enumerate() {
            let body = [(16 * i as u32 + k) as u8; 300];
            t.inject_payload(10, seg(".").seq(rcv + 300 * k).ack(snd).win(WIN).peer_port(p), &body);
        }
    }
    assert_eq!(t.stack.counters().fast_path_data, fast + 10);
    for (i, &(_, _, _, c)) in conns.iter().enumerate() {
        let mut buf = [0u8; 2000];
        assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(1500));
        let want: Vec<u8> = (0..5u32).flat_map(|k| [(16 * i as u32 + k) as u8; 300]).collect();
        assert_eq!(buf[..1500], want[..], "connection {i}");
    }
    t.discard();
    // A's segment makes it the cached entry; then A is reset by the peer.
    let (pa, rcv_a, snd_a, ca) = conns[0];
    t.inject(20, seg(".").seq(rcv_a + 1500).ack(snd_a).win(WIN).peer_port(pa));
    t.inject(21, seg("R").seq(rcv_a + 1500).peer_port(pa));
    assert_eq!(t.stack.tcp_readiness(ca).unwrap().error, Some(Error::Reset));
    // The same 4-tuple opens again: the new connection gets the data, the old handle not.
    t.inject(30, seg("S").seq(PEER_ISS + 500_000).win(WIN).mss(1460).peer_port(pa));
    let s = t.expect(30, seg("S.").ack(PEER_ISS + 500_001).win(WIN).mss(1460));
    t.inject(30, seg(".").seq(PEER_ISS + 500_001).ack(s.seq.wrapping_add(1)).win(WIN).peer_port(pa));
    let ca2 = t.stack.tcp_accept(l).unwrap();
    t.inject_payload(31, seg("P.").seq(PEER_ISS + 500_001).ack(s.seq.wrapping_add(1)).win(WIN).peer_port(pa), b"new");
    let mut buf = [0u8; 8];
    assert_eq!(t.stack.tcp_recv(ca2, &mut buf), Ok(3));
    assert_eq!(&buf[..3], b"new");
    assert_eq!(t.stack.tcp_recv(ca, &mut buf), Err(Error::Reset));
    t.stack.tcp_close(ca).unwrap();
    assert_eq!(t.stack.tcp().connections(), 2);
}

// ---- Rule 14: socket API errors and per-socket buffers. ----

/// RFC 9293 §3.4 (a connection is named by both sockets; a socket pair must be unique) and
/// the socket API's `AddrInUse`: a second listener on the same address and port is refused
/// (also on the wildcard address), port 0 is `InvalidArgument`, and after unlisten the
/// port can be listened on again. An active open from an explicit local port that already
/// names a connection to the same remote socket is refused too.
#[test]
fn addr_in_use_for_a_taken_listen_port_or_socket_pair() {
    let mut t = Script::new(tcp_config());
    let any = std::net::Ipv4Addr::UNSPECIFIED;
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    assert_eq!(t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8), Err(Error::AddrInUse));
    let w = t.stack.tcp_listen(SocketAddrV4::new(any, 9090), 8).unwrap();
    assert_eq!(t.stack.tcp_listen(SocketAddrV4::new(any, 9090), 8), Err(Error::AddrInUse));
    assert_eq!(t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 0), 8), Err(Error::InvalidArgument));
    t.stack.tcp_unlisten(l).unwrap();
    t.stack.tcp_unlisten(w).unwrap();
    t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.stack.tcp_listen(SocketAddrV4::new(any, 9090), 8).unwrap();

    let opts = ackclock::tcp::SocketOptions::from_config(&tcp_config());
    t.stack.tcp_connect_with(SocketAddrV4::new(PEER, 80), Some(50_000), opts).unwrap();
    assert_eq!(t.stack.tcp_connect_with(SocketAddrV4::new(PEER, 80), Some(50_000), opts), Err(Error::AddrInUse));
    t.stack
        .tcp_connect_with(SocketAddrV4::new(PEER, 81), Some(50_000), opts)
        .expect("another remote port: another socket pair");
}

/// RFC 9293 §3.10.4 (CLOSE in SYN-SENT: "Delete the TCB") and §3.10.2 (SEND on a connection
/// that does not exist): a handle whose active open was closed before it completed is
/// CLOSED without an error, and `send` on it is `NotConnected`; `recv` reports the end of
/// the stream.
#[test]
fn send_on_a_connection_closed_in_syn_sent_is_not_connected() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    t.expect(0, seg("S").seq(0).any_options());
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!((r.state, r.error, r.closed), (State::Closed, None, true));
    assert_eq!(t.stack.tcp_send(c, b"x"), Err(Error::NotConnected));
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 4]), Ok(0));
    t.expect_nothing(5000);
    t.stack.tcp_close(c).unwrap();
    assert_eq!(t.stack.tcp().connections(), 0);
}

/// The socket API's `NoBufferSpace` (typed errors), no RFC rule: with a pool of 8
/// buffers, `send` queues what 8 pbufs hold (8 × 1460 bytes) and counts the drop; a further
/// `send` finds no buffer and fails. Once the peer acknowledges four segments (its ACK
/// arrives in the device's own pool), their pbufs are back and `send` takes 4 × 1460 bytes
/// again. With `max_connections` reached, `connect` fails the same way.
#[test]
fn no_buffer_space_when_the_pool_or_the_table_is_full() {
    use ackclock::buf::{Pool, PoolConfig};
    use ackclock::phy::Capabilities;
    let mut c = stack_config();
    c.pool = PoolConfig { buffers: 8, ..Default::default() };
    c.tcp.max_connections = 1;
    let mut t = Script::with_config(c, Capabilities::ethernet(1500));
    let (_l, c) = established(&mut t);
    assert_eq!(
        t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)),
        Err(Error::NoBufferSpace),
        "the one connection slot is taken"
    );
    assert_eq!(t.stack.tcp_send(c, &[5u8; 20_000]), Ok(8 * 1460));
    assert_eq!(t.stack.counters().drops_no_buffer, 1);
    assert_eq!(t.stack.tcp_send(c, b"more"), Err(Error::NoBufferSpace));
    assert_eq!(t.stack.counters().drops_no_buffer, 2);
    for i in 0..7u32 {
        t.expect(1, seg(".").seq(1 + 1460 * i).ack(PEER_ISS + 1).win(WIN).len(1460));
    }
    t.expect(1, seg("P.").seq(1 + 1460 * 7).ack(PEER_ISS + 1).win(WIN).len(1460));
    assert_eq!(t.stack.pool().available(), 0);
    let device = Pool::new(PoolConfig { buffers: 4, ..Default::default() }).unwrap();
    t.inject_via(&device, 10, seg(".").seq(PEER_ISS + 1).ack(1 + 4 * 1460).win(WIN));
    assert_eq!(t.stack.pool().available(), 4);
    assert_eq!(t.stack.tcp_send(c, &[6u8; 20_000]), Ok(4 * 1460));
}

/// A send whose bytes end exactly where a segment ends takes no buffer beyond that
/// segment's: with 8 pbufs, 8 × 1460 bytes fill all 8, and no drop is counted (the send
/// loop used to allocate a ninth buffer to offer it nothing, and count its failure as a
/// drop). A one-segment send with one buffer left does the same.
#[test]
fn a_send_that_ends_on_a_segment_boundary_allocates_nothing_more() {
    use ackclock::buf::PoolConfig;
    use ackclock::phy::Capabilities;
    let mut c = stack_config();
    c.pool = PoolConfig { buffers: 8, ..Default::default() };
    let mut t = Script::with_config(c, Capabilities::ethernet(1500));
    let (_l, c) = established(&mut t);
    assert_eq!(t.stack.tcp_send(c, &[5u8; 7 * 1460]), Ok(7 * 1460));
    assert_eq!(t.stack.pool().available(), 1);
    assert_eq!(t.stack.tcp_send(c, &[6u8; 1460]), Ok(1460));
    assert_eq!((t.stack.pool().available(), t.stack.pool().exhausted_count()), (0, 0));
    assert_eq!(t.stack.counters().drops_no_buffer, 0);
    for i in 0..7u32 {
        t.expect(1, seg(".").seq(1 + 1460 * i).ack(PEER_ISS + 1).win(WIN).len(1460));
    }
    t.expect(1, seg("P.").seq(1 + 1460 * 7).ack(PEER_ISS + 1).win(WIN).len(1460));
}

/// Per-socket buffer sizes (`SocketOptions`), RFC 9293 §3.8.6 and RFC 7323 §2.3: a
/// listener's 4000-byte receive buffer is the SYN-ACK's whole window (no scaling needed:
/// shift 0), and 4000 bytes from the peer close it (the ACK says window 0: at once, the
/// second of the two quick ACKs such a small window gets, Linux `tcp_incr_quickack`; and a
/// byte beyond is refused); a 1 MiB buffer needs shift 5
/// (1 MiB >> 4 is still above 65535), which the SYN-ACK offers.
#[test]
fn per_socket_receive_buffer_sets_the_window_and_its_scale() {
    use ackclock::tcp::SocketOptions;
    let mut t = Script::new(tcp_config());
    let opts = SocketOptions { recv_buffer: 4000, ..SocketOptions::from_config(&tcp_config()) };
    let l = t.stack.tcp_listen_with(SocketAddrV4::new(LOCAL, 8080), 8, opts).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).ws(7));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(4000).mss(1460).ws(0));
    t.inject(1, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN));
    let c = t.stack.tcp_accept(l).unwrap();
    assert_eq!(t.stack.tcp_options(c).unwrap().recv_buffer, 4000);
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN).len(1460));
    t.inject(10, seg(".").seq(PEER_ISS + 1461).ack(1).win(WIN).len(1460));
    t.expect(10, seg(".").seq(1).ack(PEER_ISS + 2921).win(4000 - 2920));
    t.inject(20, seg("P.").seq(PEER_ISS + 2921).ack(1).win(WIN).len(1080));
    t.expect(20, seg(".").seq(1).ack(PEER_ISS + 4001).win(0));
    // Nothing beyond the buffer is taken: a byte past the closed window is refused.
    t.inject(70, seg("P.").seq(PEER_ISS + 4001).ack(1).win(WIN).len(1));
    t.expect(70, seg(".").seq(1).ack(PEER_ISS + 4001).win(0));

    let mut t = Script::new(tcp_config());
    let opts = SocketOptions { recv_buffer: 1 << 20, ..SocketOptions::from_config(&tcp_config()) };
    t.stack.tcp_listen_with(SocketAddrV4::new(LOCAL, 8080), 8, opts).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460).ws(7));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460).ws(5));
}

/// Per-socket send buffer (`SocketOptions::send_buffer`, set here on a live connection):
/// with 3000 bytes, `send` takes 3000 of 10,000 and then would block; the connection is not
/// writable until the peer acknowledges data, which frees exactly that much room (1460).
/// The 80-byte tail goes with the full segments (Nagle, RFC 9293 §3.7.4, as refined by
/// Minshall, Linux `tcp_minshall_check`: no short segment is in flight); the next write's
/// full segment goes at once although the short one is unacknowledged.
#[test]
fn per_socket_send_buffer_bounds_queued_bytes() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    let mut opts = t.stack.tcp_options(c).unwrap();
    opts.send_buffer = 3000;
    t.stack.tcp_set_options(c, opts).unwrap();
    assert_eq!(t.stack.tcp_send(c, &[1u8; 10_000]), Ok(3000));
    assert_eq!(t.stack.tcp_send(c, b"x"), Err(Error::WouldBlock));
    assert!(!t.stack.tcp_readiness(c).unwrap().writable);
    t.expect(1, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(1460));
    t.expect(1, seg(".").seq(1461).ack(PEER_ISS + 1).win(WIN).len(1460));
    t.expect(1, seg("P.").seq(2921).ack(PEER_ISS + 1).win(WIN).len(80));
    t.expect_nothing(9);
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(1461).win(WIN));
    assert!(t.stack.tcp_readiness(c).unwrap().writable);
    assert_eq!(t.stack.tcp_send(c, &[2u8; 10_000]), Ok(1460));
    assert_eq!(t.stack.tcp_send(c, b"x"), Err(Error::WouldBlock));
    t.expect(10, seg("P.").seq(3001).ack(PEER_ISS + 1).win(WIN).len(1460));
    t.expect_nothing(19);
}

// ---- Rule 15: statistics. ----

/// `tcp_info` and the stack counters, exactly, through RFC 5681 §3.2's fast retransmit:
/// five segments sent, the first acknowledged, three duplicate ACKs (the third retransmits
/// the second segment), then everything acknowledged. Per connection: bytes sent include
/// the retransmission, bytes acknowledged count data only, three duplicate ACKs, one
/// retransmission; segments in and out count every segment, whichever input path took it.
/// Stack-wide: the same segments plus the handshake, and one retransmission.
#[test]
fn statistics_count_a_fast_retransmit_exactly() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    let k0 = *t.stack.counters();
    let s0 = t.stack.tcp_info(c).unwrap().stats;
    assert_eq!((k0.segs_in, k0.segs_out, s0.segs_in, s0.segs_out), (2, 1, 1, 1), "SYN and ACK in, SYN-ACK out");
    t.stack.tcp_send(c, &[3u8; 5 * 1460]).unwrap();
    for i in 0..5u32 {
        t.expect(1, seg(if i == 4 { "P." } else { "." }).seq(1 + 1460 * i).ack(PEER_ISS + 1).win(WIN).len(1460));
    }
    let ack = |a: u32| seg(".").seq(PEER_ISS + 1).ack(a).win(WIN);
    t.inject(10, ack(1461));
    for (n, ms) in [(1, 11), (2, 12)] {
        t.inject(ms, ack(1461));
        t.expect_nothing(ms);
        assert_eq!(t.stack.tcp_info(c).unwrap().stats.dup_acks, n);
    }
    t.inject(13, ack(1461));
    t.expect(13, seg(".").seq(1461).ack(PEER_ISS + 1).win(WIN).len(1460));
    t.inject(20, ack(1 + 5 * 1460));
    t.expect_nothing(300);
    let s = t.stack.tcp_info(c).unwrap().stats;
    assert_eq!((s.bytes_sent, s.bytes_acked), (6 * 1460, 5 * 1460));
    assert_eq!((s.dup_acks, s.retransmits, s.fast_retransmits, s.rtos), (3, 1, 1, 0));
    assert_eq!((s.segs_in - s0.segs_in, s.segs_out - s0.segs_out), (5, 6));
    let k = t.stack.counters();
    assert_eq!((k.segs_in - k0.segs_in, k.segs_out - k0.segs_out, k.retransmitted), (5, 6, 1));
    assert_eq!(s.sack_blocks, 0);
}

/// RFC 2018 §3 (up to four blocks in one SACK option): `tcp_info.sack_blocks` counts the
/// blocks received: one ACK with two blocks, then one with three.
#[test]
fn statistics_count_sack_blocks_received() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(WIN).mss(1000).sack_ok());
    t.stack.tcp_send(c, &[4u8; 8000]).unwrap();
    for i in 0..8u32 {
        t.expect(1, seg(if i == 7 { "P." } else { "." }).seq(1 + 1000 * i).ack(PEER_ISS + 1).win(WIN).len(1000));
    }
    let sack = |b: &[(u32, u32)]| seg(".").seq(PEER_ISS + 1).ack(1001).win(WIN).sack(b);
    t.inject(10, sack(&[(2001, 3001), (4001, 5001)]));
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.sack_blocks, 2);
    t.inject(11, sack(&[(6001, 7001), (2001, 3001), (4001, 5001)]));
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.sack_blocks, 5);
}

/// RFC 2018 §2: SACK options are not sent, and not used, unless SACK-permitted was
/// exchanged. A peer that did not offer it and sends SACK blocks anyway is not counted as
/// having SACKed anything, and its blocks mark nothing.
#[test]
fn sack_blocks_without_sack_permitted_are_not_counted() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(WIN).mss(1000));
    t.stack.tcp_send(c, &[4u8; 3000]).unwrap();
    for i in 0..3u32 {
        t.expect(1, seg(if i == 2 { "P." } else { "." }).seq(1 + 1000 * i).ack(PEER_ISS + 1).win(WIN).len(1000));
    }
    t.inject(10, seg(".").seq(PEER_ISS + 1).ack(1001).win(WIN).sack(&[(2001, 3001)]));
    let info = t.stack.tcp_info(c).unwrap();
    assert!(!info.sack);
    assert_eq!(info.stats.sack_blocks, 0);
}
