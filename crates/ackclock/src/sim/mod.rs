//! The deterministic network simulator: the same stack code as production, on simulated
//! links and virtual time.
//!
//! - [`link`]: a simulated Ethernet link, usable on its own as a [`Device`](crate::phy::Device)
//!   ([`Link::end`]): per-direction rate, propagation delay and drop-tail queue, Ethernet
//!   on-wire framing costs, an optional half-duplex shared medium (10 Mb/s Ethernet), and
//!   impairments (Bernoulli and Gilbert-Elliott loss, corruption, duplication, reordering).
//! - [`world`]: hosts (stacks), routers and links on one virtual clock that jumps from event
//!   to event.
//! - [`topology`]: ready-made topologies (a dumbbell).
//! - [`rng`]: the one source of randomness, seeded by the world (the crate's [`crate::rng`],
//!   shared with the device layer's impairment wrapper).
//!
//! ```
//! use ackclock::sim::{LinkConfig, World};
//! use ackclock::time::Instant;
//! use core::net::{Ipv4Addr, SocketAddrV4};
//!
//! let mut world = World::new(7);
//! let a = world.add_host(Ipv4Addr::new(10, 0, 0, 1), 24);
//! let b = world.add_host(Ipv4Addr::new(10, 0, 0, 2), 24);
//! let link = world.connect(a, b, LinkConfig::ethernet10());
//! let listener = world.stack_mut(b).tcp_listen(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 9), 4).unwrap();
//! let conn = world.stack_mut(a).tcp_connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 9)).unwrap();
//! let mut server = None;
//! world.run_while(|w| {
//!     server = w.stack_mut(b).tcp_accept(listener).ok();
//!     server.is_none() && w.now() < Instant::from_secs(1)
//! });
//! assert!(server.is_some(), "the handshake completes");
//! assert!(world.link_stats(link, ackclock::sim::Side::A).delivered >= 2, "ARP, SYN, ACK");
//! # let _ = conn;
//! ```

pub mod link;
pub mod topology;
pub mod world;

pub use crate::rng;
pub use crate::rng::Rng;
pub use link::{Channel, Duplex, Impairments, Link, LinkConfig, LinkEnd, LinkStats, Loss, QueueLimit, Reorder, Side};
pub use topology::{Dumbbell, DumbbellConfig};
pub use world::{host_config, LinkId, NodeId, RouterStats, World};
