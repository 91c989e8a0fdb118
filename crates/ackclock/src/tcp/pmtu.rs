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
//! The size is not raised again later (RFC 1191 §6.3's probes), and a new connection to
//! the same peer starts from its own MSS exchange: the stack keeps no per-destination cache.

use super::recovery;
use super::seq::SeqNumber;
use super::sndq;
use super::tcb::{FourTuple, State};
use super::Tcp;
use crate::iface::TooBig;

/// The smallest path MTU a Datagram Too Big may set (Linux `ip_rt_min_pmtu`: 512 + 20 + 20).
pub(crate) const MIN_PMTU: u16 = 552;

/// IPv4 and TCP headers without options: what a segment's MSS leaves out of the MTU.
const HEADERS: u16 = 20 + 20;

impl Tcp {
    /// A Datagram Too Big for one of this stack's TCP segments (see the module).
    pub(crate) fn path_mtu(&mut self, msg: TooBig) {
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
        let smss = msg.mtu.max(MIN_PMTU) - HEADERS;
        if !in_flight || !sending || smss >= tcb.smss {
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
