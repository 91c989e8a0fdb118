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
//!
//! Where no Datagram Too Big ever comes (a black hole), a connection with
//! `TcpConfig::mtu_probing` on lowers its own size after repeated timeouts ([`black_hole`]),
//! as Linux does with `tcp_mtu_probing` = 1.

use super::env::Env;
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
            // No smaller than in use; but the generation just noted may have carried an
            // expiry this connection had not followed yet.
            if smss > tcb.smss {
                self.counters.pmtu_followed += 1;
                resize(tcb, smss);
            }
            self.counters.pmtu_ignored += 1;
            return;
        }
        self.counters.pmtu_reductions += 1;
        resize(tcb, smss);
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
    resize(tcb, smss);
}

/// Retransmission timeouts in a row after which a connection with `TcpConfig::mtu_probing`
/// suspects a black hole (Linux `tcp_retries1`, 3).
pub(crate) const BLACK_HOLE_AFTER: u32 = 3;

/// The segment size a suspected black hole is first met with (Linux `tcp_base_mss`), and
/// the floor the halving stops at (what the smallest believed Datagram Too Big leaves).
const BASE_MSS: u16 = 1024;
const FLOOR_MSS: u16 = MIN_PMTU - HEADERS;

/// A retransmission timeout after [`BLACK_HOLE_AFTER`] in a row, with black hole detection
/// on (`TcpConfig::mtu_probing`; Linux `tcp_mtu_probing`): the path may drop large
/// segments without a word (a router that sends no Datagram Too Big, or a firewall that
/// drops it: RFC 2923 §2.1, RFC 4821 §1). The size goes to 1,024 bytes, or half of what
/// it is if already there or below, not under 512, for the connection's life (its
/// `mss_clamp`: no later expiry raises it). The timeout's retransmission, from SND.UNA, is
/// cut to the new size (`output::send_data`).
pub(crate) fn black_hole(env: &mut Env, tcb: &mut Tcb) {
    let smss = if tcb.smss > BASE_MSS { BASE_MSS } else { (tcb.smss / 2).max(FLOOR_MSS) };
    if smss >= tcb.smss {
        return;
    }
    env.counters.mtu_black_holes += 1;
    tcb.mss_clamp = tcb.mss_clamp.min(smss);
    resize(tcb, smss);
}

/// The connection's send MSS becomes `smss`, and its congestion control counts in the new
/// full-sized segment (timestamps taken out).
fn resize(tcb: &mut Tcb, smss: u16) {
    tcb.set_smss(smss);
    tcb.cc.set_smss(tcb.eff_mss as u32);
}
