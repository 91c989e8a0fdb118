//! Receive aggregation (LRO), after the Myri10GE `inet_lro` patch (Gallatin 2008): over each
//! received batch, in-order data segments of one connection are processed as one aggregate,
//! and consecutive pure ACKs of one connection are merged into the newest, each merged ACK's
//! buffer given up as it arrives.
//!
//! # Aggregation is header prediction
//!
//! Linux GRO and FreeBSD's `tcp_lro.c` sit below TCP: they parse each frame's headers, find
//! its flow in a table of their own, compare the headers with the flow's last frame, and
//! hold the frames until a flush hands TCP one large segment. Here that would be a second
//! parse and a second demultiplex in front of a header prediction that costs about as much
//! as they do; built that way first, the stage cost 31% more per data segment than no
//! aggregation (BENCHMARKS.md). So the stage is *inside* the fast path: in a batch,
//! [`Tcp::fast_batch`] finds the connection through the connection cache, runs header
//! prediction against the connection's state, and that one masked compare is also the merge
//! test. What prediction takes is accounted for at once where it must be (a data frame moves
//! into the receive queue and advances `rcv_nxt`, so that the next segment predicts), and
//! the per-segment work that can wait runs once per aggregate at the flush: TS.Recent, the
//! ACK rule and the delayed-ACK timer, the output and event lists, and for pure ACKs all of
//! it (release, RTT sample, window growth, retransmission timer). No frame is held: a merged
//! ACK's buffer is given up as it arrives, and only its numbers are kept. The buffers go back
//! to the pool together, in one compare-and-swap ([`FreeChain`]): a batch's finished frames
//! at the end of the batch (or before a frame takes another path, which may allocate; at
//! most a batch of frames, which the device took from the pool before the batch began, so
//! the pool never stands lower than when the batch was filled), and the segments a merged
//! ACK acknowledged at its flush.
//!
//! Behind an untagged frame that merged or opened an aggregate, when at least two more
//! frames wait in the batch, the frames of the same connection that follow are taken by a
//! run ([`run`]): their whole headers compared with that frame's as words, in one loop,
//! with the connection in hand.
//!
//! [`Lro`] is the table of aggregates in progress: at most [`FLOWS`] connections, each at
//! most [`MAX_SEGS`] segments (Linux GRO and gVisor hold about as many). Every aggregate is
//! flushed at the end of its batch, so aggregation never delays anything past the batch.
//!
//! # What merges
//!
//! *Data*: a segment merges into its connection's aggregate when header prediction takes it
//! (the next sequence number, the same ACK number and window, no flags but ACK and PSH, no
//! options but timestamps, PAWS) and it has the aggregate's segment size, a TSval not
//! older, the same TSecr, the same TOS/ECN byte and the same checksum state. A segment
//! carrying PSH merges and ends the aggregate. An aggregate's first segment carries at least
//! 256 bytes and no PSH. The delayed-ACK rule counts every segment (RFC 5681 §4.2), so two
//! or more owe an ACK at once, as Linux ACKs a GRO segment.
//!
//! *Pure ACKs*: an ACK that header prediction takes and whose number advances past the
//! aggregate's newest, with a TSval not older, replaces it; the ACK numbers of the ACKs it
//! replaces are kept, so congestion control hears every one (RFC 3465 byte counting with
//! L = 2 SMSS per original ACK), all in one call (`CongestionControl::on_acks`, as Linux's
//! `tcp_cong_avoid` hears the segments an ACK covered at once), each ACK with the RTT sample
//! its timestamp echo gives (HyStart++ counts samples per ACK, RFC 9406 §4.2). The RTT
//! estimator takes one sample, from the newest timestamp: RFC 6298's gains were chosen for
//! about one sample per round trip, and RFC 7323 Appendix G scales them down when samples
//! come per ACK; the aggregate's one sample leaves SRTT and RTTVAR closer to that design
//! than a burst of near-identical samples, at the cost of differing from the separate ACKs'. The segments they acknowledged leave the send queue together,
//! their buffers back to the pool in one compare-and-swap. A duplicate ACK never merges (fast retransmit counts them, RFC 5681 §3.2); nor
//! does an ACK with SACK blocks or a window change, which prediction does not take.
//! Prediction is off while a recovery or duplicate ACKs are under way, so a merged ACK never
//! meets either.
//!
//! A segment of a connection with an aggregate that does not merge flushes the aggregate
//! first (counted by reason), then runs as any segment would, so one connection's segments
//! reach TCP in the order they arrived. A frame that is not a common one (ARP, IP options,
//! fragments, ICMP) flushes every aggregate first; a common frame behind an 802.1Q tag
//! aggregates as an untagged one. An aggregate of one segment is processed exactly as the
//! fast path processes it, and a batch of one frame takes the ordinary path.

use super::env::Env;
use super::input::{ack_grow_merged, ack_release_by, ack_timer, fast_ack, in_order_ack_rule, in_order_queued, predict};
use super::input::{quick_ack_on_data, ts_older};
use super::input::{Fast, Predicted, Queue, SMALL_SEGMENT};
use super::recovery;
use super::seq::SeqNumber;
use super::tcb::Tcb;
#[cfg(test)]
use super::tcb::TxSeg;
use super::{DropReason, Io, Tcp};
use crate::buf::{FreeChain, PBuf};
use crate::iface::TcpIngress;
use crate::stats::Counters;
use crate::time::Instant;
use crate::wire::tcp::TS_ONLY_PREFIX;

mod run;
pub(crate) use run::Run;

/// Flows the table holds at once.
pub const FLOWS: usize = 8;
/// Segments (data) or ACKs one aggregate stands for at most.
pub const MAX_SEGS: usize = 16;

/// Which kinds of segment a stack aggregates over each received batch (receive aggregation,
/// after the Myri10GE `inet_lro` patch, Gallatin 2008). In-order full-sized data segments of a
/// connection are processed as one: each goes into the receive queue, and the ACK rule (an
/// aggregate of two or more is ACKed at once, as Linux ACKs a GRO segment), TS.Recent and the
/// timers run once. Consecutive advancing pure ACKs of a connection merge into the newest:
/// the buffers are given up as they arrive, and the release, RTT sample and timer run once,
/// while congestion control hears every original ACK (RFC 3465). Nothing waits past the
/// batch it arrived in. Both on by default ([`StackConfig::aggregation`](crate::StackConfig)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aggregation {
    /// Merge in-order data segments of a connection.
    pub data: bool,
    /// Merge consecutive advancing pure ACKs of a connection.
    pub acks: bool,
}

impl Default for Aggregation {
    fn default() -> Aggregation {
        Aggregation::ON
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

const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// One connection's aggregate in progress: numbers only, never a frame.
#[derive(Debug, Clone, Copy)]
struct Flow {
    /// The connection's slot.
    idx: u32,
    kind: Kind,
    /// Segments or ACKs the aggregate stands for.
    n: u32,
    /// Data: the first segment's sequence number. ACKs: their (unchanging) sequence number.
    seq: SeqNumber,
    /// ACKs: the newest ACK number.
    ack: SeqNumber,
    /// Data: the first segment's timestamps. ACKs: the newest's.
    ts: Option<(u32, u32)>,
    /// The newest TSval, which the next segment's may not be older than.
    tsval: u32,
    /// Data: each segment's payload length.
    len: u32,
    /// Data: its checksums are deferred to the copy.
    unverified: bool,
    checksum_ok: bool,
    tos: u8,
    /// Data: the delayed-ACK timer was set when the aggregate began.
    had_delack: bool,
    /// ACKs: the ACK numbers of the merged ACKs, oldest first (the newest is `ack`).
    acks: [u32; MAX_SEGS],
    /// ACKs: the timestamp each echoed (TSecr; 0 without timestamps), in the same order:
    /// congestion control hears each one's RTT sample, as from the separate ACKs.
    ecrs: [u32; MAX_SEGS],
}

impl Flow {
    /// The first segment of a data aggregate, in order at `seq` (`len` bytes, timestamps
    /// `ts`, its checksum left for the copy if `unverified`): accounted for as the fast path
    /// accounts for it, and the delayed-ACK state noted (see `lro_flush`).
    #[inline(always)]
    fn open_data(
        &mut self,
        now: Instant,
        tcb: &mut Tcb,
        seq: SeqNumber,
        len: u32,
        ts: Option<(u32, u32)>,
        unverified: bool,
    ) {
        self.seq = seq;
        self.len = len;
        self.ts = ts;
        self.tsval = ts.map_or(0, |t| t.0);
        self.unverified = unverified;
        self.had_delack = tcb.timers.delack.is_some();
        if tcb.quickack.enabled {
            quick_ack_on_data(now, tcb);
        }
        in_order_queued(tcb, len, unverified);
    }

    /// The first ACK of an aggregate of pure ACKs.
    #[inline(always)]
    fn open_ack(&mut self, seq: SeqNumber, ack: SeqNumber, ts: Option<(u32, u32)>) {
        self.seq = seq;
        self.ack = ack;
        self.acks[0] = ack.0;
        self.ecrs[0] = ts.map_or(0, |t| t.1);
        self.ts = ts;
        self.tsval = ts.map_or(0, |t| t.0);
    }
}

/// The aggregation table of a stack.
#[derive(Debug)]
pub struct Lro {
    pub(crate) on: Aggregation,
    flows: [Flow; FLOWS],
    /// Slots in use, as a bit set.
    used: u32,
    /// The slot the next new flow takes when the table is full (round robin).
    victim: usize,
    /// The slot last found.
    last: usize,
    /// The aggregate the next frames are predicted to join, from a template frame's headers.
    run: Run,
    /// At least two frames follow the one being offered in its batch: a run is worth
    /// beginning (`run::Run::begin`).
    pub(crate) followed: bool,
}

impl Lro {
    /// An empty table.
    pub(crate) fn new(on: Aggregation) -> Lro {
        let none = Flow {
            idx: u32::MAX,
            kind: Kind::Data,
            n: 0,
            seq: SeqNumber(0),
            ack: SeqNumber(0),
            ts: None,
            tsval: 0,
            len: 0,
            unverified: false,
            checksum_ok: false,
            tos: 0,
            had_delack: false,
            acks: [0; MAX_SEGS],
            ecrs: [0; MAX_SEGS],
        };
        Lro { on, flows: [none; FLOWS], used: 0, victim: 0, last: 0, run: Run::NONE, followed: false }
    }

    /// Whether any kind of aggregation is on.
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.on.data || self.on.acks
    }

    /// Whether frames are predicted to continue an aggregate (see `run`).
    #[inline(always)]
    pub(crate) fn run_live(&self) -> bool {
        self.run.live()
    }

    /// Make frame `data` of aggregate `s` (its TCP header, `hl` bytes, at `off`; its
    /// connection's pseudo-header sum `ph_sum`) the template of a run (`run::Run::begin`).
    #[inline(always)]
    fn begin_run(&mut self, s: usize, ph_sum: u16, data: &[u8], off: usize, hl: usize) {
        self.run.begin(self.followed, s, &self.flows[s], ph_sum, data, off, hl);
    }

    /// The slots holding a flow.
    #[inline]
    pub(crate) fn held(&self) -> u32 {
        self.used
    }

    /// A new aggregate of connection `idx` in the free slot `s`, of one segment or ACK.
    #[inline(always)]
    fn open(&mut self, s: usize, idx: u32, kind: Kind, checksum_ok: bool, tos: u8) -> &mut Flow {
        self.used |= 1 << s;
        self.last = s;
        let f = &mut self.flows[s];
        f.idx = idx;
        f.kind = kind;
        f.n = 1;
        f.checksum_ok = checksum_ok;
        f.tos = tos;
        f
    }

    /// The slot a new aggregate takes: a free one (`None` if the table is full).
    #[inline(always)]
    fn free_slot(&self) -> Option<usize> {
        (0..FLOWS).find(|&i| self.used & (1 << i) == 0)
    }

    /// The slot of connection `idx`'s aggregate, if it has one.
    #[inline(always)]
    fn find(&mut self, idx: u32) -> Option<usize> {
        if self.used == 0 {
            return None;
        }
        if self.used & (1 << self.last) != 0 && self.flows[self.last].idx == idx {
            return Some(self.last);
        }
        let s = (0..FLOWS).find(|&s| self.used & (1 << s) != 0 && self.flows[s].idx == idx)?;
        self.last = s;
        Some(s)
    }
}

/// What a frame's TCP header says, read out of line to name why a segment did not merge.
struct Head {
    seq: u32,
    ack: u32,
    flags: u8,
    wnd: u16,
    plain: bool,
    len: u32,
}

fn head(seg: &[u8]) -> Option<Head> {
    let h = seg.first_chunk::<20>()?;
    let be = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let hl = ((h[12] >> 4) as usize) * 4;
    if hl < 20 || hl > seg.len() {
        return None;
    }
    let ts =
        seg.first_chunk::<32>().is_some_and(|t| u32::from_be_bytes([t[20], t[21], t[22], t[23]]) == TS_ONLY_PREFIX);
    Some(Head {
        seq: be(4),
        ack: be(8),
        flags: h[13],
        wnd: u16::from_be_bytes([h[14], h[15]]),
        plain: hl == 20 || (hl == 32 && ts),
        len: (seg.len() - hl) as u32,
    })
}

/// Why a segment of connection `tcb` did not merge into its aggregate `f` (for the
/// counters; the segment then runs on its own after the flush).
#[inline(never)]
fn why_not(f: &Flow, tcb: &Tcb, seg: &[u8], tos: u8, checksum_ok: bool) -> Flush {
    let Some(h) = head(seg) else { return Flush::Other };
    if h.flags & !PSH != ACK {
        return Flush::Flags;
    }
    if !h.plain {
        return Flush::Options;
    }
    if tos != f.tos || checksum_ok != f.checksum_ok {
        return Flush::Other;
    }
    // The aggregate's segments carried the window header prediction expects (`pred_flags`,
    // in wire order, its last two bytes); nothing has changed it since the aggregate began.
    let p = tcb.pred_flags.to_ne_bytes();
    let wnd = u16::from_be_bytes([p[2], p[3]]);
    match f.kind {
        Kind::Data if h.len == 0 => Flush::Other,
        Kind::Data if h.seq != tcb.rcv_nxt.0 => Flush::Order,
        Kind::Data if h.wnd != wnd => Flush::Window,
        Kind::Data if h.ack != tcb.snd_una.0 => Flush::Other,
        Kind::Data if h.len != f.len => Flush::Size,
        Kind::Data => Flush::Other,
        Kind::Ack if h.len != 0 => Flush::Other,
        Kind::Ack if h.wnd != wnd => Flush::Window,
        Kind::Ack if h.ack == f.ack.0 => Flush::DupAck,
        Kind::Ack => Flush::Other,
    }
}

impl Tcp {
    /// [`Tcp::fast`] inside a batch with aggregation on (see the module documentation): the
    /// segment merges into its connection's aggregate, starts one, or (after flushing its
    /// connection's aggregate if it does not merge) takes the ordinary fast path.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fast_batch(
        &mut self,
        lro: &mut Lro,
        now: Instant,
        ing: TcpIngress,
        off: usize,
        frame: &PBuf,
        mut io: Io<'_>,
    ) -> Fast {
        let data = frame.data();
        let Some(seg) = data.get(off..off + ing.len as usize) else { return Fast::Slow };
        let Some(p) = seg.first_chunk::<4>() else { return Fast::Slow };
        let ports = u32::from_ne_bytes(*p);
        let Some(idx) = self.lookup_wire(ing.addr_key(), ports) else { return Fast::Slow };
        // The IPv4 header's TOS byte, 19 bytes before the TCP header.
        let tos = off.checked_sub(19).and_then(|i| data.get(i)).copied().unwrap_or(0);
        if let Some(s) = lro.find(idx) {
            if let Some(out) = self.merge(lro, s, now, ing, off, data, seg, tos, io.re()) {
                return out;
            }
        }
        // Whether the segment could begin an aggregate, from its header alone, before the
        // prediction runs: one that could not (PSH, a short segment, a kind switched off)
        // takes the ordinary fast path, which predicts it once.
        let hl = seg.get(12).map_or(0, |b| (b >> 4) as usize * 4);
        let len = seg.len().saturating_sub(hl);
        let candidate = match len {
            0 => lro.on.acks,
            _ => lro.on.data && len >= SMALL_SEGMENT && seg.get(13).is_some_and(|f| f & PSH == 0),
        };
        if !candidate {
            return self.fast(now, ing, off, frame, io);
        }
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else {
            return Fast::Slow;
        };
        let p = match predict(tcb, seg, ing.checksum_ok) {
            None => return Fast::Slow,
            Some(Predicted::BadChecksum) => {
                self.counters.drop(DropReason::BadChecksum);
                return Fast::Done;
            }
            Some(p) => p,
        };
        let kind = match p {
            Predicted::Ack { .. } => Kind::Ack,
            _ => Kind::Data,
        };
        // A slot for a new aggregate: a free one, or the next victim's, flushed.
        let s = match lro.free_slot() {
            Some(s) => s,
            None => {
                let v = lro.victim;
                lro.victim = (v + 1) % FLOWS;
                self.lro_flush(lro, v, Flush::Table, now, io.re());
                v
            }
        };
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else {
            return Fast::Slow;
        };
        let f = lro.open(s, idx, kind, ing.checksum_ok, tos);
        self.counters.segs_in += 1;
        tcb.stats.segs_in += 1;
        match p {
            Predicted::Data { seq, hl, len, unverified, tsval } => {
                f.open_data(now, tcb, seq, len, tsval.map(|v| (v, ts_ecr(seg))), unverified.is_some());
                lro.begin_run(s, tcb.ph_sum, data, off, hl);
                Fast::Queue(Queue { idx, seq, off: (off + hl) as u32, len, unverified })
            }
            Predicted::Ack { seq, ack, ts } => {
                f.open_ack(seq, ack, ts);
                lro.begin_run(s, tcb.ph_sum, data, off, if ts.is_some() { 32 } else { 20 });
                Fast::Done
            }
            Predicted::BadChecksum => Fast::Done,
        }
    }

    /// A segment of the connection that has aggregate `s`: merged (`Some`), or the
    /// aggregate flushed (`None`: the caller runs the segment on its own).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn merge(
        &mut self,
        lro: &mut Lro,
        s: usize,
        now: Instant,
        ing: TcpIngress,
        off: usize,
        data: &[u8],
        seg: &[u8],
        tos: u8,
        io: Io<'_>,
    ) -> Option<Fast> {
        let f = &mut lro.flows[s];
        let idx = f.idx;
        let tcb = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut())?;
        let same = tos == f.tos && ing.checksum_ok == f.checksum_ok;
        let full = match (predict(tcb, seg, ing.checksum_ok), f.kind) {
            (Some(Predicted::BadChecksum), _) => {
                self.counters.drop(DropReason::BadChecksum);
                return Some(Fast::Done);
            }
            (Some(Predicted::Data { seq, hl, len, unverified, tsval }), Kind::Data)
                if same
                    && len == f.len
                    && tsval.is_none_or(|v| !ts_older(v, f.tsval))
                    && f.ts.is_none_or(|(_, ecr)| ecr == ts_ecr(seg)) =>
            {
                let psh = seg.get(13).is_some_and(|b| b & PSH != 0);
                match merge_data(f, tcb, len, unverified.is_some(), tsval, psh) {
                    Some(why) => self.lro_flush(lro, s, why, now, io),
                    None => lro.begin_run(s, tcb.ph_sum, data, off, hl),
                }
                return Some(Fast::Queue(Queue { idx, seq, off: (off + hl) as u32, len, unverified }));
            }
            (Some(Predicted::Ack { ack, ts, .. }), Kind::Ack)
                if same && f.ack < ack && ts.is_none_or(|(v, _)| !ts_older(v, f.tsval)) =>
            {
                let full = merge_ack(f, ack, ts);
                lro.begin_run(s, tcb.ph_sum, data, off, if ts.is_some() { 32 } else { 20 });
                full
            }
            _ => {
                let why = why_not(f, tcb, seg, tos, ing.checksum_ok);
                self.lro_flush(lro, s, why, now, io);
                return None;
            }
        };
        if full {
            self.lro_flush(lro, s, Flush::Full, now, io);
        }
        Some(Fast::Done)
    }

    /// Hand aggregate `s` to TCP: its per-aggregate work, once (see the module
    /// documentation), then the connection on the output and event lists.
    #[inline(never)]
    pub(crate) fn lro_flush(&mut self, lro: &mut Lro, s: usize, why: Flush, now: Instant, io: Io<'_>) {
        why.count(&mut self.counters);
        lro.used &= !(1 << s);
        lro.run.end(s);
        let f = &lro.flows[s];
        let idx = f.idx;
        // The segments merged after the first, which `merge` leaves to be counted here.
        let n = f.n as u64;
        self.counters.segs_in += n - 1;
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else { return };
        tcb.stats.segs_in += n - 1;
        let (dirty, rearm) = match f.kind {
            Kind::Data => {
                let tsval = f.ts.map(|t| t.0);
                let delayed_ack = self.config.delayed_ack;
                in_order_ack_rule(now, delayed_ack, tcb, f.seq, f.n, f.unverified, tsval, false);
                tcb.last_rcv = now;
                self.counters.fast_path_data += n;
                if n > 1 {
                    self.counters.lro_segments += n;
                    self.counters.lro_aggregates += 1;
                }
                (tcb.ack_now, f.had_delack != tcb.timers.delack.is_some())
            }
            Kind::Ack => {
                let Io { pool, iface, tx } = io;
                let mut env = env!(self, now, pool, iface, tx);
                let rearm = match f.n {
                    1 => fast_ack(&mut env, tcb, f.seq, f.ack, f.ts),
                    _ => {
                        env.counters.fast_path_acks += n;
                        env.counters.lro_aggregates += 1;
                        env.counters.lro_acks += n - 1;
                        let n = f.n as usize;
                        merged_ack(&mut env, tcb, f.seq, f.ack, f.ts, &f.acks[..n], &f.ecrs[..n])
                    }
                };
                (true, rearm)
            }
        };
        if dirty && !tcb.dirty {
            tcb.dirty = true;
            self.dirty.push(idx);
        }
        self.events.mark(idx);
        if rearm {
            self.rearm(idx);
        }
    }
}

/// `merge`'s bookkeeping for an in-order segment of `len` bytes that merged into `f` (its
/// checksum left for the copy if `unverified`, its TSval, PSH): the flush it calls for.
/// PSH merges and ends the aggregate.
#[inline(always)]
fn merge_data(f: &mut Flow, tcb: &mut Tcb, len: u32, unverified: bool, tsval: Option<u32>, psh: bool) -> Option<Flush> {
    in_order_queued(tcb, len, unverified);
    f.tsval = tsval.unwrap_or(0);
    // Counted (segs_in) at the flush, which comes in this batch.
    f.n += 1;
    match psh {
        true => Some(Flush::Push),
        false => (f.n as usize >= MAX_SEGS).then_some(Flush::Full),
    }
}

/// `merge`'s bookkeeping for an ACK that merged into `f` (its timestamps `ts`): whether
/// the aggregate is full.
#[inline(always)]
fn merge_ack(f: &mut Flow, ack: SeqNumber, ts: Option<(u32, u32)>) -> bool {
    f.acks[f.n as usize] = ack.0;
    f.ecrs[f.n as usize] = ts.map_or(0, |t| t.1);
    f.ack = ack;
    f.ts = ts;
    f.tsval = ts.map_or(0, |t| t.0);
    // Counted (segs_in, lro_acks) at the flush, which comes in this batch.
    f.n += 1;
    f.n as usize >= MAX_SEGS
}

/// The TSecr of a segment with the NOP NOP TS layout (0 without it).
#[inline(always)]
fn ts_ecr(seg: &[u8]) -> u32 {
    seg.get(28..32).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// A predicted pure ACK standing for `acks.len()` ACKs (their ACK numbers and timestamp
/// echoes given, oldest first, the last being `ack`): released, sampled and timed once, as
/// the newest; congestion control hears them in one call that grows the window exactly as
/// the separate ACKs would have (RFC 3465 §2.2: L = 2 SMSS per ACK, not per aggregate; see
/// `ack_grow_merged`), each with its own RTT sample.
fn merged_ack(
    env: &mut Env,
    tcb: &mut Tcb,
    seq: SeqNumber,
    ack: SeqNumber,
    ts: Option<(u32, u32)>,
    acks: &[u32],
    ecrs: &[u32],
) -> bool {
    if let Some((tsval, _)) = ts {
        if seq <= tcb.last_ack_sent {
            tcb.ts_recent = tsval;
            tcb.ts_recent_age = env.now;
        }
    }
    let old_rexmt = tcb.timers.rexmt.get();
    let una = tcb.snd_una;
    let (data_acked, sample) = ack_release_by(env, tcb, ack, ts, release_counted);
    // What the SYN or FIN took of the whole, taken from the last ACK's share.
    let unclaimed = ack.since(una) - data_acked;
    let ecrs = if ts.is_some() { ecrs } else { &[] };
    ack_grow_merged(env, tcb, una, acks, ecrs, unclaimed, sample);
    ack_timer(env, tcb);
    tcb.snd_wl1 = seq;
    tcb.snd_wl2 = ack;
    tcb.last_rcv = env.now;
    match (old_rexmt, tcb.timers.rexmt.get()) {
        (Some(old), Some(new)) => new < old,
        (old, new) => old != new,
    }
}

/// The segments `ack` acknowledges whole leave the send queue, their pbufs back to the pool
/// together, in one compare-and-swap ([`FreeChain`]): what `ack_release` does one segment
/// and one compare-and-swap at a time, for the many segments of a merged ACK.
#[inline(always)]
fn release_counted(tcb: &mut Tcb, ack: SeqNumber) {
    let mut chain = FreeChain::new();
    let (mut k, mut freed) = (0, 0);
    while tcb.sndq.front().is_some_and(|s| s.end() <= ack) {
        let Some(s) = tcb.sndq.pop_front() else { break };
        k += 1;
        freed += s.len() as usize;
        if s.sent > 1 {
            recovery::note_rxt_acked(tcb, s.seq, s.end());
        }
        chain.put(s.buf);
    }
    tcb.snd_queued -= freed;
    tcb.snd_nxt_idx = tcb.snd_nxt_idx.saturating_sub(k);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};
    use crate::tcp::input::release_each;
    use crate::tcp::tcb::{FourTuple, State};
    use crate::tcp::{SocketOptions, TcpConfig};
    use core::net::Ipv4Addr;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// A connection whose send queue holds segments of `lens` bytes from SND.UNA on, each
    /// transmitted `sent` times, with `snd_nxt_idx` as given; the queue's ring begins
    /// `rotate` places in, so that it may wrap (and the queue be two slices).
    fn sender(pool: &Pool, lens: &[(u32, u32)], snd_nxt_idx: usize, rotate: usize) -> Tcb {
        let now = Instant::from_secs(1);
        let tcp = Tcp::new(TcpConfig::default(), 7, now);
        let local = Ipv4Addr::new(10, 0, 0, 1);
        let remote = Ipv4Addr::new(10, 0, 0, 2);
        let tuple = FourTuple { local_addr: local, local_port: 80, remote_addr: remote, remote_port: 4000 };
        let opts = SocketOptions::from_config(&TcpConfig::default());
        let mut tcb = tcp.new_tcb(now, tuple, opts, 1500, State::Established);
        let mut seq = tcb.snd_una;
        tcb.sndq = VecDeque::with_capacity(lens.len().max(1));
        for _ in 0..rotate {
            let buf = pool.alloc().unwrap();
            tcb.sndq.push_back(TxSeg { seq, buf, sent: 0, sent_at: now, sacked: false });
            tcb.sndq.pop_front();
        }
        for &(len, sent) in lens {
            let mut buf = pool.alloc().unwrap();
            buf.append(len as usize).unwrap();
            tcb.sndq.push_back(TxSeg { seq, buf, sent, sent_at: now, sacked: false });
            tcb.snd_queued += len as usize;
            seq += len;
        }
        tcb.snd_nxt_idx = snd_nxt_idx;
        tcb
    }

    proptest! {
        /// The merged ACK's release (its buffers back in one chain) leaves the send queue, its
        /// byte count, `snd_nxt_idx`, the record of acknowledged retransmissions (for
        /// D-SACK) and the pool exactly as the one-at-a-time release does.
        #[test]
        fn counted_release_equals_one_at_a_time(
            lens in prop::collection::vec((1u32..1500, prop_oneof![4 => Just(1u32), 1 => 0u32..4]), 0..40),
            upto in 0usize..45,
            within in 0u32..1500,
            snd_nxt_idx in 0usize..45,
            rotate in 0usize..40,
        ) {
            let pool = Pool::new(PoolConfig { buffers: 128, ..PoolConfig::default() }).unwrap();
            let mut a = sender(&pool, &lens, snd_nxt_idx, 0);
            let mut b = sender(&pool, &lens, snd_nxt_idx, rotate);
            // An ACK at the end of segment `upto` (or past the last), or inside the next one.
            let ends: u32 = lens.iter().take(upto).map(|l| l.0).sum();
            let ack = a.snd_una + ends + within.min(lens.get(upto).map_or(0, |l| l.0 - 1));
            let before = pool.available();
            release_each(&mut a, ack);
            let freed_a = pool.available() - before;
            release_counted(&mut b, ack);
            let freed_b = pool.available() - before - freed_a;
            prop_assert_eq!(freed_a, freed_b);
            let left = |t: &Tcb| t.sndq.iter().map(|s| (s.seq, s.len(), s.sent)).collect::<Vec<_>>();
            prop_assert_eq!(left(&a), left(&b));
            prop_assert_eq!((a.snd_queued, a.snd_nxt_idx), (b.snd_queued, b.snd_nxt_idx));
            prop_assert_eq!(a.rxt_acked, b.rxt_acked);
        }
    }
}
