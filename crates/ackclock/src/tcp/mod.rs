//! TCP, split the way BSD splits it: `input` (segment arrival: demultiplexing, header
//! prediction, the full path), `output` (what to send), `timer` (what time does), `table`
//! (the connection table, as `in_pcb.c`), `usrreq` (the protocol side of the user requests,
//! as `tcp_usrreq.c`), plus the connection control block (`tcb`), the RTO estimator
//! ([`rtt`]), the out-of-order queue (`reasm`), sequence numbers ([`seq`]), SYN cookies
//! (`syncookie`), ICMP errors for a connection (`pmtu`, `icmp`), compact TIME-WAIT
//! (`timewait`), the timing wheel (`wheel`), the idle sweep that gives drained queues'
//! storage back (`reclaim`), urgent data (`urgent`) and congestion control ([`cc`]).
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
mod fastout;
pub(crate) mod hash;
pub(crate) mod header;
mod icmp;
pub(crate) mod input;
pub(crate) mod isn;
pub(crate) mod lro;
pub(crate) mod output;
mod pmtu;
#[cfg(feature = "internals")]
pub mod reasm;
#[cfg(not(feature = "internals"))]
#[allow(dead_code)] // its inspection methods serve the tests and benches
pub(crate) mod reasm;
pub(crate) mod reclaim;
pub(crate) mod recovery;
pub mod rtt;
pub(crate) mod rxq;
pub mod seq;
pub(crate) mod sndq;
pub mod stats;
pub(crate) mod syncookie;
pub(crate) mod table;
pub(crate) mod tcb;
pub(crate) mod timer;
pub(crate) mod timewait;
pub mod trace;
mod urgent;
pub(crate) mod usrreq;
#[cfg(feature = "internals")]
pub mod wheel;
#[cfg(not(feature = "internals"))]
#[allow(dead_code)] // its inspection methods serve the tests and benches
pub(crate) mod wheel;

pub use config::{KeepAlive, SocketOptions, SynCookies, TcpConfig};
pub use lro::Aggregation;
pub use seq::SeqNumber;
pub use stats::{ConnStats, Counters, DropReason, TcpInfo};
use table::LastHit;
pub(crate) use table::{Listener, Slot};
pub use tcb::{ConnError, FourTuple, State};
pub use usrreq::RequestError;

use crate::buf::Pool;
use crate::iface::Interface;
use crate::phy::Batch;
use crate::time::{Duration, Instant};
use core::net::Ipv4Addr;
use env::ChallengeLimiter;
use hash::KeyedState;
use input::Outcome;
use isn::{IsnGenerator, PortAllocator};
use rtt::RttEstimator;
use std::collections::HashMap;
use wheel::TimerWheel;

/// All TCP state of one stack.
#[derive(Debug)]
pub struct Tcp {
    pub(crate) config: TcpConfig,
    pub(crate) slots: Vec<Slot>,
    free_slots: Vec<u32>,
    table: HashMap<FourTuple, u32, KeyedState>,
    last_hit: Option<LastHit>,
    /// The last addresses and ports (as on the wire) the table had no connection for, until
    /// a connection is added: a segment that misses the fast path's lookup is looked up
    /// again by the full path, and a SYN flood would pay two hashes per SYN.
    last_miss: Option<(u64, u32)>,
    /// The last (address, port) `listener_for` resolved, and its answer, until a listener
    /// opens or closes: a SYN flood aims at one port, and each SYN would otherwise hash
    /// the pair up to three times (the address, the wildcard address, the catch-all).
    listen_cache: core::cell::Cell<Option<(Ipv4Addr, u16, Option<u32>)>>,
    pub(crate) listeners: Vec<Option<Listener>>,
    listener_gen: u32,
    listen_table: HashMap<(Ipv4Addr, u16), u32, KeyedState>,
    wheel: TimerWheel,
    expired: Vec<u32>,
    dirty: Vec<u32>,
    /// Connections whose readiness may have changed since the application last looked, and
    /// listeners with a connection to accept: what `Stack::poll_event` hands out. Each is
    /// listed at most once (its `event` flag), so neither list grows past the tables.
    events: Events,
    listener_events: Events,
    /// Connections that queued data, for the idle sweep that gives their queue storage back
    /// (`reclaim`), and when it next runs.
    reclaim: Events,
    reclaim_at: Option<Instant>,
    isn: IsnGenerator,
    ports: PortAllocator,
    ts_key: [u64; 2],
    cookies: syncookie::CookieKey,
    /// Compact TIME-WAIT entries, apart from the connection slots.
    tw: timewait::TimeWaitTable,
    pub(crate) counters: Counters,
    challenge: ChallengeLimiter,
    pub(crate) trace: trace::Trace,
    /// Connections in use (every state but free).
    live: usize,
    /// Largest TCP payload one segmentation-offload frame may carry; 0 without offload.
    gso_max: usize,
    /// The least an unsent send segment costs against its send buffer: with offload,
    /// `usrreq::segment_charge` of the pool's buffer size.
    seg_charge: usize,
    /// `recv` leaves the window-update decision to `Stack::window_update_now` (the threaded
    /// runtime, where the protocol thread makes it on the reader's request).
    pub(crate) defer_window_update: bool,
}

/// The parts of a stack a TCP routine sends through.
pub(crate) struct Io<'a> {
    pub pool: &'a Pool,
    pub iface: &'a mut Interface,
    pub tx: &'a mut Batch,
}

impl Io<'_> {
    /// The same parts, borrowed again for one call.
    pub(crate) fn re(&mut self) -> Io<'_> {
        Io { pool: self.pool, iface: &mut *self.iface, tx: &mut *self.tx }
    }
}

impl Tcp {
    /// `seed` keys the ISN, port and table hashes: fixed in a simulation (deterministic),
    /// random in a real stack.
    pub(crate) fn new(mut config: TcpConfig, seed: u64, now: Instant) -> Tcp {
        // RFC 9293 §3.8.6.3 / RFC 1122 §4.2.3.2: the ACK delay "MUST be less than 0.5
        // seconds" (MUST-40), whatever the configuration asks.
        config.delayed_ack = config.delayed_ack.min(crate::time::Duration::from_millis(499));
        let cap = config.max_connections.max(1);
        let (lo, hi) = config.ephemeral_ports;
        Tcp {
            slots: Vec::new(),
            free_slots: Vec::new(),
            table: HashMap::with_capacity_and_hasher(cap, KeyedState::new(hash::derive_key(seed, 1))),
            last_hit: None,
            last_miss: None,
            listen_cache: core::cell::Cell::new(None),
            listeners: Vec::new(),
            listener_gen: 0,
            listen_table: HashMap::with_hasher(KeyedState::new(hash::derive_key(seed, 2))),
            wheel: TimerWheel::new(cap, Duration::from_millis(1), now),
            expired: Vec::with_capacity(cap),
            dirty: Vec::with_capacity(cap),
            events: Events::with_capacity(cap),
            listener_events: Events::with_capacity(0),
            reclaim: Events::with_capacity(cap),
            reclaim_at: None,
            isn: IsnGenerator::new(hash::derive_key(seed, 3)),
            ports: PortAllocator::new(hash::derive_key(seed, 4), lo, hi),
            ts_key: hash::derive_key(seed, 5),
            cookies: syncookie::CookieKey::new(hash::derive_key(seed, 7)),
            tw: timewait::TimeWaitTable::new(hash::derive_key(seed, 8)),
            counters: Counters::default(),
            challenge: ChallengeLimiter::new(hash::derive_key(seed, 6)),
            trace: trace::Trace::default(),
            live: 0,
            gso_max: 0,
            seg_charge: usrreq::MIN_SEGMENT_CHARGE,
            defer_window_update: false,
            config,
        }
    }

    /// Let connections queue segments of up to `max` payload bytes for a device that cuts
    /// them (segmentation offload), each in a pool buffer of `buffer_size` bytes, and charge
    /// each unsent one at least half its buffer against its send buffer
    /// (`usrreq::segment_charge`); 0 turns both off.
    pub(crate) fn set_gso_max(&mut self, max: usize, buffer_size: usize) {
        self.gso_max = max;
        self.seg_charge = match max {
            0 => usrreq::MIN_SEGMENT_CHARGE,
            _ => usrreq::segment_charge(buffer_size),
        };
    }

    /// The settings every connection starts from.
    pub fn config(&self) -> &TcpConfig {
        &self.config
    }

    /// Stack-wide counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Connections held, TIME-WAIT (compact entries included) and closed-but-unreleased
    /// included.
    pub fn connections(&self) -> usize {
        self.live + self.tw.len()
    }

    /// Run the timers that are due.
    #[inline]
    pub(crate) fn run_timers(&mut self, now: Instant, io: Io<'_>) {
        self.expire_time_wait(now);
        self.reclaim_idle(now);
        // Nearly always: nothing on the wheel is due yet (one comparison, and no call).
        if self.wheel.may_fire(now) {
            self.run_wheel(now, io);
        }
    }

    /// The connection timers of [`run_timers`](Self::run_timers), once one may be due.
    #[inline(never)]
    fn run_wheel(&mut self, now: Instant, io: Io<'_>) {
        let Io { pool, iface, tx } = io;
        let mut expired = std::mem::take(&mut self.expired);
        self.wheel.expire(now, |k| expired.push(k));
        for &idx in &expired {
            let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else { continue };
            if tcb.timers.earliest().is_none_or(|t| t > now) {
                // An early wake-up (see `rearm`): nothing is due; file the real time.
                self.refile(idx);
                continue;
            }
            let before = tcb.state;
            let mut env = env!(self, now, pool, &mut *iface, &mut *tx);
            let outcome = timer::expire(&mut env, tcb);
            if tcb.state != before || tcb.error.is_some() {
                self.events.mark(idx);
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
    #[inline]
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
            // With offload, sending opens send room (`usrreq::send_room`: unsent units are
            // charged half a buffer): a writer that found none hears of it now, not at the
            // next ACK.
            let charge = self.seg_charge;
            let full = charge > usrreq::MIN_SEGMENT_CHARGE && usrreq::send_room(tcb, charge) == 0;
            let mut env = env!(self, now, pool, &mut *iface, &mut *tx);
            output::output(&mut env, tcb);
            let opened = full && usrreq::send_room(tcb, charge) > 0;
            // A full ring may have stopped it with more to send: it goes back on the list
            // (at the end, behind the others), or nothing but the next ACK or timer would
            // let the rest of its window out.
            if tx.is_full() {
                tcb.dirty = true;
                starved = Some(idx);
            }
            let time_wait = tcb.state == State::TimeWait && !tcb.dirty;
            let earliest = tcb.timers.earliest();
            if opened {
                self.events.mark(idx);
            }
            self.rearm_at(idx, earliest);
            if time_wait {
                self.compact_time_wait(now, idx);
            }
        }
        // What the full device queue left for next time stays dirty.
        if i == self.dirty.len() {
            self.dirty.clear();
        } else {
            self.dirty.drain(..i);
        }
        self.dirty.extend(starved);
    }

    /// The next connection whose readiness may have changed, and that the application owns
    /// (accepted or connected, not closed); its event flag is cleared.
    pub(crate) fn take_event(&mut self) -> Option<u32> {
        while let Some(idx) = self.events.take() {
            let Some(tcb) = self.tcb(idx) else { continue };
            if !tcb.orphan && tcb.listener.is_none() {
                return Some(idx);
            }
        }
        None
    }

    /// The next listener that gained a connection to accept since it was last reported.
    pub(crate) fn take_listener_event(&mut self) -> Option<u32> {
        while let Some(lidx) = self.listener_events.take() {
            if self.listener(lidx).is_some() {
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
        [self.wheel.next_deadline(), self.tw.next_deadline(), self.reclaim_deadline(now)].into_iter().flatten().min()
    }
}

/// Slots (of connections, or of listeners) with something to report, each listed at most
/// once. The flag belongs to the slot, not to what occupies it, so a slot freed and reused
/// while listed is still listed once: the list never outgrows the table, whether or not
/// anyone takes events.
#[derive(Debug)]
pub(crate) struct Events {
    list: Vec<u32>,
    listed: Vec<bool>,
}

impl Events {
    fn with_capacity(cap: usize) -> Events {
        Events { list: Vec::with_capacity(cap), listed: Vec::with_capacity(cap) }
    }

    /// The table grew to `slots` slots.
    pub(crate) fn grow(&mut self, slots: usize) {
        if self.listed.len() < slots {
            self.listed.resize(slots, false);
            // Every slot listed at once fits: marking never reallocates.
            self.list.reserve(slots.saturating_sub(self.list.len()));
        }
    }

    /// List slot `idx` unless it is listed.
    #[inline(always)]
    pub(crate) fn mark(&mut self, idx: u32) {
        if let Some(f) = self.listed.get_mut(idx as usize) {
            if !*f {
                *f = true;
                self.list.push(idx);
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Keep the listed slots for which `keep` is true; the others are no longer listed.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        let listed = &mut self.listed;
        self.list.retain(|&idx| {
            let k = keep(idx);
            if !k {
                if let Some(f) = listed.get_mut(idx as usize) {
                    *f = false;
                }
            }
            k
        });
    }

    /// The next listed slot, no longer listed.
    fn take(&mut self) -> Option<u32> {
        let idx = self.list.pop()?;
        if let Some(f) = self.listed.get_mut(idx as usize) {
            *f = false;
        }
        Some(idx)
    }
}

#[cfg(test)]
mod tests {
    use crate::iface::InterfaceConfig;
    use crate::phy::{pipe, Device, PipeConfig};
    use crate::time::{Duration, Instant};
    use crate::{Stack, StackConfig};
    use core::net::{Ipv4Addr, SocketAddrV4};

    /// An embedder that never takes events (the runtime, the CLI) must not make the event
    /// list grow: 300 connections opened, used and closed one after another through 4 slots
    /// leave at most one entry per slot.
    #[test]
    fn events_stay_bounded_by_the_table_when_nobody_takes_them() {
        let (a_addr, b_addr) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let (mut da, mut db) = pipe(PipeConfig::default());
        let config = |addr| {
            let mut c = StackConfig::new(InterfaceConfig::new(addr, 24));
            c.seed = 1;
            c.tcp.max_connections = 4;
            c.tcp.msl = Duration::from_millis(1);
            c
        };
        let mut now = Instant::from_secs(1);
        let mut a = Stack::new(config(a_addr), da.capabilities(), now).unwrap();
        let mut b = Stack::new(config(b_addr), db.capabilities(), now).unwrap();
        let l = b.tcp_listen(SocketAddrV4::new(b_addr, 7), 2).unwrap();
        let mut done = 0;
        while done < 300 {
            let c = a.tcp_connect(SocketAddrV4::new(b_addr, 7)).unwrap();
            let mut server = None;
            for _ in 0..10_000 {
                a.poll(now, &mut da);
                b.poll(now, &mut db);
                server = server.or_else(|| b.tcp_accept(l).ok());
                if server.is_some() && a.tcp_send(c, b"x").is_ok() {
                    break;
                }
                now += Duration::from_millis(1);
            }
            let s = server.expect("accepted");
            let mut buf = [0u8; 4];
            for _ in 0..10_000 {
                a.poll(now, &mut da);
                b.poll(now, &mut db);
                if b.tcp_recv(s, &mut buf) == Ok(1) {
                    break;
                }
                now += Duration::from_millis(1);
            }
            a.tcp_close(c).unwrap();
            b.tcp_close(s).unwrap();
            for _ in 0..200 {
                a.poll(now, &mut da);
                b.poll(now, &mut db);
                now += Duration::from_millis(1);
            }
            done += 1;
        }
        for stack in [&a, &b] {
            assert!(stack.tcp.slots.len() <= 4);
            assert!(stack.tcp.events.list.len() <= stack.tcp.slots.len(), "{:?}", stack.tcp.events);
        }
        assert!(b.tcp.listener_events.list.len() <= 1);
    }
}
