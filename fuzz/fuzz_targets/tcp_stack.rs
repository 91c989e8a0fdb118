//! The whole stack under arbitrary segments: two stacks, `A` (client) and `B` (server,
//! listening on port 80), hold an established connection; the input is a program of
//! operations on them: inject raw frames, inject TCP segments aimed at the connection's
//! 4-tuple (sequence numbers near the live ones, valid checksums most of the time), drop,
//! duplicate, reorder or corrupt frames on the link, answer a frame on the link with a
//! router's ICMP error (Datagram Too Big, Destination Unreachable, Time Exceeded), advance
//! time, and make application calls (send, recv, shutdown, close, abort, accept, connect).
//!
//! Checked: no panic; a pool never holds more free buffers than it has; the connection
//! table stays within its bound; while nothing was injected, what each application reads
//! is a prefix of what the other side's application wrote; and once everything is closed,
//! the link cut and time run past every timer, no connection is left and every buffer is
//! back in its pool.
//!
//! The link is the test's own pair of queues (frames move from one stack's transmit ring
//! to the other's `process`, the same buffers, as over `phy::pipe`), so that it can see and
//! tamper with every frame. An input of odd length gets a link that completes checksums
//! (`tx_checksum`, as a TAP's virtio-net header): the stacks leave each data segment's
//! checksum to it, and it completes them into a fresh buffer, as a device's DMA would,
//! before the frame goes on the link (where corruption must still be caught).
#![no_main]

use ackclock::buf::{Flags, PBuf, PoolConfig};
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Batch, Capabilities};
use ackclock::tcp::TcpConfig;
use ackclock::time::{Duration, Instant};
use ackclock::wire::{
    EtherType, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Addr, Ipv4Packet, Ipv4Repr, SackBlocks, TcpFlags,
    TcpPacket, TcpRepr,
};
use ackclock::{Shutdown, Stack, StackConfig, TcpHandle};
use libfuzzer_sys::fuzz_target;

#[path = "../common/frames.rs"]
mod frames;
use std::collections::VecDeque;
use std::net::SocketAddrV4;

const ADDR: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)];
const PORT: u16 = 80;
const QUEUE: usize = 256;
const MAX_HANDLES: usize = 6;
const MAX_CONNECTIONS: usize = 8;
/// Compact TIME-WAIT entries held apart from `MAX_CONNECTIONS` (`TcpConfig::max_time_wait`).
const MAX_TIME_WAIT: usize = 4;

/// The fuzz input as a source of numbers; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        b
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What was seen of one side's segments on the main connection.
#[derive(Default, Clone, Copy)]
struct Seen {
    /// Highest sequence number sent, plus one (SYN and FIN count).
    snd_max: u32,
    ack: u32,
    tsval: u32,
    window: u16,
}

/// The deterministic byte stream a side's application writes on the main connection.
fn stream_byte(side: usize, off: u64) -> u8 {
    let x = off.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (side as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03);
    (x >> 29) as u8
}

struct World {
    stacks: [Stack; 2],
    /// Frames in flight from side i to the other.
    link: [VecDeque<PBuf>; 2],
    now: Instant,
    /// Handles of each side; index 0 is the main connection.
    handles: [Vec<TcpHandle>; 2],
    listener: ackclock::ListenerHandle,
    main_ports: [u16; 2],
    seen: [Seen; 2],
    /// Bytes of the main stream written / read by each side's application.
    written: [u64; 2],
    read: [u64; 2],
    /// Each side's application shut down the writing half of the main connection.
    shut_wr: [bool; 2],
    /// The application shut down reading: what recv returns is no longer the stream.
    shut_rd: [bool; 2],
    /// Something other than the two stacks put a frame on the link: data may differ.
    tainted: bool,
    /// The fuzzed program runs (not the handshake before it or the teardown after it):
    /// frames are counted as the program's.
    program: bool,
    /// The link completes checksums (`tx_checksum`).
    offload: bool,
}

/// `FUZZ_DEBUG` set: print every segment on the main connection and every injection.
fn debug() -> bool {
    static DEBUG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DEBUG.get_or_init(|| std::env::var_os("FUZZ_DEBUG").is_some())
}

fn config(i: usize) -> StackConfig {
    let mut c = StackConfig::new(InterfaceConfig::new(ADDR[i], 24));
    c.seed = i as u64 + 1;
    c.pool = PoolConfig { buffers: 96, ..Default::default() };
    c.tcp = TcpConfig {
        send_buffer: 24 * 1024,
        recv_buffer: 16 * 1024,
        max_connections: MAX_CONNECTIONS,
        max_time_wait: MAX_TIME_WAIT,
        // A's connections also suspect black holes after repeated timeouts.
        mtu_probing: i == 0,
        ..TcpConfig::default()
    };
    c.batch = 32;
    c
}

/// A router's ICMP error answering `frame` (Ethernet, IPv4), from 10.0.0.254: `kind`'s low
/// bits choose a Datagram Too Big reporting `mtu` (most often), another Destination
/// Unreachable code, or a Time Exceeded. `None` if the frame is not IPv4.
fn icmp_error(frame: &[u8], kind: u8, mtu: u16) -> Option<Vec<u8>> {
    use ackclock::wire::icmpv4::DstUnreachable;
    use ackclock::wire::{Icmpv4Packet, Icmpv4Repr};
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    let quote = &eth.payload()[..(ip.header_len() as usize + 8).min(eth.payload().len())];
    let msg = match kind % 8 {
        0..=4 => Icmpv4Repr::DstUnreachable { reason: DstUnreachable::FRAG_NEEDED, next_hop_mtu: mtu, header: quote },
        5 | 6 => Icmpv4Repr::DstUnreachable { reason: DstUnreachable((kind >> 3) % 16), next_hop_mtu: 0, header: quote },
        _ => Icmpv4Repr::TimeExceeded { code: 0, header: quote },
    };
    let ip_out = Ipv4Repr {
        src_addr: Ipv4Addr::new(10, 0, 0, 254),
        dst_addr: ip.src_addr(),
        protocol: IpProtocol::ICMP,
        payload_len: msg.buffer_len(),
        ttl: 64,
        ident: 0,
        dont_frag: false,
        dscp_ecn: 0,
        fragment: None,
    };
    let eth_out = EthernetRepr {
        src_addr: ackclock::wire::EthernetAddress([2, 0, 0, 0, 0, 0xfe]),
        dst_addr: eth.src_addr(),
        ethertype: EtherType::IPV4,
        vlan_id: None,
    };
    let mut out = vec![0u8; 14 + 20 + msg.buffer_len()];
    eth_out.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
    ip_out.emit(&mut Ipv4Packet::new_unchecked(&mut out[14..34]), true);
    msg.emit(&mut Icmpv4Packet::new_unchecked(&mut out[34..]));
    Some(out)
}

fn seq_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl World {
    fn new(offload: bool) -> Option<World> {
        let now = Instant::from_secs(1000);
        let caps = Capabilities { tx_checksum: offload, ..Capabilities::ethernet(1500) };
        let mut a = Stack::new(config(0), caps, now).ok()?;
        let mut b = Stack::new(config(1), caps, now).ok()?;
        let (ma, mb) = (a.iface().mac(), b.iface().mac());
        a.iface_mut().insert_static_neighbor(ADDR[1], mb);
        b.iface_mut().insert_static_neighbor(ADDR[0], ma);
        let listener = b.tcp_listen(SocketAddrV4::new(ADDR[1], PORT), 4).ok()?;
        let c = a.tcp_connect(SocketAddrV4::new(ADDR[1], PORT)).ok()?;
        let mut w = World {
            stacks: [a, b],
            link: [VecDeque::new(), VecDeque::new()],
            now,
            handles: [vec![c], vec![]],
            listener,
            main_ports: [0, PORT],
            seen: [Seen::default(); 2],
            written: [0; 2],
            read: [0; 2],
            shut_wr: [false; 2],
            shut_rd: [false; 2],
            tainted: false,
            program: false,
            offload,
        };
        w.main_ports[0] = w.stacks[0].tcp_tuple(c).ok()?.local_port;
        for _ in 0..10 {
            w.round();
            if let Ok(s) = w.stacks[1].tcp_accept(listener) {
                w.handles[1].push(s);
                break;
            }
            w.now += Duration::from_micros(10);
        }
        assert_eq!(w.handles[1].len(), 1, "the handshake completes on a clean link");
        Some(w)
    }

    /// Run timers and output of side `i`, and put what it sent on the link.
    fn collect(&mut self, i: usize) {
        self.stacks[i].dispatch(self.now);
        while let Some(frame) = self.stacks[i].tx_ring().pop() {
            let Some(frame) = self.completed(i, frame) else { continue };
            self.sniff(i, &frame);
            if self.link[i].len() < QUEUE {
                self.link[i].push_back(frame);
            }
        }
    }

    /// What the device puts on the wire for `frame` from side `i`: with the offload, a frame
    /// marked `CSUM_PARTIAL` is copied into a fresh buffer with its checksum completed (the
    /// sum from `csum_start` to the end, stored at `csum_start + csum_offset`; the field held
    /// the pseudo-header sum). `None`: no buffer for the copy, the frame is dropped.
    fn completed(&self, i: usize, frame: PBuf) -> Option<PBuf> {
        let m = &frame.meta;
        if !self.offload || !m.flags.contains(Flags::CSUM_PARTIAL) {
            return Some(frame);
        }
        assert!(!m.flags.contains(Flags::GSO_TCPV4), "no segmentation offload here");
        let mut bytes = frame.data().to_vec();
        assert_eq!(m.csum_start, 34, "the TCP header after Ethernet and IPv4");
        assert!(ackclock::wire::checksum::complete_partial(&mut bytes, 34, m.csum_offset as usize));
        let mut out = self.stacks[i].pool().alloc().ok()?;
        out.append_copy(&bytes).ok()?;
        Some(out)
    }

    fn sniff(&mut self, i: usize, frame: &PBuf) {
        let Ok(eth) = EthernetFrame::new_checked(frame.data()) else { return };
        if eth.ethertype() != EtherType::IPV4 {
            return;
        }
        let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else { return };
        let Ok(tcp) = TcpPacket::new_checked(ip.payload()) else { return };
        if debug() {
            eprintln!(
                "{:?} {}:{} -> {}:{} seq {} ack {} len {} win {} [{:?}]",
                self.now,
                ["A", "B"][i],
                tcp.src_port(),
                ["A", "B"][1 - i],
                tcp.dst_port(),
                tcp.seq_number(),
                tcp.ack_number(),
                tcp.payload().len(),
                tcp.window_len(),
                tcp.flags()
            );
        }
        if tcp.src_port() != self.main_ports[i] || tcp.dst_port() != self.main_ports[1 - i] {
            return;
        }
        let s = &mut self.seen[i];
        let end = tcp.seq_number().wrapping_add(tcp.segment_len() as u32);
        if s.snd_max == 0 || seq_after(end, s.snd_max) {
            s.snd_max = end;
        }
        if tcp.flags().contains(TcpFlags::ACK) {
            s.ack = tcp.ack_number();
        }
        s.window = tcp.window_len();
        if let Some((val, _)) = tcp.timestamps_fast() {
            s.tsval = val;
        }
    }

    /// Hand the next `n` frames from side `from` to the other side, as one received batch
    /// (so that receive aggregation, on by default, sees them together, injected ones among
    /// them).
    fn deliver(&mut self, from: usize, n: usize) {
        let mut batch = Batch::with_capacity(n.max(1));
        for _ in 0..n {
            let Some(frame) = self.link[from].pop_front() else { break };
            self.count_frame(1 - from);
            if let Err(frame) = batch.push(frame) {
                self.link[from].push_front(frame);
                break;
            }
        }
        self.stacks[1 - from].process_batch(self.now, &mut batch);
        self.collect(1 - from);
    }

    /// Everything in flight both ways, then both sides' output.
    fn round(&mut self) {
        self.collect(0);
        self.collect(1);
        let n = self.link[0].len();
        self.deliver(0, n);
        let n = self.link[1].len();
        self.deliver(1, n);
    }

    /// One frame about to reach side `to`, for the report of frames per target.
    fn count_frame(&self, to: usize) {
        if !self.program {
            return frames::outside(1);
        }
        let main = self.handles[to].first().and_then(|&h| self.stacks[to].tcp_info(h).ok());
        let live = main.is_some_and(|i| i.state == ackclock::tcp::State::Established);
        frames::program(1, live as u64);
    }

    /// A frame with `bytes`, from `side`'s pool (where the injected frame lands).
    fn frame(&self, side: usize, bytes: &[u8]) -> Option<PBuf> {
        let mut buf = self.stacks[side].pool().alloc().ok()?;
        buf.append(bytes.len()).ok()?.copy_from_slice(bytes);
        Some(buf)
    }

    /// A frame to side `to`: processed now, or with `queued` put on the link behind the
    /// frames in flight to `to`, to arrive in a batch with them.
    fn inject(&mut self, to: usize, bytes: &[u8], taint: bool, queued: bool) {
        if debug() {
            eprintln!("inject to {} {:02x?}", ["A", "B"][to], &bytes[34.min(bytes.len())..]);
        }
        self.tainted |= taint;
        if let Some(f) = self.frame(to, bytes) {
            if queued {
                if self.link[1 - to].len() < QUEUE {
                    self.link[1 - to].push_back(f);
                }
                return;
            }
            self.count_frame(to);
            self.stacks[to].process(self.now, f);
            self.collect(to);
        }
    }

    /// A TCP segment to side `to`, as if from the other side, near the live sequence space.
    fn segment(&mut self, to: usize, queued: bool, r: &mut Input) {
        let from = 1 - to;
        let ctl = r.u8();
        let flags = match ctl & 7 {
            0 => TcpFlags::ACK,
            1 => TcpFlags::ACK | TcpFlags::PSH,
            2 => TcpFlags::ACK | TcpFlags::FIN,
            3 => TcpFlags::RST,
            4 => TcpFlags::RST | TcpFlags::ACK,
            5 => TcpFlags::SYN,
            6 => TcpFlags::SYN | TcpFlags::ACK,
            _ => TcpFlags::from_bits(r.u16()),
        };
        let delta = |r: &mut Input, sel: u8| -> u32 {
            match sel & 3 {
                0 => 0,
                1 => r.u8() as i8 as i32 as u32,
                2 => (r.u16() as i16 as i32).wrapping_mul(8) as u32,
                _ => r.u32(),
            }
        };
        let seq = self.seen[from].snd_max.wrapping_add(delta(r, ctl >> 3));
        let ack = self.seen[to].snd_max.wrapping_add(delta(r, ctl >> 5));
        let opt = r.u8();
        let ts = (opt & 1 != 0).then(|| {
            let val = self.seen[from].tsval.wrapping_add(delta(r, opt >> 1));
            (val, self.seen[to].tsval)
        });
        let mut sack = SackBlocks::new();
        if opt & 8 != 0 {
            for _ in 0..(r.u8() % 5) {
                let left = self.seen[to].snd_max.wrapping_sub(r.u16() as u32 * 8);
                sack.push(left, left.wrapping_add(r.u16() as u32));
            }
        }
        let len = match opt >> 6 {
            0 => 0,
            1 => r.u8() as usize,
            2 => 1448,
            _ => r.u16() as usize % 1461,
        };
        let fill = r.u8();
        let payload: Vec<u8> = (0..len).map(|k| fill.wrapping_add(k as u8)).collect();
        let tcp = TcpRepr {
            src_port: if opt & 16 != 0 { r.u16() } else { self.main_ports[from] },
            dst_port: if opt & 32 != 0 { PORT } else { self.main_ports[to] },
            seq,
            ack: if flags.contains(TcpFlags::ACK) { ack } else { 0 },
            flags,
            window: if opt & 4 != 0 { r.u16() } else { self.seen[from].window.max(1) },
            urgent: 0,
            max_seg_size: flags.contains(TcpFlags::SYN).then(|| r.u16()),
            window_scale: flags.contains(TcpFlags::SYN).then(|| r.u8() % 16),
            sack_permitted: flags.contains(TcpFlags::SYN) && r.u8() & 1 != 0,
            timestamps: ts,
            sack_blocks: sack,
            payload: &payload,
        };
        let bad_checksum = r.u8() == 0xff;
        let bytes = frame_bytes(&self.stacks[to], ADDR[from], &tcp, bad_checksum);
        // A segment with a bad checksum must change nothing: the stream stays checked.
        self.inject(to, &bytes, !bad_checksum, queued);
    }

    fn handle(&self, side: usize, r: &mut Input) -> Option<TcpHandle> {
        let h = &self.handles[side];
        (!h.is_empty()).then(|| h[r.u8() as usize % h.len()])
    }

    fn app(&mut self, op: u8, r: &mut Input) {
        let side = (op & 1) as usize;
        let Some(h) = self.handle(side, r) else { return };
        let main = self.handles[side][0] == h;
        let stack = &mut self.stacks[side];
        match (op >> 1) % 8 {
            0 => {
                let n = r.u16() as usize % 20_000;
                let off = self.written[side];
                let data: Vec<u8> = (0..n as u64).map(|k| stream_byte(side, off + k)).collect();
                if let Ok(k) = stack.tcp_send(h, &data) {
                    assert!(k <= n);
                    if main {
                        self.written[side] += k as u64;
                    }
                }
            }
            1 => {
                let mut buf = vec![0u8; r.u16() as usize % 20_000 + 1];
                if let Ok(k) = stack.tcp_recv(h, &mut buf) {
                    assert!(k <= buf.len());
                    if main {
                        let off = self.read[side];
                        self.read[side] += k as u64;
                        frames::bytes(k as u64);
                        if !self.tainted && !self.shut_rd[side] {
                            for (j, &b) in buf[..k].iter().enumerate() {
                                assert_eq!(
                                    b,
                                    stream_byte(1 - side, off + j as u64),
                                    "byte {} of the stream",
                                    off + j as u64
                                );
                            }
                            assert!(self.read[side] <= self.written[1 - side], "read more than was written");
                            if k == 0 {
                                assert!(self.shut_wr[1 - side], "end of stream, but the peer did not close");
                                assert_eq!(self.read[side], self.written[1 - side], "end of stream before the end");
                            }
                        }
                    }
                }
            }
            2 => {
                let how = [Shutdown::Read, Shutdown::Write, Shutdown::Both][r.u8() as usize % 3];
                if stack.tcp_shutdown(h, how).is_ok() && main {
                    if how != Shutdown::Read {
                        self.shut_wr[side] = true;
                    }
                    if how != Shutdown::Write {
                        // Queued data is discarded and recv reports the end of the stream:
                        // the reader gave it up.
                        self.shut_rd[side] = true;
                    }
                }
            }
            3 => self.close(side, h),
            4 => {
                let _ = stack.tcp_abort(h);
            }
            5 => {
                if let Ok(rd) = stack.tcp_readiness(h) {
                    let _ = (stack.tcp_info(h), stack.tcp_tuple(h));
                    if rd.closed {
                        assert!(!rd.writable, "a closed connection is not writable");
                    }
                }
            }
            6 => {
                if self.handles[side].len() < MAX_HANDLES {
                    let got = if side == 1 {
                        stack.tcp_accept(self.listener)
                    } else {
                        let port = if r.u8() & 1 == 0 { PORT } else { r.u16() };
                        stack.tcp_connect(SocketAddrV4::new(ADDR[1], port))
                    };
                    if let Ok(h) = got {
                        self.handles[side].push(h);
                    }
                }
            }
            _ => {
                let _ = stack.tcp_acceptable(self.listener);
                let _ = stack.poll_at();
            }
        }
        self.collect(side);
    }

    fn close(&mut self, side: usize, h: TcpHandle) {
        if self.stacks[side].tcp_close(h).is_ok() && self.handles[side].first() == Some(&h) {
            self.shut_wr[side] = true;
        }
    }

    fn check(&self) {
        for s in &self.stacks {
            assert!(s.pool().available() <= s.pool().capacity(), "more free buffers than the pool has");
            // Closed connections in TIME-WAIT leave their slots for compact entries with a
            // limit of their own: both bounds together.
            let bound = MAX_CONNECTIONS + MAX_TIME_WAIT;
            assert!(s.tcp().connections() <= bound, "connection table over its bound");
        }
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.collect(0);
        self.collect(1);
    }

    /// Close everything, let the stacks finish on a clean link for a while, then cut the
    /// link and run every timer out.
    fn finish(mut self) {
        while let Ok(h) = self.stacks[1].tcp_accept(self.listener) {
            self.handles[1].push(h);
        }
        for side in 0..2 {
            for h in std::mem::take(&mut self.handles[side]) {
                if debug() {
                    eprintln!("close {side} {:?}", self.stacks[side].tcp_readiness(h));
                }
                self.close(side, h);
            }
        }
        let _ = self.stacks[1].tcp_unlisten(self.listener);
        // A clean link first: the closes complete. Frames that keep crossing with no timer
        // in between for this long are two stacks answering each other forever.
        let mut busy_rounds = 0;
        for _ in 0..5000 {
            self.round();
            self.check();
            let next = self.stacks.iter().filter_map(|s| s.poll_at()).min();
            let busy = !self.link[0].is_empty() || !self.link[1].is_empty();
            busy_rounds = if busy { busy_rounds + 1 } else { 0 };
            if busy_rounds > 2000 {
                panic!("ACK storm: the link never goes quiet");
            }
            match next {
                _ if busy => self.now += Duration::from_micros(10),
                Some(t) if t > self.now => self.now = t,
                Some(_) => self.now += Duration::from_micros(10),
                None => break,
            }
        }
        // Cut the link: whatever is still open must time out.
        let deadline = self.now + Duration::from_secs(6 * 3600);
        let mut rounds = 0;
        loop {
            self.link[0].clear();
            self.link[1].clear();
            for i in 0..2 {
                self.stacks[i].dispatch(self.now);
                while let Some(f) = self.stacks[i].tx_ring().pop() {
                    self.sniff(i, &f);
                }
            }
            self.check();
            let Some(next) = self.stacks.iter().filter_map(|s| s.poll_at()).min() else { break };
            rounds += 1;
            if self.now >= deadline || rounds > 100_000 {
                panic!(
                    "timers still pending after the link was cut for 6 h: connections A {} B {}",
                    self.stacks[0].tcp().connections(),
                    self.stacks[1].tcp().connections()
                );
            }
            self.now = next.max(self.now + Duration::from_micros(1));
        }
        for (i, s) in self.stacks.iter().enumerate() {
            assert_eq!(s.tcp().connections(), 0, "side {i}: connections left after every timer ran out");
            assert_eq!(s.pool().available(), s.pool().capacity(), "side {i}: buffers not back in the pool");
        }
    }
}

/// Ethernet + IPv4 (checksum filled) + TCP (checksum valid unless `bad_checksum`).
fn frame_bytes(to: &Stack, src: Ipv4Addr, tcp: &TcpRepr, bad_checksum: bool) -> Vec<u8> {
    let dst = to.iface().addr();
    let tl = tcp.buffer_len();
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: IpProtocol::TCP,
        payload_len: tl,
        ttl: 64,
        ident: 0,
        dont_frag: true,
        dscp_ecn: 0,
        fragment: None,
    };
    let src_mac = ackclock::wire::EthernetAddress([0x02, 0xac, 10, 0, 0, src.octets()[3]]);
    let eth = EthernetRepr { src_addr: src_mac, dst_addr: to.iface().mac(), ethertype: EtherType::IPV4, vlan_id: None };
    let mut buf = vec![0u8; 14 + 20 + tl];
    eth.emit(&mut EthernetFrame::new_unchecked(&mut buf[..14]));
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[14..34]), true);
    let hl = tcp.header_len();
    buf[34 + hl..].copy_from_slice(tcp.payload);
    tcp.emit(&mut TcpPacket::new_unchecked(&mut buf[34..]), src, dst, true);
    if bad_checksum {
        buf[34 + 16] ^= 0x5a;
    }
    buf
}

fuzz_target!(|data: &[u8]| {
    let Some(mut w) = World::new(data.len() % 2 == 1) else { return };
    let mut r = Input(data);
    let mut ops = 0;
    w.program = true;
    while !r.is_empty() && ops < 256 {
        ops += 1;
        let op = r.u8();
        if debug() {
            eprintln!("op {} ({}) at {:?}, link {} / {}", op % 16, op, w.now, w.link[0].len(), w.link[1].len());
        }
        match op % 16 {
            // Raw bytes to either side.
            0 => {
                let to = (op >> 4) as usize & 1;
                let n = r.u16() as usize % 1600;
                let bytes = r.bytes(n).to_vec();
                w.inject(to, &bytes, true, false);
            }
            // A crafted segment (most common: that is where the state machine is), processed
            // at once or queued among the frames in flight.
            1..=4 => w.segment((op >> 4) as usize & 1, op & 0x20 != 0, &mut r),
            // Time.
            5 => {
                let d = match op >> 4 {
                    0..=3 => Duration::from_micros(r.u8() as u64 + 1),
                    4..=7 => Duration::from_millis(r.u8() as u64 + 1),
                    8..=11 => Duration::from_millis(r.u16() as u64 * 4),
                    _ => Duration::from_secs(r.u8() as u64 + 1),
                };
                w.advance(d);
            }
            // Application calls.
            6..=8 => {
                let sub = r.u8();
                w.app(sub, &mut r);
            }
            // The link: deliver, drop, duplicate, reorder, corrupt.
            9 | 10 => {
                let from = (op >> 4) as usize & 1;
                w.deliver(from, (r.u8() % 16) as usize + 1);
            }
            // A frame lost on the way; with the top bit, a router's ICMP error for it goes
            // back to its sender instead (Datagram Too Big with any MTU, another
            // Destination Unreachable, a Time Exceeded): path MTU discovery, its cache and
            // the soft and hard errors against live connection state.
            11 => {
                let from = (op >> 4) as usize & 1;
                if let Some(f) = w.link[from].pop_front() {
                    if op & 0x80 != 0 {
                        let (kind, mtu) = (r.u8(), r.u16());
                        if let Some(bytes) = icmp_error(f.data(), kind, mtu) {
                            drop(f);
                            w.inject(from, &bytes, false, false);
                        }
                    }
                }
            }
            12 => {
                let from = (op >> 4) as usize & 1;
                let copy = w.link[from].front().map(|f| f.data().to_vec());
                if let Some(bytes) = copy {
                    if let Some(f) = w.frame(from, &bytes) {
                        w.link[from].push_back(f);
                    }
                }
            }
            13 => {
                let from = (op >> 4) as usize & 1;
                if let Some(f) = w.link[from].pop_front() {
                    let k = r.u8() as usize % (w.link[from].len() + 1);
                    w.link[from].insert(k, f);
                }
            }
            14 => {
                // One byte of the IP packet flipped: the checksums must catch it.
                let from = (op >> 4) as usize & 1;
                let (pos, x) = (r.u16() as usize, r.u8() | 1);
                if let Some(f) = w.link[from].pop_front() {
                    let mut bytes = f.data().to_vec();
                    drop(f);
                    if bytes.len() > 14 {
                        let p = 14 + pos % (bytes.len() - 14);
                        bytes[p] ^= x;
                    }
                    if let Some(f) = w.frame(from, &bytes) {
                        w.link[from].push_front(f);
                    }
                }
            }
            _ => {
                for _ in 0..(r.u8() % 8 + 1) {
                    w.round();
                    w.now += Duration::from_micros(10);
                }
            }
        }
        w.check();
    }
    w.program = false;
    w.finish();
});
