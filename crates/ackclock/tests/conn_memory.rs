//! Library memory per idle established connection: 4,000 connections between two stacks over
//! the in-memory pipe, the heap this thread holds (a counting allocator's live bytes) before
//! and after, divided by the 8,000 connection ends. Idle means established, no data queued
//! either way, after a 1 KB exchange on each (so that buffers grown for data have drained).
//!
//! Prints the figure (`--nocapture`) for BENCHMARKS.md and asserts the bound below: the
//! issue's goal is 1 KB; what is held today and where it goes is in BENCHMARKS.md.

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

/// The bound asserted per connection end, bytes (measured: see BENCHMARKS.md).
const BOUND: i64 = 1600;

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
    let held = live_bytes() - base;
    let per_end = held / (2 * CONNECTIONS as i64);
    // Tables that grow with the connection count (slots, events, the hash table) are
    // charged too, as they should be: they are what a connection costs.
    eprintln!("{CONNECTIONS} idle connections: {held} bytes of heap, {per_end} per connection end");
    assert!(per_end <= BOUND, "{per_end} bytes per connection end, over {BOUND}");
    assert_eq!(p.a.tcp().connections(), CONNECTIONS);
    // Idle connections leave a poll nothing to visit: no timer armed (no keepalive by
    // default, no delayed ACK or retransmission pending) and no output queued, so the
    // per-poll work follows the events, not the connection count (scripts/callgrind-scale
    // counts its instructions at 1k, 10k and 100k connections).
    assert_eq!(p.a.poll_at(), None, "an idle connection on A still has a timer or output");
    assert_eq!(p.b.poll_at(), None, "an idle connection on B still has a timer or output");
}
