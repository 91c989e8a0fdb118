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
use super::header::{words, write_words};
use super::output::{acked_sent, arm_rexmt, window_field, Fields};
use super::stats::DropReason;
use super::tcb::Tcb;
use crate::iface::push;
use crate::wire::{IpProtocol, TcpFlags};

/// Whether the next header of `tcb` would carry no option but timestamps and may cover
/// everything received: no SACK block owed (RFC 2018 §4, RFC 2883 §4) and no data queued
/// unverified (an ACK must not cover unchecked bytes). One test of three fields.
#[inline(always)]
pub(super) fn plain_ack_predicted(tcb: &Tcb) -> bool {
    tcb.rcv_unverified == 0 && !(tcb.sack_enabled && (tcb.dsack.is_some() || !tcb.ooo.is_empty()))
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
/// buffer ours alone with its payload sum cached, no SACK block owed, no trace, and the
/// hop's headers prebuilt.
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
    let payload_sum = seg.buf.cached_sum_from(0)?;
    let (src, dst) = (tcb.tuple.local_addr, tcb.tuple.remote_addr);
    let (w, hl) = words(&tcb.tuple, seq, f.ack, flags, f.window, f.ts, len as usize, Some(payload_sum));
    let (pre, ident) = env.iface.prebuilt(env.now, &tcb.hop, src, dst, IpProtocol::TCP)?;
    let below = pre.len();
    let Ok(out) = seg.buf.prepend(below + hl) else {
        env.counters.drop(DropReason::NoBuffer);
        return Some(false);
    };
    let (link_ip, tcp) = out.split_at_mut(below);
    pre.write(link_ip, hl + len as usize, ident);
    write_words(tcp, &w);
    let frame = seg.buf.share();
    // The queue's view goes back to the payload; the frame's view has the headers.
    let _ = seg.buf.trim_front(hl + below);
    seg.sent = 1;
    seg.sent_at = env.now;
    push(env.tx, frame, env.counters);
    // `send_data`'s bookkeeping for a first transmission of one segment without FIN.
    let end = seq + len;
    if !tcb.ts_enabled && tcb.rtt_seq.is_none() {
        tcb.rtt_seq = Some((seq, env.now));
    }
    tcb.stats.bytes_sent += len as u64;
    tcb.last_send = env.now;
    if len < mss {
        tcb.snd_sml = end;
    }
    if let (true, Some(t)) = (tcb.quickack.enabled, tcb.quickack.last_data) {
        if env.now.saturating_duration_since(t) < env.config.delayed_ack {
            tcb.quickack.pingpong = true;
        }
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
