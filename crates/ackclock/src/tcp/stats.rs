//! Per-connection statistics (like Linux `tcp_info`). The stack-wide counters are
//! [`crate::stats`], re-exported here.

pub use crate::stats::{Counters, DropReason};

use super::tcb::State;
use crate::time::Duration;

/// Counters kept by each connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnStats {
    pub segs_in: u64,
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
    /// Retransmission timeouts that found the peer had discarded data it SACKed (reneging,
    /// RFC 2018 §8): the SACK marks were cleared.
    pub sack_reneging: u64,
    /// Segments that arrived out of order.
    pub ooo_segs: u64,
    /// Zero-window probes sent.
    pub window_probes: u64,
    /// Received segments dropped for a bad checksum found during the copy to the application.
    pub bad_checksums: u64,
}

/// A snapshot of one connection, like Linux's `struct tcp_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpInfo {
    pub state: State,
    pub srtt: Option<Duration>,
    pub rttvar: Duration,
    pub rto: Duration,
    /// Congestion window, bytes.
    pub cwnd: u32,
    pub ssthresh: u32,
    /// Send and advertised-receive windows, bytes.
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    /// Send MSS and the payload of a full-sized segment.
    pub smss: u16,
    pub eff_mss: u16,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub timestamps: bool,
    pub sack: bool,
    /// Bytes in flight.
    pub flight: u32,
    pub stats: ConnStats,
}
