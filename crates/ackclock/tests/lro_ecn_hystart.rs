//! Receive aggregation (`tcp::lro`) and the flags and RTT samples of what it merges: a
//! segment with CWR or ECE is never merged (Linux's `tcp_gro_receive` flushes on CWR and on
//! any flag that differs), and congestion control hears the RTT sample of every merged ACK,
//! as it would from the separate ACKs (HyStart++ counts them, RFC 9406 §4.2).

mod common;

use ackclock::phy::Batch;
use ackclock::tcp::cc::Algorithm;
use ackclock::tcp::{Aggregation, Counters, TcpConfig, TcpInfo};
use ackclock::wire::TcpFlags;
use ackclock::TcpHandle;
use common::script::*;
use common::stream;
use std::net::SocketAddrV4;

/// The peer's first data byte.
const P: u32 = PEER_ISS + 1;
/// A full-sized segment without options (MSS 1460).
const MSS: u32 = 1460;
/// A full-sized segment with the timestamp option.
const TS_MSS: u32 = MSS - 12;

fn accepted(mut t: Script, on: Aggregation, syn: Seg) -> (Script, TcpHandle) {
    t.stack.set_aggregation(on);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, syn);
    (t, c)
}

fn plain_with(on: Aggregation) -> (Script, TcpHandle) {
    accepted(Script::new(TcpConfig::default()), on, seg("S").win(65535).mss(1460))
}

fn payload(seq: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize + i) as u8).collect()
}

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

fn data(from: u32, n: u32) -> Vec<Seg> {
    (0..n).map(|i| seg(".").seq(P + from + i * MSS).ack(1).len(MSS as usize)).collect()
}

fn c(t: &Script) -> Counters {
    *t.stack.counters()
}

fn info(t: &Script, conn: TcpHandle) -> TcpInfo {
    t.stack.tcp_info(conn).unwrap()
}

// ---------------------------------------------------------------------------------------
// Flags: CWR and ECE must end an aggregate (Linux `tcp_gro_receive` flushes on CWR and on
// any flag that differs; the module documentation: "no flags but ACK and PSH").
// ---------------------------------------------------------------------------------------

/// A data segment carrying CWR in the middle of in-order data must flush the aggregate
/// (counted as a flags flush) and not be merged into it. (Before the fix, header
/// prediction's mask, which is also the merge test, left CWR and ECE out.)
#[test]
fn cwr_on_data_ends_the_aggregate() {
    let (mut t, _conn) = plain_with(Aggregation::ON);
    let mut segs = data(0, 6);
    segs[3].flags |= TcpFlags::CWR;
    let f = frames_of(&t, &segs);
    batch_raw(&mut t, 10, &f);
    let k = c(&t);
    // Segments 0-2 are one aggregate, the CWR segment runs alone, 4-5 are the next.
    let got = (k.lro_flush_flags, k.lro_aggregates, k.lro_segments);
    assert_eq!(got, (1, 2, 5), "CWR must flush the aggregate and not merge: {k:?}");
}

/// A pure ACK carrying ECE (the ECN congestion echo, RFC 3168 §6.1.3) must not be merged
/// into an aggregate of ACKs: the flags differ.
#[test]
fn ece_on_a_pure_ack_ends_the_ack_merge() {
    let (mut t, _conn) = sender(Aggregation::ON, TcpConfig::default(), 40, false);
    let mut acks: Vec<Seg> = (1..=4).map(|n| seg(".").seq(P).ack(1 + n * MSS).win(65535)).collect();
    acks[2].flags |= TcpFlags::ECE;
    let f: Vec<Vec<u8>> = acks.iter().map(|s| t.frame(s, &[])).collect();
    batch_raw(&mut t, 10, &f);
    let k = c(&t);
    assert_eq!(k.lro_flush_flags, 1, "ECE must end the ACK merge: {k:?}");
}

// ---------------------------------------------------------------------------------------
// Merged pure ACKs: congestion control must hear what it would have heard from the separate
// ACKs. (The RTT estimator hears the newest sample only, by design: see `tcp::lro`.)
// ---------------------------------------------------------------------------------------

/// A connection that has sent `segs` full-sized segments at time 0 (the first flight of
/// ten goes out); with `ts` the peer's SYN offers timestamps.
fn sender(on: Aggregation, cfg: TcpConfig, segs: u32, ts: bool) -> (Script, TcpHandle) {
    let syn = if ts { seg("S").win(65535).mss(1460).ts(100, 0) } else { seg("S").win(65535).mss(1460) };
    let (mut t, conn) = accepted(Script::new(cfg), on, syn);
    let mss = if ts { TS_MSS } else { MSS };
    let data = stream((segs * mss) as usize, 3);
    assert_eq!(t.stack.tcp_send(conn, &data).unwrap(), data.len());
    let sent = t.sent_now();
    assert_eq!(sent.len(), 10, "the initial window");
    (t, conn)
}

/// The TSval of the stack's last data segment (what a peer's ACK of it echoes).
fn last_tsval(t: &Script) -> u32 {
    t.log.iter().rev().find(|s| s.len > 0).and_then(|s| s.ts).unwrap().0
}

/// CUBIC with HyStart++ (RFC 9406 §4.2) counts one RTT sample per ACK: after a first round
/// whose minimum RTT is 100 ms, eight ACKs of the next round at 200 ms take slow start to
/// conservative slow start. The separate ACKs do it, and so must the same ACKs merged into
/// one (before the fix, congestion control heard the newest one's sample only and stayed in
/// slow start: cwnd and the segments sent differed from the batch processed frame by frame).
#[test]
fn hystart_hears_the_rtt_of_every_merged_ack() {
    let mut seen = vec![];
    for on in [Aggregation::ON, Aggregation::OFF] {
        let cfg = TcpConfig { congestion: Algorithm::Cubic { hystart: true }, ..TcpConfig::default() };
        let (mut t, conn) = sender(on, cfg, 100, true);
        let ecr = last_tsval(&t);
        let ack = |n: u32, v: u32| seg(".").seq(P).ack(1 + n * TS_MSS).win(65535).ts(v, ecr);
        // Round 1: one ACK, RTT 100 ms.
        let f = vec![t.frame(&ack(1, 200), &[])];
        batch_raw(&mut t, 100, &f);
        let _ = t.sent_now();
        // Round 2: nine ACKs of the first flight, each RTT 200 ms, in one batch.
        let f: Vec<Vec<u8>> = (2..=10).map(|n| t.frame(&ack(n, 300 + n), &[])).collect();
        batch_raw(&mut t, 200, &f);
        let sent = t.sent_now().len();
        let i = info(&t, conn);
        seen.push((i.cwnd, i.ssthresh, sent));
    }
    assert_eq!(seen[0], seen[1], "aggregation on (left) and off (right): (cwnd, ssthresh, segments sent)");
}
