//! TIME-WAIT as compact state, as Linux's minisockets (`tcp_minisocks.c`) keep it: once the
//! application has closed a connection that reaches TIME-WAIT, its control block and slot
//! are released and what TIME-WAIT still needs stays in a [`TwEntry`] of a few dozen bytes:
//! the 4-tuple, the sequence numbers, the timestamp state and the expiry. TIME-WAIT entries
//! have their own table and limit ([`TcpConfig::max_time_wait`](super::TcpConfig)), apart
//! from `max_connections`, so a server that closes first is never refused for them; past
//! the limit the oldest entry is dropped early and counted (Linux's `tcp_max_tw_buckets`).
//!
//! An entry answers as the connection would have (RFC 9293 §3.10.7.4 in TIME-WAIT, with
//! RFC 7323's PAWS and RFC 5961's challenge ACKs): a retransmitted FIN is acknowledged again
//! and restarts 2 MSL; an exact RST ends it (Linux's default; RFC 1337's alternative, to
//! ignore it, is not taken); a SYN with a higher sequence number or a newer timestamp opens
//! a new incarnation through the listener (RFC 6191, RFC 9293 §3.6.1).

use super::env::Env;
use super::header::Hdr;
use super::input::{oow_exempt, ts_older, Segment};
use super::seq::SeqNumber;
use super::stats::DropReason;
use super::tcb::{FourTuple, State, Tcb};
use super::{hash, output, Io, Tcp};
use crate::time::{Duration, Instant};
use crate::wire::{SackBlocks, TcpFlags};
use core::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// What TIME-WAIT keeps of a connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TwEntry {
    pub tuple: FourTuple,
    /// SND.NXT: everything we sent, our FIN included, is acknowledged.
    pub snd_nxt: SeqNumber,
    /// RCV.NXT, past the peer's FIN.
    pub rcv_nxt: SeqNumber,
    /// The right edge of the window we advertised (segment acceptability).
    pub rcv_adv: SeqNumber,
    /// The largest window the peer offered (RFC 5961 §5.2's bound on old ACKs).
    pub max_snd_wnd: u32,
    pub ts_recent: u32,
    pub ts_offset: u32,
    /// The window field of our ACKs.
    pub wnd_field: u16,
    pub ts_enabled: bool,
    /// Generation of this slab slot (stale expiry-heap items are recognised by it).
    gen: u16,
    pub expires: Instant,
    /// When a dataless out-of-window segment was last answered, in ms of the stack's clock
    /// (0: never); at most one such ACK per 500 ms (Linux `tcp_invalid_ratelimit`).
    last_oow_ack_ms: u32,
}

/// The TIME-WAIT table: a slab of entries, a hash of their 4-tuples, and a min-heap of
/// expiry times (lazy: a restarted entry's item is moved on when it surfaces).
#[derive(Debug)]
pub(crate) struct TimeWaitTable {
    entries: Vec<Option<TwEntry>>,
    gens: Vec<u16>,
    free: Vec<u32>,
    table: HashMap<FourTuple, u32, hash::KeyedState>,
    expiry: BinaryHeap<Reverse<(Instant, u32, u16)>>,
}

impl TimeWaitTable {
    pub(crate) fn new(key: [u64; 2]) -> TimeWaitTable {
        TimeWaitTable {
            entries: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            table: HashMap::with_hasher(hash::KeyedState::new(key)),
            expiry: BinaryHeap::new(),
        }
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    pub(crate) fn find(&self, tuple: &FourTuple) -> Option<u32> {
        self.table.get(tuple).copied()
    }

    pub(crate) fn contains(&self, tuple: &FourTuple) -> bool {
        self.table.contains_key(tuple)
    }

    /// The earliest time an entry may expire (perhaps earlier than any does).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.expiry.peek().map(|Reverse((t, _, _))| *t)
    }

    fn insert(&mut self, mut e: TwEntry) {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.entries.push(None);
                self.gens.push(0);
                (self.entries.len() - 1) as u32
            }
        };
        e.gen = self.gens[i as usize];
        self.table.insert(e.tuple, i);
        self.expiry.push(Reverse((e.expires, i, e.gen)));
        self.entries[i as usize] = Some(e);
    }

    fn remove(&mut self, i: u32) -> Option<TwEntry> {
        let e = self.entries.get_mut(i as usize)?.take()?;
        self.table.remove(&e.tuple);
        let g = &mut self.gens[i as usize];
        *g = g.wrapping_add(1);
        self.free.push(i);
        // Items of removed entries wait in the heap; when they outnumber the live ones,
        // rebuild it, so it stays within twice the table.
        if self.expiry.len() > 2 * self.table.len() + 64 {
            let entries = &self.entries;
            self.expiry.retain(|Reverse((_, i, g))| entries[*i as usize].is_some_and(|e| e.gen == *g));
        }
        Some(e)
    }

    /// The entry that has waited longest (the earliest expiry), for early removal.
    fn oldest(&mut self) -> Option<u32> {
        while let Some(&Reverse((_, i, g))) = self.expiry.peek() {
            if self.entries[i as usize].is_some_and(|e| e.gen == g) {
                return Some(i);
            }
            self.expiry.pop();
        }
        None
    }

    /// Remove every entry whose 2 MSL are over at `now`; returns how many.
    fn expire(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(&Reverse((t, i, g))) = self.expiry.peek() {
            if t > now {
                break;
            }
            self.expiry.pop();
            let Some(e) = self.entries[i as usize].filter(|e| e.gen == g) else { continue };
            if e.expires > now {
                // Restarted by a retransmitted FIN: file it at its real time.
                self.expiry.push(Reverse((e.expires, i, g)));
            } else {
                self.remove(i);
                n += 1;
            }
        }
        n
    }
}

/// What to do after a segment to a TIME-WAIT entry.
enum TwAction {
    Nothing,
    Ack,
    /// The entry is over (an exact RST).
    Remove,
    /// A SYN for a new incarnation (RFC 6191).
    Reincarnate,
}

impl Tcp {
    /// Connection `idx` has reached TIME-WAIT and nobody holds it: keep its TIME-WAIT as a
    /// compact entry and release the connection. Called once its last ACK has gone out.
    pub(super) fn compact_time_wait(&mut self, now: Instant, idx: u32) {
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else { return };
        if tcb.state != State::TimeWait || tcb.dirty || !(tcb.orphan || tcb.listener.is_some()) {
            return;
        }
        let entry = tw_entry(tcb, now, self.config.msl * 2);
        self.retire(idx);
        if self.config.max_time_wait == 0 {
            return;
        }
        if self.tw.len() >= self.config.max_time_wait {
            if let Some(i) = self.tw.oldest() {
                self.tw.remove(i);
                self.counters.time_wait_overflow += 1;
            }
        }
        self.tw.insert(entry);
    }

    /// TIME-WAIT entries whose 2 MSL are over go (RFC 9293 §3.4.2).
    pub(super) fn expire_time_wait(&mut self, now: Instant) {
        if self.tw.next_deadline().is_some_and(|t| t <= now) {
            self.tw.expire(now);
        }
    }

    /// Entries in TIME-WAIT, apart from the connections.
    pub fn time_wait(&self) -> usize {
        self.tw.len()
    }

    /// A segment for TIME-WAIT entry `i`: RFC 9293 §3.10.7.4 in the order of its checks.
    pub(super) fn time_wait_input(&mut self, now: Instant, i: u32, seg: &Segment, io: Io<'_>) {
        let Io { pool, iface, tx } = io;
        let has_listener = self.listener_for(seg.dst, seg.dst_port).is_some();
        let Some(Some(e)) = self.tw.entries.get_mut(i as usize) else { return };
        let mut env = env!(self, now, pool, &mut *iface, &mut *tx);
        match tw_segment(&mut env, e, seg) {
            TwAction::Nothing => {}
            TwAction::Ack => send_tw_ack(&mut env, e),
            TwAction::Remove => {
                self.tw.remove(i);
            }
            TwAction::Reincarnate if !has_listener => {
                // Nobody listens (we had opened actively): stay and ACK, as Linux falls
                // through from TW_SYN to TW_ACK.
                send_tw_ack(&mut env, e);
            }
            TwAction::Reincarnate => {
                // RFC 1122 §4.2.2.13 / Linux: the new incarnation's ISS lies above the old
                // sequence space.
                let iss = e.snd_nxt + 65537;
                self.tw.remove(i);
                self.no_connection(now, seg, Some(iss), Io { pool, iface, tx });
            }
        }
    }
}

fn tw_entry(tcb: &mut Tcb, now: Instant, two_msl: Duration) -> TwEntry {
    let ack = tcb.ack_seq();
    let wnd_field = output::window_field(tcb, ack, false);
    TwEntry {
        tuple: tcb.tuple,
        snd_nxt: tcb.snd_max,
        rcv_nxt: tcb.rcv_nxt,
        rcv_adv: tcb.rcv_adv,
        max_snd_wnd: tcb.max_snd_wnd,
        ts_recent: tcb.ts_recent,
        ts_offset: tcb.ts_offset,
        wnd_field,
        ts_enabled: tcb.ts_enabled,
        gen: 0,
        expires: tcb.timers.time_wait.get().unwrap_or(now + two_msl),
        last_oow_ack_ms: tcb.last_oow_ack.map_or(0, |t| (t.total_millis() as u32).max(1)),
    }
}

/// The checks of `input::synchronized` as they apply in TIME-WAIT.
fn tw_segment(env: &mut Env, e: &mut TwEntry, seg: &Segment) -> TwAction {
    let f = seg.flags;
    let restart = |env: &Env, e: &mut TwEntry| e.expires = env.now + env.config.msl * 2;
    // RFC 7323 §5.3 R1: PAWS.
    if let (true, Some((tsval, _))) = (e.ts_enabled, seg.ts) {
        if !f.contains(TcpFlags::RST) && ts_older(tsval, e.ts_recent) {
            env.counters.drop(DropReason::Paws);
            return if oow_exempt(seg) || oow_ack_allowed(env, e) { TwAction::Ack } else { TwAction::Nothing };
        }
    }
    let rcv_wnd = if e.rcv_adv > e.rcv_nxt { e.rcv_adv.since(e.rcv_nxt) } else { 0 };
    let seg_len = seg.seg_len();
    let acceptable = match (seg_len, rcv_wnd) {
        (0, 0) => seg.seq == e.rcv_nxt,
        (0, _) => seg.seq.in_range(e.rcv_nxt, e.rcv_nxt + rcv_wnd),
        (_, 0) => false,
        (_, _) => {
            seg.seq.in_range(e.rcv_nxt, e.rcv_nxt + rcv_wnd)
                || (seg.seq + seg_len - 1).in_range(e.rcv_nxt, e.rcv_nxt + rcv_wnd)
        }
    };
    let zero_window_probe = !acceptable && rcv_wnd == 0 && seg.seq == e.rcv_nxt;
    if !acceptable && !zero_window_probe {
        if f.contains(TcpFlags::SYN) && !f.contains(TcpFlags::ACK) && newer_syn(e, seg) {
            return TwAction::Reincarnate;
        }
        if f.contains(TcpFlags::SYN) && !f.contains(TcpFlags::RST) {
            // RFC 5961 §4.2: a challenge ACK.
            env.counters.drop(DropReason::OutOfWindow);
            return challenge(env);
        }
        let mut ack = false;
        if f.contains(TcpFlags::FIN) && !f.contains(TcpFlags::RST) {
            // A retransmitted FIN: our last ACK was lost. ACK again and restart 2 MSL.
            restart(env, e);
        }
        if !f.contains(TcpFlags::RST) {
            // A FIN or data always (Linux `tcp_oow_rate_limited`: `seq != end_seq`).
            ack = oow_exempt(seg) || oow_ack_allowed(env, e);
        }
        env.counters.drop(DropReason::OutOfWindow);
        return if ack { TwAction::Ack } else { TwAction::Nothing };
    }
    if f.contains(TcpFlags::RST) {
        // RFC 5961 §3.2: only an exact match resets.
        if seg.seq != e.rcv_nxt {
            env.counters.drop(DropReason::BadRst);
            return challenge(env);
        }
        env.counters.resets_received += 1;
        return TwAction::Remove;
    }
    if f.contains(TcpFlags::SYN) {
        if newer_syn(e, seg) {
            return TwAction::Reincarnate;
        }
        env.counters.drop(DropReason::Discarded);
        return challenge(env);
    }
    // RFC 7323 §4.3 (2): a segment at or before Last.ACK.sent updates TS.Recent.
    if let (true, Some((tsval, _))) = (e.ts_enabled, seg.ts) {
        if seg.seq <= e.rcv_nxt && !ts_older(tsval, e.ts_recent) {
            e.ts_recent = tsval;
        }
    }
    if !f.contains(TcpFlags::ACK) {
        env.counters.drop(DropReason::Discarded);
        return TwAction::Nothing;
    }
    // RFC 5961 §5.2: acceptable ACKs lie in [SND.UNA - MAX.SND.WND, SND.NXT].
    let too_old = seg.ack < e.snd_nxt - e.max_snd_wnd.max(1).min(i32::MAX as u32);
    if seg.ack > e.snd_nxt || too_old {
        env.counters.drop(DropReason::BadAck);
        return challenge(env);
    }
    // Only a retransmitted FIN can arrive: acknowledge it and restart 2 MSL.
    if f.contains(TcpFlags::FIN) {
        restart(env, e);
        return TwAction::Ack;
    }
    TwAction::Nothing
}

/// RFC 6191 / Linux `tcp_timewait_state_process`: a SYN opens a new incarnation if it is
/// unambiguously newer (a higher sequence number, or a newer timestamp). Only a SYN: a
/// SYN-ACK (Linux: `th->syn && !th->rst && !th->ack`) draws a challenge ACK (RFC 5961 §4.2)
/// and leaves TIME-WAIT alone (RFC 1337).
fn newer_syn(e: &TwEntry, seg: &Segment) -> bool {
    if seg.flags.intersects(TcpFlags::ACK | TcpFlags::RST) {
        return false;
    }
    let newer_ts = match (e.ts_enabled, seg.ts) {
        (true, Some((tsval, _))) => ts_older(e.ts_recent, tsval),
        _ => false,
    };
    seg.seq > e.rcv_nxt || newer_ts
}

/// RFC 5961 §7: a challenge ACK within the stack-wide budget.
fn challenge(env: &mut Env) -> TwAction {
    if env.challenge.allow(env.now, env.config.challenge_ack_limit) {
        env.counters.challenge_acks += 1;
        TwAction::Ack
    } else {
        env.counters.challenge_acks_suppressed += 1;
        TwAction::Nothing
    }
}

/// Linux `tcp_invalid_ratelimit`: one ACK per 500 ms for dataless out-of-window segments.
fn oow_ack_allowed(env: &Env, e: &mut TwEntry) -> bool {
    let now = (env.now.total_millis() as u32).max(1);
    if e.last_oow_ack_ms != 0 && now.wrapping_sub(e.last_oow_ack_ms) < 500 {
        return false;
    }
    e.last_oow_ack_ms = now;
    true
}

/// `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>`, with the timestamps if they were on.
fn send_tw_ack(env: &mut Env, e: &TwEntry) {
    let ts = e.ts_enabled.then(|| ((env.now.total_millis() as u32).wrapping_add(e.ts_offset), e.ts_recent));
    let ack = Hdr {
        seq: e.snd_nxt,
        ack: e.rcv_nxt,
        flags: TcpFlags::ACK,
        window: e.wnd_field,
        mss: None,
        wscale: None,
        sack_permitted: false,
        ts,
        sack: SackBlocks::new(),
        urgent: 0,
    };
    output::send_stateless(env, e.tuple, &ack);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Well under 100 bytes (Linux's `tcp_timewait_sock` is larger: it is a socket).
    #[test]
    fn an_entry_is_small() {
        assert!(core::mem::size_of::<TwEntry>() <= 64, "{}", core::mem::size_of::<TwEntry>());
    }
}
