//! The connection table, as BSD's `in_pcb.c`: connection slots with generation numbers,
//! the 4-tuple lookup behind a one-entry last-hit cache (BSD's `tcp_last_inpcb`), the
//! listener table, a new connection's control block, and a connection's retirement.
//! Nothing here scans connections: every lookup is the cache or one hash probe.

use super::tcb::{QuickAck, Tcb, Timers};
use super::{hash, RttEstimator};
use super::{input, recovery, rxq, ConnStats, FourTuple, SeqNumber, SocketOptions, State, Tcp};
use crate::time::Instant;
use crate::wire::checksum;
use core::net::Ipv4Addr;
use std::collections::VecDeque;

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
    /// When it last answered a SYN with a SYN cookie: until a few minutes after, bare ACKs
    /// that find no connection are checked as cookies.
    pub last_cookie: Option<Instant>,
}

/// The connection cache: the last connection a segment was found for, keyed by the
/// segment's addresses and ports as they are on the wire (see `Tcp::lookup_wire`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LastHit {
    pub(super) addrs: u64,
    pub(super) ports: u32,
    pub(super) idx: u32,
}

impl Tcp {
    /// The connection of a segment from `tuple`'s remote end to its local end.
    pub(super) fn lookup(&mut self, tuple: &FourTuple) -> Option<u32> {
        let (r, l) = (tuple.remote_addr.octets(), tuple.local_addr.octets());
        let addrs = u64::from_ne_bytes([r[0], r[1], r[2], r[3], l[0], l[1], l[2], l[3]]);
        let (rp, lp) = (tuple.remote_port.to_be_bytes(), tuple.local_port.to_be_bytes());
        self.lookup_wire(addrs, u32::from_ne_bytes([rp[0], rp[1], lp[0], lp[1]]))
    }

    /// `lookup` with the segment's addresses (source, destination) and ports (source,
    /// destination) as they are on the wire: the fast path compares them with the last
    /// connection found in two instructions, and builds the 4-tuple only on a miss.
    #[inline(always)]
    pub(super) fn lookup_wire(&mut self, addrs: u64, ports: u32) -> Option<u32> {
        match self.last_hit {
            Some(h) if h.addrs == addrs && h.ports == ports => Some(h.idx),
            _ => self.lookup_table(addrs, ports),
        }
    }

    /// The table lookup behind the connection cache, which it refills.
    #[inline(never)]
    pub(super) fn lookup_table(&mut self, addrs: u64, ports: u32) -> Option<u32> {
        if self.last_miss == Some((addrs, ports)) {
            return None;
        }
        let (a, p) = (addrs.to_ne_bytes(), ports.to_ne_bytes());
        let tuple = FourTuple {
            local_addr: Ipv4Addr::new(a[4], a[5], a[6], a[7]),
            local_port: u16::from_be_bytes([p[2], p[3]]),
            remote_addr: Ipv4Addr::new(a[0], a[1], a[2], a[3]),
            remote_port: u16::from_be_bytes([p[0], p[1]]),
        };
        let Some(&idx) = self.table.get(&tuple) else {
            self.last_miss = Some((addrs, ports));
            return None;
        };
        self.last_hit = Some(LastHit { addrs, ports, idx });
        Some(idx)
    }

    pub(super) fn listener_for(&self, addr: Ipv4Addr, port: u16) -> Option<u32> {
        if let Some((a, p, found)) = self.listen_cache.get() {
            if a == addr && p == port {
                return found;
            }
        }
        let any = Ipv4Addr::UNSPECIFIED;
        let table = &self.listen_table;
        let found =
            table.get(&(addr, port)).or_else(|| table.get(&(any, port))).or_else(|| table.get(&(any, 0))).copied();
        self.listen_cache.set(Some((addr, port, found)));
        found
    }

    pub(crate) fn tcb(&self, idx: u32) -> Option<&Tcb> {
        self.slots.get(idx as usize)?.tcb.as_deref()
    }

    pub(crate) fn tcb_mut(&mut self, idx: u32) -> Option<&mut Tcb> {
        self.slots.get_mut(idx as usize)?.tcb.as_deref_mut()
    }

    pub(super) fn mark_dirty(&mut self, idx: u32) {
        if let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) {
            if !tcb.dirty {
                tcb.dirty = true;
                self.dirty.push(idx);
            }
        }
    }

    /// Take the connection in slot `idx` off the list of connections with output pending,
    /// for one dispatch that must not send for it (`Stack::dispatch_holding`); it stays
    /// marked, so nothing lists it twice meanwhile. `true` if it was listed.
    pub(crate) fn unlist_dirty(&mut self, idx: u32) -> bool {
        // The mark says whether it is listed: no look into the list unless it is. Then it is
        // usually near the end, where a reader's own arrivals just put it.
        if !self.tcb(idx).is_some_and(|t| t.dirty) {
            return false;
        }
        let Some(pos) = self.dirty.iter().rposition(|&d| d == idx) else { return false };
        self.dirty.remove(pos);
        true
    }

    /// List again a connection [`unlist_dirty`](Self::unlist_dirty) took off, if it is still
    /// there and marked.
    pub(crate) fn relist_dirty(&mut self, idx: u32) {
        if self.tcb(idx).is_some_and(|t| t.dirty) {
            self.dirty.push(idx);
        }
    }

    /// Put the connection's earliest timer on the wheel. Lazily: if the wheel already holds
    /// the connection at or before that time, it stays (the RTO moves later on every ACK;
    /// an early wake-up finds nothing due and files the real time then), so the common ACK
    /// costs no wheel operation. For the same reason a connection left with no timer keeps
    /// its entry: the delayed-ACK timer is set by data and cleared by the ACK sent for it,
    /// and cancelling then filing again would cost two wheel operations per ACK. Linux
    /// leaves its stopped timers running the same way (`inet_csk_clear_xmit_timer` without
    /// `INET_CSK_CLEAR_TIMERS`); the wake-up finds nothing due and drops the entry.
    #[inline]
    pub(super) fn rearm(&mut self, idx: u32) {
        let earliest = self.tcb(idx).and_then(|t| t.timers.earliest());
        self.rearm_at(idx, earliest);
    }

    /// [`rearm`](Self::rearm) with the connection's earliest timer already read.
    #[inline]
    pub(super) fn rearm_at(&mut self, idx: u32, earliest: Option<Instant>) {
        if let Some(t) = earliest {
            if self.wheel.deadline(idx).is_none_or(|cur| cur > t) {
                self.wheel.schedule(idx, t);
            }
        }
    }

    /// File the connection's exact earliest time (after its timers ran).
    pub(super) fn refile(&mut self, idx: u32) {
        match self.tcb(idx).and_then(|t| t.timers.earliest()) {
            Some(t) => self.wheel.schedule(idx, t),
            None => self.wheel.cancel(idx),
        }
    }

    /// The MSS we advertise on a device with this MTU.
    pub(super) fn rmss(&self, mtu: usize) -> u16 {
        // RFC 9293 §3.7.1: the MSS follows from the MTU (less 40 bytes of IPv4 and TCP
        // headers). An override may only lower it (as Linux's TCP_MAXSEG): it bounds our
        // segments too, and a segment larger than the device carries would be lost for good
        // (DF is set, and we drop fragments ourselves).
        let mtu_mss = mtu.saturating_sub(40).clamp(64, u16::MAX as usize) as u16;
        self.config.mss.map_or(mtu_mss, |m| m.clamp(64, mtu_mss))
    }

    /// Our window-scale shift for a socket with `opts`: RFC 7323 §2.3, the smallest shift
    /// that lets the window cover the buffer.
    pub(super) fn rcv_wscale(&self, opts: &SocketOptions) -> u8 {
        let mut wscale = 0u8;
        if self.config.window_scaling {
            while wscale < 14 && (opts.recv_buffer >> wscale) > u16::MAX as usize {
                wscale += 1;
            }
        }
        wscale
    }

    /// The offset of our timestamp clock towards the peer of `tuple`: a keyed hash of the
    /// two addresses, as Linux's `secure_tcp_ts_off`. Not per connection: the TSvals one
    /// host sends another then grow across connections, so that a SYN meeting its 4-tuple
    /// in TIME-WAIT passes PAWS and its newer timestamp can reopen it (RFC 6191); nor
    /// one clock for all peers, which would tell each peer our uptime (RFC 7323 §7.1).
    pub(super) fn ts_offset(&self, tuple: &FourTuple) -> u32 {
        let addrs = (u32::from(tuple.local_addr) as u64) << 32 | u32::from(tuple.remote_addr) as u64;
        hash::siphash24_words(self.ts_key, [addrs]) as u32
    }

    /// A new TCB for `tuple` in `state`.
    pub(crate) fn new_tcb(&self, now: Instant, tuple: FourTuple, opts: SocketOptions, mtu: usize, state: State) -> Tcb {
        let rmss = self.rmss(mtu);
        let wscale = self.rcv_wscale(&opts);
        let iss = self.isn.isn(now, (tuple.local_addr, tuple.local_port), (tuple.remote_addr, tuple.remote_port));
        let ts_offset = self.ts_offset(&tuple);
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
            snd_sml: iss,
            snd_wscale: 0,
            irs: SeqNumber(0),
            rcv_nxt: SeqNumber(0),
            rcv_nxt_pos: 0,
            rcv_up: 0,
            rcv_adv: SeqNumber(0),
            rcv_wscale: wscale,
            wscale_ok: false,
            rcv_fin: None,
            smss: rmss,
            rmss,
            mss_clamp: rmss,
            pmtu_gen: 0,
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
            ld_reverts: 0,
            persist_backoff: 0,
            keepalive_probes: 0,
            probes_out: 0,
            last_oow_ack: None,
            last_rcv: now,
            soft_error: None,
            soft_error_at: now,
            cc: opts.congestion.build(eff as u32, self.config.initial_window),
            inflation: 0,
            dupacks: 0,
            reordering: super::recovery::DUP_THRESH,
            recovery: None,
            undo: None,
            recover: iss,
            snd_max_at_dupack: iss,
            rxt_acked: [(iss, iss); recovery::RXT_ACKED],
            rexmt_now: None,
            last_send: now,
            sndq: VecDeque::new(),
            snd_queued: 0,
            snd_end: iss + 1,
            snd_up: None,
            snd_nxt_idx: 0,
            fin_queued: false,
            rcvq: rxq::RxQueue::new(),
            rcv_queued: 0,
            rcv_unverified: 0,
            ooo: Default::default(),
            ack_now: false,
            ack_for_data: false,
            unacked_segs: 0,
            dsack: None,
            quickack: QuickAck::new(self.config.quick_acks),
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
            hop: None,
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
                self.events.grow(self.slots.len());
                self.reclaim.grow(self.slots.len());
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[idx as usize].tcb = Some(Box::new(tcb));
        self.table.insert(tuple, idx);
        self.last_miss = None;
        self.live += 1;
        Some(idx)
    }

    /// The connection is over on the wire: take it out of the table and the wheel, and out of
    /// its listener's queues. The slot itself is freed at once if nobody holds a handle to it
    /// (an orphan, or never accepted); otherwise it stays, CLOSED, until the application
    /// closes it and sees why.
    pub(super) fn retire(&mut self, idx: u32) {
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
    pub(super) fn repredict(&mut self, idx: u32) {
        if let Some(tcb) = self.tcb_mut(idx) {
            tcb.pred_flags = input::pred_word(tcb);
        }
    }

    /// The receive queue of connection `idx`: where the fast path's case (a) puts a frame.
    #[inline(always)]
    pub(crate) fn rcvq(&mut self, idx: u32) -> Option<&mut rxq::RxQueue> {
        Some(&mut self.slots.get_mut(idx as usize)?.tcb.as_deref_mut()?.rcvq)
    }

    /// A passively opened connection is established: from the listener's SYN queue to its
    /// accept queue.
    pub(super) fn enqueue_accepted(&mut self, lidx: u32, idx: u32) {
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
        self.listener_events.mark(lidx);
    }

    pub(crate) fn listener(&self, lidx: u32) -> Option<&Listener> {
        self.listeners.get(lidx as usize)?.as_ref()
    }
}
