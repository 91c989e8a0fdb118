//! NewReno's window (RFC 5681, RFC 6582, RFC 3465): slow start with appropriate byte
//! counting (L = 2 SMSS, 1 SMSS in the slow start after a timeout), congestion avoidance at
//! one SMSS per window of data acknowledged, halving on loss (why 1/2: Jacobson and
//! Karels 1988).

use super::{initial_window, Ack, Acks, CongestionControl};
use crate::time::Instant;

/// NewReno's window (RFC 5681, RFC 6582, RFC 3465).
#[derive(Debug, Clone)]
pub struct NewReno {
    smss: u32,
    cwnd: u32,
    ssthresh: u32,
    /// Bytes acknowledged since cwnd last grew in congestion avoidance (RFC 3465 §2.1).
    bytes_acked: u32,
    /// In the slow start that follows a retransmission timeout.
    after_rto: bool,
    /// cwnd and ssthresh before the last loss response, until a timeout or an undo.
    prior: Option<(u32, u32)>,
}

impl NewReno {
    /// A controller for send MSS `smss` with an initial window of `iw_segments` (RFC 6928: 10).
    pub fn new(smss: u32, iw_segments: u32) -> NewReno {
        let smss = smss.max(1);
        // RFC 5681 §3.1: ssthresh starts "arbitrarily high".
        NewReno {
            smss,
            cwnd: initial_window(smss, iw_segments),
            ssthresh: u32::MAX,
            bytes_acked: 0,
            after_rto: false,
            prior: None,
        }
    }

    /// One ACK of `acked` new bytes.
    #[inline(always)]
    fn grow(&mut self, acked: u32) {
        if self.cwnd < self.ssthresh {
            // Slow start, RFC 3465 §2.2: grow by the bytes acknowledged, at most L SMSS per
            // ACK, and not past ssthresh in one step.
            let grow = acked.min(abc_limit(self.after_rto) * self.smss);
            self.cwnd = self.cwnd.saturating_add(grow).min(self.ssthresh.max(self.cwnd));
            if self.cwnd >= self.ssthresh {
                self.bytes_acked = 0;
                self.after_rto = false;
            }
        } else {
            // Congestion avoidance, RFC 3465 §2.1: +1 SMSS once a window's worth is acked.
            self.bytes_acked = self.bytes_acked.saturating_add(acked);
            if self.bytes_acked >= self.cwnd {
                self.bytes_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(self.smss);
            }
        }
    }
}

/// RFC 3465 §2.3's L, in segments: 2 (L = 2 SMSS balances delayed ACKs), but 1 in the slow
/// start that follows a retransmission timeout, where an ACK may cover segments that reached
/// the receiver long ago (their ACKs were lost) and says nothing about the network's
/// capacity now. FreeBSD keeps that L for the whole slow start after the timeout too.
pub(crate) fn abc_limit(after_rto: bool) -> u32 {
    if after_rto {
        1
    } else {
        2
    }
}

/// RFC 5681 eq. 4: ssthresh = max(FlightSize / 2, 2 * SMSS).
pub(crate) fn half_flight(flight: u32, smss: u32) -> u32 {
    (flight / 2).max(2 * smss)
}

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    fn cwnd(&self) -> u32 {
        self.cwnd
    }

    fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    fn on_ack(&mut self, ack: &Ack) {
        self.grow(ack.acked);
    }

    fn on_acks(&mut self, acks: &Acks) {
        if self.cwnd >= self.ssthresh {
            // Congestion avoidance. If less than the window's worth is counted by the end, no
            // ACK of the run completed one (bytes_acked only rises): the count is the only
            // change, and it grows by the run's total.
            let total = acks.total();
            if (self.bytes_acked as u64 + total as u64) < self.cwnd as u64 {
                self.bytes_acked += total;
                return;
            }
        } else {
            // Slow start. If cwnd plus every ACK's min(acked, L) stays below ssthresh, no ACK
            // of the run reached it (cwnd only rises), so each grew cwnd by its min(acked, L)
            // (RFC 3465 §2.2) and nothing else changed.
            let grow = acks.limited_total(abc_limit(self.after_rto) * self.smss);
            if self.cwnd as u64 + grow < self.ssthresh as u64 {
                self.cwnd += grow as u32;
                return;
            }
        }
        // Otherwise each ACK's share in turn, as RFC 3465 counts them: slow start's
        // min(acked, L) and congestion avoidance's one SMSS per window are per ACK.
        for i in 0..acks.len() {
            self.grow(acks.acked(i));
        }
    }

    fn on_loss(&mut self, _now: Instant, flight: u32) {
        self.prior = Some((self.cwnd, self.ssthresh));
        self.ssthresh = half_flight(flight, self.smss);
        self.cwnd = self.ssthresh;
        self.bytes_acked = 0;
        self.after_rto = false;
    }

    fn on_rto(&mut self, _now: Instant, flight: Option<u32>) {
        if let Some(flight) = flight {
            self.ssthresh = half_flight(flight, self.smss);
        }
        self.cwnd = self.smss;
        self.bytes_acked = 0;
        self.after_rto = true;
        self.prior = None;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        // Jacobson 1990: "the congestion window was inflated ... retract it" to ssthresh.
        self.cwnd = self.ssthresh;
    }

    fn on_spurious_loss(&mut self, _now: Instant) {
        if let Some((cwnd, ssthresh)) = self.prior.take() {
            self.cwnd = self.cwnd.max(cwnd);
            self.ssthresh = self.ssthresh.max(ssthresh);
        }
    }

    fn on_idle(&mut self, _now: Instant, restart_window: u32) {
        self.cwnd = self.cwnd.min(restart_window);
        // An undo must not bring back the window from before the idle time (RFC 5681 §4.1).
        self.prior = None;
    }

    fn set_smss(&mut self, smss: u32) {
        self.smss = smss.max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(acked: u32) -> Ack {
        Ack { now: Instant::ZERO, acked, rtt: None, srtt: None, ack_seq: 0, snd_max: 0 }
    }

    #[test]
    fn initial_window_is_rfc_6928() {
        assert_eq!(NewReno::new(1448, 10).cwnd(), 14480);
        assert_eq!(NewReno::new(1460, 10).cwnd(), 14600);
        assert_eq!(NewReno::new(536, 10).cwnd(), 5360);
        assert_eq!(NewReno::new(1448, 4).cwnd(), 4 * 1448);
    }

    #[test]
    fn slow_start_counts_bytes_with_l_two_smss() {
        // RFC 3465 §2.2: a stretch ACK of 4 segments grows cwnd by only 2 SMSS.
        let mut c = NewReno::new(1000, 2);
        c.on_ack(&ack(1000));
        assert_eq!(c.cwnd(), 3000);
        c.on_ack(&ack(4000));
        assert_eq!(c.cwnd(), 5000);
    }

    #[test]
    fn slow_start_after_a_timeout_counts_one_smss_per_ack() {
        // RFC 3465 §2.3: L = 1 SMSS in the slow start after an RTO, 2 SMSS again once it is
        // over.
        let mut c = NewReno::new(1000, 10);
        c.on_rto(Instant::ZERO, Some(8000));
        assert_eq!((c.cwnd(), c.ssthresh()), (1000, 4000));
        c.on_ack(&ack(3000));
        assert_eq!(c.cwnd(), 2000);
        c.on_ack(&ack(3000));
        c.on_ack(&ack(3000));
        assert_eq!(c.cwnd(), 4000, "at ssthresh");
        c.on_idle(Instant::ZERO, 1000);
        c.on_ack(&ack(3000));
        assert_eq!(c.cwnd(), 3000, "a slow start after idle, not after a timeout: L = 2");
    }

    #[test]
    fn congestion_avoidance_adds_one_smss_per_window() {
        // RFC 5681 §3.1 / RFC 3465 §2.1.
        let mut c = NewReno::new(1000, 10);
        c.on_loss(Instant::ZERO, 20_000); // ssthresh = cwnd = 10000
        assert_eq!((c.cwnd(), c.ssthresh()), (10_000, 10_000));
        for _ in 0..9 {
            c.on_ack(&ack(1000));
        }
        assert_eq!(c.cwnd(), 10_000, "not before a full window is acknowledged");
        c.on_ack(&ack(1000));
        assert_eq!(c.cwnd(), 11_000);
    }

    #[test]
    fn loss_halves_flight_with_a_floor_of_two_segments() {
        // RFC 5681 eq. 4.
        let mut c = NewReno::new(1000, 10);
        c.on_loss(Instant::ZERO, 3000);
        assert_eq!(c.ssthresh(), 2000);
        c.on_rto(Instant::ZERO, Some(30_000));
        assert_eq!((c.cwnd(), c.ssthresh()), (1000, 15_000), "RTO: loss window of 1 SMSS");
        c.on_rto(Instant::ZERO, None);
        assert_eq!((c.cwnd(), c.ssthresh()), (1000, 15_000), "a repeated RTO holds ssthresh");
    }

    #[test]
    fn an_unnecessary_loss_response_is_taken_back_once() {
        // RFC 9438 §4.9 and Linux `tcp_undo_cwnd_reduction`: the window and threshold before
        // the loss come back, never below what the window has grown to since.
        let mut c = NewReno::new(1000, 10);
        c.on_loss(Instant::ZERO, 20_000);
        c.on_loss(Instant::ZERO, 10_000);
        assert_eq!((c.cwnd(), c.ssthresh()), (5000, 5000));
        c.on_spurious_loss(Instant::ZERO);
        assert_eq!((c.cwnd(), c.ssthresh()), (10_000, 10_000), "only the last response is undone");
        c.on_spurious_loss(Instant::ZERO);
        assert_eq!((c.cwnd(), c.ssthresh()), (10_000, 10_000), "and only once");
        // A timeout after the loss: nothing to undo.
        c.on_loss(Instant::ZERO, 10_000);
        c.on_rto(Instant::ZERO, None);
        c.on_spurious_loss(Instant::ZERO);
        assert_eq!((c.cwnd(), c.ssthresh()), (1000, 5000));
        // In slow start (ssthresh still "arbitrarily high"), slow start resumes.
        let mut c = NewReno::new(1000, 10);
        c.on_loss(Instant::ZERO, 10_000);
        for _ in 0..10 {
            c.on_ack(&ack(1000));
        }
        c.on_spurious_loss(Instant::ZERO);
        assert_eq!((c.cwnd(), c.ssthresh()), (10_000, u32::MAX));
        // An idle restart (RFC 5681 §4.1) forgets the saved window.
        c.on_loss(Instant::ZERO, 10_000);
        c.on_idle(Instant::ZERO, 2000);
        c.on_spurious_loss(Instant::ZERO);
        assert_eq!((c.cwnd(), c.ssthresh()), (2000, 5000));
    }
}
