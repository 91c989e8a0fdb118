//! Proof that receive aggregation allocates nothing per packet: a bulk transfer where the
//! receiver's data arrives in large batches (data aggregates) and the sender finds many ACKs
//! of a receiver that ACKs every second segment waiting in each batch (merged ACKs), measured
//! with the counting allocator after a warm-up. The flow table and its frame vectors are
//! allocated when the stack is made.

mod common;

use ackclock::phy::{pipe, Capabilities, PipeConfig, PipeEnd};
use ackclock::time::{Duration, Instant};
use ackclock::{Stack, TcpHandle};
use common::alloc::{allocations, print_traces, trace_from_env, Counting};
use common::{config, A, B};
use std::net::SocketAddrV4;

#[global_allocator]
static GLOBAL: Counting = Counting;

struct Rig {
    a: Stack,
    b: Stack,
    da: PipeEnd,
    db: PipeEnd,
    c: TcpHandle,
    s: Option<TcpHandle>,
    now: Instant,
    src: Vec<u8>,
    dst: Vec<u8>,
    sent: usize,
    got: usize,
}

impl Rig {
    /// `b` takes `batch` frames per call, so it ACKs about every `batch`th segment; it runs
    /// 16 rounds for each of `a`'s.
    fn new(batch: usize) -> Rig {
        let now = Instant::from_secs(1);
        let caps = Capabilities::ethernet(1500);
        let mut cb = config(B, 2);
        cb.batch = batch;
        let mut a = Stack::new(config(A, 1), caps, now).unwrap();
        let mut b = Stack::new(cb, caps, now).unwrap();
        let on = ackclock::tcp::Aggregation::ON;
        a.set_aggregation(on);
        b.set_aggregation(on);
        let (da, db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
        let l = b.tcp_listen(SocketAddrV4::new(B, 80), 4).unwrap();
        let c = a.tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
        let mut r = Rig {
            a,
            b,
            da,
            db,
            c,
            s: None,
            now,
            src: (0..65536u32).map(|i| ((i * 7) >> 3) as u8).collect(),
            dst: vec![0; 65536],
            sent: 0,
            got: 0,
        };
        for _ in 0..100 {
            r.round();
            if let Ok(s) = r.b.tcp_accept(l) {
                r.s = Some(s);
                return r;
            }
        }
        panic!("no connection");
    }

    fn round(&mut self) {
        self.a.receive(self.now, &mut self.da);
        if self.s.is_some() {
            while let Ok(n) = self.a.tcp_send(self.c, &self.src[self.sent % 65536..]) {
                if n == 0 {
                    break;
                }
                self.sent += n;
            }
        }
        self.a.transmit(self.now, &mut self.da);
        for _ in 0..16 {
            self.now += Duration::from_micros(1);
            self.b.receive(self.now, &mut self.db);
            if let Some(s) = self.s {
                while let Ok(n) = self.b.tcp_recv(s, &mut self.dst) {
                    if n == 0 {
                        break;
                    }
                    let want = (self.got..self.got + n).map(|i| self.src[i % 65536]);
                    assert!(self.dst[..n].iter().copied().eq(want), "bytes in order");
                    self.got += n;
                }
            }
            self.b.transmit(self.now, &mut self.db);
        }
        self.now += Duration::from_micros(1);
    }

    fn until(&mut self, bytes: usize) {
        let end = self.got + bytes;
        let deadline = self.now + Duration::from_secs(600);
        while self.got < end {
            assert!(self.now < deadline, "the transfer stalled at {} bytes", self.got);
            self.round();
        }
    }
}

fn measure(batch: usize) {
    let mut r = Rig::new(batch);
    r.until(8 << 20);
    let (ca, cb) = (*r.a.counters(), *r.b.counters());
    trace_from_env();
    let before = allocations();
    r.until(32 << 20);
    let after = allocations();
    print_traces();
    let (ca2, cb2) = (r.a.counters(), r.b.counters());
    assert!(ca2.lro_acks - ca.lro_acks > 1000, "the sender merged ACKs in the measured stretch");
    assert!(cb2.lro_segments - cb.lro_segments > 1000 || batch < 4, "the receiver aggregated data");
    assert_eq!(after - before, 0, "{} allocations in 32 MB with aggregation", after - before);
}

#[test]
fn aggregation_allocates_nothing_per_packet_acks_every_second_segment() {
    measure(2);
}

#[test]
fn aggregation_allocates_nothing_per_packet_acks_every_eighth_segment() {
    measure(8);
}
