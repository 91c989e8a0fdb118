//! The predicted transmit path: Jacobson's header template (1993) on the way out.
//!
//! Once a connection is established and its next hop's link and IPv4 headers are prebuilt
//! (`iface::Prebuilt` in its `CachedHop`), nearly every segment it sends is an ACK with no
//! option but timestamps: the headers below TCP are a copy and three stores, the TCP header
//! is eight words of which the ports, the timestamp prefix and the pseudo-header are the
//! same for every segment, and the checksum is their sum with what changed. This module
//! writes such a segment straight from the connection's fields, without the `Hdr` the
//! general build fills in and reads back; anything unusual (SACK blocks owed, data whose
//! checksum is still unverified, a hop to resolve) makes the prediction fail before any
//! state changed, and the caller takes the general path (`output::send_bare`).

use super::env::Env;
use super::header::{words, write_words, Template};
use super::output::{acked_sent, arm_rexmt, mark_partial, minshall_holds, partial_sums, window_field, Fields};
use super::seq::SeqNumber;
use super::stats::DropReason;
use super::tcb::{State, Tcb, TxSeg};
use crate::buf::BufError;
use crate::iface::push;
use crate::wire::{IpProtocol, TcpFlags};

/// Whether the next header of `tcb` would carry no option but timestamps and may cover
/// everything received: no SACK block owed (RFC 2018 §4, RFC 2883 §4) and no data queued
/// unverified (an ACK must not cover unchecked bytes), and not in urgent mode (the
/// general build writes URG and the urgent pointer).
#[inline(always)]
pub(super) fn plain_ack_predicted(tcb: &Tcb) -> bool {
    tcb.rcv_unverified == 0
        && !(tcb.sack_enabled && (tcb.dsack.is_some() || !tcb.ooo.is_empty()))
        && tcb.snd_up.is_none()
}

/// The pure ACK `output` owes (`<SEQ=SND.MAX><ACK=RCV.NXT><CTL=ACK>`, as `send_bare` sends
/// it) in one pass: `None` if the prediction fails (nothing was done), else whether it went
/// out (`Some(false)`: no buffer, counted as `send_bare` counts it).
#[inline]
pub(super) fn pure_ack(env: &mut Env, tcb: &mut Tcb) -> Option<bool> {
    if !plain_ack_predicted(tcb) {
        return None;
    }
    let Ok(mut buf) = env.pool.alloc_small() else {
        env.counters.drop(DropReason::NoBuffer);
        return Some(false);
    };
    let (src, dst) = (tcb.tuple.local_addr, tcb.tuple.remote_addr);
    // The buffer goes back to the pool if the hop has no prebuilt headers.
    let (pre, ident) = env.iface.prebuilt(env.now, &tcb.hop, src, dst, IpProtocol::TCP)?;
    let hl = if tcb.ts_enabled { 32 } else { 20 };
    let below = pre.len();
    let Ok(out) = buf.prepend(below + hl) else {
        env.counters.drop(DropReason::NoBuffer);
        return Some(false);
    };
    let (link_ip, tcp) = out.split_at_mut(below);
    pre.write(link_ip, hl, ident);
    // The fields in the order `common_hdr` takes them.
    let ack = tcb.ack_seq();
    let ts = tcb.ts_enabled.then(|| (tcb.ts_now(env.now), tcb.ts_recent));
    let window = window_field(tcb, ack, false);
    let (w, _) = words(&tcb.tuple, tcb.snd_max, ack, TcpFlags::ACK, window, ts, 0, Some(0));
    write_words(tcp, &w);
    push(env.tx, buf, env.counters);
    acked_sent(env, tcb, ack);
    Some(true)
}

/// Send segment `idx` of the send queue, new data of at most one MSS without FIN, as
/// `output::send_data` would, in one pass: `None` if the prediction fails, after at most the
/// pass's header fields were taken (`memo`, which `send_data` then reuses: it would have
/// taken the same ones), else whether it went out. The prediction: never sent (no retransmission bookkeeping), the
/// buffer ours alone with its payload sum cached (unless the device completes the checksum,
/// `output::partial_sums`), no SACK block owed, no trace, and the hop's headers prebuilt.
#[inline]
pub(super) fn data_segment(env: &mut Env, tcb: &mut Tcb, idx: usize, memo: &mut Option<Fields>) -> Option<bool> {
    if env.trace.on() || !plain_ack_predicted(tcb) {
        return None;
    }
    // `pass_hdr` without SACK blocks (none are owed): the first segment of a pass takes the
    // fields, the others reuse them; so does `send_data` if the prediction fails below.
    let f = match *memo {
        // The same test as `pass_hdr`'s (with SACK off, out-of-order data also stops reuse).
        Some(f) if tcb.ooo.is_empty() && tcb.dsack.is_none() => f,
        _ => {
            let ack = tcb.ack_seq();
            let ts = tcb.ts_enabled.then(|| (tcb.ts_now(env.now), tcb.ts_recent));
            let window = window_field(tcb, ack, false);
            let f = Fields { ack, window, ts };
            *memo = Some(f);
            f
        }
    };
    let mss = tcb.eff_mss as u32;
    let flags = if idx + 1 == tcb.sndq.len() { TcpFlags::ACK | TcpFlags::PSH } else { TcpFlags::ACK };
    // One lookup in the queue; the hop and the tuple are other fields of the TCB.
    let seg = tcb.sndq.get_mut(idx)?;
    let (seq, len) = (seg.seq, seg.len());
    if len > mss || seg.sent > 0 || !seg.buf.is_unique() {
        return None;
    }
    // The payload's cached sum, unless the device completes the checksum.
    let partial = partial_sums(env);
    let payload_sum = if partial { None } else { Some(seg.buf.cached_sum_from(0)?) };
    let (src, dst) = (tcb.tuple.local_addr, tcb.tuple.remote_addr);
    let (w, hl) = words(&tcb.tuple, seq, f.ack, flags, f.window, f.ts, len as usize, payload_sum);
    let (pre, ident) = env.iface.prebuilt(env.now, &tcb.hop, src, dst, IpProtocol::TCP)?;
    let below = pre.len();
    let Ok(out) = seg.buf.prepend(below + hl) else {
        env.counters.drop(DropReason::NoBuffer);
        return Some(false);
    };
    let (link_ip, tcp) = out.split_at_mut(below);
    pre.write(link_ip, hl + len as usize, ident);
    write_words(tcp, &w);
    send_first(env, seg, hl, below, partial);
    // `send_data`'s bookkeeping for a first transmission of one segment without FIN.
    let end = seq + len;
    sent_new_data(env, tcb, seq, len as u64);
    if len < mss {
        tcb.snd_sml = end;
    }
    if idx >= tcb.snd_nxt_idx {
        tcb.snd_nxt = tcb.snd_nxt.max(end);
        tcb.snd_nxt_idx = idx + 1;
    }
    tcb.snd_max = tcb.snd_max.max(end);
    arm_rexmt(env, tcb);
    tcb.quickack.owed = false;
    acked_sent(env, tcb, f.ack);
    Some(true)
}

/// The sending half of `output` for a connection that sends new data in order, in one pass
/// with the per-pass work done once: the header template made at the first segment (the
/// ACK, window and timestamps every segment of the pass carries), the hop's headers checked
/// once, and the bookkeeping after the loop (RTT timing, counters, the quick-ACK state,
/// the retransmission timer). Each segment is then its checks, a copy of the prebuilt link
/// and IPv4 headers, eight TCP words and the push to the transmit ring.
///
/// The prediction: a state that sends data (established or close-wait, or either closed by
/// us with the FIN still queued), something unsent, nothing sent back over (`snd_nxt ==
/// snd_max`), no retransmission owed, no recovery and no duplicate ACKs (so no limited
/// transmit), no restart after idle, no trace, and a plain ACK owed
/// ([`plain_ack_predicted`]). Returns whether segments went out and whether the general
/// path (`output::send_owed`) has nothing left to do: it stopped where that path stops (the
/// ring full, the queue sent, the window shut, Nagle holding the last short segment, no
/// headroom). At anything else (a segment over one MSS, sent before, shared, or without a
/// cached sum where one is needed; the last segment when the FIN goes with it; a window
/// that allows a partial segment) it stops with the connection's state as the general path
/// would have left it after the same segments.
#[inline]
pub(super) fn send_new(env: &mut Env, tcb: &mut Tcb) -> (bool, bool) {
    let first = tcb.snd_nxt_idx;
    if !matches!(tcb.state, State::Established | State::CloseWait | State::FinWait1 | State::LastAck)
        || first >= tcb.sndq.len()
        || tcb.snd_nxt != tcb.snd_max
        || tcb.rexmt_now.is_some()
        || tcb.recovery.is_some()
        || tcb.dupacks != 0
        || env.trace.on()
        || !plain_ack_predicted(tcb)
    {
        return (false, false);
    }
    // RFC 5681 §4.1's restart after idle is the general path's.
    if tcb.snd_max == tcb.snd_una
        && tcb.stats.bytes_sent > 0
        && env.now.nanos_since(tcb.last_send) > tcb.rtt.rto_nanos()
    {
        return (false, false);
    }
    // The path MTU estimates changed since this connection last looked (`pmtu::follow`).
    if tcb.pmtu_gen != env.iface.pmtu.generation() {
        super::pmtu::follow(env.iface, tcb, env.counters);
    }
    let mss = tcb.eff_mss as u32;
    // Only ACKs and timers move the windows: one read each per pass.
    let limit = tcb.snd_wnd.min(tcb.cwnd());
    let first_seq = tcb.snd_nxt;
    let partial = partial_sums(env);
    // The first segment's checks, then the pass's template and headers.
    let mut next = match next_new(env, tcb, limit, mss, partial) {
        Ok(s) => s,
        Err(done) => return (false, done),
    };
    let (src, dst) = (tcb.tuple.local_addr, tcb.tuple.remote_addr);
    let Some(&pre) = env.iface.prebuilt_valid(env.now, &tcb.hop, src, dst, IpProtocol::TCP) else {
        return (false, false);
    };
    let ack = tcb.ack_seq();
    let ts = tcb.ts_enabled.then(|| (tcb.ts_now(env.now), tcb.ts_recent));
    let window = window_field(tcb, ack, false);
    let tmpl = Template::new(&tcb.tuple, ack, window, ts);
    let (below, hl) = (pre.len(), tmpl.hl);
    let (mut n, mut bytes) = (0u64, 0u64);
    let done = loop {
        let (seq, len, payload_sum, last) = next;
        let idx = tcb.snd_nxt_idx;
        let seg = &mut tcb.sndq[idx];
        let out = match seg.buf.prepend(below + hl) {
            Ok(out) => out,
            // A device still holds it (rare): the general path gives it a buffer of its own.
            Err(BufError::Shared) => break false,
            Err(_) => {
                env.counters.drop(DropReason::NoBuffer);
                break true;
            }
        };
        let (link_ip, tcp) = out.split_at_mut(below);
        pre.write(link_ip, hl + len as usize, env.iface.take_ident());
        tmpl.write(tcp, seq, last, len as usize, payload_sum);
        send_first(env, seg, hl, below, partial);
        let end = seq + len;
        tcb.snd_nxt = end;
        tcb.snd_max = end;
        tcb.snd_nxt_idx = idx + 1;
        if len < mss {
            tcb.snd_sml = end;
        }
        n += 1;
        bytes += len as u64;
        next = match next_new(env, tcb, limit, mss, partial) {
            Ok(s) => s,
            Err(done) => break done,
        };
    };
    if n == 0 {
        return (false, done);
    }
    // `send_data`'s bookkeeping after first transmissions without FIN, once for the pass.
    sent_new_data(env, tcb, first_seq, bytes);
    arm_rexmt(env, tcb);
    tcb.quickack.owed = false;
    acked_sent(env, tcb, ack);
    // `acked_sent` counted one segment; the others.
    tcb.stats.segs_out += n - 1;
    env.counters.segs_out += n - 1;
    env.counters.fast_path_sends += n;
    (true, done)
}

/// The next segment [`send_new`] may send: its sequence number, length, payload sum (none
/// if `partial`: the device completes the checksum) and whether it is the queue's last; or
/// where the pass stops, as `Err(done)` (see there).
#[inline(always)]
#[allow(clippy::type_complexity)]
fn next_new(
    env: &Env,
    tcb: &Tcb,
    limit: u32,
    mss: u32,
    partial: bool,
) -> Result<(SeqNumber, u32, Option<u16>, bool), bool> {
    if env.tx.is_full() {
        return Err(true);
    }
    let idx = tcb.snd_nxt_idx;
    // The queue sent, and no FIN queued: nothing more.
    let seg = tcb.sndq.get(idx).ok_or(true)?;
    let (seq, len) = (seg.seq, seg.len());
    if seq != tcb.snd_nxt || len > mss || seg.sent > 0 {
        return Err(false);
    }
    let payload_sum = if partial { None } else { Some(seg.buf.cached_sum_from(0).ok_or(false)?) };
    let last = idx + 1 == tcb.sndq.len();
    // The FIN goes with the last segment: the general path sends it.
    if last && tcb.fin_queued {
        return Err(false);
    }
    // The windows; where the general path may still send part of a segment (RFC 9293
    // §3.8.6.2.1's sender SWS avoidance), it does.
    let usable = limit.saturating_sub(seq.since(tcb.snd_una));
    if len > usable {
        return Err(!(usable > 0 && (usable >= mss || usable >= tcb.max_snd_wnd / 2)));
    }
    // Nagle with Minshall's refinement, as `send_in_order` holds a short last segment.
    if len < mss && last && !tcb.opts.nodelay && minshall_holds(tcb) {
        return Err(true);
    }
    Ok((seq, len, payload_sum, last))
}

/// A segment's first transmission, its headers (TCP's `hl` bytes and `below` them the link
/// and IPv4 headers) just written in front of its payload: the device gets a shared handle
/// to the frame (marked for it to complete the checksum if `partial`), the queue's view goes
/// back to the payload, and the segment is marked sent now.
#[inline(always)]
fn send_first(env: &mut Env, seg: &mut TxSeg, hl: usize, below: usize, partial: bool) {
    let mut frame = seg.buf.share();
    if partial {
        mark_partial(&mut frame, below);
    }
    let _ = seg.buf.trim_front(hl + below);
    seg.sent = 1;
    seg.sent_at = env.now;
    push(env.tx, frame, env.counters);
}

/// `send_data`'s bookkeeping after new data from `seq` on (`bytes` of it) went out for the
/// first time: an RTT sample started if none runs without timestamps, the counters, the
/// time of the last send, and Linux's `tcp_event_data_sent` (data sent within the
/// delayed-ACK time of the last data received answers it: the connection is interactive).
#[inline(always)]
fn sent_new_data(env: &Env, tcb: &mut Tcb, seq: SeqNumber, bytes: u64) {
    if !tcb.ts_enabled && tcb.rtt_seq.is_none() {
        tcb.rtt_seq = Some((seq, env.now));
    }
    tcb.stats.bytes_sent += bytes;
    tcb.last_send = env.now;
    if let (true, Some(t)) = (tcb.quickack.enabled, tcb.quickack.last_data) {
        if env.now.saturating_duration_since(t) < env.config.delayed_ack {
            tcb.quickack.pingpong = true;
        }
    }
}
