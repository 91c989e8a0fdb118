//! The synchronization primitives the window-update handshake is built from: std's, or
//! loom's when the crate's unit tests are built with `--cfg loom`, so that the model check
//! runs the handshake's real code (see `wnd_update`).

#[cfg(all(loom, test))]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
#[cfg(all(loom, test))]
pub(crate) use loom::sync::Mutex;

#[cfg(not(all(loom, test)))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
#[cfg(not(all(loom, test)))]
pub(crate) use std::sync::Mutex;
