//! TCP, split the way BSD splits it: `input` (segment arrival), `output` (what to send),
//! `timer` (what time does), plus the connection control block (`tcb`), the RTO
//! estimator ([`rtt`]), the out-of-order queue ([`reasm`]), sequence numbers ([`seq`]), the
//! timing wheel ([`wheel`]), and the connection table here.
//!
//! This module owns every connection of a stack. Lookups go through a one-entry last-hit
//! cache (BSD's `tcp_last_inpcb`), then a keyed hash of the 4-tuple; listeners are found by
//! local address and port, then by port on the wildcard address. Nothing on the packet path
//! scans connections.

/// The `Env` of a protocol routine, borrowing the stack-wide parts of `$tcp` field by field
/// (a method would borrow all of it while a TCB is borrowed from its slots).
macro_rules! env {
    ($tcp:ident, $now:expr, $pool:expr, $iface:expr, $tx:expr) => {
        $crate::tcp::env::Env {
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
pub(crate) mod table;
pub(crate) mod tcb;
pub(crate) mod timer;
pub mod trace;
pub(crate) mod usrreq;
pub mod wheel;

pub use config::{KeepAlive, SocketOptions, TcpConfig};
pub use seq::SeqNumber;
pub use stats::{ConnStats, Counters, DropReason, TcpInfo};
use table::LastHit;
pub(crate) use table::{Listener, Slot};
pub use tcb::{ConnError, FourTuple, State};
pub use usrreq::RequestError;

use crate::buf::{PBuf, Pool};
use crate::iface::{Interface, TcpIngress};
use crate::phy::Batch;
use crate::time::{Duration, Instant};
use crate::wire::{checksum, TcpFlags, TcpPacket, TcpRepr};
use core::net::Ipv4Addr;
use env::ChallengeLimiter;
use hash::KeyedState;
use input::{Outcome, Segment};
use isn::{IsnGenerator, PortAllocator};
use reasm::OutOfOrderQueue;
use rtt::RttEstimator;
use std::collections::HashMap;
use tcb::Unverified;
use wheel::TimerWheel;

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
    /// Connections whose readiness may have changed since the application last looked, and
    /// listeners with a connection to accept: what `Stack::poll_event` hands out. Each is
    /// listed at most once (its `event` flag), so neither list grows past the tables.
    events: Vec<u32>,
    listener_events: Vec<u32>,
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
            events: Vec::with_capacity(cap),
            listener_events: Vec::new(),
            isn: IsnGenerator::new(hash::derive_key(seed, 3)),
            ports: PortAllocator::new(hash::derive_key(seed, 4), lo, hi),
            ts_key: hash::derive_key(seed, 5),
            counters: Counters::default(),
            challenge: ChallengeLimiter::new(hash::derive_key(seed, 6)),
            trace: trace::Trace::default(),
            live: 0,
            gso_max: 0,
            config,
        }
    }

    /// Let connections queue segments of up to `max` payload bytes for a device that cuts
    /// them (segmentation offload); 0 turns it off.
    pub(crate) fn set_gso_max(&mut self, max: usize) {
        self.gso_max = max;
    }

    /// The settings every connection starts from.
    pub fn config(&self) -> &TcpConfig {
        &self.config
    }

    /// Stack-wide counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Connections held, TIME-WAIT and closed-but-unreleased included.
    pub fn connections(&self) -> usize {
        self.live
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
        mark_event(&mut self.events, idx, tcb);
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
        mark_event(&mut self.events, idx, tcb);
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
            if tcb.state != before || tcb.error.is_some() {
                mark_event(&mut self.events, idx, tcb);
            }
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
    pub(crate) fn output_dirty(&mut self, now: Instant, io: Io<'_>) {
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

    /// The next connection whose readiness may have changed, and that the application owns
    /// (accepted or connected, not closed); its event flag is cleared.
    pub(crate) fn take_event(&mut self) -> Option<u32> {
        while let Some(idx) = self.events.pop() {
            let Some(tcb) = self.tcb_mut(idx) else { continue };
            tcb.event = false;
            if !tcb.orphan && tcb.listener.is_none() {
                return Some(idx);
            }
        }
        None
    }

    /// The next listener that gained a connection to accept since it was last reported.
    pub(crate) fn take_listener_event(&mut self) -> Option<u32> {
        while let Some(lidx) = self.listener_events.pop() {
            if let Some(l) = self.listeners.get_mut(lidx as usize).and_then(|l| l.as_mut()) {
                l.event = false;
                return Some(lidx);
            }
        }
        None
    }

    /// When the stack next needs to run: now if output is pending, else the earliest timer.
    pub fn poll_at(&self, now: Instant) -> Option<Instant> {
        if !self.dirty.is_empty() {
            return Some(now);
        }
        self.wheel.next_deadline()
    }
}

/// List a connection in `events` once: its readiness may have changed.
#[inline(always)]
fn mark_event(events: &mut Vec<u32>, idx: u32, tcb: &mut tcb::Tcb) {
    if !tcb.event {
        tcb.event = true;
        events.push(idx);
    }
}
