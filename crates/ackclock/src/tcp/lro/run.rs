//! Runs: the frames that follow an aggregate's last one in a batch, predicted from its
//! headers as they lie in the frame, and taken in one loop.
//!
//! In a bulk transfer a batch holds runs of one connection's frames back to back, and each
//! frame's link, IPv4 and TCP headers are the previous one's but for a handful of fields: the
//! IPv4 identification and header checksum, the sequence number (data) or the ACK number
//! (pure ACKs), the TCP checksum, TSval, and PSH. Jacobson's header prediction (1988; the
//! 1990 and 1993 receive paths) compares a segment's header with what the connection
//! expects; here the compare reaches down to the whole frame. When a frame merges into an
//! aggregate (or opens one) and at least two more frames wait in the batch, its first
//! `link + 20 + hl` bytes become the [`Run`]'s template, with the bytes that may change
//! masked off. [`Tcp::run_batch`] then takes the frames at the front of the batch while each
//! is as long as the template's frame and equal to it outside the mask, with the
//! connection, its receive queue and the aggregate in hand: per frame, no interface checks,
//! no lookup, no merge test, and header sums completed from the template's instead of
//! summed again.
//!
//! A match stands for every check that the interface's common-frame test, the connection
//! lookup and the aggregate's merge test made on the template's frame: the same MAC,
//! EtherType, version and header length, TOS/ECN byte, total length, flags and fragment
//! offset, TTL, protocol, addresses, ports, ACK number (data) or sequence number (ACKs),
//! data offset, flags but PSH, window, urgent pointer, option layout and TSecr. What the
//! changing fields or the connection's state decide is checked again, each as the ordinary
//! path checks it: the device's word on the checksums, the IPv4 header checksum unless
//! vouched for, header prediction's flags word, the sequence and ACK numbers against the
//! connection, PAWS and the aggregate's newest TSval, the receive window, and the TCP
//! checksum of a pure ACK. PSH merges and ends the aggregate, as on the ordinary path. A
//! frame that fails any check stays at the front of the batch for the ordinary path, which
//! decides it from scratch: a run only ever takes a frame the ordinary path would have
//! merged (or opened an aggregate with, below), and does to the aggregate what that path
//! does.
//!
//! A flush ends the run, with one exception: when a frame the run took fills its aggregate,
//! the next frame, if it continues the run, opens the next aggregate as the ordinary path
//! would open it, and the run goes on with the same template. A run also outlives frames of
//! other connections in between (they change neither its connection nor its aggregate; any
//! frame that does flushes it). Each frame a run takes is counted (`lro_run_frames`).

use super::{merge_ack, merge_data, Flow, Kind, Lro, Tcp, PSH};
use crate::buf::{FreeChain, PBuf};
use crate::iface::{checksum_state_of, ipv4_header_ok};
use crate::phy::Batch;
use crate::tcp::input::{flags_predicted, ts_older, SMALL_SEGMENT};
use crate::tcp::lro::Flush;
use crate::tcp::seq::SeqNumber;
use crate::tcp::tcb::{Tcb, Unverified};
use crate::tcp::Io;
use crate::time::Instant;
use crate::wire::checksum;

/// The longest template: an Ethernet header, an IPv4 header without options, and a TCP
/// header with the timestamp option (14 + 20 + 32 bytes), in 8-byte words.
const WORDS: usize = 9;

/// The masks of the templates: by link (Ethernet, none), TCP header (20 bytes, with
/// timestamps) and kind (data, ACKs).
static MASKS: [[[[u64; WORDS]; 2]; 2]; 2] = [
    [[mask(34, 20, 4), mask(34, 20, 8)], [mask(34, 32, 4), mask(34, 32, 8)]],
    [[mask(20, 20, 4), mask(20, 20, 8)], [mask(20, 32, 4), mask(20, 32, 8)]],
];

/// The mask of a template whose TCP header (`hl` bytes) starts at `off`, and whose moving
/// word is at `moving` in it: all ones but for the bytes that may differ from frame to
/// frame (the IPv4 identification and checksum, the moving word, the TCP checksum, TSval,
/// and PSH, which merges and ends the aggregate), as the words [`Run::same`] loads.
const fn mask(off: usize, hl: usize, moving: usize) -> [u64; WORDS] {
    let mut m = [0xffu8; WORDS * 8];
    let ip = off - 20;
    let vary = [(ip + 4, 2), (ip + 10, 2), (off + moving, 4), (off + 16, 2), (off + 24, if hl == 32 { 4 } else { 0 })];
    let mut v = 0;
    while v < vary.len() {
        let (at, n) = vary[v];
        let mut k = 0;
        while k < n {
            m[at + k] = 0;
            k += 1;
        }
        v += 1;
    }
    m[off + 13] = !PSH;
    let mut w = [0; WORDS];
    let mut i = 0;
    while i < WORDS {
        let at = if 8 * i + 8 <= off + hl { 8 * i } else { off + hl - 8 };
        w[i] = u64::from_ne_bytes([m[at], m[at + 1], m[at + 2], m[at + 3], m[at + 4], m[at + 5], m[at + 6], m[at + 7]]);
        i += 1;
    }
    w
}

/// The template of a run, and what it belongs to (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    /// A template is set.
    live: bool,
    /// The aggregate's slot and connection.
    s: u8,
    idx: u32,
    /// Where the TCP header starts (after the link header and IPv4's 20 bytes), and its
    /// length.
    off: u8,
    hl: u8,
    /// The template frame's whole length, and where its TCP segment ends (the IPv4 total
    /// length, which every frame of the run has).
    frame_len: u32,
    seg_end: u32,
    /// The template frame's transport checksum was vouched for by the device.
    checksum_ok: bool,
    /// Where the TCP word that changes from frame to frame starts: the sequence number
    /// (data) or the ACK number (pure ACKs).
    moving: u8,
    /// The parts of the header sums that do not change, as loaded and unfolded (RFC 1071
    /// §2(B)): the IPv4 header's words without its identification and checksum, and the
    /// TCP header's without the moving word, the offset/flags/window word, the checksum
    /// and TSval, with the pseudo-header sum and the segment length (`input::header_sum`'s
    /// terms).
    ip_sum: u64,
    tcp_sum: u64,
    /// The template's header words, masked, at offsets `min(8 i, off + hl - 8)`.
    tmpl: [u64; WORDS],
    /// Which bytes must equal the template's, as words at the same offsets ([`MASKS`]).
    mask: &'static [u64; WORDS],
}

impl Run {
    pub(crate) const NONE: Run = Run {
        live: false,
        s: 0,
        idx: 0,
        off: 0,
        hl: 0,
        frame_len: 0,
        seg_end: 0,
        checksum_ok: false,
        moving: 0,
        ip_sum: 0,
        tcp_sum: 0,
        tmpl: [0; WORDS],
        mask: &MASKS[0][0][0],
    };

    #[inline(always)]
    pub(crate) fn live(&self) -> bool {
        self.live
    }

    /// The aggregate in slot `s` was flushed: a run of it ends.
    #[inline(always)]
    pub(super) fn end(&mut self, s: usize) {
        if self.s as usize == s {
            self.live = false;
        }
    }

    /// The frame `data`, whose TCP header (`hl` bytes) starts at `off`, merged into or opened
    /// the aggregate `f` in slot `s` of a connection whose pseudo-header sum is `ph_sum`: the
    /// frames after it in the batch are compared with it, if enough follow for the template
    /// to pay (`followed`: two or more; one is cheaper on the ordinary path). Only untagged
    /// Ethernet and bare IPv4 frames make a template.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn begin(
        &mut self,
        followed: bool,
        s: usize,
        f: &Flow,
        ph_sum: u16,
        data: &[u8],
        off: usize,
        hl: usize,
    ) {
        self.live = false;
        if !followed {
            return;
        }
        let kind = match f.kind {
            Kind::Data => 0,
            Kind::Ack => 1,
        };
        let ok = match (off, hl) {
            (34, 32) => self.fill::<34, 32, 66>(data, kind),
            (34, 20) => self.fill::<34, 20, 54>(data, kind),
            (20, 32) => self.fill::<20, 32, 52>(data, kind),
            (20, 20) => self.fill::<20, 20, 40>(data, kind),
            _ => false,
        };
        if ok {
            self.tcp_sum += ph_sum.to_be() as u64;
            self.live = true;
            self.s = s as u8;
            self.idx = f.idx;
            self.checksum_ok = f.checksum_ok;
        }
    }

    /// [`begin`](Self::begin) for a TCP header of `HL` bytes at `OFF` (`H = OFF + HL`), of
    /// `kind` (0 data, 1 ACKs): the template and the sums of the words that do not change
    /// (their changing bytes left out). Whether the frame can make a template.
    #[inline(always)]
    fn fill<const OFF: usize, const HL: usize, const H: usize>(&mut self, data: &[u8], kind: usize) -> bool {
        let Some(h) = data.first_chunk::<H>() else { return false };
        let w = |at: usize| h[at..].first_chunk::<4>().map_or(0, |b| u32::from_ne_bytes(*b)) as u64;
        let ip = OFF - 20;
        let seg_end = ip + u16::from_be_bytes([h[ip + 2], h[ip + 3]]) as usize;
        if H > seg_end || seg_end > data.len() {
            return false;
        }
        self.mask = &MASKS[(OFF == 20) as usize][(HL == 32) as usize][kind];
        for i in 0..H.div_ceil(8) {
            let at = (8 * i).min(H - 8);
            self.tmpl[i] = h[at..].first_chunk::<8>().map_or(0, |b| u64::from_ne_bytes(*b)) & self.mask[i];
        }
        self.ip_sum = w(ip) + (w(ip + 4) & LAST_TWO as u64) + (w(ip + 8) & FIRST_TWO as u64) + w(ip + 12) + w(ip + 16);
        // Left out: the moving word and the offset/flags/window word (PSH), the checksum
        // (the urgent pointer stays), TSval.
        let mut kept = (w(OFF + 16) & LAST_TWO as u64) + w(OFF + 4 + 4 * (1 - kind));
        for i in [0, 5, 7] {
            if 4 * i < HL {
                kept += w(OFF + 4 * i);
            }
        }
        let len = (seg_end - OFF) as u16;
        self.tcp_sum = len.to_be() as u64 + kept;
        self.moving = (4 + 4 * kind) as u8;
        self.off = OFF as u8;
        self.hl = HL as u8;
        self.frame_len = data.len() as u32;
        self.seg_end = seg_end as u32;
        true
    }

    /// `input::header_sum` of `seg`, a frame of the run: the sum kept for the words that do
    /// not change, plus the moving word, the offset/flags/window word, the checksum and
    /// TSval.
    #[inline(always)]
    fn header_sum<const HL: usize>(&self, tcp: &[u8; HL]) -> u16 {
        let ts = if HL == 32 { ne32(tcp, 24) } else { 0 };
        let moved = ne32(tcp, self.moving as usize) as u64
            + ne32(tcp, 12) as u64
            + (ne32(tcp, 16) & FIRST_TWO) as u64
            + ts as u64;
        u16::from_be(checksum::fold(self.tcp_sum + moved))
    }

    /// `input::header_sum` of `frame` from scratch, for a connection whose pseudo-header sum
    /// is `ph_sum` (the debug builds' check of [`header_sum`](Self::header_sum)).
    fn header_sum_of(&self, frame: &PBuf, ph_sum: u16) -> u16 {
        let seg = &frame.data()[self.off as usize..self.seg_end as usize];
        crate::tcp::input::header_sum(ph_sum, seg, self.hl as usize)
    }

    /// Whether the headers `h` equal the template's outside the mask.
    #[inline(always)]
    fn same<const H: usize>(&self, h: &[u8; H]) -> bool {
        let mut diff = 0;
        for i in 0..H.div_ceil(8) {
            let at = (8 * i).min(H - 8);
            let w = h[at..].first_chunk::<8>().map_or(0, |b| u64::from_ne_bytes(*b));
            diff |= (w ^ self.tmpl[i]) & self.mask[i];
        }
        diff == 0
    }
}

/// A big-endian 32-bit field of `h` at `at`.
#[inline(always)]
fn be32(h: &[u8], at: usize) -> u32 {
    u32::from_be(ne32(h, at))
}

/// Four bytes of `h` at `at`, as loaded (0 past the end: the callers check the length).
#[inline(always)]
fn ne32(h: &[u8], at: usize) -> u32 {
    h.get(at..at + 4).and_then(|b| b.first_chunk::<4>()).map_or(0, |b| u32::from_ne_bytes(*b))
}

/// The low two bytes in memory of a 4-byte load, and the high two.
const FIRST_TWO: u32 = u32::from_ne_bytes([0xff, 0xff, 0, 0]);
const LAST_TWO: u32 = u32::from_ne_bytes([0, 0, 0xff, 0xff]);

/// A frame a run may take, as far as the template and the connection's header prediction
/// go: its TCP segment, the device's word on its checksum, TSval and the ACK number.
struct Taken<'a, const HL: usize> {
    /// Its TCP header.
    tcp: &'a [u8; HL],
    checksum_ok: bool,
    tsval: Option<u32>,
    ack: SeqNumber,
}

impl Run {
    /// Whether `frame` continues the run as far as its template and the connection `tcb`'s
    /// header prediction (`predict`) go: the device's word on the checksums as the
    /// template's, the headers equal outside the mask, the IPv4 header checksum (unless
    /// vouched for, from the words that changed: the identification and the checksum
    /// itself), the offset/flags/window word, the next sequence number, PAWS.
    ///
    /// One instance per shape (the TCP header, `HL` bytes, at `OFF`; `H = OFF + HL`), so
    /// that every load is at a constant offset.
    #[inline(always)]
    fn take<'a, const OFF: usize, const HL: usize, const H: usize>(
        &self,
        frame: &'a PBuf,
        rx_checksum: bool,
        tcb: &Tcb,
    ) -> Option<Taken<'a, HL>> {
        let data = frame.data();
        let (verified, checksum_ok) = checksum_state_of(rx_checksum, frame);
        let h = data.first_chunk::<H>()?;
        if checksum_ok != self.checksum_ok || data.len() != self.frame_len as usize || !self.same(h) {
            return None;
        }
        if !verified {
            let moved = (ne32(h, OFF - 16) & FIRST_TWO) as u64 + (ne32(h, OFF - 12) & LAST_TWO) as u64;
            let ok = checksum::fold(self.ip_sum + moved) == 0xffff;
            debug_assert_eq!(ok, h[OFF - 20..].first_chunk::<20>().is_some_and(ipv4_header_ok));
            if !ok {
                return None;
            }
        }
        let tcp = h[OFF..].first_chunk::<HL>()?;
        if !flags_predicted(tcb, tcp) || SeqNumber(be32(tcp, 4)) != tcb.rcv_nxt {
            return None;
        }
        let tsval = (HL == 32).then(|| be32(tcp, 24));
        if tsval.is_some_and(|v| ts_older(v, tcb.ts_recent)) {
            return None;
        }
        Some(Taken { tcp, checksum_ok, tsval, ack: SeqNumber(be32(tcp, 8)) })
    }

    /// `predict`'s checks of in-order data against the connection, for a frame `t` of the
    /// run: nothing unverified queued ahead of a verified segment, the ACK number, the
    /// receive window, and no short segment with its checksum deferred. Returns its
    /// payload length.
    #[inline(always)]
    fn data_fits<const HL: usize>(&self, t: &Taken<HL>, tcb: &Tcb) -> Option<u32> {
        // Every frame of the run has the template's IPv4 total length.
        let len = self.seg_end - self.off as u32 - HL as u32;
        let ok = !(t.checksum_ok && tcb.rcv_unverified != 0)
            && t.ack == tcb.snd_una
            && tcb.fits_window(tcb.rcv_nxt, len)
            && (t.checksum_ok || len as usize >= SMALL_SEGMENT);
        ok.then_some(len)
    }

    /// `predict`'s checks of a pure ACK: it acknowledges new data that was sent, and its
    /// checksum is good.
    #[inline(always)]
    fn ack_fits<const HL: usize>(&self, t: &Taken<HL>, tcb: &Tcb) -> bool {
        tcb.snd_una < t.ack && t.ack <= tcb.snd_max && (t.checksum_ok || self.header_sum(t.tcp) == 0xffff)
    }
}

impl Tcp {
    /// Take the frames at the front of `batch` that continue the live run (see the module
    /// documentation): data into the connection's receive queue, pure ACKs merged and their
    /// frames into `done`. When the aggregate is full (flushed), the run goes on with a new
    /// one if the next frame would open it on the ordinary path. Stops at the first frame
    /// that does not continue the run, which stays in the batch. `rx_checksum`: the device
    /// verifies every frame's checksums.
    #[inline(never)]
    pub(crate) fn run_batch(
        &mut self,
        lro: &mut Lro,
        now: Instant,
        batch: &mut Batch,
        rx_checksum: bool,
        done: &mut FreeChain,
        io: Io<'_>,
    ) {
        // One instance of the loop per shape of the headers (`Run::take`).
        match (lro.run.off, lro.run.hl) {
            (34, 32) => self.run_shaped::<34, 32, 66>(lro, now, batch, rx_checksum, done, io),
            (34, 20) => self.run_shaped::<34, 20, 54>(lro, now, batch, rx_checksum, done, io),
            (20, 32) => self.run_shaped::<20, 32, 52>(lro, now, batch, rx_checksum, done, io),
            (20, 20) => self.run_shaped::<20, 20, 40>(lro, now, batch, rx_checksum, done, io),
            _ => {}
        }
    }

    /// [`run_batch`](Self::run_batch) for a TCP header of `HL` bytes at `OFF` (`H = OFF + HL`).
    #[inline(always)]
    fn run_shaped<const OFF: usize, const HL: usize, const H: usize>(
        &mut self,
        lro: &mut Lro,
        now: Instant,
        batch: &mut Batch,
        rx_checksum: bool,
        done: &mut FreeChain,
        mut io: Io<'_>,
    ) {
        let r = lro.run;
        let mut s = r.s as usize;
        loop {
            let Some(why) = self.run_merge::<OFF, HL, H>(&r, lro, s, batch, rx_checksum, done) else { return };
            let tos = lro.flows[s].tos;
            self.lro_flush(lro, s, why, now, io.re());
            if why != Flush::Full {
                return;
            }
            match self.run_open::<OFF, HL, H>(&r, lro, now, batch, rx_checksum, done, tos) {
                Some(next) => {
                    s = next;
                    lro.run = Run { s: s as u8, ..r };
                }
                None => return,
            }
        }
    }

    /// [`run_batch`](Self::run_batch)'s merges into the aggregate in slot `s`: the flush
    /// they end with, if any (`None`: a frame that does not continue the run, or the end
    /// of the batch).
    #[inline(always)]
    fn run_merge<const OFF: usize, const HL: usize, const H: usize>(
        &mut self,
        r: &Run,
        lro: &mut Lro,
        s: usize,
        batch: &mut Batch,
        rx_checksum: bool,
        done: &mut FreeChain,
    ) -> Option<Flush> {
        let tcb = self.slots.get_mut(r.idx as usize).and_then(|s| s.tcb.as_deref_mut())?;
        let f = &mut lro.flows[s];
        let mut why = None;
        while let Some(frame) = batch.front() {
            // The aggregate's TSval may not go back (`merge`).
            let Some(t) =
                r.take::<OFF, HL, H>(frame, rx_checksum, tcb).filter(|t| t.tsval.is_none_or(|v| !ts_older(v, f.tsval)))
            else {
                break;
            };
            match f.kind {
                Kind::Data => {
                    let Some(len) = r.data_fits(&t, tcb) else { break };
                    let seq = tcb.rcv_nxt;
                    debug_assert_eq!(r.header_sum(t.tcp), r.header_sum_of(frame, tcb.ph_sum));
                    let unverified =
                        (!t.checksum_ok).then(|| Unverified { header_sum: r.header_sum(t.tcp), tsval: t.tsval });
                    why = merge_data(f, tcb, len, unverified.is_some(), t.tsval, t.tcp[13] & PSH != 0);
                    if let Some(frame) = batch.pop() {
                        tcb.rcvq.push_frame(seq, frame, H as u32, len, unverified);
                    }
                }
                Kind::Ack => {
                    debug_assert_eq!(r.header_sum(t.tcp), r.header_sum_of(frame, tcb.ph_sum));
                    // (A bad checksum: the ordinary path counts the drop.)
                    if !(f.ack < t.ack && r.ack_fits(&t, tcb)) {
                        break;
                    }
                    why = merge_ack(f, t.ack, t.tsval.map(|v| (v, be32(t.tcp, 28)))).then_some(Flush::Full);
                    if let Some(frame) = batch.pop() {
                        done.put(frame);
                    }
                }
            }
            self.counters.frames_in += 1;
            self.counters.lro_run_frames += 1;
            if why.is_some() {
                break;
            }
        }
        why
    }

    /// After a full aggregate, the next frame of the run opens a new one in the first free
    /// slot, as `fast_batch` opens it (a candidate: no PSH, the kind switched on), and
    /// returns that slot; `None` if the frame does not continue the run.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn run_open<const OFF: usize, const HL: usize, const H: usize>(
        &mut self,
        r: &Run,
        lro: &mut Lro,
        now: Instant,
        batch: &mut Batch,
        rx_checksum: bool,
        done: &mut FreeChain,
        tos: u8,
    ) -> Option<usize> {
        let tcb = self.slots.get_mut(r.idx as usize).and_then(|s| s.tcb.as_deref_mut())?;
        let t = r.take::<OFF, HL, H>(batch.front()?, rx_checksum, tcb)?;
        let kind = match lro.flows[r.s as usize].kind {
            Kind::Data if lro.on.data && t.tcp[13] & PSH == 0 => Kind::Data,
            Kind::Ack if lro.on.acks && r.ack_fits(&t, tcb) => Kind::Ack,
            _ => return None,
        };
        let len = match kind {
            Kind::Data => r.data_fits(&t, tcb)?,
            Kind::Ack => 0,
        };
        let s = lro.free_slot()?;
        let f = lro.open(s, r.idx, kind, t.checksum_ok, tos);
        self.counters.segs_in += 1;
        tcb.stats.segs_in += 1;
        let (ts, ack) = (t.tsval.map(|v| (v, be32(t.tcp, 28))), t.ack);
        let unverified = (kind == Kind::Data && !t.checksum_ok)
            .then(|| Unverified { header_sum: r.header_sum(t.tcp), tsval: t.tsval });
        let frame = batch.pop()?;
        let seq = tcb.rcv_nxt;
        match kind {
            Kind::Data => {
                f.open_data(now, tcb, seq, len, ts, unverified.is_some());
                tcb.rcvq.push_frame(seq, frame, H as u32, len, unverified);
            }
            Kind::Ack => {
                f.open_ack(seq, ack, ts);
                done.put(frame);
            }
        }
        self.counters.frames_in += 1;
        self.counters.lro_run_frames += 1;
        Some(s)
    }
}
