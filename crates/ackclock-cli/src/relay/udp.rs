//! UDP through `ackclock relay`: each flow (client address and port, original destination)
//! gets a session with a host UDP socket connected to `--to`, from a bounded table; replies
//! go back to the client from the address it sent to.
//!
//! Sessions expire when idle, with Linux conntrack's UDP defaults: 30 s while only the
//! client has spoken, 120 s once the host has replied (`--udp-timeout` sets the first, the
//! second is four times it). When the table is full a new flow
//! takes the place of the longest-idle session that was never replied to (conntrack's early
//! drop); if every session has been replied to, the datagram is dropped and counted.
//!
//! UDP has no backpressure of its own: a datagram that finds the host socket's send buffer
//! full, or the stack without a packet buffer, is dropped and counted, as a router would.

use ackclock::socket::UdpHandle;
use ackclock::Stack;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Idle timeout once the host has answered, as a multiple of the unanswered one
/// (conntrack: `udp_timeout_stream` 120 s against `udp_timeout` 30 s).
const REPLIED_FACTOR: u32 = 4;
/// Datagrams taken from one host socket per round, so one busy flow cannot starve the rest.
const PER_ROUND: usize = 64;

/// What the UDP side counted.
#[derive(Debug, Default, Clone, Copy)]
pub struct UdpStats {
    /// Sessions opened.
    pub sessions: u64,
    /// Sessions that ended idle.
    pub expired: u64,
    /// Sessions that gave their place to a new flow (the table was full).
    pub evicted: u64,
    /// Datagrams client to host, and their bytes.
    pub up: u64,
    pub up_bytes: u64,
    /// Datagrams host to client, and their bytes.
    pub down: u64,
    pub down_bytes: u64,
    /// Datagrams dropped: table full of replied sessions, a host socket or the stack out of room.
    pub dropped: u64,
}

struct Session {
    /// The stack socket it arrived on (replies leave from it), and whether that socket is
    /// bound to every address (replies then name their source).
    socket: (UdpHandle, bool),
    client: SocketAddrV4,
    /// Where the client sent it: the address replies come from.
    dest: SocketAddrV4,
    host: std::net::UdpSocket,
    last: Instant,
    replied: bool,
}

impl Session {
    fn deadline(&self, idle: Duration) -> Instant {
        self.last + if self.replied { idle * REPLIED_FACTOR } else { idle }
    }
}

/// The UDP half of the relay.
pub struct UdpRelay {
    /// Stack sockets: one bound to every address and port, or one per listed port.
    sockets: Vec<(UdpHandle, bool)>,
    sessions: Vec<Session>,
    by_flow: HashMap<(SocketAddrV4, SocketAddrV4), usize>,
    max: usize,
    /// Idle timeout of an unanswered session.
    idle: Duration,
    to: SocketAddr,
    scratch: Vec<u8>,
    next_sweep: Instant,
    pub stats: UdpStats,
}

impl UdpRelay {
    /// Bind the stack's UDP sockets: every address and port (`any`), or `ports` on the
    /// stack's address.
    pub fn new(
        stack: &mut Stack,
        any: bool,
        ports: &[u16],
        to: SocketAddr,
        max: usize,
        idle: Duration,
    ) -> Result<UdpRelay, String> {
        let sockets = if any {
            vec![(stack.udp_bind_any().map_err(|e| format!("udp any: {e}"))?, true)]
        } else {
            ports
                .iter()
                .map(|&p| {
                    stack
                        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, p))
                        .map(|h| (h, false))
                        .map_err(|e| format!("udp {p}: {e}"))
                })
                .collect::<Result<_, _>>()?
        };
        Ok(UdpRelay {
            sockets,
            sessions: Vec::new(),
            by_flow: HashMap::new(),
            max: max.max(1),
            idle,
            to,
            scratch: vec![0u8; 65536],
            next_sweep: Instant::now(),
            stats: UdpStats::default(),
        })
    }

    /// Sessions open.
    pub fn open(&self) -> usize {
        self.sessions.len()
    }

    /// Datagrams the stack received: to their sessions' host sockets.
    pub fn upstream(&mut self, stack: &mut Stack, now: Instant) {
        for k in 0..self.sockets.len() {
            let socket = self.sockets[k];
            while let Ok(r) = stack.udp_recv_from(socket.0, &mut self.scratch) {
                let Some(i) = self.session(socket, r.from, r.to, now) else {
                    self.stats.dropped += 1;
                    continue;
                };
                let s = &mut self.sessions[i];
                s.last = now;
                match s.host.send(&self.scratch[..r.len]) {
                    Ok(_) => {
                        self.stats.up += 1;
                        self.stats.up_bytes += r.len as u64;
                    }
                    // Full, or the host refused (ICMP from the host side): dropped.
                    Err(_) => self.stats.dropped += 1,
                }
            }
        }
    }

    /// The session of a flow, opened (or taking an unreplied session's place) if new.
    fn session(
        &mut self,
        socket: (UdpHandle, bool),
        client: SocketAddrV4,
        dest: SocketAddrV4,
        now: Instant,
    ) -> Option<usize> {
        if let Some(&i) = self.by_flow.get(&(client, dest)) {
            return Some(i);
        }
        if self.sessions.len() >= self.max {
            let victim = (0..self.sessions.len())
                .filter(|&i| !self.sessions[i].replied)
                .min_by_key(|&i| self.sessions[i].last)?;
            self.remove(victim);
            self.stats.evicted += 1;
        }
        let host = connect(self.to).ok()?;
        self.sessions.push(Session { socket, client, dest, host, last: now, replied: false });
        self.by_flow.insert((client, dest), self.sessions.len() - 1);
        self.stats.sessions += 1;
        Some(self.sessions.len() - 1)
    }

    fn remove(&mut self, i: usize) {
        let s = self.sessions.swap_remove(i);
        self.by_flow.remove(&(s.client, s.dest));
        if let Some(moved) = self.sessions.get(i) {
            self.by_flow.insert((moved.client, moved.dest), i);
        }
    }

    /// One pollfd per session, in session order, after `fds`' existing entries.
    pub fn pollfds(&self, fds: &mut Vec<libc::pollfd>) {
        fds.extend(self.sessions.iter().map(|s| libc::pollfd {
            fd: s.host.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
    }

    /// Host replies (for the sessions whose pollfd, from `fds`, is readable): to the clients,
    /// from the address each one sent to.
    pub fn downstream(&mut self, stack: &mut Stack, fds: &[libc::pollfd], now: Instant) {
        for (i, fd) in fds.iter().enumerate().take(self.sessions.len()) {
            if fd.revents == 0 {
                continue;
            }
            for _ in 0..PER_ROUND {
                let s = &mut self.sessions[i];
                let n = match s.host.recv(&mut self.scratch) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // An ICMP error from the host side (ConnectionRefused): nothing to relay.
                    Err(_) => break,
                };
                s.last = now;
                s.replied = true;
                let (h, any) = s.socket;
                let sent = if any {
                    stack.udp_send_from(h, &self.scratch[..n], s.dest, s.client)
                } else {
                    stack.udp_send_to(h, &self.scratch[..n], s.client)
                };
                match sent {
                    Ok(_) => {
                        self.stats.down += 1;
                        self.stats.down_bytes += n as u64;
                    }
                    // No buffer, or larger than the link's MTU (no fragmentation): dropped.
                    Err(_) => self.stats.dropped += 1,
                }
            }
        }
    }

    /// Close the sessions idle past their timeout (looked at once a second at most).
    pub fn expire(&mut self, now: Instant) {
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + Duration::from_secs(1);
        let mut i = 0;
        while i < self.sessions.len() {
            if self.sessions[i].deadline(self.idle) <= now {
                self.remove(i);
                self.stats.expired += 1;
            } else {
                i += 1;
            }
        }
    }

    /// How long the loop may sleep for the UDP side: until the next sweep, if any session
    /// is open.
    pub fn timeout(&self, now: Instant) -> Option<Duration> {
        (!self.sessions.is_empty()).then(|| self.next_sweep.saturating_duration_since(now))
    }

    /// Close every stack socket.
    pub fn close(self, stack: &mut Stack) {
        for (h, _) in self.sockets {
            let _ = stack.udp_close(h);
        }
    }
}

/// A non-blocking host UDP socket connected to `to`.
fn connect(to: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let bind: SocketAddr = if to.is_ipv4() { "0.0.0.0:0".parse().unwrap() } else { "[::]:0".parse().unwrap() };
    let s = std::net::UdpSocket::bind(bind)?;
    s.connect(to)?;
    s.set_nonblocking(true)?;
    Ok(s)
}
