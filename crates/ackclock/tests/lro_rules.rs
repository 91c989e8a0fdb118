//! Packet-level tests of receive aggregation (the Myri10GE `inet_lro` patch, Gallatin 2008):
//! each merge rule and each flush reason, for data at a receiver and pure ACKs at a sender.
//! The test plays the peer (see `common/script.rs`) and hands the stack whole batches, as a
//! device does, with `Stack::process_batch`.

mod common;

use ackclock::phy::{Batch, Capabilities};
use ackclock::tcp::{Aggregation, Counters, TcpConfig};
use ackclock::TcpHandle;
use common::script::*;
use common::stream;
use std::net::SocketAddrV4;

/// The peer's first data byte.
const P: u32 = PEER_ISS + 1;
/// A full-sized segment without options (MSS 1460).
const MSS: u32 = 1460;

/// A connection accepted from a peer whose SYN is `syn`, aggregation set to `on`.
fn established(on: Aggregation, syn: Seg) -> (Script, TcpHandle) {
    accepted(Script::new(TcpConfig::default()), on, syn)
}

/// [`established`] on the stack of `t`.
fn accepted(mut t: Script, on: Aggregation, syn: Seg) -> (Script, TcpHandle) {
    t.stack.set_aggregation(on);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, syn);
    (t, c)
}

fn plain() -> (Script, TcpHandle) {
    plain_with(Aggregation::ON)
}

/// [`plain`], aggregation set to `on`.
fn plain_with(on: Aggregation) -> (Script, TcpHandle) {
    established(on, seg("S").win(65535).mss(1460))
}

/// The payload the peer sends at `seq` (a pattern of the sequence number).
fn payload(seq: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize + i) as u8).collect()
}

/// Hand the stack one batch of segments from the peer at `ms`.
fn batch(t: &mut Script, ms: u64, segs: &[Seg]) {
    let frames = frames_of(t, segs);
    batch_raw(t, ms, &frames);
}

/// The frames of the peer's segments `segs`, each with its payload.
fn frames_of(t: &Script, segs: &[Seg]) -> Vec<Vec<u8>> {
    segs.iter().map(|s| t.frame(s, &payload(s.seq.unwrap(), s.len))).collect()
}

fn batch_raw(t: &mut Script, ms: u64, frames: &[Vec<u8>]) {
    t.at_us(ms * 1000);
    let mut b = Batch::with_capacity(frames.len().max(1));
    for f in frames {
        let mut buf = t.stack.pool().alloc().expect("pool");
        buf.append(f.len()).unwrap().copy_from_slice(f);
        b.push(buf).unwrap();
    }
    let now = t.now;
    t.stack.process_batch(now, &mut b);
}

/// `n` full-sized in-order data segments from `P + from`.
fn data(from: u32, n: u32) -> Vec<Seg> {
    (0..n).map(|i| seg(".").seq(P + from + i * MSS).ack(1).len(MSS as usize)).collect()
}

fn recv_all(t: &mut Script, c: TcpHandle) -> Vec<u8> {
    let mut out = vec![];
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = t.stack.tcp_recv(c, &mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// What the peer sent from `P` on, `len` bytes of it.
fn expected(len: u32) -> Vec<u8> {
    payload(P, len as usize)
}

fn c(t: &Script) -> Counters {
    *t.stack.counters()
}

// ---------------------------------------------------------------------------------------
// Data at a receiver
// ---------------------------------------------------------------------------------------

/// Four in-order full-sized segments in one batch are one aggregate: TCP runs once and
/// ACKs all of it at once (two or more full-sized segments owe an ACK, RFC 5681 §4.2, as
/// Linux ACKs a GRO segment), with one ACK; the bytes are the peer's, in order.
#[test]
fn in_order_data_merges_into_one_aggregate_acked_at_once() {
    let (mut t, conn) = plain();
    batch(&mut t, 10, &data(0, 4));
    t.expect(10, seg(".").seq(1).ack(P + 4 * MSS).win(65535));
    t.expect_nothing(500);
    let k = c(&t);
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_flush_batch), (1, 4, 1));
    assert_eq!(t.stack.tcp_info(conn).unwrap().stats.segs_in, 1 + 4, "the handshake's ACK and four segments");
    assert_eq!(recv_all(&mut t, conn), expected(4 * MSS));
}

/// With aggregation off the same batch runs segment by segment: the delayed-ACK rule ACKs
/// every second segment, but the ACK is built once per batch, so the wire sees the same
/// single ACK; no aggregate is counted.
#[test]
fn data_aggregation_off_processes_each_segment() {
    let (mut t, conn) = established(Aggregation { data: false, acks: true }, seg("S").win(65535).mss(1460));
    batch(&mut t, 10, &data(0, 4));
    t.expect(10, seg(".").seq(1).ack(P + 4 * MSS).win(65535));
    assert_eq!(c(&t).lro_aggregates, 0);
    assert_eq!(c(&t).fast_path_data, 4);
    assert_eq!(recv_all(&mut t, conn), expected(4 * MSS));
}

/// A single segment is not an aggregate: the delayed-ACK timer runs as without aggregation
/// (RFC 5681 §4.2): no ACK at once, one ACK when the timer fires.
#[test]
fn a_lone_segment_keeps_the_delayed_ack() {
    let t = Script::new(TcpConfig { quick_acks: false, ..TcpConfig::default() });
    let (mut t, _) = accepted(t, Aggregation::ON, seg("S").win(65535).mss(1460));
    batch(&mut t, 10, &data(0, 1));
    t.expect_nothing(10);
    assert_eq!(c(&t).lro_aggregates, 0);
    let out = t.run_to(600);
    assert_eq!(out.len(), 1, "one delayed ACK: {out:?}");
    assert_eq!(out[0].1.ack, P + MSS);
}

/// PSH merges and ends the aggregate; the next segment starts a new one.
#[test]
fn psh_is_merged_and_ends_the_aggregate() {
    let (mut t, conn) = plain();
    let mut segs = data(0, 4);
    segs[1].flags = ackclock::wire::TcpFlags::ACK | ackclock::wire::TcpFlags::PSH;
    batch(&mut t, 10, &segs);
    t.expect(10, seg(".").seq(1).ack(P + 4 * MSS).win(65535));
    let k = c(&t);
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_flush_push, k.lro_flush_batch), (2, 4, 1, 1));
    assert_eq!(recv_all(&mut t, conn), expected(4 * MSS));
}

/// A FIN is never merged: it flushes the flow, the aggregate goes first, and the FIN
/// segment's data and FIN follow on the full path (RFC 9293 §3.10.7.4, eighth step).
#[test]
fn fin_in_the_last_segment_follows_the_aggregate() {
    let (mut t, conn) = plain();
    let mut segs = data(0, 4);
    segs[3].flags = ackclock::wire::TcpFlags::ACK | ackclock::wire::TcpFlags::FIN;
    batch(&mut t, 10, &segs);
    t.expect(10, seg(".").seq(1).ack(P + 4 * MSS + 1).win(65535));
    let k = c(&t);
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_flush_flags), (1, 3, 1));
    assert_eq!(recv_all(&mut t, conn), expected(4 * MSS));
    assert_eq!(t.stack.tcp_info(conn).unwrap().state, ackclock::tcp::State::CloseWait);
}

/// SYN, RST and URG flush too (each counted as a flag flush); here URG, which this stack
/// treats as ordinary data.
#[test]
fn urg_flushes_the_flow() {
    let (mut t, conn) = plain();
    let mut segs = data(0, 4);
    segs[2].flags = ackclock::wire::TcpFlags::ACK | ackclock::wire::TcpFlags::URG;
    batch(&mut t, 10, &segs);
    let k = c(&t);
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_flush_flags), (1, 2, 1));
    t.discard();
    assert_eq!(recv_all(&mut t, conn), expected(4 * MSS));
}

/// A gap flushes the flow: the segments before it are one aggregate, the one after it is
/// out of order and draws an immediate duplicate ACK (RFC 5681 §4.2) from the full path.
#[test]
fn a_gap_flushes_the_flow() {
    let (mut t, _) = plain();
    let mut segs = data(0, 2);
    segs.extend(data(3 * MSS, 2));
    batch(&mut t, 10, &segs);
    let k = c(&t);
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_flush_order), (1, 2, 1));
    let sent = t.sent_now();
    assert!(sent.iter().all(|s| s.ack == P + 2 * MSS), "ACKs stop at the gap: {sent:?}");
}

/// A duplicate (a segment already received in the batch) flushes the flow and is ACKed as
/// a duplicate; the data arrives once.
#[test]
fn a_duplicate_flushes_the_flow() {
    let (mut t, conn) = plain();
    let mut segs = data(0, 3);
    segs.insert(2, segs[1].clone());
    batch(&mut t, 10, &segs);
    let k = c(&t);
    assert_eq!(k.lro_flush_order, 1);
    assert_eq!(k.lro_segments, 2, "the first two merged; the third segment follows alone");
    t.discard();
    assert_eq!(recv_all(&mut t, conn), expected(3 * MSS));
}

/// A different window flushes. The segments with the new window do not merge either: the
/// first of them updates the send window on the full path, which header prediction would
/// not take, so they run one by one.
#[test]
fn a_window_change_flushes_the_flow() {
    let (mut t, conn) = plain();
    let mut segs = data(0, 4);
    segs[2] = segs[2].clone().win(30000);
    segs[3] = segs[3].clone().win(30000);
    batch(&mut t, 10, &segs);
    assert_eq!((c(&t).lro_flush_window, c(&t).lro_segments), (1, 2));
    t.discard();
    assert_eq!(recv_all(&mut t, conn), expected(4 * MSS));
}

/// A short segment flushes the flow (the aggregate is of one segment size) and follows
/// on its own.
#[test]
fn a_short_segment_flushes_the_flow() {
    let (mut t, conn) = plain();
    let mut segs = data(0, 3);
    segs.push(seg(".").seq(P + 3 * MSS).ack(1).len(700));
    batch(&mut t, 10, &segs);
    assert_eq!((c(&t).lro_flush_size, c(&t).lro_segments), (1, 3));
    t.discard();
    assert_eq!(recv_all(&mut t, conn), expected(3 * MSS + 700));
}

/// SACK blocks in a data segment (any option but timestamps) flush the flow.
#[test]
fn sack_option_flushes_the_flow() {
    let (mut t, conn) = established(Aggregation::ON, seg("S").win(65535).mss(1460).sack_ok());
    let mut segs = data(0, 4);
    segs[2] = segs[2].clone().sack(&[(1, 1)]);
    batch(&mut t, 10, &segs);
    assert_eq!((c(&t).lro_flush_options, c(&t).lro_segments), (1, 2));
    t.discard();
    assert_eq!(recv_all(&mut t, conn), expected(4 * MSS));
}

/// With timestamps: TSval may rise, TSecr must stay; a TSecr change flushes (other).
/// RFC 7323 §4.3: TS.Recent comes from the first segment, the one at Last.ACK.sent, so
/// the ACK echoes the first TSval, as it would have without aggregation.
#[test]
fn timestamps_merge_with_rising_tsval_and_the_ack_echoes_the_first() {
    let (mut t, conn) = established(Aggregation::ON, seg("S").win(65535).mss(1460).ts(100, 0));
    let ecr = t.log[0].ts.unwrap().0;
    let mss = MSS - 12;
    let segs: Vec<Seg> = (0..4).map(|i| seg(".").seq(P + i * mss).ack(1).len(mss as usize).ts(200 + i, ecr)).collect();
    batch(&mut t, 10, &segs);
    t.expect(10, seg(".").seq(1).ack(P + 4 * mss).win(65535).ts(ANY, 200));
    assert_eq!((c(&t).lro_aggregates, c(&t).lro_segments), (1, 4));
    let segs: Vec<Seg> = (4..8)
        .map(|i| seg(".").seq(P + i * mss).ack(1).len(mss as usize).ts(300, if i >= 6 { ecr + 1 } else { ecr }))
        .collect();
    batch(&mut t, 20, &segs);
    assert_eq!((c(&t).lro_flush_other, c(&t).lro_segments), (1, 8));
    t.discard();
    assert_eq!(recv_all(&mut t, conn), expected(8 * mss));
}

/// At most 16 segments per aggregate: the 17th starts the next one.
#[test]
fn a_full_aggregate_is_flushed() {
    let (mut t, conn) = plain();
    batch(&mut t, 10, &data(0, 20));
    let k = c(&t);
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_flush_full, k.lro_flush_batch), (2, 20, 1, 1));
    t.discard();
    assert_eq!(recv_all(&mut t, conn), expected(20 * MSS));
}

/// Flows of different connections aggregate side by side; a ninth flow takes a slot from
/// one of the eight (flushed, counted).
#[test]
fn flows_interleave_and_a_full_table_flushes_one() {
    let mut t = Script::new(TcpConfig::default());
    t.stack.set_aggregation(Aggregation::ON);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 16).unwrap();
    let mut conns = vec![];
    for i in 0..9u16 {
        let syn = seg("S").win(65535).mss(1460).peer_port(41000 + i);
        t.inject(t.ms(), syn.clone().seq(PEER_ISS));
        // Each connection has its own ISS: ACK its SYN-ACK's number plus one.
        let sa = t.expect(t.ms(), seg("S.").any_options().ack(PEER_ISS + 1));
        t.inject(t.ms(), seg(".").seq(P).ack(sa.seq + 1).win(65535).peer_port(41000 + i));
        conns.push((t.stack.tcp_accept(l).unwrap(), sa.seq + 1));
    }
    // Two segments of each of the first eight, interleaved; then two of the ninth.
    let one =
        |k: u32, i: usize| seg(".").seq(P + k * MSS).ack(conns[i].1).len(MSS as usize).peer_port(41000 + i as u16);
    let mut segs = vec![];
    for k in 0..2 {
        for i in 0..8 {
            segs.push(one(k, i));
        }
    }
    segs.extend([one(0, 8), one(1, 8)]);
    // The same payload for every connection, from its own sequence numbers.
    batch(&mut t, 10, &segs);
    let k = c(&t);
    assert_eq!((k.lro_flush_table, k.lro_flush_batch), (1, 8), "{k:?}");
    assert_eq!((k.lro_aggregates, k.lro_segments), (9, 18));
    t.discard();
    for (conn, _) in conns {
        assert_eq!(recv_all(&mut t, conn), expected(2 * MSS));
    }
}

/// A frame that is not a common one (here ARP) flushes every flow before it is handled.
#[test]
fn an_uncommon_frame_flushes_every_flow() {
    let (mut t, conn) = plain();
    let mut frames = frames_of(&t, &data(0, 2));
    let mut arp = frames[0].clone();
    arp.truncate(42);
    arp[12] = 0x08;
    arp[13] = 0x06;
    frames.push(arp);
    frames.extend(frames_of(&t, &data(2 * MSS, 2)));
    batch_raw(&mut t, 10, &frames);
    let k = c(&t);
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_flush_other, k.lro_flush_batch), (2, 4, 1, 1));
    t.discard();
    assert_eq!(recv_all(&mut t, conn), expected(4 * MSS));
}

/// A segment whose TCP checksum is bad (software checksum, deferred to the copy) is dropped
/// at the copy with everything after it, and never ACKed (the deferred receive checksum of
/// Afterburner, Dalton et al. 1993): the ACK covers only the good bytes before it.
#[test]
fn a_corrupted_segment_inside_an_aggregate_is_caught_at_the_copy() {
    let (mut t, conn) = plain();
    let mut frames = frames_of(&t, &data(0, 4));
    frames[2][100] ^= 0x40;
    batch_raw(&mut t, 10, &frames);
    assert_eq!((c(&t).lro_aggregates, c(&t).lro_segments), (1, 4));
    assert_eq!(recv_all(&mut t, conn), expected(2 * MSS));
    t.expect(10, seg(".").seq(1).ack(P + 2 * MSS).win(65535));
    assert_eq!(c(&t).drops_bad_checksum, 1);
}

// ---------------------------------------------------------------------------------------
// Pure ACKs at a sender
// ---------------------------------------------------------------------------------------

/// A connection that has sent `segs` full-sized segments (the first flight).
fn sender(on: Aggregation, segs: u32) -> (Script, TcpHandle) {
    let (mut t, conn) = established(on, seg("S").win(65535).mss(1460));
    let data = stream((segs * MSS) as usize, 3);
    assert_eq!(t.stack.tcp_send(conn, &data).unwrap(), data.len());
    let sent = t.sent_now();
    assert_eq!(sent.len(), segs.min(10) as usize, "the initial window");
    (t, conn)
}

fn ack(n: u32) -> Seg {
    seg(".").seq(P).ack(1 + n * MSS).win(65535)
}

/// Consecutive advancing ACKs merge into the newest; congestion control hears each one
/// (RFC 3465 §2.2: L = 2 SMSS per original ACK), so cwnd grows by 2 SMSS per ACK, as it
/// would for the separate ACKs: 10 + 4 * 2 = 18 segments.
#[test]
fn advancing_acks_merge_and_cwnd_grows_per_original_ack() {
    let (mut t, conn) = sender(Aggregation::ON, 40);
    batch(&mut t, 10, &[ack(2), ack(4), ack(6), ack(8)]);
    let k = c(&t);
    assert_eq!((k.lro_aggregates, k.lro_acks, k.fast_path_acks), (1, 3, 4));
    let info = t.stack.tcp_info(conn).unwrap();
    assert_eq!(info.cwnd, 18 * MSS);
    assert_eq!(info.flight, 2 * MSS);
    // 18 - 2 in flight: 16 new segments leave.
    assert_eq!(t.sent_now().len(), 16);
}

/// The same with aggregation off gives the same window and the same segments.
#[test]
fn acks_without_aggregation_grow_the_same_window() {
    let (mut t, conn) = sender(Aggregation::OFF, 40);
    batch(&mut t, 10, &[ack(2), ack(4), ack(6), ack(8)]);
    assert_eq!(c(&t).lro_acks, 0);
    let info = t.stack.tcp_info(conn).unwrap();
    assert_eq!(info.cwnd, 18 * MSS);
    assert_eq!(t.sent_now().len(), 16);
}

/// One ACK covering four segments is one ACK to RFC 3465: cwnd grows by 2 SMSS, not 4,
/// with or without aggregation.
#[test]
fn a_stretch_ack_is_one_original_ack() {
    let (mut t, conn) = sender(Aggregation::ON, 40);
    batch(&mut t, 10, &[ack(4)]);
    assert_eq!(t.stack.tcp_info(conn).unwrap().cwnd, 12 * MSS);
}

/// A duplicate ACK is never merged (fast retransmit counts them, RFC 5681 §3.2): the first
/// flushes the aggregate, and it and the two after it take the full path (header
/// prediction does not take a duplicate, so none starts an aggregate); three of them in one
/// batch still trigger fast retransmit of the first unacknowledged segment.
#[test]
fn duplicate_acks_are_never_merged_and_the_third_retransmits() {
    let (mut t, conn) = sender(Aggregation::ON, 10);
    batch(&mut t, 10, &[ack(1), ack(2), ack(2), ack(2), ack(2)]);
    let k = c(&t);
    assert_eq!((k.lro_acks, k.lro_flush_dupack, k.lro_flush_batch), (1, 1, 0), "{k:?}");
    let info = t.stack.tcp_info(conn).unwrap();
    assert_eq!(info.stats.fast_retransmits, 1);
    let sent = t.sent_now();
    assert_eq!(sent[0].seq, 1 + 2 * MSS, "the first unacknowledged segment again: {sent:?}");
}

/// Jacobson 1990's fast-recovery algebra (RFC 5681 §3.2, RFC 3042) with the ACKs arriving in
/// batches and aggregation on: segment 1 of W = 10 is lost. Duplicate ACKs 1 and 2 (one
/// batch) let limited transmit send segments 11 and 12; the third retransmits segment 1 with
/// ssthresh = 5 and cwnd = 8 segments; duplicates 4..11 in one batch are never merged and
/// inflate cwnd to 16, so W/2 - 1 = 4 new segments leave (13..16); the recovery ACK deflates
/// cwnd to ssthresh with those 4 in flight, so exactly one segment follows it (no burst).
/// The advancing ACKs after recovery merge again.
#[test]
fn fast_recovery_algebra_holds_with_batched_acks() {
    let (mut t, conn) = sender(Aggregation::ON, 100);
    let dup = || ack(0);
    let seqs = |t: &mut Script| t.sent_now().iter().map(|s| (s.seq - 1) / MSS + 1).collect::<Vec<u32>>();
    batch(&mut t, 10, &[dup(), dup()]);
    assert_eq!(seqs(&mut t), [11, 12], "limited transmit (RFC 3042)");
    batch(&mut t, 11, &[dup()]);
    assert_eq!(seqs(&mut t), [1], "fast retransmit on the third duplicate ACK");
    let info = t.stack.tcp_info(conn).unwrap();
    assert_eq!((info.ssthresh, info.cwnd), (5 * MSS, 8 * MSS));
    batch(&mut t, 12, &[dup(), dup(), dup(), dup(), dup(), dup(), dup(), dup()]);
    assert_eq!(seqs(&mut t), [13, 14, 15, 16], "W/2 - 1 new segments");
    assert_eq!(t.stack.tcp_info(conn).unwrap().cwnd, 16 * MSS);
    assert_eq!(c(&t).lro_acks, 0, "duplicate ACKs never merge");
    batch(&mut t, 20, &[ack(12)]);
    assert_eq!(t.stack.tcp_info(conn).unwrap().cwnd, 5 * MSS, "deflated to ssthresh");
    assert_eq!(seqs(&mut t), [17], "one segment after the recovery ACK, no burst");
    batch(&mut t, 30, &[ack(13), ack(14), ack(15), ack(16), ack(17)]);
    assert_eq!(c(&t).lro_acks, 4, "advancing ACKs merge again after recovery");
    assert_eq!(t.stack.tcp_info(conn).unwrap().stats.rtos, 0);
}

/// A window change ends the merge (the newer window goes through the full path).
#[test]
fn a_window_change_ends_the_ack_merge() {
    let (mut t, _) = sender(Aggregation::ON, 20);
    batch(&mut t, 10, &[ack(2), ack(4), ack(6).win(60000), ack(8).win(60000)]);
    let k = c(&t);
    // ACK 6 carries the new window through the full path; the connection then predicts the
    // new window, so ACK 8 begins an aggregate of its own, flushed at the end of the batch.
    assert_eq!((k.lro_acks, k.lro_flush_window, k.lro_flush_other, k.lro_flush_batch), (1, 1, 0, 1), "{k:?}");
}

/// An ACK carrying SACK blocks ends the merge (an option other than timestamps).
#[test]
fn a_sack_ends_the_ack_merge() {
    let (mut t, conn) = established(Aggregation::ON, seg("S").win(65535).mss(1460).sack_ok());
    let data = stream(20 * MSS as usize, 3);
    t.stack.tcp_send(conn, &data).unwrap();
    t.discard();
    batch(&mut t, 10, &[ack(2), ack(3), ack(3).sack(&[(1 + 4 * MSS, 1 + 5 * MSS)])]);
    assert_eq!((c(&t).lro_acks, c(&t).lro_flush_options), (1, 1), "{:?}", c(&t));
}

/// ACK aggregation off: each ACK runs the ACK path.
#[test]
fn ack_aggregation_off_merges_nothing() {
    let (mut t, _) = sender(Aggregation { data: true, acks: false }, 20);
    batch(&mut t, 10, &[ack(2), ack(4), ack(6)]);
    assert_eq!((c(&t).lro_acks, c(&t).fast_path_acks), (0, 3));
}

/// Each merged ACK's buffer goes back to the pool at once, not at the flush.
#[test]
fn merged_ack_buffers_return_to_the_pool() {
    let (mut t, _) = sender(Aggregation::ON, 20);
    let before = t.stack.pool().available();
    batch(&mut t, 10, &[ack(1), ack(2), ack(3), ack(4)]);
    assert_eq!(c(&t).lro_acks, 3);
    // The four ACK buffers are back, and the four acknowledged segments' too.
    assert_eq!(t.stack.pool().available(), before + 4);
}

// ---------------------------------------------------------------------------------------
// Frame lengths
// ---------------------------------------------------------------------------------------

/// A frame longer than its IPv4 total length (Ethernet padding, here six non-zero bytes)
/// is read to the IP length: it merges like the others and its padding never reaches the
/// application. The checksum here is verified in software over the IP length only; no
/// device of this stack vouches for a sum over the whole frame, so there is no padding
/// whose sum a vouched checksum would include.
#[test]
fn padding_past_the_ip_length_is_ignored_and_the_frame_merges() {
    let (mut t, conn) = plain();
    let mut frames = frames_of(&t, &data(0, 4));
    frames[1].extend_from_slice(&[0xa5; 6]);
    batch_raw(&mut t, 10, &frames);
    assert_eq!((c(&t).lro_aggregates, c(&t).lro_segments), (1, 4));
    t.expect(10, seg(".").seq(1).ack(P + 4 * MSS).win(65535));
    assert_eq!(recv_all(&mut t, conn), expected(4 * MSS));
}

/// Insert an 802.1Q tag (TPID 0x8100, VLAN 5) before the EtherType.
fn tag(f: &mut Vec<u8>) {
    f.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
}

/// 802.1Q-tagged frames aggregate, tagged and untagged alike, and each one's IPv4 total
/// length is checked against the frame without its four tag bytes (the length check the
/// Myri10GE patch fixed): a tagged frame carrying padding still merges, and the bytes
/// arrive in order with one ACK for all.
#[test]
fn vlan_tagged_frames_aggregate_with_their_length_behind_the_tag() {
    let (mut t, conn) = plain();
    let mut frames = frames_of(&t, &data(0, 4));
    for f in &mut frames[1..] {
        tag(f);
    }
    frames[3].extend_from_slice(&[0; 4]);
    let slow = c(&t).slow_path;
    batch_raw(&mut t, 10, &frames);
    let k = c(&t);
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_flush_batch, k.slow_path), (1, 4, 1, slow), "{k:?}");
    t.expect(10, seg(".").seq(1).ack(P + 4 * MSS).win(65535));
    assert_eq!(recv_all(&mut t, conn), expected(4 * MSS));
}

/// Tagged pure ACKs padded to the 60-byte Ethernet minimum merge as untagged ones do, and
/// congestion control hears each (RFC 3465 §2.2): 10 + 3 * 2 = 16 segments.
#[test]
fn vlan_tagged_padded_acks_merge() {
    let (mut t, conn) = sender(Aggregation::ON, 40);
    let mut frames: Vec<Vec<u8>> = [ack(2), ack(4), ack(6)].iter().map(|s| t.frame(s, &[])).collect();
    for f in &mut frames {
        tag(f);
        f.resize(60, 0);
    }
    let slow = c(&t).slow_path;
    batch_raw(&mut t, 10, &frames);
    let k = c(&t);
    assert_eq!((k.lro_aggregates, k.lro_acks, k.fast_path_acks, k.slow_path), (1, 2, 3, slow), "{k:?}");
    assert_eq!(t.stack.tcp_info(conn).unwrap().cwnd, 16 * MSS);
}

// ---------------------------------------------------------------------------------------
// Runs: the frames behind an aggregate's last one, taken by comparing their headers with
// its headers (`tcp::lro::run`). Each case puts, in the middle of a batch, a frame whose
// headers match the ones before it but for a field the run must check again; the stack
// must then do what it does with aggregation off.
// ---------------------------------------------------------------------------------------

/// The IPv4 header sum of the 20 bytes at `ip`, written into its checksum field.
fn fix_ip_checksum(f: &mut [u8], ip: usize) {
    f[ip + 10..ip + 12].fill(0);
    let sum = ackclock::wire::checksum::sum(&f[ip..ip + 20]);
    f[ip + 10..ip + 12].copy_from_slice(&(!sum).to_be_bytes());
}

/// Feed the frames `frames` makes as one batch to a stack with aggregation on and to one
/// with it off, each set up by `make`, and check that both send the same segments, read the
/// same bytes, drop the same frames for the same reasons and end with the same windows.
/// Returns the aggregating stack's counters.
fn as_without_aggregation(
    make: impl Fn(Aggregation) -> (Script, TcpHandle),
    frames: impl Fn(&Script) -> Vec<Vec<u8>>,
) -> Counters {
    let mut seen = vec![];
    let mut counters = vec![];
    for on in [Aggregation::ON, Aggregation::OFF] {
        let (mut t, conn) = make(on);
        let f = frames(&t);
        batch_raw(&mut t, 10, &f);
        let sent = t.sent_now();
        let read = recv_all(&mut t, conn);
        let k = c(&t);
        let drops = (k.drops_malformed, k.drops_bad_checksum, k.drops_paws, k.drops_out_of_window, k.drops_bad_ack);
        let i = t.stack.tcp_info(conn).unwrap();
        seen.push((sent, read, drops, (i.cwnd, i.flight, i.snd_wnd, i.rcv_wnd, i.state)));
        counters.push(k);
    }
    assert_eq!(seen[0], seen[1], "aggregation on (left) and off (right)");
    counters[0]
}

/// A run compares the whole frame but the IPv4 checksum, which it checks again: a frame
/// whose header sum is wrong is dropped as the IPv4 layer drops it (RFC 1122 §3.2.1.2), and
/// the segment after it is out of order.
#[test]
fn a_run_drops_a_frame_with_a_bad_ipv4_header_checksum() {
    let k = as_without_aggregation(plain_with, |t| {
        let mut f = frames_of(t, &data(0, 6));
        f[3][14 + 10] ^= 0x01;
        f
    });
    // A run took frames 1 and 2 (frame 0 began the aggregate) and stopped at frame 3.
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_run_frames, k.drops_bad_checksum), (1, 3, 2, 1), "{k:?}");
}

/// The IPv4 identification and checksum may change along a run; a TTL change is not in
/// the mask, so that frame takes the ordinary path, which merges it as well and makes the
/// template for the frames after it: one aggregate of eight.
#[test]
fn a_run_takes_new_identifications_and_a_ttl_change_merges_on_the_ordinary_path() {
    let k = as_without_aggregation(plain_with, |t| {
        let mut f = frames_of(t, &data(0, 8));
        for (i, f) in f.iter_mut().enumerate() {
            f[14 + 4..14 + 6].copy_from_slice(&(7 * i as u16).to_be_bytes());
            if i >= 4 {
                f[14 + 8] = 63;
            }
            fix_ip_checksum(f, 14);
        }
        f
    });
    // The run takes frames 1 to 3 and, from the template frame 4 made, 5 to 7.
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_flush_batch, k.lro_run_frames), (1, 8, 1, 6), "{k:?}");
}

/// A run goes on past a full aggregate: the frame after the sixteenth opens the next
/// aggregate as the ordinary path would, and the run takes every frame after the first.
#[test]
fn a_run_goes_on_past_a_full_aggregate() {
    let k = as_without_aggregation(plain_with, |t| frames_of(t, &data(0, 40)));
    let flushes = (k.lro_flush_full, k.lro_flush_batch);
    assert_eq!((k.lro_aggregates, k.lro_segments, flushes, k.lro_run_frames), (3, 40, (2, 1), 39), "{k:?}");
}

/// The receive window is the connection's, not the template's: with a receive buffer of
/// four segments, the fifth and sixth frames of a run do not fit and are not taken
/// (RFC 9293 §3.10.7.4: a segment beyond the window is not acceptable).
#[test]
fn a_run_stops_at_the_receive_window() {
    let make = |on| {
        let t = Script::new(TcpConfig { recv_buffer: 4 * MSS as usize, ..TcpConfig::default() });
        accepted(t, on, seg("S").win(65535).mss(1460))
    };
    let k = as_without_aggregation(make, |t| frames_of(t, &data(0, 6)));
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_run_frames), (1, 4, 3), "{k:?}");
}

/// Timestamps along a run: a TSval older than the aggregate's newest is not taken and ends
/// the aggregate (a flush counted as other); the ordinary path then decides it against
/// TS.Recent (RFC 7323 §5.3), which here still holds the SYN's value (segments whose
/// checksum waits for the copy update it once verified, §4.3), so it is accepted and
/// begins the next aggregate, as without aggregation.
#[test]
fn a_run_checks_paws() {
    let k = as_without_aggregation(
        |on| established(on, seg("S").win(65535).mss(1460).ts(100, 0)),
        |t| {
            let ecr = t.log[0].ts.unwrap().0;
            let mss = MSS - 12;
            let tsval = [200, 201, 202, 150, 203, 204];
            (0..6u32)
                .map(|i| {
                    let s = seg(".").seq(P + i * mss).ack(1).len(mss as usize).ts(tsval[i as usize], ecr);
                    t.frame(&s, &payload(P + i * mss, mss as usize))
                })
                .collect()
        },
    );
    assert_eq!(
        (k.lro_aggregates, k.lro_segments, k.lro_flush_other, k.drops_paws, k.lro_run_frames),
        (2, 6, 1, 0, 4),
        "{k:?}"
    );
}

/// A run of pure ACKs checks each ACK's TCP checksum (software checksum): a bad one is
/// dropped and counted, and congestion control hears the others, as without aggregation.
#[test]
fn a_run_of_acks_drops_a_bad_tcp_checksum() {
    let k = as_without_aggregation(
        |on| sender(on, 40),
        |t| {
            let mut f: Vec<Vec<u8>> =
                [ack(1), ack(2), ack(3), ack(4), ack(5)].iter().map(|s| t.frame(s, &[])).collect();
            f[2][14 + 20 + 16] ^= 0x10;
            f
        },
    );
    assert_eq!((k.drops_bad_checksum, k.lro_acks, k.lro_run_frames), (1, 3, 3), "{k:?}");
}

/// An ACK beyond what was sent is not taken by a run (RFC 9293 §3.10.7.4: it acknowledges
/// something not yet sent).
#[test]
fn a_run_of_acks_stops_at_an_ack_of_unsent_data() {
    let k = as_without_aggregation(
        |on| sender(on, 10),
        |t| [ack(1), ack(2), ack(3), ack(30), ack(4)].iter().map(|s| t.frame(s, &[])).collect(),
    );
    assert_eq!((k.lro_acks, k.lro_run_frames), (2, 2), "{k:?}");
}

/// A gap inside a run (segment 3 lost): the run stops at segment 4, which is not the next
/// sequence number; the ordinary path flushes (counted as an order flush), queues it out of
/// order and sends a duplicate ACK (RFC 5681 §4.2), as without aggregation.
#[test]
fn a_run_stops_at_a_gap() {
    let k = as_without_aggregation(plain_with, |t| {
        let mut segs = data(0, 7);
        segs.remove(3);
        frames_of(t, &segs)
    });
    assert_eq!((k.lro_segments, k.lro_run_frames, k.lro_flush_order), (3, 2, 1), "{k:?}");
}

/// A window change inside a run: the window is in the template, so the frame takes the
/// ordinary path, which flushes (counted as a window flush) and updates the send window.
#[test]
fn a_run_stops_at_a_window_change() {
    let k = as_without_aggregation(plain_with, |t| {
        let mut segs = data(0, 6);
        for s in &mut segs[4..] {
            *s = s.clone().win(30000);
        }
        frames_of(t, &segs)
    });
    assert_eq!((k.lro_flush_window, k.lro_run_frames), (1, 3), "{k:?}");
}

/// A run of pure ACKs goes on past a full aggregate: twenty ACKs of 100 bytes each are
/// aggregates of sixteen and four, and congestion control hears all twenty (RFC 3465).
#[test]
fn a_run_of_acks_goes_on_past_a_full_aggregate() {
    let k = as_without_aggregation(
        |on| sender(on, 10),
        |t| (1..=20).map(|i| t.frame(&seg(".").seq(P).ack(1 + 100 * i).win(65535), &[])).collect(),
    );
    assert_eq!((k.lro_aggregates, k.lro_acks, k.lro_flush_full, k.lro_run_frames), (2, 18, 1, 19), "{k:?}");
}

/// Over a link without a link header (a TUN), the template starts at the IPv4 header: a
/// run takes the frames after the first.
#[test]
fn a_run_over_a_tun() {
    let make = |on| {
        let t = Script::with_config(common::script::stack_config(), Capabilities::ip(1500));
        accepted(t, on, seg("S").win(65535).mss(1460))
    };
    let k = as_without_aggregation(make, |t| frames_of(t, &data(0, 6)));
    assert_eq!((k.lro_aggregates, k.lro_segments, k.lro_run_frames), (1, 6, 5), "{k:?}");
}
