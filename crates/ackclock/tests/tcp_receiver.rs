//! The receiving side: the out-of-order queue, the FIN above a hole, SACK and D-SACK
//! generation, one duplicate ACK per out-of-order segment. Packet-level, on virtual time; the
//! test plays the peer (see `common/script.rs`). Each test's comment says what the code did
//! before its fix.

mod common;

use ackclock::phy::Batch;
use ackclock::tcp::State;
use ackclock::{Error, TcpHandle};
use common::script::*;
use common::stream;
use std::net::SocketAddrV4;

/// The peer's first data byte.
const P: u32 = PEER_ISS + 1;

fn established() -> (Script, TcpHandle) {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460).sack_ok().ts(1000, 0));
    (t, c)
}

fn recv_all(t: &mut Script, c: TcpHandle) -> Vec<u8> {
    let mut out = vec![];
    let mut buf = vec![0u8; 4096];
    loop {
        match t.stack.tcp_recv(c, &mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(Error::WouldBlock) => return out,
            Err(e) => panic!("tcp_recv: {e}"),
        }
    }
}

/// A peer segment `[P + a, P + b)` with flags `f`, carrying `data`'s bytes.
fn data_seg(t: &mut Script, ms: u64, f: &str, a: u32, b: u32, data: &[u8]) {
    let s = seg(f).seq(P + a).ack(1).win(65535).ts(2000 + ms as u32, 1).len((b - a) as usize);
    t.inject_payload(ms, s, &data[a as usize..b as usize]);
}

/// Our ACK of everything below `ack`, with these SACK blocks (peer-absolute).
fn ack(ack: u32, sack: &[(u32, u32)]) -> Seg {
    seg(".").seq(1).ack(ack).win(65535).ts(ANY, ANY).sack(sack)
}

/// RFC 5681 §4.2: "A TCP receiver SHOULD send an immediate duplicate ACK when an out-of-
/// order segment arrives." A FIN-only segment above a hole occupies sequence space and is
/// out of order like any other; Linux (`tcp_data_queue` -> `tcp_data_queue_ofo`, and
/// `__tcp_ack_snd_check` with a non-empty ofo queue) answers it at once. `text_and_fin`
/// owes an ACK only when `seg.len > 0` (payload), so a bare FIN above a hole draws nothing.
/// Once the hole fills, the FIN is taken and acknowledged (RFC 9293 §3.10.7.4 eighth step).
#[test]
fn rfc5681_4_2_fin_only_segment_above_a_hole_is_acked_at_once() {
    let (mut t, c) = established();
    let data = stream(3000, 3);
    // [P, P+1000) lost; [P+1000, P+2000) arrives: duplicate ACK with its SACK block.
    data_seg(&mut t, 10, ".", 1000, 2000, &data);
    t.expect(10, ack(P, &[(P + 1000, P + 2000)]));
    // The bare FIN at P+2000, also above the hole: an immediate duplicate ACK.
    t.inject(20, seg("F.").seq(P + 2000).ack(1).win(65535).ts(2020, 1));
    t.expect(20, ack(P, &[(P + 1000, P + 2000)]));
    // The hole fills: everything and the FIN are acknowledged at once.
    data_seg(&mut t, 30, ".", 0, 1000, &data);
    t.expect(30, ack(P + 2001, &[]));
    assert_eq!(t.stack.tcp_info(c).unwrap().state, State::CloseWait);
    assert_eq!(recv_all(&mut t, c), data[..2000]);
}

/// RFC 9293 §3.10.7.4: "If a segment's contents straddle the boundary between old and new,
/// only the new parts are processed." A retransmission that brings held out-of-order data
/// again plus the FIN after it (Linux `tcp_retrans_try_collapse` folds a separate FIN into
/// the data segment before it on retransmission) has one new part: the FIN. The queue
/// reports the data as a duplicate (`Insert::Duplicate`) and `text_and_fin` then clears
/// `fin`, so the FIN is forgotten: when the hole fills, the ACK stops at P+2000 and the
/// connection stays ESTABLISHED until the peer retransmits the FIN after an RTO.
#[test]
fn rfc9293_3_10_7_4_fin_on_a_duplicate_out_of_order_segment_is_kept() {
    let (mut t, c) = established();
    let data = stream(3000, 4);
    data_seg(&mut t, 10, ".", 1000, 2000, &data);
    t.expect(10, ack(P, &[(P + 1000, P + 2000)]));
    // The same bytes again, now with FIN: D-SACK of the duplicate, then its block.
    data_seg(&mut t, 20, "F.", 1000, 2000, &data);
    t.expect(20, ack(P, &[(P + 1000, P + 2000), (P + 1000, P + 2000)]));
    // The hole fills: the data and the FIN are acknowledged.
    data_seg(&mut t, 30, ".", 0, 1000, &data);
    t.expect(30, ack(P + 2001, &[]));
    assert_eq!(t.stack.tcp_info(c).unwrap().state, State::CloseWait);
    assert_eq!(recv_all(&mut t, c), data[..2000]);
}

/// RFC 2883 §4: "(1) A D-SACK block is only used to report a duplicate contiguous sequence
/// of data received by the receiver in the most recent packet." and §4 (first paragraph):
/// when duplicate data is received, the first SACK block reports it. A retransmission
/// [P, P+1000) fills the hole [P, P+500) and brings [P+500, P+1000) again, which was held
/// out of order (and SACKed). Those 500 bytes are a duplicate received in the most recent
/// packet: the ACK reports them as a D-SACK block (Linux `tcp_ofo_queue` does this with
/// `tcp_dsack_extend`). `receive_in_order`/`drain_ooo` drop the held copy silently
/// (counted as `stale_bytes`), so the sender cannot learn that its retransmission of
/// [P+500, P+1000) was spurious.
#[test]
fn rfc2883_4_in_order_segment_overlapping_held_data_is_dsacked() {
    let (mut t, c) = established();
    let data = stream(3000, 5);
    data_seg(&mut t, 10, ".", 500, 1000, &data);
    t.expect(10, ack(P, &[(P + 500, P + 1000)]));
    data_seg(&mut t, 20, ".", 0, 1000, &data);
    t.expect(20, ack(P + 1000, &[(P + 500, P + 1000)]));
    assert_eq!(recv_all(&mut t, c), data[..1000]);
}

/// Hand the stack one batch of frames at `ms`, as a device does (`Stack::process_batch`).
fn batch(t: &mut Script, ms: u64, segs: &[(Seg, &[u8])]) {
    t.at(ms);
    let mut b = Batch::with_capacity(segs.len());
    for (s, payload) in segs {
        let f = t.frame(s, payload);
        let mut buf = t.stack.pool().alloc().expect("pool");
        buf.append(f.len()).unwrap().copy_from_slice(&f);
        b.push(buf).unwrap();
    }
    let now = t.now;
    t.stack.process_batch(now, &mut b);
}

/// RFC 5681 §4.2: "A TCP receiver SHOULD send an immediate duplicate ACK when an out-of-
/// order segment arrives." (§3.2: the sender fast-retransmits on the third duplicate ACK.)
/// A non-SACK peer loses [P, P+1000); the next three segments, each out of order and not
/// contiguous with each other (so no aggregation can merge them), arrive in one device
/// batch. Each owes its own duplicate ACK (Linux sends one per segment from
/// `__tcp_ack_snd_check`). (Before the fix, output ran once per batch and sent one: a sender
/// without SACK saw one duplicate ACK instead of three and waited for its RTO.)
#[test]
fn rfc5681_4_2_each_out_of_order_segment_of_a_batch_draws_a_duplicate_ack() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let _c = t.accept_with(l, seg("S").win(65535).mss(1460));
    let data = stream(8000, 7);
    let s = |a: u32| seg(".").seq(P + a).ack(1).win(65535).len(1000);
    batch(&mut t, 10, &[(s(1000), &data[1000..2000]), (s(3000), &data[3000..4000]), (s(5000), &data[5000..6000])]);
    let sent = t.sent_now();
    assert!(sent.iter().all(|x| x.ack == P && x.len == 0), "{sent:?}");
    assert_eq!(sent.len(), 3, "one duplicate ACK per out-of-order segment: {sent:?}");
}

/// RFC 2883 §4 rule (1): "A D-SACK block is only used to report a duplicate contiguous
/// sequence of data received by the receiver in the most recent packet." RFC 2018 §4: the
/// first SACK block MUST be the block holding the segment that triggered the ACK. With
/// [P+1000, P+2000) held, one batch brings it again (a duplicate) and then new data
/// [P+3000, P+4000). Per segment: first a D-SACK ACK for the duplicate, then an ACK whose
/// first block is [P+3000, P+4000) and which carries no D-SACK. (Before the fix: one ACK,
/// whose first block was the D-SACK of the earlier packet, and no ACK named
/// [P+3000, P+4000) first.)
#[test]
fn rfc2883_4_dsack_reports_only_the_most_recent_packet_in_a_batch() {
    let (mut t, _c) = established();
    let data = stream(5000, 6);
    data_seg(&mut t, 10, ".", 1000, 2000, &data);
    t.expect(10, ack(P, &[(P + 1000, P + 2000)]));
    let s = |a: u32| seg(".").seq(P + a).ack(1).win(65535).ts(2020, 1).len(1000);
    batch(&mut t, 20, &[(s(1000), &data[1000..2000]), (s(3000), &data[3000..4000])]);
    t.expect(20, ack(P, &[(P + 1000, P + 2000), (P + 1000, P + 2000)]));
    t.expect(20, ack(P, &[(P + 3000, P + 4000), (P + 1000, P + 2000)]));
    t.expect_nothing(20);
}
