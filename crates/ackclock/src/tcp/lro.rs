//! Receive aggregation (LRO), after the Myri10GE `inet_lro` patch (Gallatin 2008): over each
//! received batch, in-order data segments of one connection are gathered into one aggregate
//! that TCP processes once, and consecutive pure ACKs of one connection are merged into the
//! newest, each older ACK's buffer going back to the pool at once.
//!
//! # The table
//!
//! [`Lro`] holds at most [`FLOWS`] flows, each at most [`MAX_SEGS`] segments (Linux GRO and
//! gVisor hold about as many), allocated when the stack is made. `Stack::receive` offers it
//! every frame of a batch that passed `Interface::common_tcp` (untagged Ethernet, a
//! 20-byte IPv4 header, no fragment, TCP, ours; an 802.1Q-tagged frame takes the ordinary
//! path and is not aggregated) and flushes every flow at the
//! end of the batch, so aggregation never holds a segment past the batch it came in.
//!
//! # What merges
//!
//! *Data*: a segment merges into its flow's aggregate when it is the next in sequence, has
//! the same ACK number and window, no flags but ACK and PSH, no options but timestamps (TSval
//! not decreasing, the same TSecr), the same TOS/ECN byte, the same checksum state, and the
//! aggregate's segment size. Anything else flushes the flow first. A segment carrying PSH
//! merges and ends the aggregate. The frames stay whole: TCP predicts the first, runs the
//! receive state and the delayed-ACK rule once for all (counting every segment), and moves
//! each frame into the receive queue.
//!
//! *Pure ACKs*: an ACK whose number advances past the held one, with the same window and
//! sequence number and a TSval not older, replaces it; the count and the ACK numbers of the
//! ACKs it replaces travel with it, so congestion control hears every one (RFC 3465 byte
//! counting with L = 2 SMSS per original ACK), and the RTT is sampled once, from the newest
//! timestamp. A duplicate ACK never merges (fast retransmit counts them, RFC 5681 §3.2); nor
//! does an ACK with SACK blocks (an option) or a window change. ACKs merge only while the
//! connection is in the state header prediction takes (no recovery, no duplicate ACKs
//! counting), which holds until the flush: nothing else touches the connection in between.
//!
//! A frame that cannot merge goes through the ordinary path after its flow is flushed, so
//! one connection's segments reach TCP in the order they arrived. Frames that are not common
//! (ARP, IP options, fragments, ICMP) flush every flow first.

use super::input::{ack_grow, ack_release, ack_timer, header_sum, in_order_received, predict, ts_older};
use super::input::{Arrival, Checksum, Predicted, SMALL_SEGMENT};
use super::seq::SeqNumber;
use super::tcb::{Tcb, Unverified};
use super::{Io, Tcp};
use crate::buf::PBuf;
use crate::iface::TcpIngress;
use crate::stats::Counters;
use crate::time::Instant;
use crate::wire::tcp::TS_ONLY_PREFIX;

/// Flows the table holds at once.
pub const FLOWS: usize = 8;
/// Segments (data) or ACKs one aggregate stands for at most.
pub const MAX_SEGS: usize = 16;

/// Which kinds of segment a stack aggregates. Both off by default: measured with
/// `scripts/callgrind-rxpath`, the aggregation stage costs more per frame than the
/// prediction and receive state it saves (about 585 instructions per data segment at batch
/// 64 against 446 without it), so it stays a switch until it is cheaper (BENCHMARKS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aggregation {
    /// Merge in-order data segments of a connection.
    pub data: bool,
    /// Merge consecutive advancing pure ACKs of a connection.
    pub acks: bool,
}

impl Default for Aggregation {
    fn default() -> Aggregation {
        Aggregation::OFF
    }
}

impl Aggregation {
    /// Both: data segments and pure ACKs.
    pub const ON: Aggregation = Aggregation { data: true, acks: true };

    /// Neither: every frame runs the receive path on its own.
    pub const OFF: Aggregation = Aggregation { data: false, acks: false };
}

/// Why a flow was flushed (each has its counter, `lro_flush_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flush {
    /// The batch ended.
    Batch,
    /// The aggregate reached [`MAX_SEGS`].
    Full,
    /// The table was full and a new flow needed the slot.
    Table,
    /// A segment carrying PSH ended the aggregate.
    Push,
    /// A flag other than ACK/PSH (SYN, FIN, RST, URG, CWR, ECE).
    Flags,
    /// Options other than timestamps (SACK blocks, anything else).
    Options,
    /// Not the next sequence number (a gap or a duplicate).
    Order,
    /// A duplicate ACK.
    DupAck,
    /// A different window.
    Window,
    /// A segment of another size than the aggregate's.
    Size,
    /// Anything else: another ACK number, TSval going back or TSecr changing, another
    /// TOS/ECN byte or checksum state, data after ACKs or ACKs after data, a connection
    /// header prediction would not take, or a frame that is not a common one.
    Other,
}

impl Flush {
    pub(crate) fn count(self, c: &mut Counters) {
        match self {
            Flush::Batch => c.lro_flush_batch += 1,
            Flush::Full => c.lro_flush_full += 1,
            Flush::Table => c.lro_flush_table += 1,
            Flush::Push => c.lro_flush_push += 1,
            Flush::Flags => c.lro_flush_flags += 1,
            Flush::Options => c.lro_flush_options += 1,
            Flush::Order => c.lro_flush_order += 1,
            Flush::DupAck => c.lro_flush_dupack += 1,
            Flush::Window => c.lro_flush_window += 1,
            Flush::Size => c.lro_flush_size += 1,
            Flush::Other => c.lro_flush_other += 1,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Data,
    Ack,
}

/// What the TCP header of a common frame says, read once (wire order converted).
#[derive(Debug, Clone, Copy)]
struct Head {
    ports: u32,
    seq: u32,
    ack: u32,
    /// Data offset, flags and window: bytes 12..16 as loaded (wire order).
    word: u32,
    flags: u8,
    wnd: u16,
    hl: usize,
    ts: Option<(u32, u32)>,
    /// Payload bytes.
    len: u32,
    tos: u8,
}

const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// The TCP header of a frame behind `off` bytes of Ethernet and IPv4 header, if it is at
/// least a plain header; `None` for anything shorter.
fn head(frame: &[u8], off: usize, ing: &TcpIngress) -> Option<Head> {
    let seg = frame.get(off..off + ing.len as usize)?;
    let h = seg.first_chunk::<20>()?;
    let be = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let hl = ((h[12] >> 4) as usize) * 4;
    if hl < 20 || hl > seg.len() {
        return None;
    }
    let ts = match seg.first_chunk::<32>() {
        Some(t) if hl == 32 && u32::from_be_bytes([t[20], t[21], t[22], t[23]]) == TS_ONLY_PREFIX => {
            let w = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
            Some((w(24), w(28)))
        }
        _ => None,
    };
    Some(Head {
        ports: u32::from_ne_bytes([h[0], h[1], h[2], h[3]]),
        seq: be(4),
        ack: be(8),
        word: u32::from_ne_bytes([h[12], h[13], h[14], h[15]]),
        flags: h[13],
        wnd: u16::from_be_bytes([h[14], h[15]]),
        hl,
        ts,
        len: (seg.len() - hl) as u32,
        // The IPv4 header's TOS byte, 19 bytes before the TCP header.
        tos: *frame.get(off.checked_sub(19)?)?,
    })
}

impl Head {
    /// No options, or exactly NOP NOP TS.
    fn plain(&self) -> bool {
        self.hl == 20 || (self.hl == 32 && self.ts.is_some())
    }
    /// Any flag but ACK and PSH, or no ACK.
    fn odd_flags(&self) -> bool {
        self.flags & !PSH != ACK
    }
}

/// One flow's aggregate in progress.
#[derive(Debug)]
struct Flow {
    used: bool,
    kind: Kind,
    addrs: u64,
    ports: u32,
    /// Where the TCP header starts in the frames.
    off: usize,
    checksum_ok: bool,
    /// The first segment's header (data), or the newest ACK's (ACKs).
    first: Head,
    /// The newest segment's header.
    last: Head,
    /// Data: every frame, in order. ACKs: the newest one only.
    frames: Vec<PBuf>,
    /// ACKs: the ACK numbers of the merged ACKs before the newest, oldest first.
    acks: [u32; MAX_SEGS],
    /// Segments or ACKs the aggregate stands for.
    n: usize,
    ing: TcpIngress,
    /// ACKs: the connection's SND.MAX, once the first merge found the connection in the
    /// state header prediction takes (which holds until the flush).
    snd_max: u32,
    /// ACKs: the connection's pseudo-header sum (Jacobson 1993's `ph_sum`), for checking a
    /// merged ACK's checksum in a few words.
    ph_sum: u16,
}

/// What the stack does with a frame it offered.
pub(crate) enum Step {
    /// The table holds it (merged or the start of a flow).
    Held,
    /// Held, and its flow must be flushed now.
    HeldFlush(usize, Flush),
    /// Flush flow `.0` first, then offer the frame again.
    Flush(usize, Flush, PBuf),
    /// Not for aggregation: the ordinary path.
    Pass(PBuf),
}

/// A flushed flow, for [`Tcp::aggregate`].
pub(crate) struct Taken {
    kind: Kind,
    ing: TcpIngress,
    off: usize,
    n: usize,
    acks: [u32; MAX_SEGS],
}

impl Taken {
    /// Segments or ACKs the flow stands for.
    pub(crate) fn n(&self) -> usize {
        self.n
    }
}

/// The aggregation table of a stack.
#[derive(Debug)]
pub struct Lro {
    pub(crate) on: Aggregation,
    flows: Vec<Flow>,
    /// Slots in use, as a bit set.
    used: u32,
    /// The slot the next new flow takes when the table is full (round robin).
    victim: usize,
    /// The slot last offered a frame.
    last: usize,
}

impl Lro {
    /// A table of [`FLOWS`] flows of [`MAX_SEGS`] segments, allocated now.
    pub(crate) fn new(on: Aggregation) -> Lro {
        let none = Head { ports: 0, seq: 0, ack: 0, word: 0, flags: 0, wnd: 0, hl: 0, ts: None, len: 0, tos: 0 };
        let flows = (0..FLOWS)
            .map(|_| Flow {
                used: false,
                kind: Kind::Data,
                addrs: 0,
                ports: 0,
                off: 0,
                checksum_ok: false,
                first: none,
                last: none,
                frames: Vec::with_capacity(MAX_SEGS),
                acks: [0; MAX_SEGS],
                n: 0,
                ing: TcpIngress::new([0; 4].into(), [0; 4].into(), 0, false),
                snd_max: 0,
                ph_sum: 0,
            })
            .collect();
        Lro { on, flows, used: 0, victim: 0, last: 0 }
    }

    /// Whether any kind of aggregation is on.
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.on.data || self.on.acks
    }

    /// The slots holding a flow.
    #[inline]
    pub(crate) fn held(&self) -> u32 {
        self.used
    }

    /// Offer a common frame whose TCP header starts at `off`.
    pub(crate) fn offer(&mut self, tcp: &mut Tcp, ing: TcpIngress, off: usize, frame: PBuf) -> Step {
        let Some(h) = head(frame.data(), off, &ing) else { return self.pass_flushing(ing.addr_key(), 0, frame) };
        let addrs = ing.addr_key();
        let hit = |f: &Flow| f.used && f.addrs == addrs && f.ports == h.ports;
        let slot = match self.used {
            0 => None,
            // Most batches hold one flow: the last one offered to, first.
            _ if hit(&self.flows[self.last]) => Some(self.last),
            _ => self.flows.iter().position(hit),
        };
        if let Some(s) = slot {
            self.last = s;
            return self.offer_to(tcp, s, ing, h, frame);
        }
        self.start(tcp, ing, off, h, frame)
    }

    /// A frame that cannot be read as TCP: flush its flow if one is held, else pass it.
    fn pass_flushing(&mut self, addrs: u64, ports: u32, frame: PBuf) -> Step {
        let slot = self.flows.iter().position(|f| f.used && f.addrs == addrs && (ports == 0 || f.ports == ports));
        match slot {
            Some(s) => Step::Flush(s, Flush::Other, frame),
            None => Step::Pass(frame),
        }
    }

    /// A frame of a flow the table holds.
    fn offer_to(&mut self, tcp: &mut Tcp, s: usize, ing: TcpIngress, h: Head, frame: PBuf) -> Step {
        let f = &mut self.flows[s];
        let why = if h.odd_flags() {
            Some(Flush::Flags)
        } else if !h.plain() {
            Some(Flush::Options)
        } else if h.tos != f.last.tos || ing.checksum_ok != f.checksum_ok {
            Some(Flush::Other)
        } else {
            None
        };
        if let Some(why) = why {
            return Step::Flush(s, why, frame);
        }
        match f.kind {
            Kind::Data => {
                if h.len == 0 {
                    return Step::Flush(s, Flush::Other, frame);
                }
                let next = f.last.seq.wrapping_add(f.last.len);
                let why = if h.seq != next {
                    Flush::Order
                } else if h.wnd != f.last.wnd {
                    Flush::Window
                } else if h.ack != f.last.ack {
                    Flush::Other
                } else if h.len != f.first.len {
                    Flush::Size
                } else if !ts_follows(f.last.ts, h.ts, true) {
                    Flush::Other
                } else {
                    f.frames.push(frame);
                    f.last = h;
                    f.n += 1;
                    return match (h.flags & PSH != 0, f.n >= MAX_SEGS) {
                        (true, _) => Step::HeldFlush(s, Flush::Push),
                        (false, true) => Step::HeldFlush(s, Flush::Full),
                        _ => Step::Held,
                    };
                };
                Step::Flush(s, why, frame)
            }
            Kind::Ack => {
                if h.len != 0 {
                    return Step::Flush(s, Flush::Other, frame);
                }
                let why = if h.wnd != f.last.wnd {
                    Flush::Window
                } else if h.ack == f.last.ack {
                    Flush::DupAck
                } else if h.seq != f.last.seq
                    || SeqNumber(h.ack) <= SeqNumber(f.last.ack)
                    || !ts_follows(f.last.ts, h.ts, false)
                    || !predicted_ack(tcp, f, &h, &frame, &ing)
                {
                    Flush::Other
                } else {
                    f.acks[f.n - 1] = f.last.ack;
                    // The older ACK's buffer goes back to the pool here.
                    f.frames.clear();
                    f.frames.push(frame);
                    f.last = h;
                    f.first = h;
                    f.ing = ing;
                    f.n += 1;
                    tcp.counters.lro_acks += 1;
                    return match f.n >= MAX_SEGS {
                        true => Step::HeldFlush(s, Flush::Full),
                        false => Step::Held,
                    };
                };
                Step::Flush(s, why, frame)
            }
        }
    }

    /// A frame of a flow the table does not hold: start one if it may merge with what follows.
    fn start(&mut self, tcp: &mut Tcp, ing: TcpIngress, off: usize, h: Head, frame: PBuf) -> Step {
        if h.odd_flags() || !h.plain() {
            return Step::Pass(frame);
        }
        let kind = if h.len == 0 {
            // Its checksum is checked when something merges into it (a merged ACK's is never
            // looked at again); alone, it takes the ordinary path, which checks it.
            if !self.on.acks {
                return Step::Pass(frame);
            }
            Kind::Ack
        } else {
            if !self.on.data || h.flags & PSH != 0 || (h.len as usize) < SMALL_SEGMENT {
                return Step::Pass(frame);
            }
            Kind::Data
        };
        let Some(s) = (0..FLOWS).find(|&i| self.used & (1 << i) == 0) else {
            let v = self.victim;
            self.victim = (v + 1) % FLOWS;
            return Step::Flush(v, Flush::Table, frame);
        };
        let _ = tcp;
        let f = &mut self.flows[s];
        f.used = true;
        f.kind = kind;
        f.addrs = ing.addr_key();
        f.ports = h.ports;
        f.off = off;
        f.checksum_ok = ing.checksum_ok;
        f.first = h;
        f.last = h;
        f.n = 1;
        f.ing = ing;
        f.frames.push(frame);
        self.used |= 1 << s;
        self.last = s;
        Step::Held
    }

    /// Take flow `s` out of the table: its frames move into `frames` (empty, with room).
    pub(crate) fn take(&mut self, s: usize, frames: &mut Vec<PBuf>) -> Taken {
        let f = &mut self.flows[s];
        std::mem::swap(&mut f.frames, frames);
        f.used = false;
        self.used &= !(1 << s);
        Taken { kind: f.kind, ing: f.ing, off: f.off, n: f.n, acks: f.acks }
    }
}

/// Whether the connection takes both the held ACK and `new` by header prediction: asked of
/// the connection at the first merge; later merges of the flow need only check SND.MAX, as
/// nothing else touches the connection before the flush.
/// Without the device's word for it, both ACKs' checksums are checked here, in software.
#[inline]
fn predicted_ack(tcp: &mut Tcp, f: &mut Flow, new: &Head, frame: &PBuf, ing: &TcpIngress) -> bool {
    if f.n == 1 {
        match tcp.ack_mergeable(f.addrs, f.ports, &f.last, new) {
            Some((snd_max, ph_sum)) => (f.snd_max, f.ph_sum) = (snd_max.0, ph_sum),
            None => return false,
        }
        if !f.checksum_ok && !f.frames.first().is_some_and(|h| ack_checks(f.ph_sum, h, f.off, &f.ing)) {
            return false;
        }
    }
    (f.checksum_ok || ack_checks(f.ph_sum, frame, f.off, ing)) && SeqNumber(new.ack) <= SeqNumber(f.snd_max)
}

/// Whether a segment's timestamps may follow the previous one's in an aggregate: both or
/// neither; TSval not decreasing; for data also the same TSecr (an ACK's TSecr moves on).
fn ts_follows(prev: Option<(u32, u32)>, next: Option<(u32, u32)>, same_ecr: bool) -> bool {
    match (prev, next) {
        (None, None) => true,
        (Some((v0, e0)), Some((v1, e1))) => !ts_older(v1, v0) && (!same_ecr || e0 == e1),
        _ => false,
    }
}

/// A pure ACK's checksum, in software: the connection's pseudo-header sum and the header's
/// words (a pure ACK is all header).
#[inline]
fn ack_checks(ph_sum: u16, frame: &PBuf, off: usize, ing: &TcpIngress) -> bool {
    let Some(seg) = frame.data().get(off..off + ing.len as usize) else { return false };
    (seg.len() == 20 || seg.len() == 32) && header_sum(ph_sum, seg, seg.len()) == 0xffff
}

impl Tcp {
    /// Whether the connection of a held pure ACK `old` is in the state header prediction
    /// takes for both `old` and `new`: established, not recovering or counting duplicate
    /// ACKs, the same predicted flags word, and each ACK acknowledging new data.
    /// Returns SND.MAX and the pseudo-header sum when it is.
    fn ack_mergeable(&mut self, addrs: u64, ports: u32, old: &Head, new: &Head) -> Option<(SeqNumber, u16)> {
        let idx = self.lookup_wire(addrs, ports)?;
        let tcb = self.tcb(idx)?;
        let word_ok = |h: &Head| h.word & fmask_wire() == tcb.pred_flags;
        let ok = word_ok(old)
            && word_ok(new)
            && SeqNumber(old.seq) == tcb.rcv_nxt
            && tcb.snd_una < SeqNumber(old.ack)
            && old.ts.is_none_or(|(v, _)| !ts_older(v, tcb.ts_recent));
        ok.then_some((tcb.snd_max, tcb.ph_sum))
    }

    /// Process a flushed aggregate of two or more segments once. `false` (nothing changed)
    /// when header prediction does not take it: the caller then runs each frame (data) or
    /// the newest ACK through the ordinary path.
    pub(crate) fn aggregate(&mut self, now: Instant, t: &Taken, frames: &mut Vec<PBuf>, io: Io<'_>) -> bool {
        let Some(first) = frames.first() else { return true };
        let Some(seg) = first.data().get(t.off..t.off + t.ing.len as usize) else { return false };
        let Some(p) = seg.first_chunk::<4>() else { return false };
        let ports = u32::from_ne_bytes(*p);
        let Some(idx) = self.lookup_wire(t.ing.addr_key(), ports) else { return false };
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else {
            return false;
        };
        let rearm = match (t.kind, predict(tcb, seg, t.ing.checksum_ok)) {
            (Kind::Data, Some(Predicted::Data { seq, hl, len, unverified, tsval })) => {
                let total = len * frames.len() as u32;
                if !tcb.fits_window(seq, total) {
                    return false;
                }
                let had_delack = tcb.timers.delack.is_some();
                let checksum = if unverified.is_some() { Checksum::Deferred } else { Checksum::Verified };
                let delayed_ack = self.config.delayed_ack;
                in_order_received(now, delayed_ack, tcb, seq, total, checksum, tsval, Arrival::Next);
                let more = frames.len() - 1;
                if unverified.is_some() {
                    tcb.rcv_unverified += more;
                }
                // The delayed-ACK rule counts segments (RFC 5681 §4.2): two or more
                // full-sized ones owe an ACK now, as Linux ACKs a GRO segment at once.
                tcb.unacked_segs += more as u32;
                tcb.ack_now = true;
                tcb.quickack.owed = false;
                tcb.last_rcv = now;
                let mut s = seq;
                for f in frames.drain(..) {
                    let unv = unverified.map(|_| {
                        let seg = f.data().get(t.off..t.off + t.ing.len as usize).unwrap_or_default();
                        let tsval = seg.get(24..28).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                        Unverified { header_sum: header_sum(tcb.ph_sum, seg, hl), tsval: tsval.filter(|_| hl == 32) }
                    });
                    tcb.rcvq.push_frame(s, f, (t.off + hl) as u32, len, unv);
                    s += len;
                }
                self.counters.fast_path_data += t.n as u64;
                self.counters.lro_segments += t.n as u64;
                had_delack != tcb.timers.delack.is_some()
            }
            (Kind::Ack, Some(Predicted::Ack { seq, ack, ts })) => {
                let Io { pool, iface, tx } = io;
                let mut env = env!(self, now, pool, iface, tx);
                let r = merged_ack(&mut env, tcb, seq, ack, ts, &t.acks[..t.n - 1]);
                frames.clear();
                self.counters.fast_path_acks += t.n as u64;
                r
            }
            _ => return false,
        };
        self.counters.segs_in += t.n as u64;
        self.counters.lro_aggregates += 1;
        tcb.stats.segs_in += t.n as u64;
        if !tcb.dirty {
            tcb.dirty = true;
            self.dirty.push(idx);
        }
        self.events.mark(idx);
        if rearm {
            self.rearm(idx);
        }
        true
    }
}

/// Header prediction's mask in wire order (the fast path's `FMASK`).
fn fmask_wire() -> u32 {
    let m: u32 = 0xf000_0000 | ((0x01 | 0x02 | 0x04 | 0x20 | 0x10) << 16) | 0xffff;
    u32::from_ne_bytes(m.to_be_bytes())
}

/// A predicted pure ACK standing for `earlier.len() + 1` ACKs (the ACK numbers of the
/// earlier ones given): released, sampled and timed once, as the newest; congestion control
/// hears each original ACK with the bytes it acknowledged, so its window grows exactly as it
/// would have for the separate ACKs (RFC 3465 §2.2: L = 2 SMSS per ACK, not per aggregate).
fn merged_ack(
    env: &mut super::env::Env,
    tcb: &mut Tcb,
    seq: SeqNumber,
    ack: SeqNumber,
    ts: Option<(u32, u32)>,
    earlier: &[u32],
) -> bool {
    if let Some((tsval, _)) = ts {
        if seq <= tcb.last_ack_sent {
            tcb.ts_recent = tsval;
            tcb.ts_recent_age = env.now;
        }
    }
    let old_rexmt = tcb.timers.rexmt.get();
    let una = tcb.snd_una;
    let (data_acked, sample) = ack_release(env, tcb, ack, ts);
    // What the SYN or FIN took of the whole, taken from the last ACK's share.
    let unclaimed = ack.since(una) - data_acked;
    let mut prev = una;
    for &a in earlier {
        let a = SeqNumber(a);
        ack_grow(env, tcb, a, a.since(prev), None);
        prev = a;
    }
    ack_grow(env, tcb, ack, ack.since(prev).saturating_sub(unclaimed), sample);
    ack_timer(env, tcb);
    tcb.snd_wl1 = seq;
    tcb.snd_wl2 = ack;
    tcb.last_rcv = env.now;
    match (old_rexmt, tcb.timers.rexmt.get()) {
        (Some(old), Some(new)) => new < old,
        (old, new) => old != new,
    }
}
