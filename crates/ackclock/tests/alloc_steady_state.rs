//! Proof that the packet path does not allocate per packet (one pool, made at start-up).
//!
//! A counting global allocator wraps the system one. After a warm-up, frames move from the
//! pool through a batch and the pipe to the other end and back to the pool many times; the
//! allocation count must not move. Later layers (TCP) extend this proof in their own tests.

mod common;

use ackclock::buf::{Pool, PoolConfig};
use ackclock::phy::{pipe, Batch, Device, PipeConfig};
use ackclock::time::Instant;
use common::alloc::{allocations, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Send `rounds` batches of `per_batch` frames from `a` to `b`, sharing each frame once (as a
/// retransmission queue would), and check every payload on arrival.
fn run(pool: &Pool, rounds: usize, per_batch: usize) {
    // Single-threaded test binary section: the pipe and batches are made by the caller.
    PIPE.with(|cell| {
        let (a, b, tx, rx, kept) = &mut *cell.borrow_mut();
        for round in 0..rounds {
            for i in 0..per_batch {
                let mut f = pool.alloc().expect("pool sized for the batch");
                let tag = (round * per_batch + i) as u32;
                f.append_copy_sum(&tag.to_be_bytes()).unwrap();
                f.append(1400).unwrap().fill(tag as u8);
                f.prepend(54).unwrap().fill(0);
                kept.push(f.share()).unwrap();
                tx.push(f).unwrap();
            }
            assert_eq!(a.transmit(Instant::ZERO, tx), per_batch);
            assert_eq!(b.receive(Instant::ZERO, rx), per_batch);
            let mut i = 0;
            while let Some(mut f) = rx.pop() {
                f.trim_front(54).unwrap();
                let tag = (round * per_batch + i) as u32;
                assert_eq!(&f.data()[..4], &tag.to_be_bytes());
                i += 1;
            }
            kept.clear(); // "acknowledged"
        }
    });
}

type Rig = (ackclock::phy::PipeEnd, ackclock::phy::PipeEnd, Batch, Batch, Batch);

thread_local! {
    static PIPE: std::cell::RefCell<Rig> = std::cell::RefCell::new({
        let (a, b) = pipe(PipeConfig { depth: 64, ..Default::default() });
        (a, b, Batch::with_capacity(32), Batch::with_capacity(32), Batch::with_capacity(32))
    });
}

#[test]
fn pool_and_pipe_allocate_nothing_in_steady_state() {
    let pool = Pool::new(PoolConfig { buffers: 128, ..Default::default() }).unwrap();
    run(&pool, 10, 32); // warm-up: thread-locals, lazily initialised state
    let before = allocations();
    run(&pool, 10_000, 32);
    let after = allocations();
    assert_eq!(after - before, 0, "{} allocations while moving 320,000 frames", after - before);
    assert_eq!(pool.available(), 128, "every buffer back in the pool");
}

#[test]
fn the_counter_sees_allocations() {
    let before = allocations();
    let v = std::hint::black_box(vec![0u8; 100]);
    assert_eq!(allocations() - before, 1);
    drop(v);
}
