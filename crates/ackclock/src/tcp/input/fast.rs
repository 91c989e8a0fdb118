//! Header prediction and its two fast cases (Jacobson 1993, BSD's `tcp_input`): one masked
//! compare decides that a segment is the expected in-order data or pure ACK of an
//! established connection, and those two cases do almost nothing else.

use super::*;
use crate::tcp::env::Env;
use crate::tcp::seq::SeqNumber;
use crate::tcp::tcb::{State, Tcb, Unverified};
use crate::tcp::trace;
use crate::time::{Duration, Instant};
use crate::wire::{checksum, TcpFlags};

/// Header prediction mask (Jacobson 1993): data offset, the SYN/FIN/RST/URG/ACK/ECE/CWR bits
/// (PSH may vary), and the window field. ECE and CWR are in it as in Linux's `pred_flags`
/// (`TCP_HP_BITS`): a segment carrying either is not the common case, and receive
/// aggregation, whose merge test this is, must not merge it (Linux `tcp_gro_receive`
/// flushes on CWR and on any flag that differs).
const FMASK: u32 = 0xf000_0000 | ((0x01 | 0x02 | 0x04 | 0x20 | 0x10 | 0x40 | 0x80) << 16) | 0xffff;

/// The word the fast path expects at bytes 12..16 of a segment (data offset, ACK alone, the
/// peer's window unchanged), as the TCB keeps it: in wire byte order, so that the fast path
/// compares the segment's word as it loads it. [`NO_PREDICTION`] when no segment can be
/// predicted: not ESTABLISHED, recovering, something out of order, no longer reading, or a
/// window the field cannot express exactly. Recomputed whenever any of that changes.
pub(crate) fn pred_word(tcb: &Tcb) -> u32 {
    let raw_wnd = tcb.snd_wnd >> tcb.snd_wscale;
    if tcb.state != State::Established
        || tcb.recovery.is_some()
        || tcb.dupacks != 0
        || !tcb.ooo.is_empty()
        || tcb.rcv_fin.is_some()
        || tcb.shut_rd
        || raw_wnd > 0xffff
        || raw_wnd << tcb.snd_wscale != tcb.snd_wnd
    {
        return NO_PREDICTION;
    }
    let words = if tcb.ts_enabled { 8 } else { 5 };
    wire((words << 28) | ((TcpFlags::ACK.bits() as u32) << 16) | raw_wnd)
}

/// No masked word equals it: `FMASK` leaves the reserved bits clear.
pub(crate) const NO_PREDICTION: u32 = u32::MAX;

/// A 32-bit value as it sits in memory in wire (big-endian) order, read natively.
const fn wire(x: u32) -> u32 {
    u32::from_ne_bytes(x.to_be_bytes())
}

/// What header prediction found in a segment (the `tcp_usrrecv` fast path of Jacobson 1993, BSD's
/// `tcp_input` header prediction).
pub(crate) enum Predicted {
    /// Case (a): in-order data with `ack == snd_una`, fitting the window; the payload starts
    /// `hl` bytes into the segment. `unverified` when its checksum is deferred to the copy.
    Data { seq: SeqNumber, hl: usize, len: u32, unverified: Option<Unverified>, tsval: Option<u32> },
    /// Case (b): a pure ACK of new data, window unchanged.
    Ack { seq: SeqNumber, ack: SeqNumber, ts: Option<(u32, u32)> },
    /// Predicted, but the checksum is bad: drop and count it.
    BadChecksum,
}

/// Header prediction's first test on the segment `seg`: its offset/flags/window word, as
/// loaded and masked, against `tcb.pred_flags` (kept in wire order, so no byte swap; and
/// `NO_PREDICTION` when prediction is off, which no masked word equals).
#[inline(always)]
pub(crate) fn flags_predicted(tcb: &Tcb, seg: &[u8]) -> bool {
    seg.get(12..16)
        .and_then(|b| b.first_chunk::<4>())
        .is_some_and(|w| u32::from_ne_bytes(*w) & wire(FMASK) == tcb.pred_flags)
}

/// Header prediction: one masked compare of the offset/flags/window word against
/// `tcb.pred_flags`, `seq == rcv_nxt`, and with timestamps the NOP NOP TS layout and PAWS.
/// `seg` is the TCP segment (header and payload); `checksum_ok` when the device verified it.
/// `None` sends the segment to the full path, which decides everything again.
#[inline(always)]
pub(crate) fn predict(tcb: &Tcb, seg: &[u8], checksum_ok: bool) -> Option<Predicted> {
    let h = seg.first_chunk::<20>()?;
    let ne = |i: usize| u32::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    if !flags_predicted(tcb, h) {
        return None;
    }
    let seq = SeqNumber(u32::from_be(ne(4)));
    if seq != tcb.rcv_nxt || (checksum_ok && tcb.rcv_unverified != 0) {
        // Not next; or verified behind deferred data, which the full path checks first.
        return None;
    }
    let ack = SeqNumber(u32::from_be(ne(8)));
    // The data offset is part of the prediction: 8 words with timestamps, else 5.
    let (hl, ts) = if tcb.ts_enabled {
        let t = seg.first_chunk::<32>()?;
        let ne = |i: usize| u32::from_ne_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
        let tsval = u32::from_be(ne(24));
        if ne(20) != wire(crate::wire::tcp::TS_ONLY_PREFIX) || ts_older(tsval, tcb.ts_recent) {
            return None; // other options, or PAWS says old: full path
        }
        (32, Some((tsval, u32::from_be(ne(28)))))
    } else {
        (20, None)
    };
    let len = seg.len() - hl;
    let header_sum = || header_sum(tcb.ph_sum, seg, hl);
    if len == 0 {
        // (b) A pure ACK for new data.
        if !(tcb.snd_una < ack && ack <= tcb.snd_max) {
            return None;
        }
        if !checksum_ok && header_sum() != 0xffff {
            return Some(Predicted::BadChecksum);
        }
        return Some(Predicted::Ack { seq, ack, ts });
    }
    // (a) Pure in-order data that fits the window. Small segments are verified at once, by
    // the full path, except right behind a large deferred segment (`size_deferrable`).
    if ack != tcb.snd_una || !tcb.fits_window(seq, len as u32) || (!checksum_ok && !size_deferrable(tcb, len)) {
        return None;
    }
    let tsval = ts.map(|t| t.0);
    let unverified = (!checksum_ok).then(|| Unverified { header_sum: header_sum(), tsval });
    Some(Predicted::Data { seq, hl, len: len as u32, unverified, tsval })
}

/// The precomputed pseudo-header sum of Jacobson 1993 (`ph_sum`) plus the `hl` (20 or 32) header
/// bytes of `seg` and its length, the header's words summed as loaded (RFC 1071 §2(B): byte
/// order does not change a ones'-complement sum). Out of line: with the device's checksum,
/// the fast path never needs it.
#[inline(never)]
pub(crate) fn header_sum(ph_sum: u16, seg: &[u8], hl: usize) -> u16 {
    // Eight bytes at a time, each addition's carry added back (RFC 1071 §2(C): any word size
    // with end-around carry gives the same folded sum).
    let q =
        |b: &[u8], i: usize| b.get(i..i + 8).and_then(|w| w.first_chunk::<8>()).map_or(0, |w| u64::from_ne_bytes(*w));
    let d =
        |b: &[u8], i: usize| b.get(i..i + 4).and_then(|w| w.first_chunk::<4>()).map_or(0, |w| u32::from_ne_bytes(*w));
    let add = |a: u64, b: u64| {
        let (s, c) = a.overflowing_add(b);
        s + c as u64
    };
    // The pseudo-header sum and the length join the header's words in the order the words
    // were loaded (byte-swapped on a little-endian machine), so that one fold ends it.
    let mut words = ph_sum.to_be() as u64 + (seg.len() as u16).to_be() as u64;
    if let Some(h) = seg.first_chunk::<20>() {
        // Below 2^34 before the first wide addition: no carry is lost.
        words = add(add(words + d(h, 16) as u64, q(h, 0)), q(h, 8));
    }
    if let (32, Some(t)) = (hl, seg.first_chunk::<32>()) {
        words = add(add(words, q(t, 20)), d(t, 28) as u64);
    }
    u16::from_be(checksum::fold(words))
}

/// Case (b), a predicted pure ACK: release, sample, grow, wake the writer. Returns whether
/// the timer wheel must file the connection again.
#[inline]
pub(crate) fn fast_ack(env: &mut Env, tcb: &mut Tcb, seq: SeqNumber, ack: SeqNumber, ts: Option<(u32, u32)>) -> bool {
    if let Some((tsval, _)) = ts {
        if seq <= tcb.last_ack_sent {
            tcb.ts_recent = tsval;
            tcb.ts_recent_age = env.now;
        }
    }
    let old_rexmt = tcb.timers.rexmt.get();
    // Prediction is off during recovery and while duplicate ACKs count (`pred_word`), so the
    // predicted ACK goes straight to window growth, without recovery's branch.
    debug_assert!(tcb.recovery.is_none() && tcb.dupacks == 0);
    let (data_acked, sample) = ack_release(env, tcb, ack, ts);
    ack_grow(env, tcb, ack, data_acked, sample);
    ack_timer(env, tcb);
    tcb.snd_wl1 = seq;
    tcb.snd_wl2 = ack;
    if env.trace.on() {
        let ack = trace::rel(tcb, ack);
        env.trace.event(env.now, tcb, trace::Event::Ack { ack, sack: [(0, 0); 4], sack_len: 0 });
        env.trace.sample(env.now, tcb);
    }
    tcb.last_rcv = env.now;
    env.counters.fast_path_acks += 1;
    // Only the retransmission timer changed. The wheel is lazy (`Tcp::rearm`): a timer
    // moved later needs no filing, one moved earlier, started or stopped does.
    match (old_rexmt, tcb.timers.rexmt.get()) {
        (Some(old), Some(new)) => new < old,
        (old, new) => old != new,
    }
}

/// What the fast path did with a segment it looked at (by reference).
pub(crate) enum Fast {
    /// Not predicted: the full path decides.
    Slow,
    /// Handled; the frame is not needed (a pure ACK, a tiny segment copied into the tail
    /// of the receive queue, or a bad checksum, counted).
    Done,
    /// In-order data, accounted for: the frame goes into the receive queue.
    Queue(Queue),
}

/// Where a predicted data segment's frame goes: connection `idx`'s receive queue, as the
/// entry for `seq`, with its view cut to the `len` payload bytes at `off`.
#[derive(Clone, Copy)]
pub(crate) struct Queue {
    pub idx: u32,
    pub seq: SeqNumber,
    pub off: u32,
    pub len: u32,
    pub unverified: Option<Unverified>,
}

/// What case (a) did with predicted data.
pub(crate) struct DataDone {
    /// The frame must still be queued (false when its bytes were copied into the queue's
    /// tail).
    pub queue: bool,
    /// The delayed-ACK timer started or stopped: the wheel must file the connection again.
    pub timer_changed: bool,
}

/// Case (a), predicted in-order data (`payload`): the delayed-ACK rule and the receive
/// state, as if the frame were already queued.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn fast_data(
    now: Instant,
    delayed_ack: Duration,
    counters: &mut crate::stats::Counters,
    tcb: &mut Tcb,
    seq: SeqNumber,
    payload: &[u8],
    unverified: Option<Unverified>,
    tsval: Option<u32>,
) -> DataDone {
    let had_delack = tcb.timers.delack.is_some();
    let merged = try_merge(tcb, payload, unverified.is_some());
    // No out-of-order data: prediction requires an empty out-of-order queue.
    let checksum = if unverified.is_some() { Checksum::Deferred } else { Checksum::Verified };
    in_order_received(now, delayed_ack, tcb, seq, payload.len() as u32, checksum, tsval, Arrival::Next);
    tcb.last_rcv = now;
    counters.fast_path_data += 1;
    DataDone { queue: !merged, timer_changed: had_delack != tcb.timers.delack.is_some() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The header sum with the pseudo-header and length folded in once equals the header
        /// words' sum with each added after the fold, zero's two forms included (the ACK
        /// test compares with 0xffff, and a deferred payload completes the sum later).
        #[test]
        fn header_sum_equals_the_sum_of_its_parts(
            seg in prop::collection::vec(any::<u8>(), 0..80),
            ph_sum in any::<u16>(),
            ts in any::<bool>(),
        ) {
            let hl = if ts { 32 } else { 20 };
            let ne = |i: usize| u32::from_ne_bytes([seg[i], seg[i + 1], seg[i + 2], seg[i + 3]]) as u64;
            let mut words = 0;
            if seg.len() >= 20 {
                words += (0..20).step_by(4).map(ne).sum::<u64>();
            }
            if hl == 32 && seg.len() >= 32 {
                words += (20..32).step_by(4).map(ne).sum::<u64>();
            }
            let parts = checksum::add(checksum::add(u16::from_be(checksum::fold(words)), ph_sum), seg.len() as u16);
            prop_assert_eq!(header_sum(ph_sum, &seg, hl), parts);
        }
    }
}
