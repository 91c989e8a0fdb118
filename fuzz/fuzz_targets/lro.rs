//! Receive aggregation against processing one by one: a client `A` and two identical servers,
//! one aggregating (`Aggregation::ON`) and one not (`Aggregation::OFF`), hold the same
//! established connection; data flows both ways. The input is a program: the applications
//! send and read, `A`'s frames are dropped, duplicated, swapped or corrupted on the link, and
//! delivered in batches of arbitrary length to both servers, identical copies, through
//! `Stack::process_batch`. The aggregating server's frames go back to `A`.
//!
//! Checked after every step: both servers read the same bytes, send the same frames (byte
//! for byte), and agree on the connection's state, windows and congestion window. The RTT
//! estimate is left out (an aggregate of ACKs samples the RTT once, from the newest
//! timestamp), and time moves at most 100 ms in all, short of any retransmission timeout, so
//! that the estimate never decides anything either way.
#![no_main]

use ackclock::buf::{PBuf, PoolConfig};
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Batch, Capabilities};
use ackclock::tcp::{Aggregation, TcpConfig, TcpInfo};
use ackclock::time::{Duration, Instant};
use ackclock::wire::Ipv4Addr;
use ackclock::{Stack, StackConfig, TcpHandle};
use libfuzzer_sys::fuzz_target;

#[path = "../common/frames.rs"]
mod frames;
use std::net::SocketAddrV4;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const S: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
}

fn config(addr: Ipv4Addr, seed: u64) -> StackConfig {
    let mut c = StackConfig::new(InterfaceConfig::new(addr, 24));
    c.seed = seed;
    c.pool = PoolConfig { buffers: 512, ..Default::default() };
    c.tcp = TcpConfig { send_buffer: 64 * 1024, recv_buffer: 64 * 1024, ..TcpConfig::default() };
    c
}

struct World {
    a: Stack,
    s: [Stack; 2],
    c: TcpHandle,
    h: [TcpHandle; 2],
    now: Instant,
    /// A's frames on their way to the servers, as bytes.
    link: Vec<Vec<u8>>,
    spent: Duration,
    /// The fuzzed program runs (not the handshake before it): frames count as the program's.
    program: bool,
}

fn byte(i: u64) -> u8 {
    (i.wrapping_mul(2654435761) >> 13) as u8
}

impl World {
    fn new() -> Option<World> {
        let now = Instant::from_secs(1000);
        let caps = Capabilities::ethernet(1500);
        let mut a = Stack::new(config(A, 1), caps, now).ok()?;
        let mut s = [Stack::new(config(S, 2), caps, now).ok()?, Stack::new(config(S, 2), caps, now).ok()?];
        s[0].set_aggregation(Aggregation::ON);
        s[1].set_aggregation(Aggregation::OFF);
        let (ma, ms) = (a.iface().mac(), s[0].iface().mac());
        a.iface_mut().insert_static_neighbor(S, ms);
        let mut l = vec![];
        for x in s.iter_mut() {
            x.iface_mut().insert_static_neighbor(A, ma);
            l.push(x.tcp_listen(SocketAddrV4::new(S, 80), 4).ok()?);
        }
        let c = a.tcp_connect(SocketAddrV4::new(S, 80)).ok()?;
        let mut w = World { a, s, c, h: [c, c], now, link: vec![], spent: Duration::ZERO, program: false };
        for _ in 0..10 {
            w.a_out();
            w.deliver(usize::MAX);
            let h0 = w.s[0].tcp_accept(l[0]);
            let h1 = w.s[1].tcp_accept(l[1]);
            if let (Ok(h0), Ok(h1)) = (h0, h1) {
                w.h = [h0, h1];
                w.deliver(usize::MAX);
                return Some(w);
            }
            w.now += Duration::from_micros(10);
        }
        None
    }

    /// A's output onto the link.
    fn a_out(&mut self) {
        self.a.dispatch(self.now);
        while let Some(f) = self.a.tx_ring().pop() {
            if self.link.len() < 256 {
                self.link.push(f.data().to_vec());
            }
        }
    }

    fn frame(stack: &Stack, bytes: &[u8]) -> Option<PBuf> {
        let mut b = stack.pool().alloc().ok()?;
        b.append(bytes.len()).ok()?.copy_from_slice(bytes);
        Some(b)
    }

    /// The first `n` frames of the link to both servers as one batch; their output is
    /// compared and the aggregating server's goes to A.
    fn deliver(&mut self, n: usize) {
        let n = n.min(self.link.len());
        let frames: Vec<Vec<u8>> = self.link.drain(..n).collect();
        for k in 0..2 {
            let h = self.h[k];
            self.count(&self.s[k], h, frames.len());
            let s = &mut self.s[k];
            let mut b = Batch::with_capacity(frames.len().max(1));
            for f in &frames {
                if let Some(p) = World::frame(s, f) {
                    let _ = b.push(p);
                }
            }
            s.process_batch(self.now, &mut b);
            s.dispatch(self.now);
        }
        let out: Vec<Vec<Vec<u8>>> = self
            .s
            .iter_mut()
            .map(|s| {
                let mut v = vec![];
                while let Some(f) = s.tx_ring().pop() {
                    v.push(f.data().to_vec());
                }
                v
            })
            .collect();
        assert_eq!(out[0], out[1], "the servers sent different frames");
        self.count(&self.a, self.c, out[0].len());
        for f in &out[0] {
            if let Some(p) = World::frame(&self.a, f) {
                self.a.process(self.now, p);
            }
        }
        self.check();
    }

    /// `n` frames about to reach `stack`, whose connection under test is `h`.
    fn count(&self, stack: &Stack, h: TcpHandle, n: usize) {
        if !self.program {
            return frames::outside(n as u64);
        }
        let live = stack.tcp_info(h).is_ok_and(|i| i.state == ackclock::tcp::State::Established);
        frames::program(n as u64, if live { n as u64 } else { 0 });
    }

    fn check(&self) {
        let i: Vec<Option<TcpInfo>> = (0..2).map(|k| self.s[k].tcp_info(self.h[k]).ok()).collect();
        let key = |t: &Option<TcpInfo>| {
            t.map(|t| (t.state, t.cwnd, t.ssthresh, t.snd_wnd, t.rcv_wnd, t.flight, t.stats.bytes_received))
        };
        assert_eq!(key(&i[0]), key(&i[1]), "the servers' connections differ");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(mut w) = World::new() else { return };
    let mut input = Input(data);
    let mut sent_a = 0u64;
    let mut sent_s = 0u64;
    let mut buf = vec![0u8; 8192];
    w.program = true;
    while !input.0.is_empty() {
        match input.u8() % 8 {
            0 => {
                let n = (input.u16() % 8192) as usize;
                let chunk: Vec<u8> = (0..n as u64).map(|i| byte(sent_a + i)).collect();
                if let Ok(k) = w.a.tcp_send(w.c, &chunk) {
                    sent_a += k as u64;
                }
                w.a_out();
            }
            1 => {
                let n = (input.u16() % 8192) as usize;
                let chunk: Vec<u8> = (0..n as u64).map(|i| byte(sent_s + i)).collect();
                let k0 = w.s[0].tcp_send(w.h[0], &chunk);
                let k1 = w.s[1].tcp_send(w.h[1], &chunk);
                assert_eq!(k0.is_ok(), k1.is_ok());
                if let (Ok(k0), Ok(k1)) = (k0, k1) {
                    assert_eq!(k0, k1);
                    sent_s += k0 as u64;
                }
            }
            2 => w.a_out(),
            3 => {
                let n = input.u8() as usize % 70;
                w.deliver(n);
            }
            4 => {
                let n = (input.u16() as usize % 8192).max(1);
                let r0 = w.s[0].tcp_recv(w.h[0], &mut buf[..n]).map(|k| buf[..k].to_vec());
                let r1 = w.s[1].tcp_recv(w.h[1], &mut buf[..n]).map(|k| buf[..k].to_vec());
                assert_eq!(r0, r1, "the servers read different bytes");
                if let Ok(b) = &r0 {
                    frames::bytes(b.len() as u64);
                }
                let mut sink = [0u8; 8192];
                let _ = w.a.tcp_recv(w.c, &mut sink);
            }
            5 if !w.link.is_empty() => {
                // Drop, duplicate or swap frames on the link.
                let i = input.u8() as usize % w.link.len();
                let j = input.u8() as usize % w.link.len();
                match input.u8() % 3 {
                    0 => {
                        w.link.remove(i);
                    }
                    1 if w.link.len() < 256 => {
                        let f = w.link[i].clone();
                        w.link.insert(j, f);
                    }
                    _ => w.link.swap(i, j),
                }
            }
            6 if !w.link.is_empty() => {
                // Flip a bit past the Ethernet header.
                let i = input.u8() as usize % w.link.len();
                let f = &mut w.link[i];
                let at = 14 + input.u16() as usize % f.len().saturating_sub(14).max(1);
                if let Some(b) = f.get_mut(at) {
                    *b ^= 1 << (input.u8() % 8);
                }
            }
            7 => {
                let d = Duration::from_millis(input.u8() as u64 % 10);
                if w.spent + d < Duration::from_millis(100) {
                    w.spent += d;
                    w.now += d;
                }
            }
            _ => {}
        }
    }
    w.program = false;
    w.deliver(usize::MAX);
});
