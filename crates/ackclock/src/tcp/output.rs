//! Deciding what to send, and building the segments (BSD's `tcp_output`).
//!
//! A data segment is its send-queue pbuf: the TCP, IPv4 and Ethernet headers are written into
//! its headroom, the TCP checksum is the header's sum plus the payload sum cached when the
//! application's bytes were copied in (the payload is never read again), and the device gets
//! a shared handle while the queue keeps its own for retransmission.

use super::cc::initial_window;
use super::env::Env;
use super::header::{is_plain, prepend_frame, prepend_tcp, Hdr};
use super::input::{verify_pending, Segment};
use super::recovery;
use super::seq::SeqNumber;
use super::sndq::{index_of, slice_sent, split_front, unshare};
use super::stats::DropReason;
use super::tcb::{FourTuple, State, Tcb};
use crate::buf::{Flags, PBuf};
use crate::iface::{push, CachedHop, NextHop};
use crate::wire::{checksum, IpProtocol, SackBlocks, TcpFlags};

/// How soon output starved of buffers tries again.
const RETRY_INTERVAL: crate::time::Duration = crate::time::Duration::from_millis(10);

/// Send what the connection may send now: SYN or SYN-ACK, data within the windows, FIN,
/// and a pure ACK or window update if one is owed and nothing else carried it.
pub(crate) fn output(env: &mut Env, tcb: &mut Tcb) {
    match tcb.state {
        State::Closed | State::Listen => return,
        State::SynSent | State::SynReceived => {
            // The SYN (or SYN-ACK) is due when snd_nxt was put back to the ISS.
            if tcb.snd_nxt == tcb.iss {
                send_syn(env, tcb);
            }
            return;
        }
        _ => {}
    }
    // Nearly always, new data in order: the predicted pass, then the general one for
    // whatever it left, unless the connection only receives (one test): nothing waits to
    // be sent, no FIN, no retransmission owed, no recovery. Then `send_owed` would send
    // nothing, and at most the ACK is owed.
    let (mut sent, done) = super::fastout::send_new(env, tcb);
    let receiving =
        || tcb.snd_nxt_idx >= tcb.sndq.len() && !tcb.fin_queued && tcb.rexmt_now.is_none() && tcb.recovery.is_none();
    if !done && !receiving() {
        sent |= send_owed(env, tcb);
    }
    // Window updates are owed after the application reads (`recv` sets ack_now then), not
    // merely because the SYN's unscaled window was small.
    // A pure ACK carries SND.MAX, as BSD's tcp_output does, not SND.NXT: after a timeout
    // pulled SND.NXT back, the peer may hold data beyond it, and would find an ACK at
    // SND.NXT below its RCV.NXT, unacceptable (RFC 9293 §3.10.7.4), and drop it unread. With
    // both ends in that state neither would ever learn what the other received.
    if !sent && tcb.ack_now && super::fastout::pure_ack(env, tcb).is_none() {
        send_owed_ack(env, tcb);
    }
    // Starved of buffers with an ACK or a FIN owed: nothing else would bring us back here.
    let fin_owed = tcb.fin_queued && tcb.snd_nxt == tcb.snd_end && tcb.snd_nxt_idx >= tcb.sndq.len();
    if !sent && (tcb.ack_now || fin_owed) && env.pool.available() == 0 {
        tcb.timers.retry.get_or_insert(env.now + RETRY_INTERVAL);
    }
    // Timers: retransmission while anything is in flight; persist when data waits on a
    // zero window with nothing in flight to bring an ACK back (RFC 9293 §3.8.6.1).
    if tcb.snd_max != tcb.snd_una {
        arm_rexmt(env, tcb);
    }
    let waiting = tcb.snd_nxt_idx < tcb.sndq.len();
    if waiting && tcb.snd_max == tcb.snd_una {
        if tcb.timers.persist.is_none() {
            tcb.timers.persist.set(env.now + persist_interval(tcb));
        }
    } else {
        tcb.timers.persist.clear();
    }
}

/// What `output` sends besides a pure ACK: a retransmission owed, then new data (or what
/// SACK recovery picks) and the FIN. Returns whether anything went out.
fn send_owed(env: &mut Env, tcb: &mut Tcb) -> bool {
    let mut sent = false;
    // The path MTU estimates changed since this connection last looked (`pmtu::follow`).
    if tcb.pmtu_gen != env.iface.pmtu.generation() {
        super::pmtu::follow(env.iface, tcb, env.counters);
    }
    // RFC 5681 §4.1: after an idle period longer than an RTO, restart from at most the
    // initial window instead of bursting a stale cwnd.
    if tcb.snd_max == tcb.snd_una
        && tcb.snd_nxt_idx < tcb.sndq.len()
        && tcb.stats.bytes_sent > 0
        && env.now.nanos_since(tcb.last_send) > tcb.rtt.rto_nanos()
    {
        let iw = initial_window(tcb.eff_mss as u32, env.config.initial_window);
        tcb.cc.on_idle(env.now, iw.min(tcb.cc.cwnd()));
    }
    // A retransmission owed now (fast retransmit, NewReno partial ACK), outside the window.
    if let Some(seq) = tcb.rexmt_now.take() {
        if let Some(idx) = first_unsacked_from(tcb, seq) {
            let fin = idx + 1 == tcb.sndq.len() && tcb.fin_queued;
            if send_data(env, tcb, idx, fin, &mut None) {
                sent = true;
                if let Some(r) = tcb.recovery.as_mut() {
                    if r.rescue_rxt == tcb.snd_una {
                        // RFC 6675 §5 step 3: no rescue before the first retransmission is acked.
                        r.rescue_rxt = tcb.sndq[idx].end() - 1;
                    }
                }
            } else {
                tcb.rexmt_now = Some(seq);
            }
        }
    }
    if tcb.recovery.is_some_and(|r| r.sack) {
        sent |= sack_recovery(env, tcb);
    } else {
        sent |= send_in_order(env, tcb);
    }
    sent
}

/// Send from `snd_nxt` on: new data, or everything not SACKed after an RTO sent snd_nxt back.
/// Returns whether anything went out.
fn send_in_order(env: &mut Env, tcb: &mut Tcb) -> bool {
    let mut sent = false;
    let smss = tcb.eff_mss as u32;
    // The ACK, window and timestamps of this pass's segments, once the first has them.
    let mut fields = None;
    // Only ACKs and timers move the congestion window: one read per pass.
    let cwnd = tcb.cwnd();
    // After an RTO sent snd_nxt back, the SACKed segments it passes are not in flight:
    // count them out, or each hole would wait for a cumulative ACK.
    let mut sacked_below: u32 = if tcb.sack_enabled && tcb.snd_nxt < tcb.snd_max {
        tcb.sndq.iter().take(tcb.snd_nxt_idx).filter(|s| s.sacked).map(|s| s.len()).sum()
    } else {
        0
    };
    // RFC 3042 limited transmit: the first two duplicate ACKs each let one new segment out
    // beyond cwnd. Past a threshold that reordering raised (RFC 4653's extended limited
    // transmit), every duplicate ACK below it that SACKed a segment does: one segment per
    // segment that left the network, as Linux counts SACKed data out of what is in flight.
    let limited = if tcb.recovery.is_some() || tcb.dupacks == 0 {
        0
    } else if tcb.reordering <= super::recovery::DUP_THRESH || !tcb.sack_enabled {
        tcb.dupacks.min(2) * smss
    } else {
        let sacked = tcb.sndq.iter().take(tcb.snd_nxt_idx).filter(|s| s.sacked).count() as u32;
        tcb.dupacks.min(sacked).min(tcb.reordering as u32 - 1) * smss
    };
    while !env.tx.is_full() {
        if tcb.snd_nxt_idx < tcb.sndq.len() {
            if !tcb.state.is_synchronized() {
                break;
            }
            let idx = tcb.snd_nxt_idx;
            // One lookup in the queue (a ring: each index computes a wrapped position).
            let seg = &tcb.sndq[idx];
            let (seg_seq, seg_len, seg_sent) = (seg.seq, seg.len(), seg.sent);
            if seg.sacked {
                // After an RTO: the peer holds this one; skip it.
                tcb.snd_nxt = tcb.snd_nxt.max(seg_seq + seg_len);
                tcb.snd_nxt_idx += 1;
                sacked_below += seg_len;
                continue;
            }
            let is_last = idx + 1 == tcb.sndq.len();
            let limited = if tcb.snd_nxt == tcb.snd_max { limited } else { 0 };
            // The peer's window counts everything unacknowledged (it holds SACKed data);
            // the congestion window counts only what is in the network.
            let outstanding = tcb.snd_nxt.since(tcb.snd_una);
            let rwnd_room = tcb.snd_wnd.saturating_sub(outstanding);
            let cwnd_room = cwnd.saturating_add(limited).saturating_sub(outstanding.saturating_sub(sacked_below));
            let usable = rwnd_room.min(cwnd_room);
            // A segment partly below snd_nxt (after a rewind) is sent whole; count only the
            // part beyond snd_nxt against the window.
            let remaining = (seg_seq + seg_len).since(tcb.snd_nxt).min(seg_len);
            // RFC 9293 §3.8.6 (MUST-35: robust against a shrinking window) and §3.8.6.1:
            // after a timeout sent snd_nxt back, the segment at SND.UNA goes even if the peer
            // shrank its window below it, as Linux's `__tcp_retransmit_skb` sends it: what
            // the window still takes, or one MSS as a zero-window probe when it is closed.
            // Otherwise nothing is ever sent again, and the timer gives up on a live peer.
            let probe_head = seg_sent > 0 && seg_seq == tcb.snd_una && seg_seq == tcb.snd_nxt && remaining > rwnd_room;
            if probe_head {
                let allow = if rwnd_room > 0 { rwnd_room } else { smss }.min(cwnd_room).max(1);
                if remaining > allow {
                    if split_front(env, tcb, idx, allow as usize).is_err() {
                        break;
                    }
                    continue;
                }
            } else if remaining > usable {
                // An offload unit (several MSS) that does not fit: wait for the ACKs that
                // are about to open the window rather than cut it (a copy).
                let unit = seg_len > smss;
                if unit && tso_should_defer(env, tcb, usable, outstanding) {
                    break;
                }
                // Sender SWS avoidance (RFC 9293 §3.8.6.2.1): a partial segment only if it
                // is at least half the largest window the peer has offered. A unit is cut
                // at a whole number of MSS.
                let cut = if unit && usable >= smss { usable - usable % smss } else { usable };
                if usable > 0 && seg_seq == tcb.snd_nxt && (usable >= smss || usable >= tcb.max_snd_wnd / 2) {
                    if split_front(env, tcb, idx, cut as usize).is_err() {
                        break;
                    }
                    continue;
                }
                break;
            }
            // Nagle (RFC 9293 §3.7.4) with Minshall's refinement: a short last segment waits
            // while a short segment sent before is unacknowledged, unless nodelay or the FIN
            // goes with it, or in urgent mode (Linux `tcp_nagle_test`: urgent data is not
            // held).
            let short = seg_len < smss;
            if short
                && is_last
                && seg_sent == 0
                && !tcb.opts.nodelay
                && !tcb.fin_queued
                && !tcb.urgent_mode()
                && minshall_holds(tcb)
            {
                break;
            }
            let fin = is_last && tcb.fin_queued;
            // Nearly always a new segment without FIN: the predicted path, else the full one.
            let predicted = if fin { None } else { super::fastout::data_segment(env, tcb, idx, &mut fields) };
            if !predicted.unwrap_or_else(|| send_data(env, tcb, idx, fin, &mut fields)) {
                break;
            }
            sent = true;
            continue;
        }
        // All data sent: the FIN, if due and not already carried.
        if tcb.fin_queued && tcb.snd_nxt == tcb.snd_end && tcb.state.is_synchronized() {
            if !send_bare(env, tcb, tcb.snd_end, TcpFlags::FIN | TcpFlags::ACK) {
                break;
            }
            tcb.snd_nxt = tcb.snd_end + 1;
            tcb.snd_max = tcb.snd_max.max(tcb.snd_nxt);
            arm_rexmt(env, tcb);
            sent = true;
        }
        break;
    }
    sent
}

/// Minshall's refinement of Nagle's algorithm (Minshall, "A Proposed Modification to Nagle's
/// Algorithm", draft-minshall-nagle-01; Linux `tcp_minshall_check`): a short segment is held
/// only while the last short segment sent is unacknowledged. Full-sized segments in flight
/// do not hold back the tail of a write, so the tail does not wait for a delayed ACK of
/// them; at most one short segment is in flight at a time, as Nagle intended. (`snd_sml`
/// beyond `snd_max` is stale, from before the sequence space wrapped.)
#[inline]
pub(super) fn minshall_holds(tcb: &Tcb) -> bool {
    tcb.snd_sml > tcb.snd_una && tcb.snd_sml <= tcb.snd_max
}

/// Payload bytes per send-queue segment: one MSS, or, when the device cuts segments
/// (`gso_max`, see [`TcpConfig::tso`](super::TcpConfig::tso)), a whole number of MSS sized
/// like Linux's `tcp_xmit_size_goal`: at most half the largest window the peer has offered
/// and a third of cwnd, so that a unit usually fits the window when its turn comes.
pub(crate) fn send_unit(tcb: &Tcb, gso_max: usize) -> usize {
    let mss = tcb.eff_mss as usize;
    // Without offload (or with too little of it for two segments) the unit is one MSS:
    // neither the window nor cwnd (a call into congestion control) nor a division is needed.
    if gso_max < 2 * mss || tcb.urgent_mode() {
        return mss;
    }
    let goal = gso_max.min(tcb.max_snd_wnd as usize / 2).min(tcb.cwnd() as usize / 3);
    (goal / mss).max(1) * mss
}

/// Whether to hold back an offload unit that does not fit the window (Linux's
/// `tcp_tso_should_defer`): yes while data is in flight whose ACK should come soon (the
/// oldest unacknowledged segment left at least half an RTT ago), unless the window already
/// allows a third of itself.
fn tso_should_defer(env: &Env, tcb: &Tcb, usable: u32, outstanding: u32) -> bool {
    if outstanding == 0 {
        return false;
    }
    if usable >= tcb.snd_wnd.min(tcb.cwnd()) / 3 {
        return false;
    }
    let (Some(head), Some(srtt)) = (tcb.sndq.front(), tcb.rtt.srtt()) else { return false };
    head.sent > 0 && env.now.saturating_duration_since(head.sent_at) >= srtt / 2
}

/// RFC 6675 §5 step (C): while `cwnd - pipe >= 1 SMSS`, send what NextSeg picks. The
/// scoreboard is scanned again after each segment (O(segments in flight) per send, only
/// during recovery).
fn sack_recovery(env: &mut Env, tcb: &mut Tcb) -> bool {
    let smss = tcb.eff_mss as u32;
    let mut sent = false;
    while !env.tx.is_full() {
        let Some(rec) = tcb.recovery else { break };
        let board = recovery::scan(tcb, &rec);
        if tcb.cwnd() < board.pipe.saturating_add(smss) {
            break;
        }
        // New data goes one MSS at a time: an offload unit is cut (a copy; only in recovery).
        let new_data = tcb.snd_nxt_idx < tcb.sndq.len()
            && tcb.snd_nxt == tcb.snd_max
            && (tcb.sndq[tcb.snd_nxt_idx].seq + tcb.sndq[tcb.snd_nxt_idx].len().min(smss)).since(tcb.snd_una)
                <= tcb.snd_wnd;
        let mut rescue = false;
        let idx = if let Some(i) = board.lost {
            i // rule 1: a lost segment
        } else if new_data {
            // Rule 2: new data.
            let i = tcb.snd_nxt_idx;
            if tcb.sndq[i].len() > smss && split_front(env, tcb, i, smss as usize).is_err() {
                break;
            }
            i
        } else if let Some(i) = board.below_sacked {
            i // rule 3: unSACKed data below SACKed data
        } else if let (Some(i), true) = (board.highest_unsacked, tcb.snd_una > rec.rescue_rxt) {
            rescue = true; // rule 4: one rescue retransmission, of the highest unSACKed segment
            i
        } else {
            break;
        };
        let fin = idx + 1 == tcb.sndq.len() && tcb.fin_queued;
        if !send_data(env, tcb, idx, fin, &mut None) {
            break;
        }
        if let (true, Some(r)) = (rescue, tcb.recovery.as_mut()) {
            // RFC 6675 NextSeg rule 4: RescueRxt = RecoveryPoint, and "HighRxt MUST NOT be
            // updated", so the holes below it still count as never retransmitted.
            r.rescue_rxt = r.point;
            r.high_rxt = rec.high_rxt;
        }
        sent = true;
    }
    sent
}

/// Index of the first segment at or after `seq` that the peer has not SACKed and that was
/// sent before.
fn first_unsacked_from(tcb: &Tcb, seq: SeqNumber) -> Option<usize> {
    let start = index_of(tcb, seq);
    (start..tcb.sndq.len()).find(|&i| !tcb.sndq[i].sacked && tcb.sndq[i].sent > 0)
}

/// Persist interval: the RTO, backed off per unanswered probe, within [RTO min, RTO max].
pub(crate) fn persist_interval(tcb: &Tcb) -> crate::time::Duration {
    let (min, max) = (tcb.rtt.min_rto(), tcb.rtt.max_rto());
    tcb.rtt.rto().checked_mul(1u32 << tcb.persist_backoff.min(16)).unwrap_or(max).clamp(min, max)
}

/// Whether the window has opened enough since we last advertised it to be worth telling
/// the peer: by two segments or half the buffer (RFC 9293 §3.8.6.2.2, BSD `tcp_output`).
pub(crate) fn window_update_due(tcb: &Tcb) -> bool {
    if !tcb.state.can_receive() {
        return false;
    }
    // The most we could advertise: the free space, but no more than the window field
    // can carry with our scale.
    let max_wnd = (u16::MAX as usize) << tcb.rcv_wscale;
    let right = tcb.ack_seq() + tcb.rcv_space().min(max_wnd) as u32;
    if right <= tcb.rcv_adv {
        return false;
    }
    let gain = right.since(tcb.rcv_adv) as usize;
    gain >= 2 * tcb.rcv_mss() as usize || 2 * gain >= tcb.opts.recv_buffer
}

/// The stricter rule for a window update that costs a segment and a wake-up of its own:
/// one that a reader on another thread asks the protocol thread for (`crate::runtime`).
/// Besides [`window_update_due`], the window the peer may still fill must have fallen to
/// half of the most we advertise or less, and the new window must be at least twice it:
/// Linux's `tcp_cleanup_rbuf` ("send ACK now, if this read freed lots of space"). While
/// the peer still has more than half a window to send into, the freed space rides on the
/// ACK its next segments draw, instead of a pure window update per read.
pub(crate) fn window_update_urgent(tcb: &Tcb) -> bool {
    if !window_update_due(tcb) {
        return false;
    }
    let max_wnd = (u16::MAX as usize) << tcb.rcv_wscale;
    let clamp = tcb.opts.recv_buffer.min(max_wnd);
    let left = if tcb.rcv_adv > tcb.rcv_nxt { tcb.rcv_adv.since(tcb.rcv_nxt) as usize } else { 0 };
    let new = tcb.rcv_space().min(max_wnd);
    2 * left <= clamp && new >= 2 * left
}

/// The window to advertise, as the header field, and the new right edge. Receiver SWS
/// avoidance (RFC 9293 §3.8.6.2.2): the right edge moves only by min(buffer/2, MSS) or
/// more, and never moves left.
#[inline(always)]
pub(crate) fn window_field(tcb: &mut Tcb, ack: SeqNumber, syn: bool) -> u16 {
    let space = tcb.rcv_space() as u32;
    let mut right = tcb.rcv_nxt + space;
    let threshold = ((tcb.opts.recv_buffer / 2) as u32).min(tcb.rcv_mss() as u32);
    if right > tcb.rcv_adv && right.since(tcb.rcv_adv) < threshold {
        right = tcb.rcv_adv;
    }
    if right < tcb.rcv_adv {
        right = tcb.rcv_adv;
    }
    let wnd = right.since(ack);
    if syn {
        // RFC 7323 §2.2: the window in a SYN is never scaled.
        let w = wnd.min(u16::MAX as u32);
        tcb.rcv_adv = tcb.rcv_adv.max(ack + w);
        return w as u16;
    }
    let shift = tcb.rcv_wscale as u32;
    let max = (u16::MAX as u32) << shift;
    let wnd = wnd.min(max);
    let mut field = wnd >> shift;
    // Rounding down must not pull the edge left of what we advertised before.
    if ack + (field << shift) < tcb.rcv_adv && field < u16::MAX as u32 {
        field += 1;
    }
    tcb.rcv_adv = tcb.rcv_adv.max(ack + (field << shift));
    field as u16
}

/// SACK blocks for an outgoing segment with `room` option bytes left: a D-SACK first
/// (RFC 2883 §4), then the out-of-order queue's blocks, newest first (RFC 2018 §4).
#[inline(always)]
fn sack_blocks(tcb: &mut Tcb, room: usize) -> SackBlocks {
    // Nearly always: nothing to report, and no call.
    if !tcb.sack_enabled || room < 12 || (tcb.dsack.is_none() && tcb.ooo.is_empty()) {
        return SackBlocks::new();
    }
    sack_blocks_some(tcb, room)
}

#[inline(never)]
fn sack_blocks_some(tcb: &mut Tcb, room: usize) -> SackBlocks {
    let mut blocks = SackBlocks::new();
    let fit = ((room - 4) / 8).min(if tcb.ts_enabled { 3 } else { 4 });
    if let Some((l, r)) = tcb.dsack.take() {
        blocks.push(l.0, r.0);
    }
    if !tcb.ooo.is_empty() && blocks.len() < fit {
        let mut out = [(0u64, 0u64); 4];
        let n = tcb.ooo.sack_blocks(tcb.rcv_nxt_pos, fit - blocks.len(), &mut out);
        for &(s, e) in &out[..n] {
            blocks.push(tcb.pos_seq(s).0, tcb.pos_seq(e).0);
        }
    }
    blocks.truncate(fit);
    blocks
}

/// The ACK owed when `fastout::pure_ack` could not predict it: deferred data to check first,
/// perhaps. The ACK may be owed only for that data (a quick ACK), and a segment that fails
/// takes back the ACK it asked for (`reject_from`): a bad segment is dropped without an
/// answer (RFC 9293 §3.1), not with a duplicate ACK.
#[inline(never)]
fn send_owed_ack(env: &mut Env, tcb: &mut Tcb) {
    if tcb.rcv_unverified > 0 {
        verify_for_ack(env, tcb);
    }
    if tcb.ack_now {
        let _ = send_bare(env, tcb, tcb.snd_max, TcpFlags::ACK);
    }
}

/// Check the deferred data an ACK about to be sent would cover (`verify_pending`), counted
/// in `csum_verified_for_ack` too.
#[cold]
fn verify_for_ack(env: &mut Env, tcb: &mut Tcb) {
    let before = env.counters.csum_verified_early;
    verify_pending(env, tcb);
    env.counters.csum_verified_for_ack += env.counters.csum_verified_early - before;
}

/// Header fields every segment of an established connection carries.
#[inline(always)]
fn common_hdr(env: &mut Env, tcb: &mut Tcb, seq: SeqNumber, flags: TcpFlags, option_room: usize) -> Hdr {
    if tcb.rcv_unverified > 0 {
        // An ACK must not cover data whose checksum is unchecked: check it now.
        verify_for_ack(env, tcb);
    }
    let ack = tcb.ack_seq();
    let ts = tcb.ts_enabled.then(|| (tcb.ts_now(env.now), tcb.ts_recent));
    let room = option_room.saturating_sub(if ts.is_some() { 12 } else { 0 });
    let sack = sack_blocks(tcb, room);
    let window = window_field(tcb, ack, false);
    let h = Hdr { seq, ack, flags, window, mss: None, wscale: None, sack_permitted: false, ts, sack, urgent: 0 };
    super::urgent::mark(tcb, h)
}

/// The header fields of [`common_hdr`] that stay the same for every segment one pass of
/// output sends: the first segment's checks (deferred checksums verified, a D-SACK taken)
/// leave nothing for the next to change, and `now` is the same.
#[derive(Clone, Copy)]
pub(crate) struct Fields {
    pub(super) ack: SeqNumber,
    pub(super) window: u16,
    pub(super) ts: Option<(u32, u32)>,
}

/// [`common_hdr`] for the segments of one pass: from `memo` once a segment without SACK
/// blocks filled it, while nothing is out of order (so none would carry blocks).
#[inline(always)]
fn pass_hdr(
    env: &mut Env,
    tcb: &mut Tcb,
    seq: SeqNumber,
    flags: TcpFlags,
    room: usize,
    memo: &mut Option<Fields>,
) -> Hdr {
    if let Some(f) = *memo {
        if tcb.ooo.is_empty() && tcb.dsack.is_none() {
            let (ack, window, ts) = (f.ack, f.window, f.ts);
            let sack = SackBlocks::new();
            let h =
                Hdr { seq, ack, flags, window, mss: None, wscale: None, sack_permitted: false, ts, sack, urgent: 0 };
            return super::urgent::mark(tcb, h);
        }
    }
    let h = common_hdr(env, tcb, seq, flags, room);
    if h.sack.is_empty() {
        *memo = Some(Fields { ack: h.ack, window: h.window, ts: h.ts });
    }
    h
}

/// Bookkeeping after any segment carrying an ACK left.
pub(super) fn acked_sent(env: &mut Env, tcb: &mut Tcb, ack: SeqNumber) {
    if tcb.unacked_segs > 0 {
        // Linux `tcp_dec_quickack_mode`: an ACK of new data spends a quick ACK, whether
        // it went alone or rode on data.
        let q = &mut tcb.quickack;
        q.quick = q.quick.saturating_sub(1);
        if q.owed {
            q.owed = false;
            tcb.stats.quick_acks += 1;
            env.counters.quick_acks += 1;
        }
    }
    tcb.last_ack_sent = ack;
    tcb.ack_now = false;
    tcb.unacked_segs = 0;
    tcb.timers.delack.clear();
    tcb.stats.segs_out += 1;
    env.counters.segs_out += 1;
}

/// SYN or SYN-ACK, with our options (RFC 9293 §3.7.1, RFC 7323, RFC 2018). A SYN-ACK
/// offers only what the peer's SYN offered.
fn send_syn(env: &mut Env, tcb: &mut Tcb) {
    let Ok(mut buf) = env.pool.alloc_small() else {
        env.counters.drop(DropReason::NoBuffer);
        return;
    };
    let synack = tcb.state == State::SynReceived;
    let cfg = env.config;
    let wscale =
        if synack { tcb.wscale_ok.then_some(tcb.rcv_wscale) } else { cfg.window_scaling.then_some(tcb.rcv_wscale) };
    let ts = if synack {
        tcb.ts_enabled.then(|| (tcb.ts_now(env.now), tcb.ts_recent))
    } else {
        cfg.timestamps.then(|| (tcb.ts_now(env.now), 0))
    };
    let sack_permitted = if synack { tcb.sack_enabled } else { cfg.sack };
    let ack = if synack { tcb.rcv_nxt } else { SeqNumber(0) };
    let window = window_field(tcb, ack, true);
    let h = Hdr {
        seq: tcb.iss,
        ack,
        flags: if synack { TcpFlags::SYN | TcpFlags::ACK } else { TcpFlags::SYN },
        window,
        mss: Some(tcb.rmss),
        wscale,
        sack_permitted,
        ts,
        sack: SackBlocks::new(),
        urgent: 0,
    };
    if prepend_tcp(&mut buf, &tcb.tuple, &h, Some(0)).is_err() {
        env.counters.drop(DropReason::NoBuffer);
        return;
    }
    if !ship(env, tcb.tuple, &mut tcb.hop, buf) {
        return;
    }
    if synack {
        acked_sent(env, tcb, ack);
    } else {
        tcb.stats.segs_out += 1;
        env.counters.segs_out += 1;
    }
    // Time the first transmission only (Karn's rule); timestamps, if negotiated, take over.
    tcb.rtt_seq = (tcb.snd_max == tcb.iss).then_some((tcb.iss, env.now));
    tcb.snd_nxt = tcb.iss + 1;
    tcb.snd_max = tcb.snd_max.max(tcb.snd_nxt);
    // The handshake's retransmissions are bounded by their retry count, not by the user
    // timeout, so no retransmission episode starts here.
    tcb.timers.rexmt.get_or_insert(env.now + tcb.rtt.rto());
}

/// Send `h` on `tuple` for no connection: a SYN cookie's SYN-ACK (RFC 4987 §3.6), or the
/// ACK of a compact TIME-WAIT entry. Returns whether it went out.
pub(crate) fn send_stateless(env: &mut Env, tuple: FourTuple, h: &Hdr) -> bool {
    let Ok(mut buf) = env.pool.alloc_small() else {
        env.counters.drop(DropReason::NoBuffer);
        return false;
    };
    if prepend_tcp(&mut buf, &tuple, h, Some(0)).is_err() {
        env.counters.drop(DropReason::NoBuffer);
        return false;
    }
    let sent = ship(env, tuple, &mut None, buf);
    if sent {
        env.counters.segs_out += 1;
    }
    sent
}

/// RFC 6298 §5.1: something is in flight; start the retransmission timer unless it runs,
/// and mark when this episode of unacknowledged data began (for the user timeout).
#[inline]
pub(super) fn arm_rexmt(env: &Env, tcb: &mut Tcb) {
    if tcb.timers.rexmt.is_none() {
        tcb.timers.rexmt.set(env.now.plus_nanos(tcb.rtt.rto_nanos()));
        // A new episode of unacknowledged data: a zero-window probing episode before it
        // (`timer::persist`) transmitted no data, and its start is not this data's.
        tcb.rexmt_start = Some(env.now);
    }
}

/// A segment with no payload: ACK, FIN, or a keep-alive/window probe with an old sequence
/// number. Returns false if no buffer was available.
pub(crate) fn send_bare(env: &mut Env, tcb: &mut Tcb, seq: SeqNumber, flags: TcpFlags) -> bool {
    let Ok(mut buf) = env.pool.alloc_small() else {
        env.counters.drop(DropReason::NoBuffer);
        return false;
    };
    let h = common_hdr(env, tcb, seq, flags, 40);
    let (src, dst) = (tcb.tuple.local_addr, tcb.tuple.remote_addr);
    let fast = if is_plain(&h) { env.iface.prebuilt(env.now, &tcb.hop, src, dst, IpProtocol::TCP) } else { None };
    if let Some((pre, ident)) = fast {
        // A pure ACK in one pass: the prebuilt headers and five or eight words.
        if prepend_frame(&mut buf, &tcb.tuple, &h, Some(0), pre, ident).is_err() {
            env.counters.drop(DropReason::NoBuffer);
            return false;
        }
        push(env.tx, buf, env.counters);
    } else {
        if prepend_tcp(&mut buf, &tcb.tuple, &h, Some(0)).is_err() {
            env.counters.drop(DropReason::NoBuffer);
            return false;
        }
        if !ship(env, tcb.tuple, &mut tcb.hop, buf) {
            return false;
        }
    }
    acked_sent(env, tcb, h.ack);
    true
}

/// Whether the device completes the TCP checksum of every data segment (transmit checksum
/// offload, `Capabilities::tx_checksum`): the application's bytes are then copied without
/// summing them ([`Tcp::send`](super::Tcp)), and each segment leaves with the pseudo-header
/// sum in its checksum field and `CSUM_PARTIAL`, as Linux sends `CHECKSUM_PARTIAL` skbs.
#[inline(always)]
pub(super) fn partial_sums(env: &Env) -> bool {
    env.iface.capabilities().tx_checksum
}

/// Mark `frame`, whose TCP header starts `below` bytes in, for the device to complete its
/// checksum: it sums from the TCP header to the end, and stores the result in the checksum
/// field (`csum_start`, `csum_offset`, as virtio-net's `NEEDS_CSUM`).
#[inline(always)]
pub(super) fn mark_partial(frame: &mut PBuf, below: usize) {
    let m = &mut frame.meta;
    m.flags.insert(Flags::CSUM_PARTIAL);
    m.csum_start = below as u16;
    m.csum_offset = 16; // the TCP checksum field
}

/// Send send-queue segment `idx` (its whole payload), with FIN if asked; `memo` carries the
/// header fields from one segment of a pass to the next ([`pass_hdr`]).
fn send_data(env: &mut Env, tcb: &mut Tcb, idx: usize, mut fin: bool, memo: &mut Option<Fields>) -> bool {
    // A segment queued for a larger MSS than the path now carries (`pmtu`), on a device
    // that cannot cut it: its first MSS goes on its own (a copy, as Linux's
    // `tcp_fragment`), the rest stays queued behind it, and so does the FIN.
    // So does a unit holding urgent data: every piece the device cut would repeat the
    // urgent pointer of the first, wrong for the others.
    if tcb.sndq[idx].len() > tcb.eff_mss as u32
        && (env.iface.capabilities().tso_max == 0 || tcb.snd_up.is_some_and(|up| tcb.sndq[idx].seq < up))
    {
        if split_front(env, tcb, idx, tcb.eff_mss as usize).is_err() {
            return false;
        }
        if idx < tcb.snd_nxt_idx {
            tcb.snd_nxt_idx += 1;
        }
        fin = false;
    }
    // A device may still hold this buffer from a previous transmission: then the headers
    // cannot be written in place, and the payload moves to a fresh buffer (rare).
    if !tcb.sndq[idx].buf.is_unique() && !unshare(env, tcb, idx) {
        return false;
    }
    let seq = tcb.sndq[idx].seq;
    let len = tcb.sndq[idx].len();
    let is_last = idx + 1 == tcb.sndq.len();
    let mut flags = TcpFlags::ACK;
    if is_last {
        flags |= TcpFlags::PSH;
    }
    if fin {
        flags |= TcpFlags::FIN;
    }
    // A segment of more than one MSS is cut by the device (segmentation offload): every
    // piece repeats this header, so it carries no SACK blocks, and the device completes the
    // checksums, so the payload sum is not needed. Nor is it when the device completes
    // every checksum (`partial_sums`).
    let mss = tcb.eff_mss as u32;
    let gso = len > mss;
    let partial = gso || partial_sums(env);
    let room = (tcb.smss as usize).saturating_sub(len as usize).min(40);
    let h = pass_hdr(env, tcb, seq, flags, room, memo);
    let seg = &mut tcb.sndq[idx];
    let payload_sum = match (partial, seg.buf.cached_sum_from(0)) {
        (true, _) => None,
        (false, Some(s)) => Some(s),
        (false, None) => Some(checksum::sum(seg.buf.data())),
    };
    let (src, dst) = (tcb.tuple.local_addr, tcb.tuple.remote_addr);
    let fast = if is_plain(&h) { env.iface.prebuilt(env.now, &tcb.hop, src, dst, IpProtocol::TCP) } else { None };
    let (hl, below, next) = if let Some((pre, ident)) = fast {
        // The common case: every header in one pass (Jacobson's header template).
        match prepend_frame(&mut seg.buf, &tcb.tuple, &h, payload_sum, pre, ident) {
            Ok((hl, below)) => (hl, below, NextHop::Resolved),
            Err(_) => {
                env.counters.drop(DropReason::NoBuffer);
                return false;
            }
        }
    } else {
        let hl = match prepend_tcp(&mut seg.buf, &tcb.tuple, &h, payload_sum) {
            Ok(hl) => hl,
            Err(_) => {
                env.counters.drop(DropReason::NoBuffer);
                return false;
            }
        };
        let before = seg.buf.len();
        let next = match env.iface.encapsulate(env.now, &mut seg.buf, src, dst, IpProtocol::TCP, &mut tcb.hop) {
            Ok(n) => n,
            Err(_) => {
                let _ = seg.buf.trim_front(hl);
                env.counters.drop(DropReason::NoBuffer);
                return false;
            }
        };
        // What the interface prepended (link and IP headers): the TCP header starts there.
        (hl, seg.buf.len() - before, next)
    };
    let mut frame = seg.buf.share();
    // The queue's view goes back to the payload; the frame's view has the headers.
    let _ = seg.buf.trim_front(hl + below);
    let retransmit = seg.sent > 0;
    seg.sent += 1;
    seg.sent_at = env.now;
    let mut pieces = 1;
    if partial {
        mark_partial(&mut frame, below);
    }
    if gso {
        frame.meta.flags.insert(Flags::GSO_TCPV4);
        frame.meta.gso_size = mss as u16;
        pieces = slice_sent(tcb, idx, mss);
    }
    env.iface.link_output(env.now, frame, next, env.pool, env.tx, env.counters);
    if env.trace.on() {
        let rel = super::trace::rel(tcb, seq);
        env.trace.event(env.now, tcb, super::trace::Event::Sent { seq: rel, len, retransmit });
    }
    let end = seq + len + fin as u32;
    if retransmit {
        tcb.stats.retransmits += 1;
        env.counters.retransmitted += 1;
        if let Some((rs, _)) = tcb.rtt_seq {
            if rs >= seq && rs < end {
                tcb.rtt_seq = None; // Karn's rule
            }
        }
    } else if !tcb.ts_enabled && tcb.rtt_seq.is_none() {
        tcb.rtt_seq = Some((seq, env.now));
    }
    tcb.stats.bytes_sent += len as u64;
    tcb.last_send = env.now;
    // Linux `tcp_minshall_update`: remember where the last short segment ends (an offload
    // unit is short when its last piece is).
    if !retransmit && len < pieces as u32 * mss {
        tcb.snd_sml = seq + len;
    }
    // Linux `tcp_event_data_sent`: data sent within the delayed-ACK time of the last data
    // received answers it; the connection is interactive, and its ACKs ride on its data.
    if let (true, Some(t)) = (tcb.quickack.enabled, tcb.quickack.last_data) {
        if env.now.saturating_duration_since(t) < env.config.delayed_ack {
            tcb.quickack.pingpong = true;
        }
    }
    if retransmit {
        if let Some(r) = tcb.recovery.as_mut() {
            r.high_rxt = r.high_rxt.max(seq + len);
            super::recovery::note_retransmit(tcb, seq, seq + len, h.ts.map_or(0, |t| t.0));
        }
    }
    if idx >= tcb.snd_nxt_idx {
        tcb.snd_nxt = tcb.snd_nxt.max(end);
        tcb.snd_nxt_idx = idx + pieces;
    }
    tcb.snd_max = tcb.snd_max.max(end);
    arm_rexmt(env, tcb);
    // An ACK owed by quick-ACK mode rode on data: no quick ACK was needed for it.
    tcb.quickack.owed = false;
    acked_sent(env, tcb, h.ack);
    // The device sends `pieces` segments (as Linux counts tcp_skb_pcount).
    tcb.stats.segs_out += pieces as u64 - 1;
    env.counters.segs_out += pieces as u64 - 1;
    true
}

/// Hand a finished TCP segment that nothing retains to the interface. Returns whether it
/// went out (or waits for ARP).
fn ship(env: &mut Env, tuple: FourTuple, hop: &mut Option<CachedHop>, mut buf: PBuf) -> bool {
    match env.iface.encapsulate(env.now, &mut buf, tuple.local_addr, tuple.remote_addr, IpProtocol::TCP, hop) {
        Ok(NextHop::Unreachable) => {
            env.counters.drop(DropReason::NotForUs);
            false
        }
        Ok(next) => {
            env.iface.link_output(env.now, buf, next, env.pool, env.tx, env.counters);
            true
        }
        Err(_) => {
            env.counters.drop(DropReason::NoBuffer);
            false
        }
    }
}

/// An RST answering `seg` (RFC 9293 §3.10.7.1): `<SEQ=seq><CTL=RST>` when `seq` is given
/// (with `<ACK=ack>` and the ACK bit when `ack` is), else `<SEQ=SEG.ACK><CTL=RST>` if the
/// segment had ACK, else `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`. Never answers an RST.
pub(crate) fn send_reset(env: &mut Env, seg: &Segment, seq: Option<SeqNumber>, ack: Option<SeqNumber>) {
    if seg.flags.contains(TcpFlags::RST) {
        return;
    }
    let (seq, ack, flags) = match (seq, ack) {
        (Some(s), Some(a)) => (s, a, TcpFlags::RST | TcpFlags::ACK),
        (Some(s), None) => (s, SeqNumber(0), TcpFlags::RST),
        (None, _) if seg.flags.contains(TcpFlags::ACK) => (seg.ack, SeqNumber(0), TcpFlags::RST),
        (None, _) => (SeqNumber(0), seg.seq + seg.seg_len(), TcpFlags::RST | TcpFlags::ACK),
    };
    let tuple =
        FourTuple { local_addr: seg.dst, local_port: seg.dst_port, remote_addr: seg.src, remote_port: seg.src_port };
    send_rst_raw(env, tuple, seq, ack, flags);
}

/// Abort a connection: `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=RST,ACK>` (RFC 9293 §3.10.4, as Linux).
/// SND.NXT in the RFC's sense: past everything sent (`snd_max`), not the go-back-N pointer a
/// retransmission timeout moved back to SND.UNA, or the RST lands below the peer's RCV.NXT
/// and is dropped (Linux `tcp_acceptable_seq`; FreeBSD sends a bare RST at `snd_max`).
pub(crate) fn send_abort(env: &mut Env, tcb: &Tcb) {
    send_rst_raw(env, tcb.tuple, tcb.snd_max, tcb.rcv_nxt, TcpFlags::RST | TcpFlags::ACK);
}

fn send_rst_raw(env: &mut Env, tuple: FourTuple, seq: SeqNumber, ack: SeqNumber, flags: TcpFlags) {
    let Ok(mut buf) = env.pool.alloc_small() else {
        env.counters.drop(DropReason::NoBuffer);
        return;
    };
    let h = Hdr {
        seq,
        ack,
        flags,
        window: 0,
        mss: None,
        wscale: None,
        sack_permitted: false,
        ts: None,
        sack: SackBlocks::new(),
        urgent: 0,
    };
    if prepend_tcp(&mut buf, &tuple, &h, Some(0)).is_err() {
        return;
    }
    if ship(env, tuple, &mut None, buf) {
        env.counters.resets_sent += 1;
        env.counters.segs_out += 1;
    }
}
