//! The receiver's out-of-order queue (`tcp::reasm`) under two arrival patterns, each
//! iteration inserting, draining and choosing SACK blocks as the TCB does per segment:
//!
//! - `loss_1pct`: 10 000 segments of 1448 bytes; every hundredth is lost and its
//!   retransmission arrives 64 segments later, so the queue holds up to 64 segments above
//!   one hole, new data is appended at its top and the fill drains it from the front.
//! - `holes_every_other_N`: the odd segments of 2N arrive first (N blocks), then the even
//!   ones in a fixed pseudo-random order; most of them land in the middle of the queue, the
//!   worst case for a sorted array. N = 512 is above what the default 256 KiB receive buffer
//!   admits (`max_ooo_segments`, about 360); N = 4096 is what a 3 MiB one would.
//!
//! `cargo bench -p ackclock --bench reasm`. Buffers come from a pool, so the figures include
//! taking and returning pool buffers (the same in every version of the queue).

use std::hint::black_box;
use std::time::Duration;

use ackclock::buf::{Pool, PoolConfig};
use ackclock::tcp::reasm::{OutOfOrderQueue, MAX_SACK_BLOCKS};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const MSS: u64 = 1448;

/// One arrival at `pos` as the TCB handles it: in order with nothing queued goes straight
/// through; anything else is queued, then what is ready is drained, then the SACK blocks of
/// the ACK are chosen.
fn arrive(q: &mut OutOfOrderQueue, pool: &Pool, rcv_nxt: &mut u64, pos: u64) -> usize {
    let mut b = pool.alloc().expect("pool sized for the window");
    let _ = b.append(MSS as usize).expect("buffer holds a segment");
    if pos == *rcv_nxt && q.is_empty() {
        *rcv_nxt += MSS;
        return 0;
    }
    q.insert(pos, b);
    while let Some((_, seg)) = q.pop_ready(*rcv_nxt) {
        *rcv_nxt += seg.len() as u64;
    }
    let mut out = [(0, 0); MAX_SACK_BLOCKS];
    q.sack_blocks(*rcv_nxt, 3, &mut out)
}

fn loss_1pct(q: &mut OutOfOrderQueue, pool: &Pool) -> u64 {
    let mut rcv_nxt = 0;
    let mut late = std::collections::VecDeque::with_capacity(128);
    let mut n = 0;
    for i in 0..10_000u64 {
        if i % 100 == 7 {
            late.push_back((i + 64, i * MSS));
        } else {
            n += arrive(q, pool, &mut rcv_nxt, i * MSS);
        }
        while late.front().is_some_and(|&(due, _)| due <= i) {
            let (_, pos) = late.pop_front().unwrap();
            n += arrive(q, pool, &mut rcv_nxt, pos);
        }
    }
    while let Some((_, pos)) = late.pop_front() {
        n += arrive(q, pool, &mut rcv_nxt, pos);
    }
    assert_eq!(rcv_nxt, 10_000 * MSS);
    n as u64
}

fn holes_every_other(q: &mut OutOfOrderQueue, pool: &Pool, order: &[u64]) -> u64 {
    let mut rcv_nxt = 0;
    let mut n = 0;
    let total = 2 * order.len() as u64;
    for i in (1..total).step_by(2) {
        n += arrive(q, pool, &mut rcv_nxt, i * MSS);
    }
    for &i in order {
        n += arrive(q, pool, &mut rcv_nxt, i * MSS);
    }
    assert_eq!(rcv_nxt, total * MSS);
    n as u64
}

/// The even segments below `2 * n` in a fixed pseudo-random order (xorshift), segment 0 last.
fn shuffled_evens(n: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (1..n).map(|k| 2 * k).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order.push(0);
    order
}

fn bench(c: &mut Criterion) {
    let pool = Pool::new(PoolConfig { buffers: 8192 + 64, buffer_size: 2048, headroom: 128 }).unwrap();
    let mut q = OutOfOrderQueue::new();
    let mut g = c.benchmark_group("reasm");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("loss_1pct", |b| b.iter(|| black_box(loss_1pct(&mut q, &pool))));
    for n in [512, 4096] {
        let order = shuffled_evens(n);
        g.throughput(Throughput::Elements(2 * n));
        g.bench_function(format!("holes_every_other_{n}"), |b| {
            b.iter(|| black_box(holes_every_other(&mut q, &pool, &order)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
