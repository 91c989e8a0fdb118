//! Window management and the non-retransmission timers (RFC 9293 §3.8.4,
//! §3.8.6, §3.10.8; RFC 1122 §4.2.2.17, §4.2.3.6; RFC 7323 §2; RFC 5681 §4.2).
//!
//! Conventions as in `tcp_data.rs` (see `common/script.rs`): the test plays the peer; our
//! sequence numbers are relative to our ISS (first data byte 1), the peer's absolute, its
//! first data byte [`P`]. The peer's SYN carries no option but MSS unless said otherwise, so
//! no timestamps, and the RTO after the handshake is the 200 ms floor.

mod common;

use ackclock::tcp::{KeepAlive, SocketOptions, State, TcpConfig};
use ackclock::time::Duration;
use ackclock::{Error, TcpHandle};
use common::script::*;
use common::stream;
use std::net::SocketAddrV4;

/// The peer's first data byte.
const P: u32 = PEER_ISS + 1;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn established(cfg: TcpConfig, syn: Seg) -> (Script, TcpHandle) {
    let mut t = Script::new(cfg);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, syn);
    (t, c)
}

fn established_with(cfg: TcpConfig, opts: SocketOptions, syn: Seg) -> (Script, TcpHandle) {
    let mut t = Script::new(cfg);
    let l = t.stack.tcp_listen_with(SocketAddrV4::new(LOCAL, 8080), 8, opts).unwrap();
    let c = t.accept_with(l, syn);
    (t, c)
}

// ---------------------------------------------------------------------------------------
// Shrinking the window (RFC 9293 §3.8.6, MUST-35; §3.8.6.1 zero-window probing)
// ---------------------------------------------------------------------------------------

/// Two full segments in flight; the peer takes the first and, its buffer full, drops the
/// second and answers with window 0: the window shrank under data in flight (the right edge
/// moved from 1461 + 65535 to 1461). Returns at 20 ms.
fn shrunk_under_flight(cfg: TcpConfig, win_after: u16) -> (Script, TcpHandle, Vec<u8>) {
    let (mut t, c) = established(cfg, seg("S").win(65535).mss(1460));
    let data = stream(2920, 41);
    t.stack.tcp_send(c, &data).unwrap();
    t.expect(10, seg(".").seq(1).ack(P).win(65535).len(1460));
    t.expect(10, seg("P.").seq(1461).ack(P).win(65535).len(1460));
    t.inject(20, seg(".").seq(P).ack(1461).win(win_after));
    t.expect_nothing(20);
    assert_eq!(t.stack.tcp_info(c).unwrap().rto, ms(200));
    (t, c, data)
}

/// RFC 9293 §3.8.6.1: "The sending TCP peer must regularly transmit at least one octet of
/// new data (if available), or retransmit to the receiving TCP peer even if the send window
/// is zero, in order to 'probe' the window" (MUST-36), and "a TCP implementation MUST NOT
/// close the connection ... while the receiving TCP peer continues to send acknowledgments
/// in response to the probe segments"; §3.8.6: a sender MUST be robust against window
/// shrinking (MUST-35), which "may cause the 'usable window' to become negative".
///
/// The window closes (shrinks to zero) while the second segment is in flight, and that
/// segment was dropped. The connection must keep probing the closed window (Linux turns
/// its RTO retransmissions into zero-window probes, `tcp_retransmit_timer`: "Receiver
/// dastardly shrinks window. Our retransmits become zero probes, but we should not timeout
/// this connection"), and must not abort while the peer answers. With `max_retries` = 3,
/// ten minutes of answered probes; then the window opens and the lost segment is resent.
#[test]
fn window_shrunk_to_zero_under_flight_is_probed_and_never_aborts_while_answered() {
    let (mut t, c, data) = shrunk_under_flight(TcpConfig { max_retries: 3, ..tcp_config() }, 0);
    let mut times = vec![];
    while t.ms() < 600_000 {
        let next = t.ms() + 1;
        for (when, s) in t.run_to(next) {
            // A probe: the old-sequence ACK, or (Linux) the head segment sent again.
            assert!(
                (s.seq == 1460 && s.len == 0) || (s.seq == 1461 && s.len > 0),
                "at {when} ms: a window probe or the segment at SND.UNA, got {s:?}"
            );
            times.push(when);
            t.inject(when, seg(".").seq(P).ack(1461).win(0));
        }
        if t.stack.tcp_readiness(c).unwrap().state == State::Closed {
            break;
        }
    }
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!(
        (r.state, r.error),
        (State::Established, None),
        "aborted at {} ms while the peer answered every probe; probes sent at {times:?}",
        t.ms()
    );
    assert!(!times.is_empty() && times[0] <= 1_000, "the closed window is probed within a few RTOs: {times:?}");
    assert!(times.windows(2).all(|w| w[1] - w[0] <= 60_000), "probe intervals are bounded: {times:?}");
    assert!(*times.last().unwrap() > 540_000, "still probing at the end: {times:?}");
    // The window opens: the dropped segment goes again (at the latest at the next,
    // backed-off, retransmission timeout, as Linux does after probing with the head).
    t.inject(600_001, seg(".").seq(P).ack(1461).win(65535));
    let out = t.run_to(661_001);
    let resent: Vec<u8> =
        out.iter().filter(|(_, s)| s.seq == 1461).take(1).flat_map(|(_, s)| s.payload.clone()).collect();
    assert_eq!(resent, data[1460..], "the dropped segment goes once the window opens: {out:?}");
}

/// RFC 9293 §3.8.6.1 and RFC 1122 §4.2.2.17: the same closed window, but the peer's window
/// update (after its application read) is lost. Unless the sender probes, neither side
/// ever sends again: the deadlock zero-window probing exists to prevent. A probe must go
/// out within a few RTOs, and its answer opens the window.
#[test]
fn window_shrunk_to_zero_under_flight_lost_update_is_recovered_by_a_probe() {
    let (mut t, _c, data) = shrunk_under_flight(tcp_config(), 0);
    // The peer's reader frees its buffer at 100 ms; the window update is lost (not injected).
    let mut out = vec![];
    while out.is_empty() && t.ms() < 2_000 {
        let next = t.ms() + 1;
        out = t.run_to(next);
    }
    assert!(!out.is_empty(), "nothing sent in 2 s: the closed window is never probed");
    let (when, first) = &out[0];
    assert!(
        (first.seq == 1460 && first.len == 0) || (first.seq == 1461 && first.len > 0),
        "at {when} ms: a window probe or the segment at SND.UNA, got {first:?}"
    );
    // The probe's answer carries the open window; the dropped segment then goes (at the
    // latest at the next retransmission timeout) and the transfer completes.
    let when = *when;
    t.inject(when, seg(".").seq(P).ack(1461).win(65535));
    let got = t.run_to(when + 2_000);
    let resent: Vec<u8> =
        got.iter().filter(|(_, s)| s.seq == 1461).take(1).flat_map(|(_, s)| s.payload.clone()).collect();
    assert_eq!(resent, data[1460..], "the dropped segment goes once the window opens: {got:?}");
}

/// RFC 9293 §3.8.6 (MUST-35, robust against shrinking) with a window that shrinks to 100
/// bytes, less than the segment in flight beyond it: the data beyond the new right edge is
/// not to be counted as lost and resent into a window that cannot take it, but the sender
/// must still make progress: the override timeout of §3.8.6.2.1 / the persist timer sends
/// what the window takes (or a probe), rather than nothing for ever.
#[test]
fn window_shrunk_below_a_segment_under_flight_still_makes_progress() {
    let (mut t, c, data) = shrunk_under_flight(TcpConfig { max_retries: 3, ..tcp_config() }, 100);
    // The peer takes what fits its window and answers each segment; its reader frees 100
    // bytes each time, so the window stays at 100.
    let mut una = 1461u32;
    let mut got = vec![];
    let mut sent = vec![];
    while t.ms() < 5_000 {
        let next = t.ms() + 1;
        for (when, s) in t.run_to(next) {
            sent.push((when, s.clone()));
            if s.len == 0 {
                t.inject(when, seg(".").seq(P).ack(una).win(100));
                continue;
            }
            // Nothing beyond the right edge SND.UNA + 100, except the head itself (Linux
            // sends the segment at SND.UNA whatever the window, `__tcp_retransmit_skb`).
            assert!(
                s.seq == una || s.seq + s.len as u32 <= una + 100,
                "at {when} ms: new data beyond the shrunk right edge: {s:?}"
            );
            if s.seq == una {
                let take = s.len.min(100);
                got.extend_from_slice(&s.payload[..take]);
                una += take as u32;
            }
            t.inject(when, seg(".").seq(P).ack(una).win(100));
        }
    }
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!((r.state, r.error), (State::Established, None), "aborted at {} ms; sent {sent:?}", t.ms());
    assert!(got.len() >= 500, "the transfer crawls on through the 100-byte window: {} bytes; sent {sent:?}", got.len());
    assert_eq!(got, data[1460..1460 + got.len()]);
}

// ---------------------------------------------------------------------------------------
// Keep-alive (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6)
// ---------------------------------------------------------------------------------------

fn keepalive_opts() -> SocketOptions {
    let ka = KeepAlive { idle: ms(10_000), interval: ms(2_000), count: 3 };
    SocketOptions { keepalive: Some(ka), ..SocketOptions::from_config(&tcp_config()) }
}

/// RFC 9293 §3.8.4: "Keep-alive packets MUST only be sent when no sent data is outstanding,
/// and no data or acknowledgment packets have been received for the connection within an
/// interval" (MUST-26). Linux (`tcp_keepalive_timer`): "if (tp->packets_out ||
/// !tcp_write_queue_empty(sk)) goto resched" — while data is outstanding the retransmission
/// timer, not keep-alive, decides that the peer is gone.
///
/// Keep-alive idle 10 s, interval 2 s, count 3; 15 retries allowed. Data is sent at 10 ms
/// and never acknowledged: every segment from us must be a retransmission of it (never a
/// `<SEQ=SND.UNA-1>` keep-alive probe), and the connection must not be ended by the
/// keep-alive count at 10 + 3·2 s, with retransmissions left (the next RTOs fall at
/// 12.8 s, 25.6 s, 51.2 s...).
#[test]
fn no_keepalive_probe_while_data_is_outstanding() {
    let (mut t, c) = established_with(tcp_config(), keepalive_opts(), seg("S").win(65535).mss(1460));
    let data = stream(1000, 42);
    t.stack.tcp_send(c, &data).unwrap();
    t.expect(10, seg("P.").seq(1).ack(P).win(65535).len(1000));
    let out = t.run_to(20_000);
    for (when, s) in &out {
        assert!(s.seq == 1 && s.len == 1000, "at {when} ms: only retransmissions of the data, got {s:?}");
    }
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!(
        (r.state, r.error),
        (State::Established, None),
        "ended by keep-alive while retransmissions were left; sent: {out:?}"
    );
}

// ---------------------------------------------------------------------------------------
// User timeout and the persist state (RFC 9293 §3.10.8, RFC 5482)
// ---------------------------------------------------------------------------------------

/// The persist tests' connection (as `tcp_data.rs`'s `zero_window`): the peer closes its
/// window at 5 ms, 1000 bytes are queued at 10 ms; probes then fall at 210, 610, 1410,
/// 3010, 6210 ms (RTO 200 ms, doubled per probe).
fn zero_window(cfg: TcpConfig) -> (Script, TcpHandle, Vec<u8>) {
    let (mut t, c) = established(cfg, seg("S").win(65535).mss(1460));
    t.inject(5, seg(".").seq(P).ack(1).win(0));
    let data = stream(1000, 43);
    t.at(10);
    t.stack.tcp_send(c, &data).unwrap();
    t.expect_nothing(10);
    (t, c, data)
}

fn probe() -> Seg {
    seg(".").seq(0).ack(P).win(65535)
}

/// RFC 9293 §3.10.8: "For any state if a user timeout expires, flush all queues, signal the
/// user 'error: connection aborted due to user timeout' in general and for any outstanding
/// calls, delete the TCB". The stack keeps this to the moment for retransmissions (the RTO
/// is clamped to the time left, as Linux `tcp_clamp_rto_to_user_timeout`; see
/// `tcp_data.rs` `user_timeout_aborts_when_it_expires`), and Linux does the same for window
/// probes (`tcp_clamp_probe0_to_user_timeout`, "tcp: make TCP_USER_TIMEOUT accurate for
/// zero window probes"). A connection stuck in persist with a 5 s user timeout is aborted
/// 5 s after the first probe (5210 ms; at the earliest 5 s after the data was queued,
/// 5010 ms), not at the next backed-off probe (6210 ms).
#[test]
fn user_timeout_ends_a_connection_stuck_in_persist_when_it_expires() {
    let cfg = TcpConfig { user_timeout: Some(ms(5_000)), ..tcp_config() };
    let (mut t, c, _) = zero_window(cfg);
    for when in [210, 610, 1410, 3010] {
        t.expect(when, probe());
        t.inject(when, seg(".").seq(P).ack(1).win(0));
    }
    t.expect_nothing(5_009);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, None, "aborted before the user timeout");
    let _ = t.run_to(5_210);
    assert_eq!(
        t.stack.tcp_readiness(c).unwrap().error,
        Some(Error::TimedOut),
        "the user timeout expired at 5210 ms at the latest; still open at {} ms",
        t.ms()
    );
}

/// RFC 5482 §1 / RFC 9293 §3.10.8: the user timeout is "the maximum amount of time that
/// transmitted data may remain unacknowledged before TCP will forcefully close the
/// connection". A zero-window episode (probes from 210 ms) ends at 610 ms when the peer's
/// answer opens the window, and the data is first transmitted then. With a 2 s user
/// timeout and the data never acknowledged, the abort is due at 610 + 2000 = 2610 ms, not
/// 2 s after the first window probe (2210 ms): the probing episode's start must not be
/// carried over as the data's.
#[test]
fn user_timeout_counts_from_the_first_transmission_not_from_an_earlier_persist_episode() {
    let cfg = TcpConfig { user_timeout: Some(ms(2_000)), ..tcp_config() };
    let (mut t, c, data) = zero_window(cfg);
    t.expect(210, probe());
    t.inject(210, seg(".").seq(P).ack(1).win(0));
    t.expect(610, probe());
    t.inject(610, seg(".").seq(P).ack(1).win(65535));
    let s = t.expect(610, seg("P.").seq(1).ack(P).win(65535).len(1000));
    assert_eq!(s.payload, data);
    // Never acknowledged: retransmissions at 810, 1210, 2010 ms.
    let out = t.run_to(2_609);
    assert!(out.iter().all(|(_, s)| s.seq == 1 && s.len == 1000), "only retransmissions: {out:?}");
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!(
        (r.state, r.error),
        (State::Established, None),
        "aborted before the data had been unacknowledged for the user timeout (sent at 610 ms)"
    );
    let _ = t.run_to(2_610);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, Some(Error::TimedOut));
}

// ---------------------------------------------------------------------------------------
// Delayed ACK (RFC 9293 §3.8.6.3, RFC 1122 §4.2.3.2)
// ---------------------------------------------------------------------------------------

/// RFC 9293 §3.8.6.3: "an ACK should not be excessively delayed; in particular, the delay
/// MUST be less than 0.5 seconds" (MUST-40; RFC 1122 §4.2.3.2). `TcpConfig::delayed_ack`
/// is taken as configured, so a 1 s setting holds the ACK of a lone segment for 1 s. The
/// stack must keep the delay under 0.5 s whatever it is asked (Linux caps it at 200 ms,
/// `TCP_DELACK_MAX`). Minor: a misconfiguration, but a MUST the stack can enforce.
#[test]
fn delayed_ack_stays_under_half_a_second_whatever_the_configuration() {
    let cfg = TcpConfig { quick_acks: false, delayed_ack: ms(1_000), ..tcp_config() };
    let (mut t, _c) = established(cfg, seg("S").win(65535).mss(1460));
    t.inject(10, seg(".").seq(P).ack(1).win(65535).len(1460));
    let out = t.run_to(509);
    assert!(
        out.iter().any(|(_, s)| s.ack == P + 1460),
        "the lone segment received at 10 ms is still unacknowledged at 509 ms: {out:?}"
    );
}
