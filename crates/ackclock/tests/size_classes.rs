//! Buffer size classes: with a pool of 64 KiB buffers (as for segmentation offload), segments
//! without payload are built in the pool's small class, so that an ACK never pins 64 KiB;
//! data still goes in the large buffers; and with the class exhausted, or turned off, the
//! ACKs still go out, from the large buffers.

mod common;

use ackclock::buf::{PoolConfig, DEFAULT_HEADROOM, SMALL_CLASS_ABOVE};
use ackclock::{Stack, StackConfig};
use common::{config, Pair, A, B};

const LARGE: PoolConfig =
    PoolConfig { buffers: 256, buffer_size: 64 * 1024 + DEFAULT_HEADROOM, headroom: DEFAULT_HEADROOM };

/// Who holds the frames `stack` has queued for its device: (small class, large buffers).
fn owners(stack: &mut Stack) -> (usize, usize) {
    let class = stack.pool().small_class().cloned();
    let large = stack.pool().clone();
    let ring = stack.tx_ring();
    let small = ring.iter().filter(|f| class.as_ref().is_some_and(|c| c.owns(f))).count();
    let big = ring.iter().filter(|f| large.owns(f)).count();
    (small, big)
}

/// Send `n` bytes from A and have B answer; returns who holds A's frames (the data) and
/// B's (its ACK).
fn data_then_ack(p: &mut Pair, n: usize) -> ((usize, usize), (usize, usize)) {
    let (c, _s) = p.connect(80);
    assert_eq!(p.a.tcp_send(c, &vec![7u8; n]), Ok(n));
    p.a.dispatch(p.now);
    let data = owners(&mut p.a);
    p.a.transmit(p.now, &mut p.da);
    // B receives the segment; at the start of a connection it ACKs at once (quick ACKs).
    p.b.receive(p.now, &mut p.db);
    p.b.dispatch(p.now);
    let ack = owners(&mut p.b);
    (data, ack)
}

fn pair(small_buffers: usize) -> Pair {
    let (mut ca, mut cb) = (config(A, 1), config(B, 2));
    for c in [&mut ca, &mut cb] {
        c.pool = LARGE;
        c.small_buffers = small_buffers;
    }
    Pair::with(ca, cb)
}

#[test]
fn an_ack_is_built_in_the_small_class_and_data_in_the_large_buffers() {
    const { assert!(LARGE.buffer_size >= SMALL_CLASS_ABOVE) };
    let mut p = pair(64);
    let class = p.b.pool().small_class().expect("a pool of 64 KiB buffers gets a small class").clone();
    assert_eq!((class.capacity(), class.buffer_size()), (64, 256));
    let (data, ack) = data_then_ack(&mut p, 1000);
    assert_eq!(data, (0, 1), "the data segment is in a large buffer");
    assert_eq!(ack, (1, 0), "the pure ACK is in a 256-byte buffer");
}

#[test]
fn without_the_class_or_with_it_exhausted_acks_come_from_the_large_buffers() {
    let mut off = pair(0);
    assert!(off.b.pool().small_class().is_none());
    assert_eq!(data_then_ack(&mut off, 1000).1, (0, 1));

    let mut p = pair(4);
    let (c, s) = p.connect(80);
    // Hold every small buffer: the class is empty, and the next ACK falls back.
    let class = p.b.pool().small_class().unwrap().clone();
    let held: Vec<_> = std::iter::from_fn(|| class.alloc().ok()).collect();
    assert_eq!(held.len(), 4);
    assert_eq!(p.a.tcp_send(c, &[1u8; 100]), Ok(100));
    p.a.transmit(p.now, &mut p.da);
    p.b.receive(p.now, &mut p.db);
    p.b.dispatch(p.now);
    assert_eq!(owners(&mut p.b), (0, 1), "the ACK still goes out, in a large buffer");
    drop(held);
    let mut buf = [0u8; 100];
    p.b.transmit(p.now, &mut p.db);
    assert_eq!(p.b.tcp_recv(s, &mut buf), Ok(100));
}

#[test]
fn small_pools_have_no_class() {
    let c = StackConfig::new(ackclock::iface::InterfaceConfig::new(A, 24));
    assert!(c.pool.buffer_size < SMALL_CLASS_ABOVE);
    let p = Pair::new();
    assert!(p.a.pool().small_class().is_none(), "MTU-sized buffers need no smaller class");
}
