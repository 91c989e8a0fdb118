//! Ready-made topologies.

use super::link::LinkConfig;
use super::world::{LinkId, NodeId, World};
use crate::StackConfig;
use core::net::Ipv4Addr;

/// How a [`Dumbbell`] is built.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DumbbellConfig {
    /// Sender/receiver pairs.
    pub pairs: usize,
    /// Each sender to the left router (side A = sender).
    pub sender_access: LinkConfig,
    /// Each receiver to the right router (side A = receiver).
    pub receiver_access: LinkConfig,
    /// Left router (side A) to right router (side B): data crosses it A to B, so its
    /// side-A queue is the bottleneck queue.
    pub bottleneck: LinkConfig,
}

/// N senders on one router, N receivers on another, one bottleneck link between them.
///
/// ```text
/// sender 0 ─┐                          ┌─ receiver 0
/// sender 1 ─┼─ left ══ bottleneck ══ right ─┼─ receiver 1
///    ...   ─┘                          └─ ...
/// ```
///
/// Addresses: sender `i` is `10.0.1.(i+1)`, receiver `i` is `10.0.2.(i+1)`, all in
/// `10.0.0.0/16`, so every host reaches every other on-link and resolves it with ARP
/// through the routers (see [`world`](super::world)). Up to 254 pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dumbbell {
    /// The sending hosts, pair `i` at index `i`.
    pub senders: Vec<NodeId>,
    /// The receiving hosts, pair `i` at index `i`.
    pub receivers: Vec<NodeId>,
    /// The router the senders attach to (side A of the bottleneck).
    pub left: NodeId,
    /// The router the receivers attach to (side B of the bottleneck).
    pub right: NodeId,
    /// Each sender's link to the left router, in the order of `senders`.
    pub sender_links: Vec<LinkId>,
    /// Each receiver's link to the right router, in the order of `receivers`.
    pub receiver_links: Vec<LinkId>,
    /// The link between the two routers.
    pub bottleneck: LinkId,
}

/// Prefix length of the dumbbell's one subnet.
pub const DUMBBELL_PREFIX: u8 = 16;

impl Dumbbell {
    /// Address of sender `i`: `10.0.1.(i+1)`.
    pub const fn sender_addr(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 1, i as u8 + 1)
    }

    /// Address of receiver `i`: `10.0.2.(i+1)`.
    pub const fn receiver_addr(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 2, i as u8 + 1)
    }

    /// Build the topology in `world`. `stack` makes each host's configuration from its
    /// address, prefix length ([`DUMBBELL_PREFIX`]) and a seed derived from the world's;
    /// [`host_config`](super::host_config) is the plain choice.
    ///
    /// # Panics
    /// If `pairs` is 0 or more than 254.
    pub fn build(
        world: &mut World,
        config: &DumbbellConfig,
        mut stack: impl FnMut(Ipv4Addr, u8, u64) -> StackConfig,
    ) -> Dumbbell {
        assert!((1..=254).contains(&config.pairs), "1 to 254 pairs");
        let left = world.add_router();
        let right = world.add_router();
        let bottleneck = world.connect(left, right, config.bottleneck);
        let mut host = |world: &mut World, addr: Ipv4Addr| {
            let seed = super::Rng::derive(world.seed(), u64::from(addr.to_bits())).next_u64();
            world.add_stack(stack(addr, DUMBBELL_PREFIX, seed))
        };
        let (mut senders, mut receivers, mut sender_links, mut receiver_links) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..config.pairs {
            let s = host(world, Dumbbell::sender_addr(i));
            sender_links.push(world.connect(s, left, config.sender_access));
            senders.push(s);
        }
        for i in 0..config.pairs {
            let r = host(world, Dumbbell::receiver_addr(i));
            receiver_links.push(world.connect(r, right, config.receiver_access));
            receivers.push(r);
        }
        Dumbbell { senders, receivers, left, right, sender_links, receiver_links, bottleneck }
    }
}
