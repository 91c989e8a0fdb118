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

/// For the loom models' negative tests (shared with the pool's model, one layer down).
#[cfg(all(loom, test))]
pub(crate) use crate::buf::sync::loom_finds;
