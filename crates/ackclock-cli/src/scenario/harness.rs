//! Scenario plumbing on the library alone (no plotting), so that the library's
//! `tests/scenarios_*.rs` can include this file with `#[path]` and run exactly what
//! `ackclock sim` runs.
//!
//! - [`Path`]: two stacks joined by one simulated [`Link`], on a loop of its own (the same
//!   event loop as [`World`](ackclock::sim::World)'s: receive, application, transmit, link),
//!   with a [`Shaper`] in front of host A's end of the link. The shaper does what the
//!   link's random impairments cannot: drop exactly the Nth data frame, black out the path
//!   for a while, or vary the one-way delay over time (without reordering).
//! - [`Sender`] / [`Receiver`]: a bulk transfer (chargen to discard) of a deterministic byte
//!   pattern, usable on a `Path` or on a `World`.

use ackclock::buf::{PBuf, PoolConfig};
use ackclock::phy::{Batch, Capabilities, Capture, Device, DeviceStats, PcapWriter, Resolution};
use ackclock::sim::{Link, LinkConfig, Side};
use ackclock::tcp::{FourTuple, SocketOptions, TcpConfig};
use ackclock::time::{Duration, Instant};
use ackclock::wire::{EtherType, EthernetFrame, IpProtocol, Ipv4Packet, TcpPacket};
use ackclock::{Error, ListenerHandle, Shutdown, Stack, StackConfig, TcpHandle};
use core::net::Ipv4Addr;
use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::SocketAddrV4;

/// Host A (the sender in every two-host scenario) and host B.
pub const A_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The port the receivers listen on.
pub const PORT: u16 = 5001;

/// A stack configuration for scenario hosts: the given TCP settings and a pool large enough
/// for send and receive buffers of a few megabytes.
pub fn stack_config(addr: Ipv4Addr, prefix_len: u8, seed: u64, tcp: &TcpConfig) -> StackConfig {
    let mut c = ackclock::sim::host_config(addr, prefix_len, seed);
    let bytes = tcp.send_buffer + tcp.recv_buffer;
    c.pool = PoolConfig { buffers: (2 * bytes / 1448).max(1024) + 512, ..PoolConfig::default() };
    // One transmit ring holds a whole window, so the shaper sees every frame of a step.
    c.batch = 512;
    c.tcp = tcp.clone();
    c
}

/// TCP settings for bulk scenarios: buffers of `buffer` bytes each way, the given
/// algorithm and SACK setting, defaults otherwise.
pub fn tcp_config(buffer: usize, congestion: ackclock::tcp::cc::Algorithm, sack: bool) -> TcpConfig {
    TcpConfig { recv_buffer: buffer, send_buffer: buffer, congestion, sack, ..TcpConfig::default() }
}

/// The deterministic byte stream of a transfer: position-dependent, so that any misplaced
/// byte changes a digest.
#[derive(Debug)]
pub struct Pattern {
    key: u64,
    chunk: Vec<u8>,
    index: Option<u64>,
}

const CHUNK: usize = 16 * 1024;

impl Pattern {
    pub fn new(key: u64) -> Pattern {
        Pattern { key, chunk: vec![0; CHUNK], index: None }
    }

    /// The chunk holding stream offset `off`, and where `off` lies in it.
    pub fn at(&mut self, off: u64) -> (&[u8], usize) {
        let k = off / CHUNK as u64;
        if self.index != Some(k) {
            for (i, w) in self.chunk.chunks_exact_mut(8).enumerate() {
                let mut z = (k * CHUNK as u64 / 8 + i as u64) ^ self.key;
                z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                w.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
            }
            self.index = Some(k);
        }
        (&self.chunk, (off % CHUNK as u64) as usize)
    }

    /// Feed the first `len` bytes of the stream to `f`, chunk by chunk.
    pub fn for_each(&mut self, len: u64, mut f: impl FnMut(&[u8])) {
        let mut off = 0;
        while off < len {
            let (chunk, at) = self.at(off);
            let n = (chunk.len() - at).min((len - off) as usize);
            f(&chunk[at..at + n]);
            off += n as u64;
        }
    }
}

/// The sending application: writes the pattern as fast as the socket takes it, up to
/// `limit` bytes (then half-closes), or forever.
#[derive(Debug)]
pub struct Sender {
    pub conn: TcpHandle,
    pub limit: Option<u64>,
    /// Application-limited sending: `(interval, bytes)` makes `bytes` more available at
    /// every multiple of `interval` (from time zero); `None` writes as fast as possible.
    pub pace: Option<(Duration, u64)>,
    pub sent: u64,
    shut: bool,
    pattern: Pattern,
}

impl Sender {
    /// Connect from `stack` to `remote:port` with `opts`.
    pub fn connect(stack: &mut Stack, remote: Ipv4Addr, port: u16, limit: Option<u64>, key: u64) -> Sender {
        let opts = SocketOptions::from_config(stack.tcp().config());
        let conn = stack.tcp_connect_with(SocketAddrV4::new(remote, port), None, opts).expect("connect");
        Sender { conn, limit, pace: None, sent: 0, shut: false, pattern: Pattern::new(key) }
    }

    /// Write what the socket takes (and the pace allows at `now`).
    pub fn pump(&mut self, s: &mut Stack, now: Instant) {
        let mut limit = self.limit.unwrap_or(u64::MAX);
        if let Some((interval, bytes)) = self.pace {
            let ticks = now.total_nanos() / (interval.as_nanos() as u64).max(1) + 1;
            limit = limit.min(ticks.saturating_mul(bytes));
        }
        while self.sent < limit {
            let (chunk, at) = self.pattern.at(self.sent);
            let end = chunk.len().min(at.saturating_add((limit - self.sent).min(usize::MAX as u64) as usize));
            match s.tcp_send(self.conn, &chunk[at..end]) {
                Ok(0) | Err(Error::WouldBlock) | Err(Error::NoBufferSpace) | Err(Error::NotConnected) => break,
                Ok(n) => self.sent += n as u64,
                Err(e) => panic!("send after {} bytes: {e}", self.sent),
            }
        }
        if Some(self.sent) == self.limit && !self.shut && s.tcp_shutdown(self.conn, Shutdown::Write).is_ok() {
            self.shut = true;
        }
    }

    /// The connection's addresses (local = the sender).
    pub fn tuple(&self, s: &Stack) -> FourTuple {
        s.tcp_tuple(self.conn).expect("sender connection")
    }
}

/// A hook given each chunk of received data.
pub type Sink = Box<dyn FnMut(&[u8]) + Send>;

/// The receiving application: accepts one connection and reads everything.
pub struct Receiver {
    pub listener: ListenerHandle,
    pub conn: Option<TcpHandle>,
    pub received: u64,
    /// When end of stream was read.
    pub eof_at: Option<Instant>,
    pub sink: Option<Sink>,
    buf: Vec<u8>,
}

impl core::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Receiver").field("received", &self.received).field("eof_at", &self.eof_at).finish()
    }
}

impl Receiver {
    pub fn listen(stack: &mut Stack, port: u16) -> Receiver {
        let addr = stack.iface().addr();
        let listener = stack.tcp_listen(SocketAddrV4::new(addr, port), 4).expect("listen");
        Receiver { listener, conn: None, received: 0, eof_at: None, sink: None, buf: vec![0; 64 * 1024] }
    }

    /// Read what has arrived; true once end of stream was read.
    pub fn pump(&mut self, r: &mut Stack, now: Instant) -> bool {
        if self.eof_at.is_some() {
            return true;
        }
        if self.conn.is_none() {
            self.conn = r.tcp_accept(self.listener).ok();
        }
        let Some(c) = self.conn else { return false };
        loop {
            match r.tcp_recv(c, &mut self.buf) {
                Ok(0) => {
                    self.eof_at = Some(now);
                    return true;
                }
                Ok(n) => {
                    self.received += n as u64;
                    if let Some(sink) = self.sink.as_mut() {
                        sink(&self.buf[..n]);
                    }
                }
                Err(Error::WouldBlock) => return false,
                Err(e) => panic!("recv after {} bytes: {e}", self.received),
            }
        }
    }
}

/// An extra one-way delay as a function of the time a frame is sent.
pub type DelayProfile = Box<dyn Fn(Instant) -> Duration + Send>;

/// What happens to the frames host A hands to the link, before the link's own queue and
/// impairments.
#[derive(Default)]
pub struct Shaper {
    /// 1-based ordinals, among the TCP segments with payload that A sends (retransmissions
    /// counted), of those to drop.
    pub drop_nth: Vec<u64>,
    /// Drop the first data frame A sends at or after each of these instants (each once).
    pub drop_at: Vec<Instant>,
    /// Drop every frame A sends in `[from, to)`.
    pub outages: Vec<(Instant, Instant)>,
    /// Extra delay of each frame, held in FIFO order (a frame never overtakes the one
    /// before it, so a shrinking delay bunches frames instead of reordering them).
    pub delay: Option<DelayProfile>,
    held: VecDeque<(Instant, PBuf)>,
    last_release: Instant,
    /// Data frames seen, and frames dropped.
    pub data_frames: u64,
    pub dropped: u64,
}

impl core::fmt::Debug for Shaper {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Shaper")
            .field("drop_nth", &self.drop_nth)
            .field("drop_at", &self.drop_at)
            .field("outages", &self.outages)
            .field("data_frames", &self.data_frames)
            .field("dropped", &self.dropped)
            .finish()
    }
}

/// Whether an Ethernet frame carries a TCP segment with payload.
pub fn is_tcp_data(frame: &[u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(frame) else { return false };
    if eth.ethertype() != EtherType::IPV4 {
        return false;
    }
    let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else { return false };
    if ip.protocol() != IpProtocol::TCP {
        return false;
    }
    TcpPacket::new_checked(ip.payload()).is_ok_and(|t| !t.payload().is_empty())
}

impl Shaper {
    /// Take one frame from A at `now`: drop it, hold it, or pass it to the link.
    fn admit(&mut self, link: &mut Link, now: Instant, frame: PBuf) {
        if is_tcp_data(frame.data()) {
            self.data_frames += 1;
            if self.drop_nth.contains(&self.data_frames) {
                self.dropped += 1;
                return;
            }
            if let Some(i) = self.drop_at.iter().position(|&t| now >= t) {
                self.drop_at.swap_remove(i);
                self.dropped += 1;
                return;
            }
        }
        if self.outages.iter().any(|&(from, to)| now >= from && now < to) {
            self.dropped += 1;
            return;
        }
        let release = match &self.delay {
            Some(d) => (now + d(now)).max(self.last_release),
            None => now,
        };
        self.last_release = release;
        if release <= now && self.held.is_empty() {
            link.send(now, Side::A, frame);
        } else {
            self.held.push_back((release, frame));
        }
    }

    /// Pass on the held frames due by `now`.
    fn release(&mut self, link: &mut Link, now: Instant) {
        while self.held.front().is_some_and(|h| h.0 <= now) {
            if let Some((_, f)) = self.held.pop_front() {
                link.send(now, Side::A, f);
            }
        }
    }

    fn next_release(&self) -> Option<Instant> {
        self.held.front().map(|h| h.0)
    }
}

/// Host A's end of the link, through the shaper.
struct Shaped<'a> {
    link: &'a mut Link,
    shaper: &'a mut Shaper,
}

impl Device for Shaped<'_> {
    fn capabilities(&self) -> Capabilities {
        Capabilities::ethernet(self.link.config().mtu)
    }

    fn receive(&mut self, now: Instant, rx: &mut Batch) -> usize {
        self.link.deliver(now, Side::A, rx)
    }

    fn transmit(&mut self, now: Instant, tx: &mut Batch) -> usize {
        let mut n = 0;
        while let Some(frame) = tx.pop() {
            self.shaper.admit(self.link, now, frame);
            n += 1;
        }
        n
    }

    fn stats(&self) -> DeviceStats {
        let (out, inc) = (self.link.stats(Side::A), self.link.stats(Side::B));
        DeviceStats {
            rx_frames: inc.delivered,
            rx_bytes: inc.delivered_bytes,
            tx_frames: out.enqueued,
            tx_bytes: out.enqueued_bytes,
            tx_dropped: out.queue_drops + self.shaper.dropped,
            rx_dropped: 0,
        }
    }
}

type PcapSink = PcapWriter<Box<dyn Write + Send>>;

/// Steps at one instant before the clock is nudged on (as `World`).
const MAX_STEPS_AT_ONE_INSTANT: u32 = 10_000;

/// Two stacks on one link, A (side A) and B (side B); see the [module docs](self).
pub struct Path {
    pub now: Instant,
    pub a: Stack,
    pub b: Stack,
    pub link: Link,
    pub shaper: Shaper,
    /// An instant the application wants to run at (set by the hook; cleared when reached).
    pub wake: Option<Instant>,
    pcap: Option<PcapSink>,
    pcap_error: Option<io::Error>,
    same_instant: u32,
    pub stalls: u64,
    pub steps: u64,
}

impl core::fmt::Debug for Path {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Path").field("now", &self.now).field("shaper", &self.shaper).finish()
    }
}

impl Path {
    /// Hosts A and B with TCP settings `a_tcp` and `b_tcp` on a link with `config`; every
    /// random draw derives from `seed`.
    pub fn new(seed: u64, config: LinkConfig, a_tcp: &TcpConfig, b_tcp: &TcpConfig) -> Path {
        let derive = |stream| ackclock::sim::Rng::derive(seed, stream).next_u64();
        let caps = Capabilities::ethernet(config.mtu.min(1500));
        let a = Stack::new(stack_config(A_ADDR, 24, derive(0xa), a_tcp), caps, Instant::ZERO).expect("pool");
        let b = Stack::new(stack_config(B_ADDR, 24, derive(0xb), b_tcp), caps, Instant::ZERO).expect("pool");
        Path {
            now: Instant::ZERO,
            a,
            b,
            link: Link::new(config, derive(0x1)),
            shaper: Shaper::default(),
            wake: None,
            pcap: None,
            pcap_error: None,
            same_instant: 0,
            stalls: 0,
            steps: 0,
        }
    }

    /// Record every frame host A sends (before the shaper, so dropped frames show) and
    /// receives, whole: a truncated frame cannot have its checksums verified, and `sim
    /// sharing`'s captures (through `World`) are whole too.
    pub fn capture(&mut self, out: impl Write + Send + 'static) -> io::Result<()> {
        self.pcap = Some(PcapWriter::new(Box::new(out) as Box<dyn Write + Send>, Resolution::Nanos)?);
        Ok(())
    }

    /// Stop capturing; the first write error if there was one.
    pub fn end_capture(&mut self) -> io::Result<()> {
        if let Some(e) = self.pcap_error.take() {
            return Err(e);
        }
        match self.pcap.take() {
            Some(mut p) => p.flush(),
            None => Ok(()),
        }
    }

    /// Step from event to event, starting at the current instant, while `f` returns true
    /// (it runs between the receive and the transmit phase of each step) and something is
    /// still due.
    pub fn run_while(&mut self, mut f: impl FnMut(&mut Path) -> bool) {
        loop {
            if !self.step(&mut f) {
                return;
            }
            if self.wake.is_some_and(|w| w <= self.now) {
                self.wake = None;
            }
            let next = [self.a.poll_at(), self.b.poll_at(), self.link.poll_at(), self.shaper.next_release(), self.wake]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next else { return };
            if next > self.now {
                self.same_instant = 0;
                self.now = next;
            } else {
                self.same_instant += 1;
                if self.same_instant > MAX_STEPS_AT_ONE_INSTANT {
                    self.same_instant = 0;
                    self.stalls += 1;
                    self.now += Duration::from_micros(1);
                }
            }
        }
    }

    /// Run until `t` (the application hook `f` runs in every step).
    pub fn run_until(&mut self, t: Instant, mut f: impl FnMut(&mut Path)) {
        self.run_while(|p| {
            f(p);
            p.now < t
        });
    }

    fn step(&mut self, f: &mut dyn FnMut(&mut Path) -> bool) -> bool {
        let t = self.now;
        self.steps += 1;
        self.io_a(t, true);
        self.b.receive(t, &mut self.link.end(Side::B));
        let go_on = f(self);
        self.io_a(t, false);
        self.b.transmit(t, &mut self.link.end(Side::B));
        self.shaper.release(&mut self.link, t);
        self.link.advance(t);
        go_on
    }

    fn io_a(&mut self, t: Instant, receive: bool) {
        let dev = Shaped { link: &mut self.link, shaper: &mut self.shaper };
        match self.pcap.take() {
            None => {
                let mut dev = dev;
                if receive {
                    self.a.receive(t, &mut dev);
                } else {
                    self.a.transmit(t, &mut dev);
                }
            }
            Some(pcap) => {
                let mut dev = Capture::new(dev, pcap);
                if receive {
                    self.a.receive(t, &mut dev);
                } else {
                    self.a.transmit(t, &mut dev);
                }
                if self.pcap_error.is_none() {
                    self.pcap_error = dev.take_error();
                }
                self.pcap = Some(dev.into_parts().1);
            }
        }
    }
}

/// A one-flow bulk transfer from A to B on a [`Path`].
#[derive(Debug)]
pub struct Transfer {
    pub path: Path,
    pub sender: Sender,
    pub receiver: Receiver,
}

impl Transfer {
    /// Set up the path and the sockets (tracing on at the sender); nothing runs yet.
    pub fn new(seed: u64, config: LinkConfig, tcp: &TcpConfig, limit: Option<u64>) -> Transfer {
        let mut path = Path::new(seed, config, tcp, tcp);
        path.a.set_tracing(true);
        let receiver = Receiver::listen(&mut path.b, PORT);
        let sender = Sender::connect(&mut path.a, B_ADDR, PORT, limit, seed);
        Transfer { path, sender, receiver }
    }

    /// Run until `t` or until the receiver has read end of stream.
    pub fn run_until(&mut self, t: Instant) {
        let (sender, receiver) = (&mut self.sender, &mut self.receiver);
        self.path.run_while(|p| {
            sender.pump(&mut p.a, p.now);
            if let Some((interval, _)) = sender.pace {
                let i = (interval.as_nanos() as u64).max(1);
                p.wake = Some(Instant::from_nanos((p.now.total_nanos() / i + 1) * i));
            }
            let eof = receiver.pump(&mut p.b, p.now);
            !eof && p.now < t
        });
    }

    /// The sender's trace records of this connection.
    pub fn take_trace(&mut self) -> Vec<ackclock::tcp::trace::Record> {
        let tuple = self.sender.tuple(&self.path.a);
        self.path.a.take_trace().into_iter().filter(|r| r.conn == tuple).collect()
    }

    /// The sender's payload bytes per full-sized segment.
    pub fn mss(&self) -> u32 {
        self.path.a.tcp_info(self.sender.conn).map_or(1448, |i| u32::from(i.eff_mss))
    }
}
