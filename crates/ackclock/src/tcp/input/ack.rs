//! The ACK's work at the sender once it is accepted (RFC 9293 §3.10.7.4, fifth step): the
//! RTT sample, the acknowledged buffers back to the pool, and the ack clock: recovery, or
//! the window's growth (one call per ACK, or one per merged run of pure ACKs), and the
//! retransmission timer.

use crate::tcp::cc::{Ack, Acks};
use crate::tcp::env::Env;
use crate::tcp::recovery;
use crate::tcp::seq::SeqNumber;
use crate::tcp::tcb::Tcb;
use crate::time::Duration;

/// SND.UNA < SEG.ACK <= SND.MAX: new data acknowledged.
pub(crate) fn ack_advance(env: &mut Env, tcb: &mut Tcb, ack: SeqNumber, ts: Option<(u32, u32)>) {
    let (data_acked, sample) = ack_release(env, tcb, ack, ts);
    // The ack clock: recovery, or growth outside it.
    if tcb.recovery.is_some() {
        recovery::eifel_check(tcb, ack, ts);
        recovery::on_ack_in_recovery(env, tcb, data_acked);
    } else {
        ack_grow(env, tcb, ack, data_acked, sample);
    }
    ack_timer(env, tcb);
}

/// What every advancing ACK does first: take the RTT sample, free the acknowledged buffers,
/// move `snd_una`. Returns the data bytes acknowledged (SYN and FIN excluded) and the sample.
#[inline(always)]
pub(crate) fn ack_release(
    env: &mut Env,
    tcb: &mut Tcb,
    ack: SeqNumber,
    ts: Option<(u32, u32)>,
) -> (u32, Option<Duration>) {
    ack_release_by(env, tcb, ack, ts, release_each)
}

/// [`ack_release`] with the way the acknowledged segments leave the send queue given: an
/// aggregated ACK releases the segments of all its original ACKs at once (`tcp::lro`).
#[inline(always)]
pub(crate) fn ack_release_by(
    env: &mut Env,
    tcb: &mut Tcb,
    ack: SeqNumber,
    ts: Option<(u32, u32)>,
    release: impl FnOnce(&mut Tcb, SeqNumber),
) -> (u32, Option<Duration>) {
    let acked = ack.since(tcb.snd_una);
    // The SYN occupies iss; our data starts at iss + 1.
    let mut data_acked = acked;
    if tcb.snd_una == tcb.iss {
        data_acked -= 1;
    }
    if tcb.fin_queued && ack == tcb.snd_end + 1 {
        data_acked = data_acked.saturating_sub(1);
    }
    // RTT: the echoed timestamp if there is one (RFC 7323 §4), else the timed segment if
    // it was not retransmitted (Karn's rule).
    let mut sample = None;
    if tcb.ts_enabled {
        if let Some((_, tsecr)) = ts {
            if tsecr != 0 {
                let ms = tcb.ts_now(env.now).wrapping_sub(tsecr);
                if (ms as i32) >= 0 {
                    sample = Some(Duration::from_millis(ms as u64));
                    tcb.rtt.sample_us(ms as u64 * 1000);
                }
            }
        }
    } else if let Some((seq, sent)) = tcb.rtt_seq {
        if ack > seq {
            let rtt = env.now.saturating_duration_since(sent);
            sample = Some(rtt);
            tcb.rtt.sample(rtt);
            tcb.rtt_seq = None;
        }
    }
    release(tcb, ack);
    tcb.snd_una = ack;
    if tcb.snd_nxt < tcb.snd_una {
        tcb.snd_nxt = tcb.snd_una;
        tcb.snd_nxt_idx = crate::tcp::sndq::index_of(tcb, tcb.snd_nxt);
    }
    tcb.stats.bytes_acked += data_acked as u64;
    tcb.retries = 0;
    (data_acked, sample)
}

/// Release the segments `ack` acknowledges whole, one at a time: their pbufs go back to
/// the pool here.
#[inline(always)]
pub(crate) fn release_each(tcb: &mut Tcb, ack: SeqNumber) {
    while let Some(front) = tcb.sndq.front() {
        if front.end() <= ack {
            if let Some(s) = tcb.sndq.pop_front() {
                tcb.snd_queued -= s.len() as usize;
                if s.sent > 1 {
                    recovery::note_rxt_acked(tcb, s.seq, s.end());
                }
            }
            tcb.snd_nxt_idx = tcb.snd_nxt_idx.saturating_sub(1);
        } else {
            break;
        }
    }
}

/// Outside recovery: the duplicate-ACK count resets and the congestion window grows.
#[inline(always)]
pub(crate) fn ack_grow(env: &Env, tcb: &mut Tcb, ack: SeqNumber, data_acked: u32, sample: Option<Duration>) {
    tcb.dupacks = 0;
    drag_recover(tcb);
    let info = Ack {
        now: env.now,
        acked: data_acked,
        rtt: sample,
        srtt: tcb.rtt.srtt(),
        ack_seq: ack.since(tcb.iss) as u64,
        snd_max: tcb.snd_max.since(tcb.iss) as u64,
    };
    tcb.cc.on_ack(&info);
}

/// [`ack_grow`] for the original ACKs one aggregated pure ACK stands for (receive
/// aggregation, Gallatin 2008): one congestion-control call for all of them, as Linux's
/// `tcp_cong_avoid(sk, ack, acked)` is one call for the segments an ACK covered, and the
/// window grows exactly as the separate calls would have grown it (RFC 3465 §2.2: L per
/// original ACK). `una` is SND.UNA before the first, `acks` their ACK numbers, oldest first,
/// `ecrs` their timestamp echoes (empty without timestamps: [`Acks::ecrs`]); `unclaimed` is
/// what the SYN or FIN took of the newest's share, `sample` the newest's RTT sample.
#[inline(always)]
pub(crate) fn ack_grow_merged(
    env: &Env,
    tcb: &mut Tcb,
    una: SeqNumber,
    acks: &[u32],
    ecrs: &[u32],
    unclaimed: u32,
    sample: Option<Duration>,
) {
    tcb.dupacks = 0;
    drag_recover(tcb);
    let run = Acks {
        now: env.now,
        rtt: sample,
        ecrs,
        ts_offset: tcb.ts_offset,
        srtt: tcb.rtt.srtt(),
        snd_max: tcb.snd_max.since(tcb.iss) as u64,
        iss: tcb.iss.0,
        una: una.0,
        acks,
        unclaimed,
    };
    tcb.cc.on_acks(&run);
}

/// Keep RFC 6582's `recover` within 2^31 of SND.UNA once SND.UNA has passed it, as FreeBSD
/// does (`snd_recover = th_ack - 1`): sequence comparisons are modulo 2^32, and a `recover`
/// left 2^31 bytes behind would read as ahead of SND.UNA, shutting fast retransmit off for
/// the next 2^31 bytes. (SND.UNA >= recover is all `recovery::on_dupack` asks.)
#[inline(always)]
fn drag_recover(tcb: &mut Tcb) {
    if tcb.snd_una > tcb.recover {
        tcb.recover = tcb.snd_una;
    }
}

/// RFC 6298 §5.2/5.3: restart the retransmission timer while data is outstanding, stop it
/// when not.
#[inline(always)]
pub(crate) fn ack_timer(env: &mut Env, tcb: &mut Tcb) {
    if tcb.snd_una == tcb.snd_max {
        tcb.timers.rexmt.clear();
        tcb.rexmt_start = None;
    } else {
        tcb.timers.rexmt.set(env.now.plus_nanos(tcb.rtt.rto_nanos()));
        tcb.rexmt_start = Some(env.now);
        // The ACK stopped at a segment the peer SACKed: it reneged.
        recovery::check_reneging(env, tcb);
    }
}
