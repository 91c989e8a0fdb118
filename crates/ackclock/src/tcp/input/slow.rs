//! The full input path: RFC 9293 §3.10.7, with RFC 5961's defences, RFC 7323's PAWS and
//! RFC 2018/2883's SACK and D-SACK generation.
//!
//! The order of checks is the RFC's: sequence number, RST, SYN, ACK, text, FIN. Each rule
//! cites its section. A segment that reaches here has a verified checksum, except in-order
//! data with nothing else in it (see [`super::deferred`]): its payload checksum is checked during
//! the copy to the application, and until then the ACKs we send do not cover it.

use super::*;
use crate::buf::PBuf;
use crate::tcp::env::Env;
use crate::tcp::output;
use crate::tcp::recovery;
use crate::tcp::seq::SeqNumber;
use crate::tcp::stats::DropReason;
use crate::tcp::tcb::{ConnError, RxSeg, State, Tcb, Unverified};
use crate::tcp::trace;
use crate::time::{Duration, Instant};
use crate::wire::TcpFlags;

/// `a` is older than `b` in timestamp space (RFC 7323 §5.2: compared modulo 2^32).
#[inline]
pub(crate) fn ts_older(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// RFC 7323 §5.5: TS.Recent is invalid after 24 days of idleness.
const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);

/// SYN-SENT (RFC 9293 §3.10.7.3).
pub(crate) fn syn_sent(env: &mut Env, tcb: &mut Tcb, seg: &Segment, payload: PBuf) -> Outcome {
    let f = seg.flags;
    let mut ack_ok = false;
    if f.contains(TcpFlags::ACK) {
        // First: the ACK must acknowledge our SYN.
        if seg.ack <= tcb.iss || seg.ack > tcb.snd_max {
            if !f.contains(TcpFlags::RST) {
                output::send_reset(env, seg, Some(seg.ack), None);
            }
            env.counters.drop(DropReason::BadAck);
            return Outcome::Keep;
        }
        ack_ok = tcb.snd_una < seg.ack && seg.ack <= tcb.snd_max;
    }
    if f.contains(TcpFlags::RST) {
        // Second: an RST is believed only with an acceptable ACK (RFC 5961 §3.2 for this state).
        if ack_ok {
            env.counters.resets_received += 1;
            env.counters.failed_opens += 1;
            tcb.error = Some(ConnError::Refused);
            tcb.state = State::Closed;
            return Outcome::Delete;
        }
        env.counters.drop(DropReason::BadRst);
        return Outcome::Keep;
    }
    if !f.contains(TcpFlags::SYN) {
        env.counters.drop(DropReason::Discarded);
        return Outcome::Keep;
    }
    // Fourth: the SYN.
    tcb.irs = seg.seq;
    tcb.rcv_nxt = seg.seq + 1;
    tcb.rcv_nxt_pos = 0;
    tcb.rcv_adv = tcb.rcv_nxt;
    negotiate(env, tcb, seg);
    if ack_ok {
        // Our SYN is acknowledged: ESTABLISHED. The SYN's window is never scaled (RFC 7323 §2.2).
        tcb.state = State::Established;
        ack_advance(env, tcb, seg.ack, seg.ts);
        tcb.rtt.syn_fallback();
        tcb.snd_wnd = seg.wnd as u32;
        tcb.max_snd_wnd = tcb.snd_wnd;
        tcb.snd_wl1 = seg.seq;
        tcb.snd_wl2 = seg.ack;
        tcb.owe_ack();
        // Data on a SYN-ACK is rare; take it through the ordinary text processing.
        if seg.len > 0 || seg.flags.contains(TcpFlags::FIN) {
            let mut rest = *seg;
            rest.seq = seg.seq + 1;
            rest.flags = seg.flags & !TcpFlags::SYN;
            return text_and_fin(env, tcb, &rest, payload, None);
        }
        Outcome::Keep
    } else {
        // Simultaneous open (RFC 9293 §3.5 figure 7): SYN-RECEIVED, send SYN,ACK.
        tcb.state = State::SynReceived;
        tcb.snd_nxt = tcb.iss;
        tcb.snd_wnd = seg.wnd as u32;
        tcb.snd_wl1 = seg.seq;
        tcb.snd_wl2 = seg.ack;
        Outcome::Keep
    }
}

/// Record the options of the peer's SYN (RFC 9293 §3.7.1, RFC 7323 §1.3, RFC 2018 §2).
/// Window scaling and timestamps are on only if both SYNs carried them.
pub(crate) fn negotiate(env: &mut Env, tcb: &mut Tcb, seg: &Segment) {
    // RFC 9293 §3.7.1: 536 when the option is absent (RFC 9293 §3.7.1, RFC 6691).
    tcb.smss = seg.mss.unwrap_or(536).clamp(64, tcb.rmss.max(64));
    // A path MTU learned from another connection to the peer bounds this one from the
    // start (RFC 1191 §5); what the handshake set is what it may grow back to.
    tcb.mss_clamp = tcb.smss;
    tcb.smss = super::super::pmtu::bounded(env.iface, tcb);
    match seg.wscale {
        Some(ws) if env.config.window_scaling => {
            tcb.snd_wscale = ws.min(14);
            tcb.wscale_ok = true;
        }
        _ => {
            tcb.snd_wscale = 0;
            tcb.rcv_wscale = 0;
            tcb.wscale_ok = false;
        }
    }
    tcb.sack_enabled = env.config.sack && seg.sack_permitted;
    match seg.ts {
        Some((tsval, _)) if env.config.timestamps => {
            tcb.ts_enabled = true;
            tcb.ts_recent = tsval;
            tcb.ts_recent_age = env.now;
        }
        _ => tcb.ts_enabled = false,
    }
    tcb.set_smss(tcb.smss);
    // Nothing is sent yet: the window starts from the negotiated segment size.
    tcb.cc = tcb.opts.congestion.build(tcb.eff_mss as u32, env.config.initial_window);
}

/// Every state after SYN-SENT (RFC 9293 §3.10.7.4).
pub(crate) fn synchronized(
    env: &mut Env,
    tcb: &mut Tcb,
    seg: &Segment,
    payload: PBuf,
    unverified: Option<Unverified>,
) -> Outcome {
    let f = seg.flags;
    if unverified.is_none() {
        verify_pending(env, tcb);
    }
    tcb.last_rcv = env.now;
    tcb.keepalive_probes = 0;

    // RFC 7323 §5.3 R1: PAWS, before the sequence check. A reordered duplicate ACK is let
    // through, as Linux's `tcp_disordered_ack` does: it changes nothing, and dropping it
    // would only hide a duplicate ACK from loss detection.
    if let (true, Some((tsval, _))) = (tcb.ts_enabled, seg.ts) {
        if !f.contains(TcpFlags::RST) && ts_older(tsval, tcb.ts_recent) && !disordered_ack(tcb, seg, tsval) {
            if env.now.saturating_duration_since(tcb.ts_recent_age) > PAWS_IDLE {
                // R3: TS.Recent is stale; take the new one.
                tcb.ts_recent = tsval;
                tcb.ts_recent_age = env.now;
            } else {
                env.counters.drop(DropReason::Paws);
                // RFC 7323 §5.3: acknowledge and drop; dataless ones at the out-of-window
                // rate (Linux), or two ends whose TS.Recent was poisoned by a forged
                // segment would ACK each other's drops forever.
                if oow_exempt(seg) || oow_ack_allowed(env, tcb) {
                    tcb.owe_ack();
                }
                return Outcome::Keep;
            }
        }
    }

    // First: is the segment acceptable? (RFC 9293 §3.10.7.4, the four cases.)
    // RCV.WND: up to the right edge we advertised (never negative, even if rcv_nxt
    // reached it).
    let rcv_wnd = if tcb.rcv_adv > tcb.rcv_nxt { tcb.rcv_adv.since(tcb.rcv_nxt) } else { 0 };
    let seg_len = seg.seg_len();
    let acceptable = match (seg_len, rcv_wnd) {
        (0, 0) => seg.seq == tcb.rcv_nxt,
        (0, _) => seg.seq.in_range(tcb.rcv_nxt, tcb.rcv_nxt + rcv_wnd),
        (_, 0) => false,
        (_, _) => {
            seg.seq.in_range(tcb.rcv_nxt, tcb.rcv_nxt + rcv_wnd)
                || (seg.seq + seg_len - 1).in_range(tcb.rcv_nxt, tcb.rcv_nxt + rcv_wnd)
        }
    };
    // A zero window still takes the ACK, RST and window of a segment at rcv_nxt
    // ("special allowance should be made to accept valid ACKs, URGs, and RSTs").
    let zero_window_probe = !acceptable && rcv_wnd == 0 && seg.seq == tcb.rcv_nxt;
    if !acceptable && !zero_window_probe {
        if tcb.state == State::SynReceived && f.contains(TcpFlags::SYN) && seg.seq == tcb.irs {
            if f.contains(TcpFlags::ACK) && tcb.snd_una < seg.ack && seg.ack <= tcb.snd_max {
                // Simultaneous open (RFC 9293 §3.5 figure 7, line 6): the peer's SYN-ACK
                // acknowledges our SYN: ESTABLISHED, and acknowledge its SYN.
                tcb.state = State::Established;
                ack_advance(env, tcb, seg.ack, seg.ts);
                tcb.rtt.syn_fallback();
                // A SYN-ACK's window is never scaled (RFC 7323 §2.2).
                tcb.snd_wnd = seg.wnd as u32;
                tcb.max_snd_wnd = tcb.snd_wnd;
                tcb.snd_wl1 = seg.seq;
                tcb.snd_wl2 = seg.ack;
                tcb.owe_ack();
                return if tcb.listener.is_some() { Outcome::Established } else { Outcome::Keep };
            }
            // A retransmitted SYN: our SYN-ACK was lost; send it again.
            tcb.snd_nxt = tcb.iss;
            return Outcome::Keep;
        }
        if tcb.state == State::TimeWait && f.contains(TcpFlags::SYN) && !f.contains(TcpFlags::ACK) {
            if let Some(o) = time_wait_syn(tcb, seg) {
                return o;
            }
        }
        if f.contains(TcpFlags::SYN) && !f.contains(TcpFlags::RST) {
            // RFC 5961 §4.2: a SYN in a synchronized state draws a (rate-limited) challenge
            // ACK whatever its sequence number.
            challenge_ack(env, tcb);
            env.counters.drop(DropReason::OutOfWindow);
            return Outcome::Keep;
        }
        if tcb.state == State::TimeWait && f.contains(TcpFlags::FIN) && !f.contains(TcpFlags::RST) {
            // A retransmitted FIN: our last ACK was lost. ACK again and restart 2 MSL
            // (RFC 9293 §3.10.7.4, TIME-WAIT; Linux TCP_TW_ACK).
            enter_time_wait(env, tcb);
        }
        if !f.contains(TcpFlags::RST) {
            // A segment with data or a FIN always gets its ACK (it may be a retransmission
            // whose ACK was lost); one that occupies no sequence space at most every 500 ms,
            // so that two ends that disagree cannot ping-pong ACKs (Linux
            // `tcp_oow_rate_limited`: `seq != end_seq`).
            if oow_exempt(seg) || oow_ack_allowed(env, tcb) {
                tcb.owe_ack();
            }
            // A duplicate of data we already have: report it with a D-SACK (RFC 2883 §4).
            if seg.len > 0 && tcb.sack_enabled && seg.seq < tcb.rcv_nxt {
                let end = (seg.seq + seg.len).min(tcb.rcv_nxt);
                tcb.dsack = Some((seg.seq, end));
            }
        }
        env.counters.drop(DropReason::OutOfWindow);
        return Outcome::Keep;
    }

    // Second: RST (RFC 5961 §3.2): only an exact match resets; in-window draws a challenge.
    if f.contains(TcpFlags::RST) {
        if seg.seq != tcb.rcv_nxt {
            challenge_ack(env, tcb);
            env.counters.drop(DropReason::BadRst);
            return Outcome::Keep;
        }
        env.counters.resets_received += 1;
        return match tcb.state {
            State::SynReceived if tcb.listener.is_some() => {
                // Passive open: back to LISTEN, which for us means forgetting this attempt.
                tcb.state = State::Closed;
                Outcome::Delete
            }
            State::SynReceived => {
                tcb.error = Some(ConnError::Refused);
                env.counters.failed_opens += 1;
                tcb.state = State::Closed;
                Outcome::Delete
            }
            State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait => {
                tcb.error = Some(ConnError::Reset);
                env.counters.established_resets += 1;
                tcb.state = State::Closed;
                Outcome::Delete
            }
            _ => {
                tcb.state = State::Closed;
                Outcome::Delete
            }
        };
    }

    // Fourth: SYN. A passively opened SYN-RECEIVED connection returns to LISTEN (RFC 9293
    // §3.10.7.4), which for us means forgetting this attempt.
    if f.contains(TcpFlags::SYN) && tcb.state == State::SynReceived && tcb.listener.is_some() {
        tcb.state = State::Closed;
        return Outcome::Delete;
    }
    // In a synchronized state (RFC 5961 §4): challenge ACK, never a reset.
    if f.contains(TcpFlags::SYN) {
        if tcb.state == State::TimeWait {
            if let Some(o) = time_wait_syn(tcb, seg) {
                return o;
            }
        }
        challenge_ack(env, tcb);
        env.counters.drop(DropReason::Discarded);
        return Outcome::Keep;
    }

    // RFC 7323 §4.3 (2) / §5.3 R3: any verified segment at or before Last.ACK.sent.
    if let (true, Some((tsval, _)), None) = (tcb.ts_enabled, seg.ts, unverified) {
        if seg.seq <= tcb.last_ack_sent && !ts_older(tsval, tcb.ts_recent) {
            tcb.ts_recent = tsval;
            tcb.ts_recent_age = env.now;
        }
    }
    // Fifth: the ACK field.
    if !f.contains(TcpFlags::ACK) {
        env.counters.drop(DropReason::Discarded);
        return Outcome::Keep;
    }
    let mut outcome = Outcome::Keep;
    if tcb.state == State::SynReceived {
        if tcb.snd_una < seg.ack && seg.ack <= tcb.snd_max {
            tcb.state = State::Established;
            tcb.rtt.syn_fallback();
            tcb.snd_wnd = (seg.wnd as u32) << tcb.snd_wscale;
            tcb.max_snd_wnd = tcb.snd_wnd;
            tcb.snd_wl1 = seg.seq;
            tcb.snd_wl2 = seg.ack;
            outcome = if tcb.listener.is_some() { Outcome::Established } else { Outcome::Keep };
        } else {
            output::send_reset(env, seg, Some(seg.ack), None);
            env.counters.drop(DropReason::BadAck);
            return Outcome::Keep;
        }
    }
    // RFC 5961 §5.2: acceptable ACKs lie in [SND.UNA - MAX.SND.WND, SND.NXT].
    let too_old = seg.ack < tcb.snd_una - tcb.max_snd_wnd.max(1).min(i32::MAX as u32);
    if seg.ack > tcb.snd_max || too_old {
        // Both get an ACK through the challenge-ACK budget (RFC 5961 §5.2, §7), never one
        // per segment: a peer acknowledging data we never sent must not start an ACK loop.
        challenge_ack(env, tcb);
        env.counters.drop(DropReason::BadAck);
        return outcome;
    }
    // Any acceptable ACK proves the peer alive: zero-window probing starts counting again.
    tcb.probes_out = 0;
    if tcb.sack_enabled {
        tcb.stats.sack_blocks += seg.sack.len() as u64;
    }
    let (sacked_new, spurious) = recovery::update_scoreboard(tcb, seg, env.counters);
    if let Some((l, r)) = spurious {
        // RFC 2883 §4: the receiver got something we retransmitted twice; absent network
        // duplication, the retransmission was unnecessary.
        tcb.stats.spurious_retransmits += 1;
        recovery::on_dsack(env, tcb, l, r);
    }
    if tcb.snd_una < seg.ack {
        ack_advance(env, tcb, seg.ack, seg.ts);
        // RFC 6675 §2, §5: an ACK that SACKs new data is a duplicate ACK "regardless of its
        // status as a cumulative acknowledgment": DupAcks, reset by the advance, counts it,
        // and IsLost(HighACK + 1) may start recovery now.
        if sacked_new && tcb.recovery.is_none() && tcb.snd_una != tcb.snd_max {
            recovery::on_dupack(env, tcb, true);
        }
    } else {
        // RFC 6675 §2: with SACK, a duplicate ACK is one that SACKs something new, "even if
        // it carries new data, changes the advertised window" (RFC 5681 §2's five
        // conditions otherwise); repeated or bogus blocks are not evidence of loss.
        let sack_dup = sacked_new && seg.ack == tcb.snd_una && tcb.snd_max != tcb.snd_una;
        if sack_dup || (recovery::is_dupack(tcb, seg) && (!tcb.sack_enabled || seg.sack.is_empty())) {
            recovery::on_dupack(env, tcb, sacked_new);
        }
        if sacked_new {
            // A block starting at snd_una: SACKed but not acknowledged.
            recovery::check_reneging(env, tcb);
        }
    }
    // Window update (RFC 9293 §3.10.7.4, fifth step): only from a segment newer than the
    // last one that updated it, so that an old reordered segment cannot shrink it.
    // Only an ACK that is not old (SND.UNA =< SEG.ACK; an advancing one has just moved
    // SND.UNA to it) may update the window.
    if tcb.snd_una <= seg.ack && (tcb.snd_wl1 < seg.seq || (tcb.snd_wl1 == seg.seq && tcb.snd_wl2 <= seg.ack)) {
        let wnd = (seg.wnd as u32) << tcb.snd_wscale;
        if wnd > 0 && tcb.snd_wnd == 0 {
            // The window opened: stop probing (RFC 9293 §3.8.6.1).
            tcb.timers.persist.clear();
            tcb.persist_backoff = 0;
        }
        tcb.snd_wnd = wnd;
        tcb.max_snd_wnd = tcb.max_snd_wnd.max(wnd);
        tcb.snd_wl1 = seg.seq;
        tcb.snd_wl2 = seg.ack;
    }
    if env.trace.on() {
        let sack = seg.sack.as_slice();
        let mut blocks = [(0u64, 0u64); 4];
        for (b, &(l, r)) in blocks.iter_mut().zip(sack) {
            *b = (trace::rel(tcb, SeqNumber(l)), trace::rel(tcb, SeqNumber(r)));
        }
        let ack = trace::rel(tcb, seg.ack);
        env.trace.event(env.now, tcb, trace::Event::Ack { ack, sack: blocks, sack_len: sack.len() as u8 });
        env.trace.sample(env.now, tcb);
    }
    match tcb.state {
        State::FinWait1 if tcb.fin_acked() => {
            tcb.state = State::FinWait2;
            if tcb.orphan {
                tcb.timers.keepalive.set(env.now + env.config.fin_wait_2_timeout);
            }
        }
        State::Closing if tcb.fin_acked() => enter_time_wait(env, tcb),
        State::LastAck if tcb.fin_acked() => {
            tcb.state = State::Closed;
            return Outcome::Delete;
        }
        State::TimeWait => {
            // Only a retransmitted FIN can arrive: acknowledge it and restart 2 MSL.
            if f.contains(TcpFlags::FIN) {
                tcb.owe_ack();
                enter_time_wait(env, tcb);
            }
            return Outcome::Keep;
        }
        _ => {}
    }

    // Sixth: the URG bit. After the peer's FIN (CLOSE-WAIT and later) it cannot occur,
    // and is ignored.
    if f.contains(TcpFlags::URG) && tcb.state.can_receive() {
        crate::tcp::urgent::urgent_pointer(env, tcb, seg);
    }
    let o = text_and_fin(env, tcb, seg, payload, unverified);
    if o == Outcome::Keep {
        outcome
    } else {
        o
    }
}

/// Linux `tcp_disordered_ack`: a pure duplicate ACK at rcv_nxt that would not open the
/// window further (`!tcp_may_update_window`: an ACK overtaken by a newer one usually carries
/// the smaller window the receiver offered then), whose timestamp is older than TS.Recent by
/// less than an RTO (in ms ticks). Dropping those would hide the duplicate ACKs, SACK blocks
/// and D-SACKs of a path that reorders ACKs.
fn disordered_ack(tcb: &Tcb, seg: &Segment, tsval: u32) -> bool {
    seg.flags == TcpFlags::ACK
        && seg.len == 0
        && seg.seq == tcb.rcv_nxt
        && seg.ack == tcb.snd_una
        && (seg.wnd as u32) << tcb.snd_wscale <= tcb.snd_wnd
        && (tcb.ts_recent.wrapping_sub(tsval) as u64) <= tcb.rtt.rto().as_millis() as u64
}

/// RFC 6191 / Linux `tcp_timewait_state_process`: a SYN to a TIME-WAIT connection opens a
/// new incarnation if it is unambiguously newer (higher sequence number, or a newer
/// timestamp). Only a SYN: a SYN-ACK (Linux: `th->syn && !th->rst && !th->ack`) draws the
/// challenge ACK of any other SYN (RFC 5961 §4.2) and leaves TIME-WAIT alone (RFC 1337).
fn time_wait_syn(tcb: &Tcb, seg: &Segment) -> Option<Outcome> {
    if seg.flags.intersects(TcpFlags::ACK | TcpFlags::RST) {
        return None;
    }
    let newer_ts = match (tcb.ts_enabled, seg.ts) {
        (true, Some((tsval, _))) => ts_older(tcb.ts_recent, tsval),
        _ => false,
    };
    (seg.seq > tcb.rcv_nxt || newer_ts).then_some(Outcome::Reincarnate)
}

/// Linux `tcp_oow_rate_limited`: a segment that occupies sequence space (data or a FIN:
/// `seq != end_seq`) without a SYN is not part of an ACK loop; its ACK is never rate limited.
pub(crate) fn oow_exempt(seg: &Segment) -> bool {
    seg.seg_len() > 0 && !seg.flags.contains(TcpFlags::SYN)
}

/// Linux `tcp_invalid_ratelimit`: at most one ACK per 500 ms per connection for dataless
/// out-of-window segments.
fn oow_ack_allowed(env: &Env, tcb: &mut Tcb) -> bool {
    const OOW_INTERVAL: Duration = Duration::from_millis(500);
    match tcb.last_oow_ack {
        Some(t) if env.now.saturating_duration_since(t) < OOW_INTERVAL => false,
        _ => {
            tcb.last_oow_ack = Some(env.now);
            true
        }
    }
}

/// RFC 5961 §7: challenge ACKs are rate limited stack-wide.
pub(crate) fn challenge_ack(env: &mut Env, tcb: &mut Tcb) {
    if env.challenge.allow(env.now, env.config.challenge_ack_limit) {
        env.counters.challenge_acks += 1;
        tcb.owe_ack();
    } else {
        env.counters.challenge_acks_suppressed += 1;
    }
}

/// Seventh and eighth steps: segment text and FIN.
fn text_and_fin(
    env: &mut Env,
    tcb: &mut Tcb,
    seg: &Segment,
    mut payload: PBuf,
    unverified: Option<Unverified>,
) -> Outcome {
    let mut seq = seg.seq;
    let mut len = seg.len;
    let mut fin = seg.flags.contains(TcpFlags::FIN);
    if len > 0 && !tcb.state.can_receive() {
        // CLOSE-WAIT, CLOSING, LAST-ACK, TIME-WAIT: the peer already sent its FIN.
        len = 0;
    }
    if len > 0 && tcb.shut_rd && tcb.fin_queued {
        // Linux (`tcp_rcv_state_process`, FIN-WAIT-1/2 with RCV_SHUTDOWN): data for a
        // socket closed, or shut down both ways, resets the connection. After
        // shutdown(Read) alone the data is queued as usual (Linux does not reset then).
        // SND.NXT as the peer sees it: past everything sent, even while a retransmission
        // timeout has moved the go-back-N pointer back (Linux `tcp_acceptable_seq`).
        output::send_reset(env, seg, Some(tcb.snd_max), None);
        tcb.error = Some(ConnError::Reset);
        tcb.state = State::Closed;
        return Outcome::Delete;
    }
    // Trim to the window: first what we already have, then what does not fit.
    if len > 0 && seq < tcb.rcv_nxt {
        let dup = tcb.rcv_nxt.since(seq).min(len);
        if tcb.sack_enabled {
            tcb.dsack = Some((seq, seq + dup));
        }
        let _ = payload.trim_front(dup as usize);
        seq += dup;
        len -= dup;
        tcb.owe_ack();
    }
    // What fits: up to the advertised right edge.
    let wnd_end = tcb.rcv_adv.max(tcb.rcv_nxt);
    if len > 0 && (seq + len) > wnd_end {
        let keep = if wnd_end > seq { wnd_end.since(seq) } else { 0 };
        let _ = payload.truncate(keep as usize);
        len = keep;
        fin = false;
    }
    if len > 0 {
        if seq == tcb.rcv_nxt {
            receive_in_order(env.now, env.config.delayed_ack, tcb, seq, payload, len, unverified, seg.ts);
        } else if tcb.ooo.segments() >= max_ooo_segments(tcb) || payload.pool_low() {
            // Held data above a hole may be dropped (RFC 9293 §3.10.7.4 "may be held"), and
            // is once its pool runs low: one-byte segments from a few peers, each within its
            // own bound, would otherwise hold every buffer the device receives into.
            env.counters.drop(DropReason::RcvQueueFull);
            tcb.owe_ack();
        } else {
            // Out of order (RFC 5681 §4.2: ACK at once, so the sender sees a duplicate ACK).
            // An ACK an earlier segment of this batch still owes goes first: each
            // out-of-order segment draws a duplicate ACK of its own, whose first SACK block
            // is its own (RFC 2018 §4) and whose D-SACK reports only its own duplicate (RFC
            // 2883 §4), as Linux sends one per segment; output, which runs once per batch,
            // would merge them into one, and a sender without SACK would count one
            // duplicate ACK where three segments arrived.
            if tcb.ack_now {
                let _ = output::send_bare(env, tcb, tcb.snd_max, TcpFlags::ACK);
            }
            let pos = tcb.rcv_pos(seq);
            let ins = tcb.ooo.insert(pos, payload);
            tcb.stats.ooo_segs += 1;
            if let (true, Some((s, e))) = (tcb.sack_enabled, ins.dsack()) {
                tcb.dsack = Some((tcb.pos_seq(s), tcb.pos_seq(e)));
            }
            // A FIN inside data already held is bogus; one at the end of a duplicate is the
            // segment's one new part (RFC 9293 §3.10.7.4), and is kept.
            if ins.block().is_some_and(|(_, e)| e > pos + len as u64) {
                fin = false;
            }
            tcb.owe_ack();
        }
    } else if seg.len > 0 {
        tcb.owe_ack();
    }
    if fin {
        tcb.rcv_fin = Some(seq + len);
        // A FIN above a hole is out of order too: a duplicate ACK at once (RFC 5681 §4.2).
        tcb.owe_ack();
    }
    if let Some(fin_seq) = tcb.rcv_fin {
        if fin_seq == tcb.rcv_nxt && tcb.state.can_receive() {
            return fin_arrives(env, tcb);
        }
    }
    Outcome::Keep
}

/// Pbufs the out-of-order queue may hold: enough for a full window of full-sized segments.
fn max_ooo_segments(tcb: &Tcb) -> usize {
    (tcb.opts.recv_buffer / (tcb.rmss.max(1) as usize / 2).max(1)).max(16)
}

/// Queue in-order payload, advance rcv_nxt, apply the delayed-ACK rule. Inlined into the
/// fast path: the rare parts (merging a tiny segment, draining the out-of-order queue) are
/// out of line.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn receive_in_order(
    now: Instant,
    delayed_ack: Duration,
    tcb: &mut Tcb,
    seq: SeqNumber,
    payload: PBuf,
    len: u32,
    unverified: Option<Unverified>,
    ts: Option<(u32, u32)>,
) {
    let had_ooo = !tcb.ooo.is_empty();
    if !try_merge(tcb, payload.data(), unverified.is_some()) {
        tcb.rcvq.push_frame(seq, payload, 0, len, unverified);
    }
    let checksum = if unverified.is_some() { Checksum::Deferred } else { Checksum::Verified };
    let arrival = if had_ooo { Arrival::FilledHole } else { Arrival::Next };
    in_order_received(now, delayed_ack, tcb, seq, len, checksum, ts.map(|t| t.0), arrival);
    if had_ooo {
        // Held bytes the new segment brought again are a duplicate: D-SACK them (RFC 2883
        // §4), unless a duplicate below the segment is already reported.
        if let (true, None, Some((s, e))) = (tcb.sack_enabled, tcb.dsack, tcb.ooo.first_block()) {
            if s < tcb.rcv_nxt_pos {
                let e = e.min(tcb.rcv_nxt_pos);
                tcb.dsack = Some((tcb.pos_seq(s), tcb.pos_seq(e)));
            }
        }
        drain_ooo(tcb);
    }
}

/// Whether a received segment's payload checksum is known good yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checksum {
    /// Verified (by the device or the stack).
    Verified,
    /// To be verified during the copy to the application (see `deferred`).
    Deferred,
}

/// Where in-order data landed relative to the out-of-order queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// At the end of the in-order data, nothing waiting behind it.
    Next,
    /// It filled a hole: out-of-order data waited behind it (RFC 5681 §4.2: ACK at once).
    FilledHole,
}

/// The receive state after `len` in-order bytes at `seq` joined the receive queue:
/// rcv_nxt, TS.Recent, and the delayed-ACK rule.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn in_order_received(
    now: Instant,
    delayed_ack: Duration,
    tcb: &mut Tcb,
    seq: SeqNumber,
    len: u32,
    checksum: Checksum,
    tsval: Option<u32>,
    arrival: Arrival,
) {
    let unverified = checksum == Checksum::Deferred;
    let filled_hole = arrival == Arrival::FilledHole;
    if tcb.quickack.enabled {
        quick_ack_on_data(now, tcb);
    }
    in_order_queued(tcb, len, unverified);
    in_order_ack_rule(now, delayed_ack, tcb, seq, 1, unverified, tsval, filled_hole);
}

/// The receive state of `len` in-order bytes now on the receive queue: `rcv_nxt` and the
/// queue's accounting. A deferred segment is never merged (`try_merge`): it is the newest
/// queue entry.
#[inline(always)]
pub(crate) fn in_order_queued(tcb: &mut Tcb, len: u32, unverified: bool) {
    if unverified {
        tcb.rcv_unverified += 1;
    }
    tcb.rcv_queued += len as usize;
    tcb.advance_rcv_nxt(len);
    tcb.stats.bytes_received += len as u64;
}

/// TS.Recent and the ACK rule for `segs` in-order segments, the first at `seq` (receive
/// aggregation hands over several at once, and the rule counts segments, not aggregates).
/// The quick-ACK engine ([`quick_ack_on_data`]) ran before the first was queued: it sizes
/// the quick ACKs it grants by the window as it was.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn in_order_ack_rule(
    now: Instant,
    delayed_ack: Duration,
    tcb: &mut Tcb,
    seq: SeqNumber,
    segs: u32,
    unverified: bool,
    tsval: Option<u32>,
    filled_hole: bool,
) {
    if !unverified {
        // RFC 7323 §4.3: TS.Recent from a verified segment at or before Last.ACK.sent.
        if let (true, Some(tsval)) = (tcb.ts_enabled, tsval) {
            if seq <= tcb.last_ack_sent && !ts_older(tsval, tcb.ts_recent) {
                tcb.ts_recent = tsval;
                tcb.ts_recent_age = now;
            }
        }
    }
    // RFC 5681 §4.2: an ACK for at least every second full-sized segment; at once when the
    // segment filled a hole; otherwise within the delayed-ACK time, unless in quick-ACK mode
    // (Linux `__tcp_ack_snd_check`), which acknowledges every segment at once.
    tcb.unacked_segs += segs;
    if filled_hole || tcb.unacked_segs >= 2 {
        tcb.owe_data_ack();
        tcb.quickack.owed = false;
    } else if tcb.quickack.active() {
        tcb.owe_data_ack();
        tcb.quickack.owed = true;
    } else if tcb.timers.delack.is_none() {
        tcb.timers.delack.set(now + delayed_ack);
    }
}

/// Linux `tcp_event_data_recv`'s delayed-ACK engine, for in-order data arriving at `now`:
/// the connection's first data, or data after the receiver was idle longer than the RTO
/// (the sender restarts from a small window, RFC 5681 §4.1, and needs its ACKs at once),
/// grants quick ACKs.
#[inline]
pub(crate) fn quick_ack_on_data(now: Instant, tcb: &mut Tcb) {
    let idle = match tcb.quickack.last_data {
        None => true,
        Some(t) => now.nanos_since(t) > tcb.rtt.rto_nanos(),
    };
    if idle {
        grant_quick_acks(tcb);
    }
    tcb.quickack.last_data = Some(now);
}

/// Linux `tcp_incr_quickack`: ACK at once for min(window / (2 MSS), 16) segments, at least
/// 2: about as many as a sender in slow start sends before it would stall on a delayed ACK.
/// Out of line: it runs once per connection start or idle period.
#[inline(never)]
fn grant_quick_acks(tcb: &mut Tcb) {
    let wnd = if tcb.rcv_adv > tcb.rcv_nxt { tcb.rcv_adv.since(tcb.rcv_nxt) } else { 0 };
    let n = (wnd / (2 * tcb.rcv_mss().max(1) as u32)).clamp(2, crate::tcp::tcb::MAX_QUICK_ACKS as u32) as u8;
    tcb.quickack.quick = tcb.quickack.quick.max(n);
}

/// Tiny segments are copied into the tail of the receive queue when they fit, so that each
/// does not hold a pbuf; only verified data, behind verified data (the copy would lose a
/// deferred checksum). Returns whether `payload` was copied.
#[inline(always)]
pub(crate) fn try_merge(tcb: &mut Tcb, payload: &[u8], unverified: bool) -> bool {
    !unverified && payload.len() < SMALL_SEGMENT && tcb.rcv_unverified == 0 && merge_into_tail(tcb, payload)
}

/// Copy a tiny segment's payload into the tail of the receive queue if it fits there.
#[inline(never)]
fn merge_into_tail(tcb: &mut Tcb, payload: &[u8]) -> bool {
    let len = payload.len();
    let Some(tail) = tcb.rcvq.back_mut() else { return false };
    if !tail.buf.is_unique() || tail.buf.tailroom() < len {
        return false;
    }
    match tail.buf.append(len) {
        Ok(dst) => {
            dst.copy_from_slice(payload);
            true
        }
        Err(_) => false,
    }
}

/// Move what an in-order segment made contiguous from the out-of-order queue to the
/// receive queue.
#[inline(never)]
fn drain_ooo(tcb: &mut Tcb) {
    while !tcb.ooo.is_empty() {
        let Some((pos, buf)) = tcb.ooo.pop_ready(tcb.rcv_nxt_pos) else { break };
        let n = buf.len() as u32;
        let s = tcb.pos_seq(pos);
        tcb.rcvq.push_back(RxSeg { seq: s, buf, unverified: None });
        tcb.rcv_queued += n as usize;
        tcb.advance_rcv_nxt(n);
        tcb.stats.bytes_received += n as u64;
    }
}

/// The peer's FIN is next in sequence (eighth step).
fn fin_arrives(env: &mut Env, tcb: &mut Tcb) -> Outcome {
    // A FIN changes state: the data before it must be known good first. If a deferred
    // segment fails, rcv_nxt falls back behind the FIN, which stays remembered.
    verify_pending(env, tcb);
    if tcb.rcv_fin != Some(tcb.rcv_nxt) {
        return Outcome::Keep;
    }
    tcb.rcv_fin = None;
    tcb.advance_rcv_nxt(1);
    tcb.owe_ack();
    match tcb.state {
        State::SynReceived | State::Established => tcb.state = State::CloseWait,
        State::FinWait1 => {
            if tcb.fin_acked() {
                enter_time_wait(env, tcb);
            } else {
                tcb.state = State::Closing;
            }
        }
        State::FinWait2 => enter_time_wait(env, tcb),
        _ => {}
    }
    Outcome::Keep
}

/// TIME-WAIT for 2 MSL (RFC 9293 §3.4.2); every other timer stops.
pub(crate) fn enter_time_wait(env: &mut Env, tcb: &mut Tcb) {
    tcb.state = State::TimeWait;
    tcb.timers = Default::default();
    tcb.timers.time_wait.set(env.now + env.config.msl * 2);
}
