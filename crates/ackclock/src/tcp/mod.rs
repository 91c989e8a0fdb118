//! TCP, split the way BSD splits it: [`input`] (segment arrival), [`output`] (what to send),
//! [`timer`] (what time does), plus the connection control block ([`tcb`]), the RTO
//! estimator ([`rtt`]), the out-of-order queue ([`reasm`]), sequence numbers ([`seq`]), the
//! timing wheel ([`wheel`]), and the connection table here.
//!
//! This module owns every connection of a stack. Lookups go through a one-entry last-hit
//! cache (BSD's `tcp_last_inpcb`), then a keyed hash of the 4-tuple; listeners are found by
//! local address and port, then by port on the wildcard address. Nothing on the packet path
//! scans connections.

pub mod cc;
pub mod config;
pub(crate) mod env;
pub mod hash;
pub(crate) mod input;
pub mod isn;
pub(crate) mod output;
pub mod reasm;
pub(crate) mod recovery;
pub mod rtt;
pub(crate) mod rxq;
pub mod seq;
pub mod stats;
pub(crate) mod tcb;
pub(crate) mod timer;
pub mod trace;
pub mod wheel;

pub use config::{KeepAlive, SocketOptions, TcpConfig};
pub use seq::SeqNumber;
pub use stats::{ConnStats, Counters, DropReason, TcpInfo};
pub use tcb::{ConnError, FourTuple, State};

use crate::buf::{PBuf, Pool};
use crate::iface::{Interface, TcpIngress};
use crate::phy::Batch;
use crate::time::{Duration, Instant};
use crate::wire::{checksum, TcpFlags, TcpPacket, TcpRepr};
use core::net::Ipv4Addr;
use env::{ChallengeLimiter, Env};
use hash::KeyedState;
use input::{Outcome, Segment};
use isn::{IsnGenerator, PortAllocator};
use reasm::OutOfOrderQueue;
use rtt::RttEstimator;
use std::collections::{HashMap, VecDeque};
use tcb::{Tcb, Timers, Unverified};
use wheel::TimerWheel;

/// The `Env` of a protocol routine, borrowing the stack-wide parts of `$tcp` field by field
/// (a method would borrow all of it while a TCB is borrowed from its slots).
macro_rules! env {
    ($tcp:ident, $now:expr, $pool:expr, $iface:expr, $tx:expr) => {
        Env {
            now: $now,
            config: &$tcp.config,
            counters: &mut $tcp.counters,
            challenge: &mut $tcp.challenge,
            pool: $pool,
            iface: $iface,
            tx: $tx,
            trace: &mut $tcp.trace,
        }
    };
}

/// The least a queued send segment costs against the send buffer.
const MIN_SEGMENT_CHARGE: usize = 256;

/// One connection slot: a generation number (so that stale handles are detected) and the
/// TCB, if the slot is in use.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub gen: u32,
    pub tcb: Option<Box<Tcb>>,
}

/// A listening socket (RFC 9293's LISTEN state) with its queues.
#[derive(Debug)]
pub(crate) struct Listener {
    pub gen: u32,
    pub local: (Ipv4Addr, u16),
    /// Bound on both the SYN queue (connections in SYN-RECEIVED) and the accept queue, as
    /// Linux's `listen(fd, backlog)`.
    pub backlog: usize,
    pub syn_received: usize,
    /// Established connections not yet accepted: slot index and generation. A connection
    /// that ends before it is accepted stays here, dead (its slot's generation moved on),
    /// and is skipped by `accept`: the packet path never searches this queue.
    pub accept: VecDeque<(u32, u32)>,
    /// Live entries of `accept`: what the backlog bounds and the application can accept.
    pub ready: usize,
    pub opts: SocketOptions,
}

/// All TCP state of one stack.
#[derive(Debug)]
pub struct Tcp {
    pub(crate) config: TcpConfig,
    pub(crate) slots: Vec<Slot>,
    free_slots: Vec<u32>,
    table: HashMap<FourTuple, u32, KeyedState>,
    last_hit: Option<LastHit>,
    pub(crate) listeners: Vec<Option<Listener>>,
    listener_gen: u32,
    listen_table: HashMap<(Ipv4Addr, u16), u32, KeyedState>,
    wheel: TimerWheel,
    expired: Vec<u32>,
    dirty: Vec<u32>,
    isn: IsnGenerator,
    ports: PortAllocator,
    ts_key: [u64; 2],
    pub(crate) counters: Counters,
    challenge: ChallengeLimiter,
    pub(crate) trace: trace::Trace,
    /// Connections in use (every state but free).
    live: usize,
    /// Largest TCP payload one segmentation-offload frame may carry; 0 without offload.
    gso_max: usize,
    /// `recv` leaves the window-update decision to `Stack::window_update_at` (the threaded runtime).
    pub(crate) defer_window_update: bool,
}

/// The connection cache: the last connection a segment was found for, keyed by the
/// segment's addresses and ports as they are on the wire (see `Tcp::lookup_wire`).
#[derive(Debug, Clone, Copy)]
struct LastHit {
    addrs: u64,
    ports: u32,
    idx: u32,
}

/// What a receive callback did with the front segment's bytes.
pub(crate) enum Take {
    /// Consumed this many (fewer than offered stops the read).
    Bytes(usize),
    /// The segment's deferred checksum did not verify: it is dropped, nothing consumed.
    BadChecksum,
}

/// The parts of a stack a TCP routine sends through.
pub(crate) struct Io<'a> {
    pub pool: &'a Pool,
    pub iface: &'a mut Interface,
    pub tx: &'a mut Batch,
}

/// Parse the header of a received segment.
fn parse_segment(src: Ipv4Addr, dst: Ipv4Addr, data: &[u8]) -> crate::wire::Result<(Segment, usize)> {
    let packet = TcpPacket::new_checked(data)?;
    let repr = TcpRepr::parse(&packet, src, dst, false)?;
    let header_sum = checksum::add(crate::iface::tcp_pseudo_sum(src, dst, data.len()), packet.header_sum());
    Ok((
        Segment {
            src,
            dst,
            src_port: repr.src_port,
            dst_port: repr.dst_port,
            seq: SeqNumber(repr.seq),
            ack: SeqNumber(repr.ack),
            flags: repr.flags,
            wnd: repr.window,
            mss: repr.max_seg_size,
            wscale: repr.window_scale,
            sack_permitted: repr.sack_permitted,
            ts: repr.timestamps,
            sack: repr.sack_blocks,
            len: repr.payload.len() as u32,
            header_sum,
        },
        packet.header_len(),
    ))
}

impl Tcp {
    /// `seed` keys the ISN, port and table hashes: fixed in a simulation (deterministic),
    /// random in a real stack.
    pub fn new(config: TcpConfig, seed: u64, now: Instant) -> Tcp {
        let cap = config.max_connections.max(1);
        let (lo, hi) = config.ephemeral_ports;
        Tcp {
            slots: Vec::new(),
            free_slots: Vec::new(),
            table: HashMap::with_capacity_and_hasher(cap, KeyedState::new(hash::derive_key(seed, 1))),
            last_hit: None,
            listeners: Vec::new(),
            listener_gen: 0,
            listen_table: HashMap::with_hasher(KeyedState::new(hash::derive_key(seed, 2))),
            wheel: TimerWheel::new(cap, Duration::from_millis(1), now),
            expired: Vec::with_capacity(cap),
            dirty: Vec::with_capacity(cap),
            isn: IsnGenerator::new(hash::derive_key(seed, 3)),
            ports: PortAllocator::new(hash::derive_key(seed, 4), lo, hi),
            ts_key: hash::derive_key(seed, 5),
            counters: Counters::default(),
            challenge: ChallengeLimiter::new(hash::derive_key(seed, 6)),
            trace: trace::Trace::default(),
            live: 0,
            gso_max: 0,
            defer_window_update: false,
            config,
        }
    }

    /// Let connections queue segments of up to `max` payload bytes for a device that cuts
    /// them (segmentation offload); 0 turns it off.
    pub(crate) fn set_gso_max(&mut self, max: usize) {
        self.gso_max = max;
    }

    pub fn config(&self) -> &TcpConfig {
        &self.config
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Connections held, TIME-WAIT and closed-but-unreleased included.
    pub fn connections(&self) -> usize {
        self.live
    }

    /// The connection of a segment from `tuple`'s remote end to its local end.
    fn lookup(&mut self, tuple: &FourTuple) -> Option<u32> {
        let (r, l) = (tuple.remote_addr.octets(), tuple.local_addr.octets());
        let addrs = u64::from_ne_bytes([r[0], r[1], r[2], r[3], l[0], l[1], l[2], l[3]]);
        let (rp, lp) = (tuple.remote_port.to_be_bytes(), tuple.local_port.to_be_bytes());
        self.lookup_wire(addrs, u32::from_ne_bytes([rp[0], rp[1], lp[0], lp[1]]))
    }

    /// `lookup` with the segment's addresses (source, destination) and ports (source,
    /// destination) as they are on the wire: the fast path compares them with the last
    /// connection found in two instructions, and builds the 4-tuple only on a miss.
    #[inline(always)]
    fn lookup_wire(&mut self, addrs: u64, ports: u32) -> Option<u32> {
        match self.last_hit {
            Some(h) if h.addrs == addrs && h.ports == ports => Some(h.idx),
            _ => self.lookup_table(addrs, ports),
        }
    }

    /// The table lookup behind the connection cache, which it refills.
    #[inline(never)]
    fn lookup_table(&mut self, addrs: u64, ports: u32) -> Option<u32> {
        let (a, p) = (addrs.to_ne_bytes(), ports.to_ne_bytes());
        let tuple = FourTuple {
            local_addr: Ipv4Addr::new(a[4], a[5], a[6], a[7]),
            local_port: u16::from_be_bytes([p[2], p[3]]),
            remote_addr: Ipv4Addr::new(a[0], a[1], a[2], a[3]),
            remote_port: u16::from_be_bytes([p[0], p[1]]),
        };
        let idx = *self.table.get(&tuple)?;
        self.last_hit = Some(LastHit { addrs, ports, idx });
        Some(idx)
    }

    fn listener_for(&self, addr: Ipv4Addr, port: u16) -> Option<u32> {
        let any = Ipv4Addr::UNSPECIFIED;
        let table = &self.listen_table;
        table.get(&(addr, port)).or_else(|| table.get(&(any, port))).or_else(|| table.get(&(any, 0))).copied()
    }

    pub(crate) fn tcb(&self, idx: u32) -> Option<&Tcb> {
        self.slots.get(idx as usize)?.tcb.as_deref()
    }

    pub(crate) fn tcb_mut(&mut self, idx: u32) -> Option<&mut Tcb> {
        self.slots.get_mut(idx as usize)?.tcb.as_deref_mut()
    }

    fn mark_dirty(&mut self, idx: u32) {
        if let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) {
            if !tcb.dirty {
                tcb.dirty = true;
                self.dirty.push(idx);
            }
        }
    }

    /// Put the connection's earliest timer on the wheel. Lazily: if the wheel already holds
    /// the connection at or before that time, it stays (the RTO moves later on every ACK;
    /// an early wake-up finds nothing due and files the real time then), so the common ACK
    /// costs no wheel operation.
    #[inline]
    fn rearm(&mut self, idx: u32) {
        match self.tcb(idx).and_then(|t| t.timers.earliest()) {
            Some(t) => {
                if self.wheel.deadline(idx).is_none_or(|cur| cur > t) {
                    self.wheel.schedule(idx, t);
                }
            }
            None => self.wheel.cancel(idx),
        }
    }

    /// File the connection's exact earliest time (after its timers ran).
    fn refile(&mut self, idx: u32) {
        match self.tcb(idx).and_then(|t| t.timers.earliest()) {
            Some(t) => self.wheel.schedule(idx, t),
            None => self.wheel.cancel(idx),
        }
    }

    /// A new TCB for `tuple` in `state`.
    pub(crate) fn new_tcb(&self, now: Instant, tuple: FourTuple, opts: SocketOptions, mtu: usize, state: State) -> Tcb {
        // RFC 9293 §3.7.1: the MSS follows from the MTU (less 40 bytes of IPv4 and TCP
        // headers). An override may only lower it (as Linux's TCP_MAXSEG): it bounds our
        // segments too, and a segment larger than the device carries would be lost for good
        // (DF is set, and we drop fragments ourselves).
        let mtu_mss = mtu.saturating_sub(40).clamp(64, u16::MAX as usize) as u16;
        let rmss = self.config.mss.map_or(mtu_mss, |m| m.clamp(64, mtu_mss));
        // RFC 7323 §2.3: the smallest shift that lets the window cover the buffer.
        let mut wscale = 0u8;
        if self.config.window_scaling {
            while wscale < 14 && (opts.recv_buffer >> wscale) > u16::MAX as usize {
                wscale += 1;
            }
        }
        let iss = self.isn.isn(now, (tuple.local_addr, tuple.local_port), (tuple.remote_addr, tuple.remote_port));
        let ts_offset = {
            use core::hash::Hasher;
            let mut h = hash::SipHasher24::new(self.ts_key);
            h.write_u32(iss.0);
            h.finish() as u32
        };
        let eff = rmss - if self.config.timestamps { 12 } else { 0 };
        Tcb {
            state,
            tuple,
            opts,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            snd_wl1: SeqNumber(0),
            snd_wl2: SeqNumber(0),
            max_snd_wnd: 0,
            snd_wscale: 0,
            irs: SeqNumber(0),
            rcv_nxt: SeqNumber(0),
            rcv_nxt_pos: 0,
            rcv_adv: SeqNumber(0),
            rcv_wscale: wscale,
            wscale_ok: false,
            rcv_fin: None,
            smss: rmss,
            rmss,
            eff_mss: eff,
            ts_enabled: false,
            ts_recent: 0,
            ts_recent_age: now,
            ts_offset,
            sack_enabled: false,
            last_ack_sent: SeqNumber(0),
            rtt: RttEstimator::new(self.config.rtt),
            rtt_seq: None,
            retries: 0,
            rexmt_start: None,
            persist_backoff: 0,
            keepalive_probes: 0,
            probes_out: 0,
            last_oow_ack: None,
            last_rcv: now,
            cc: opts.congestion.build(eff as u32, self.config.initial_window),
            inflation: 0,
            dupacks: 0,
            recovery: None,
            recover: iss,
            snd_max_at_dupack: iss,
            rxt_acked: [(iss, iss); recovery::RXT_ACKED],
            rexmt_now: None,
            last_send: now,
            sndq: VecDeque::new(),
            snd_queued: 0,
            snd_end: iss + 1,
            snd_nxt_idx: 0,
            fin_queued: false,
            rcvq: rxq::RxQueue::new(),
            rcv_queued: 0,
            rcv_unverified: 0,
            ooo: OutOfOrderQueue::new(),
            ack_now: false,
            unacked_segs: 0,
            dsack: None,
            timers: Timers::default(),
            shut_rd: false,
            orphan: false,
            error: None,
            listener: None,
            accept_queued: false,
            dirty: false,
            stats: ConnStats::default(),
            pred_flags: input::NO_PREDICTION,
            ph_sum: checksum::pseudo_header(tuple.remote_addr, tuple.local_addr, crate::wire::IpProtocol::TCP.0, 0),
        }
    }

    /// Put a TCB in a free slot and the table. `None` when the stack is full.
    pub(crate) fn insert(&mut self, tcb: Tcb) -> Option<u32> {
        if self.live >= self.config.max_connections {
            return None;
        }
        let tuple = tcb.tuple;
        let idx = match self.free_slots.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[idx as usize].tcb = Some(Box::new(tcb));
        self.table.insert(tuple, idx);
        self.live += 1;
        Some(idx)
    }

    /// The connection is over on the wire: take it out of the table and the wheel, and out of
    /// its listener's queues. The slot itself is freed at once if nobody holds a handle to it
    /// (an orphan, or never accepted); otherwise it stays, CLOSED, until the application
    /// closes it and sees why.
    fn retire(&mut self, idx: u32) {
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else { return };
        tcb.state = State::Closed;
        tcb.timers = Timers::default();
        let tuple = tcb.tuple;
        let listener = tcb.listener.take();
        let orphan = tcb.orphan;
        // Buffers go back to the pool now.
        tcb.sndq.clear();
        tcb.snd_queued = 0;
        tcb.ooo.clear();
        if self.table.get(&tuple) == Some(&idx) {
            self.table.remove(&tuple);
        }
        if self.last_hit.is_some_and(|h| h.idx == idx) {
            self.last_hit = None;
        }
        self.wheel.cancel(idx);
        let mut unowned = orphan;
        if let Some(l) = listener.and_then(|l| self.listeners.get_mut(l as usize)).and_then(|l| l.as_mut()) {
            // Still owned by the listener: it was never accepted. An accept-queue entry is
            // left in place: freeing the slot below moves its generation on, so `accept`
            // skips it.
            if tcb.accept_queued {
                l.ready = l.ready.saturating_sub(1);
            } else {
                l.syn_received = l.syn_received.saturating_sub(1);
            }
            unowned = true;
        }
        if unowned {
            self.free(idx);
        }
    }

    /// Release a slot for reuse; its generation moves on so old handles go stale.
    pub(crate) fn free(&mut self, idx: u32) {
        let Some(slot) = self.slots.get_mut(idx as usize) else { return };
        if slot.tcb.take().is_some() {
            slot.gen = slot.gen.wrapping_add(1);
            self.live -= 1;
            self.free_slots.push(idx);
            self.wheel.cancel(idx);
        }
    }

    /// A socket call changed the connection: let it send, re-arm its timers, re-predict.
    pub(crate) fn changed(&mut self, idx: u32) {
        self.mark_dirty(idx);
        self.rearm(idx);
        self.repredict(idx);
    }

    /// Recompute a connection's header prediction after its state changed.
    fn repredict(&mut self, idx: u32) {
        if let Some(tcb) = self.tcb_mut(idx) {
            tcb.pred_flags = input::pred_word(tcb);
        }
    }

    /// The receive queue of connection `idx`: where the fast path's case (a) puts a frame.
    #[inline(always)]
    pub(crate) fn rcvq(&mut self, idx: u32) -> Option<&mut rxq::RxQueue> {
        Some(&mut self.slots.get_mut(idx as usize)?.tcb.as_deref_mut()?.rcvq)
    }

    /// Header prediction and the fast path for the TCP segment of `ing.len` bytes at `off`
    /// in `frame`: its connection (last-hit cache, then the table), `input::predict`, and
    /// cases (a) and (b).
    #[inline(always)]
    pub(crate) fn fast(&mut self, now: Instant, ing: TcpIngress, off: usize, frame: &PBuf, io: Io<'_>) -> input::Fast {
        let Some(seg) = frame.data().get(off..off + ing.len as usize) else { return input::Fast::Slow };
        let Some(p) = seg.first_chunk::<4>() else { return input::Fast::Slow };
        let ports = u32::from_ne_bytes(*p);
        let Some(idx) = self.lookup_wire(ing.addr_key(), ports) else { return input::Fast::Slow };
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else {
            return input::Fast::Slow;
        };
        let Some(p) = input::predict(tcb, seg, ing.checksum_ok) else { return input::Fast::Slow };
        self.counters.segs_in += 1;
        let (out, dirty, rearm) = match p {
            input::Predicted::Data { seq, hl, len, unverified, tsval } => {
                let payload = seg.get(hl..).unwrap_or_default();
                let c = &mut self.counters;
                let (queue, rearm) =
                    input::fast_data(now, self.config.delayed_ack, c, tcb, seq, payload, unverified, tsval);
                let out = match queue {
                    true => input::Fast::Queue(input::Queue { idx, seq, off: (off + hl) as u32, len, unverified }),
                    false => input::Fast::Done,
                };
                (out, tcb.ack_now, rearm)
            }
            input::Predicted::Ack { seq, ack, ts } => {
                let Io { pool, iface, tx } = io;
                let mut env = env!(self, now, pool, iface, tx);
                (input::Fast::Done, true, input::fast_ack(&mut env, tcb, seq, ack, ts))
            }
            input::Predicted::BadChecksum => {
                self.counters.drop(DropReason::BadChecksum);
                return input::Fast::Done;
            }
        };
        tcb.stats.segs_in += 1;
        if dirty && !tcb.dirty {
            tcb.dirty = true;
            self.dirty.push(idx);
        }
        if rearm {
            self.rearm(idx);
        }
        out
    }

    /// The full path: a received TCP segment (the frame's view is exactly the segment) that
    /// header prediction did not take, or that was not a common frame.
    #[inline(never)]
    pub(crate) fn input_slow(&mut self, now: Instant, ing: TcpIngress, mut segment: PBuf, io: Io<'_>) {
        self.counters.segs_in += 1;
        self.counters.slow_path += 1;
        let (src, dst, checksum_ok) = (ing.src(), ing.dst(), ing.checksum_ok);
        let (seg, hdr_len) = match parse_segment(src, dst, segment.data()) {
            Ok(x) => x,
            Err(_) => {
                self.counters.drop(DropReason::Malformed);
                return;
            }
        };
        let tuple =
            FourTuple { local_addr: dst, local_port: seg.dst_port, remote_addr: src, remote_port: seg.src_port };
        let idx = self.lookup(&tuple);
        let mut unverified = None;
        if !checksum_ok {
            let defer = idx.and_then(|i| self.tcb(i)).is_some_and(|t| input::deferrable(t, &seg));
            if defer {
                unverified = Some(Unverified { header_sum: seg.header_sum, tsval: seg.ts.map(|t| t.0) });
            } else {
                let payload_sum = checksum::sum(&segment.data()[hdr_len..]);
                if checksum::add_at(seg.header_sum, payload_sum, hdr_len) != 0xffff {
                    self.counters.drop(DropReason::BadChecksum);
                    return;
                }
            }
        }
        let _ = segment.trim_front(hdr_len);
        match idx {
            Some(i) => self.connection_input(now, i, &seg, segment, unverified, io),
            None => self.no_connection(now, &seg, None, io),
        }
    }

    fn connection_input(
        &mut self,
        now: Instant,
        idx: u32,
        seg: &Segment,
        payload: PBuf,
        unverified: Option<Unverified>,
        io: Io<'_>,
    ) {
        let Io { pool, iface, tx } = io;
        // Only a SYN can reincarnate a TIME-WAIT connection (the one use of this).
        let has_listener = seg.flags.contains(TcpFlags::SYN) && self.listener_for(seg.dst, seg.dst_port).is_some();
        let Some(tcb) = self.slots[idx as usize].tcb.as_deref_mut() else { return };
        // Linux drops the handshake's final ACK when the accept queue is full; the client
        // retransmits and the connection completes once the application accepts.
        if tcb.state == State::SynReceived && seg.flags.contains(TcpFlags::ACK) && !seg.flags.contains(TcpFlags::RST) {
            if let Some(l) = tcb.listener.and_then(|l| self.listeners.get(l as usize)).and_then(|l| l.as_ref()) {
                if l.ready >= l.backlog {
                    self.counters.drop(DropReason::ListenOverflow);
                    return;
                }
            }
        }
        tcb.stats.segs_in += 1;
        let before = tcb.state;
        let mut env = env!(self, now, pool, iface, tx);
        let outcome = match tcb.state {
            State::SynSent => input::syn_sent(&mut env, tcb, seg, payload),
            State::Closed | State::Listen => {
                output::send_reset(&mut env, seg, None, None);
                Outcome::Keep
            }
            _ => {
                let o = input::synchronized(&mut env, tcb, seg, payload, unverified);
                timer::touch_keepalive(&env, tcb);
                o
            }
        };
        if tcb.state != before {
            self.trace.event(now, tcb, trace::Event::State(tcb.state));
        }
        match outcome {
            Outcome::Keep => {}
            Outcome::Established => {
                self.counters.passive_opens += 1;
                if let Some(lidx) = tcb.listener {
                    tcb.accept_queued = true;
                    self.enqueue_accepted(lidx, idx);
                }
            }
            Outcome::Delete => {
                self.retire(idx);
                return;
            }
            Outcome::Reincarnate => {
                if !has_listener {
                    // Nobody listens (we had opened actively): stay in TIME-WAIT and ACK,
                    // as Linux falls through from TW_SYN to TW_ACK.
                    tcb.ack_now = true;
                } else {
                    // RFC 1122 §4.2.2.13 / Linux: the new incarnation's ISS lies above the
                    // old sequence space. A handle the application still holds keeps the
                    // old connection's data (retire frees only unowned slots).
                    let iss = tcb.snd_max + 65537;
                    self.retire(idx);
                    self.no_connection(now, seg, Some(iss), Io { pool, iface, tx });
                    return;
                }
            }
        }
        self.mark_dirty(idx);
        self.rearm(idx);
        self.repredict(idx);
    }

    /// No connection for the segment: a listener may take it, otherwise RST (RFC 9293
    /// §3.10.7.1, CLOSED state).
    fn no_connection(&mut self, now: Instant, seg: &Segment, iss: Option<SeqNumber>, io: Io<'_>) {
        let Io { pool, iface, tx } = io;
        let listener = self.listener_for(seg.dst, seg.dst_port);
        let mut env = env!(self, now, pool, iface, tx);
        let f = seg.flags;
        let Some(lidx) = listener else {
            env.counters.drop(DropReason::NoConnection);
            output::send_reset(&mut env, seg, None, None);
            return;
        };
        // LISTEN (RFC 9293 §3.10.7.2): RST ignored, ACK reset, SYN opens.
        if f.contains(TcpFlags::RST) {
            env.counters.drop(DropReason::Discarded);
            return;
        }
        if f.contains(TcpFlags::ACK) {
            output::send_reset(&mut env, seg, Some(seg.ack), None);
            env.counters.drop(DropReason::NoConnection);
            return;
        }
        if !f.contains(TcpFlags::SYN) {
            env.counters.drop(DropReason::Discarded);
            return;
        }
        let Some(l) = self.listeners.get(lidx as usize).and_then(|l| l.as_ref()) else { return };
        // Linux drops the SYN when either queue is full (no SYN cookies here).
        if l.syn_received >= l.backlog || l.ready >= l.backlog {
            env.counters.drop(DropReason::ListenOverflow);
            return;
        }
        let opts = l.opts;
        let tuple = FourTuple {
            local_addr: seg.dst,
            local_port: seg.dst_port,
            remote_addr: seg.src,
            remote_port: seg.src_port,
        };
        let mtu = env.iface.capabilities().mtu;
        let mut tcb = self.new_tcb(now, tuple, opts, mtu, State::SynReceived);
        if let Some(iss) = iss {
            tcb.set_iss(iss);
        }
        tcb.listener = Some(lidx);
        tcb.irs = seg.seq;
        tcb.rcv_nxt = seg.seq + 1;
        tcb.rcv_adv = tcb.rcv_nxt;
        tcb.snd_wnd = seg.wnd as u32;
        tcb.snd_wl1 = seg.seq;
        tcb.snd_wl2 = tcb.iss;
        let mut env = env!(self, now, pool, iface, tx);
        input::negotiate(&mut env, &mut tcb, seg);
        // Data on a SYN is dropped (no TCP Fast Open); the peer sends it again.
        self.trace.event(now, &tcb, trace::Event::State(tcb.state));
        let Some(idx) = self.insert(tcb) else {
            self.counters.drop(DropReason::NoBuffer);
            return;
        };
        if let Some(l) = self.listeners.get_mut(lidx as usize).and_then(|l| l.as_mut()) {
            l.syn_received += 1;
        }
        self.mark_dirty(idx);
        self.rearm(idx);
    }

    /// A passively opened connection is established: from the listener's SYN queue to its
    /// accept queue.
    fn enqueue_accepted(&mut self, lidx: u32, idx: u32) {
        let Some(l) = self.listeners.get_mut(lidx as usize).and_then(|l| l.as_mut()) else { return };
        l.syn_received = l.syn_received.saturating_sub(1);
        // Dead entries (connections that ended unaccepted) are dropped once the queue holds
        // twice the backlog: amortised O(1) per entry, and the queue stays bounded.
        let slots = &self.slots;
        if l.accept.len() >= 2 * l.backlog {
            l.accept.retain(|&(i, g)| slots[i as usize].gen == g && slots[i as usize].tcb.is_some());
        }
        l.accept.push_back((idx, slots[idx as usize].gen));
        l.ready += 1;
    }

    /// Run the timers that are due.
    pub(crate) fn run_timers(&mut self, now: Instant, io: Io<'_>) {
        let Io { pool, iface, tx } = io;
        let mut expired = std::mem::take(&mut self.expired);
        self.wheel.expire(now, |k| expired.push(k));
        for &idx in &expired {
            let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else { continue };
            let before = tcb.state;
            let mut env = env!(self, now, pool, &mut *iface, &mut *tx);
            let outcome = timer::expire(&mut env, tcb);
            if tcb.state != before {
                self.trace.event(now, tcb, trace::Event::State(tcb.state));
            }
            match outcome {
                Outcome::Delete => self.retire(idx),
                _ => {
                    self.mark_dirty(idx);
                    self.refile(idx);
                    self.repredict(idx);
                }
            }
        }
        expired.clear();
        self.expired = expired;
    }

    /// Let every connection with something to say send it.
    pub(crate) fn flush(&mut self, now: Instant, io: Io<'_>) {
        let Io { pool, iface, tx } = io;
        let mut i = 0;
        let mut starved = None;
        while i < self.dirty.len() {
            if tx.is_full() {
                break;
            }
            let idx = self.dirty[i];
            i += 1;
            let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else { continue };
            tcb.dirty = false;
            let mut env = env!(self, now, pool, &mut *iface, &mut *tx);
            output::output(&mut env, tcb);
            // A full ring may have stopped it with more to send: it goes back on the list
            // (at the end, behind the others), or nothing but the next ACK or timer would
            // let the rest of its window out.
            if tx.is_full() {
                tcb.dirty = true;
                starved = Some(idx);
            }
            self.rearm(idx);
        }
        // What the full device queue left for next time stays dirty.
        self.dirty.drain(..i);
        self.dirty.extend(starved);
    }

    /// When the stack next needs to run: now if output is pending, else the earliest timer.
    pub fn poll_at(&self, now: Instant) -> Option<Instant> {
        if !self.dirty.is_empty() {
            return Some(now);
        }
        self.wheel.next_deadline()
    }

    // ---- The protocol side of the socket calls (crate::socket wraps these). ----

    pub(crate) fn listen(&mut self, local: (Ipv4Addr, u16), backlog: usize, opts: SocketOptions) -> Option<(u32, u32)> {
        // Port 0 only as the every-address, every-port listener (`tcp_listen_any`).
        if self.listen_table.contains_key(&local) || (local.1 == 0 && !local.0.is_unspecified()) {
            return None;
        }
        self.listener_gen = self.listener_gen.wrapping_add(1);
        let l = Listener {
            gen: self.listener_gen,
            local,
            backlog: backlog.max(1),
            syn_received: 0,
            accept: VecDeque::new(),
            ready: 0,
            opts,
        };
        let idx = match self.listeners.iter().position(|l| l.is_none()) {
            Some(i) => i,
            None => {
                self.listeners.push(None);
                self.listeners.len() - 1
            }
        };
        self.listeners[idx] = Some(l);
        self.listen_table.insert(local, idx as u32);
        Some((idx as u32, self.listener_gen))
    }

    /// Close a listener: connections it had not handed out are reset.
    pub(crate) fn unlisten(&mut self, now: Instant, lidx: u32, io: Io<'_>) {
        let Some(l) = self.listeners.get_mut(lidx as usize).and_then(|l| l.take()) else { return };
        self.listen_table.remove(&l.local);
        let Io { pool, iface, tx } = io;
        let pending: Vec<u32> =
            (0..self.slots.len() as u32).filter(|&i| self.tcb(i).is_some_and(|t| t.listener == Some(lidx))).collect();
        for idx in pending {
            if let Some(tcb) = self.slots[idx as usize].tcb.as_deref_mut() {
                let mut env = env!(self, now, pool, &mut *iface, &mut *tx);
                output::send_abort(&mut env, tcb);
                tcb.listener = None;
                tcb.orphan = true;
            }
            self.retire(idx);
        }
    }

    pub(crate) fn listener(&self, lidx: u32) -> Option<&Listener> {
        self.listeners.get(lidx as usize)?.as_ref()
    }

    pub(crate) fn accept(&mut self, lidx: u32) -> Option<u32> {
        let l = self.listeners.get_mut(lidx as usize)?.as_mut()?;
        // Skip the entries of connections that ended before they were accepted.
        while let Some((idx, gen)) = l.accept.pop_front() {
            let slot = &mut self.slots[idx as usize];
            if let Some(tcb) = slot.tcb.as_deref_mut().filter(|_| slot.gen == gen) {
                tcb.listener = None;
                tcb.accept_queued = false;
                l.ready -= 1;
                return Some(idx);
            }
        }
        None
    }

    /// Active open: choose an ephemeral port (RFC 6056) and send a SYN.
    pub(crate) fn connect(
        &mut self,
        now: Instant,
        local_addr: Ipv4Addr,
        local_port: Option<u16>,
        remote: (Ipv4Addr, u16),
        opts: SocketOptions,
        mtu: usize,
    ) -> Result<u32, crate::socket::Error> {
        use crate::socket::Error;
        if remote.1 == 0 || remote.0.is_unspecified() || remote.0.is_broadcast() {
            return Err(Error::InvalidArgument);
        }
        if self.live >= self.config.max_connections {
            return Err(Error::NoBufferSpace);
        }
        let tuple_for = |port| FourTuple { local_addr, local_port: port, remote_addr: remote.0, remote_port: remote.1 };
        let port = match local_port {
            Some(p) => {
                if self.table.contains_key(&tuple_for(p)) {
                    return Err(Error::AddrInUse);
                }
                p
            }
            None => {
                let table = &self.table;
                let listeners = &self.listen_table;
                self.ports
                    .candidates(local_addr, remote)
                    .find(|&p| {
                        !table.contains_key(&tuple_for(p))
                            && !listeners.contains_key(&(local_addr, p))
                            && !listeners.contains_key(&(Ipv4Addr::UNSPECIFIED, p))
                    })
                    .ok_or(Error::AddrInUse)?
            }
        };
        let tcb = self.new_tcb(now, tuple_for(port), opts, mtu, State::SynSent);
        self.trace.event(now, &tcb, trace::Event::State(tcb.state));
        let idx = self.insert(tcb).ok_or(Error::NoBufferSpace)?;
        self.counters.active_opens += 1;
        self.mark_dirty(idx);
        Ok(idx)
    }

    /// Queue application bytes: copied once into pbufs, summed during the copy.
    pub(crate) fn send(&mut self, idx: u32, data: &[u8], pool: &Pool) -> Result<usize, crate::socket::Error> {
        let mut rest = data;
        self.send_with(idx, pool, |buf, room| {
            let n = room.min(rest.len());
            // Cannot fail: `room` fits the tailroom and the buffer is unique.
            let _ = buf.append_copy_sum(&rest[..n]);
            rest = &rest[n..];
            n
        })
    }

    /// Queue bytes that `fill` appends to send-queue pbufs: `fill(buf, room)` appends at
    /// most `room` bytes to `buf` and returns how many; it is called until it appends less
    /// than offered or the send buffer is full. Returns the bytes queued.
    pub(crate) fn send_with(
        &mut self,
        idx: u32,
        pool: &Pool,
        mut fill: impl FnMut(&mut PBuf, usize) -> usize,
    ) -> Result<usize, crate::socket::Error> {
        use crate::socket::Error;
        let counters = &mut self.counters;
        let tcb = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()).ok_or(Error::InvalidHandle)?;
        if let Some(e) = tcb.error {
            return Err(e.into());
        }
        if tcb.fin_queued {
            return Err(Error::InvalidState);
        }
        match tcb.state {
            State::Established | State::CloseWait => {}
            State::SynSent | State::SynReceived => return Err(Error::WouldBlock),
            _ => return Err(Error::NotConnected),
        }
        // Each queued segment costs at least MIN_SEGMENT_CHARGE bytes of the send buffer
        // (as Linux charges an skb's truesize), so tiny writes cannot pin a pbuf per byte.
        let charged = tcb.snd_queued.max(tcb.sndq.len() * MIN_SEGMENT_CHARGE);
        let mut room = tcb.opts.send_buffer.saturating_sub(charged);
        if room == 0 {
            return Err(Error::WouldBlock);
        }
        let mut copied = 0;
        let mut starved = false;
        let seg_size = output::send_unit(tcb, self.gso_max);
        while room > 0 {
            // Fill the unsent tail segment first (Afterburner: "send tries to fill the
            // cluster at the end of the socket buffer before obtaining a new one").
            // (A tail cut by `split_front` keeps its buffer's end: it may be short of a unit
            // with no tailroom left.)
            let tail_has_room = tcb.sndq.len() > tcb.snd_nxt_idx
                && tcb.sndq.back().is_some_and(|s| {
                    s.sent == 0 && s.buf.len() < seg_size && s.buf.tailroom() > 0 && s.buf.is_unique()
                });
            if !tail_has_room {
                let Ok(buf) = pool.alloc() else {
                    counters.drop(DropReason::NoBuffer);
                    starved = true;
                    break;
                };
                let seq = tcb.snd_end;
                tcb.sndq.push_back(tcb::TxSeg { seq, buf, sent: 0, sent_at: Instant::ZERO, sacked: false });
            }
            let Some(tail) = tcb.sndq.back_mut() else { break };
            let offer = room.min(seg_size - tail.buf.len()).min(tail.buf.tailroom());
            if offer == 0 {
                break;
            }
            let n = fill(&mut tail.buf, offer).min(offer);
            copied += n;
            room -= n;
            tcb.snd_queued += n;
            tcb.snd_end += n as u32;
            if n < offer {
                break;
            }
        }
        // Drop an empty segment left by a failed or empty fill.
        if tcb.sndq.back().is_some_and(|s| s.buf.is_empty()) {
            tcb.sndq.pop_back();
        }
        if copied == 0 && starved {
            return Err(Error::NoBufferSpace);
        }
        if copied > 0 {
            self.mark_dirty(idx);
        }
        Ok(copied)
    }

    /// Copy received bytes to the application, verifying deferred checksums during the copy.
    pub(crate) fn recv(
        &mut self,
        now: Instant,
        idx: u32,
        dst: &mut [u8],
        io: Io<'_>,
    ) -> Result<usize, crate::socket::Error> {
        let mut copied = 0;
        self.recv_with(now, idx, io, |src, unverified| {
            let room = dst.len() - copied;
            let n = src.len().min(room);
            let out = &mut dst[copied..copied + n];
            match unverified {
                // The fused path: copy and sum the whole segment in one pass, and accept it
                // only if the sum checks.
                Some(header_sum) if n == src.len() => {
                    if checksum::add(header_sum, checksum::copy_and_sum(out, src)) != 0xffff {
                        return Take::BadChecksum;
                    }
                }
                // A segment larger than the room is checked first (sum pass), so that no
                // unverified byte ever reaches the caller.
                Some(header_sum) => {
                    if !input::payload_checks(header_sum, src) {
                        return Take::BadChecksum;
                    }
                    out.copy_from_slice(&src[..n]);
                }
                None => out.copy_from_slice(&src[..n]),
            }
            copied += n;
            Take::Bytes(n)
        })
    }

    /// Hand received bytes to `drain` in place (`tcp_recv_with`): a segment whose checksum
    /// was deferred is verified (a sum pass) before `drain` sees any of it.
    pub(crate) fn recv_in_place(
        &mut self,
        now: Instant,
        idx: u32,
        io: Io<'_>,
        mut drain: impl FnMut(&[u8]) -> usize,
    ) -> Result<usize, crate::socket::Error> {
        self.recv_with(now, idx, io, |src, unverified| match unverified {
            Some(header_sum) if !input::payload_checks(header_sum, src) => Take::BadChecksum,
            _ => Take::Bytes(drain(src)),
        })
    }

    /// Hand received bytes to `take` segment by segment, in order: `take(bytes, unverified)`
    /// gets the front segment's bytes and, if its checksum is still to be checked, the sum
    /// of its pseudo-header and header, and returns how many bytes it consumed (checking the
    /// checksum before letting any byte go), or that the checksum failed. Stops when `take`
    /// consumes less than offered. Returns the bytes consumed; `Ok(0)` is the end of stream.
    pub(crate) fn recv_with(
        &mut self,
        now: Instant,
        idx: u32,
        io: Io<'_>,
        mut take: impl FnMut(&[u8], Option<u16>) -> Take,
    ) -> Result<usize, crate::socket::Error> {
        use crate::socket::Error;
        let Io { pool, iface, tx } = io;
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else {
            return Err(Error::InvalidHandle);
        };
        let mut env = env!(self, now, pool, iface, tx);
        let mut copied = 0;
        while let Some(front) = tcb.rcvq.front() {
            let len = front.buf.len();
            let unverified = front.unverified.map(|u| u.header_sum);
            if unverified.is_some() {
                debug_assert_eq!(tcb.rcvq.len(), tcb.rcv_unverified, "the unverified run is a suffix");
            }
            let n = match take(front.buf.data(), unverified) {
                Take::Bytes(n) => n.min(len),
                Take::BadChecksum => {
                    input::reject_from(&mut env, tcb, 0);
                    break;
                }
            };
            if unverified.is_some() {
                input::accept_verified(&mut env, tcb, 0);
            }
            copied += n;
            tcb.rcv_queued -= n;
            if n == len {
                tcb.rcvq.pop_front();
            } else {
                if let Some(front) = tcb.rcvq.front_mut() {
                    let _ = front.buf.trim_front(n);
                    front.seq += n as u32;
                }
                break;
            }
        }
        let eof = tcb.rcvq.is_empty()
            && tcb.rcv_fin.is_none()
            && matches!(tcb.state, State::CloseWait | State::LastAck | State::Closing | State::TimeWait)
            || (tcb.rcvq.is_empty() && tcb.state == State::Closed && tcb.error.is_none());
        let error = tcb.error;
        if copied > 0 && !self.defer_window_update && output::window_update_due(tcb) {
            tcb.ack_now = true;
        }
        let wake = copied > 0 && tcb.ack_now;
        if wake {
            self.mark_dirty(idx);
        }
        if copied > 0 {
            return Ok(copied);
        }
        if eof {
            return Ok(0);
        }
        match error {
            Some(e) => Err(e.into()),
            None => Err(Error::WouldBlock),
        }
    }

    /// Shut down the write side: a FIN follows the queued data (RFC 9293 §3.10.4 CLOSE).
    pub(crate) fn shutdown_write(&mut self, idx: u32) -> Result<(), crate::socket::Error> {
        use crate::socket::Error;
        let tcb = self.tcb_mut(idx).ok_or(Error::InvalidHandle)?;
        match tcb.state {
            State::SynSent => {
                tcb.state = State::Closed;
                self.retire(idx);
                return Ok(());
            }
            State::SynReceived | State::Established => {
                tcb.fin_queued = true;
                tcb.state = State::FinWait1;
            }
            State::CloseWait => {
                tcb.fin_queued = true;
                tcb.state = State::LastAck;
            }
            _ => return Ok(()),
        }
        self.mark_dirty(idx);
        self.repredict(idx);
        Ok(())
    }

    /// Shut down the read side: queued data is discarded, and later data resets the
    /// connection (as Linux does).
    pub(crate) fn shutdown_read(&mut self, idx: u32) -> Result<(), crate::socket::Error> {
        let tcb = self.tcb_mut(idx).ok_or(crate::socket::Error::InvalidHandle)?;
        tcb.shut_rd = true;
        tcb.rcvq.clear();
        tcb.rcv_queued = 0;
        tcb.rcv_unverified = 0;
        self.repredict(idx);
        Ok(())
    }

    /// Close: if unread data would be lost, reset (RFC 9293 §3.10.4 permits it; Linux does it
    /// so the peer learns its data was not consumed); otherwise FIN and let the connection
    /// finish on its own.
    pub(crate) fn close(&mut self, now: Instant, idx: u32, io: Io<'_>) -> Result<(), crate::socket::Error> {
        let tcb = self.tcb_mut(idx).ok_or(crate::socket::Error::InvalidHandle)?;
        if tcb.state == State::Closed {
            self.free(idx);
            return Ok(());
        }
        if tcb.rcv_queued > 0 || !tcb.ooo.is_empty() {
            return self.abort(now, idx, io);
        }
        self.shutdown_write(idx)?;
        let fin_wait_2_timeout = self.config.fin_wait_2_timeout;
        if let Some(tcb) = self.tcb_mut(idx) {
            tcb.shut_rd = true;
            tcb.orphan = true;
            match tcb.state {
                State::Closed => self.free(idx),
                State::FinWait2 => {
                    // Already half-closed and acknowledged: the orphan timeout starts now.
                    tcb.timers.keepalive = Some(now + fin_wait_2_timeout);
                    self.rearm(idx);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Abort: RST to the peer (from a synchronized state) and forget the connection.
    pub(crate) fn abort(&mut self, now: Instant, idx: u32, io: Io<'_>) -> Result<(), crate::socket::Error> {
        let Io { pool, iface, tx } = io;
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else {
            return Err(crate::socket::Error::InvalidHandle);
        };
        if matches!(
            tcb.state,
            State::SynReceived | State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait
        ) {
            let mut env = env!(self, now, pool, iface, tx);
            output::send_abort(&mut env, tcb);
        }
        tcb.orphan = true;
        self.retire(idx);
        self.free(idx);
        Ok(())
    }

    /// A `tcp_info`-like snapshot.
    pub(crate) fn info(&self, idx: u32) -> Option<TcpInfo> {
        let t = self.tcb(idx)?;
        Some(TcpInfo {
            state: t.state,
            srtt: t.rtt.srtt(),
            rttvar: t.rtt.rttvar(),
            rto: t.rtt.rto(),
            cwnd: t.cwnd(),
            ssthresh: t.cc.ssthresh(),
            snd_wnd: t.snd_wnd,
            rcv_wnd: t.rcv_adv.since(t.rcv_nxt),
            smss: t.smss,
            eff_mss: t.eff_mss,
            snd_wscale: t.snd_wscale,
            rcv_wscale: t.rcv_wscale,
            timestamps: t.ts_enabled,
            sack: t.sack_enabled,
            flight: t.flight(),
            stats: t.stats,
        })
    }
}
