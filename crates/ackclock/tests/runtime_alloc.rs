//! Proof that the runtime moves data without a heap allocation per packet: a counting
//! allocator over every thread (the application threads and both protocol threads), a bulk
//! transfer between two runtimes over the in-memory pipe, and no allocation at all while
//! 32 MB move in steady state. Buffers cross threads as pool handles; the copy is the
//! application thread's, under the stack's lock, into and out of those buffers.

mod runtime_support;

use ackclock::runtime::{TcpListener, TcpStream};
use runtime_support::{b_at, pair};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

struct Counting;

/// Allocations by every thread of the process (the protocol threads are the point), but
/// the test's own thread: it only sleeps and reads a counter, and the test harness may
/// allocate on it (its output capture).
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static NOT_COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn count() {
    // `try_with`: the allocator may run while thread-locals are being torn down.
    if !NOT_COUNTED.try_with(|c| c.get()).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const WARM_UP: u64 = 8 << 20;
const MEASURED: u64 = 32 << 20;

#[test]
fn no_allocation_per_packet_in_steady_state() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(9)).unwrap();
    let sender = TcpStream::connect(&a, b_at(9)).unwrap();
    let (receiver, _) = listener.accept().unwrap();
    let total = WARM_UP + MEASURED + (8 << 20);
    let received = AtomicU64::new(0);
    let pause = AtomicBool::new(false);
    let (before, after) = std::thread::scope(|s| {
        s.spawn(|| {
            let chunk = vec![0x5au8; 64 * 1024];
            let mut sent = 0;
            while sent < total {
                let n = (chunk.len() as u64).min(total - sent) as usize;
                (&sender).write_all(&chunk[..n]).unwrap();
                sent += n as u64;
            }
        });
        s.spawn(|| {
            // Reads of assorted sizes, so partial segments and window updates both happen.
            let mut buf = vec![0u8; 50_000];
            let sizes = [50_000, 1, 1448, 7, 20_000, 3000];
            let mut i = 0;
            let mut got = 0;
            while got < total {
                while pause.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let n = (&receiver).read(&mut buf[..sizes[i % sizes.len()]]).unwrap();
                assert!(n > 0 && buf[..n].iter().all(|&b| b == 0x5a));
                got += n as u64;
                received.store(got, Ordering::Release);
                i += 1;
            }
        });
        let wait_for = |n: u64| {
            while received.load(Ordering::Acquire) < n {
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        NOT_COUNTED.with(|c| c.set(true));
        // Queues grow to their deepest once (a one-time cost, not per packet): let the
        // receiver stall long enough in the warm-up for the window to fill, so that no later
        // stall of the scheduler's making reaches a new depth inside the measured part.
        wait_for(WARM_UP / 2);
        pause.store(true, Ordering::Release);
        std::thread::sleep(Duration::from_millis(300));
        pause.store(false, Ordering::Release);
        wait_for(WARM_UP);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        wait_for(WARM_UP + MEASURED);
        let after = ALLOCATIONS.load(Ordering::Relaxed);
        (before, after)
    });
    let stats = b.stats();
    assert!(stats.window_update_requests > 0 && stats.rounds > 0);
    assert_eq!(after - before, 0, "heap allocations while {MEASURED} bytes moved");
}
