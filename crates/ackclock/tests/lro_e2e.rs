//! Byte-exact transfers with receive aggregation on (the default): over the in-memory pipe
//! through loss, reordering, duplication and corruption, and in the simulator; and the same
//! transfer with aggregation off, for comparison of the counters.

mod common;

use ackclock::buf::{PBuf, Pool, PoolConfig};
use ackclock::phy::{pipe, Batch, Capabilities, Device, DeviceStats, Impaired, Impairment, PipeConfig, PipeEnd};
use ackclock::rng::Rng;
use ackclock::sim::{host_config, Impairments, LinkConfig, Loss, Reorder};
use ackclock::tcp::{Aggregation, Counters};
use ackclock::time::{Duration, Instant};
use ackclock::{Error, Shutdown, Stack};
use common::{config, stream, Link, Pair, A, B};
use std::net::SocketAddrV4;

/// A device that flips one random bit in a copy of some received frames (the pipe shares a
/// sent frame with the sender's retransmission queue, so it is never changed in place).
#[derive(Debug)]
struct Corrupting<D> {
    inner: D,
    rng: Rng,
    p: f64,
    pool: Pool,
    scratch: Batch,
    corrupted: u64,
}

impl<D: Device> Device for Corrupting<D> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn receive(&mut self, now: Instant, batch: &mut Batch) -> usize {
        let n = self.inner.receive(now, &mut self.scratch);
        while let Some(f) = self.scratch.pop() {
            let f = if self.rng.next_f64() < self.p && f.len() > 34 { self.flip(f) } else { f };
            let _ = batch.push(f);
        }
        n
    }
    fn transmit(&mut self, now: Instant, batch: &mut Batch) -> usize {
        self.inner.transmit(now, batch)
    }
    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }
}

impl<D> Corrupting<D> {
    fn flip(&mut self, f: PBuf) -> PBuf {
        let Ok(mut copy) = self.pool.alloc() else { return f };
        copy.append(f.len()).unwrap().copy_from_slice(f.data());
        // Past the Ethernet and IPv4 headers: the TCP header or payload.
        let at = 34 + (self.rng.next_u64() as usize) % (f.len() - 34);
        copy.data_mut().unwrap()[at] ^= 1 << (self.rng.next_u64() % 8);
        self.corrupted += 1;
        copy
    }
}

impl<D: Link> Link for Corrupting<D> {
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
}

fn corrupting<D>(inner: D, p: f64, seed: u64) -> Corrupting<D> {
    let pool = Pool::new(PoolConfig { buffers: 4096, ..Default::default() }).unwrap();
    Corrupting { inner, rng: Rng::new(seed), p, pool, scratch: Batch::with_capacity(4096), corrupted: 0 }
}

/// `len` bytes from a to b over the pair, then a's FIN; returns what b read.
fn transfer<D: Link>(p: &mut Pair<D>, len: usize, limit: Duration) -> Vec<u8> {
    let data = stream(len, 99);
    let l = p.b.tcp_listen(SocketAddrV4::new(B, 80), 4).unwrap();
    let c = p.a.tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
    let (mut sent, mut got, mut server, mut shut) = (0, Vec::new(), None, false);
    let mut buf = vec![0u8; 65536];
    let done = p.run_until(limit, |p| {
        server = server.or_else(|| p.b.tcp_accept(l).ok());
        while sent < data.len() {
            match p.a.tcp_send(c, &data[sent..]) {
                Ok(n) => sent += n,
                Err(Error::WouldBlock | Error::NoBufferSpace) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        if sent == data.len() && !shut {
            p.a.tcp_shutdown(c, Shutdown::Write).unwrap();
            shut = true;
        }
        let Some(s) = server else { return false };
        loop {
            match p.b.tcp_recv(s, &mut buf) {
                Ok(0) => return true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(Error::WouldBlock) => return false,
                Err(e) => panic!("recv: {e}"),
            }
        }
    });
    assert!(done, "transfer did not finish: {} of {len} bytes", got.len());
    assert!(got == data, "received {} of {len} bytes, or different bytes", got.len());
    got
}

fn impaired_pair(on: Aggregation, seed: u64) -> Pair<Corrupting<Impaired<PipeEnd>>> {
    let imp = Impairment {
        delay: Duration::from_millis(5),
        loss: Loss::Bernoulli(0.01),
        duplicate: 0.01,
        reorder: Some(Reorder { probability: 0.02, extra_delay: Duration::from_millis(1) }),
    };
    let (da, db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let da = corrupting(Impaired::new(da, imp, Impairment::default(), seed, 4096), 0.005, seed + 10);
    let db = corrupting(Impaired::new(db, imp, Impairment::default(), seed + 1, 4096), 0.005, seed + 11);
    let mut p = Pair::over(config(A, 1), config(B, 2), da, db);
    p.a.set_aggregation(on);
    p.b.set_aggregation(on);
    p
}

/// Both kinds are on by default (the stage costs less per segment than it saves,
/// BENCHMARKS.md), and a stack made with defaults aggregates a transfer's data. (Its ACKs
/// do not merge here: the receiver ACKs each aggregate once, so the sender finds one ACK a
/// batch; `paced` below makes a sender find many.)
#[test]
fn aggregation_is_on_by_default() {
    let mut p = Pair::new();
    assert_eq!(p.a.aggregation(), Aggregation::ON);
    transfer(&mut p, 4 << 20, Duration::from_secs(60));
    let b = p.b.counters();
    assert!(b.lro_aggregates > 0 && b.lro_segments > b.lro_aggregates, "{}", lro_line(b));
}

/// A clean pipe: the receiver aggregates data, and every buffer comes back.
#[test]
fn clean_pipe_transfer_aggregates_data() {
    let mut p = Pair::new();
    p.a.set_aggregation(Aggregation::ON);
    p.b.set_aggregation(Aggregation::ON);
    transfer(&mut p, 4 << 20, Duration::from_secs(60));
    let b = p.b.counters();
    println!("receiver {}", lro_line(b));
    assert!(b.lro_aggregates > 0 && b.lro_segments > 0, "the receiver aggregated data: {}", lro_line(b));
}

/// `len` bytes from `a` to `b`, where `b` takes `every` frames per receive call and so ACKs
/// about every `every`th segment, and runs `b_rounds` rounds for each of `a`'s: `a` finds
/// many ACKs waiting in each batch, as a sender does behind a fast link to a receiver that
/// ACKs every second segment. Byte-exact.
pub fn paced(a: &mut Stack, b: &mut Stack, len: usize, b_rounds: usize) {
    let (mut da, mut db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let data = stream(len, 7);
    let l = b.tcp_listen(SocketAddrV4::new(B, 80), 4).unwrap();
    let c = a.tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
    let (mut sent, mut got, mut server, mut shut) = (0, Vec::new(), None, false);
    let mut buf = vec![0u8; 65536];
    let mut now = Instant::from_secs(1);
    let end = now + Duration::from_secs(60);
    'outer: while now < end {
        a.receive(now, &mut da);
        while sent < data.len() {
            match a.tcp_send(c, &data[sent..]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        if sent == data.len() && !shut {
            a.tcp_shutdown(c, Shutdown::Write).unwrap();
            shut = true;
        }
        a.transmit(now, &mut da);
        for _ in 0..b_rounds {
            now += Duration::from_micros(1);
            b.receive(now, &mut db);
            server = server.or_else(|| b.tcp_accept(l).ok());
            if let Some(s) = server {
                loop {
                    match b.tcp_recv(s, &mut buf) {
                        Ok(0) => break 'outer,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(_) => break,
                    }
                }
            }
            b.transmit(now, &mut db);
        }
        now += Duration::from_micros(1);
    }
    assert!(got == data, "received {} of {len} bytes, or different bytes", got.len());
}

fn batch_config(addr: std::net::Ipv4Addr, seed: u64, batch: usize) -> ackclock::StackConfig {
    let mut c = config(addr, seed);
    c.batch = batch;
    c
}

/// A receiver that ACKs every second segment: the sender merges the ACKs it finds waiting.
#[test]
fn sender_merges_the_acks_of_a_receiver_that_acks_every_second_segment() {
    let now = Instant::from_secs(1);
    let caps = Capabilities::ethernet(1500);
    let mut a = Stack::new(config(A, 1), caps, now).unwrap();
    let mut b = Stack::new(batch_config(B, 2, 2), caps, now).unwrap();
    a.set_aggregation(Aggregation::ON);
    b.set_aggregation(Aggregation::ON);
    paced(&mut a, &mut b, 4 << 20, 16);
    let c = a.counters();
    println!("sender {}", lro_line(c));
    assert!(c.lro_acks > 0 && c.lro_aggregates > 0, "{}", lro_line(c));
    assert!(a.pool().available() > 0);
}

/// Loss, reordering, duplication and bit errors in both directions, aggregation on at both
/// ends: the bytes arrive exactly, and the damaged segments were caught by checksums.
#[test]
fn impaired_pipe_transfer_is_byte_exact_with_aggregation() {
    for seed in [3, 4] {
        let mut p = impaired_pair(Aggregation::ON, seed);
        transfer(&mut p, 2 << 20, Duration::from_secs(600));
        let (a, b) = (p.a.counters(), p.b.counters());
        println!("seed {seed}: sender {}\n  receiver {}", lro_line(a), lro_line(b));
        assert!(p.da.corrupted + p.db.corrupted > 0);
        let (tx, _) = p.da.inner.impair_stats();
        assert!(tx.lost > 0 && tx.reordered > 0 && tx.duplicated > 0, "{tx:?}");
        assert!(b.lro_aggregates > 0, "{}", lro_line(b));
        assert!(b.lro_flush_order > 0, "gaps and duplicates flushed flows: {}", lro_line(b));
    }
}

/// The same impaired transfer with aggregation off, for the counters' comparison.
#[test]
fn impaired_pipe_transfer_is_byte_exact_without_aggregation() {
    let mut p = impaired_pair(Aggregation::OFF, 3);
    transfer(&mut p, 2 << 20, Duration::from_secs(600));
    assert_eq!(p.b.counters().lro_aggregates + p.a.counters().lro_acks, 0);
}

/// The simulator: a fast WAN with every impairment, both hosts aggregating.
#[test]
fn simulated_transfer_is_byte_exact_with_aggregation() {
    use ackclock::sim::World;
    let imp = Impairments {
        loss: Loss::Bernoulli(0.01),
        corrupt: 0.005,
        duplicate: 0.005,
        reorder: Some(Reorder { probability: 0.01, extra_delay: Duration::from_millis(1) }),
    };
    let mut w = World::new(5);
    let a = w.add_stack(host_config(A, 24, 11));
    let b = w.add_stack(host_config(B, 24, 12));
    for s in [a, b] {
        w.stack_mut(s).set_aggregation(Aggregation::ON);
    }
    let link = w.connect(a, b, LinkConfig::wan(1_000_000_000, Duration::from_millis(2)).with_impairments(imp));
    let data = stream(1 << 20, 5);
    let l = w.stack_mut(b).tcp_listen(SocketAddrV4::new(B, 80), 4).unwrap();
    let c = w.stack_mut(a).tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
    let (mut sent, mut got, mut server, mut shut, mut eof) = (0, Vec::new(), None, false, false);
    let mut buf = vec![0u8; 65536];
    let end = w.now() + Duration::from_secs(300);
    w.run_while(|w| {
        server = server.or_else(|| w.stack_mut(b).tcp_accept(l).ok());
        while sent < data.len() {
            match w.stack_mut(a).tcp_send(c, &data[sent..]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        if sent == data.len() && !shut {
            w.stack_mut(a).tcp_shutdown(c, Shutdown::Write).unwrap();
            shut = true;
        }
        if let Some(s) = server {
            loop {
                match w.stack_mut(b).tcp_recv(s, &mut buf) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(_) => break,
                }
            }
        }
        !eof && w.now() < end
    });
    assert!(eof && got == data, "received {} of {} bytes, or different bytes", got.len(), data.len());
    let stats = w.link_stats(link, ackclock::sim::Side::A);
    assert!(stats.corrupted > 0 && stats.lost > 0 && stats.duplicated > 0 && stats.reordered > 0, "{stats:?}");
    println!("sim: sender {}\n  receiver {}", lro_line(w.stack(a).counters()), lro_line(w.stack(b).counters()));
}

fn lro_line(c: &Counters) -> String {
    let _: &Stack;
    c.named().filter(|(n, v)| n.starts_with("lro_") && *v > 0).map(|(n, v)| format!("{n}={v} ")).collect()
}
