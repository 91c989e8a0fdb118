//! Loss recovery at the sender: fast retransmit and fast recovery.
//!
//! Without SACK: NewReno (RFC 5681 §3.2, RFC 6582) with the window inflation of Jacobson 1990 —
//! on the third duplicate ACK, ssthresh = max(FlightSize/2, 2 SMSS) and cwnd = ssthresh +
//! 3 SMSS; each further duplicate ACK adds one SMSS (a packet has left the network); a
//! partial ACK retransmits the next hole and deflates by the amount acknowledged (adding
//! back one SMSS); the ACK of the recovery point deflates cwnd to ssthresh.
//!
//! With SACK: RFC 6675. The scoreboard is the `sacked` flag of each send-queue segment, so
//! it can never hold more than the data in flight, whatever a receiver sends. `pipe`
//! estimates the bytes in the network; while `cwnd - pipe >= 1 SMSS`, NextSeg picks a lost
//! segment to retransmit, new data, or a rescue retransmission.

use super::env::Env;
use super::input::Segment;
use super::seq::SeqNumber;
use super::tcb::Tcb;
use crate::stats::Counters;
use crate::time::Duration;

/// RFC 5681's duplicate-ACK threshold (DupThresh of RFC 6675): where every connection's
/// `Tcb::reordering` starts, and where a timeout that shows it too high puts it back.
pub(crate) const DUP_THRESH: u16 = 3;

/// The highest `Tcb::reordering` an undo can set (Linux's `tcp_max_reordering`).
pub(crate) const MAX_REORDERING: u16 = 300;

/// State of one fast-recovery episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recovery {
    /// RecoveryPoint (RFC 6675) / `recover` (RFC 6582): snd_max at entry.
    pub point: SeqNumber,
    /// SACK-based (RFC 6675) or NewReno.
    pub sack: bool,
    /// HighRxt, exclusive: the end of the highest segment retransmitted in this episode.
    pub high_rxt: SeqNumber,
    /// RescueRxt: the rescue retransmission (NextSeg rule 4) is spent until HighACK passes
    /// it.
    pub rescue_rxt: SeqNumber,
}

/// What it takes to undo a loss response that proves unnecessary: Linux's `undo_marker`,
/// `undo_retrans` and `retrans_stamp`. Made when a recovery episode begins, it outlives the
/// episode for the D-SACKs that come after its end, until the next episode or a timeout.
///
/// Reordering is the usual cause: a segment held back by a few others draws three duplicate
/// ACKs, is retransmitted, and then arrives. Without an undo the window stays halved for a
/// loss that did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Undo {
    /// snd_una when the episode began: its retransmissions all lie above.
    pub marker: SeqNumber,
    /// Segments retransmitted in the episode, with those of an earlier episode still
    /// unacknowledged when it began (Linux `tcp_init_undo`: `undo_retrans = retrans_out`).
    pub sent: u32,
    /// Of those, the ones no D-SACK has shown to be unnecessary yet.
    pub unproven: u32,
    /// The first retransmission of the episode: where it began and ended, and the TSval it
    /// carried.
    pub first: Option<(SeqNumber, SeqNumber, u32)>,
    /// The Eifel verdict on the first retransmission (RFC 3522 §3.2), given by the first ACK
    /// that acknowledges all of it: whether that ACK echoed a timestamp older than the
    /// retransmission's, so that the original, not the retransmission, reached the receiver.
    pub eifel: Option<bool>,
    /// The highest SACKed sequence number seen while the episode ran (the "forward-most"
    /// data known to have arrived): how far the segments overtook the one thought lost.
    /// Frozen at the episode's end, as Linux measures the depth when the hole fills.
    pub fack: SeqNumber,
}

/// The segment `[seq, end)` was retransmitted with TSval `tsval`; the caller has checked
/// that a recovery is under way.
#[inline]
pub(crate) fn note_retransmit(tcb: &mut Tcb, seq: SeqNumber, end: SeqNumber, tsval: u32) {
    if let Some(u) = tcb.undo.as_mut() {
        u.sent += 1;
        u.unproven += 1;
        u.first.get_or_insert((seq, end, tsval));
    }
}

/// RFC 3522 §3.2: the first ACK to acknowledge the first retransmission tells, by the
/// timestamp it echoes, which of the two copies reached the receiver first. RFC 7323 §4.3's
/// receiver echoes the segment that filled the hole: the original carries an older TSval.
pub(crate) fn eifel_check(tcb: &mut Tcb, ack: SeqNumber, ts: Option<(u32, u32)>) {
    let ts_enabled = tcb.ts_enabled;
    let Some(u) = tcb.undo.as_mut() else { return };
    if let (None, Some((_, end, tsval))) = (u.eifel, u.first) {
        if ack >= end {
            u.eifel = Some(match ts {
                Some((_, ecr)) if ts_enabled && ecr != 0 => (ecr.wrapping_sub(tsval) as i32) < 0,
                _ => false,
            });
        }
    }
}

/// A D-SACK showed that the retransmission of `[l, r)` was unnecessary (RFC 2883 §4, RFC
/// 3708): count it against the episode, and undo once every retransmission is accounted
/// for, if the episode is over (during one, its end decides).
pub(crate) fn on_dsack(env: &mut Env, tcb: &mut Tcb, l: SeqNumber, r: SeqNumber) {
    let smss = (tcb.eff_mss as u32).max(1);
    let Some(u) = tcb.undo.as_mut() else { return };
    if l < u.marker {
        return;
    }
    u.unproven = u.unproven.saturating_sub(r.since(l).div_ceil(smss));
    if tcb.recovery.is_none() {
        try_undo(env, tcb);
    }
}

/// Undo the episode's loss response if it is shown unnecessary (Linux `tcp_may_undo`):
/// D-SACKs for every segment it retransmitted, or a single retransmission that Eifel found
/// was not needed (with more than one, the others may have repaired real losses).
pub(crate) fn try_undo(env: &mut Env, tcb: &mut Tcb) {
    let Some(u) = tcb.undo else { return };
    if u.sent > 0 && (u.unproven == 0 || (u.eifel == Some(true) && u.sent == 1)) {
        tcb.undo = None;
        // The segments that overtook the first retransmitted one would have been needed as
        // duplicate ACKs to leave it alone: the duplicate-ACK threshold rises to match
        // (Linux `tcp_check_sack_reordering`; RFC 4653 adapts it likewise). A timeout with
        // losses it waited for puts it back to 3 (`abandon`).
        if let Some((seq, _, _)) = u.first.filter(|&(seq, _, _)| u.fack > seq) {
            let smss = (tcb.eff_mss as u32).max(1);
            let degree = u.fack.since(seq).div_ceil(smss).min(MAX_REORDERING as u32) as u16;
            tcb.reordering = tcb.reordering.max(degree);
        }
        tcb.cc.on_spurious_loss(env.now);
        tcb.stats.undos += 1;
        env.trace.event(env.now, tcb, super::trace::Event::Undo);
        env.trace.sample(env.now, tcb);
    }
}

/// Apply the SACK blocks of an arriving ACK to the scoreboard (RFC 6675 §5 step "update the
/// scoreboard"). Blocks outside `[snd_una, snd_max]` are ignored (they are either stale or
/// hostile); a segment is SACKed only when a block covers all of it. Returns whether the
/// ACK SACKed something new, and its first block if it was a D-SACK (RFC 2883 §4) that
/// shows one of our retransmissions to have been unnecessary. Blocks it ignores are counted
/// (`sack_blocks_ignored`), as are blocks on a connection that did not negotiate SACK.
pub(crate) fn update_scoreboard(
    tcb: &mut Tcb,
    seg: &Segment,
    counters: &mut Counters,
) -> (bool, Option<(SeqNumber, SeqNumber)>) {
    let blocks = seg.sack.as_slice();
    if !tcb.sack_enabled || blocks.is_empty() {
        counters.sack_blocks_ignored += blocks.len() as u64;
        return (false, None);
    }
    // RFC 2883 §4: the first block reports a duplicate if it starts below the cumulative ACK
    // of the same segment, or lies inside the second block. Either way it is no SACK.
    let (l0, r0) = (SeqNumber(blocks[0].0), SeqNumber(blocks[0].1));
    let dsack = l0 < seg.ack || blocks.get(1).is_some_and(|&(l1, r1)| SeqNumber(l1) <= l0 && r0 <= SeqNumber(r1));
    let spurious = (dsack && claim_dsack(tcb, l0, r0)).then_some((l0, r0));
    let mut newly = false;
    for (i, &(l, r)) in blocks.iter().enumerate() {
        if i == 0 && dsack {
            continue;
        }
        let (l, r) = (SeqNumber(l), SeqNumber(r));
        // Ignore empty, inverted, out-of-range blocks.
        if r <= l || l < tcb.snd_una || r > tcb.snd_max || r.since(l) > tcb.snd_max.since(tcb.snd_una) {
            counters.sack_blocks_ignored += 1;
            continue;
        }
        if let (Some(u), true) = (tcb.undo.as_mut(), tcb.recovery.is_some()) {
            u.fack = u.fack.max(r);
        }
        let first = super::sndq::index_of(tcb, l);
        for s in tcb.sndq.iter_mut().skip(first) {
            if s.seq >= r {
                break;
            }
            if s.seq >= l && s.end() <= r && s.sent > 0 && !s.sacked {
                s.sacked = true;
                newly = true;
            }
        }
    }
    (newly, spurious)
}

/// Whether D-SACK block `[l, r)` is evidence that a retransmission was spurious (RFC 2883
/// §4; Linux `tcp_check_dsack`, which also skips "dubious" ones). It must be well formed, no
/// longer than the largest window the peer offered, within what we could have
/// retransmitted — `[snd_una − max window, snd_max]`, the ACK acceptability range of RFC
/// 5961 §5.2 — and every byte of it must have been retransmitted: below snd_una inside a
/// retransmission acknowledged since (`Tcb::rxt_acked`), above it a segment sent more than
/// once. And never more D-SACKs than retransmissions (Linux: `dsack_dups <= total_retrans`).
///
/// Evidence counts once: a claimed range leaves `rxt_acked`, and a claimed segment above
/// snd_una counts as sent once from then on, so the same D-SACK again (a duplicated ACK, or
/// a receiver repeating it) proves nothing more.
fn claim_dsack(tcb: &mut Tcb, l: SeqNumber, r: SeqNumber) -> bool {
    let max_wnd = tcb.max_snd_wnd.clamp(1, i32::MAX as u32);
    if r <= l || r.since(l) > max_wnd || l < tcb.snd_una - max_wnd || r > tcb.snd_max {
        return false;
    }
    if tcb.stats.spurious_retransmits >= tcb.stats.retransmits {
        return false;
    }
    let below = if l < tcb.snd_una {
        let end = if r < tcb.snd_una { r } else { tcb.snd_una };
        match tcb.rxt_acked.iter().position(|&(a, b)| a <= l && end <= b && a < b) {
            Some(k) => Some((k, end)),
            None => return false,
        }
    } else {
        None
    };
    let above = if r > tcb.snd_una {
        let from = if l > tcb.snd_una { l } else { tcb.snd_una };
        let first = super::sndq::index_of(tcb, from);
        let mut last = first;
        for s in tcb.sndq.iter().skip(first) {
            if s.seq >= r {
                break;
            }
            if s.sent < 2 {
                return false;
            }
            last += 1;
        }
        Some((first, last))
    } else {
        None
    };
    if let Some((k, end)) = below {
        let (a, b) = tcb.rxt_acked[k];
        tcb.rxt_acked[k] = (end, b);
        if a < l {
            note_rxt_acked(tcb, a, l);
        }
    }
    if let Some((first, last)) = above {
        for s in tcb.sndq.range_mut(first..last) {
            s.sent = 1;
        }
    }
    true
}

/// Remember that the retransmitted data `[seq, end)` was acknowledged, for a D-SACK of it
/// that may come later (the receiver got it twice). The last few ranges are kept, adjacent
/// ones merged: a go-back-N run after a timeout is one range.
#[inline]
pub(crate) fn note_rxt_acked(tcb: &mut Tcb, seq: SeqNumber, end: SeqNumber) {
    let last = &mut tcb.rxt_acked[0];
    if last.1 == seq && last.0 < last.1 {
        last.1 = end;
    } else {
        tcb.rxt_acked.copy_within(0..RXT_ACKED - 1, 1);
        tcb.rxt_acked[0] = (seq, end);
    }
}

/// How many acknowledged retransmitted ranges are remembered for D-SACK checks.
pub(crate) const RXT_ACKED: usize = 4;

/// What the scoreboard says (RFC 6675 §4), from one backward pass over the segments in
/// flight.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Board {
    /// SetPipe: bytes presumed in the network.
    pub pipe: u32,
    /// NextSeg rule 1: the lowest unSACKed segment that IsLost and was not retransmitted in
    /// this episode.
    pub lost: Option<usize>,
    /// NextSeg rule 3: the lowest unSACKed, not-retransmitted segment below SACKed data.
    pub below_sacked: Option<usize>,
    /// NextSeg rule 4: the highest unSACKed segment in flight.
    pub highest_unsacked: Option<usize>,
}

/// IsLost: a segment is lost when DupThresh SACKed segments, or more than (DupThresh − 1) ×
/// SMSS SACKed bytes, lie above it. A segment counts as retransmitted in this episode when
/// it starts below HighRxt (kept exclusive here: the end of the highest retransmission).
pub(crate) fn scan(tcb: &Tcb, rec: &Recovery) -> Board {
    let smss = tcb.eff_mss as u32;
    let thresh = tcb.reordering as u32;
    let sent_end = super::sndq::index_of(tcb, tcb.snd_max).min(tcb.sndq.len());
    let (mut sacked_segs, mut sacked_bytes) = (0u32, 0u32);
    let mut b = Board::default();
    for i in (0..sent_end).rev() {
        let s = &tcb.sndq[i];
        if s.sacked {
            sacked_segs += 1;
            sacked_bytes += s.len();
            continue;
        }
        b.highest_unsacked.get_or_insert(i);
        let lost = sacked_segs >= thresh || sacked_bytes > (thresh - 1) * smss;
        let retransmitted = s.seq < rec.high_rxt;
        if !lost {
            b.pipe += s.len();
        }
        if retransmitted {
            b.pipe += s.len();
        } else {
            if lost {
                b.lost = Some(i);
            }
            if sacked_segs > 0 {
                b.below_sacked = Some(i);
            }
        }
    }
    b
}

/// Whether the ACK is a duplicate in RFC 5681 §2's sense.
pub(crate) fn is_dupack(tcb: &Tcb, seg: &Segment) -> bool {
    seg.ack == tcb.snd_una
        && seg.len == 0
        && !seg.flags.contains(crate::wire::TcpFlags::FIN)
        && !seg.flags.contains(crate::wire::TcpFlags::SYN)
        && (seg.wnd as u32) << tcb.snd_wscale == tcb.snd_wnd
        && tcb.snd_max != tcb.snd_una
}

/// Enter fast recovery on the third duplicate ACK (or SACK-detected loss): RFC 6582 §3.2
/// step 2 / RFC 6675 §5 steps (1)-(4).
pub(crate) fn enter(env: &mut Env, tcb: &mut Tcb) {
    let flight = flight_size(tcb);
    let smss = tcb.eff_mss as u32;
    tcb.recover = tcb.snd_max;
    tcb.cc.on_loss(env.now, flight);
    let fack = tcb.sndq.iter().rev().find(|s| s.sacked).map_or(tcb.snd_una, |s| s.end());
    // Retransmissions of an earlier episode still out count as this one's: a D-SACK for one
    // of them lies above the marker too.
    let sent_end = super::sndq::index_of(tcb, tcb.snd_max).min(tcb.sndq.len());
    let out = tcb.sndq.iter().take(sent_end).filter(|s| s.sent > 1 && !s.sacked).count() as u32;
    tcb.undo = Some(Undo { marker: tcb.snd_una, sent: out, unproven: out, first: None, eifel: None, fack });
    let sack = tcb.sack_enabled;
    tcb.recovery = Some(Recovery { point: tcb.snd_max, sack, high_rxt: tcb.snd_una, rescue_rxt: tcb.snd_una });
    // NewReno: cwnd = ssthresh + 3 SMSS (the three segments that left the network).
    // SACK: cwnd = ssthresh, and pipe does the accounting.
    tcb.inflation = if sack { 0 } else { (tcb.reordering as u32 * smss) as i64 };
    // Retransmit the first unacknowledged (unSACKed) segment at once.
    tcb.rexmt_now = Some(tcb.snd_una);
    tcb.stats.fast_retransmits += 1;
    // Karn: nothing sent before this is timed any more.
    tcb.rtt_seq = None;
    env.trace.event(env.now, tcb, super::trace::Event::FastRetransmit);
    env.trace.sample(env.now, tcb);
}

/// FlightSize for ssthresh on entering recovery (RFC 5681 §3.2 step 2, RFC 6675 §5 step
/// 4.2): data sent by limited transmit "MUST NOT be included". That is the data sent since
/// the first duplicate ACK beyond what cwnd alone allowed then; the rest (the window was not
/// full) is ordinary flight. Jacobson 1990's W is the window at the loss, not W + 2.
fn flight_size(tcb: &Tcb) -> u32 {
    let at_dupack = tcb.snd_max_at_dupack;
    if at_dupack < tcb.snd_una || at_dupack > tcb.snd_max {
        return tcb.flight();
    }
    let before = at_dupack.since(tcb.snd_una);
    let since = tcb.snd_max.since(at_dupack);
    before + since.min(tcb.cwnd().saturating_sub(before))
}

/// A duplicate ACK arrived (RFC 5681 §3.2 steps 2-4, RFC 3042 limited transmit).
pub(crate) fn on_dupack(env: &mut Env, tcb: &mut Tcb, sacked_new: bool) {
    let smss = tcb.eff_mss as u32;
    tcb.dupacks += 1;
    tcb.stats.dup_acks += 1;
    match tcb.recovery {
        Some(r) if !r.sack => {
            // Jacobson 1990: each further duplicate ACK means a packet left the network.
            tcb.inflation += smss as i64;
        }
        Some(_) => {}
        None => {
            if tcb.dupacks == 1 {
                tcb.snd_max_at_dupack = tcb.snd_max;
            }
            // RFC 6582 §3.2 step 1: only if the ACK "covers more than recover", the highest
            // sequence number sent when the last recovery or timeout began (`recover` keeps
            // one past it, SND.MAX then: so SND.UNA >= recover), so that old duplicates
            // after a recovery do not start another one; RFC 6675 §5.1's "HighACK is greater
            // than or equal to" RecoveryPoint is the same point. An ACK standing exactly at
            // the old SND.MAX may start one: the loss of the first segment sent after it.
            // (`ack::drag_recover` keeps `recover` within 2^31 of SND.UNA.)
            let may_enter = tcb.snd_una >= tcb.recover;
            let sack_loss = sacked_new && tcb.sack_enabled && first_is_lost(tcb);
            if may_enter && (tcb.dupacks >= tcb.reordering as u32 || sack_loss) {
                enter(env, tcb);
            }
        }
    }
}

/// RFC 6675 §5: "or the SACK scoreboard says HighACK + 1 is lost": enough SACKed data
/// lies above the first unacknowledged segment.
fn first_is_lost(tcb: &Tcb) -> bool {
    let smss = tcb.eff_mss as u32;
    let (mut segs, mut bytes) = (0u32, 0u32);
    let mut front_unsacked = false;
    for (i, s) in tcb.sndq.iter().enumerate() {
        if s.sent == 0 {
            break;
        }
        if i == 0 {
            front_unsacked = !s.sacked;
        } else if s.sacked {
            segs += 1;
            bytes += s.len();
        }
    }
    let thresh = tcb.reordering as u32;
    front_unsacked && (segs >= thresh || bytes > (thresh - 1) * smss)
}

/// New data was acknowledged during recovery. Returns true if recovery ended.
pub(crate) fn on_ack_in_recovery(env: &mut Env, tcb: &mut Tcb, acked: u32) -> bool {
    let Some(r) = tcb.recovery else { return false };
    let smss = tcb.eff_mss as u32;
    if tcb.snd_una >= r.point {
        // Full ACK: recovery is over; deflate (Jacobson 1990, RFC 6582 §3.2 step 3 option 2).
        tcb.recovery = None;
        tcb.inflation = 0;
        tcb.dupacks = 0;
        tcb.cc.on_recovery_end(env.now);
        env.trace.event(env.now, tcb, super::trace::Event::RecoveryEnd);
        try_undo(env, tcb);
        return true;
    }
    // Partial ACK.
    if !r.sack {
        // RFC 6582 §3.2 step 3: retransmit the next hole, deflate by what was acked, add
        // back one SMSS if at least one was acked.
        tcb.rexmt_now = Some(tcb.snd_una);
        tcb.inflation -= acked as i64;
        if acked >= smss {
            tcb.inflation += smss as i64;
        }
        // The retransmission timer was restarted by the ACK itself: RFC 6582 §4's
        // "Slow-but-Steady" variant.
    }
    false
}

/// RFC 2018 §8: a receiver may discard SACKed data until it acknowledges it cumulatively
/// (reneging), so SACK marks are advice. A SACKed segment at snd_una means the receiver holds
/// it yet does not acknowledge it: it reneged (or its SACK is false). As Linux
/// (`tcp_check_sack_reneging`), give it max(SRTT/2, 10 ms) to send a better ACK, then let the
/// retransmission timer clear the marks and resend from snd_una; the timer is only ever
/// brought forward, so repeating the evidence cannot postpone it.
pub(crate) fn check_reneging(env: &Env, tcb: &mut Tcb) {
    if !tcb.sndq.front().is_some_and(|s| s.sacked) {
        return;
    }
    let half_srtt = tcb.rtt.srtt().map_or(Duration::ZERO, |s| s / 2);
    let at = env.now + half_srtt.max(Duration::from_millis(10));
    if tcb.timers.rexmt.is_none_or(|t| t > at) {
        tcb.timers.rexmt.set(at);
    }
}

/// On a retransmission timeout: if the segment at snd_una is marked SACKed, the receiver
/// reneged; forget every mark (Linux `tcp_timeout_mark_lost`, RFC 2018 §8), so that
/// everything it has not acknowledged is sent again. Otherwise the marks stay and only
/// unSACKed data is resent (RFC 6675 §5.1 allows keeping them with a test for reneging).
pub(crate) fn clear_if_reneged(tcb: &mut Tcb) {
    if tcb.sndq.front().is_some_and(|s| s.sacked) {
        for s in tcb.sndq.iter_mut() {
            s.sacked = false;
        }
        tcb.stats.sack_reneging += 1;
    }
}

/// Leave recovery because the retransmission timer fired.
pub(crate) fn abandon(tcb: &mut Tcb) {
    // Linux `tcp_enter_loss`: a timeout outside recovery after DupThresh segments were
    // SACKed means the threshold waited for duplicate ACKs that were losses: back to 3.
    // One during recovery, or with little SACKed, says nothing about reordering.
    if tcb.recovery.is_none() && tcb.reordering > DUP_THRESH {
        let sacked = tcb.sndq.iter().filter(|s| s.sacked).count();
        if sacked >= DUP_THRESH as usize {
            tcb.reordering = DUP_THRESH;
        }
    }
    tcb.recovery = None;
    tcb.undo = None;
    tcb.inflation = 0;
    tcb.dupacks = 0;
    tcb.rexmt_now = None;
}
