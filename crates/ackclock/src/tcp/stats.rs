//! Per-connection statistics (like Linux `tcp_info`). The stack-wide counters are
//! [`crate::stats`], re-exported here.

pub use crate::stats::{Counters, DropReason};

use super::tcb::State;
use crate::time::Duration;

/// Counters kept by each connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// Segments received on this connection.
    pub segs_in: u64,
    /// Segments sent, each segment of an offload frame counted (as Linux counts them).
    pub segs_out: u64,
    /// Payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Payload bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Payload bytes received in order.
    pub bytes_received: u64,
    /// Segments retransmitted (any cause).
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// Fast retransmits (third duplicate ACK or SACK loss detection).
    pub fast_retransmits: u64,
    /// Duplicate ACKs received.
    pub dup_acks: u64,
    /// SACK blocks received.
    pub sack_blocks: u64,
    /// Retransmissions found unnecessary (D-SACK).
    pub spurious_retransmits: u64,
    /// Loss responses undone because every retransmission they made proved unnecessary
    /// (D-SACK, or the Eifel timestamp check): the window came back.
    pub undos: u64,
    /// Retransmission timeouts that found the peer had discarded data it SACKed (reneging,
    /// RFC 2018 §8): the SACK marks were cleared.
    pub sack_reneging: u64,
    /// Segments that arrived out of order.
    pub ooo_segs: u64,
    /// Zero-window probes sent.
    pub window_probes: u64,
    /// Received segments dropped for a bad checksum found during the copy to the application.
    pub bad_checksums: u64,
    /// Pure ACKs sent at once in quick-ACK mode that the delayed-ACK rule would have held
    /// back ([`TcpConfig::quick_acks`](super::TcpConfig::quick_acks)).
    pub quick_acks: u64,
    /// Urgent pointers received that told the application of urgent data: new, or
    /// pointing further into the stream (RFC 9293 §3.8.5, MUST-32).
    pub urgent_signals: u64,
}

/// A snapshot of one connection, like Linux's `struct tcp_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpInfo {
    /// The connection's TCP state (RFC 9293 §3.3.2).
    pub state: State,
    /// Smoothed round-trip time (SRTT, RFC 6298); `None` before the first sample.
    pub srtt: Option<Duration>,
    /// Round-trip time variation (RTTVAR, RFC 6298); zero before the first sample.
    pub rttvar: Duration,
    /// Retransmission timeout, with its current backoff.
    pub rto: Duration,
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes (RFC 5681).
    pub ssthresh: u32,
    /// Send window (SND.WND): the window the peer last advertised, scaled, bytes.
    pub snd_wnd: u32,
    /// The receive window last advertised, from rcv_nxt to its right edge, bytes.
    pub rcv_wnd: u32,
    /// Send MSS: the peer's advertised MSS bounded by ours (RFC 9293 §3.7.1).
    pub smss: u16,
    /// The payload of a full-sized segment: `smss` less the options every segment carries.
    pub eff_mss: u16,
    /// The peer's window-scale shift, applied to the windows it sends (RFC 7323 §2).
    pub snd_wscale: u8,
    /// Our window-scale shift, applied to the windows we send (RFC 7323 §2).
    pub rcv_wscale: u8,
    /// Whether timestamps were negotiated (RFC 7323 §3).
    pub timestamps: bool,
    /// Whether SACK was negotiated (RFC 2018).
    pub sack: bool,
    /// Bytes in flight.
    pub flight: u32,
    /// The duplicate-ACK threshold in force, segments: 3 (RFC 5681), more once reordering
    /// has shown a fast retransmit unnecessary (Linux's `tcpi_reordering`).
    pub reordering: u16,
    /// The connection's counters.
    pub stats: ConnStats,
}
