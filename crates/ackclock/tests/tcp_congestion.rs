//! Packet-level tests of the ack clock: slow start, congestion avoidance, fast retransmit and
//! fast recovery (Jacobson 1990, RFC 5681, RFC 6582, RFC 3042), SACK recovery (RFC 6675), D-SACK
//! (RFC 2883), the RTO response and hostile SACK blocks.
//!
//! The peer offers MSS 1000 and no timestamps, so segments carry exactly 1000 bytes and the
//! numbers read as segment counts: data byte n*1000+1 starts segment n+1.

mod common;

use ackclock::tcp::cc::Algorithm;
use ackclock::tcp::TcpConfig;
use ackclock::TcpHandle;
use common::script::*;
use std::net::SocketAddrV4;

const SMSS: u32 = 1000;

/// An established connection whose peer offers MSS 1000, a huge window (65535 << 7), and
/// SACK if `sack`.
fn established(sack: bool) -> (Script, TcpHandle) {
    established_with(tcp_config(), sack)
}

fn established_with(config: TcpConfig, sack: bool) -> (Script, TcpHandle) {
    let mut t = Script::new(config);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let mut syn = seg("S").win(65535).mss(1000).ws(7);
    if sack {
        syn = syn.sack_ok();
    }
    let c = t.accept_with(l, syn);
    (t, c)
}

/// Expect `n` full segments starting at segment number `first` (1-based).
#[track_caller]
fn expect_segments(t: &mut Script, ms: u64, first: u32, n: u32) {
    for i in 0..n {
        let seq = (first - 1 + i) * SMSS + 1;
        let got = t.expect(ms, seg(".").seq(seq).len(SMSS as usize).any_options());
        assert!(!got.flags.contains(ackclock::wire::TcpFlags::SYN));
    }
}

/// An ACK from the peer for stack byte `ack` (relative), optionally with SACK blocks.
fn ack(ack: u32) -> Seg {
    seg(".").seq(PEER_ISS + 1).ack(ack).win(65535)
}

fn cwnd(t: &Script, c: TcpHandle) -> u32 {
    t.stack.tcp_info(c).unwrap().cwnd
}

/// The send buffer of the tests that fill it (their `feed`): 256 KiB leaves the scripts' 512
/// buffers room for the frames they inject (the default queues two windows, 512 KiB).
const FILLED_SEND_BUFFER: usize = 256 * 1024;

/// RFC 5681 §3.1 with RFC 3465 (L = 2 SMSS) and RFC 6928: the initial window is 10
/// segments; each ACK of one segment in slow start grows cwnd by one SMSS, letting two new
/// segments out — the window doubles every round trip.
#[test]
fn slow_start_grows_one_segment_per_ack() {
    let (mut t, c) = established(false);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    t.expect_nothing(1);
    assert_eq!(cwnd(&t, c), 10 * SMSS);
    for k in 1..=10 {
        t.inject(2, ack(k * SMSS + 1));
        assert_eq!(cwnd(&t, c), (10 + k) * SMSS);
        expect_segments(&mut t, 2, 10 + 2 * k - 1, 2);
        t.expect_nothing(2);
    }
}

/// cwnd, not the device ring, limits what goes out: with an initial window of 100 segments
/// and a ring of 64 frames, the first dispatch fills the ring and the next one sends the
/// other 36 without waiting for an ACK (the connection stays on the stack's dirty list while
/// the ring is what stopped it).
#[test]
fn a_window_larger_than_the_device_ring_is_sent_over_successive_dispatches() {
    let mut config = tcp_config();
    config.initial_window = 100;
    let (mut t, c) = established_with(config, false);
    t.stack.tcp_send(c, &vec![0u8; 200_000]).unwrap();
    let first = t.sent_now();
    assert_eq!(first.len(), 64, "the ring holds 64 frames");
    let second = t.sent_now();
    assert_eq!(second.len(), 36);
    assert_eq!(second[0].seq, 64 * SMSS + 1);
    assert!(t.sent_now().is_empty(), "cwnd is used up");
}

/// RFC 5681 §4.1: a sender that "has not sent data in an interval exceeding the
/// retransmission timeout" sets cwnd to no more than RW = min(IW, cwnd) before sending. Ten
/// segments sent at 1 ms and acknowledged one by one at 11 ms (slow start: cwnd 20, RTO the
/// 200 ms floor) leave nothing to send. Data written when exactly one RTO has passed goes out
/// with the whole cwnd of 20; data written 1 ms later, after more than an RTO, with IW = 10.
#[test]
fn restart_after_idle_limits_cwnd_to_the_initial_window() {
    for (idle_ms, sent) in [(200, 20), (201, 10)] {
        let (mut t, c) = established(false);
        send_exactly(&mut t, c, 1, 10);
        for n in 2..=11 {
            t.inject(11, ack(s(n)));
        }
        t.expect_nothing(11);
        let info = t.stack.tcp_info(c).unwrap();
        assert_eq!((info.cwnd, info.rto.as_millis()), (20 * SMSS, 200));
        t.at_us((1 + idle_ms) * 1000);
        t.stack.tcp_send(c, &vec![0u8; 30_000]).unwrap();
        expect_segments(&mut t, 1 + idle_ms, 11, sent);
        t.expect_nothing(1 + idle_ms);
        assert_eq!(t.stack.tcp_info(c).unwrap().cwnd, sent * SMSS, "idle for {idle_ms} ms");
    }
}

/// RFC 3042 with SACK (RFC 6675 §5 step 3): the first two duplicate ACKs, each SACKing a new
/// segment, send one new segment each (11, 12); a duplicate ACK that SACKs nothing new is no
/// duplicate (RFC 6675 §2) and sends nothing. The third enters recovery: segment 1 is
/// retransmitted, ssthresh = cwnd = FlightSize/2 = 5000 without the two limited-transmit
/// segments (RFC 5681 §3.2), and pipe = 1 + 8 segments (1 retransmitted, 5-12) leaves no
/// room for more.
#[test]
fn limited_transmit_with_sack() {
    let (mut t, c) = established(true);
    t.stack.tcp_send(c, &vec![0u8; 30_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    t.inject(10, ack(1).sack(&[(s(2), s(3))]));
    expect_segments(&mut t, 10, 11, 1);
    t.expect_nothing(10);
    t.inject(10, ack(1).sack(&[(s(2), s(3))]));
    t.expect_nothing(10);
    t.inject(10, ack(1).sack(&[(s(2), s(4))]));
    expect_segments(&mut t, 10, 12, 1);
    t.expect_nothing(10);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.stats.dup_acks, info.cwnd), (2, 10 * SMSS));
    t.inject(10, ack(1).sack(&[(s(2), s(5))]));
    t.expect(10, seg(".").seq(1).len(1000).any_options());
    t.expect_nothing(10);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.ssthresh, info.cwnd, info.stats.fast_retransmits), (5 * SMSS, 5 * SMSS, 1));
}

/// RFC 3465 §2.2: a stretch ACK covering four segments grows cwnd by at most L = 2 SMSS.
#[test]
fn slow_start_limits_growth_per_stretch_ack() {
    let (mut t, c) = established(false);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    t.inject(2, ack(4 * SMSS + 1));
    assert_eq!(cwnd(&t, c), 12 * SMSS);
    // 6 in flight, window 12: segments 11..16 go out.
    expect_segments(&mut t, 2, 11, 6);
    t.expect_nothing(2);
}

/// RFC 5681 §3.1, RFC 6298 §5.5: on RTO, ssthresh = max(FlightSize/2, 2 SMSS), cwnd = 1 SMSS
/// (the loss window): only the first segment is resent; then slow start to ssthresh and
/// congestion avoidance at +1 SMSS per window acknowledged. RFC 3465 §2.3: in the slow start
/// that follows a timeout L = 1 SMSS, so an ACK of two, three or four segments grows cwnd by
/// one segment only (such ACKs may cover segments the receiver got long before).
#[test]
fn rto_collapses_to_one_segment_then_slow_start_then_avoidance() {
    let (mut t, c) = established(false);
    t.stack.tcp_send(c, &vec![0u8; 200_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    // The handshake measured an RTT of ~0, so the RTO is the 200 ms floor.
    t.expect_nothing(200);
    t.expect(201, seg(".").seq(1).len(1000).any_options());
    t.expect_nothing(201);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.cwnd, info.ssthresh), (SMSS, 5 * SMSS));
    assert_eq!(info.stats.rtos, 1);
    // Slow start: the ACK of segment 1 lets 2 out (segments 2 and 3 again).
    t.inject(202, ack(SMSS + 1));
    assert_eq!(cwnd(&t, c), 2 * SMSS);
    expect_segments(&mut t, 202, 2, 2);
    t.expect_nothing(202);
    // Two segments acknowledged: +1 SMSS, not 2 (L = 1 SMSS after a timeout).
    t.inject(203, ack(3 * SMSS + 1));
    assert_eq!(cwnd(&t, c), 3 * SMSS);
    expect_segments(&mut t, 203, 4, 3);
    t.expect_nothing(203);
    t.inject(204, ack(6 * SMSS + 1));
    assert_eq!(cwnd(&t, c), 4 * SMSS);
    expect_segments(&mut t, 204, 7, 4);
    t.inject(205, ack(10 * SMSS + 1));
    assert_eq!(cwnd(&t, c), 5 * SMSS, "slow start stops at ssthresh");
    t.discard();
    // Congestion avoidance: +1 SMSS once a full window (5000 bytes) is acknowledged.
    for k in 11..15 {
        t.inject(206, ack(k * SMSS + 1));
        assert_eq!(cwnd(&t, c), 5 * SMSS, "no growth before a window's worth of ACKs");
        t.discard();
    }
    t.inject(206, ack(15 * SMSS + 1));
    assert_eq!(cwnd(&t, c), 6 * SMSS);
}

/// Jacobson 1990 and RFC 5681 §3.2 / RFC 3042, exactly. Segment 1 of W = 10 is lost; segments
/// 2..10 arrive and each draws a duplicate ACK.
/// - Duplicate ACKs 1 and 2: limited transmit sends one new segment each (11, 12).
/// - Duplicate ACK 3: fast retransmit of segment 1; ssthresh = FlightSize/2 with FlightSize
///   the 10 segments in flight at the loss — RFC 5681 §3.2 step 2: the two segments sent by
///   limited transmit "MUST NOT" be counted — so ssthresh = 5000, cwnd = ssthresh + 3 SMSS =
///   8000.
/// - Each further duplicate ACK (segments 5..12 arriving, the last two being the
///   limited-transmit ones) inflates cwnd by one SMSS; new data flows once cwnd exceeds the 12
///   segments outstanding: W/2 − 1 = 4 new segments (13..16).
/// - The recovery ACK (for everything up to 12) deflates cwnd to ssthresh = W/2 with the 4
///   new segments in flight: exactly one segment goes out, no burst.
#[test]
fn fast_retransmit_and_recovery_follow_seed_000_algebra() {
    let (mut t, c) = established(false);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    let dup = ack(1);
    t.inject(10, dup.clone());
    expect_segments(&mut t, 10, 11, 1);
    t.inject(10, dup.clone());
    expect_segments(&mut t, 10, 12, 1);
    t.expect_nothing(10);
    t.inject(10, dup.clone());
    t.expect(10, seg(".").seq(1).len(1000).any_options());
    t.expect_nothing(10);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.ssthresh, info.cwnd), (5 * SMSS, 8 * SMSS), "RFC 5681 §3.2 step 2, W = 10");
    assert_eq!(info.stats.fast_retransmits, 1);
    // Duplicate ACKs 4..11 (segments 5..12 arriving).
    let mut new_segments = 0;
    for k in 4..=11u32 {
        t.inject(10, dup.clone());
        assert_eq!(cwnd(&t, c), (8 + k - 3) * SMSS, "inflation at duplicate ACK {k}");
        if k >= 8 {
            expect_segments(&mut t, 10, 13 + (k - 8), 1);
            new_segments += 1;
        }
        t.expect_nothing(10);
    }
    assert_eq!(new_segments, 10 / 2 - 1, "W/2 - 1 new segments during recovery, W = 10");
    // The retransmission of segment 1 arrives: the recovery ACK.
    t.inject(20, ack(12 * SMSS + 1));
    assert_eq!(cwnd(&t, c), 5 * SMSS, "deflated to ssthresh");
    expect_segments(&mut t, 20, 17, 1);
    t.expect_nothing(20);
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.rtos, 0);
}

/// RFC 5681 §3.2 step 2 when the window was not full: only what limited transmit sent
/// beyond cwnd is left out of FlightSize. Four segments are in flight of cwnd = 10 when the
/// first duplicate ACK arrives; the application then writes six more, which cwnd alone
/// allows: they are ordinary flight, so FlightSize = 10 segments at the third duplicate ACK.
#[test]
fn flight_size_counts_data_sent_within_cwnd_during_duplicate_acks() {
    let (mut t, c) = established(false);
    t.stack.tcp_send(c, &vec![0u8; 4000]).unwrap();
    expect_segments(&mut t, 1, 1, 3);
    t.expect(1, seg("P.").seq(3001).len(1000).any_options());
    t.inject(10, ack(1));
    t.stack.tcp_send(c, &vec![0u8; 6000]).unwrap();
    expect_segments(&mut t, 10, 5, 5);
    t.expect(10, seg("P.").seq(9001).len(1000).any_options());
    t.inject(10, ack(1));
    t.inject(10, ack(1));
    t.expect(10, seg(".").seq(1).len(1000).any_options());
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.ssthresh, info.cwnd), (5 * SMSS, 8 * SMSS), "FlightSize = 10 segments");
}

/// RFC 9438 §4.6 with RFC 5681 §3.2 step 2: CUBIC's ssthresh = flight_size × β_cubic, and
/// flight_size leaves out limited transmit too: W = 10 gives ssthresh = 7000, and fast
/// recovery's cwnd = ssthresh + 3 SMSS = 10000.
#[test]
fn cubic_reduces_flight_size_without_limited_transmit() {
    let mut config = tcp_config();
    config.congestion = Algorithm::Cubic { hystart: false };
    let (mut t, c) = established_with(config, false);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    for n in 11..=12 {
        t.inject(10, ack(1));
        expect_segments(&mut t, 10, n, 1);
    }
    t.inject(10, ack(1));
    t.expect(10, seg(".").seq(1).len(1000).any_options());
    t.expect_nothing(10);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.ssthresh, info.cwnd), (7 * SMSS, 10 * SMSS));
}

/// RFC 6582 §3.2 step 3: two segments lost from one window. The partial ACK (acking up to
/// the second hole) retransmits the next hole at once and deflates cwnd by the amount
/// acknowledged, adding back one SMSS; no RTO.
#[test]
fn newreno_partial_ack_retransmits_the_next_hole() {
    let (mut t, c) = established(false);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    // Segments 1 and 4 lost. Segments 2, 3, 5.. draw duplicate ACKs of 1.
    for _ in 0..2 {
        t.inject(10, ack(1));
    }
    t.discard(); // limited transmit: 11, 12
    t.inject(10, ack(1));
    t.expect(10, seg(".").seq(1).len(1000).any_options());
    // ssthresh = 10 segments / 2 (limited transmit not counted, RFC 5681 §3.2), + 3 SMSS.
    assert_eq!(cwnd(&t, c), 8 * SMSS);
    // Segment 1's retransmission arrives: ACK up to the second hole (segment 4).
    t.inject(20, ack(3 * SMSS + 1));
    t.expect(20, seg(".").seq(3001).len(1000).any_options());
    // cwnd = 8000 - 3000 acked + 1000 = 6000.
    assert_eq!(cwnd(&t, c), 6 * SMSS);
    t.discard();
    t.inject(30, ack(12 * SMSS + 1));
    assert_eq!(cwnd(&t, c), 5 * SMSS, "full ACK: deflated to ssthresh");
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.rtos, 0);
}

/// RFC 6582 §3.2 step 1: duplicate ACKs that only cover data below `recover` (left over
/// from a completed recovery) must not start another fast retransmit.
#[test]
fn no_second_fast_retransmit_for_old_duplicates() {
    let (mut t, c) = established(false);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    for _ in 0..3 {
        t.inject(10, ack(1));
    }
    t.discard();
    // A partial ACK, then three duplicates of it (still inside the recovery): no new
    // fast retransmit episode.
    t.inject(20, ack(5 * SMSS + 1));
    t.discard();
    for _ in 0..3 {
        t.inject(20, ack(5 * SMSS + 1));
    }
    t.discard();
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.fast_retransmits, 1);
}

/// RFC 6675: SACK recovery repairs several holes in one round trip. Segments 2, 5 and 8 of
/// 10 are lost; the peer SACKs the rest, including segments 11 and 12 sent in slow start.
/// Every hole is retransmitted before the cumulative ACK moves, and cwnd follows ssthresh
/// (no NewReno inflation). Segment 8 is retransmitted only once IsLost holds for it: three
/// SACKed segments above it (9, 10 and 11), not after the first two.
#[test]
fn sack_recovery_repairs_several_holes_per_rtt() {
    let (mut t, c) = established(true);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    t.inject(10, ack(s(2)));
    t.discard(); // two new segments in slow start
    t.inject(10, ack(s(2)).sack(&[(s(3), s(4))]));
    t.inject(10, ack(s(2)).sack(&[(s(3), s(5))]));
    t.inject(10, ack(s(2)).sack(&[(s(6), s(7)), (s(3), s(5))]));
    t.inject(10, ack(s(2)).sack(&[(s(6), s(8)), (s(3), s(5))]));
    t.inject(10, ack(s(2)).sack(&[(s(9), s(10)), (s(6), s(8)), (s(3), s(5))]));
    t.inject(10, ack(s(2)).sack(&[(s(9), s(11)), (s(6), s(8)), (s(3), s(5))]));
    t.collect();
    let before_11: Vec<u32> = t.log.iter().filter(|x| x.len > 0).map(|x| x.seq).collect();
    assert_eq!(before_11.iter().filter(|&&q| q == s(8)).count(), 1, "segment 8 not yet lost: {before_11:?}");
    t.inject(10, ack(s(2)).sack(&[(s(9), s(12)), (s(6), s(8)), (s(3), s(5))]));
    t.inject(10, ack(s(2)).sack(&[(s(9), s(13)), (s(6), s(8)), (s(3), s(5))]));
    t.collect();
    let sent: Vec<u32> = t.log.iter().filter(|x| x.len > 0).map(|x| x.seq).collect();
    for hole in [2, 5, 8] {
        assert!(
            sent.iter().filter(|&&q| q == s(hole)).count() == 2,
            "segment {hole} retransmitted once within the round trip; sent {sent:?}"
        );
    }
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!(info.stats.fast_retransmits, 1);
    assert_eq!(info.stats.rtos, 0);
    assert!(info.cwnd <= info.ssthresh, "RFC 6675: cwnd = ssthresh during recovery, no inflation");
    // The ACK for everything ends recovery with cwnd = ssthresh.
    let last = t.log.iter().map(|x| x.seq + x.len as u32).max().unwrap();
    t.inject(30, ack(last));
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!(info.cwnd, info.ssthresh);
}

/// First byte of segment `n` (1-based) of 1000-byte segments.
fn s(n: u32) -> u32 {
    (n - 1) * SMSS + 1
}

/// Send exactly `n` segments of data (the last carries PSH) and expect them at `ms`.
fn send_exactly(t: &mut Script, c: TcpHandle, ms: u64, n: u32) {
    t.stack.tcp_send(c, &vec![0u8; (n * SMSS) as usize]).unwrap();
    expect_segments(t, ms, 1, n - 1);
    t.expect(ms, seg("P.").seq(s(n)).len(SMSS as usize).any_options());
}

/// Enter SACK recovery with segment 1 of 10 lost: three duplicate ACKs SACK 2, 3 and 4,
/// segment 1 is retransmitted; nothing new is left to send, so limited transmit sent
/// nothing and ssthresh = cwnd = 10 segments / 2.
fn sack_recovery_for_segment_1(t: &mut Script, c: TcpHandle) {
    send_exactly(t, c, 1, 10);
    t.inject(10, ack(1).sack(&[(s(2), s(3))]));
    t.inject(10, ack(1).sack(&[(s(2), s(4))]));
    t.expect_nothing(10);
    t.inject(10, ack(1).sack(&[(s(2), s(5))]));
    t.expect(10, seg(".").seq(1).len(1000).any_options());
    t.expect_nothing(10);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.ssthresh, info.cwnd), (5 * SMSS, 5 * SMSS));
}

/// RFC 6675 §4 NextSeg rule 3: when no segment is lost by IsLost and there is no new data,
/// unSACKed data below SACKed data that was not retransmitted is sent. Segments 1 and 8 of
/// 10 are lost. Once 2..7 and 9 are SACKed, pipe = 1 (segment 1's retransmission) + 1
/// (segment 8) + 1 (segment 10) segments, cwnd − pipe = 2 SMSS; segment 8 has only one
/// SACKed segment above it, so it is not lost (rule 1), but it lies below SACKed data:
/// rule 3 retransmits it, and nothing else (rule 4 must wait for segment 1's ACK).
#[test]
fn sack_nextseg_rule_3_sends_unsacked_data_below_sacked_data() {
    let (mut t, c) = established(true);
    sack_recovery_for_segment_1(&mut t, c);
    for last in 6..=8 {
        t.inject(11, ack(1).sack(&[(s(2), s(last))]));
        t.expect_nothing(11);
    }
    t.inject(12, ack(1).sack(&[(s(9), s(10)), (s(2), s(8))]));
    t.expect(12, seg(".").seq(s(8)).len(1000).any_options());
    t.expect_nothing(12);
    t.inject(20, ack(s(11)));
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.stats.retransmits, info.stats.rtos), (2, 0));
    assert_eq!(info.cwnd, 5 * SMSS);
}

/// RFC 6675 §4 NextSeg rule 4, the rescue retransmission: segments 1, 8, 9 and 10 of 10 are
/// lost (a tail loss). Nothing is lost by IsLost above segment 1 and there is no new data,
/// so when the ACK for segment 1's retransmission (a partial ACK, up to 8) passes RescueRxt
/// (the end of that retransmission, §5 step 4.3), rule 4 retransmits the highest unSACKed
/// segment, 10 — once. "HighRxt MUST NOT be updated": when the rescued segment is SACKed,
/// segments 8 and 9 lie below SACKed data and were never retransmitted, so rule 3 sends them
/// at once. (Were HighRxt raised to the end of segment 10, they would count as already
/// retransmitted and wait for the retransmission timer.)
#[test]
fn sack_rescue_retransmission_leaves_high_rxt_alone() {
    let (mut t, c) = established(true);
    sack_recovery_for_segment_1(&mut t, c);
    for last in 6..=8 {
        t.inject(11, ack(1).sack(&[(s(2), s(last))]));
        t.expect_nothing(11);
    }
    // Segment 1's retransmission arrives: a partial ACK up to the hole at 8.
    t.inject(20, ack(s(8)));
    t.expect(20, seg("P.").seq(s(10)).len(1000).any_options());
    t.expect_nothing(20);
    // The rescue arrives.
    t.inject(30, ack(s(8)).sack(&[(s(10), s(11))]));
    t.expect(30, seg(".").seq(s(8)).len(1000).any_options());
    t.expect(30, seg(".").seq(s(9)).len(1000).any_options());
    t.expect_nothing(30);
    t.inject(40, ack(s(11)));
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.stats.retransmits, info.stats.rtos, info.stats.fast_retransmits), (4, 0, 1));
    assert_eq!((info.cwnd, info.ssthresh), (5 * SMSS, 5 * SMSS));
}

/// RFC 2018 §8: "the data sender MUST NOT discard data before it is cumulatively acked", and
/// a receiver may renege on what it SACKed. A hostile receiver SACKs the first unacknowledged
/// segment, which it would acknowledge if it had it, and never acknowledges it. That is
/// evidence of reneging (Linux `tcp_check_sack_reneging`): the retransmission timer is
/// brought forward to max(SRTT/2, 10 ms), and the timeout, finding the segment at snd_una
/// SACKed, clears every mark and resends it (RFC 5681 §3.1: cwnd 1 SMSS, ssthresh 5000).
/// The receiver lies again: the sender, believing it, moves on to segment 2, but the next
/// timeout (10 ms later again, not the backed-off 400 ms) resends segment 1 once more. When
/// the receiver finally acknowledges everything the connection carries on.
#[test]
fn a_sack_of_the_first_unacked_segment_does_not_stop_its_retransmission() {
    let (mut t, c) = established(true);
    send_exactly(&mut t, c, 1, 10);
    let lie = ack(1).sack(&[(s(1), s(2))]);
    t.inject(10, lie.clone());
    t.inject(15, lie.clone()); // nothing new: changes nothing
    t.expect_nothing(19);
    t.expect(20, seg(".").seq(1).len(1000).any_options());
    t.expect_nothing(20);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.stats.rtos, info.stats.sack_reneging), (1, 1));
    assert_eq!((info.cwnd, info.ssthresh), (SMSS, 5 * SMSS));
    t.inject(25, lie);
    t.expect(25, seg(".").seq(s(2)).len(1000).any_options());
    t.expect_nothing(34);
    t.expect(35, seg(".").seq(1).len(1000).any_options());
    t.expect_nothing(35);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.stats.rtos, info.stats.sack_reneging), (2, 2));
    assert_eq!((info.cwnd, info.ssthresh), (SMSS, 5 * SMSS));
    t.inject(40, ack(s(11)));
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!(info.state, ackclock::tcp::State::Established);
    assert_eq!((info.flight, info.stats.bytes_acked), (0, 10_000));
    t.stack.tcp_send(c, &[0u8; 1000]).unwrap();
    t.expect(40, seg("P.").seq(s(11)).len(1000).any_options());
}

/// RFC 2018 §8, a receiver that really reneges: it SACKs segments 3-5, then its cumulative
/// ACK stops at 3 (it received 1 and 2 and dropped what it had queued above). The marks must
/// not make the sender skip 3-5 after the timeout (they would never be sent again, and the
/// connection would die of retransmissions): the ACK that stops at a SACKed segment brings
/// the timer forward, the timeout clears the marks, and go-back-N resends 3, then 4 and 5.
#[test]
fn after_reneging_the_timeout_resends_what_was_sacked() {
    let (mut t, c) = established(true);
    send_exactly(&mut t, c, 1, 10);
    t.inject(10, ack(1).sack(&[(s(3), s(4))]));
    t.inject(10, ack(1).sack(&[(s(3), s(6))]));
    // Three segments SACKed above segment 1: it is lost (RFC 6675 §5 step 2).
    t.expect(10, seg(".").seq(1).len(1000).any_options());
    t.expect_nothing(10);
    // The partial ACK leaves pipe = 5 segments (6-10) = cwnd: nothing more goes out.
    t.inject(11, ack(s(3)));
    t.expect_nothing(20);
    t.expect(21, seg(".").seq(s(3)).len(1000).any_options());
    t.expect_nothing(21);
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.sack_reneging, 1);
    t.inject(30, ack(s(4)));
    t.expect(30, seg(".").seq(s(4)).len(1000).any_options());
    t.expect(30, seg(".").seq(s(5)).len(1000).any_options());
    t.expect_nothing(30);
}

/// RFC 2883 §4: a first SACK block below the cumulative ACK is a D-SACK: the receiver got a
/// duplicate. It is evidence of a spurious retransmission only if we retransmitted what it
/// reports (Linux `tcp_check_dsack`). Here the timer fires (200 ms) and resends segment 1;
/// then the original ACK for all ten segments arrives, then the ACK for the duplicate, with
/// D-SACK [1, 1001): counted once. The same D-SACK repeated is not counted again: there was
/// only one retransmission.
#[test]
fn dsack_below_the_ack_counts_a_spurious_retransmission() {
    let (mut t, c) = established(true);
    send_exactly(&mut t, c, 1, 10);
    t.expect_nothing(200);
    t.expect(201, seg(".").seq(1).len(1000).any_options());
    t.inject(202, ack(s(11)));
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.spurious_retransmits, 0);
    t.inject(203, ack(s(11)).sack(&[(s(1), s(2))]));
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.stats.retransmits, info.stats.spurious_retransmits), (1, 1));
    t.inject(204, ack(s(11)).sack(&[(s(1), s(2))]));
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.spurious_retransmits, 1);
}

/// RFC 2883 §4: a first block inside the second block is a D-SACK of data above the
/// cumulative ACK. After the timeout resends segment 1, its ACK lets go-back-N resend 2 and 3
/// (cwnd 2 SMSS); 2 is lost again, 3 reaches a receiver that already holds 3-10: D-SACK
/// [3, 4) inside SACK [3, 11), and segment 3 was sent twice: counted. A D-SACK of segment 7,
/// which was sent once, is not.
#[test]
fn dsack_inside_the_second_block_counts_only_retransmitted_data() {
    let (mut t, c) = established(true);
    send_exactly(&mut t, c, 1, 10);
    t.expect(201, seg(".").seq(1).len(1000).any_options());
    t.inject(202, ack(s(2)));
    t.expect(202, seg(".").seq(s(2)).len(1000).any_options());
    t.expect(202, seg(".").seq(s(3)).len(1000).any_options());
    t.expect_nothing(202);
    t.inject(203, ack(s(2)).sack(&[(s(3), s(4)), (s(3), s(11))]));
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.stats.retransmits, info.stats.spurious_retransmits), (3, 1));
    t.inject(204, ack(s(2)).sack(&[(s(7), s(8)), (s(3), s(11))]));
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.spurious_retransmits, 1);
}

/// Hostile SACK blocks (RFC 6675 §5, RFC 2883 §4, RFC 5961 spirit): blocks beyond snd_max,
/// below snd_una, inverted, or huge change nothing; D-SACK-shaped first blocks that are
/// inverted, longer than any window, out of range or for data never retransmitted count no
/// spurious retransmission. cwnd, ssthresh and every counter but those of segments and SACK
/// blocks received stay exactly as they were, and nothing is sent. Duplicated and
/// overlapping valid blocks mark each segment once. No recovery starts from bogus
/// information.
#[test]
fn hostile_sack_blocks_change_nothing_they_must_not() {
    let (mut t, c) = established(true);
    t.stack.tcp_send(c, &vec![0u8; 20_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    t.inject(10, ack(1001));
    t.discard();
    let before = t.stack.tcp_info(c).unwrap();
    assert_eq!((before.cwnd, before.ssthresh), (11 * SMSS, u32::MAX));
    // Beyond what was sent, below snd_una, inverted, covering 2^31 bytes:
    t.inject(11, ack(1001).sack(&[(50_001, 60_001), (1, 1001), (5001, 3001), (2001, 2001 + (1u32 << 31))]));
    t.inject(11, ack(1001).sack(&[(50_001, 60_001)]));
    t.inject(11, ack(1001).sack(&[(12_001, 13_001), (900_000_000, 900_001_000)]));
    // D-SACK-shaped: below the ACK but never retransmitted; inverted; 2^30 bytes long;
    // "inside the second block" far beyond snd_max.
    t.inject(11, ack(1001).sack(&[(1, 1001)]));
    t.inject(11, ack(1001).sack(&[(901, 1)]));
    t.inject(11, ack(1001).sack(&[(1001u32.wrapping_sub(1 << 30), 1001)]));
    t.inject(11, ack(1001).sack(&[(900_000_000, 900_001_000), (900_000_000, 900_002_000)]));
    assert!(t.sent_now().is_empty(), "nothing to answer");
    let after = t.stack.tcp_info(c).unwrap();
    assert_eq!((after.cwnd, after.ssthresh), (before.cwnd, before.ssthresh));
    let expected =
        ackclock::tcp::ConnStats { segs_in: after.stats.segs_in, sack_blocks: after.stats.sack_blocks, ..before.stats };
    assert_eq!(after.stats, expected);
    assert_eq!(after.stats.sack_blocks - before.stats.sack_blocks, 4 + 1 + 2 + 1 + 1 + 1 + 2);
    // Duplicated and overlapping valid blocks: segments 3-5 SACKed, three dupacks with the
    // same information -> exactly one recovery, retransmitting segment 2 only once.
    for _ in 0..3 {
        t.inject(12, ack(1001).sack(&[(2001, 5001), (2001, 4001), (3001, 5001)]));
    }
    t.collect();
    let retransmits_of_2 = t.log.iter().filter(|x| x.seq == 1001 && x.len > 0).count();
    assert_eq!(retransmits_of_2, 2, "sent once, retransmitted once");
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.fast_retransmits, 1);
}

/// After an RTO with SACK, only unSACKed data is resent, and SACKed segments are not counted
/// as in flight against cwnd (RFC 6675 pipe; Linux's packets_in_flight), so the next hole and
/// new data go out as the window grows instead of waiting for the cumulative ACK. Segments 1
/// and 5 of 10 are lost; 2-4 and 6-10 are SACKed; the RTO resends 1; its ACK (up to 4) lets
/// cwnd grow to 3 SMSS: hole 5 and new segments 11 and 12 go out at once.
#[test]
fn after_rto_sacked_segments_do_not_hold_the_window() {
    let (mut t, c) = established(true);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    expect_segments(&mut t, 1, 1, 10);
    t.inject(5, ack(1).sack(&[(s(2), s(5))]));
    t.inject(5, ack(1).sack(&[(s(6), s(11)), (s(2), s(5))]));
    t.discard(); // whatever recovery sent
                 // Let every retransmission of this episode be lost: the RTO fires.
    let sent = t.run_to(1000);
    assert!(sent.iter().any(|(_, x)| x.seq == 1), "segment 1 resent by the timer");
    let info = t.stack.tcp_info(c).unwrap();
    assert!(info.stats.rtos >= 1);
    t.inject(1001, ack(s(5)).sack(&[(s(6), s(11))]));
    let out: Vec<u32> = t.run_to(1002).into_iter().filter(|(_, x)| x.len > 0).map(|(_, x)| x.seq).collect();
    assert_eq!(out.first(), Some(&s(5)), "the next hole first: {out:?}");
    assert!(out.contains(&s(11)), "new data goes out too, SACKed 6-10 skipped: {out:?}");
    assert!(!out.iter().any(|&q| (s(6)..s(11)).contains(&q)), "SACKed data is not resent: {out:?}");
}

/// RFC 9438 in floating point, in segments and seconds, for one congestion-avoidance epoch
/// that starts at the first ACK `ack` sees: W_cubic(t) = C (t − K)^3 + W_max (eq. 1) with
/// C = 0.4 and K = ∛((W_max − cwnd_epoch)/C) (eq. 2); target = W_cubic(t + RTT) within
/// [cwnd, 1.5 cwnd] (§4.2); W_est = cwnd_epoch + α · segments_acked/cwnd per ACK (eq. 4),
/// α = 3(1 − β)/(1 + β) = 9/17 until W_est reaches cwnd_prior, then 1 (§4.3); cwnd = W_est
/// in the Reno-friendly region (W_cubic(t) < W_est), else cwnd += (target − cwnd)/cwnd per
/// segment acknowledged (§4.4, §4.5).
struct CubicModel {
    smss: f64,
    w_max: f64,
    cwnd_prior: f64,
    /// Epoch start (ms), K (s), W_est (segments).
    epoch: Option<(u64, f64)>,
    w_est: f64,
}

impl CubicModel {
    fn new(smss: u32, w_max: u32, cwnd_prior: u32) -> CubicModel {
        let smss = f64::from(smss);
        CubicModel {
            smss,
            w_max: f64::from(w_max) / smss,
            cwnd_prior: f64::from(cwnd_prior) / smss,
            epoch: None,
            w_est: 0.0,
        }
    }

    fn w_cubic(&self, t: f64) -> f64 {
        let k = self.epoch.map_or(0.0, |e| e.1);
        0.4 * (t - k).powi(3) + self.w_max
    }

    /// A new ACK of `acked` bytes at `now_ms` with cwnd `cwnd` before it and smoothed RTT
    /// `srtt` (s): the cwnd it should leave (bytes), and whether that came from the
    /// Reno-friendly region.
    fn ack(&mut self, now_ms: u64, cwnd: u32, acked: u32, srtt: f64) -> (f64, bool) {
        let cwnd = f64::from(cwnd) / self.smss;
        let acked = f64::from(acked) / self.smss;
        let (start, _) = *self.epoch.get_or_insert_with(|| {
            self.w_est = cwnd;
            (now_ms, ((self.w_max - cwnd).max(0.0) / 0.4).cbrt())
        });
        let t = (now_ms - start) as f64 / 1000.0;
        let target = self.w_cubic(t + srtt).clamp(cwnd, 1.5 * cwnd);
        let alpha = if self.w_est >= self.cwnd_prior { 1.0 } else { 9.0 / 17.0 };
        self.w_est += alpha * acked / cwnd;
        let (next, reno) = if self.w_cubic(t) < self.w_est {
            (self.w_est.max(cwnd), true)
        } else {
            (cwnd + (target - cwnd) * acked / cwnd, false)
        };
        (next * self.smss, reno)
    }
}

/// Data segments the stack sends now, taking them off the device ring until it sends no
/// more (a stretch ACK can release more than the ring holds).
fn drain(t: &mut Script) -> Vec<Sent> {
    let mut out = vec![];
    loop {
        let v: Vec<Sent> = t.sent_now().into_iter().filter(|s| s.len > 0).collect();
        if v.is_empty() {
            return out;
        }
        out.extend(v);
    }
}

/// The peer's ACK for stack byte `ack`, with timestamps: TSval `ms` (the peer's clock), TSecr
/// echoing `tsecr`.
fn ts_ack(ack: u32, ms: u64, tsecr: u32) -> Seg {
    seg(".").seq(PEER_ISS + 1).ack(ack).win(65535).ts(ms as u32 + 1, tsecr)
}

/// Within this many bytes of the floating-point model: the stack computes W_cubic, the
/// per-ACK increment and W_est (1/1024-byte fixed point) in integers, each truncated.
const CUBIC_ROUNDING: f64 = 2.0;

/// RFC 9406 §4.2 and RFC 9438 §4.10: HyStart++ ends slow start without a loss, so there is
/// no W_max. CUBIC then sets ssthresh = cwnd_prior = cwnd and follows eq. 1 with K = 0 and
/// W_max = the cwnd at the start of congestion avoidance, t counted from there.
///
/// The peer acknowledges every segment one round trip after it was sent (timestamps echo
/// the stack's TSval, so every ACK is an RTT sample): 1000 ms for the first round, then
/// 1020 ms, a rise above HyStart++'s threshold (clamp(1000/8, 4, 16) ms). After CSS_ROUNDS
/// rounds of conservative slow start, ssthresh = cwnd. From then on one stretch ACK per
/// round trip acknowledges the whole flight, and every cwnd the stack sets is checked
/// against [`CubicModel`]. From t = 2 s the curve W_max + 0.4 t^3 is above Reno's estimate
/// and cwnd follows W_cubic(t + RTT) to within a segment (the flight, whole segments, falls
/// short of cwnd by less than one, and so does the step towards the target). A curve from
/// W_max = 0 (the old behaviour) stays below W_est for many seconds more: cwnd would grow by
/// one segment per round trip.
#[test]
fn cubic_after_hystart_exit_starts_the_curve_at_cwnd() {
    const RTT_1: u64 = 1000;
    const RTT_2: u64 = 1020;
    let mut config = tcp_config();
    config.congestion = Algorithm::Cubic { hystart: true };
    // With RTTs this steady RTTVAR vanishes; keep the retransmission timer out of the way.
    config.rtt.min_rto = ackclock::time::Duration::from_secs(3);
    config.send_buffer = FILLED_SEND_BUFFER;
    let mut t = Script::new(config);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    // MSS 1012 less 12 bytes of timestamps: 1000-byte segments.
    let c = t.accept_with(l, seg("S").win(65535).mss(1012).ws(7).ts(1, 0));
    let data = vec![0u8; 1 << 20];
    let feed = |t: &mut Script| while t.stack.tcp_send(c, &data).unwrap_or(0) > 0 {};
    feed(&mut t);
    let mut now = t.ms();
    let mut flight: Vec<Sent> = t.sent_now().into_iter().filter(|s| s.len > 0).collect();
    assert_eq!(flight.len(), 10);
    let info = |t: &Script| t.stack.tcp_info(c).unwrap();

    // Slow start, then conservative slow start, until HyStart++ sets ssthresh. Each ACK is
    // its own arrival: the stack sends what it releases before the next one comes, as on a
    // network. `rest` is what is left of the flight being acknowledged when HyStart++ ends.
    let mut round = 0;
    let mut exit = None;
    let mut rest = vec![];
    while exit.is_none() {
        round += 1;
        assert!(round < 20, "HyStart++ never ended slow start");
        now += if round == 1 { RTT_1 } else { RTT_2 };
        let mut next = vec![];
        let mut acks = flight.iter();
        for s in acks.by_ref() {
            t.inject(now, ts_ack(s.seq + s.len as u32, now, s.ts.unwrap().0));
            feed(&mut t);
            next.extend(t.sent_now().into_iter().filter(|s| s.len > 0));
            let i = info(&t);
            if i.ssthresh != u32::MAX {
                assert_eq!(i.ssthresh, i.cwnd, "RFC 9406 §4.2: ssthresh = cwnd on leaving CSS");
                exit = Some(i.cwnd);
                break;
            }
        }
        rest = acks.cloned().collect();
        flight = next;
    }
    let w_max = exit.unwrap();
    println!("HyStart++ left slow start in round {round} at cwnd {w_max}");
    let mut model = CubicModel::new(SMSS, w_max, w_max);
    let check = |t: &Script, model: &mut CubicModel, at: u64, before: u32, acked: u32| {
        let i = info(t);
        let srtt = i.srtt.unwrap().as_secs_f64();
        let (want, reno) = model.ack(at, before, acked, srtt);
        let got = f64::from(i.cwnd);
        assert!((got - want).abs() <= CUBIC_ROUNDING, "t = {at} ms: cwnd {got}, RFC 9438 gives {want:.1}");
        (i.cwnd, reno)
    };
    // The rest of that round's flight is acknowledged at the same instant, one ACK per
    // segment: the epoch begins with the first of them (t = 0).
    for s in &rest {
        let before = info(&t).cwnd;
        t.inject(now, ts_ack(s.seq + s.len as u32, now, s.ts.unwrap().0));
        check(&t, &mut model, now, before, s.len as u32);
        feed(&mut t);
        flight.extend(t.sent_now().into_iter().filter(|s| s.len > 0));
    }
    let start = now;
    let mut regions = vec![];
    for _ in 0..5 {
        now += RTT_2;
        let end = flight.iter().map(|s| s.seq + s.len as u32).max().unwrap();
        let acked = flight.iter().map(|s| s.len as u32).sum::<u32>();
        let before = info(&t).cwnd;
        t.inject(now, ts_ack(end, now, flight[0].ts.unwrap().0));
        let (cwnd, reno) = check(&t, &mut model, now, before, acked);
        let srtt = info(&t).srtt.unwrap().as_secs_f64();
        let w_cubic = model.w_cubic((now - start) as f64 / 1000.0 + srtt) * f64::from(SMSS);
        println!(
            "t = {} ms: cwnd {cwnd} ({}), W_cubic(t + RTT) {w_cubic:.0}",
            now - start,
            if reno { "Reno-friendly" } else { "cubic" }
        );
        if !reno {
            assert!((f64::from(cwnd) - w_cubic).abs() < f64::from(SMSS), "cwnd {cwnd}, W_cubic(t + RTT) {w_cubic:.0}");
        }
        regions.push(reno);
        feed(&mut t);
        flight = drain(&mut t);
    }
    assert_eq!(regions, [true, false, false, false, false], "W_max + 0.4 t^3 passes W_est at t = 2 s");
    assert_eq!(info(&t).stats.rtos, 0);
}

/// A CUBIC connection without timestamps or SACK whose peer acknowledges every flight one
/// round trip of `rtt` ms after it was sent, and the steps the RFC 9438 tests share.
struct CubicPeer {
    t: Script,
    c: TcpHandle,
    now: u64,
    rtt: u64,
    /// The data segments sent at the last step, not yet acknowledged.
    flight: Vec<Sent>,
}

impl CubicPeer {
    fn new(rtt: u64) -> CubicPeer {
        let mut config = tcp_config();
        config.congestion = Algorithm::Cubic { hystart: false };
        // The RTTs here do not vary, so RTTVAR vanishes: keep the timer out of the way.
        config.rtt.min_rto = ackclock::time::Duration::from_millis(3 * rtt.max(100));
        config.send_buffer = FILLED_SEND_BUFFER;
        let (t, c) = established_with(config, false);
        let mut p = CubicPeer { now: t.ms(), t, c, rtt, flight: vec![] };
        p.feed();
        p.flight = drain(&mut p.t);
        p
    }

    fn info(&self) -> ackclock::tcp::TcpInfo {
        self.t.stack.tcp_info(self.c).unwrap()
    }

    fn feed(&mut self) {
        let data = vec![0u8; 64 * 1024];
        while self.t.stack.tcp_send(self.c, &data).unwrap_or(0) > 0 {}
    }

    fn end(s: &Sent) -> u32 {
        s.seq + s.len as u32
    }

    /// Slow start, one ACK per segment, until cwnd reaches `segments`.
    fn slow_start_to(&mut self, segments: u32) {
        while self.info().cwnd < segments * SMSS {
            self.now += self.rtt;
            let mut next = vec![];
            for s in std::mem::take(&mut self.flight) {
                self.t.inject(self.now, ack(Self::end(&s)));
                self.feed();
                next.extend(drain(&mut self.t));
            }
            self.flight = next;
        }
        assert_eq!(self.info().cwnd, segments * SMSS);
    }

    /// The first segment of the flight is lost: the others draw duplicate ACKs (fast
    /// retransmit and recovery), and one round trip later a single ACK covers everything
    /// sent so far, ending recovery with cwnd = ssthresh. Returns cwnd before the loss.
    fn lose_one(&mut self) -> u32 {
        let cwnd = self.info().cwnd;
        let una = self.flight[0].seq;
        self.now += self.rtt;
        let flight = std::mem::take(&mut self.flight);
        for _ in &flight[1..] {
            self.t.inject(self.now, ack(una));
            self.feed();
            drain(&mut self.t);
        }
        assert_eq!(self.info().stats.fast_retransmits, 1);
        self.now += self.rtt;
        let high = self.t.log.iter().filter(|s| s.len > 0).map(Self::end).max().unwrap();
        self.t.inject(self.now, ack(high));
        let i = self.info();
        assert_eq!(i.cwnd, i.ssthresh, "recovery over");
        self.feed();
        self.flight = drain(&mut self.t);
        cwnd
    }

    /// One round trip: a single ACK for the whole flight. Returns (cwnd before, bytes acked).
    fn round(&mut self) -> (u32, u32) {
        self.now += self.rtt;
        let before = self.info().cwnd;
        let acked = self.flight.iter().map(|s| s.len as u32).sum();
        let end = self.flight.iter().map(Self::end).max().unwrap();
        self.t.inject(self.now, ack(end));
        self.feed();
        self.flight = drain(&mut self.t);
        (before, acked)
    }
}

/// RFC 9438 §4.2-4.6, cwnd at given times against the formula. W = 80 segments when segment
/// 1 of a flight is lost (RTT 1 s): W_max = 80, ssthresh = cwnd = β·80 = 56, K =
/// ∛(80·0.3/0.4) = 3.915 s. After recovery one ACK per round trip covers the flight; each
/// cwnd the stack sets matches [`CubicModel`] to within integer rounding, the curve is
/// concave below W_max until t + RTT passes K, then convex, and since every ACK covers all
/// but a fraction of a segment of cwnd, cwnd lands within one SMSS of W_cubic(t + RTT):
/// 56529, 74547, 79072, 79993, 80190, 82413, 89272, 103387 at t = 0..7 s.
#[test]
fn cubic_cwnd_follows_w_cubic_at_given_times() {
    let mut p = CubicPeer::new(1000);
    p.slow_start_to(80);
    let w_max = p.lose_one();
    assert_eq!(w_max, 80 * SMSS);
    assert_eq!((p.info().ssthresh, p.info().cwnd), (56 * SMSS, 56 * SMSS), "§4.6: β_cubic = 0.7");
    let mut model = CubicModel::new(SMSS, w_max, w_max);
    let start = p.now + p.rtt;
    let mut trajectory = vec![];
    for _ in 0..8 {
        let (before, acked) = p.round();
        let i = p.info();
        let srtt = i.srtt.unwrap().as_secs_f64();
        let (want, reno) = model.ack(p.now, before, acked, srtt);
        let got = f64::from(i.cwnd);
        assert!((got - want).abs() <= CUBIC_ROUNDING, "t = {} ms: cwnd {got}, RFC 9438 {want:.1}", p.now - start);
        let t = (p.now - start) as f64 / 1000.0;
        let w = model.w_cubic(t + srtt) * f64::from(SMSS);
        if !reno {
            assert!((got - w).abs() < f64::from(SMSS), "t = {t} s: cwnd {got}, W_cubic(t + RTT) {w:.0}");
        }
        trajectory.push((p.now - start, i.cwnd, reno));
    }
    println!("K = {:.3} s; (t ms, cwnd, Reno-friendly): {trajectory:?}", model.epoch.unwrap().1);
    assert!((model.epoch.unwrap().1 - 3.915).abs() < 0.001);
    // At t = 0, W_cubic(0) = cwnd_epoch is below W_est, which the ACK just raised: the one
    // Reno-friendly step. Then the concave region up to the plateau at W_max (t + RTT
    // reaches K = 3.9 s at t = 3 s: 79993, a step short of the target), convex after it.
    let regions: Vec<bool> = trajectory.iter().map(|x| x.2).collect();
    assert_eq!(regions, [true, false, false, false, false, false, false, false]);
    assert!(trajectory[..4].iter().all(|&(_, w, _)| w < w_max));
    assert!(trajectory[4..].iter().all(|&(_, w, _)| w > w_max));
    assert_eq!(p.info().stats.rtos, 0);
}

/// RFC 9438 §4.3, the Reno-friendly region: with RTT 10 ms and W_max = 20 segments the cubic
/// curve (K = ∛(20·0.3/0.4) = 2.47 s) grows slower than Reno, so cwnd = W_est, which starts
/// at cwnd_epoch = 14 segments and grows by α·segments_acked/cwnd per ACK (eq. 4) with
/// α = 3(1 − β)/(1 + β) = 9/17 until it reaches cwnd_prior = 20, then by 1: about 0.53
/// segments per round trip, then about 1.
#[test]
fn cubic_reno_friendly_region_grows_by_alpha_then_one() {
    let mut p = CubicPeer::new(10);
    p.slow_start_to(20);
    let w_max = p.lose_one();
    assert_eq!((w_max, p.info().cwnd), (20 * SMSS, 14 * SMSS));
    let mut model = CubicModel::new(SMSS, w_max, w_max);
    let mut steps = vec![];
    for _ in 0..20 {
        let (before, acked) = p.round();
        let i = p.info();
        let (want, reno) = model.ack(p.now, before, acked, i.srtt.unwrap().as_secs_f64());
        let got = f64::from(i.cwnd);
        assert!((got - want).abs() <= CUBIC_ROUNDING, "cwnd {got}, RFC 9438 {want:.1}");
        assert!(reno, "short RTT: Reno-friendly");
        // Eq. 4 with α = 9/17 below cwnd_prior, 1 from there; cwnd = W_est.
        let alpha = if f64::from(before) >= f64::from(w_max) { 1.0 } else { 9.0 / 17.0 };
        let step = alpha * f64::from(SMSS) * f64::from(acked) / f64::from(before);
        assert!(
            (got - f64::from(before) - step).abs() <= CUBIC_ROUNDING,
            "step {} for α {alpha}",
            got - f64::from(before)
        );
        steps.push(i.cwnd - before);
    }
    println!("cwnd steps per round trip: {steps:?}");
    let (slow, fast) = steps.split_at(steps.iter().position(|&d| d > 700).unwrap());
    assert!(slow.len() >= 10 && slow.iter().all(|&d| (450..=530).contains(&d)), "{steps:?}");
    assert!(fast.iter().all(|&d| (900..=1000).contains(&d)), "{steps:?}");
}
