//! Congestion control: the ack clock's window (Jacobson and Karels 1988, Jacobson 1990, RFC 5681).
//!
//! An algorithm owns `cwnd` and `ssthresh` and hears about four things: new data
//! acknowledged outside recovery, a loss detected by duplicate ACKs or SACK, a
//! retransmission timeout, and the end of recovery. How recovery itself proceeds — window
//! inflation by duplicate ACKs (NewReno), or the SACK `pipe` (RFC 6675) — is the sender's
//! business (`tcp::recovery`), the same for every algorithm.

#[cfg(test)]
mod batch_tests;
mod cubic;
mod newreno;

pub use cubic::{Cubic, CubicConfig};
pub use newreno::NewReno;

use crate::time::{Duration, Instant};
use core::fmt;

/// Which algorithm a connection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// RFC 5681 + RFC 6582 + RFC 3465 (L = 2 SMSS, 1 SMSS after a timeout). The default.
    #[default]
    NewReno,
    /// RFC 9438, optionally with HyStart++ (RFC 9406).
    Cubic {
        /// Leave slow start early when the RTT rises (HyStart++, RFC 9406).
        hystart: bool,
    },
}

impl Algorithm {
    /// A controller for a connection with send MSS `smss` and an initial window of
    /// `iw_segments` (RFC 6928: 10).
    pub fn build(self, smss: u32, iw_segments: u32) -> Box<dyn CongestionControl> {
        match self {
            Algorithm::NewReno => Box::new(NewReno::new(smss, iw_segments)),
            Algorithm::Cubic { hystart } => Box::new(Cubic::new(smss, iw_segments, CubicConfig { hystart })),
        }
    }

    /// Short name of the algorithm: `newreno`, `cubic` or `cubic+hystart`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::NewReno => "newreno",
            Algorithm::Cubic { hystart: false } => "cubic",
            Algorithm::Cubic { hystart: true } => "cubic+hystart",
        }
    }
}

/// An acknowledgement of new data, outside recovery.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    /// When the ACK arrived.
    pub now: Instant,
    /// Bytes newly acknowledged.
    pub acked: u32,
    /// An RTT sample taken from this ACK, if any.
    pub rtt: Option<Duration>,
    /// The smoothed RTT so far.
    pub srtt: Option<Duration>,
    /// The cumulative ACK and the highest sequence number sent, as offsets from the ISS:
    /// algorithms that count rounds (HyStart++) use them.
    pub ack_seq: u64,
    /// Highest sequence number sent (BSD's snd_max), as an offset from the ISS.
    pub snd_max: u64,
}

/// Consecutive acknowledgements of new data, outside recovery, heard in one call: the
/// original ACKs that one aggregated pure ACK stands for (receive aggregation, after the
/// Myri10GE `inet_lro` patch, Gallatin 2008). Linux hands its `cong_avoid` the count of
/// segments an ACK covered (`tcp_cong_avoid(sk, ack, acked)`); here the window must grow
/// exactly as it would have for the separate ACKs (RFC 3465 §2.2: slow start counts at most
/// L = 2 SMSS *per ACK*), so each original ACK is described, by its number.
///
/// Original ACK `i` is the [`Ack`] that [`Acks::ack`] gives: it acknowledged
/// `acks[i] - acks[i - 1]` bytes (`acks[0] - una` for the first), the newest less
/// `unclaimed`; the newest carries the RTT sample the estimator took, each earlier one the
/// sample its own timestamp echo gives (`ecrs`); `now`, `srtt` and `snd_max` are the same
/// for all of them.
#[derive(Debug, Clone, Copy)]
pub struct Acks<'a> {
    /// When the ACKs arrived (all in one received batch).
    pub now: Instant,
    /// The RTT sample, taken from the newest ACK.
    pub rtt: Option<Duration>,
    /// The timestamp each ACK echoed (TSecr), oldest first, or empty without timestamps:
    /// [`Acks::ack`] gives each earlier ACK the RTT sample it would have carried alone
    /// (HyStart++ counts samples per ACK, RFC 9406 §4.2).
    pub ecrs: &'a [u32],
    /// The connection's timestamp clock offset: our clock at `now` is `now` in
    /// milliseconds plus it (`Tcb::ts_now`), against which `ecrs` are measured.
    pub ts_offset: u32,
    /// The smoothed RTT, the sample included.
    pub srtt: Option<Duration>,
    /// Highest sequence number sent (BSD's snd_max), as an offset from the ISS.
    pub snd_max: u64,
    /// The ISS: ACK number `a` is the offset `a - iss` (modulo 2^32) in [`Ack::ack_seq`].
    pub iss: u32,
    /// SND.UNA before the first of them.
    pub una: u32,
    /// The ACK numbers, oldest first: each advances past the one before, and all lie in
    /// `una..=snd_max`.
    pub acks: &'a [u32],
    /// What the newest ACK's share took that was not data (the SYN or the FIN), which its
    /// byte count leaves out.
    pub unclaimed: u32,
}

impl Acks<'_> {
    /// How many original ACKs.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.acks.len()
    }

    /// Whether there are none.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.acks.is_empty()
    }

    /// The RTT sample of earlier ACK `i`'s timestamp echo, taken as the newest's is: none
    /// for no echo (0) or one from the future.
    #[inline]
    fn echo_rtt(&self, i: usize) -> Option<Duration> {
        let ecr = *self.ecrs.get(i)?;
        let ts_now = (self.now.total_millis() as u32).wrapping_add(self.ts_offset);
        let ms = ts_now.wrapping_sub(ecr);
        (ecr != 0 && (ms as i32) >= 0).then(|| Duration::from_millis(ms as u64))
    }

    /// Bytes original ACK `i` (below [`Acks::len`]) acknowledged.
    #[inline(always)]
    pub fn acked(&self, i: usize) -> u32 {
        let prev = if i == 0 { self.una } else { self.acks[i - 1] };
        let share = self.acks[i].wrapping_sub(prev);
        if i + 1 == self.acks.len() {
            share.saturating_sub(self.unclaimed)
        } else {
            share
        }
    }

    /// Bytes all of them acknowledged: the sum of [`Acks::acked`], from the two ends (the
    /// ACK numbers advance within `una..=snd_max`, so the shares telescope).
    #[inline(always)]
    pub fn total(&self) -> u32 {
        let Some((&last, rest)) = self.acks.split_last() else { return 0 };
        let prev = rest.last().copied().unwrap_or(self.una);
        last.wrapping_sub(self.una) - last.wrapping_sub(prev).min(self.unclaimed)
    }

    /// The sum over the ACKs of min(acked, `l`): what slow start grows cwnd by (RFC 3465
    /// §2.2, L = `l` bytes per ACK) if no ACK of the run reaches ssthresh.
    #[inline(always)]
    pub fn limited_total(&self, l: u32) -> u64 {
        let Some((&newest, earlier)) = self.acks.split_last() else { return 0 };
        let mut prev = self.una;
        let mut sum = 0u64;
        for &a in earlier {
            sum += a.wrapping_sub(prev).min(l) as u64;
            prev = a;
        }
        sum + newest.wrapping_sub(prev).saturating_sub(self.unclaimed).min(l) as u64
    }

    /// Original ACK `i` (below [`Acks::len`]), as [`CongestionControl::on_ack`] hears one.
    #[inline(always)]
    pub fn ack(&self, i: usize) -> Ack {
        Ack {
            now: self.now,
            acked: self.acked(i),
            rtt: if i + 1 == self.acks.len() { self.rtt } else { self.echo_rtt(i) },
            srtt: self.srtt,
            ack_seq: self.acks[i].wrapping_sub(self.iss) as u64,
            snd_max: self.snd_max,
        }
    }
}

/// A congestion-control algorithm.
pub trait CongestionControl: fmt::Debug + Send {
    /// The algorithm's name, as [`Algorithm::name`] spells it.
    fn name(&self) -> &'static str;
    /// Congestion window, bytes.
    fn cwnd(&self) -> u32;
    /// Slow-start threshold, bytes.
    fn ssthresh(&self) -> u32;
    /// New data was acknowledged (not during recovery).
    fn on_ack(&mut self, ack: &Ack);
    /// Several consecutive ACKs of new data (not during recovery), heard at once: the window
    /// must end exactly where [`on_ack`](Self::on_ack) for each of [`Acks::ack`]`(0..len)`
    /// in turn would leave it. This default does that; an algorithm specialises it to do
    /// the per-aggregate part of its work once.
    fn on_acks(&mut self, acks: &Acks) {
        for i in 0..acks.len() {
            self.on_ack(&acks.ack(i));
        }
    }
    /// Loss detected by duplicate ACKs or SACK; `flight` is FlightSize (RFC 5681 eq. 4).
    /// Sets ssthresh and leaves cwnd at ssthresh; the sender adds its recovery inflation.
    fn on_loss(&mut self, now: Instant, flight: u32);
    /// The retransmission timer expired (RFC 5681 §3.1: cwnd to the loss window). With
    /// `Some(flight)` ssthresh is recomputed from FlightSize; with `None` it is held (a
    /// repeated timeout, or one during fast recovery, whose ssthresh already stands).
    fn on_rto(&mut self, now: Instant, flight: Option<u32>);
    /// Recovery completed (the recovery point was acknowledged).
    fn on_recovery_end(&mut self, now: Instant);
    /// The last loss response was unnecessary: every segment it retransmitted had arrived
    /// (the sender's D-SACK and timestamp checks, RFC 2883 and RFC 3522). Take back the
    /// reduction of the last `on_loss` (RFC 9438 §4.9): the state saved then comes back,
    /// but never a smaller window than the present one (Linux `tcp_undo_cwnd_reduction`).
    /// Nothing happens if a timeout came after that loss, or if it was already undone.
    fn on_spurious_loss(&mut self, now: Instant);
    /// The connection sat idle longer than an RTO; restart from at most `restart_window`
    /// (RFC 5681 §4.1).
    fn on_idle(&mut self, now: Instant, restart_window: u32);
    /// The send MSS changed.
    fn set_smss(&mut self, smss: u32);
}

/// RFC 6928's initial window, in bytes: `min(iw * SMSS, max(2 * SMSS, 14600))` for the
/// default of 10 segments; other segment counts are taken as given.
pub fn initial_window(smss: u32, iw_segments: u32) -> u32 {
    let iw = iw_segments.max(1).saturating_mul(smss);
    if iw_segments == 10 {
        iw.min((2 * smss).max(14600))
    } else {
        iw
    }
}
