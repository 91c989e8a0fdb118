//! Idle connections at scale: `idle_scale N` opens N connections between two stacks over the
//! in-memory pipe, exchanges 1 KB each way on every one and reads it, lets the delayed ACKs
//! go, and then reports
//!
//! - the library heap per idle connection end: what a counting allocator says this thread
//!   holds after, less before the first connect, over the 2N connection ends (the pools are
//!   allocated before, so they are not charged; the tables that grow with the connection
//!   count are);
//! - the cost of one poll round, `Stack::poll` on both stacks with virtual time 1 ms on: with
//!   nothing to do (`measured_idle`), and with one connection active (`measured_active`: `A`'s
//!   application writes one full segment, both stacks poll, `B`'s reads it, both poll again
//!   so the ACK goes back). Printed as the median of `--rounds` rounds in nanoseconds (wall
//!   clock, noisy on a shared machine); `scripts/callgrind-scale` counts the instructions of
//!   the same functions instead.
//!
//! The round must cost the same at 1k and at 100k connections: the connection table, the
//! timers and the per-poll work are proportional to the events, never to the connections.
//! Connections are made 1,000 at a time with chosen ports (local 1024.., remote 80 and up,
//! 60,000 per remote port), so that setting up 100k does not depend on the ephemeral search.

#[path = "../tests/common/alloc.rs"]
#[allow(dead_code)]
mod alloc;

use ackclock::buf::PoolConfig;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{pipe, Capabilities, PipeConfig, PipeEnd};
use ackclock::tcp::SocketOptions;
use ackclock::time::{Duration, Instant};
use ackclock::{ListenerHandle, Stack, StackConfig, TcpHandle};
use core::net::Ipv4Addr;
use std::hint::black_box;
use std::net::SocketAddrV4;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PER_PORT: usize = 60_000;
const CHUNK: usize = 1000;
const MSS: usize = 1448;

fn config(addr: Ipv4Addr, seed: u64, n: usize) -> StackConfig {
    let mut c = StackConfig::new(InterfaceConfig::new(addr, 24));
    c.seed = seed;
    c.pool = PoolConfig { buffers: 8192, ..Default::default() };
    c.tcp.max_connections = n + 16;
    c
}

struct Pair {
    a: Stack,
    b: Stack,
    da: PipeEnd,
    db: PipeEnd,
    now: Instant,
}

impl Pair {
    /// Both stacks receive and transmit, until no frame is in flight or `limit` rounds.
    fn settle(&mut self, limit: usize) {
        for _ in 0..limit {
            self.a.poll(self.now, &mut self.da);
            self.b.poll(self.now, &mut self.db);
            if self.da.pending() + self.db.pending() == 0 {
                return;
            }
            self.now += Duration::from_micros(10);
        }
    }

    /// Time moves to the next timer of either stack (or `step` on, if sooner).
    fn advance(&mut self, step: Duration) {
        let next = [self.a.poll_at(), self.b.poll_at()].into_iter().flatten().min();
        self.now = match next {
            Some(t) if t > self.now && t < self.now + step => t,
            _ => self.now + step,
        };
    }
}

/// One idle round: both stacks poll with nothing to do.
#[inline(never)]
fn measured_idle(p: &mut Pair) {
    p.a.poll(p.now, &mut p.da);
    p.b.poll(p.now, &mut p.db);
}

/// One round with connection `c` (on `A`) to `s` (on `B`) active: a full segment goes over and
/// is read, and its ACK comes back.
#[inline(never)]
fn measured_active(p: &mut Pair, c: TcpHandle, s: TcpHandle, data: &[u8], buf: &mut [u8]) {
    assert_eq!(p.a.tcp_send(c, data), Ok(data.len()));
    p.a.poll(p.now, &mut p.da);
    p.b.poll(p.now, &mut p.db);
    assert_eq!(p.b.tcp_recv(s, buf), Ok(data.len()));
    p.b.poll(p.now, &mut p.db);
    p.a.poll(p.now, &mut p.da);
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn listen(b: &mut Stack, n: usize) -> Vec<ListenerHandle> {
    (0..n.div_ceil(PER_PORT)).map(|k| b.tcp_listen(SocketAddrV4::new(B, 80 + k as u16), PER_PORT).unwrap()).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let rounds: usize =
        args.iter().position(|a| a == "--rounds").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(1000);

    let now = Instant::from_secs(1);
    let caps = Capabilities::ethernet(1500);
    let (da, db) = pipe(PipeConfig { depth: 8192, ..Default::default() });
    let a = Stack::new(config(A, 1, n), caps, now).unwrap();
    let b = Stack::new(config(B, 2, n), caps, now).unwrap();
    let mut p = Pair { a, b, da, db, now };
    let (ma, mb) = (p.a.iface().mac(), p.b.iface().mac());
    p.a.iface_mut().insert_static_neighbor(B, mb);
    p.b.iface_mut().insert_static_neighbor(A, ma);

    let base = alloc::live_bytes();
    let listeners = listen(&mut p.b, n);
    let opts = SocketOptions::from_config(p.a.tcp().config());
    let mut clients: Vec<TcpHandle> = Vec::with_capacity(n);
    let mut servers: Vec<TcpHandle> = Vec::with_capacity(n);
    let mut buf = vec![0u8; 4096];
    let msg = [0x5au8; 1024];
    let mut got = 0usize;
    while clients.len() < n {
        let first = clients.len();
        let last = (first + CHUNK).min(n);
        for i in first..last {
            let remote = SocketAddrV4::new(B, 80 + (i / PER_PORT) as u16);
            let local = 1024 + (i % PER_PORT) as u16;
            clients.push(p.a.tcp_connect_with(remote, Some(local), opts).unwrap());
        }
        let mut tries = 0;
        while servers.len() < last {
            p.settle(100);
            for &l in &listeners {
                while let Ok(s) = p.b.tcp_accept(l) {
                    servers.push(s);
                }
            }
            tries += 1;
            assert!(tries < 1000, "connections {first}..{last} not accepted");
            p.advance(Duration::from_millis(1));
        }
        // 1 KB each way on these, read to the end.
        for i in first..last {
            assert_eq!(p.a.tcp_send(clients[i], &msg), Ok(msg.len()));
            assert_eq!(p.b.tcp_send(servers[i], &msg), Ok(msg.len()));
        }
        let want = 2 * msg.len() * last;
        let mut tries = 0;
        while got < want {
            p.settle(100);
            for i in first..last {
                for (st, h) in [(&mut p.a, clients[i]), (&mut p.b, servers[i])] {
                    while let Ok(k) = st.tcp_recv(h, &mut buf) {
                        if k == 0 {
                            break;
                        }
                        got += k;
                    }
                }
            }
            tries += 1;
            assert!(tries < 1000, "data on connections {first}..{last} not read");
            p.advance(Duration::from_millis(1));
        }
    }
    // The delayed ACKs and last window updates go out, and after ten to twenty idle seconds
    // the drained queues give their storage back (`tcp::reclaim`); then nothing is left to do.
    let end = p.now + Duration::from_secs(25);
    while p.now < end {
        p.settle(100);
        p.advance(Duration::from_millis(10));
    }
    p.settle(100);
    assert_eq!(p.a.tcp().connections(), n);
    assert_eq!(p.b.tcp().connections(), n);
    let held = alloc::live_bytes() - base;
    let per_end = held / (2 * n as i64);
    println!("{n} idle connections: {held} bytes of library heap, {per_end} per connection end");

    // Poll rounds with nothing to do, 1 ms of virtual time apart.
    let mut idle = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        p.now += Duration::from_millis(1);
        let t = std::time::Instant::now();
        measured_idle(black_box(&mut p));
        idle.push(t.elapsed().as_nanos() as u64);
        assert_eq!(p.da.pending() + p.db.pending(), 0, "an idle round sent a frame");
    }
    // Rounds with one connection moving a segment, 1 ms apart.
    let (c, s) = (clients[n / 2], servers[n / 2]);
    let data = [0xa5u8; MSS];
    let mut active = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        p.now += Duration::from_millis(1);
        let t = std::time::Instant::now();
        measured_active(black_box(&mut p), c, s, &data, &mut buf);
        active.push(t.elapsed().as_nanos() as u64);
    }
    println!(
        "{n} idle connections: poll round (both stacks) {} ns idle, {} ns with one connection active (median of {rounds})",
        median(idle),
        median(active)
    );
}
