//! ackclock: a user-space TCP/IPv4 stack.
//!
//! The layers follow `DESIGN.md`, from the wire up:
//!
//! | module  | owns |
//! |---------|------|
//! | [`wire`] | packet formats and the Internet checksum |
//! | [`buf`]  | the pbuf pool: one contiguous frame per buffer, headroom, metadata |
//! | [`phy`]  | devices as rings of pbufs (in-memory pipe; simulated link and TAP later) |
//!
//! The protocol core never reads a clock: callers pass [`time::Instant`] in.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_debug_implementations)]

pub mod buf;
pub mod phy;
pub mod time;
pub mod wire;
