//! Per-connection traces: state samples and events with their time, for plots
//! (time-sequence diagrams, cwnd/ssthresh/RTO curves) and for tests that assert on an
//! algorithm's behaviour.
//!
//! Off by default. When off, each trace point is one predictable branch on a bool; nothing
//! is built or stored.

use super::seq::SeqNumber;
use super::tcb::{FourTuple, State, Tcb};
use crate::time::Instant;

/// A snapshot of the sender and receiver state of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Congestion window in force (with recovery inflation), bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes.
    pub ssthresh: u32,
    /// Microseconds; 0 before the first RTT sample.
    pub srtt_us: u64,
    /// RTTVAR, microseconds; 0 before the first RTT sample.
    pub rttvar_us: u64,
    /// Retransmission timeout with its current backoff, microseconds.
    pub rto_us: u64,
    /// Bytes in flight.
    pub flight: u32,
    /// Sequence numbers relative to the ISS (so the first data byte is 1).
    pub snd_una: u64,
    /// snd_nxt: the next sequence number to send, relative to the ISS.
    pub snd_nxt: u64,
    /// snd_max: the highest sequence number sent, relative to the ISS.
    pub snd_max: u64,
    /// Send window (SND.WND): the window the peer last advertised, scaled, bytes.
    pub snd_wnd: u32,
    /// Window we last advertised, bytes.
    pub rcv_wnd: u32,
    /// Whether a fast recovery (NewReno or SACK) is in progress.
    pub in_recovery: bool,
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// State after an ACK was processed (or another change worth sampling).
    Sample(Sample),
    /// A data segment left: relative sequence range, and whether it was sent before.
    Sent {
        /// Sequence number of the first payload byte, relative to the ISS.
        seq: u64,
        /// Payload bytes.
        len: u32,
        /// Whether this range was sent before.
        retransmit: bool,
    },
    /// An ACK arrived: relative cumulative ACK and the SACK blocks (relative, up to 4).
    Ack {
        /// The cumulative acknowledgement, relative to the ISS.
        ack: u64,
        /// The SACK blocks as half-open `(left, right)` edges relative to the ISS; only the
        /// first `sack_len` are meaningful.
        sack: [(u64, u64); 4],
        /// Number of SACK blocks the ACK carried (0 to 4).
        sack_len: u8,
    },
    /// The connection changed state.
    State(State),
    /// Fast retransmit: recovery began.
    FastRetransmit,
    /// Recovery ended (the recovery point was acknowledged).
    RecoveryEnd,
    /// The retransmission timer expired.
    Rto,
    /// The last loss response was undone: its retransmissions proved unnecessary.
    Undo,
}

/// One trace record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// When it happened (the `now` of the call that recorded it).
    pub time: Instant,
    /// The connection it happened to.
    pub conn: FourTuple,
    /// What happened.
    pub event: Event,
}

/// The stack's trace buffer.
#[derive(Debug, Default)]
pub struct Trace {
    pub(crate) enabled: bool,
    pub(crate) records: Vec<Record>,
}

impl Trace {
    #[inline]
    pub(crate) fn on(&self) -> bool {
        self.enabled
    }

    #[inline]
    pub(crate) fn event(&mut self, time: Instant, tcb: &Tcb, event: Event) {
        if self.enabled {
            self.records.push(Record { time, conn: tcb.tuple, event });
        }
    }

    #[inline]
    pub(crate) fn sample(&mut self, time: Instant, tcb: &Tcb) {
        if self.enabled {
            let s = sample(tcb);
            self.records.push(Record { time, conn: tcb.tuple, event: Event::Sample(s) });
        }
    }
}

/// Sequence number relative to the ISS, as a 64-bit offset (valid within 2^31 of snd_una).
pub(crate) fn rel(tcb: &Tcb, seq: SeqNumber) -> u64 {
    seq.since(tcb.iss) as u64
}

fn sample(t: &Tcb) -> Sample {
    Sample {
        cwnd: t.cwnd(),
        ssthresh: t.cc.ssthresh(),
        srtt_us: t.rtt.srtt().map_or(0, |d| d.as_micros() as u64),
        rttvar_us: t.rtt.rttvar().as_micros() as u64,
        rto_us: t.rtt.rto().as_micros() as u64,
        flight: t.flight(),
        snd_una: rel(t, t.snd_una),
        snd_nxt: rel(t, t.snd_nxt),
        snd_max: rel(t, t.snd_max),
        snd_wnd: t.snd_wnd,
        rcv_wnd: t.rcv_adv.since(t.rcv_nxt),
        in_recovery: t.recovery.is_some(),
    }
}
