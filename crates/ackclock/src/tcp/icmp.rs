//! ICMP Destination Unreachable for a connection (RFC 1122 §4.2.3.9, RFC 5461, RFC 5927),
//! as Linux's `tcp_v4_err` takes it; "fragmentation needed" is path MTU discovery's
//! (`pmtu`). A Time Exceeded is taken as a soft host unreachable (RFC 1122 §4.2.3.9).
//!
//! A message is anyone's to forge, so it is believed only if the segment it quotes is one
//! the connection has in flight (RFC 5927 §4.1): at or above SND.UNA, below SND.MAX.
//! Then:
//! - A connection attempt (SYN-SENT, or an active open in SYN-RECEIVED) ends at once with
//!   the error, whatever the code: RFC 1122 calls network and host unreachable soft errors,
//!   but RFC 5461 §4.1 records that stacks abort connection establishment on them, and
//!   Linux does, so a connect to an unreachable host fails in one round trip instead of
//!   after every SYN retry.
//! - A passive open's SYN-RECEIVED (which the application has not seen) is forgotten on a
//!   network or host unreachable, and kept on any other code, as Linux's `tcp_req_err`
//!   called from `tcp_v4_err`: a blind hard error does not kill a handshake (RFC 5927).
//! - A synchronized connection goes on (RFC 1122: soft errors MUST NOT abort it; RFC 5927
//!   §5.2: hard errors are taken as soft ones there, against blind resets): the error is
//!   kept, and reported instead of `TimedOut` if the connection times out with nothing
//!   heard from the peer since (Linux `sk_err_soft`).
//!
//! - And, RFC 6069 (TCP-LD, as Linux's `tcp_ld_RTO_revert`): a network or host unreachable
//!   for a retransmission of SND.UNA's segment while the retransmission timer is backed
//!   off says the path, not congestion, lost it: one backoff is taken back, and the timer
//!   runs from that retransmission with the shorter RTO (expiring at once if that time has
//!   passed), so that the connection probes at the pace it had before the outage and
//!   resumes sooner once the path is back. The retransmission limit then becomes the time
//!   its expiries would have taken without reverts (`timer`), not a count.

use super::tcb::{ConnError, FourTuple, State};
use super::trace;
use super::Tcp;
use crate::iface::{Unreachable, UnreachableError};
use crate::time::Instant;

impl Tcp {
    /// A Destination Unreachable quoting a TCP segment of ours (see the module).
    pub(crate) fn unreachable(&mut self, now: Instant, msg: Unreachable) {
        let tuple = FourTuple {
            local_addr: *msg.local.ip(),
            local_port: msg.local.port(),
            remote_addr: *msg.remote.ip(),
            remote_port: msg.remote.port(),
        };
        let found = self.table.get(&tuple).copied();
        let (Some(idx), Some((kind, _))) = (found, msg.error()) else {
            self.counters.icmp_ignored += 1;
            return;
        };
        let Some(tcb) = self.slots.get_mut(idx as usize).and_then(|s| s.tcb.as_deref_mut()) else { return };
        let seq = super::seq::SeqNumber(msg.seq);
        if !(tcb.snd_una <= seq && seq < tcb.snd_max) {
            self.counters.icmp_ignored += 1;
            return;
        }
        let err = match kind {
            UnreachableError::Net => ConnError::NetUnreachable,
            UnreachableError::Host => ConnError::HostUnreachable,
            UnreachableError::Refused => ConnError::Refused,
        };
        let passive = tcb.listener.is_some();
        match tcb.state {
            // An active open is told; a passive one is forgotten (network or host only).
            State::SynSent | State::SynReceived if !passive || msg.code.0 <= 1 => {
                self.counters.icmp_connect_aborts += 1;
                self.counters.failed_opens += 1;
                tcb.state = State::Closed;
                self.trace.event(now, tcb, trace::Event::State(State::Closed));
                if !passive {
                    tcb.error = Some(err);
                    self.events.mark(idx);
                }
                self.retire(idx);
            }
            State::Closed | State::Listen | State::TimeWait | State::SynReceived => self.counters.icmp_ignored += 1,
            _ => {
                self.counters.icmp_soft_errors += 1;
                tcb.soft_error = Some(err);
                tcb.soft_error_at = now;
                let path = msg.code.0 <= 1 && !msg.time_exceeded;
                if path && seq == tcb.snd_una && tcb.retries > 0 && tcb.rtt.backoff() > 0 {
                    if let Some(sent) = tcb.sndq.front().filter(|s| s.sent > 1).map(|s| s.sent_at) {
                        tcb.rtt.revert_back_off();
                        tcb.ld_reverts = tcb.ld_reverts.saturating_add(1);
                        tcb.timers.rexmt.set((sent + tcb.rtt.rto()).max(now));
                        self.counters.icmp_rto_reverts += 1;
                        self.refile(idx);
                    }
                }
            }
        }
    }
}
