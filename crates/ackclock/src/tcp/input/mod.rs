//! Segment arrival, split as BSD's `tcp_input.c` is read: demultiplexing (here), header
//! prediction and its two fast cases ([`fast`]), the deferred receive checksum
//! ([`deferred`]), and the full path of RFC 9293 §3.10.7 with RFC 5961's defences, RFC 7323's
//! PAWS and RFC 2018/2883's SACK and D-SACK generation ([`slow`]).
//!
//! # The fast path, hop by hop
//!
//! A common in-order data segment or pure ACK of an established connection (Jacobson 1993):
//!
//! 1. `Stack::process` (stack.rs): the device handed over a frame; `Interface::common_tcp`
//!    checks its first 34 bytes in one pass (untagged IPv4, 20-byte header, header checksum,
//!    no fragment, TCP, ours). Anything else: `Stack::process_slow`.
//! 2. [`Tcp::fast`] (here): the connection by the segment's addresses and ports as they lie
//!    on the wire, compared with the last hit (`Tcp::lookup_wire`, table.rs); a miss probes
//!    the hash table once.
//! 3. [`fast::predict`]: one masked compare of the offset/flags/window word with
//!    `pred_flags`, `seq == rcv_nxt`, the timestamp option's fixed layout and PAWS.
//! 4. Data: [`fast::fast_data`] applies the receive state and the delayed-ACK rule, and the
//!    frame moves into the receive queue (rxq.rs) unverified if the device did not check it:
//!    [`deferred`] has the rules for checking it during the copy to the application.
//!    Pure ACK: [`fast::fast_ack`] frees what was acknowledged, samples the RTT, grows the
//!    window, and re-arms the timer lazily. It never meets recovery: prediction is off while
//!    a recovery or duplicate ACKs are under way.
//! 5. Back in `Stack::process`: the frame is queued; the connection is marked for output
//!    and for the application's events.
//!
//! Everything else goes to [`Tcp::input_slow`], which parses the header, checks the
//! checksum (or defers it), finds the connection or a listener, and runs [`slow`].
//!
//! In a received batch of two or more frames with receive aggregation on (the default),
//! `Stack::process_batch` takes steps 2 to 5 through `Tcp::fast_batch` (`tcp::lro`) instead:
//! the same lookup and prediction, with the per-segment work that can wait (the ACK rule,
//! TS.Recent, the lists; for a pure ACK all of it) run once per aggregate of a connection's
//! segments.

mod ack;
mod deferred;
mod fast;
mod slow;

pub(crate) use ack::*;
pub(crate) use deferred::*;
pub(crate) use fast::*;
pub(crate) use slow::*;

use super::tcb::Unverified;
use super::{output, timer, trace, DropReason, FourTuple, Io, SeqNumber, State, SynCookies, Tcp};
use crate::buf::PBuf;
use crate::iface::TcpIngress;
use crate::time::Instant;
use crate::wire::{checksum, SackBlocks, TcpFlags, TcpPacket, TcpRepr};
use core::net::Ipv4Addr;

/// A parsed segment header.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: SeqNumber,
    pub ack: SeqNumber,
    pub flags: TcpFlags,
    /// Window field as received (unscaled).
    pub wnd: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    pub ts: Option<(u32, u32)>,
    pub sack: SackBlocks,
    /// Payload bytes.
    pub len: u32,
    /// The urgent pointer field: with URG, the offset from SEG.SEQ of the octet following
    /// the urgent data (RFC 9293 §3.1, MUST-31).
    pub up: u16,
    /// Sum of pseudo-header and TCP header (checksum field included).
    pub header_sum: u16,
}

impl Segment {
    /// SEG.LEN: payload plus SYN and FIN (RFC 9293 §3.4).
    pub fn seg_len(&self) -> u32 {
        self.len + self.flags.contains(TcpFlags::SYN) as u32 + self.flags.contains(TcpFlags::FIN) as u32
    }
}

/// What the caller must do with the connection after a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Keep,
    /// SYN-RECEIVED became ESTABLISHED: hand it to its listener's accept queue.
    Established,
    /// The connection is gone: free the TCB.
    Delete,
    /// A TIME-WAIT connection gives way to a new incarnation (RFC 6191): free it and offer
    /// the SYN to the listener.
    Reincarnate,
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
            up: repr.urgent,
            header_sum,
        },
        packet.header_len(),
    ))
}

impl Tcp {
    /// Header prediction and the fast path for the TCP segment of `ing.len` bytes at `off`
    /// in `frame`: its connection (last-hit cache, then the table), `predict`, and
    /// cases (a) and (b).
    #[inline(always)]
    pub(crate) fn fast(&mut self, now: Instant, ing: TcpIngress, off: usize, frame: &PBuf, io: Io<'_>) -> Fast {
        let Some(seg) = frame.data().get(off..off + ing.len as usize) else { return Fast::Slow };
        let Some(p) = seg.first_chunk::<4>() else { return Fast::Slow };
        let ports = u32::from_ne_bytes(*p);
        let Some(idx) = self.lookup_wire(ing.addr_key(), ports) else { return Fast::Slow };
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else {
            return Fast::Slow;
        };
        let Some(p) = predict(tcb, seg, ing.checksum_ok) else { return Fast::Slow };
        self.counters.segs_in += 1;
        let (out, dirty, rearm) = match p {
            Predicted::Data { seq, hl, len, unverified, tsval } => {
                let payload = seg.get(hl..).unwrap_or_default();
                let c = &mut self.counters;
                let done = fast_data(now, self.config.delayed_ack, c, tcb, seq, payload, unverified, tsval);
                let out = match done.queue {
                    true => Fast::Queue(Queue { idx, seq, off: (off + hl) as u32, len, unverified }),
                    false => Fast::Done,
                };
                (out, tcb.ack_now, done.timer_changed)
            }
            Predicted::Ack { seq, ack, ts } => {
                let Io { pool, iface, tx } = io;
                let mut env = env!(self, now, pool, iface, tx);
                (Fast::Done, true, fast_ack(&mut env, tcb, seq, ack, ts))
            }
            Predicted::BadChecksum => {
                self.counters.drop(DropReason::BadChecksum);
                return Fast::Done;
            }
        };
        tcb.stats.segs_in += 1;
        if dirty && !tcb.dirty {
            tcb.dirty = true;
            self.dirty.push(idx);
        }
        self.events.mark(idx);
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
        // RFC 1122 §4.2.3.10 / §3.2.1.3: a segment from a source that names no single host
        // is silently discarded (no SYN-ACK, no RST to a broadcast or loopback address).
        // Header prediction hands segments here without the interface's full checks.
        if io.iface.martian_source(src) {
            self.counters.drop(DropReason::Martian);
            return;
        }
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
            let defer = idx.and_then(|i| self.tcb(i)).is_some_and(|t| deferrable(t, &seg));
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
            None => match self.tw.find(&tuple) {
                Some(i) => self.time_wait_input(now, i, &seg, io),
                None if self.cookie_ack_candidate(now, &seg) => self.syn_cookie_ack(now, &seg, segment, io),
                None => self.no_connection(now, &seg, None, io),
            },
        }
    }

    pub(super) fn connection_input(
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
        self.events.mark(idx);
        let before = tcb.state;
        let mut env = env!(self, now, pool, iface, tx);
        let outcome = match tcb.state {
            State::SynSent => syn_sent(&mut env, tcb, seg, payload),
            State::Closed | State::Listen => {
                output::send_reset(&mut env, seg, None, None);
                Outcome::Keep
            }
            _ => {
                let o = synchronized(&mut env, tcb, seg, payload, unverified);
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
                    tcb.owe_ack();
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
    pub(super) fn no_connection(&mut self, now: Instant, seg: &Segment, iss: Option<SeqNumber>, io: Io<'_>) {
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
        // Linux (`tcp_conn_request`): a full accept queue drops the SYN; a full SYN queue
        // drops it too, unless SYN cookies stand in for the queue (RFC 4987 §3.6).
        let syn_queue_full = l.syn_received >= l.backlog;
        let cookie = match self.config.syn_cookies {
            SynCookies::Never => false,
            SynCookies::WhenFull => syn_queue_full,
            SynCookies::Always => true,
        };
        if l.ready >= l.backlog || (syn_queue_full && !cookie) {
            env.counters.drop(DropReason::ListenOverflow);
            return;
        }
        if cookie {
            self.send_syn_cookie(now, lidx, seg, Io { pool, iface, tx });
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
        negotiate(&mut env, &mut tcb, seg);
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
}
