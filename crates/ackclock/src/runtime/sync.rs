//! The synchronization primitives the window-update handshake is built from: std's, or
//! loom's when the crate's unit tests are built with `--cfg loom`, so that the model check
//! runs the handshakes' real code (see `wnd_update`, `rounds`, `watch` and `owed`).

#[cfg(all(loom, test))]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(all(loom, test))]
pub(crate) use loom::sync::Mutex;

#[cfg(not(all(loom, test)))]
#[cfg_attr(not(feature = "tokio"), allow(unused_imports))] // AtomicUsize: `owed`, with tokio
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(all(loom, test)))]
pub(crate) use std::sync::Mutex;

/// Lock `m`, taking a poisoned lock as it is (what a panicking holder left is still the
/// state: these locks guard flags and queues, whose every step is whole).
pub(crate) fn lock<T>(m: &Mutex<T>) -> impl core::ops::DerefMut<Target = T> + '_ {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// For the loom models' negative tests (shared with the pool's model, one layer down).
#[cfg(all(loom, test))]
pub(crate) use crate::buf::sync::loom_finds;
