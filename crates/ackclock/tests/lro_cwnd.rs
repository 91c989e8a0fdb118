//! The sender under aggregated ACKs: for the same ACK stream, the congestion window's
//! trajectory and every segment sent are the same with ACK aggregation on and off, through
//! slow start, a loss repaired by fast retransmit and fast recovery (Jacobson 1990), and
//! congestion avoidance. RFC 3465's byte counting (L = 2 SMSS per ACK) is applied per
//! original ACK, not per aggregate.

mod common;

use ackclock::phy::Batch;
use ackclock::tcp::{Aggregation, TcpConfig};
use ackclock::TcpHandle;
use common::script::*;
use common::stream;
use std::collections::BTreeMap;
use std::net::SocketAddrV4;

const P: u32 = PEER_ISS + 1;

/// The peer: a receiver that ACKs every second segment, at once on a segment out of order
/// (a duplicate ACK) or one that fills a hole (RFC 5681 §4.2), and the odd one at the end of
/// each round; it loses the segments the test names.
struct Peer {
    rcv_nxt: u32,
    ooo: BTreeMap<u32, u32>,
    unacked: u32,
}

impl Peer {
    fn acks(&mut self, sent: &[Sent], lose: &mut dyn FnMut(&Sent) -> bool) -> Vec<Seg> {
        let mut out = vec![];
        let ack = |n: u32| seg(".").seq(P).ack(n).win(65535);
        for s in sent.iter().filter(|s| s.len > 0) {
            if lose(s) {
                continue;
            }
            let (seq, end) = (s.seq, s.seq + s.len as u32);
            if seq == self.rcv_nxt {
                self.rcv_nxt = end;
                let filled = !self.ooo.is_empty();
                while let Some((&a, &b)) = self.ooo.first_key_value() {
                    if a > self.rcv_nxt {
                        break;
                    }
                    self.rcv_nxt = self.rcv_nxt.max(b);
                    self.ooo.pop_first();
                }
                self.unacked += 1;
                if filled || self.unacked >= 2 {
                    out.push(ack(self.rcv_nxt));
                    self.unacked = 0;
                }
            } else {
                if seq > self.rcv_nxt {
                    self.ooo.insert(seq, end);
                }
                out.push(ack(self.rcv_nxt));
            }
        }
        if self.unacked > 0 {
            out.push(ack(self.rcv_nxt));
            self.unacked = 0;
        }
        out
    }
}

/// Rounds of 10 ms: the stack sends what it may, the peer's ACKs for it come back as one
/// batch. Returns per round (cwnd, ssthresh, the segments sent as (seq, len)).
/// Per round: cwnd, ssthresh, and the segments sent as (seq, len).
type Trajectory = Vec<(u32, u32, Vec<(u32, usize)>)>;

fn run(on: Aggregation, rounds: usize, lose_seq: &[u32]) -> (Trajectory, u64, u64) {
    let mut t = Script::new(TcpConfig::default());
    t.stack.set_aggregation(on);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c: TcpHandle = t.accept_with(l, seg("S").win(65535).mss(1460));
    let data = stream(8 << 20, 1);
    let mut off = 0;
    let mut peer = Peer { rcv_nxt: 1, ooo: BTreeMap::new(), unacked: 0 };
    let mut lost = vec![];
    let mut out = vec![];
    for r in 0..rounds {
        let ms = 10 + 10 * r as u64;
        t.at_us(ms * 1000);
        while let Ok(n) = t.stack.tcp_send(c, &data[off..]) {
            if n == 0 {
                break;
            }
            off += n;
        }
        let sent = t.sent_now();
        let acks = peer.acks(&sent, &mut |s| {
            let lose = lose_seq.contains(&s.seq) && !lost.contains(&s.seq);
            if lose {
                lost.push(s.seq);
            }
            lose
        });
        let frames: Vec<Vec<u8>> = acks.iter().map(|a| t.frame(a, &[])).collect();
        let mut b = Batch::with_capacity(frames.len().max(1));
        for f in &frames {
            let mut buf = t.stack.pool().alloc().unwrap();
            buf.append(f.len()).unwrap().copy_from_slice(f);
            b.push(buf).unwrap();
        }
        t.at_us(ms * 1000 + 5000);
        let now = t.now;
        t.stack.process_batch(now, &mut b);
        let info = t.stack.tcp_info(c).unwrap();
        out.push((info.cwnd, info.ssthresh, sent.iter().map(|s| (s.seq, s.len)).collect()));
    }
    let info = t.stack.tcp_info(c).unwrap();
    (out, info.stats.fast_retransmits, t.stack.counters().lro_acks)
}

/// RFC 3465 per original ACK: identical windows and segments, with and without ACK
/// aggregation, for an ACK stream with a loss in it; with aggregation on, ACKs were merged,
/// the loss was repaired by fast retransmit on the third duplicate ACK, and slow start,
/// recovery and congestion avoidance all happened.
#[test]
fn cwnd_trajectory_is_identical_with_and_without_ack_aggregation() {
    // Lose the 40th segment of the transfer (in the fourth round's flight).
    let lose = [1 + 39 * 1460];
    let (off, fr_off, merged_off) = run(Aggregation::OFF, 60, &lose);
    let (on, fr_on, merged_on) = run(Aggregation::ON, 60, &lose);
    assert_eq!(merged_off, 0);
    assert!(merged_on > 100, "ACKs were merged: {merged_on}");
    assert_eq!((fr_off, fr_on), (1, 1), "one fast retransmit each");
    for (r, (a, b)) in off.iter().zip(&on).enumerate() {
        assert_eq!(a, b, "round {r}: (cwnd, ssthresh, segments) differ with aggregation on");
    }
    let cwnds: Vec<u32> = on.iter().map(|x| x.0).collect();
    let ssthresh = on.last().unwrap().1;
    assert!(ssthresh < u32::MAX, "a loss set ssthresh");
    assert!(cwnds.iter().any(|&w| w > ssthresh + 1460), "congestion avoidance grew past ssthresh: {cwnds:?}");
    println!("cwnd per round (segments): {:?}", cwnds.iter().map(|w| w / 1460).collect::<Vec<_>>());
}
