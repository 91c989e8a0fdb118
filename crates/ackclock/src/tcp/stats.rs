//! Statistics: per connection (like Linux `tcp_info`) and stack-wide (like `netstat -s`).

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
    /// Pure ACKs sent at once in quick-ACK mode that the delayed-ACK rule would have held
    /// back ([`TcpConfig::quick_acks`](super::TcpConfig::quick_acks)).
    pub quick_acks: u64,
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

/// Why the stack dropped a received frame or segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// A frame or header failed to parse.
    Malformed,
    /// IPv4 header or TCP checksum did not verify.
    BadChecksum,
    /// Not for one of our addresses.
    NotForUs,
    /// An IPv4 fragment (no reassembly).
    Fragment,
    /// A protocol the stack does not handle.
    UnknownProtocol,
    /// A segment outside the receive window (acknowledged, then dropped).
    OutOfWindow,
    /// Timestamp older than TS.Recent (RFC 7323 §5 PAWS).
    Paws,
    /// An RST that did not match exactly (RFC 5961 §3).
    BadRst,
    /// An ACK for data never sent, or too old (RFC 5961 §5).
    BadAck,
    /// A SYN to a listener whose SYN or accept queue is full.
    ListenOverflow,
    /// No buffer left in the pool.
    NoBuffer,
    /// The receive queue hit its buffer-count bound.
    RcvQueueFull,
    /// Segment for a connection that has no state for it (answered with RST if allowed).
    NoConnection,
    /// Anything else the state machine discards (e.g. no ACK bit).
    Discarded,
}

/// Stack-wide counters, like `netstat -s`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub frames_in: u64,
    pub frames_out: u64,
    pub segs_in: u64,
    pub segs_out: u64,
    pub retransmitted: u64,
    pub active_opens: u64,
    pub passive_opens: u64,
    pub failed_opens: u64,
    pub resets_sent: u64,
    pub resets_received: u64,
    pub established_resets: u64,
    pub challenge_acks: u64,
    /// Challenge ACKs not sent because of the rate limit (RFC 5961 §7).
    pub challenge_acks_suppressed: u64,
    pub timeouts: u64,
    /// Segments whose headers had to be rebuilt in a fresh buffer because a device still held
    /// the original (rare: the single-copy path).
    pub tx_copies: u64,
    /// Unsent segments cut to fit a window: the front moves to a fresh buffer (a copy of it).
    pub tx_splits: u64,
    /// Frames the device queue would not take.
    pub tx_dropped: u64,
    /// Pure ACKs sent at once in quick-ACK mode that the delayed-ACK rule would have held
    /// back ([`TcpConfig::quick_acks`](super::TcpConfig::quick_acks)).
    pub quick_acks: u64,
    /// Segments received on the header-prediction fast path.
    pub fast_path_data: u64,
    pub fast_path_acks: u64,
    pub slow_path: u64,
    pub drops_malformed: u64,
    pub drops_bad_checksum: u64,
    pub drops_not_for_us: u64,
    pub drops_fragment: u64,
    pub drops_unknown_protocol: u64,
    pub drops_out_of_window: u64,
    pub drops_paws: u64,
    pub drops_bad_rst: u64,
    pub drops_bad_ack: u64,
    pub drops_listen_overflow: u64,
    pub drops_no_buffer: u64,
    pub drops_rcvq_full: u64,
    pub drops_no_connection: u64,
    pub drops_discarded: u64,
}

impl Counters {
    /// Count a drop.
    pub fn drop(&mut self, reason: DropReason) {
        let c = match reason {
            DropReason::Malformed => &mut self.drops_malformed,
            DropReason::BadChecksum => &mut self.drops_bad_checksum,
            DropReason::NotForUs => &mut self.drops_not_for_us,
            DropReason::Fragment => &mut self.drops_fragment,
            DropReason::UnknownProtocol => &mut self.drops_unknown_protocol,
            DropReason::OutOfWindow => &mut self.drops_out_of_window,
            DropReason::Paws => &mut self.drops_paws,
            DropReason::BadRst => &mut self.drops_bad_rst,
            DropReason::BadAck => &mut self.drops_bad_ack,
            DropReason::ListenOverflow => &mut self.drops_listen_overflow,
            DropReason::NoBuffer => &mut self.drops_no_buffer,
            DropReason::RcvQueueFull => &mut self.drops_rcvq_full,
            DropReason::NoConnection => &mut self.drops_no_connection,
            DropReason::Discarded => &mut self.drops_discarded,
        };
        *c += 1;
    }

    /// Drops of every reason.
    pub fn drops(&self) -> u64 {
        self.drops_malformed
            + self.drops_bad_checksum
            + self.drops_not_for_us
            + self.drops_fragment
            + self.drops_unknown_protocol
            + self.drops_out_of_window
            + self.drops_paws
            + self.drops_bad_rst
            + self.drops_bad_ack
            + self.drops_listen_overflow
            + self.drops_no_buffer
            + self.drops_rcvq_full
            + self.drops_no_connection
            + self.drops_discarded
    }
}
