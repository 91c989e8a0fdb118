//! How many frames went through a target, printed on stderr when the fuzzer exits (libFuzzer
//! ends with `exit`, which runs `atexit` handlers), as one line that `scripts/fuzz-all` reads:
//!
//! `ackclock_frames: FRAMES frames, PROGRAM in the program, LIVE to an established connection, BYTES stream bytes read`
//!
//! An exec of a parser target is one frame; an exec of `tcp_stack` or `lro` is a handshake,
//! a program of many frames and a teardown, so an exec count says little about how much of
//! the stack ran. FRAMES counts every frame handed to a parser or to `Stack::process` /
//! `Stack::process_batch`; PROGRAM those during the fuzzed program (not the scripted
//! handshake and teardown around it); LIVE those of the program that reached a stack whose
//! connection under test was ESTABLISHED; BYTES what the applications read of the streams
//! under test. The last three stay 0 for the parser targets.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Once;

static FRAMES: AtomicU64 = AtomicU64::new(0);
static PROGRAM: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static REGISTER: Once = Once::new();

extern "C" {
    fn atexit(f: extern "C" fn()) -> i32;
}

extern "C" fn report() {
    eprintln!(
        "ackclock_frames: {} frames, {} in the program, {} to an established connection, {} stream bytes read",
        FRAMES.load(Relaxed),
        PROGRAM.load(Relaxed),
        LIVE.load(Relaxed),
        BYTES.load(Relaxed)
    );
}

fn register() {
    // SAFETY: `report` is a plain function that only reads atomics and writes to stderr.
    REGISTER.call_once(|| unsafe {
        atexit(report);
    });
}

/// A parser target's input: one frame.
#[allow(dead_code)]
pub fn parsed() {
    outside(1);
}

/// `n` frames through the target outside the fuzzed program.
#[allow(dead_code)]
pub fn outside(n: u64) {
    register();
    FRAMES.fetch_add(n, Relaxed);
}

/// `n` frames of the fuzzed program, `live` of them to an established connection.
#[allow(dead_code)]
pub fn program(n: u64, live: u64) {
    register();
    FRAMES.fetch_add(n, Relaxed);
    PROGRAM.fetch_add(n, Relaxed);
    LIVE.fetch_add(live, Relaxed);
}

/// Bytes of a stream under test the application read.
#[allow(dead_code)]
pub fn bytes(n: u64) {
    BYTES.fetch_add(n, Relaxed);
}
