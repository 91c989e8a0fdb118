//! A connection's timers (BSD's `tcp_timer.c`): retransmission, persist, delayed ACK,
//! keep-alive, FIN-WAIT-2 and TIME-WAIT. The stack's wheel calls [`expire`] when the
//! earliest of them falls due; each timer that is due acts, the rest stay.

use super::env::Env;
use super::input::Outcome;
use super::output;
use super::recovery;
use super::sndq;
use super::tcb::{ConnError, State, Tcb};
use crate::wire::TcpFlags;

/// Run every timer of `tcb` that is due at `env.now`.
pub(crate) fn expire(env: &mut Env, tcb: &mut Tcb) -> Outcome {
    let now = env.now;
    let due = |t: Option<crate::time::Instant>| t.is_some_and(|t| t <= now);

    if due(tcb.timers.time_wait.get()) {
        // RFC 9293 §3.4.2: 2 MSL have passed.
        tcb.state = State::Closed;
        return Outcome::Delete;
    }
    if due(tcb.timers.rexmt.get()) {
        tcb.timers.rexmt.clear();
        if retransmit_timeout(env, tcb) == Outcome::Delete {
            return Outcome::Delete;
        }
    }
    if due(tcb.timers.persist.get()) {
        tcb.timers.persist.clear();
        if persist(env, tcb) == Outcome::Delete {
            return Outcome::Delete;
        }
    }
    if due(tcb.timers.delack.get()) {
        // RFC 5681 §4.2: the delayed ACK is owed now. No data of ours carried it: the
        // connection is not interactive after all (Linux `tcp_delack_timer_handler`).
        tcb.timers.delack.clear();
        tcb.owe_data_ack();
        tcb.quickack.pingpong = false;
    }
    if due(tcb.timers.retry.get()) {
        // Buffers may be back: the caller runs output next.
        tcb.timers.retry.clear();
    }
    if due(tcb.timers.keepalive.get()) {
        tcb.timers.keepalive.clear();
        if keepalive(env, tcb) == Outcome::Delete {
            return Outcome::Delete;
        }
    }
    Outcome::Keep
}

/// Abort with `TimedOut`: nothing is sent (as Linux), the application sees the error; or,
/// if a segment of ours drew an ICMP error since the peer was last heard from, that error
/// (Linux `tcp_write_err`: `sk_err_soft` before ETIMEDOUT).
fn time_out(env: &mut Env, tcb: &mut Tcb) -> Outcome {
    if matches!(tcb.state, State::SynSent) {
        env.counters.failed_opens += 1;
    }
    env.counters.timeouts += 1;
    let soft = tcb.soft_error.filter(|_| tcb.soft_error_at >= tcb.last_rcv);
    tcb.error = Some(soft.unwrap_or(ConnError::TimedOut));
    tcb.state = State::Closed;
    Outcome::Delete
}

/// RFC 6298 §5.4-5.7: retransmit the earliest unacknowledged segment, back off the timer,
/// and collapse the congestion window to the loss window (RFC 5681 §3.1).
fn retransmit_timeout(env: &mut Env, tcb: &mut Tcb) -> Outcome {
    let limit = match tcb.state {
        State::SynSent => env.config.syn_retries,
        State::SynReceived => env.config.synack_retries,
        _ => env.config.max_retries,
    };
    // RFC 9293 §3.8.6.1 (MUST NOT close while the peer answers the probes): with the
    // peer's window closed under data in flight (it shrank, §3.8.6 MUST-35), this
    // retransmission is a zero-window probe, and only probes left unanswered count
    // (`probes_out`, reset by any acceptable ACK), as Linux `tcp_retransmit_timer` does.
    let zero_window = tcb.state.is_synchronized() && tcb.snd_wnd == 0;
    let tries = if zero_window {
        tcb.probes_out += 1;
        tcb.probes_out
    } else {
        tcb.retries += 1;
        if tcb.retries == 1 {
            tcb.ld_reverts = 0;
        }
        tcb.retries
    };
    let user_timeout_over = match (tcb.opts.user_timeout, tcb.rexmt_start) {
        (Some(ut), Some(start)) => env.now.saturating_duration_since(start) >= ut,
        _ => false,
    };
    // After RFC 6069 took backoffs back, the limit is the time `limit` backed-off expiries
    // would have taken: a count would end the connection sooner the more was taken back,
    // which is what TCP-LD is there to avoid (Linux measures time, `retransmits_timed_out`).
    let over = match (tcb.ld_reverts > 0 && !zero_window, tcb.rexmt_start) {
        (true, Some(start)) => env.now.saturating_duration_since(start) >= tcb.rtt.backoff_total(limit),
        _ => tries > limit,
    };
    if over || user_timeout_over {
        if tcb.state == State::SynReceived && tcb.listener.is_some() {
            // A half-open passive connection just disappears.
            tcb.state = State::Closed;
            return Outcome::Delete;
        }
        return time_out(env, tcb);
    }
    tcb.rtt.back_off();
    tcb.rtt_seq = None; // Karn's rule
    env.trace.event(env.now, tcb, super::trace::Event::Rto);
    tcb.stats.rtos += 1;
    env.counters.rtos += 1;
    match tcb.state {
        State::SynSent | State::SynReceived => {
            tcb.snd_nxt = tcb.iss;
        }
        _ => {
            // RFC 5681 §3.1 / the CC's RTO response: ssthresh from FlightSize, cwnd to the
            // loss window, slow start again. Recovery ends (RFC 6675 §5.1) and `recover`
            // moves to snd_max (RFC 6582 §3.2 step 4 of the RTO note).
            // RFC 5681 §3.1: a repeated timeout holds ssthresh; so does one during fast
            // recovery, whose ssthresh was set at entry (Linux `tcp_enter_loss`) — the
            // flight then includes SACKed and inflation-sent data and would raise it.
            let hold = tcb.retries > 1 || tcb.recovery.is_some();
            let flight = (!hold).then(|| tcb.flight());
            recovery::abandon(tcb);
            if env.config.mtu_probing && tcb.retries >= super::pmtu::BLACK_HOLE_AFTER {
                super::pmtu::black_hole(env, tcb);
            }
            tcb.cc.on_rto(env.now, flight);
            tcb.recover = tcb.snd_max;
            sndq::go_back_to_una(tcb);
        }
    }
    // RFC 9293 §3.10.8 / Linux `tcp_clamp_rto_to_user_timeout`: the user timeout is kept
    // to the moment, not to the next backed-off expiry.
    let mut next = env.now + tcb.rtt.rto();
    if let (Some(ut), Some(start)) = (tcb.opts.user_timeout, tcb.rexmt_start) {
        next = next.min(start + ut);
    }
    tcb.timers.rexmt.set(next);
    env.trace.sample(env.now, tcb);
    Outcome::Keep
}

/// RFC 9293 §3.8.6.1 / Linux `tcp_probe_timer`: data waits on a window too small to use
/// and nothing is in flight. If the window is open at all, send what fits; if it is zero,
/// send an ACK with an old sequence number, which the receiver must answer with its
/// current window. Because every probe draws a fresh answer, a lost window update cannot
/// deadlock the connection (lwIP bug #49533). Probes back off but never give up while the
/// peer answers (RFC 9293 §3.8.6.1 MUST); the user timeout still applies.
fn persist(env: &mut Env, tcb: &mut Tcb) -> Outcome {
    if tcb.snd_nxt_idx >= tcb.sndq.len() || tcb.snd_max != tcb.snd_una {
        tcb.persist_backoff = 0;
        return Outcome::Keep;
    }
    if let Some(ut) = tcb.opts.user_timeout {
        let since = tcb.rexmt_start.get_or_insert(env.now);
        if env.now.saturating_duration_since(*since) >= ut {
            return time_out(env, tcb);
        }
    }
    // Linux `tcp_probe_timer`: a peer that answers nothing for max_retries probes is gone
    // (any ACK resets the count, so a live peer with a closed window is probed forever,
    // as RFC 9293 §3.8.6.1 requires).
    if tcb.probes_out >= env.config.max_retries {
        return time_out(env, tcb);
    }
    tcb.probes_out += 1;
    tcb.stats.window_probes += 1;
    let usable = tcb.snd_wnd.min(tcb.cwnd());
    let idx = tcb.snd_nxt_idx;
    if usable > 0 {
        // Override sender SWS avoidance: send what the window takes.
        let n = usable as usize;
        if n < tcb.sndq[idx].buf.len() && sndq::split_front(env, tcb, idx, n).is_err() {
            tcb.timers.persist.set(env.now + output::persist_interval(tcb));
            return Outcome::Keep;
        }
        // The segment now fits the window, and nothing is in flight, so neither SWS
        // avoidance nor Nagle holds it back.
        tcb.persist_backoff = 0;
        output::output(env, tcb);
    } else {
        output::send_bare(env, tcb, tcb.snd_una - 1, TcpFlags::ACK);
        tcb.persist_backoff = (tcb.persist_backoff + 1).min(16);
        // RFC 9293 §3.10.8: the user timeout is kept to the moment, not to the next
        // backed-off probe (Linux `tcp_clamp_probe0_to_user_timeout`).
        let mut next = env.now + output::persist_interval(tcb);
        if let (Some(ut), Some(start)) = (tcb.opts.user_timeout, tcb.rexmt_start) {
            next = next.min(start + ut);
        }
        tcb.timers.persist.set(next);
    }
    Outcome::Keep
}

/// Keep-alive (RFC 9293 §3.8.4): after `idle` without a segment, probe every `interval`
/// with `<SEQ=SND.UNA-1>` and no data; `count` unanswered probes end the connection. The
/// same timer slot bounds an orphan's FIN-WAIT-2.
fn keepalive(env: &mut Env, tcb: &mut Tcb) -> Outcome {
    if tcb.state == State::FinWait2 && tcb.orphan {
        tcb.state = State::Closed;
        return Outcome::Delete;
    }
    let Some(ka) = tcb.opts.keepalive else { return Outcome::Keep };
    if !matches!(tcb.state, State::Established | State::CloseWait | State::FinWait1 | State::FinWait2) {
        return Outcome::Keep;
    }
    // RFC 9293 §3.8.4: "Keep-alive packets MUST only be sent when no sent data is
    // outstanding" (MUST-26); while data is in flight or waits, the retransmission and
    // persist timers judge the peer (Linux `tcp_keepalive_timer`: `packets_out` or a
    // non-empty write queue reschedule).
    if tcb.snd_max != tcb.snd_una || tcb.snd_nxt_idx < tcb.sndq.len() {
        tcb.timers.keepalive.set(env.now + ka.idle);
        return Outcome::Keep;
    }
    let idle = env.now.saturating_duration_since(tcb.last_rcv);
    if idle < ka.idle {
        tcb.timers.keepalive.set(tcb.last_rcv + ka.idle);
        return Outcome::Keep;
    }
    if tcb.keepalive_probes >= ka.count {
        return time_out(env, tcb);
    }
    tcb.keepalive_probes += 1;
    output::send_bare(env, tcb, tcb.snd_una - 1, TcpFlags::ACK);
    tcb.timers.keepalive.set(env.now + ka.interval);
    Outcome::Keep
}

/// Re-arm the keep-alive timer after traffic (called when a segment arrives).
pub(crate) fn touch_keepalive(env: &Env, tcb: &mut Tcb) {
    if let Some(ka) = tcb.opts.keepalive {
        if tcb.state.is_synchronized() && !(tcb.orphan && tcb.state == State::FinWait2) {
            tcb.timers.keepalive.set(env.now + ka.idle);
        }
    }
}
