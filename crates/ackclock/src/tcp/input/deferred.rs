//! The deferred receive checksum (Afterburner, Dalton et al. 1993): in-order data whose
//! checksum the device did not verify is queued unverified and checked during the copy to the
//! application. Until then no ACK covers it; a segment that fails is dropped with everything
//! queued after it, and `rcv_nxt` goes back to its start.

use super::*;
use crate::tcp::env::Env;
use crate::tcp::stats::DropReason;
use crate::tcp::tcb::{State, Tcb};
use crate::wire::{checksum, TcpFlags};

/// Payload smaller than this is verified at once and copied into the tail of the receive
/// queue when it fits, instead of holding a whole pbuf: a peer sending tiny segments cannot
/// exhaust the pool (Afterburner: small packets take the ordinary path). The one exception
/// is `small_deferrable`.
pub(crate) const SMALL_SEGMENT: usize = 256;

/// Whether `seg` may have its payload checksum checked later, during the copy to the
/// application: it must change nothing but `rcv_nxt` (Afterburner's three tests: an
/// established connection, nothing but data, the next data in sequence) — no SYN/FIN/RST/URG,
/// an ACK that moves nothing, the same window, no SACK blocks, no timestamp older than
/// TS.Recent, nothing out of order, and all of it inside the window.
#[inline]
pub(crate) fn deferrable(tcb: &Tcb, seg: &Segment) -> bool {
    tcb.state == State::Established
        && seg.flags & !(TcpFlags::PSH) == TcpFlags::ACK
        && seg.seq == tcb.rcv_nxt
        && seg.ack == tcb.snd_una
        && (seg.wnd as u32) << tcb.snd_wscale == tcb.snd_wnd
        && size_deferrable(tcb, seg.len as usize)
        // Nothing trimmed: a trimmed segment could not be checked against its header's sum.
        && tcb.fits_window(seg.seq, seg.len)
        && seg.sack.is_empty()
        // Not PAWS-old: after 24 idle days such a segment sets TS.Recent (RFC 7323 §5.3
        // R3), which only a segment known to be good may do (§4.3).
        && !(tcb.ts_enabled && seg.ts.is_some_and(|(tsval, _)| ts_older(tsval, tcb.ts_recent)))
        && tcb.ooo.is_empty()
        && tcb.rcv_fin.is_none()
        && !tcb.shut_rd
}

/// Whether `len` bytes of in-order data are large enough to have their checksum deferred:
/// `SMALL_SEGMENT` or more, or a small segment right behind a large deferred one
/// (`small_deferrable`). Header prediction and the full path ask the same question, so a
/// small segment gets the same answer whichever path it takes.
#[inline(always)]
pub(crate) fn size_deferrable(tcb: &Tcb, len: usize) -> bool {
    len >= SMALL_SEGMENT || (len > 0 && small_deferrable(tcb))
}

/// Whether a small segment may be deferred too: the newest queued segment is deferred and
/// at least twice `SMALL_SEGMENT`. Verified at once, it would make the full path check the
/// deferred data before it in a pass of its own (a verified segment cannot queue behind
/// unverified ones), and the copy to the application would be a second pass over it: a
/// sender whose window ends a few hundred bytes past its last full segment sends such a
/// tail every round. At most one small segment follows each deferred one of 512 bytes or
/// more, so a peer still pins at most one pbuf per 256 bytes of window, as without the
/// exception (a 256-byte segment then a 1-byte one, repeated, would pin two per 257).
#[inline(never)]
fn small_deferrable(tcb: &Tcb) -> bool {
    tcb.rcv_unverified > 0
        && tcb.rcvq.len().checked_sub(1).and_then(|i| tcb.rcvq.get(i)).is_some_and(|s| s.buf.len() >= 2 * SMALL_SEGMENT)
}

/// Whether a deferred segment's payload completes its header's sum (`Unverified::header_sum`)
/// to a good checksum: one sum pass over the payload.
pub(crate) fn payload_checks(header_sum: u16, payload: &[u8]) -> bool {
    checksum::add(header_sum, checksum::sum(payload)) == 0xffff
}

/// Verify every deferred segment of the receive queue now (a sum-only pass), so that
/// `rcv_nxt` is certain before anything else changes the connection. A bad segment is
/// dropped with everything queued after it, and `rcv_nxt` goes back to its start: those
/// bytes were never acknowledged.
pub(crate) fn verify_pending(env: &mut Env, tcb: &mut Tcb) {
    while tcb.rcv_unverified > 0 {
        env.counters.csum_verified_early += 1;
        let idx = tcb.rcvq.len() - tcb.rcv_unverified;
        let good = {
            let s = &tcb.rcvq[idx];
            let u = s.unverified.expect("suffix of rcvq is unverified");
            payload_checks(u.header_sum, s.buf.data())
        };
        if good {
            accept_verified(env, tcb, idx);
        } else {
            reject_from(env, tcb, idx);
        }
    }
}

/// The deferred segment at `idx` checked out: it now counts for ACKs and TS.Recent.
pub(crate) fn accept_verified(env: &mut Env, tcb: &mut Tcb, idx: usize) {
    let s = &mut tcb.rcvq[idx];
    if let Some(u) = s.unverified.take() {
        tcb.rcv_unverified -= 1;
        if let Some(tsval) = u.tsval {
            // RFC 7323 §4.3: record TSval if the segment started at or before Last.ACK.sent.
            if s.seq <= tcb.last_ack_sent && !ts_older(tsval, tcb.ts_recent) {
                tcb.ts_recent = tsval;
                tcb.ts_recent_age = env.now;
            }
        }
    }
}

/// The deferred segment at `idx` failed its checksum: drop it and everything after it.
pub(crate) fn reject_from(env: &mut Env, tcb: &mut Tcb, idx: usize) {
    let seq = tcb.rcvq[idx].seq;
    let behind = tcb.rcvq.len() - idx - 1;
    while tcb.rcvq.len() > idx {
        if let Some(s) = tcb.rcvq.pop_back() {
            tcb.rcv_queued -= s.buf.len();
            if s.unverified.is_some() {
                tcb.rcv_unverified -= 1;
            }
        }
    }
    let back = tcb.rcv_nxt.since(seq);
    tcb.rcv_nxt = seq;
    tcb.rcv_nxt_pos -= back as u64;
    tcb.stats.bytes_received -= back as u64;
    tcb.stats.bad_checksums += 1;
    env.counters.drop(DropReason::BadChecksum);
    if behind > 0 {
        // The segments dropped behind it arrived, in effect, out of order: that owes an
        // immediate (duplicate) ACK, which tells the peer where the hole is (RFC 5681 §4.2).
        tcb.owe_ack();
    } else if tcb.rcv_unverified == 0 && tcb.ack_seq() == tcb.last_ack_sent {
        // The dropped bytes owe no ACK: neither a delayed one nor one owed now for them
        // alone (a quick ACK, every second segment, the delayed-ACK timer come due).
        tcb.timers.delack.clear();
        tcb.unacked_segs = 0;
        if tcb.ack_for_data {
            tcb.ack_now = false;
            tcb.quickack.owed = false;
        }
    }
}
