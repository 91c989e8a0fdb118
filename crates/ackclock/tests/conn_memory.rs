//! Library memory per idle established connection: 4,000 connections between two stacks over
//! the in-memory pipe, the heap this thread holds (a counting allocator's live bytes) before
//! and after, divided by the 8,000 connection ends. Idle means established, no data queued
//! either way, after a 1 KB exchange on each and 25 idle seconds (so that buffers grown for
//! data have drained, and the idle sweep has given the drained queues' storage back).
//!
//! Prints the figure (`--nocapture`) for BENCHMARKS.md and asserts the bound below; what is
//! held and where it goes is in BENCHMARKS.md.

mod common;

use ackclock::buf::PoolConfig;
use ackclock::time::Duration;
use ackclock::TcpHandle;
use common::alloc::{live_bytes, Counting};
use common::{config, Pair, A, B};
use std::net::SocketAddrV4;

#[global_allocator]
static GLOBAL: Counting = Counting;

const CONNECTIONS: usize = 4000;

/// The bound asserted per connection end, bytes: the goal of 1 KB (measured: see
/// BENCHMARKS.md).
const BOUND: i64 = 1024;

#[test]
fn idle_established_connections_cost_little_heap() {
    let mut ca = config(A, 1);
    let mut cb = config(B, 2);
    for c in [&mut ca, &mut cb] {
        c.tcp.max_connections = 2 * CONNECTIONS;
        c.pool = PoolConfig { buffers: 32 * 1024, ..Default::default() };
    }
    let mut p = Pair::with(ca, cb);
    let (ma, mb) = (p.a.iface().mac(), p.b.iface().mac());
    p.a.iface_mut().insert_static_neighbor(B, mb);
    p.b.iface_mut().insert_static_neighbor(A, ma);
    let l = p.b.tcp_listen(SocketAddrV4::new(B, 80), CONNECTIONS).unwrap();
    let mut clients: Vec<TcpHandle> = Vec::with_capacity(CONNECTIONS);
    let mut servers: Vec<TcpHandle> = Vec::with_capacity(CONNECTIONS);
    let mut buf = vec![0u8; 4096];
    let base = live_bytes();
    for _ in 0..CONNECTIONS {
        clients.push(p.a.tcp_connect(SocketAddrV4::new(B, 80)).unwrap());
    }
    assert!(p.run_until(Duration::from_secs(30), |p| {
        while let Ok(s) = p.b.tcp_accept(l) {
            servers.push(s);
        }
        servers.len() == CONNECTIONS
    }));
    // 1 KB each way on every connection, read to the end.
    let msg = [0x5au8; 1024];
    for (&c, &s) in clients.iter().zip(&servers) {
        assert_eq!(p.a.tcp_send(c, &msg), Ok(1024));
        assert_eq!(p.b.tcp_send(s, &msg), Ok(1024));
    }
    let mut got = 0usize;
    assert!(p.run_until(Duration::from_secs(30), |p| {
        for &h in &clients {
            while let Ok(n) = p.a.tcp_recv(h, &mut buf) {
                if n == 0 {
                    break;
                }
                got += n;
            }
        }
        for &h in &servers {
            while let Ok(n) = p.b.tcp_recv(h, &mut buf) {
                if n == 0 {
                    break;
                }
                got += n;
            }
        }
        got == 2 * 1024 * CONNECTIONS
    }));
    // Let delayed ACKs and the last window updates go out.
    p.run_until(Duration::from_secs(1), |_| false);
    let busy = (live_bytes() - base) / (2 * CONNECTIONS as i64);
    // After ten to twenty idle seconds the drained queues give their storage back
    // (`tcp::reclaim`: quiet for ten seconds at a sweep, which runs every ten).
    p.run_until(Duration::from_secs(25), |_| false);
    let held = live_bytes() - base;
    let per_end = held / (2 * CONNECTIONS as i64);
    // Tables that grow with the connection count (slots, events, the hash table) are
    // charged too, as they should be: they are what a connection costs.
    eprintln!(
        "{CONNECTIONS} idle connections: {held} bytes of heap, {per_end} per connection end \
         ({busy} just after the exchange, before the idle sweep)"
    );
    let reclaimed = p.a.counters().conn_storage_reclaimed + p.b.counters().conn_storage_reclaimed;
    assert_eq!(reclaimed, 2 * CONNECTIONS as u64, "every connection end gave its queues back");
    assert!(per_end <= BOUND, "{per_end} bytes per connection end, over {BOUND}");
    assert_eq!(p.a.tcp().connections(), CONNECTIONS);
    // Idle connections leave a poll nothing to visit: no timer armed (no keepalive by
    // default, no delayed ACK or retransmission pending) and no output queued, so the
    // per-poll work follows the events, not the connection count (scripts/callgrind-scale
    // counts its instructions at 1k, 10k and 100k connections).
    assert_eq!(p.a.poll_at(), None, "an idle connection on A still has a timer or output");
    assert_eq!(p.b.poll_at(), None, "an idle connection on B still has a timer or output");
}

/// Move `data` from `a`'s connection `c` to `b`'s `s`, read to the end, checked.
fn exchange(p: &mut Pair, c: TcpHandle, s: TcpHandle, data: &[u8]) {
    let mut sent = 0;
    let mut got = Vec::with_capacity(data.len());
    let mut buf = vec![0u8; 65536];
    assert!(p.run_until(Duration::from_secs(30), |p| {
        if sent < data.len() {
            sent += p.a.tcp_send(c, &data[sent..]).unwrap_or(0);
        }
        while let Ok(n) = p.b.tcp_recv(s, &mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got.len() == data.len()
    }));
    assert!(got == data, "the stream arrived intact");
}

/// The idle sweep gives a quiet connection's queue storage back, leaves a busy one alone,
/// and a connection that gave its storage back carries data again, intact.
#[test]
fn quiet_connections_give_queue_storage_back_and_work_after() {
    let mut p = Pair::new();
    let (c, s) = p.connect(80);
    let (c2, s2) = p.connect(81);
    let data = common::stream(4 << 20, 7);
    exchange(&mut p, c, s, &data);
    exchange(&mut p, c2, s2, &data[..1 << 20]);
    let before = live_bytes();
    // Five seconds: both are listed but not yet quiet for ten.
    p.run_until(Duration::from_secs(5), |_| false);
    assert_eq!(p.a.counters().conn_storage_reclaimed + p.b.counters().conn_storage_reclaimed, 0);
    // c2 keeps talking every second for 25 seconds; c says nothing.
    for _ in 0..25 {
        exchange(&mut p, c2, s2, b"ping");
        p.run_until(Duration::from_secs(1), |_| false);
    }
    // Both ends of the quiet connection gave their storage back; the busy one's did not.
    assert_eq!(p.a.counters().conn_storage_reclaimed, 1);
    assert_eq!(p.b.counters().conn_storage_reclaimed, 1);
    assert!(live_bytes() < before, "the heap shrank: {} -> {}", before, live_bytes());
    // The busy connection goes quiet too; then the stacks have nothing left to do.
    p.run_until(Duration::from_secs(25), |_| false);
    assert_eq!(p.a.counters().conn_storage_reclaimed, 2);
    assert_eq!(p.b.counters().conn_storage_reclaimed, 2);
    assert_eq!((p.a.poll_at(), p.b.poll_at()), (None, None), "no sweep armed for idle connections");
    // The connection that gave its storage back moves a stream again, both ways.
    exchange(&mut p, c, s, &data);
    let mut back = Pair { a: p.b, b: p.a, da: p.db, db: p.da, now: p.now };
    exchange(&mut back, s, c, &data[..1 << 20]);
}
