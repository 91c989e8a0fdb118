//! Packet-level tests of taking back a loss response that proves unnecessary: a segment held
//! back by reordering draws three duplicate ACKs, is retransmitted, and then arrives. The
//! sender finds out from the timestamp the ACK echoes (Eifel detection, RFC 3522 §3.2) or
//! from D-SACKs for every retransmission (RFC 2883 §4, RFC 3708), and restores the window
//! it had before the loss (RFC 9438 §4.9; Linux `tcp_try_undo_recovery`,
//! `tcp_undo_cwnd_reduction`).
//!
//! Segments carry exactly 1000 bytes (the peer offers MSS 1012 with timestamps, 1000
//! without), so numbers read as segment counts: segment n starts at byte (n − 1) × 1000 + 1.

mod common;

use ackclock::TcpHandle;
use common::script::*;
use std::net::SocketAddrV4;

const SMSS: u32 = 1000;

/// First byte of segment `n` (1-based).
fn s(n: u32) -> u32 {
    (n - 1) * SMSS + 1
}

/// An established connection with SACK, and with timestamps if `ts`; 100 KB queued and
/// segments 1-10 (the initial window) sent at 1 ms. Returns the TSval segment 1 carried.
fn ten_in_flight(ts: bool) -> (Script, TcpHandle, u32) {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let syn = seg("S").win(65535).ws(7).sack_ok();
    let syn = if ts { syn.mss(1012).ts(1, 0) } else { syn.mss(1000) };
    let c = t.accept_with(l, syn);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    let first = t.expect(1, seg(".").seq(s(1)).len(1000).any_options());
    for n in 2..=10 {
        t.expect(1, seg(".").seq(s(n)).len(1000).any_options());
    }
    t.expect_nothing(1);
    (t, c, first.ts.map_or(0, |t| t.0))
}

/// The peer's ACK of stack byte `a`, with a timestamp echoing `ecr` if `ecr` is given.
fn ack(a: u32, ecr: Option<u32>) -> Seg {
    let a = seg(".").seq(PEER_ISS + 1).ack(a).win(65535);
    match ecr {
        Some(ecr) => a.ts(100, ecr),
        None => a,
    }
}

/// Three duplicate ACKs at 10 ms SACK segments 2-4: segment 1 is retransmitted (RFC 6675),
/// ssthresh = cwnd = 5 segments. Returns the TSval of the retransmission.
fn fast_retransmit_of_1(t: &mut Script, c: TcpHandle, ecr: Option<u32>) -> u32 {
    t.inject(10, ack(s(1), ecr).sack(&[(s(2), s(3))]));
    t.inject(10, ack(s(1), ecr).sack(&[(s(2), s(4))]));
    t.inject(10, ack(s(1), ecr).sack(&[(s(2), s(5))]));
    let rxt = t.expect(10, seg(".").seq(s(1)).len(1000).any_options());
    t.expect_nothing(10);
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.cwnd, i.ssthresh, i.stats.fast_retransmits), (5 * SMSS, 5 * SMSS, 1));
    rxt.ts.map_or(0, |t| t.0)
}

/// Expect segments `from..=to` now, and nothing else.
#[track_caller]
fn expect_new(t: &mut Script, ms: u64, from: u32, to: u32) {
    for n in from..=to {
        t.expect(ms, seg(".").seq(s(n)).len(1000).any_options());
    }
    t.expect_nothing(ms);
}

/// The first test's undo, by Eifel at 12 ms: the threshold is then 4 and segments 11-20 have
/// gone out; returns the TSval segment 11 carried.
fn undone_by_eifel() -> (Script, TcpHandle, u32) {
    let (mut t, c, ts1) = ten_in_flight(true);
    fast_retransmit_of_1(&mut t, c, Some(ts1));
    t.inject(12, ack(s(11), Some(ts1)));
    assert_eq!(t.stack.tcp_info(c).unwrap().reordering, 4);
    let new = t.sent_now();
    assert_eq!(new.len(), 10);
    let ts11 = new[0].ts.unwrap().0;
    (t, c, ts11)
}

/// Let 2 s pass with nothing arriving (the retransmission timer fires) and return the
/// connection's state after.
fn after_a_timeout(t: &mut Script, c: TcpHandle) -> ackclock::tcp::TcpInfo {
    t.at_us(2_000_000);
    t.sent_now();
    t.stack.tcp_info(c).unwrap()
}

/// RFC 3522 §3.2: the ACK that covers the retransmitted segment echoes the TSval of the
/// original (RFC 7323 §4.3: the receiver echoes the segment that filled the hole), which
/// is older than the retransmission's: the original arrived, the retransmission was not
/// needed. The recovery's end restores cwnd (10 segments) and ssthresh (slow start's
/// "arbitrarily high"), so the ACK that freed all ten lets ten new segments out, not five.
#[test]
fn eifel_undoes_a_fast_retransmit_the_original_made_unnecessary() {
    let (mut t, c, ts1) = ten_in_flight(true);
    let rxt_ts = fast_retransmit_of_1(&mut t, c, Some(ts1));
    assert!(rxt_ts > ts1);
    t.inject(12, ack(s(11), Some(ts1)));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.cwnd, i.ssthresh, i.stats.undos), (10 * SMSS, u32::MAX, 1));
    expect_new(&mut t, 12, 11, 20);
}

/// The same, but the ACK echoes the retransmission's TSval: it filled the hole, the loss
/// was real, and the window stays halved: five new segments.
#[test]
fn eifel_keeps_the_response_when_the_retransmission_filled_the_hole() {
    let (mut t, c, ts1) = ten_in_flight(true);
    let rxt_ts = fast_retransmit_of_1(&mut t, c, Some(ts1));
    t.inject(52, ack(s(11), Some(rxt_ts)));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.cwnd, i.ssthresh, i.stats.undos), (5 * SMSS, 5 * SMSS, 0));
    expect_new(&mut t, 52, 11, 15);
}

/// RFC 3708 §3 with RFC 2883 §4: without timestamps, the D-SACK that reports the
/// retransmission as a duplicate, arriving after the recovery ended, accounts for the
/// episode's only retransmission: the window comes back at once (five more segments go
/// out on that ACK), and a repeat of the D-SACK changes nothing more.
#[test]
fn a_dsack_for_the_only_retransmission_undoes_after_recovery() {
    let (mut t, c, _) = ten_in_flight(false);
    fast_retransmit_of_1(&mut t, c, None);
    t.inject(12, ack(s(11), None));
    assert_eq!(t.stack.tcp_info(c).unwrap().cwnd, 5 * SMSS, "no evidence yet");
    expect_new(&mut t, 12, 11, 15);
    t.inject(13, ack(s(11), None).sack(&[(s(1), s(2))]));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.cwnd, i.ssthresh), (10 * SMSS, u32::MAX));
    assert_eq!((i.stats.spurious_retransmits, i.stats.undos), (1, 1));
    expect_new(&mut t, 13, 16, 20);
    t.inject(14, ack(s(11), None).sack(&[(s(1), s(2))]));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.stats.spurious_retransmits, i.stats.undos), (1, 1), "the repeat proves nothing new");
    t.expect_nothing(14);
}

/// Segments 1 and 5 are both retransmitted in one episode. The ACK that ends it echoes
/// segment 1's original TSval, so Eifel finds the first retransmission unnecessary, but
/// the second may have repaired a real loss: no undo. A D-SACK for segment 1 leaves one
/// retransmission unaccounted for, and so does the same D-SACK again (a duplicated ACK):
/// evidence counts once. The D-SACK for segment 5 accounts for the last, and the window
/// comes back (Linux `undo_retrans` reaching zero).
#[test]
fn with_two_retransmissions_both_must_prove_unnecessary() {
    let (mut t, c, ts1) = ten_in_flight(true);
    fast_retransmit_of_1(&mut t, c, Some(ts1));
    // Segments 6-8 SACKed as well: three above segment 5, which is now lost too (RFC 6675
    // IsLost) and goes out at once (NextSeg rule 1). pipe is then 4 segments (the two
    // retransmissions, 9 and 10): one new segment fits.
    t.inject(11, ack(s(1), Some(ts1)).sack(&[(s(6), s(9)), (s(2), s(5))]));
    t.expect(11, seg(".").seq(s(5)).len(1000).any_options());
    expect_new(&mut t, 11, 11, 11);
    t.inject(12, ack(s(11), Some(ts1)));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.cwnd, i.stats.retransmits, i.stats.undos), (5 * SMSS, 2, 0));
    expect_new(&mut t, 12, 12, 15);
    t.inject(13, ack(s(11), Some(ts1)).sack(&[(s(1), s(2))]));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.cwnd, i.stats.spurious_retransmits, i.stats.undos), (5 * SMSS, 1, 0));
    t.expect_nothing(13);
    t.inject(13, ack(s(11), Some(ts1)).sack(&[(s(1), s(2))]));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.cwnd, i.stats.spurious_retransmits, i.stats.undos), (5 * SMSS, 1, 0));
    t.expect_nothing(13);
    t.inject(14, ack(s(11), Some(ts1)).sack(&[(s(5), s(6))]));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.cwnd, i.stats.spurious_retransmits, i.stats.undos), (10 * SMSS, 2, 1));
    expect_new(&mut t, 14, 16, 20);
}

/// RFC 3522 §3.2 asks the first ACK that acknowledges the retransmission. Here a partial
/// ACK for segments 1-4 echoes the retransmission's TSval: the loss of segment 1 was real.
/// The ACK that ends the recovery later echoes an older TSval (as it may, when an original
/// filled the last hole), and must not turn that verdict around. There was one
/// retransmission only, so nothing but Eifel's verdict stands in the way of an undo.
#[test]
fn eifel_asks_only_the_first_ack_that_covers_the_retransmission() {
    let (mut t, c, ts1) = ten_in_flight(true);
    let rxt_ts = fast_retransmit_of_1(&mut t, c, Some(ts1));
    t.inject(50, ack(s(5), Some(rxt_ts)));
    t.sent_now();
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.retransmits, 1);
    t.inject(60, ack(s(11), Some(ts1)));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.cwnd, i.ssthresh, i.stats.retransmits, i.stats.undos), (5 * SMSS, 5 * SMSS, 1, 0));
}

/// A retransmission timeout after the loss ends every hope of an undo (Linux clears
/// `undo_marker` on entering the loss state): a later D-SACK for the fast retransmission
/// leaves the window at its post-timeout value.
#[test]
fn no_undo_after_a_timeout() {
    let (mut t, c, _) = ten_in_flight(false);
    fast_retransmit_of_1(&mut t, c, None);
    // No RTT sample yet: the timer runs 1 s (RFC 6298 §2.1) from the retransmission.
    t.at_us(1_100_000);
    let rto = t.sent_now();
    assert!(rto.iter().any(|x| x.seq == s(1) && x.len == 1000), "the timeout resent segment 1");
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.rtos, 1);
    t.inject(1200, ack(s(11), None));
    t.sent_now();
    let before = t.stack.tcp_info(c).unwrap().cwnd;
    t.inject(1201, ack(s(11), None).sack(&[(s(1), s(2))]));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.cwnd, i.stats.spurious_retransmits, i.stats.undos), (before, 1, 0), "believed, not undone");
    assert_eq!(i.reordering, 3);
}

/// Linux `tcp_check_sack_reordering`, RFC 4653's idea: the undo also learns how far the
/// segment was overtaken. Segments 2-4 arrived before segment 1: four segments from its
/// start to the highest SACKed byte, so four duplicate ACKs, not three, now mean a loss
/// (RFC 6675 IsLost and the entry test use the same threshold). The next reordering of
/// that degree costs no retransmission; one deeper still starts a recovery, and a timeout
/// during that recovery leaves the threshold alone (Linux `tcp_enter_loss`).
#[test]
fn an_undo_raises_the_duplicate_ack_threshold() {
    let (mut t, c, ts11) = undone_by_eifel();
    // Segment 11 arrives (slow start: cwnd 11, segments 21 and 22 go); segment 12 is held
    // back while 13, 14 and 15 arrive: three duplicate ACKs, no retransmission. Each SACKs
    // a segment, which left the network: one new segment each, the third too (RFC 3042's
    // limited transmit stops at two; RFC 4653's extended one goes on to the threshold).
    t.inject(20, ack(s(12), Some(ts11)));
    assert_eq!(t.sent_now().iter().map(|x| x.seq).collect::<Vec<_>>(), [s(21), s(22)]);
    for k in 14..=16 {
        t.inject(20, ack(s(12), Some(ts11)).sack(&[(s(13), s(k))]));
    }
    let sent: Vec<u32> = t.sent_now().iter().map(|x| x.seq).collect();
    assert_eq!(sent, (23..=25).map(s).collect::<Vec<_>>());
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.fast_retransmits, 1);
    // A fourth: segment 12 is lost by the raised threshold.
    t.inject(20, ack(s(12), Some(ts11)).sack(&[(s(13), s(17))]));
    let sent = t.sent_now();
    assert_eq!(sent.first().map(|x| (x.seq, x.len)), Some((s(12), 1000)), "{sent:?}");
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.fast_retransmits, 2);
    // Nothing more arrives: the timeout comes during the recovery.
    let i = after_a_timeout(&mut t, c);
    assert_eq!((i.stats.rtos, i.reordering), (1, 4));
}

/// Linux `tcp_enter_loss`: a timeout outside recovery, with at least three segments SACKed,
/// shows the raised threshold waited for duplicate ACKs that were losses: it goes back to
/// 3. (With the threshold at 4, three SACKed segments started no recovery.)
#[test]
fn a_timeout_with_losses_the_threshold_missed_lowers_it() {
    let (mut t, c, ts11) = undone_by_eifel();
    for k in 13..=15 {
        t.inject(20, ack(s(11), Some(ts11)).sack(&[(s(12), s(k))]));
    }
    t.sent_now();
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.reordering, i.stats.fast_retransmits), (4, 1));
    let i = after_a_timeout(&mut t, c);
    assert_eq!((i.stats.rtos, i.reordering), (1, 3));
}

/// The depth is measured while the episode runs. After the recovery ends, more data is
/// SACKed above a new hole, and only then does the D-SACK that proves the episode's one
/// retransmission unnecessary arrive: the threshold is what the episode showed (4), not
/// what the later SACKs reach. (Two segments SACKed above the new hole, not enough for
/// IsLost: with more, RFC 6675 §5 starts a new recovery episode, which takes the undo state
/// of this one.)
#[test]
fn the_depth_is_the_episodes_not_what_is_sacked_later() {
    let (mut t, c, _) = ten_in_flight(false);
    fast_retransmit_of_1(&mut t, c, None);
    t.inject(12, ack(s(11), None));
    expect_new(&mut t, 12, 11, 15);
    t.inject(13, ack(s(11), None).sack(&[(s(12), s(14))]));
    t.sent_now();
    t.inject(14, ack(s(11), None).sack(&[(s(1), s(2)), (s(12), s(14))]));
    let i = t.stack.tcp_info(c).unwrap();
    assert_eq!((i.stats.undos, i.reordering), (1, 4));
}
