//! A stack: one interface, its TCP, a buffer pool, and the rings to a device.
//!
//! Sans-IO: every call takes `now`, nothing reads a clock. A caller's loop is
//!
//! ```text
//! loop {
//!     stack.receive(now, &mut dev);   // Rx_Ready -> input
//!     /* application reads and writes through the socket calls */
//!     stack.transmit(now, &mut dev);  // timers, output -> Tx_Ready
//!     sleep until stack.poll_at(now) or the device has frames
//! }
//! ```
//!
//! Reading between `receive` and `transmit` is what makes the receive side single-copy:
//! segments whose checksum was deferred are verified during the copy to the application,
//! and the ACK that follows covers them. If `transmit` runs first, it verifies them itself
//! (a sum-only pass) before acknowledging.

use crate::buf::{FreeChain, PBuf, Pool, PoolConfig, PoolConfigError};
use crate::iface::COMMON_TCP_OFFSET_TAGGED;
use crate::iface::{Ingress, Interface, InterfaceConfig, TcpIngress, COMMON_TCP_OFFSET, COMMON_TCP_OFFSET_IP};
use crate::phy::{Batch, Capabilities, Device};
use crate::tcp::input::Fast;
use crate::tcp::lro::{Flush, Lro};
use crate::tcp::{Aggregation, Counters, Io, Tcp, TcpConfig};
use crate::time::Instant;
use crate::udp::{Udp, UdpConfig};

/// Everything a stack is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackConfig {
    /// The interface's addresses and settings.
    pub iface: InterfaceConfig,
    /// TCP's settings.
    pub tcp: TcpConfig,
    /// UDP's settings.
    pub udp: UdpConfig,
    /// Sizes of the packet-buffer pool, allocated once when the stack is made.
    pub pool: PoolConfig,
    /// Buffers of the small size class beside a pool of large buffers (at least
    /// [`SMALL_CLASS_ABOVE`](crate::buf::SMALL_CLASS_ABOVE) bytes, as for segmentation
    /// offload): segments without payload (pure ACKs, SYNs, FINs, RSTs) and ARP frames are
    /// built in [`small_class_config`](crate::buf::small_class_config)-sized buffers instead
    /// of pinning a large one. 0 turns the
    /// class off; with smaller buffers there is none.
    pub small_buffers: usize,
    /// Frames moved per device call.
    pub batch: usize,
    /// Receive aggregation of in-order data and of pure ACKs over each received batch
    /// (Gallatin 2008; see [`Aggregation`]): both on by default.
    pub aggregation: Aggregation,
    /// The secret behind the RFC 6528 ISN key, the RFC 6056 ephemeral-port key and the
    /// connection-table hash keys. [`StackConfig::new`] draws it from the operating system's
    /// random source, so a real stack has unpredictable ISNs and a table no one can flood
    /// with colliding 4-tuples. Set it explicitly only where reproducibility is the point
    /// (the simulator, tests, fuzzing): anyone who knows it can predict ISNs and ports.
    pub seed: u64,
}

impl StackConfig {
    /// Defaults for an interface, with a fresh random [`seed`](Self::seed).
    pub fn new(iface: InterfaceConfig) -> StackConfig {
        // std's `RandomState` takes its SipHash keys from the OS (getrandom(2) on Linux), and
        // each instance gets different keys: hashing a constant through it yields a secret
        // 64-bit value with no new dependency and no unsafe code.
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new().hash_one(0x61636b636c6f636bu64);
        StackConfig {
            iface,
            tcp: TcpConfig::default(),
            udp: UdpConfig::default(),
            pool: PoolConfig::default(),
            small_buffers: 1024,
            batch: 64,
            aggregation: Aggregation::ON,
            seed,
        }
    }
}

/// A TCP/IPv4 stack on one interface.
#[derive(Debug)]
pub struct Stack {
    pub(crate) iface: Interface,
    pub(crate) tcp: Tcp,
    pub(crate) udp: Udp,
    pub(crate) pool: Pool,
    pub(crate) tx: Batch,
    rx: Batch,
    /// Receive aggregation over each batch.
    lro: Lro,
    /// Frames of the batch in progress that the fast path is done with (pure ACKs, merged
    /// or not): back to their pool in one step at the end of the batch, or before a frame
    /// takes any other path (which may allocate). At most a batch's frames, which came out
    /// of the pool before the batch began.
    done: FreeChain,
    /// The latest `now` a caller passed in (for socket calls, which take no time).
    pub(crate) now: Instant,
    announced: bool,
}

impl Stack {
    /// A stack for a device with `caps`. Allocates its pool and rings now.
    pub fn new(config: StackConfig, caps: Capabilities, now: Instant) -> Result<Stack, PoolConfigError> {
        let pool = match config.small_buffers {
            n if n > 0 && config.pool.buffer_size >= crate::buf::SMALL_CLASS_ABOVE => {
                Pool::with_small_class(config.pool, crate::buf::small_class_config(config.pool, n))?
            }
            _ => Pool::new(config.pool)?,
        };
        // A frame must fit one pool buffer behind its headroom, so the stack's MTU is the
        // device's capped there: with a jumbo MTU and small buffers, TCP would otherwise
        // advertise an MSS it cannot receive, and cut every segment it sends short of its
        // own MSS (which Nagle then holds back as a runt).
        let mut caps = caps;
        let room = pool.buffer_size().saturating_sub(pool.headroom());
        caps.mtu = caps.mtu.min(room.saturating_sub(caps.link_header()));
        let mut tcp = Tcp::new(config.tcp, config.seed, now);
        if tcp.config.tso && caps.tso_max > 0 {
            // One IPv4 packet of at most tso_max bytes (IP and TCP headers of up to 20 + 60)
            // whose payload fits one pool buffer.
            tcp.set_gso_max(caps.tso_max.saturating_sub(20 + 60).min(room), pool.buffer_size());
        }
        Ok(Stack {
            iface: Interface::new(config.iface, caps),
            tcp,
            udp: Udp::new(config.udp, config.seed),
            pool,
            tx: Batch::with_capacity(config.batch.max(1)),
            rx: Batch::with_capacity(config.batch.max(1)),
            lro: Lro::new(config.aggregation),
            done: FreeChain::new(),
            now,
            announced: false,
        })
    }

    /// The interface.
    pub fn iface(&self) -> &Interface {
        &self.iface
    }

    /// The interface, mutably (e.g. to add static ARP entries).
    pub fn iface_mut(&mut self) -> &mut Interface {
        &mut self.iface
    }

    /// Every UDP socket of the stack.
    pub fn udp(&self) -> &Udp {
        &self.udp
    }

    /// All TCP state of the stack: connections, listeners, settings and counters.
    pub fn tcp(&self) -> &Tcp {
        &self.tcp
    }

    /// The packet-buffer pool frames are built in.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Turn per-connection tracing on or off (off by default; off costs one branch per
    /// trace point).
    pub fn set_tracing(&mut self, on: bool) {
        self.tcp.trace.enabled = on;
    }

    /// Take the trace records gathered so far.
    pub fn take_trace(&mut self) -> Vec<crate::tcp::trace::Record> {
        std::mem::take(&mut self.tcp.trace.records)
    }

    /// Which segments `receive` aggregates (both data and pure ACKs by default).
    pub fn aggregation(&self) -> Aggregation {
        self.lro.on
    }

    /// Turn receive aggregation of data and of pure ACKs on or off.
    pub fn set_aggregation(&mut self, on: Aggregation) {
        self.lro.on = on;
    }

    /// Stack-wide counters.
    pub fn counters(&self) -> &Counters {
        &self.tcp.counters
    }

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
    }

    /// Process one received frame.
    ///
    /// Header prediction runs across the layers first (Jacobson 1993's "one straight run"): a
    /// common frame (untagged Ethernet, IPv4 with a 20-byte header, to us, TCP) with the segment
    /// its connection expects goes from the frame to the receive queue (or to the ACK's effects)
    /// in one pass, without the layers' full checks. Everything else takes them, out of line.
    ///
    /// On a link without a link header (a TUN) `common_tcp` takes nothing (its MAC compare
    /// fails by construction), and the out-of-line path first tries the same prediction on
    /// the bare IPv4 packet (`process_ip`): the Ethernet path pays no branch for the TUN's
    /// (`scripts/callgrind-rxpath` counts the same instructions per segment as before).
    #[inline]
    pub fn process(&mut self, now: Instant, frame: PBuf) {
        self.advance(now);
        self.tcp.counters.frames_in += 1;
        self.process_frame(frame);
    }

    #[inline]
    fn process_frame(&mut self, frame: PBuf) {
        let Some(ing) = self.iface.common_tcp(&frame) else { return self.process_slow(frame) };
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        match self.tcp.fast(self.now, ing, COMMON_TCP_OFFSET, &frame, io) {
            Fast::Slow => self.tcp_slow::<COMMON_TCP_OFFSET>(ing, frame),
            Fast::Done => {}
            // The frame moves once, into the receive queue: the layers above only looked at
            // it by reference (a 56-byte handle passed by value is copied at each call).
            Fast::Queue(q) => {
                if let Some(rq) = self.tcp.rcvq(q.idx) {
                    rq.push_frame(q.seq, frame, q.off, q.len, q.unverified);
                }
            }
        }
    }

    /// [`process`](Self::process)'s header prediction for a link without a link header: the
    /// common IPv4 packet from its first byte. `Err` gives back a frame it did not take.
    #[inline(never)]
    fn process_ip(&mut self, frame: PBuf) -> Result<(), PBuf> {
        let Some(ing) = self.iface.common_tcp_ip(&frame) else { return Err(frame) };
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        match self.tcp.fast(self.now, ing, COMMON_TCP_OFFSET_IP, &frame, io) {
            Fast::Slow => self.tcp_slow::<COMMON_TCP_OFFSET_IP>(ing, frame),
            Fast::Done => {}
            Fast::Queue(q) => {
                if let Some(rq) = self.tcp.rcvq(q.idx) {
                    rq.push_frame(q.seq, frame, q.off, q.len, q.unverified);
                }
            }
        }
        Ok(())
    }

    /// A common frame header prediction did not take: TCP's full path, on the segment.
    #[inline(never)]
    fn tcp_slow<const OFFSET: usize>(&mut self, ing: TcpIngress, mut frame: PBuf) {
        let _ = frame.narrow(OFFSET, ing.len as usize);
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        self.tcp.input_slow(self.now, ing, frame, io);
    }

    /// Every other frame: the link and IP checks, then TCP's full path (header prediction
    /// is for the common frame only) or UDP.
    #[inline(never)]
    fn process_slow(&mut self, frame: PBuf) {
        let mut frame = match self.iface.capabilities().ethernet {
            true => frame,
            false => match self.process_ip(frame) {
                Ok(()) => return,
                Err(frame) => frame,
            },
        };
        let now = self.now;
        match self.iface.ingress(now, &mut frame, &self.pool, &mut self.tx, &mut self.tcp.counters) {
            Some(Ingress::Tcp(ing)) => {
                let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
                self.tcp.input_slow(now, ing, frame, io);
            }
            Some(Ingress::Udp(ing, ip_header_len)) => self.udp.input(
                now,
                ing,
                ip_header_len,
                frame,
                &mut self.iface,
                &self.pool,
                &mut self.tx,
                &mut self.tcp.counters,
            ),
            Some(Ingress::TooBig(msg)) if msg.protocol == crate::wire::IpProtocol::TCP => {
                self.tcp.path_mtu(now, msg, &mut self.iface)
            }
            Some(Ingress::TooBig(msg)) => {
                // Believed only for a connected socket's own destination (`Udp::too_big`).
                if self.udp.too_big(msg) {
                    self.tcp.counters.pmtu_udp += 1;
                    self.iface.learn_path_mtu(now, *msg.remote.ip(), msg.mtu);
                } else {
                    self.tcp.counters.pmtu_ignored += 1;
                }
            }
            Some(Ingress::Unreachable(msg)) if msg.protocol == crate::wire::IpProtocol::TCP => {
                self.tcp.unreachable(now, msg)
            }
            Some(Ingress::Unreachable(msg)) => {
                if self.udp.icmp_error(msg) {
                    self.tcp.counters.icmp_udp_errors += 1;
                } else {
                    self.tcp.counters.icmp_ignored += 1;
                }
            }
            None => {}
        }
    }

    /// Rx_Ready: take a batch of frames from the device and process them.
    pub fn receive(&mut self, now: Instant, dev: &mut impl Device) -> usize {
        self.advance(now);
        let n = dev.receive(self.now, &mut self.rx);
        let mut rx = core::mem::replace(&mut self.rx, Batch::empty());
        self.process_batch(now, &mut rx);
        // The placeholder owns nothing (no allocation, no frame): forgotten rather than
        // dropped, so no drop glue runs over its empty ring on every call.
        core::mem::forget(core::mem::replace(&mut self.rx, rx));
        n
    }

    /// Process every frame of `batch`, aggregating what [`Stack::aggregation`] allows: flows
    /// are gathered while the batch lasts and flushed at its end (see `tcp::lro`).
    pub fn process_batch(&mut self, now: Instant, batch: &mut Batch) {
        self.advance(now);
        // A batch of one has nothing to merge: it costs what `process` costs.
        if !self.lro.enabled() || batch.len() == 1 {
            while let Some(frame) = batch.pop() {
                self.process(now, frame);
            }
            return;
        }
        let caps = self.iface.capabilities();
        let (ethernet, rx_checksum) = (caps.ethernet, caps.rx_checksum);
        while let Some(frame) = batch.pop() {
            self.tcp.counters.frames_in += 1;
            self.lro.followed = batch.len() >= 2;
            match ethernet {
                true => self.offer::<COMMON_TCP_OFFSET>(frame),
                false => self.offer::<COMMON_TCP_OFFSET_IP>(frame),
            }
            // The frames that continue the live run (begun by this frame or an earlier
            // one: `tcp::lro::run`), in one loop.
            if self.lro.run_live() {
                let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
                self.tcp.run_batch(&mut self.lro, self.now, batch, rx_checksum, &mut self.done, io);
            }
        }
        self.flush_all(Flush::Batch);
        self.done.flush();
    }

    /// One frame of a batch with aggregation on: header prediction and aggregation
    /// (`Tcp::fast_batch`) for a common frame, the ordinary path for anything else, after
    /// every aggregate in progress.
    #[inline]
    fn offer<const OFFSET: usize>(&mut self, frame: PBuf) {
        let ing = match OFFSET {
            COMMON_TCP_OFFSET => self.iface.common_tcp(&frame),
            _ => self.iface.common_tcp_ip(&frame),
        };
        let Some(ing) = ing else {
            if OFFSET == COMMON_TCP_OFFSET {
                if let Some(ing) = self.iface.common_tcp_tagged(&frame) {
                    return self.offer_tagged(ing, frame);
                }
            }
            self.flush_all(Flush::Other);
            self.done.flush();
            return self.process_frame(frame);
        };
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        match self.tcp.fast_batch(&mut self.lro, self.now, ing, OFFSET, &frame, io) {
            Fast::Slow => {
                self.done.flush();
                self.tcp_slow::<OFFSET>(ing, frame)
            }
            Fast::Done => self.done.put(frame),
            Fast::Queue(q) => {
                if let Some(rq) = self.tcp.rcvq(q.idx) {
                    rq.push_frame(q.seq, frame, q.off, q.len, q.unverified);
                }
            }
        }
    }

    /// [`offer`](Self::offer)'s second half, for the tagged path. `offer` keeps its own copy
    /// of these lines: calling this from it, even inlined, or sharing them through a macro,
    /// made the compiler lay out the batch loop worse, about 20 instructions more per
    /// segment (`scripts/callgrind-rxpath`, batch 64: 456 against 433).
    #[inline(always)]
    fn offer_common<const OFFSET: usize>(&mut self, ing: TcpIngress, frame: PBuf) {
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        match self.tcp.fast_batch(&mut self.lro, self.now, ing, OFFSET, &frame, io) {
            Fast::Slow => {
                self.done.flush();
                self.tcp_slow::<OFFSET>(ing, frame)
            }
            Fast::Done => self.done.put(frame),
            Fast::Queue(q) => {
                if let Some(rq) = self.tcp.rcvq(q.idx) {
                    rq.push_frame(q.seq, frame, q.off, q.len, q.unverified);
                }
            }
        }
    }

    /// A common frame behind an 802.1Q tag (out of line: rare).
    #[inline(never)]
    fn offer_tagged(&mut self, ing: TcpIngress, frame: PBuf) {
        self.offer_common::<COMMON_TCP_OFFSET_TAGGED>(ing, frame);
    }

    fn flush_all(&mut self, why: Flush) {
        while self.lro.held() != 0 {
            let s = self.lro.held().trailing_zeros() as usize;
            let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
            self.tcp.lro_flush(&mut self.lro, s, why, self.now, io);
        }
    }

    /// Run due timers and let connections send, into the transmit ring (no device).
    pub fn dispatch(&mut self, now: Instant) {
        self.advance(now);
        let now = self.now;
        if !self.announced {
            self.announced = true;
            self.iface.announce(&self.pool, &mut self.tx, &mut self.tcp.counters);
        }
        // Frames whose next hop never answered give their buffers back.
        self.iface.arp.expire_pending(now);
        // Path MTU estimates past their lifetime (RFC 1191 §6.3): connections follow as
        // they next send.
        self.iface.pmtu.expire(now);
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        self.tcp.run_timers(now, io);
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        self.tcp.output_dirty(now, io);
    }

    /// [`dispatch`](Self::dispatch), except the output of the connection in slot `hold`,
    /// which stays pending: the runtime's blocking reader over the pipe sends it after its
    /// copy, which checks the checksums (Jacobson 1993). Returns whether that connection had
    /// output pending. (Its timers still run, and may send for it.)
    pub(crate) fn dispatch_holding(&mut self, now: Instant, hold: u32) -> bool {
        let held = self.tcp.unlist_dirty(hold);
        self.dispatch(now);
        if held {
            self.tcp.relist_dirty(hold);
        }
        held
    }

    /// The frames waiting for the device (for callers that move them themselves, and for
    /// packet-level tests).
    pub fn tx_ring(&mut self) -> &mut Batch {
        &mut self.tx
    }

    /// Timers, output, and Tx_Ready: hand the frames to the device. The device is called
    /// even with nothing to send, so that a device with timing of its own (delayed frames)
    /// can move them. Repeats while the ring filled up and the device keeps taking frames.
    pub fn transmit(&mut self, now: Instant, dev: &mut impl Device) {
        loop {
            self.dispatch(now);
            let was_full = self.tx.is_full();
            dev.transmit(self.now, &mut self.tx);
            if !was_full || !self.tx.is_empty() {
                break;
            }
        }
    }

    /// `receive` then `transmit`.
    pub fn poll(&mut self, now: Instant, dev: &mut impl Device) {
        self.receive(now, dev);
        self.transmit(now, dev);
    }

    /// When to call again at the latest: `now` if output is pending, else the earliest timer
    /// (a connection's, or a frame waiting for ARP giving up).
    pub fn poll_at(&self) -> Option<Instant> {
        if !self.tx.is_empty() {
            return Some(self.now);
        }
        match (self.tcp.poll_at(self.now), self.iface.arp.pending_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
