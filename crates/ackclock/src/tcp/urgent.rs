//! Urgent data (RFC 9293 §3.8.5; RFC 1122 §4.2.2.4; RFC 6093): the receiver's RCV.UP and
//! the signal to the application, and the sender's urgent pointer on the segments below
//! SND.UP. The data itself always travels in line, in the stream, as RFC 6093 §4 asks of
//! new applications; only the mark is out of band. Both halves are off the predicted paths:
//! a segment carrying URG fails header prediction (and ends a receive aggregate), and a
//! sender in urgent mode builds every header the general way.

use super::env::Env;
use super::header::Hdr;
use super::input::Segment;
use super::tcb::Tcb;
use crate::wire::TcpFlags;

/// RFC 9293 §3.10.7.4, sixth step: RCV.UP <- max(RCV.UP, SEG.UP), and the application is
/// told (the connection's event, and `urgent_signals`) when the pointer is ahead of what it
/// has read and there was no urgent data pending before, or the pointer advanced (RFC 1122
/// §4.2.2.4, RFC 9293 MUST-32). The data itself stays in line, in the stream, as RFC 6093
/// §4 asks of new applications; [`Tcb::urgent_pending`] says how much of it is left to read
/// (MUST-33). The pointer may lie beyond this segment, or beyond the window (MUST-30: urgent
/// data of any length). As Linux's `tcp_check_urg`, a pointer below RCV.NXT (an old
/// segment's, replayed) is ignored.
pub(super) fn urgent_pointer(env: &mut Env, tcb: &mut Tcb, seg: &Segment) {
    let up = seg.seq + seg.up as u32;
    if up < tcb.rcv_nxt {
        return;
    }
    let pos = tcb.rcv_pos(up);
    if pos <= tcb.rcv_up {
        return;
    }
    tcb.rcv_up = pos;
    if tcb.urgent_pending().is_some() {
        tcb.stats.urgent_signals += 1;
        env.counters.urgent_signals += 1;
    }
}

/// `h` as the sender's urgent mode has it: unchanged (one test) unless SND.UP is set.
#[inline(always)]
pub(super) fn mark(tcb: &mut Tcb, h: Hdr) -> Hdr {
    if tcb.snd_up.is_some() {
        return with_urgent(tcb, h);
    }
    h
}

/// `h` with URG and the urgent pointer if the sender is in urgent mode and `h.seq` lies
/// below SND.UP (RFC 9293 §3.8.5: the pointer is the offset from SEG.SEQ of the octet after
/// the urgent data, MUST-31). As Linux's `tcp_transmit_skb`: an offset past 16 bits is sent
/// as 0xFFFF while that mark still lies beyond SND.NXT, so that it never points into data
/// already sent without being urgent; otherwise the segment carries no pointer.
///
/// Urgent mode ends once the peer acknowledged every urgent byte (Linux clears SND.UP with
/// the ACK, `tcp_clean_rtx_queue`); SND.UP is forgotten here, at the first header built
/// after that ACK, so that the ACK paths need not look at it (until then the predicted
/// transmit paths leave every segment to the general build, which calls this).
#[inline(never)]
#[cold]
fn with_urgent(tcb: &mut Tcb, mut h: Hdr) -> Hdr {
    let Some(up) = tcb.snd_up else { return h };
    if up <= tcb.snd_una {
        tcb.snd_up = None;
        return h;
    }
    if h.seq >= up {
        return h;
    }
    let off = up.since(h.seq);
    let field = if off <= u16::MAX as u32 {
        off as u16
    } else if h.seq + u16::MAX as u32 > tcb.snd_nxt {
        u16::MAX
    } else {
        return h;
    };
    h.flags |= TcpFlags::URG;
    h.urgent = field;
    h
}
