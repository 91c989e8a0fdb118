//! ackclock: a user-space TCP/IPv4 stack.
//!
//! The layers follow `DESIGN.md`, from the wire up:
//!
//! | module  | owns |
//! |---------|------|
//! | [`wire`] | packet formats and the Internet checksum |
//! | [`buf`]  | the pbuf pool: one contiguous frame per buffer, headroom, metadata |
//! | [`phy`]  | devices as rings of pbufs (in-memory pipe; simulated link and TAP later) |
//! | [`iface`] | Ethernet, ARP, IPv4, ICMP; demultiplexing to TCP |
//! | [`tcp`]  | connections: `input`, `output`, `timer`, the TCB, RTO, out-of-order queue |
//! | [`socket`] | the sans-IO API on a [`Stack`]: listen/accept/connect/send/recv/close |
//! | `runtime` | (Linux) a protocol thread per stack and blocking, std-like sockets for application threads |
//!
//! The protocol core never reads a clock: callers pass [`time::Instant`] in.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_debug_implementations)]

pub mod buf;
pub mod iface;
pub mod phy;
#[cfg(target_os = "linux")]
pub mod runtime;
pub mod sim;
pub mod socket;
pub mod stack;
pub mod tcp;
pub mod time;
pub mod wire;

pub use socket::{Error, ListenerHandle, Readiness, Shutdown, TcpHandle};
pub use stack::{Stack, StackConfig};
