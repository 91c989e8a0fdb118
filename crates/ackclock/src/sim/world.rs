//! The world: stacks and routers joined by links, run on virtual time.
//!
//! # The event loop
//!
//! Time jumps from event to event: the next instant is the earliest of every stack's
//! [`Stack::poll_at`] and every link's [`Link::poll_at`] (a frame arrives, or one starts on
//! the wire). Nothing happens between events, so an idle second costs nothing and a
//! simulated run goes as fast as the protocol code.
//!
//! One step at instant `t`:
//! 1. every host receives what its link delivered by `t` ([`Stack::receive`]); every router
//!    forwards what arrived by `t`;
//! 2. the caller's hook runs, if any (`run_while`): reading and writing sockets here is what
//!    a real application does between receive and transmit;
//! 3. every host runs its timers and transmits ([`Stack::transmit`]);
//! 4. every link starts the transmissions due by `t`.
//!
//! Hosts and routers are visited in the order they were added, links likewise, and every
//! random draw comes from per-link streams derived from the world's seed, so a run is a
//! function of the seed and the calls made: the same seed gives the same run, bit for bit.
//!
//! # Hosts and routers
//!
//! A host is a [`Stack`] on at most one link. A router is a node with any number of ports
//! that forwards each frame, at the instant it arrives, to the port toward its destination:
//! the destination address of an IPv4 packet, the target protocol address of an ARP packet.
//! It rewrites nothing (no TTL decrement, MACs unchanged): to the hosts it is one Ethernet
//! segment, so they share a subnet and resolve each other with ARP across routers, as
//! through a switch. Routes are computed from the topology (fewest hops, ties to the lower
//! port). A router's output queue is the sending end's queue of the link it forwards onto.
//! Frames with no route, or whose route leads back out of the port they came in on (a
//! gratuitous ARP), are dropped and counted.
//!
//! Links may differ in MTU. A router does not fragment: an IPv4 packet longer than the
//! output link's MTU is dropped, and if it has Don't Fragment set and the router has an
//! address of its own ([`World::add_router_at`]), answered with an ICMP Datagram Too Big
//! naming that MTU (RFC 1191 §3, RFC 1812 §5.2.7.1), sent back out of the port it came in
//! on. A router without an address drops it silently: a path MTU black hole (RFC 2923 §2.1).

use super::link::{Link, LinkConfig, LinkStats, Side};
use crate::buf::{PBuf, Pool, PoolConfig, DEFAULT_HEADROOM};
use crate::iface::InterfaceConfig;
use crate::phy::{Batch, Capabilities, Capture, PcapWriter, Resolution};
use crate::rng::Rng;
use crate::time::{Duration, Instant};
use crate::wire::icmpv4::DstUnreachable;
use crate::wire::{
    ArpPacket, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv4Packet, Icmpv4Repr, IpProtocol,
    Ipv4Packet, Ipv4Repr,
};
use crate::{Stack, StackConfig};
use core::fmt;
use core::net::Ipv4Addr;
use std::collections::VecDeque;
use std::io::{self, Write};

/// A stack configuration with address `addr/prefix_len`, stack seed `seed`, and defaults
/// for everything else.
pub fn host_config(addr: Ipv4Addr, prefix_len: u8, seed: u64) -> StackConfig {
    let mut config = StackConfig::new(InterfaceConfig::new(addr, prefix_len));
    config.seed = seed;
    config
}

/// A host or router of a [`World`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

impl NodeId {
    /// Position in the order nodes were added.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A link of a [`World`]. Side A is the first node given to [`World::connect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(u32);

impl LinkId {
    /// Position in the order links were added.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Counters of a router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RouterStats {
    /// Frames handed to an output link (its queue may still drop them).
    pub forwarded: u64,
    /// No route, or the route leads back out of the arrival port.
    pub no_route: u64,
    /// Neither a parsable IPv4 nor ARP packet.
    pub malformed: u64,
    /// IPv4 packets longer than the output link's MTU: dropped (no fragmentation).
    pub too_big: u64,
    /// ICMP Datagram Too Big messages sent for them (Don't Fragment set, and the router
    /// has an address).
    pub icmp_too_big: u64,
}

#[derive(Debug, Clone, Copy)]
struct Port {
    link: usize,
    side: Side,
}

type Sink = Box<dyn Write + Send>;

struct Host {
    stack: Stack,
    port: Option<Port>,
    pcap: Option<PcapWriter<Sink>>,
    pcap_error: Option<io::Error>,
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("addr", &self.stack.iface().addr())
            .field("port", &self.port)
            .field("capturing", &self.pcap.is_some())
            .finish()
    }
}

#[derive(Debug)]
struct Router {
    ports: Vec<Port>,
    /// Host address (as bits) -> port index, sorted.
    routes: Vec<(u32, usize)>,
    rx: Batch,
    stats: RouterStats,
    /// The source of its ICMP messages; none: it sends none.
    addr: Option<Ipv4Addr>,
    /// Buffers for its ICMP messages, made at the first.
    pool: Option<Pool>,
}

#[derive(Debug)]
enum Node {
    Host(Box<Host>),
    Router(Router),
}

/// Steps at one instant before the clock is nudged on (a stack whose `poll_at` keeps
/// asking for the present without making progress).
const MAX_STEPS_AT_ONE_INSTANT: u32 = 10_000;

/// The simulated world; see the [module docs](self).
#[derive(Debug)]
pub struct World {
    seed: u64,
    now: Instant,
    nodes: Vec<Node>,
    links: Vec<Link>,
    /// The nodes at sides A and B of each link.
    ends: Vec<[NodeId; 2]>,
    routes_dirty: bool,
    steps: u64,
    same_instant: u32,
    stalls: u64,
}

impl World {
    /// An empty world at time zero whose links draw their randomness from `seed`.
    pub fn new(seed: u64) -> World {
        World {
            seed,
            now: Instant::ZERO,
            nodes: Vec::new(),
            links: Vec::new(),
            ends: Vec::new(),
            routes_dirty: false,
            steps: 0,
            same_instant: 0,
            stalls: 0,
        }
    }

    /// The seed the world was made with, from which its links' randomness is derived.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Steps taken so far (each at one event instant).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Times the clock had to be nudged past an instant at which a stack kept asking to be
    /// polled without progress (see `MAX_STEPS_AT_ONE_INSTANT`); zero in a healthy run.
    pub fn stalls(&self) -> u64 {
        self.stalls
    }

    /// Add a stack built from `config` for an Ethernet device with MTU 1500.
    ///
    /// # Panics
    /// If the pool configuration is invalid.
    pub fn add_stack(&mut self, config: StackConfig) -> NodeId {
        let stack = Stack::new(config, Capabilities::ethernet(1500), self.now).expect("stack pool configuration");
        self.add_stack_with(stack)
    }

    /// Add a stack built by the caller (for other device capabilities).
    pub fn add_stack_with(&mut self, stack: Stack) -> NodeId {
        self.push(Node::Host(Box::new(Host { stack, port: None, pcap: None, pcap_error: None })))
    }

    /// Add a stack with address `addr/prefix_len`, default settings, and a seed derived
    /// from the world's seed and the node's index.
    pub fn add_host(&mut self, addr: Ipv4Addr, prefix_len: u8) -> NodeId {
        let seed = Rng::derive(self.seed, 0x5eed_0000 + self.nodes.len() as u64).next_u64();
        self.add_stack(host_config(addr, prefix_len, seed))
    }

    /// Add a router (no ports until connected), without an address: it drops a packet
    /// too long for the output link without a word (a path MTU black hole).
    pub fn add_router(&mut self) -> NodeId {
        self.push(Node::Router(Router {
            ports: Vec::new(),
            routes: Vec::new(),
            rx: Batch::with_capacity(64),
            stats: RouterStats::default(),
            addr: None,
            pool: None,
        }))
    }

    /// Add a router with address `addr`, the source of the ICMP Datagram Too Big messages
    /// it sends for packets too long for the output link (see the module documentation).
    pub fn add_router_at(&mut self, addr: Ipv4Addr) -> NodeId {
        let id = self.add_router();
        if let Node::Router(r) = &mut self.nodes[id.index()] {
            r.addr = Some(addr);
        }
        id
    }

    fn push(&mut self, node: Node) -> NodeId {
        let id = NodeId(u32::try_from(self.nodes.len()).expect("too many nodes"));
        self.nodes.push(node);
        self.routes_dirty = true;
        id
    }

    /// Join `a` (side A) and `b` (side B) with a link.
    ///
    /// # Panics
    /// If a host is already connected (a stack has one interface), if `a == b`, if the
    /// configuration is invalid, or if a host's MTU exceeds the link's.
    pub fn connect(&mut self, a: NodeId, b: NodeId, config: LinkConfig) -> LinkId {
        assert_ne!(a, b, "a node cannot be linked to itself");
        let link = self.links.len();
        for (node, side) in [(a, Side::A), (b, Side::B)] {
            let port = Port { link, side };
            match &mut self.nodes[node.index()] {
                Node::Host(h) => {
                    assert!(h.port.is_none(), "host {node:?} is already connected");
                    assert!(h.stack.iface().capabilities().mtu <= config.mtu, "host {node:?} MTU exceeds the link's");
                    h.port = Some(port);
                }
                Node::Router(r) => r.ports.push(port),
            }
        }
        let seed = Rng::derive(self.seed, link as u64).next_u64();
        self.links.push(Link::new(config, seed));
        self.ends.push([a, b]);
        self.routes_dirty = true;
        LinkId(link as u32)
    }

    fn host(&self, id: NodeId) -> &Host {
        match &self.nodes[id.index()] {
            Node::Host(h) => h,
            Node::Router(_) => panic!("node {id:?} is a router, not a stack"),
        }
    }

    fn host_mut(&mut self, id: NodeId) -> &mut Host {
        match &mut self.nodes[id.index()] {
            Node::Host(h) => h,
            Node::Router(_) => panic!("node {id:?} is a router, not a stack"),
        }
    }

    /// The stack of host `id`.
    ///
    /// # Panics
    /// If `id` is a router.
    pub fn stack(&self, id: NodeId) -> &Stack {
        &self.host(id).stack
    }

    /// The stack of host `id`, to drive its sockets between steps.
    ///
    /// # Panics
    /// If `id` is a router.
    pub fn stack_mut(&mut self, id: NodeId) -> &mut Stack {
        &mut self.host_mut(id).stack
    }

    /// Whether `id` is a host (else a router).
    pub fn is_host(&self, id: NodeId) -> bool {
        matches!(self.nodes[id.index()], Node::Host(_))
    }

    /// Counters of router `id`.
    ///
    /// # Panics
    /// If `id` is a host.
    pub fn router_stats(&self, id: NodeId) -> &RouterStats {
        match &self.nodes[id.index()] {
            Node::Router(r) => &r.stats,
            Node::Host(_) => panic!("node {id:?} is a host, not a router"),
        }
    }

    /// Link `id`.
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.index()]
    }

    /// Counters of the direction of link `id` whose frames `from` sends.
    pub fn link_stats(&self, id: LinkId, from: Side) -> &LinkStats {
        self.links[id.index()].stats(from)
    }

    /// The nodes at sides A and B of link `id`.
    pub fn link_ends(&self, id: LinkId) -> [NodeId; 2] {
        self.ends[id.index()]
    }

    /// Record every frame host `id` receives and transmits into a pcap capture on `out`
    /// (timestamps in virtual time). Replaces a capture already running.
    pub fn capture(&mut self, id: NodeId, out: impl Write + Send + 'static, resolution: Resolution) -> io::Result<()> {
        let pcap = PcapWriter::new(Box::new(out) as Sink, resolution)?;
        let h = self.host_mut(id);
        h.pcap = Some(pcap);
        h.pcap_error = None;
        Ok(())
    }

    /// Stop capturing on host `id`; returns the flushed writer, or the first write error.
    pub fn end_capture(&mut self, id: NodeId) -> Option<io::Result<PcapWriter<Box<dyn Write + Send>>>> {
        let h = self.host_mut(id);
        let mut pcap = h.pcap.take()?;
        Some(match h.pcap_error.take() {
            Some(e) => Err(e),
            None => pcap.flush().map(|()| pcap),
        })
    }

    /// The next instant something is due, or `None` if nothing ever will be.
    pub fn next_event(&self) -> Option<Instant> {
        let hosts = self.nodes.iter().filter_map(|n| match n {
            Node::Host(h) if h.port.is_some() => h.stack.poll_at(),
            _ => None,
        });
        hosts.chain(self.links.iter().filter_map(Link::poll_at)).min()
    }

    /// Take one step at the next event (or now, if something is due already). Returns the
    /// instant of the step, or `None` (and does nothing) if nothing will ever happen.
    /// Unlike the run methods it takes no step at the current instant first, so stacks
    /// added since the last step stay silent until something else is due.
    pub fn step(&mut self) -> Option<Instant> {
        let at = self.next_at()?;
        self.step_at(at, &mut |_| true);
        Some(at)
    }

    /// Run every event up to and including `t`, and a step at `t` itself, so that every
    /// stack's clock reads `t` when it returns. Like every run, it starts with a step at
    /// the current instant, which takes in whatever the caller changed since the last one
    /// (new stacks announce themselves, socket calls send).
    pub fn run_until(&mut self, t: Instant) {
        let mut at_t = false;
        if t >= self.now {
            self.step_at(self.now, &mut |_| true);
            at_t = self.now == t;
        }
        while let Some(at) = self.next_at() {
            if at > t {
                break;
            }
            self.step_at(at, &mut |_| true);
            at_t = at == t;
        }
        if !at_t && t >= self.now {
            self.step_at(t, &mut |_| true);
        }
    }

    /// [`run_until`](Self::run_until) `now + d`.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + d);
    }

    /// Step from event to event, starting at the current instant, while `f` returns true.
    /// `f` runs in every step between the receive and the transmit phase, with the world at
    /// the step's instant; the step in which it returns false still completes. Returns true
    /// when `f` stopped the run, false when the world went idle (nothing will ever happen
    /// again).
    pub fn run_while(&mut self, mut f: impl FnMut(&mut World) -> bool) -> bool {
        if !self.step_at(self.now, &mut f) {
            return true;
        }
        while let Some(at) = self.next_at() {
            if !self.step_at(at, &mut f) {
                return true;
            }
        }
        false
    }

    /// The instant of the next step: the next event, or now if it is overdue.
    fn next_at(&mut self) -> Option<Instant> {
        let next = self.next_event()?.max(self.now);
        if next > self.now {
            self.same_instant = 0;
            return Some(next);
        }
        self.same_instant += 1;
        if self.same_instant > MAX_STEPS_AT_ONE_INSTANT {
            self.same_instant = 0;
            self.stalls += 1;
            return Some(self.now + Duration::from_micros(1));
        }
        Some(next)
    }

    /// One step at `t` (see the module docs); returns what the hook returned.
    fn step_at(&mut self, t: Instant, hook: &mut dyn FnMut(&mut World) -> bool) -> bool {
        debug_assert!(t >= self.now, "time runs forward");
        self.now = t;
        self.steps += 1;
        if self.routes_dirty {
            self.compute_routes();
        }
        for node in &mut self.nodes {
            match node {
                Node::Host(h) => host_io(h, &mut self.links, t, Phase::Receive),
                Node::Router(r) => r.forward(&mut self.links, t),
            }
        }
        let go_on = hook(self);
        for node in &mut self.nodes {
            if let Node::Host(h) = node {
                host_io(h, &mut self.links, t, Phase::Transmit);
            }
        }
        for link in &mut self.links {
            link.advance(t);
        }
        go_on
    }

    /// Each router's port toward each host: breadth-first over the topology.
    fn compute_routes(&mut self) {
        self.routes_dirty = false;
        let ports_of = |nodes: &[Node], n: usize| -> Vec<Port> {
            match &nodes[n] {
                Node::Host(h) => h.port.into_iter().collect(),
                Node::Router(r) => r.ports.clone(),
            }
        };
        for r in 0..self.nodes.len() {
            let Node::Router(router) = &self.nodes[r] else { continue };
            let mut routes = Vec::new();
            let mut seen = vec![false; self.nodes.len()];
            seen[r] = true;
            // (node, port of `r` the path leaves by)
            let mut queue: VecDeque<(usize, usize)> = VecDeque::new();
            for (i, p) in router.ports.iter().enumerate() {
                queue.push_back((self.ends[p.link][p.side.other() as usize].index(), i));
            }
            while let Some((n, first)) = queue.pop_front() {
                if std::mem::replace(&mut seen[n], true) {
                    continue;
                }
                match &self.nodes[n] {
                    Node::Host(h) => routes.push((h.stack.iface().addr().to_bits(), first)),
                    Node::Router(_) => {
                        for p in ports_of(&self.nodes, n) {
                            queue.push_back((self.ends[p.link][p.side.other() as usize].index(), first));
                        }
                    }
                }
            }
            routes.sort_unstable();
            routes.dedup_by_key(|e| e.0);
            if let Node::Router(router) = &mut self.nodes[r] {
                router.routes = routes;
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Receive,
    Transmit,
}

/// Let a host receive from or transmit to its link, through its capture if it has one.
fn host_io(h: &mut Host, links: &mut [Link], t: Instant, phase: Phase) {
    let Some(port) = h.port else { return };
    let mut end = links[port.link].end(port.side);
    let Some(pcap) = h.pcap.take() else {
        match phase {
            Phase::Receive => {
                h.stack.receive(t, &mut end);
            }
            Phase::Transmit => h.stack.transmit(t, &mut end),
        }
        return;
    };
    let mut dev = Capture::new(end, pcap);
    match phase {
        Phase::Receive => {
            h.stack.receive(t, &mut dev);
        }
        Phase::Transmit => h.stack.transmit(t, &mut dev),
    }
    if h.pcap_error.is_none() {
        h.pcap_error = dev.take_error();
    }
    h.pcap = Some(dev.into_parts().1);
}

impl Router {
    /// Forward every frame that has arrived on any port by `t`.
    fn forward(&mut self, links: &mut [Link], t: Instant) {
        for i in 0..self.ports.len() {
            let port = self.ports[i];
            loop {
                let n = links[port.link].deliver(t, port.side, &mut self.rx);
                while let Some(frame) = self.rx.pop() {
                    self.route(links, t, frame, i);
                }
                if n < self.rx.capacity() {
                    break;
                }
            }
        }
    }

    fn route(&mut self, links: &mut [Link], t: Instant, frame: PBuf, arrived_on: usize) {
        let Some(dst) = destination(frame.data()) else {
            self.stats.malformed += 1;
            return;
        };
        match self.routes.binary_search_by_key(&dst.to_bits(), |e| e.0) {
            Ok(i) if self.routes[i].1 != arrived_on => {
                let out = self.ports[self.routes[i].1];
                let mtu = links[out.link].config().mtu;
                if let Some(df) = too_long(frame.data(), mtu) {
                    self.stats.too_big += 1;
                    if df {
                        self.too_big(links, t, &frame, mtu, arrived_on);
                    }
                    return;
                }
                self.stats.forwarded += 1;
                links[out.link].send(t, out.side, frame);
            }
            _ => self.stats.no_route += 1,
        }
    }

    /// An ICMP Datagram Too Big for `frame`, naming the next hop's `mtu` (RFC 1191 §3),
    /// from the router's address to the packet's source, back out of port `arrived_on`; the
    /// Ethernet header answers the frame's. Nothing without an address, or without a buffer.
    fn too_big(&mut self, links: &mut [Link], t: Instant, frame: &PBuf, mtu: usize, arrived_on: usize) {
        let Some(addr) = self.addr else { return };
        let Ok(eth) = EthernetFrame::new_checked(frame.data()) else { return };
        let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else { return };
        // The quote: the IPv4 header and the first 8 bytes of its payload (RFC 792).
        let quoted = &eth.payload()[..(ip.header_len() + 8).min(ip.total_len() as usize)];
        let next_hop_mtu = u16::try_from(mtu).unwrap_or(u16::MAX);
        let msg = Icmpv4Repr::DstUnreachable { reason: DstUnreachable::FRAG_NEEDED, next_hop_mtu, header: quoted };
        let ip_out = Ipv4Repr {
            src_addr: addr,
            dst_addr: ip.src_addr(),
            protocol: IpProtocol::ICMP,
            payload_len: msg.buffer_len(),
            ttl: 64,
            ident: 0,
            dont_frag: false,
            dscp_ecn: 0,
            fragment: None,
        };
        let a = addr.octets();
        let eth_out = EthernetRepr {
            src_addr: EthernetAddress([0x02, 0xfe, a[0], a[1], a[2], a[3]]),
            dst_addr: eth.src_addr(),
            ethertype: EtherType::IPV4,
            vlan_id: None,
        };
        let pool = match &self.pool {
            Some(p) => p,
            None => {
                let config =
                    PoolConfig { buffers: 64, buffer_size: DEFAULT_HEADROOM + 128, headroom: DEFAULT_HEADROOM };
                let Ok(p) = Pool::new(config) else { return };
                self.pool.insert(p)
            }
        };
        let Ok(mut out) = pool.alloc() else { return };
        let (l2, l3) = (eth_out.header_len(), ip_out.header_len());
        let Ok(bytes) = out.append(l2 + l3 + msg.buffer_len()) else { return };
        eth_out.emit(&mut EthernetFrame::new_unchecked(&mut bytes[..]));
        ip_out.emit(&mut Ipv4Packet::new_unchecked(&mut bytes[l2..l2 + l3]), true);
        msg.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[l2 + l3..]));
        self.stats.icmp_too_big += 1;
        let back = self.ports[arrived_on];
        links[back.link].send(t, back.side, out);
    }
}

/// For an IPv4 frame whose packet is longer than `mtu`: whether Don't Fragment is set.
fn too_long(frame: &[u8], mtu: usize) -> Option<bool> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    (ip.total_len() as usize > mtu).then(|| ip.dont_frag())
}

/// The address a frame is forwarded by: IPv4 destination, or ARP target.
fn destination(frame: &[u8]) -> Option<Ipv4Addr> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    match eth.ethertype() {
        EtherType::IPV4 => Ipv4Packet::new_checked(eth.payload()).ok().map(|ip| ip.dst_addr()),
        EtherType::ARP => ArpPacket::new_checked(eth.payload()).ok().map(|arp| arp.target_protocol_addr()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ArpOperation, ArpRepr, EthernetAddress, EthernetRepr, IpProtocol, Ipv4Repr};

    fn eth(ethertype: EtherType, payload_len: usize) -> (EthernetRepr, Vec<u8>) {
        let repr = EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress::BROADCAST,
            ethertype,
            vlan_id: None,
        };
        let mut buf = vec![0; repr.buffer_len(payload_len)];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        (repr, buf)
    }

    #[test]
    fn routers_forward_ipv4_by_destination_and_arp_by_target() {
        let ip = Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 2, 7),
            protocol: IpProtocol::TCP,
            payload_len: 20,
            ttl: 64,
            ident: 1,
            dont_frag: true,
            dscp_ecn: 0,
            fragment: None,
        };
        let (e, mut frame) = eth(EtherType::IPV4, ip.header_len() + 20);
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut frame[e.header_len()..]), true);
        assert_eq!(destination(&frame), Some(Ipv4Addr::new(10, 0, 2, 7)));

        let arp = ArpRepr {
            operation: ArpOperation::REQUEST,
            source_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 9),
        };
        let (e, mut frame) = eth(EtherType::ARP, arp.buffer_len());
        arp.emit(&mut ArpPacket::new_unchecked(&mut frame[e.header_len()..]));
        assert_eq!(destination(&frame), Some(Ipv4Addr::new(10, 0, 0, 9)));

        let (_, frame) = eth(EtherType(0x86dd), 40);
        assert_eq!(destination(&frame), None, "not IPv4 or ARP");
        assert_eq!(destination(&[0; 10]), None, "truncated");
    }
}
