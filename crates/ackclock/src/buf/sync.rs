//! The atomics the pool's free list is built from: core's, or loom's when the crate's unit
//! tests are built with `--cfg loom`, so that the model check runs the list's real code
//! (see `pool`'s `model`). Also the loom models' helper for their negative tests, which the
//! runtime's models use too.

#[cfg(all(loom, test))]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(not(all(loom, test)))]
pub(crate) use core::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// For the loom models' negative tests: run `model`, which must fail (loom found the
/// interleaving the broken variant allows), with a panic message containing `expected`, so
/// that it failed for the reason the test names and not another.
#[cfg(all(loom, test))]
pub(crate) fn loom_finds(model: impl FnOnce() + std::panic::UnwindSafe, expected: &str) {
    let payload = std::panic::catch_unwind(model).expect_err("loom must find the interleaving");
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or_default();
    assert!(message.contains(expected), "failed for another reason: {message}");
}
