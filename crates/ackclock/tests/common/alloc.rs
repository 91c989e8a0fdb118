//! A counting global allocator, for the proofs that the packet path allocates nothing per
//! packet. It wraps the system allocator and counts, per thread, every allocation and
//! reallocation (tests in one binary run on parallel threads, and each must see only its
//! own). A test binary installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: Counting = Counting;
//! ```
//!
//! and reads [`allocations`] before and after the stretch it measures. When a count moves,
//! [`trace_from_env`] and [`print_traces`] around that stretch print the backtraces of the
//! first `ALLOC_TRACE=N` allocations in it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};

/// The counting allocator; install it with `#[global_allocator]`.
pub struct Counting;

thread_local! {
    /// Allocations made by this thread.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Backtraces still to capture (diagnostics only).
    static TRACE_LEFT: Cell<u32> = const { Cell::new(0) };
    /// Set while the allocator itself allocates (capturing a backtrace): not counted.
    static IN_TRACE: Cell<bool> = const { Cell::new(false) };
    static TRACES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// Bytes this thread allocated less those it freed.
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

/// Bytes this thread has allocated and not freed (frees by other threads of this thread's
/// blocks are not seen: for single-threaded measurements).
pub fn live_bytes() -> i64 {
    LIVE.with(|c| c.get())
}

fn live(delta: i64) {
    if !IN_TRACE.try_with(|t| t.get()).unwrap_or(true) {
        let _ = LIVE.try_with(|c| c.set(c.get() + delta));
    }
}

/// Allocations this thread has made so far (`alloc`, `alloc_zeroed` and `realloc` calls).
pub fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

/// Capture the backtraces of this thread's next `ALLOC_TRACE` allocations (none when the
/// variable is unset).
pub fn trace_from_env() {
    let trace = std::env::var("ALLOC_TRACE").ok().and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
    TRACE_LEFT.with(|t| t.set(trace));
}

/// Stop capturing, and print the backtraces captured on this thread.
pub fn print_traces() {
    TRACE_LEFT.with(|t| t.set(0));
    for t in TRACES.with(|t| std::mem::take(&mut *t.borrow_mut())) {
        eprintln!("{t}\n");
    }
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
        live(layout.size() as i64);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout);
        live(layout.size() as i64);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        live(-(layout.size() as i64));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(Layout::from_size_align(new_size, layout.align()).unwrap_or(layout));
        live(new_size as i64 - layout.size() as i64);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
