//! Path MTU discovery, TCP's half (RFC 1191 §6.1): every segment goes with DF set, and a
//! router's Datagram Too Big (ICMP "fragmentation needed") for one of them lowers the
//! connection's segment size to what the reported MTU carries.
//!
//! A Datagram Too Big is anyone's to forge (RFC 5927), so it is believed only if the segment
//! it quotes is one the connection has in flight: its sequence number at or above SND.UNA
//! and below SND.MAX (§4.1; SND.MAX rather than SND.NXT, which a timeout may have pulled
//! back below data still in the network). The MTU is never taken below 552 bytes, Linux's
//! `ip_rt_min_pmtu`, so that a forged message cannot cut a connection into tiny segments
//! (§7.2); a router older than RFC 1191, which reports no MTU, gets that floor too, as on
//! Linux. The segments the message says were dropped are sent again at once, in the new
//! size, from SND.UNA, without a congestion response: nothing was lost to congestion
//! (Linux `tcp_simple_retransmit`). Segments already queued at the old size are cut when
//! they go (`output::send_data`), unless the device cuts them (segmentation offload).
//!
//! A believed message also teaches the interface's path MTU cache (`iface::pmtu`, RFC 1191
//! §5): a connection opened later to the same peer starts at the learned size, and one
//! already open follows before it next sends ([`follow`]), without waiting to lose a
//! segment of its own. When the estimate expires (RFC 1191 §6.3, 10 minutes) the
//! connections to the peer grow back to the size their handshake set; if the path is still
//! narrow, the next Datagram Too Big lowers them again.

use super::recovery;
use super::seq::SeqNumber;
use super::sndq;
use super::tcb::{FourTuple, State, Tcb};
use super::Tcp;
use crate::iface::pmtu::MIN_PMTU;
use crate::iface::{Interface, TooBig};
use crate::stats::Counters;
use crate::time::Instant;

/// IPv4 and TCP headers without options: what a segment's MSS leaves out of the MTU.
const HEADERS: u16 = 20 + 20;

impl Tcp {
    /// A Datagram Too Big for one of this stack's TCP segments (see the module).
    pub(crate) fn path_mtu(&mut self, now: Instant, msg: TooBig, iface: &mut Interface) {
        let tuple = FourTuple {
            local_addr: *msg.local.ip(),
            local_port: msg.local.port(),
            remote_addr: *msg.remote.ip(),
            remote_port: msg.remote.port(),
        };
        let Some(&idx) = self.table.get(&tuple) else {
            self.counters.pmtu_ignored += 1;
            return;
        };
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else { return };
        let seq = SeqNumber(msg.seq);
        let in_flight = tcb.snd_una <= seq && seq < tcb.snd_max;
        let sending = tcb.state.is_synchronized() && tcb.state != State::TimeWait;
        if !in_flight || !sending {
            self.counters.pmtu_ignored += 1;
            return;
        }
        // Believed: the destination's estimate too (lowered only; Linux updates the route
        // whatever the socket's own size).
        let mtu = msg.mtu.max(MIN_PMTU);
        iface.learn_path_mtu(now, tuple.remote_addr, mtu);
        let smss = bounded(iface, tcb).min(mtu - HEADERS);
        if smss >= tcb.smss {
            self.counters.pmtu_ignored += 1;
            return;
        }
        self.counters.pmtu_reductions += 1;
        tcb.set_smss(smss);
        tcb.cc.set_smss(tcb.eff_mss as u32);
        // Send again from SND.UNA what the peer has not SACKed, as after a timeout but
        // with the congestion window as it is. Recovery, if any, ends: its scoreboard
        // counted segments of the old size, and `recover` keeps the duplicate ACKs the
        // resent segments draw from starting another (RFC 6582 §3.2 step 4's rule).
        recovery::abandon(tcb);
        tcb.recover = tcb.snd_max;
        tcb.rtt_seq = None; // Karn's rule: no sample from a retransmission
        sndq::go_back_to_una(tcb);
        self.mark_dirty(idx);
    }
}

/// The send MSS `tcb` may use towards its peer now: what its handshake set (`mss_clamp`),
/// bounded by the path MTU the interface holds for the peer. Notes the cache's generation
/// as followed.
pub(crate) fn bounded(iface: &Interface, tcb: &mut Tcb) -> u16 {
    tcb.pmtu_gen = iface.pmtu.generation();
    let mtu = iface.path_mtu(tcb.tuple.remote_addr).clamp(MIN_PMTU as usize, u16::MAX as usize) as u16;
    tcb.mss_clamp.min(mtu - HEADERS)
}

/// Before a synchronized connection cuts bytes into segments (a write) or sends, when the
/// interface's path MTU estimates changed since it last looked (another connection's
/// Datagram Too Big, or an estimate's expiry): take its peer's again. A lower one applies
/// to the segments from now on (Linux's `tcp_current_mss` on a cookie mismatch: what is in
/// flight is not sent again); one that expired lets the size grow back to what the
/// handshake set (RFC 1191 §6.3).
#[cold]
#[inline(never)]
pub(crate) fn follow(iface: &Interface, tcb: &mut Tcb, counters: &mut Counters) {
    let smss = bounded(iface, tcb);
    if smss == tcb.smss {
        return;
    }
    counters.pmtu_followed += 1;
    tcb.set_smss(smss);
    tcb.cc.set_smss(tcb.eff_mss as u32);
}
