//! The synchronization primitives the window-update handshake is built from: std's, or
//! loom's when the crate's unit tests are built with `--cfg loom`, so that the model check
//! runs the handshakes' real code (see `wnd_update`, `rounds` and `watch`).

#[cfg(all(loom, test))]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(all(loom, test))]
pub(crate) use loom::sync::Mutex;

#[cfg(not(all(loom, test)))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(all(loom, test)))]
pub(crate) use std::sync::Mutex;

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
