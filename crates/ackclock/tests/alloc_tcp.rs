//! Proof that steady-state TCP bulk transfer allocates nothing per segment (DESIGN.md
//! principle 2), extending `alloc_steady_state.rs` from the pool and pipe to the whole stack.
//!
//! A counting global allocator wraps the system one and counts per thread. Two stacks over
//! the in-memory pipe set up a connection and move a few megabytes so that every queue,
//! hash map and ring reaches its working capacity; then 20 MB more go through
//! send / recv / poll on this thread and the count must not move.
//!
//! When it does move, set `ALLOC_TRACE=N` to print the backtraces of the first N
//! allocations made during the measured transfer.

mod common;

use ackclock::time::Duration;
use ackclock::{Error, Stack, TcpHandle};
use common::{Pair, B};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};

struct Counting;

thread_local! {
    /// Allocations made by this thread: tests in one binary run on parallel threads, and
    /// each must see only its own.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Backtraces still to capture (diagnostics only).
    static TRACE_LEFT: Cell<u32> = const { Cell::new(0) };
    /// Set while the allocator itself allocates (capturing a backtrace): not counted.
    static IN_TRACE: Cell<bool> = const { Cell::new(false) };
    static TRACES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

fn count(layout: Layout) {
    // `try_with`: the allocator may run while thread-locals are being torn down.
    if IN_TRACE.try_with(|t| t.get()).unwrap_or(true) {
        return;
    }
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    if TRACE_LEFT.try_with(|t| t.get()).unwrap_or(0) > 0 {
        IN_TRACE.with(|t| t.set(true));
        TRACE_LEFT.with(|t| t.set(t.get() - 1));
        let bt = std::backtrace::Backtrace::force_capture();
        let text = format!("allocation of {} bytes (align {}):\n{bt}", layout.size(), layout.align());
        TRACES.with(|t| t.borrow_mut().push(text));
        IN_TRACE.with(|t| t.set(false));
    }
}

// SAFETY: forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(Layout::from_size_align(new_size, layout.align()).unwrap_or(layout));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// One direction of a transfer: how far the sender and the receiver are.
#[derive(Default)]
struct Flow {
    sent: usize,
    got: usize,
    bad: Option<usize>,
}

impl Flow {
    fn send(&mut self, stack: &mut Stack, h: TcpHandle, len: usize, src: &[u8]) {
        while self.sent < len {
            let off = self.sent % src.len();
            let n = (len - self.sent).min(src.len() - off);
            match stack.tcp_send(h, &src[off..off + n]) {
                Ok(k) => self.sent += k,
                Err(Error::WouldBlock) | Err(Error::NoBufferSpace) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
    }

    fn recv(&mut self, stack: &mut Stack, h: TcpHandle, src: &[u8], dst: &mut [u8]) {
        loop {
            match stack.tcp_recv(h, dst) {
                Ok(0) => panic!("unexpected end of stream"),
                Ok(n) => {
                    // `src` repeats with period src.len(): check in place, no copies.
                    for (i, &b) in dst[..n].iter().enumerate() {
                        if self.bad.is_none() && b != src[(self.got + i) % src.len()] {
                            self.bad = Some(self.got + i);
                        }
                    }
                    self.got += n;
                }
                Err(Error::WouldBlock) => break,
                Err(e) => panic!("recv: {e}"),
            }
        }
    }

    #[track_caller]
    fn check(&self, len: usize) {
        assert_eq!(self.got, len, "transfer stalled: sent {}, received {} of {len}", self.sent, self.got);
        assert_eq!(self.bad, None, "received bytes differ from the sent ones at this offset");
    }
}

/// Move `len` bytes from `c` (on stack a) to `s` (on stack b), and as many back if `both`,
/// on this thread, through the sans-IO calls only. `src` and `dst` are caller-owned so that
/// nothing here allocates.
fn transfer(p: &mut Pair, c: TcpHandle, s: TcpHandle, len: usize, both: bool, src: &[u8], dst: &mut [u8]) {
    let mut ab = Flow::default();
    let mut ba = Flow::default();
    let back = if both { len } else { 0 };
    p.run_until(Duration::from_secs(600), |p| {
        ab.send(&mut p.a, c, len, src);
        ba.send(&mut p.b, s, back, src);
        ab.recv(&mut p.b, s, src, dst);
        ba.recv(&mut p.a, c, src, dst);
        ab.got >= len && ba.got >= back
    });
    ab.check(len);
    ba.check(back);
}

/// A connection from `a` to `b` on a fresh pair.
fn established() -> (Pair, TcpHandle, TcpHandle) {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(B, 80, 16).unwrap();
    let c = p.a.tcp_connect(B, 80).unwrap();
    let mut server = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        if server.is_none() {
            server = p.b.tcp_accept(l).ok();
        }
        server.is_some() && p.a.tcp_readiness(c).unwrap().writable
    }));
    (p, c, server.unwrap())
}

/// Warm up with a few MB, then count the allocations of 20 MB more.
fn measure(both: bool) {
    let (mut p, c, s) = established();
    // A period that is not a multiple of the MSS, so segments do not repeat.
    let src: Vec<u8> = (0..1_000_003u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let mut dst = vec![0u8; 65536];

    // Warm-up: queues, rings and the timer wheel reach their working size.
    transfer(&mut p, c, s, 8 << 20, both, &src, &mut dst);

    let segs_out = |p: &Pair| p.a.tcp_info(c).unwrap().stats.segs_out + p.b.tcp_info(s).unwrap().stats.segs_out;
    let segs_before = segs_out(&p);
    let trace = std::env::var("ALLOC_TRACE").ok().and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
    TRACE_LEFT.with(|t| t.set(trace));
    let before = allocations();
    transfer(&mut p, c, s, 20 << 20, both, &src, &mut dst);
    let after = allocations();
    TRACE_LEFT.with(|t| t.set(0));
    for t in TRACES.with(|t| std::mem::take(&mut *t.borrow_mut())) {
        eprintln!("{t}\n");
    }
    let segs = segs_out(&p) - segs_before;
    let data_segs = (1 + both as u64) * (20 << 20) / 1448;
    assert!(segs >= data_segs, "{segs} segments for {data_segs} segments' worth of data");
    assert_eq!(
        after - before,
        0,
        "{} allocations while moving 20 MB ({segs} segments sent in total); run with ALLOC_TRACE=5 for backtraces",
        after - before,
    );
}

#[test]
fn steady_state_bulk_transfer_allocates_nothing_per_segment() {
    measure(false);
}

#[test]
fn steady_state_transfer_in_both_directions_allocates_nothing_per_segment() {
    measure(true);
}

#[test]
fn the_counter_sees_allocations() {
    let before = allocations();
    let v = std::hint::black_box(vec![0u8; 100]);
    assert_eq!(allocations() - before, 1);
    drop(v);
}
