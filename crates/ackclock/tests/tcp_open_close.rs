//! Connection establishment and teardown against RFC 9293 §3.5-§3.6, §3.10,
//! RFC 6191, RFC 1337, RFC 5961 and Linux's behaviour. Each test names the rule it checks.

mod common;

use ackclock::tcp::{State, TcpConfig};
use ackclock::{ListenerHandle, Shutdown, TcpHandle};
use common::script::*;
use std::net::SocketAddrV4;

const WIN: u16 = 65535;

fn state(t: &Script, c: TcpHandle) -> State {
    t.stack.tcp_readiness(c).expect("valid handle").state
}

fn config(f: impl FnOnce(&mut TcpConfig)) -> TcpConfig {
    let mut c = tcp_config();
    f(&mut c);
    c
}

fn established(t: &mut Script) -> (ListenerHandle, TcpHandle) {
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(WIN).mss(1460));
    assert_eq!(state(t, c), State::Established);
    (l, c)
}

/// Passive open closed by the application first, through to a compact TIME-WAIT entry.
fn closed_to_time_wait(t: &mut Script, l: ListenerHandle, ms: u64) {
    t.inject(ms, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(ms, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(ms, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN));
    let c = t.stack.tcp_accept(l).unwrap();
    t.stack.tcp_close(c).unwrap();
    t.expect(ms, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(ms, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(ms, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(t.stack.tcp().time_wait(), 1);
}

/// RFC 6191 §2 applies to "an incoming SYN segment" only; RFC 9293 §3.10.7.4 (fourth step,
/// TIME-WAIT) and RFC 5961 §4.2: any other SYN in a synchronized state draws a challenge ACK
/// and changes nothing. Linux (`tcp_timewait_state_process`: `th->syn && !th->rst &&
/// !th->ack`) answers a SYN-ACK with TCP_TW_ACK. Here an in-window SYN-ACK above RCV.NXT
/// to a compact TIME-WAIT entry ended TIME-WAIT (RFC 1337's hazard) and was answered with RST.
#[test]
fn rfc6191_syn_ack_in_window_does_not_end_compact_time_wait() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    closed_to_time_wait(&mut t, l, 0);
    t.inject(100, seg("S.").seq(PEER_ISS + 1000).ack(2).win(WIN).mss(1460));
    t.expect(100, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    t.expect_nothing(100);
    assert_eq!(t.stack.tcp().time_wait(), 1, "TIME-WAIT must survive a SYN-ACK");
    assert_eq!(t.stack.counters().resets_sent, 0);
}

/// As above, for a TIME-WAIT connection whose handle the application still holds (the
/// full control block: `input::slow::synchronized`, fourth step).
#[test]
fn rfc6191_syn_ack_in_window_does_not_end_time_wait_tcb() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.stack.tcp_shutdown(c, Shutdown::Write).unwrap();
    t.expect(1, seg("F.").seq(1).ack(PEER_ISS + 1).win(WIN));
    t.inject(2, seg("F.").seq(PEER_ISS + 1).ack(2).win(WIN));
    t.expect(2, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    assert_eq!(state(&t, c), State::TimeWait);
    t.inject(100, seg("S.").seq(PEER_ISS + 1000).ack(2).win(WIN).mss(1460));
    t.expect(100, seg(".").seq(2).ack(PEER_ISS + 2).win(WIN));
    t.expect_nothing(100);
    assert_eq!(state(&t, c), State::TimeWait, "TIME-WAIT must survive a SYN-ACK");
    assert_eq!(t.stack.counters().resets_sent, 0);
}

/// RFC 9293 §3.10.5 (ABORT in ESTABLISHED: "Send a reset segment: <SEQ=SND.NXT><CTL=RST>"),
/// where SND.NXT is the next sequence number to be sent, i.e. past everything sent; Linux
/// (`tcp_acceptable_seq`: SND.NXT, never rolled back) and FreeBSD (`tcp_output`: a segment
/// without data carries `snd_max`) agree. After a retransmission timeout the go-back-N
/// pointer has been rolled back to SND.UNA; an RST from there lies below the peer's RCV.NXT
/// (it received everything, only our ACKs were lost) and an RFC 5961 receiver drops it
/// silently: the peer never learns of the abort.
#[test]
fn rfc9293_3_10_5_abort_after_rto_resets_at_snd_max() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    let data = vec![1u8; 2920];
    assert_eq!(t.stack.tcp_send(c, &data).unwrap(), 2920);
    t.expect(1, seg(".").seq(1).ack(PEER_ISS + 1).win(WIN).len(1460));
    t.expect(1, seg("P.").seq(1461).ack(PEER_ISS + 1).win(WIN).len(1460));
    // No ACK: the retransmission timer fires and the first segment goes again.
    let sent = t.run_to(1500);
    assert!(sent.iter().any(|(_, s)| s.seq == 1 && s.len == 1460), "an RTO retransmission: {sent:?}");
    t.stack.tcp_abort(c).unwrap();
    t.expect(1500, seg("R.").seq(2921).ack(PEER_ISS + 1).win(0));
}

/// Linux (`tcp_close`: unread data, "data_was_unread" → `tcp_send_active_reset`), RFC 9293
/// §3.10.4 permits it; the RST must carry <SEQ=SND.NXT> as for ABORT — past everything
/// sent, also after a retransmission timeout.
#[test]
fn rfc9293_3_10_4_close_with_unread_data_after_rto_resets_at_snd_max() {
    let mut t = Script::new(tcp_config());
    let (_l, c) = established(&mut t);
    t.inject(1, seg("P.").seq(PEER_ISS + 1).ack(1).win(WIN).len(10));
    let data = vec![1u8; 2920];
    assert_eq!(t.stack.tcp_send(c, &data).unwrap(), 2920);
    t.discard();
    let sent = t.run_to(1500);
    assert!(sent.iter().any(|(_, s)| s.seq == 1 && s.len == 1460), "an RTO retransmission: {sent:?}");
    t.stack.tcp_close(c).unwrap();
    t.expect(1500, seg("R.").seq(2921).ack(PEER_ISS + 11).win(0));
}

/// Linux `check_tcp_syn_cookie` (net/ipv4/syncookies.c): `if (diff >= MAX_SYNCOOKIE_AGE)
/// return (__u32)-1;` with MAX_SYNCOOKIE_AGE 2 and a 60 s counter: a cookie is valid for
/// the counter value it was made in and the next one only, i.e. at most 2 periods (120 s;
/// `TCP_SYNCOOKIE_VALID`). 125 s after the SYN the counter has moved on by two at least,
/// and the ACK must be treated as a blind one (RFC 9293 §3.10.7.2: `<SEQ=SEG.ACK><CTL=RST>`).
/// Before the fix a third period was accepted (`MAX_AGE = 2` compared with `>`), which widened
/// both a blind attacker's window and the chance of a guess (3 counter values instead of 2).
#[test]
fn linux_syncookie_counter_is_valid_for_two_periods_only() {
    let mut t = Script::new(config(|c| c.syn_cookies = ackclock::tcp::SynCookies::Always));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(WIN).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(PEER_ISS + 1).win(WIN).mss(1460));
    t.inject(125_000, seg(".").seq(PEER_ISS + 1).ack(1).win(WIN));
    t.expect(125_000, seg("R").seq(1).ack(0).win(0));
    assert_eq!(t.stack.counters().syn_cookies_validated, 0);
    assert!(t.stack.tcp_accept(l).is_err());
}
