//! TCP settings: stack-wide defaults, most of them overridable per socket.

use super::cc::Algorithm;
use super::rtt::RttConfig;
use crate::time::Duration;

/// Keep-alive probing (RFC 9293 §3.8.4; RFC 1122 §4.2.3.6). Off by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepAlive {
    /// Idle time before the first probe (Linux `tcp_keepalive_time`: 2 h).
    pub idle: Duration,
    /// Time between unanswered probes (Linux `tcp_keepalive_intvl`: 75 s).
    pub interval: Duration,
    /// Unanswered probes before the connection is dropped (Linux `tcp_keepalive_probes`: 9).
    pub count: u32,
}

impl Default for KeepAlive {
    fn default() -> Self {
        KeepAlive { idle: Duration::from_secs(7200), interval: Duration::from_secs(75), count: 9 }
    }
}

/// When a listener answers a SYN with a SYN cookie (RFC 4987 §3.6) instead of holding a
/// SYN-RECEIVED connection; Linux's `tcp_syncookies` 0, 1 and 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SynCookies {
    /// Never: a SYN to a full SYN queue is dropped.
    Never,
    /// When the listener's SYN queue is full (the default, as Linux's).
    #[default]
    WhenFull,
    /// For every SYN: no SYN-RECEIVED state at all.
    Always,
}

/// TCP configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpConfig {
    /// MSS to advertise, which also bounds the segments we send; `None` derives it from the
    /// device MTU (MTU - 40). An override is capped at MTU - 40 (segments are never
    /// fragmented) and raised to at least 64.
    pub mss: Option<u16>,
    /// Negotiate window scaling (RFC 7323 §2).
    pub window_scaling: bool,
    /// Negotiate timestamps (RFC 7323 §3-5).
    pub timestamps: bool,
    /// Negotiate SACK (RFC 2018).
    pub sack: bool,
    /// Receive buffer per connection, bytes. It bounds the advertised window, so the
    /// window-scale shift derives from it.
    pub recv_buffer: usize,
    /// Send buffer per connection, bytes: a bound on queued data, not memory set aside. The
    /// default is twice the default receive buffer, so that a writer can queue the next
    /// window while the last is in flight, as Linux's send-buffer autotuning keeps about twice
    /// the congestion window (`tcp_sndbuf_expand`). With a send buffer only the size of the
    /// peer's window, a peer that acknowledges after its reader copied (the runtime's
    /// readers) holds the writer until then, and the two take turns instead of copying at the
    /// same time.
    pub send_buffer: usize,
    /// Disable Nagle's algorithm (RFC 9293 §3.7.4).
    pub nodelay: bool,
    /// Delayed-ACK timer (RFC 5681 §4.2 allows up to 500 ms; Linux uses 40 ms). Values of
    /// 500 ms or more are taken as 499 ms (RFC 9293 §3.8.6.3: the delay MUST be less than
    /// 0.5 seconds).
    pub delayed_ack: Duration,
    /// Quick ACKs, as Linux sends them (`tcp_incr_quickack`, `__tcp_ack_snd_check`): on a
    /// connection's first data and after the receiver was idle longer than the RTO, ACK
    /// every data segment at once for min(window / (2 MSS), 16) segments (at least 2)
    /// instead of delaying, unless the connection is interactive (we answered data with
    /// data within `delayed_ack`, so our ACKs ride on it). A sender's slow start and the
    /// tail of a write held by Nagle's algorithm then need not wait for the delayed-ACK
    /// timer. Off: every ACK follows the delayed-ACK rule alone.
    pub quick_acks: bool,
    /// Maximum segment lifetime; TIME_WAIT lasts 2 MSL (RFC 9293 §3.4.2).
    pub msl: Duration,
    /// How long an orphaned connection (closed by the application) may sit in FIN_WAIT_2
    /// waiting for the peer's FIN (Linux `tcp_fin_timeout`: 60 s).
    pub fin_wait_2_timeout: Duration,
    /// The retransmission-timer estimator.
    pub rtt: RttConfig,
    /// SYN retransmissions before an active open fails (Linux `tcp_syn_retries`: 6).
    pub syn_retries: u32,
    /// SYN-ACK retransmissions before a half-open connection is dropped (Linux: 5).
    pub synack_retries: u32,
    /// Data retransmissions before the connection is aborted (Linux `tcp_retries2`: 15).
    pub max_retries: u32,
    /// Path MTU black hole detection (Linux `tcp_mtu_probing` = 1, RFC 4821 §3's "ICMP
    /// black hole"): after the third retransmission timeout in a row, a connection whose
    /// segments are larger than 1,024 bytes assumes a path that drops them without a
    /// Datagram Too Big and sends 1,024-byte segments (Linux `tcp_base_mss`); each further
    /// timeout halves that, down to 512. The smaller size holds for the connection's life
    /// (no probing back up, where Linux searches upward again after `tcp_probe_interval`).
    /// Linux's trigger is the time three backed-off timeouts take (`tcp_retries1`), and its
    /// floor 48 bytes (`tcp_mtu_probe_floor`). Any three timeouts in a row count, an outage
    /// too. Off by default, as on Linux.
    pub mtu_probing: bool,
    /// Abort when data stays unacknowledged this long (RFC 5482's user timeout); `None`
    /// leaves only `max_retries`.
    pub user_timeout: Option<Duration>,
    /// Keep-alive; `None` (default) disables it.
    pub keepalive: Option<KeepAlive>,
    /// Initial congestion window in segments (RFC 6928: 10).
    pub initial_window: u32,
    /// Congestion control for new connections.
    pub congestion: Algorithm,
    /// Challenge ACKs per second across the stack, on average (RFC 5961 §7; Linux 1000).
    /// Each second's budget is drawn at random from [⌈limit/2⌉, ⌈limit/2⌉ + limit), as Linux
    /// does since 4.7, so that the count left cannot serve as a side channel
    /// (CVE-2016-5696).
    pub challenge_ack_limit: u32,
    /// SYN cookies (RFC 4987 §3.6). A SYN to a full accept queue is dropped whatever this
    /// says, as Linux drops it.
    pub syn_cookies: SynCookies,
    /// Compact TIME-WAIT entries the stack holds at most (Linux's `tcp_max_tw_buckets`),
    /// apart from `max_connections`: a connection the application has closed leaves its
    /// slot when it reaches TIME-WAIT. Past the limit the oldest entry is dropped early
    /// (counted in `time_wait_overflow`); 0 keeps no TIME-WAIT for closed connections.
    pub max_time_wait: usize,
    /// Connections the stack holds at most, TIME_WAIT of connections still held included. The connection table is
    /// sized for it up front.
    pub max_connections: usize,
    /// Ephemeral ports for active opens (RFC 6056; IANA's range by default).
    pub ephemeral_ports: (u16, u16),
    /// Hand the device segments of many MSS to cut (TCP segmentation offload) when it offers
    /// it ([`Capabilities::tso_max`](crate::phy::Capabilities::tso_max)) and the pool's
    /// buffers can hold them.
    pub tso: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: None,
            window_scaling: true,
            timestamps: true,
            sack: true,
            recv_buffer: 256 * 1024,
            send_buffer: 512 * 1024,
            nodelay: false,
            delayed_ack: Duration::from_millis(40),
            quick_acks: true,
            msl: Duration::from_secs(30),
            fin_wait_2_timeout: Duration::from_secs(60),
            rtt: RttConfig::default(),
            syn_retries: 6,
            synack_retries: 5,
            max_retries: 15,
            mtu_probing: false,
            user_timeout: None,
            keepalive: None,
            initial_window: 10,
            congestion: Algorithm::NewReno,
            challenge_ack_limit: 1000,
            syn_cookies: SynCookies::WhenFull,
            max_connections: 4096,
            max_time_wait: 65536,
            ephemeral_ports: (49152, 65535),
            tso: true,
        }
    }
}

/// Per-socket overrides, set before connect/listen or on an accepted stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketOptions {
    /// Receive buffer of this connection, bytes (see [`TcpConfig::recv_buffer`]).
    pub recv_buffer: usize,
    /// Send buffer of this connection, bytes (see [`TcpConfig::send_buffer`]).
    pub send_buffer: usize,
    /// Disable Nagle's algorithm on this connection (RFC 9293 §3.7.4).
    pub nodelay: bool,
    /// Keep-alive probing of this connection; `None` disables it.
    pub keepalive: Option<KeepAlive>,
    /// Abort when data stays unacknowledged this long (RFC 5482); `None` leaves only the retry limit.
    pub user_timeout: Option<Duration>,
    /// Congestion control of this connection.
    pub congestion: Algorithm,
}

impl SocketOptions {
    /// Options for one socket, taken from the stack-wide defaults in `c`.
    pub fn from_config(c: &TcpConfig) -> Self {
        SocketOptions {
            recv_buffer: c.recv_buffer,
            send_buffer: c.send_buffer,
            nodelay: c.nodelay,
            keepalive: c.keepalive,
            user_timeout: c.user_timeout,
            congestion: c.congestion,
        }
    }
}
