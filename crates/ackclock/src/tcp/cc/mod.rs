//! Congestion control: the ack clock's window (Jacobson and Karels 1988, Jacobson 1990, RFC 5681).
//!
//! An algorithm owns `cwnd` and `ssthresh` and hears about four things: new data
//! acknowledged outside recovery, a loss detected by duplicate ACKs or SACK, a
//! retransmission timeout, and the end of recovery. How recovery itself proceeds — window
//! inflation by duplicate ACKs (NewReno), or the SACK `pipe` (RFC 6675) — is the sender's
//! business (`tcp::recovery`), the same for every algorithm.

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
