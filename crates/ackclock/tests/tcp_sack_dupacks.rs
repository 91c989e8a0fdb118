//! Which ACKs count as duplicate ACKs, and when a new recovery may begin: RFC 6675 §2's
//! definition with SACK (an ACK that SACKs new data counts whatever else it carries), its
//! §5 (1.b) IsLost test on an advancing ACK, and RFC 6582's `recover` rule at exactly the
//! old recovery point. Packet-level scripts: the peer offers MSS 1000, so data byte
//! n*1000+1 starts segment n+1.

mod common;

use ackclock::tcp::TcpConfig;
use ackclock::TcpHandle;
use common::script::*;
use std::net::SocketAddrV4;

const SMSS: u32 = 1000;

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

/// First byte of segment `n` (1-based).
fn s(n: u32) -> u32 {
    (n - 1) * SMSS + 1
}

/// A pure ACK from the peer for stack byte `a` (relative).
fn ack(a: u32) -> Seg {
    seg(".").seq(PEER_ISS + 1).ack(a).win(65535)
}

/// How many data segments starting at `seq` the stack has sent so far.
fn times_sent(t: &mut Script, seq: u32) -> usize {
    t.collect();
    t.log.iter().filter(|x| x.len > 0 && x.seq == seq).count()
}

fn info(t: &Script, c: TcpHandle) -> ackclock::tcp::TcpInfo {
    t.stack.tcp_info(c).unwrap()
}

/// RFC 6675 §2: "a 'duplicate acknowledgment' is an acknowledgment that arrives carrying a
/// SACK block that identifies previously unacknowledged and un-SACKed octets between HighACK
/// and HighData. Note that an ACK which carries new SACK data is counted as a duplicate
/// acknowledgment under this definition even if it carries new data, changes the advertised
/// window, or moves the cumulative acknowledgment point". With bidirectional traffic every
/// ACK rides on data: segment 1 of 10 is lost and the peer's three data segments SACK 2, 3
/// and 4. §5 (1.a)/(1.b): DupAcks reaches DupThresh (and IsLost(HighACK+1) holds): fast
/// retransmit of segment 1, not a wait for the retransmission timer.
#[test]
fn rfc6675_s2_sack_dupacks_carrying_data_count() {
    let (mut t, c) = established(true);
    t.stack.tcp_send(c, &vec![0u8; 10_000]).unwrap();
    t.discard();
    assert_eq!(times_sent(&mut t, s(10)), 1);
    let mut pseq = PEER_ISS + 1;
    for last in 3..=5 {
        t.inject(10, seg("P.").seq(pseq).ack(1).win(65535).len(100).sack(&[(s(2), s(last))]));
        pseq += 100;
    }
    t.collect();
    assert_eq!(
        times_sent(&mut t, s(1)),
        2,
        "RFC 6675 §2/§5: three ACKs SACKing new data are duplicate ACKs even with data on them; {:?}",
        info(&t, c).stats
    );
}

/// RFC 6675 §2 (see above): "... even if it ... changes the advertised window". A receiver
/// whose application reads while a hole is open advertises a growing window on each ACK;
/// with SACK those are still duplicate ACKs and lead to fast retransmit.
#[test]
fn rfc6675_s2_sack_dupacks_with_window_changes_count() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    // Window field 1000 << 7 = 128000 bytes.
    let c = t.accept_with(l, seg("S").win(1000).mss(1000).ws(7).sack_ok());
    t.stack.tcp_send(c, &vec![0u8; 10_000]).unwrap();
    t.discard();
    for (i, last) in (3..=5).enumerate() {
        t.inject(10, ack(1).win(1001 + i as u16).sack(&[(s(2), s(last))]));
    }
    assert_eq!(times_sent(&mut t, s(1)), 2, "fast retransmit of segment 1: {:?}", info(&t, c).stats);
}

/// RFC 6675 §5.1: a new recovery may start once "HighACK is greater than or equal to" the
/// RecoveryPoint; RFC 6582 §3.2 step 1 likewise once the ACK "covers more than recover", the
/// highest sequence number sent when the last one began. The first segment sent at or after
/// the RecoveryPoint is lost: the ACK that ends recovery stops exactly at the RecoveryPoint,
/// and SACKs above it then show that segment lost: fast retransmit, not an RTO.
#[test]
fn rfc6675_new_recovery_for_a_loss_at_the_recovery_point() {
    let (mut t, c) = established(true);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    t.discard(); // 1..10
                 // Segment 1 lost; 2.. SACKed. Limited transmit sends 11, 12; the third enters recovery.
    for last in 3..=5 {
        t.inject(10, ack(1).sack(&[(s(2), s(last))]));
        t.discard();
    }
    assert_eq!(info(&t, c).stats.fast_retransmits, 1);
    let point = t.log.iter().map(|x| x.seq + x.len as u32).max().unwrap();
    assert_eq!(point, s(13), "RecoveryPoint = HighData at entry: {:?}", t.log);
    // The rest of the window is SACKed; new data (13, 14, ...) goes out during recovery.
    for last in 6..=13 {
        t.inject(11, ack(1).sack(&[(s(2), s(last))]));
        t.discard();
    }
    let high = t.log.iter().map(|x| x.seq + x.len as u32).max().unwrap();
    assert!(high >= s(17), "segments 13..16 sent during recovery, high {high}: {:?}", t.log);
    // Segment 1's retransmission arrives: the ACK reaches the RecoveryPoint exactly; segment
    // 13 was lost, 14, 15, 16 arrive.
    t.inject(20, ack(s(13)));
    t.discard();
    assert_eq!(times_sent(&mut t, s(13)), 1);
    for last in 15..=17 {
        t.inject(21, ack(s(13)).sack(&[(s(14), s(last))]));
        t.collect();
    }
    let i = info(&t, c);
    assert_eq!(
        (times_sent(&mut t, s(13)), i.stats.fast_retransmits, i.stats.rtos),
        (2, 2, 0),
        "segment 13 fast retransmitted at the third SACK duplicate ACK"
    );
}

/// RFC 6675 §2 (see above): "... or moves the cumulative acknowledgment point", and §5: "If
/// the incoming ACK is a cumulative acknowledgment, the TCP MUST reset DupAcks to zero. If
/// the incoming ACK is a duplicate acknowledgment per the definition in Section 2
/// (regardless of its status as a cumulative acknowledgment), and the TCP is not currently
/// in loss recovery, the TCP MUST increase DupAcks by one and ... (1.b) If DupAcks <
/// DupThresh but IsLost (HighACK + 1) returns true ... go to step (4)" (fast retransmit).
/// Five segments, the second lost; one (stretch) ACK acknowledges segment 1 and SACKs 3..5:
/// segment 2 has three SACKed segments above it, so it is retransmitted at once. No further
/// ACK will come (the tail was sent): without this, only the RTO repairs it.
#[test]
fn rfc6675_s5_advancing_ack_with_new_sack_can_start_recovery() {
    let (mut t, c) = established(true);
    t.stack.tcp_send(c, &vec![0u8; 5_000]).unwrap();
    t.discard();
    assert_eq!(times_sent(&mut t, s(5)), 1);
    t.inject(10, ack(s(2)).sack(&[(s(3), s(6))]));
    t.collect();
    let i = info(&t, c);
    assert_eq!(
        (times_sent(&mut t, s(2)), i.stats.fast_retransmits, i.stats.rtos),
        (2, 1, 0),
        "IsLost(HighACK + 1) on an ACK that advances and SACKs new data"
    );
}

/// The same point without SACK (RFC 6582 §3.2 step 1: "covers more than recover", recover
/// being "the highest sequence number transmitted" when recovery began): segment 1 is lost
/// and recovered; the full ACK stops exactly at the old SND.MAX, the first segment sent
/// after it is lost, and three duplicate ACKs at that point start a new recovery.
#[test]
fn rfc6582_new_recovery_for_a_loss_just_past_recover() {
    let (mut t, c) = established(false);
    t.stack.tcp_send(c, &vec![0u8; 100_000]).unwrap();
    t.discard(); // 1..10
                 // Segment 1 lost: limited transmit sends 11 and 12, the third duplicate ACK enters
                 // recovery with recover at the end of 12.
    for _ in 0..3 {
        t.inject(10, ack(1));
        t.discard();
    }
    assert_eq!(info(&t, c).stats.fast_retransmits, 1);
    let point = t.log.iter().map(|x| x.seq + x.len as u32).max().unwrap();
    assert_eq!(point, s(13), "recover at the highest byte sent: {:?}", t.log);
    // The retransmission arrives: the full ACK ends recovery at exactly s(13); new data
    // (13 on) goes out, 13 is lost, and 14, 15, 16 each draw a duplicate ACK.
    t.inject(20, ack(s(13)));
    t.discard();
    assert_eq!(times_sent(&mut t, s(13)), 1);
    for _ in 0..3 {
        t.inject(21, ack(s(13)));
        t.collect();
    }
    let i = info(&t, c);
    assert_eq!(
        (times_sent(&mut t, s(13)), i.stats.fast_retransmits, i.stats.rtos),
        (2, 2, 0),
        "segment 13 fast retransmitted at the third duplicate ACK"
    );
}
