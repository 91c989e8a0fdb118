//! The transmission control block: one connection's state (RFC 9293 §3.3.1), its queues,
//! and its timers. The protocol rules that move it live in `input`, `output` and `timer`.

use super::cc::CongestionControl;
use super::config::SocketOptions;
use super::reasm::OutOfOrderQueue;
use super::recovery::Recovery;
use super::rtt::RttEstimator;
use super::seq::SeqNumber;
use super::stats::ConnStats;
use crate::buf::PBuf;
use crate::time::Instant;
use core::fmt;
use core::net::Ipv4Addr;
use std::collections::VecDeque;

/// The eleven states of RFC 9293 §3.3.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// CLOSED: no connection.
    Closed,
    /// LISTEN: waiting for a SYN from any remote TCP and port.
    Listen,
    /// SYN-SENT: our SYN sent, waiting for the peer's SYN and the ACK of ours.
    SynSent,
    /// SYN-RECEIVED: SYN received and SYN-ACK sent, waiting for the ACK of our SYN.
    SynReceived,
    /// ESTABLISHED: open; data may flow both ways.
    Established,
    /// FIN-WAIT-1: we closed and sent our FIN, waiting for its ACK or the peer's FIN.
    FinWait1,
    /// FIN-WAIT-2: our FIN is acknowledged, waiting for the peer's FIN.
    FinWait2,
    /// CLOSE-WAIT: the peer's FIN received, waiting for the application to close.
    CloseWait,
    /// CLOSING: both FINs sent, the peer's received, waiting for the ACK of ours.
    Closing,
    /// LAST-ACK: the peer closed first and our FIN is sent, waiting for its ACK.
    LastAck,
    /// TIME-WAIT: both FINs exchanged and acknowledged, waiting 2 MSL before the 4-tuple may be reused.
    TimeWait,
}

impl State {
    /// ESTABLISHED and later: the states where both SYNs are acknowledged.
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::Closed | State::Listen | State::SynSent | State::SynReceived)
    }

    /// States in which the peer may still send data.
    pub fn can_receive(self) -> bool {
        matches!(self, State::Established | State::FinWait1 | State::FinWait2)
    }

    /// States in which the application may still queue data.
    pub fn can_send(self) -> bool {
        matches!(self, State::Established | State::CloseWait)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Closed => "CLOSED",
            State::Listen => "LISTEN",
            State::SynSent => "SYN-SENT",
            State::SynReceived => "SYN-RECEIVED",
            State::Established => "ESTABLISHED",
            State::FinWait1 => "FIN-WAIT-1",
            State::FinWait2 => "FIN-WAIT-2",
            State::CloseWait => "CLOSE-WAIT",
            State::Closing => "CLOSING",
            State::LastAck => "LAST-ACK",
            State::TimeWait => "TIME-WAIT",
        })
    }
}

/// A connection's 4-tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FourTuple {
    /// Our IPv4 address.
    pub local_addr: Ipv4Addr,
    /// Our TCP port.
    pub local_port: u16,
    /// The peer's IPv4 address.
    pub remote_addr: Ipv4Addr,
    /// The peer's TCP port.
    pub remote_port: u16,
}

impl FourTuple {
    /// Our address and port.
    pub fn local(&self) -> core::net::SocketAddrV4 {
        core::net::SocketAddrV4::new(self.local_addr, self.local_port)
    }

    /// The peer's address and port.
    pub fn remote(&self) -> core::net::SocketAddrV4 {
        core::net::SocketAddrV4::new(self.remote_addr, self.remote_port)
    }
}

/// A segment of the send queue: payload in its own pbuf (with headroom for the headers), its
/// checksum cached when it was copied in. Sent segments stay here until acknowledged, and a
/// retransmission sends the same buffer again.
#[derive(Debug)]
pub(crate) struct TxSeg {
    pub seq: SeqNumber,
    /// View = exactly the payload.
    pub buf: PBuf,
    /// Times transmitted (0 = not yet sent).
    pub sent: u32,
    /// When it was last transmitted (for RTT samples without timestamps, Karn's rule).
    pub sent_at: Instant,
    /// SACKed by the peer (RFC 6675 scoreboard).
    pub sacked: bool,
}

impl TxSeg {
    pub fn len(&self) -> u32 {
        self.buf.len() as u32
    }
    pub fn end(&self) -> SeqNumber {
        self.seq + self.len()
    }
}

/// Checksum state of a received segment whose verification was deferred to the copy into
/// the application's buffer (Afterburner's receive path, Dalton et al. 1993).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unverified {
    /// Sum of the pseudo-header and the TCP header, checksum field included: the segment is
    /// good when this plus the payload's sum is 0xffff.
    pub header_sum: u16,
    /// TSval to record as TS.Recent once the segment is known good (RFC 7323 §4.3).
    pub tsval: Option<u32>,
}

/// A segment of the receive queue: in-order payload waiting for the application.
#[derive(Debug)]
pub(crate) struct RxSeg {
    pub seq: SeqNumber,
    /// View = the payload not yet read.
    pub buf: PBuf,
    pub unverified: Option<Unverified>,
}

/// The out-of-order queue of a connection, allocated when its first segment arrives out of
/// order. Most connections never reorder, and an idle one should not carry the queue's
/// 144 bytes. Once allocated it stays while the connection is busy: freeing it at each drain
/// would cost an allocation per loss episode, and the data path allocates nothing in steady
/// state, loss included. It is given back after ten idle seconds (`reclaim`), or at close.
#[derive(Debug, Default)]
pub(crate) struct LazyOoo(Option<Box<OutOfOrderQueue>>);

impl LazyOoo {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|q| q.is_empty())
    }

    /// The queue has been allocated (and not given back).
    #[inline]
    pub fn is_allocated(&self) -> bool {
        self.0.is_some()
    }

    #[inline]
    pub fn bytes(&self) -> usize {
        self.0.as_ref().map_or(0, |q| q.bytes())
    }

    pub fn segments(&self) -> usize {
        self.0.as_ref().map_or(0, |q| q.segments())
    }

    /// [`OutOfOrderQueue::insert`], allocating the queue the first time.
    pub fn insert(&mut self, pos: u64, buf: PBuf) -> super::reasm::Insert {
        self.0.get_or_insert_with(Default::default).insert(pos, buf)
    }

    /// [`OutOfOrderQueue::first_block`].
    pub fn first_block(&self) -> Option<(u64, u64)> {
        self.0.as_ref()?.first_block()
    }

    pub fn pop_ready(&mut self, rcv_nxt: u64) -> Option<(u64, PBuf)> {
        self.0.as_mut()?.pop_ready(rcv_nxt)
    }

    pub fn sack_blocks(
        &self,
        rcv_nxt: u64,
        max: usize,
        out: &mut [(u64, u64); super::reasm::MAX_SACK_BLOCKS],
    ) -> usize {
        self.0.as_ref().map_or(0, |q| q.sack_blocks(rcv_nxt, max, out))
    }

    /// Drop what is held, and the queue itself.
    pub fn clear(&mut self) {
        self.0 = None;
    }
}

/// A deadline or none: an `Option<Instant>` in 8 bytes instead of 16. `u64::MAX`
/// nanoseconds (585 years after the epoch, where saturating deadlines end) stands for none,
/// which is what a deadline that far out means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deadline(u64);

impl Default for Deadline {
    fn default() -> Self {
        Deadline(u64::MAX)
    }
}

impl Deadline {
    #[inline]
    pub fn get(self) -> Option<Instant> {
        (self.0 != u64::MAX).then_some(Instant::from_nanos(self.0))
    }
    #[inline]
    pub fn set(&mut self, t: Instant) {
        self.0 = t.total_nanos();
    }
    #[inline]
    pub fn clear(&mut self) {
        self.0 = u64::MAX;
    }
    #[inline]
    pub fn is_none(self) -> bool {
        self.0 == u64::MAX
    }
    #[inline]
    pub fn is_some(self) -> bool {
        self.0 != u64::MAX
    }
    #[inline]
    pub fn is_none_or(self, f: impl FnOnce(Instant) -> bool) -> bool {
        self.get().is_none_or(f)
    }
    /// Set it to `t` unless it is set.
    #[inline]
    pub fn get_or_insert(&mut self, t: Instant) {
        if self.is_none() {
            self.set(t);
        }
    }
}

/// Timer deadlines of one connection. The stack's wheel holds one entry per connection, at
/// the earliest of these.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Timers {
    /// Retransmission (also SYN and SYN-ACK retransmission).
    pub rexmt: Deadline,
    /// Zero-window probe.
    pub persist: Deadline,
    /// Delayed ACK.
    pub delack: Deadline,
    /// Keep-alive, or the FIN_WAIT_2 timeout of an orphan.
    pub keepalive: Deadline,
    /// TIME_WAIT's 2 MSL.
    pub time_wait: Deadline,
    /// Output was starved of buffers with something owed (an ACK, a FIN): try again.
    pub retry: Deadline,
}

impl Timers {
    /// The earliest deadline: a plain minimum, unset timers being the latest time.
    #[inline]
    pub fn earliest(&self) -> Option<Instant> {
        let m = self
            .rexmt
            .0
            .min(self.persist.0)
            .min(self.delack.0)
            .min(self.keepalive.0)
            .min(self.time_wait.0)
            .min(self.retry.0);
        (m != u64::MAX).then_some(Instant::from_nanos(m))
    }
}

/// Most quick ACKs one entry into quick-ACK mode grants (Linux `TCP_MAX_QUICKACKS`).
pub(crate) const MAX_QUICK_ACKS: u8 = 16;

/// The receiver's ACK pacing beyond RFC 5681 §4.2's delayed-ACK rule, as Linux keeps it in
/// `icsk_ack`: quick-ACK mode (ACK every data segment at once, for a number of segments) and
/// interactive ("pingpong") mode, where ACKs are left to ride on the data we send back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuickAck {
    /// Quick ACKs are on for this connection ([`TcpConfig::quick_acks`](super::TcpConfig::quick_acks)).
    pub enabled: bool,
    /// ACKs of new data still to send at once (Linux `icsk_ack.quick`).
    pub quick: u8,
    /// We answered data with data within the delayed-ACK time: the connection is
    /// interactive, and quick ACKs are suspended (Linux `inet_csk_in_pingpong_mode`).
    pub pingpong: bool,
    /// When in-order data last arrived (Linux `icsk_ack.lrcvtime`); `None` before the first.
    pub last_data: Option<Instant>,
    /// The ACK owed now is owed only because of quick-ACK mode (the delayed-ACK rule would
    /// have waited): counted as a quick ACK when it leaves alone (not riding on data).
    pub owed: bool,
}

impl QuickAck {
    pub fn new(enabled: bool) -> QuickAck {
        QuickAck { enabled, quick: 0, pingpong: false, last_data: None, owed: false }
    }

    /// In quick-ACK mode: quick ACKs left and not interactive (Linux `tcp_in_quickack_mode`).
    #[inline]
    pub fn active(&self) -> bool {
        self.quick > 0 && !self.pingpong
    }
}

/// Why a connection ended abnormally, reported once to the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnError {
    /// The peer answered our SYN with RST.
    Refused,
    /// The peer reset an established connection.
    Reset,
    /// Retransmissions, SYN retries, keep-alive probes or the user timeout ran out.
    TimedOut,
    /// An ICMP Destination Unreachable said the network cannot be reached (codes 0, 6, 9,
    /// 11: Linux's ENETUNREACH).
    NetUnreachable,
    /// An ICMP Destination Unreachable said the host cannot be reached, or that the path
    /// is administratively closed (codes 1, 5, 7, 8, 10, 12 to 15: Linux's EHOSTUNREACH).
    HostUnreachable,
}

/// The transmission control block.
#[derive(Debug)]
pub(crate) struct Tcb {
    pub state: State,
    pub tuple: FourTuple,
    pub opts: SocketOptions,

    // Send sequence space (RFC 9293 §3.3.1).
    pub iss: SeqNumber,
    pub snd_una: SeqNumber,
    pub snd_nxt: SeqNumber,
    /// Highest sequence number sent (BSD's snd_max): snd_nxt moves back on a retransmission.
    pub snd_max: SeqNumber,
    /// Send window, scaled (bytes).
    pub snd_wnd: u32,
    pub snd_wl1: SeqNumber,
    pub snd_wl2: SeqNumber,
    /// Largest window the peer has offered (sender SWS avoidance, RFC 9293 §3.8.6.2.1).
    pub max_snd_wnd: u32,
    /// End of the last short (less than a full-sized) data segment sent: Minshall's
    /// refinement of Nagle's algorithm holds a short segment only while this is
    /// unacknowledged (Linux `snd_sml`).
    pub snd_sml: SeqNumber,
    /// The peer's window-scale shift (applies to windows it sends).
    pub snd_wscale: u8,

    // Receive sequence space.
    pub irs: SeqNumber,
    /// Next sequence number expected, counting segments queued but not yet verified.
    pub rcv_nxt: SeqNumber,
    /// `rcv_nxt` as a 64-bit stream position (the out-of-order queue's coordinates).
    pub rcv_nxt_pos: u64,
    /// RCV.UP as a stream position: one past the last urgent octet the peer has pointed
    /// to (RFC 9293 §3.8.5; 0 before any). Urgent data is pending while the application's
    /// read position is below it.
    pub rcv_up: u64,
    /// Right edge of the window last advertised (never moves left, RFC 9293 §3.8.6.2.2).
    pub rcv_adv: SeqNumber,
    /// Our window-scale shift (applies to windows we send).
    pub rcv_wscale: u8,
    /// Both SYNs carried window scale (RFC 7323 §2.2), so the shifts apply.
    pub wscale_ok: bool,
    /// Sequence number the peer's FIN occupies, once it has arrived (possibly out of order).
    pub rcv_fin: Option<SeqNumber>,

    // Options.
    /// Send MSS: the peer's advertised MSS bounded by ours (RFC 9293 §3.7.1).
    pub smss: u16,
    /// MSS we advertised.
    pub rmss: u16,
    /// What `smss` may grow back to when a path MTU estimate expires: the peer's MSS
    /// bounded by ours, as the handshake set it (Linux `mss_clamp`).
    pub mss_clamp: u16,
    /// The interface's path MTU generation `smss` last followed (Linux's
    /// `icsk_pmtu_cookie`, `pmtu::follow`).
    pub pmtu_gen: u32,
    /// Payload per full-sized segment: `smss` less the options every segment carries.
    pub eff_mss: u16,
    pub ts_enabled: bool,
    pub ts_recent: u32,
    pub ts_recent_age: Instant,
    /// Timestamp clock offset towards this peer (see `Tcp::ts_offset`).
    pub ts_offset: u32,
    pub sack_enabled: bool,
    /// ACK number of the last segment we sent (RFC 7323 §4.3's Last.ACK.sent).
    pub last_ack_sent: SeqNumber,

    // Retransmission.
    pub rtt: RttEstimator,
    /// Sequence number being timed without timestamps, and when it was sent (Karn's rule).
    pub rtt_seq: Option<(SeqNumber, Instant)>,
    /// Consecutive RTO expiries.
    pub retries: u32,
    /// Backoffs RFC 6069 took back since the first of those expiries: the give-up is then
    /// by time, not by count (each revert shortens the next wait).
    pub ld_reverts: u8,
    /// When the oldest unacknowledged data was first sent (for the user timeout).
    pub rexmt_start: Option<Instant>,
    /// Consecutive zero-window probes unanswered by a window opening.
    pub persist_backoff: u32,
    /// Keep-alive probes sent without an answer.
    pub keepalive_probes: u32,
    /// Zero-window probes sent since the peer last acknowledged anything.
    pub probes_out: u32,
    /// When we last answered a dataless out-of-window segment (rate limit).
    pub last_oow_ack: Option<Instant>,
    /// Last time a segment arrived (keep-alive idle time).
    pub last_rcv: Instant,
    /// The last ICMP error a segment of ours drew while synchronized, and when (a soft
    /// error, RFC 1122 §4.2.3.9): the connection goes on, and if it times out with nothing
    /// received since, this is the error reported (Linux's `sk_err_soft`).
    /// (Two fields, not an `Option` of a pair: the pair's padding could hold nothing else.)
    pub soft_error: Option<ConnError>,
    /// When `soft_error` arrived.
    pub soft_error_at: Instant,

    // The ack clock: congestion control and loss recovery.
    pub cc: Box<dyn CongestionControl>,
    /// NewReno's window inflation during fast recovery (Jacobson 1990); may go negative after
    /// partial ACKs (RFC 6582 deflation).
    pub inflation: i64,
    pub dupacks: u32,
    /// The duplicate-ACK threshold in force (RFC 5681's 3, raised when reordering proved a
    /// fast retransmit unnecessary; Linux `tp->reordering`).
    pub reordering: u16,
    /// snd_max when the first duplicate ACK of the current run arrived: what was in flight
    /// when the loss was signalled, before limited transmit sent more (RFC 5681 §3.2).
    pub snd_max_at_dupack: SeqNumber,
    pub recovery: Option<Recovery>,
    /// Undoing the last loss response if it proves unnecessary (D-SACK, Eifel).
    pub undo: Option<super::recovery::Undo>,
    /// RFC 6582's `recover`: snd_max when the last recovery (or RTO) began.
    pub recover: SeqNumber,
    /// The most recent ranges of retransmitted data the peer has acknowledged, newest first
    /// (empty ranges unused), so that a D-SACK for one can be believed (RFC 2883 §4).
    pub rxt_acked: [(SeqNumber, SeqNumber); super::recovery::RXT_ACKED],
    /// Retransmit the segment holding this sequence number at the next output, outside the
    /// window (fast retransmit, NewReno partial ACK).
    pub rexmt_now: Option<SeqNumber>,
    /// When data was last sent (restart after idle, RFC 5681 §4.1).
    pub last_send: Instant,

    // Queues.
    /// Sent-and-unacknowledged, then unsent, segments, in sequence order.
    pub sndq: VecDeque<TxSeg>,
    /// Payload bytes in `sndq`.
    pub snd_queued: usize,
    /// Sequence number just past the last byte queued; the FIN, once queued, takes it.
    pub snd_end: SeqNumber,
    /// SND.UP while in urgent mode: the sequence number after the last urgent byte the
    /// application queued (RFC 9293 §3.8.5); `None` once the peer acknowledged it all.
    pub snd_up: Option<SeqNumber>,
    /// Index in `sndq` of the segment holding `snd_nxt` (== len when all data is sent).
    pub snd_nxt_idx: usize,
    /// The application has shut down writing: a FIN follows the queued data.
    pub fin_queued: bool,
    /// In-order data waiting for the application.
    pub rcvq: super::rxq::RxQueue,
    /// Payload bytes in `rcvq`.
    pub rcv_queued: usize,
    /// The last `rcv_unverified` entries of `rcvq` have not had their checksum checked.
    pub rcv_unverified: usize,
    /// Data received beyond `rcv_nxt`.
    pub ooo: LazyOoo,

    // Acknowledgement state.
    /// An ACK must go out at the next output. Set with [`Tcb::owe_ack`] or
    /// [`Tcb::owe_data_ack`].
    pub ack_now: bool,
    /// `ack_now` is owed only for received data, by the ACK rule (every second segment, a
    /// quick ACK, the delayed-ACK timer): if that data fails its deferred checksum, no ACK
    /// is owed at all (`input::reject_from`).
    pub ack_for_data: bool,
    /// Full-sized segments received since the last ACK we sent (RFC 5681 §4.2).
    pub unacked_segs: u32,
    /// A D-SACK block to report in the next ACK (RFC 2883).
    pub dsack: Option<(SeqNumber, SeqNumber)>,
    /// Quick-ACK and interactive modes.
    pub quickack: QuickAck,

    pub timers: Timers,

    // Application side.
    /// The application will not read any more (shutdown(Read) or close).
    pub shut_rd: bool,
    /// The application closed the socket: the connection finishes on its own.
    pub orphan: bool,
    /// Set when the connection ended abnormally.
    pub error: Option<ConnError>,
    /// Passive opens: the listener whose accept queue this connection joins.
    pub listener: Option<u32>,
    /// With `listener`: in its accept queue (established, not yet accepted), not its SYN
    /// queue.
    pub accept_queued: bool,
    /// Where this connection is in the stack's dirty list.
    pub dirty: bool,

    pub stats: ConnStats,
    /// Header prediction: the expected offset/flags/window word, in wire byte order (see
    /// `input::pred_word`).
    pub pred_flags: u32,
    /// Sum of the pseudo-header's addresses and protocol (the `ph_sum` of Jacobson 1993), so that a
    /// segment's checksum costs only its header and length.
    pub ph_sum: u16,
    /// The next hop's Ethernet address as last resolved, so that sending skips the ARP
    /// cache's hash lookup while that cache is unchanged.
    pub hop: Option<crate::iface::CachedHop>,
}

impl Tcb {
    /// Owe an ACK at the next output, for anything but the ACK rule for received data.
    #[inline]
    pub fn owe_ack(&mut self) {
        self.ack_now = true;
        self.ack_for_data = false;
    }

    /// Owe an ACK by the ACK rule for received data: owed for that data alone unless it was
    /// already owed for something else.
    #[inline]
    pub fn owe_data_ack(&mut self) {
        self.ack_for_data |= !self.ack_now;
        self.ack_now = true;
    }

    /// Sequence number our ACKs carry: everything before it is in the receive queue and
    /// verified.
    #[inline]
    pub fn ack_seq(&self) -> SeqNumber {
        // Nearly always everything is verified: no look into the queue.
        if self.rcv_unverified == 0 {
            return self.rcv_nxt;
        }
        match self.rcvq.get(self.rcvq.len().wrapping_sub(self.rcv_unverified)) {
            Some(s) => s.seq,
            None => self.rcv_nxt,
        }
    }

    /// Start the send sequence space at `iss` (before anything is sent).
    pub fn set_iss(&mut self, iss: SeqNumber) {
        self.iss = iss;
        self.snd_una = iss;
        self.snd_nxt = iss;
        self.snd_max = iss;
        self.snd_sml = iss;
        self.snd_end = iss + 1;
        self.recover = iss;
        self.snd_max_at_dupack = iss;
    }

    /// Payload of a full-sized segment from the peer: our MSS less the options it carries
    /// (Linux's `rcv_mss`), the unit of receiver SWS avoidance and window updates.
    #[inline]
    pub fn rcv_mss(&self) -> u16 {
        self.rmss - if self.ts_enabled { 12 } else { 0 }
    }

    /// The congestion window in force: the algorithm's, plus NewReno's recovery inflation.
    #[inline]
    pub fn cwnd(&self) -> u32 {
        (self.cc.cwnd() as i64 + self.inflation).clamp(self.eff_mss as i64, u32::MAX as i64) as u32
    }

    /// Bytes of flight (sent, not yet acknowledged), counting SYN and FIN.
    #[inline]
    pub fn flight(&self) -> u32 {
        self.snd_max.since(self.snd_una)
    }

    /// Whether `len` bytes at `seq` fit the receive window: within the right edge we
    /// advertised (RFC 9293 §3.10.7.4: the full path trims what lies beyond it) and the
    /// buffer's free space.
    #[inline]
    pub fn fits_window(&self, seq: SeqNumber, len: u32) -> bool {
        seq + len <= self.rcv_adv && len as usize <= self.rcv_space()
    }

    /// Receive-buffer space not held by queued data.
    #[inline]
    pub fn rcv_space(&self) -> usize {
        self.opts.recv_buffer.saturating_sub(self.rcv_queued + self.ooo.bytes())
    }

    /// 64-bit stream position of `seq`, which must be at or after `rcv_nxt` (within the window).
    #[inline]
    pub fn rcv_pos(&self, seq: SeqNumber) -> u64 {
        self.rcv_nxt_pos + seq.since(self.rcv_nxt) as u64
    }

    /// Sequence number of a 64-bit receive position.
    #[inline]
    pub fn pos_seq(&self, pos: u64) -> SeqNumber {
        self.rcv_nxt + (pos.wrapping_sub(self.rcv_nxt_pos) as u32)
    }

    /// Urgent data the application has still to read (RFC 9293 §3.8.5, MUST-33): bytes
    /// from its read position up to and including the last urgent octet, `None` if the
    /// urgent pointer is not ahead of what it has read.
    pub fn urgent_pending(&self) -> Option<usize> {
        let read = self.rcv_nxt_pos.saturating_sub(self.rcv_queued as u64);
        (self.rcv_up > read).then(|| (self.rcv_up - read) as usize)
    }

    /// In urgent mode: urgent data queued that the peer has not acknowledged yet (SND.UP
    /// beyond SND.UNA).
    #[inline]
    pub fn urgent_mode(&self) -> bool {
        self.snd_up.is_some_and(|up| up > self.snd_una)
    }

    /// Advance `rcv_nxt` by `n` bytes (or a FIN).
    #[inline]
    pub fn advance_rcv_nxt(&mut self, n: u32) {
        self.rcv_nxt += n;
        self.rcv_nxt_pos += n as u64;
    }

    /// Our timestamp clock: milliseconds (RFC 7323 §5.4 suggests 1 ms to 1 s per tick),
    /// offset per connection.
    #[inline]
    /// Set the send MSS, and with it `eff_mss`: what a full-sized segment carries once
    /// the options every segment has (timestamps) are taken out.
    pub(crate) fn set_smss(&mut self, smss: u16) {
        self.smss = smss;
        self.eff_mss = smss - if self.ts_enabled { 12 } else { 0 };
    }

    pub fn ts_now(&self, now: Instant) -> u32 {
        (now.total_millis() as u32).wrapping_add(self.ts_offset)
    }

    /// Whether our FIN has been acknowledged.
    pub fn fin_acked(&self) -> bool {
        self.fin_queued && self.snd_una == self.snd_end + 1
    }

    /// Nothing more will arrive to read: the receive queue is empty and the peer's FIN was
    /// taken in sequence (CLOSE-WAIT, LAST-ACK, CLOSING, TIME-WAIT), or the connection is
    /// over (CLOSED, normally or by an error).
    pub fn read_closed(&self) -> bool {
        let fin_taken = matches!(self.state, State::CloseWait | State::LastAck | State::Closing | State::TimeWait);
        self.rcvq.is_empty() && (fin_taken || self.state == State::Closed)
    }
}
