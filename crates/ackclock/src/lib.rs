//! ackclock: a user-space TCP/IPv4 stack.
//!
//! A sans-IO protocol core (it never reads a clock or touches a socket: every call takes
//! `now`, and [`Stack::poll_at`] says when to call next), packet buffers handed between the
//! stack and devices in batches, and one copy of the payload per direction with the checksum
//! computed during that copy. The same code runs over a Linux TAP device, over the in-memory
//! pipe, and inside the deterministic simulator ([`sim`]).
//!
//! The layers, from the wire up (each imports only the ones above it in this table):
//!
//! | module  | owns |
//! |---------|------|
//! | [`time`], [`rng`], [`stats`] | virtual time, the seeded random generator, stack-wide counters |
//! | [`wire`] | packet formats and the Internet checksum |
//! | [`buf`]  | the packet-buffer pool: one contiguous frame per buffer, headroom, metadata |
//! | [`phy`]  | devices as rings of buffers: in-memory pipe, TAP, impairment, capture |
//! | [`iface`] | Ethernet, ARP, IPv4, ICMP; demultiplexing to TCP |
//! | [`tcp`]  | connections: table, input, output, timers, congestion control, recovery |
//! | [`socket`], [`stack`] | the sans-IO API on a [`Stack`]: listen/accept/connect/send/recv/close |
//! | `runtime` | (Linux) a protocol thread per stack and blocking, std-like sockets for application threads |
//! | [`sim`] | virtual-time links and worlds running the same stack |
//!
//! `ARCHITECTURE.md` in the repository describes the data path and the design decisions.
//!
//! # Example
//!
//! Two stacks joined by an in-memory pipe, driven by hand on virtual time:
//!
//! ```
//! use ackclock::iface::InterfaceConfig;
//! use ackclock::phy::{pipe, Device, PipeConfig};
//! use ackclock::time::{Duration, Instant};
//! use ackclock::{Stack, StackConfig};
//! use core::net::{Ipv4Addr, SocketAddrV4};
//!
//! let (a_addr, b_addr) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
//! let (mut da, mut db) = pipe(PipeConfig::default());
//! let mut now = Instant::from_secs(1);
//! let config = |addr| StackConfig::new(InterfaceConfig::new(addr, 24));
//! let mut a = Stack::new(config(a_addr), da.capabilities(), now).unwrap();
//! let mut b = Stack::new(config(b_addr), db.capabilities(), now).unwrap();
//!
//! let listener = b.tcp_listen(SocketAddrV4::new(b_addr, 7), 16).unwrap();
//! let client = a.tcp_connect(SocketAddrV4::new(b_addr, 7)).unwrap();
//! let (mut server, mut sent, mut got) = (None, false, Vec::new());
//! while got.len() < 5 {
//!     // The loop every embedder writes: receive, application, transmit, advance time.
//!     a.receive(now, &mut da);
//!     b.receive(now, &mut db);
//!     if server.is_none() {
//!         server = b.tcp_accept(listener).ok();
//!     }
//!     if !sent && a.tcp_send(client, b"hello").is_ok() {
//!         sent = true;
//!     }
//!     if let Some(s) = server {
//!         let mut buf = [0u8; 64];
//!         if let Ok(n) = b.tcp_recv(s, &mut buf) {
//!             got.extend_from_slice(&buf[..n]);
//!         }
//!     }
//!     a.transmit(now, &mut da);
//!     b.transmit(now, &mut db);
//!     now = now + Duration::from_millis(1);
//!     assert!(now < Instant::from_secs(10), "the transfer finishes");
//! }
//! assert_eq!(got, b"hello");
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_debug_implementations)]
#![warn(missing_docs)]

pub mod buf;
pub mod iface;
pub mod phy;
pub mod rng;
#[cfg(target_os = "linux")]
pub mod runtime;
pub mod sim;
pub mod socket;
pub mod stack;
pub mod stats;
pub mod tcp;
pub mod time;
pub mod udp;
pub mod wire;

pub use socket::{Error, Event, ListenerHandle, Readiness, Shutdown, TcpHandle};
pub use stack::{Stack, StackConfig};

/// `config` for the crate's property tests, or a few cases of it under Miri, which
/// interprets every step and, isolated from the host, cannot read or write the regression
/// files (their cases run natively).
#[cfg(test)]
pub(crate) fn proptest_config(config: proptest::test_runner::Config) -> proptest::test_runner::Config {
    if cfg!(miri) {
        proptest::test_runner::Config { cases: 4, failure_persistence: None, ..config }
    } else {
        config
    }
}
