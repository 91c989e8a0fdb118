//! UDP through `ackclock relay`: each flow (client address and port, original destination)
//! gets a session with a host UDP socket connected to `--to`, from a bounded table; replies
//! go back to the client from the address it sent to.
//!
//! Sessions expire when idle, with Linux conntrack's UDP defaults: 30 s while only the
//! client has spoken, 120 s once the host has replied (`--udp-timeout` sets the first, the
//! second is four times it). When the table is full a new flow takes the place of the
//! longest-idle session that was never replied to (conntrack's early drop); if every
//! session has been replied to, the datagram is dropped and counted.
//!
//! Tasks on the relay's tokio runtime: one per stack socket reads the clients' datagrams and
//! hands each to its session's host socket; one per session reads the host's replies and
//! sends them back through the stack, and ends the session when it has been idle too long.
//! UDP has no backpressure of its own: a datagram that finds the host socket's send buffer
//! full is dropped and counted, as a router would; a reply waits for a packet buffer.

use ackclock::runtime::tokio::UdpSocket;
use ackclock::runtime::Runtime;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Idle timeout once the host has answered, as a multiple of the unanswered one
/// (conntrack: `udp_timeout_stream` 120 s against `udp_timeout` 30 s).
const REPLIED_FACTOR: u32 = 4;

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
    /// Datagrams dropped: table full of replied sessions, a host socket out of room, or a
    /// reply the stack could not send.
    pub dropped: u64,
}

/// A flow: (client, the address it sent to).
type Flow = (SocketAddrV4, SocketAddrV4);

struct Session {
    /// The host socket, for sending (a duplicate of the descriptor the session's task reads:
    /// a send on it never waits and needs no readiness from the reactor, which a fresh
    /// tokio socket has not reported yet).
    host: Arc<std::net::UdpSocket>,
    last: Instant,
    replied: bool,
    /// The task reading the host's replies.
    task: JoinHandle<()>,
}

impl Session {
    fn deadline(&self, idle: Duration) -> Instant {
        self.last + if self.replied { idle * REPLIED_FACTOR } else { idle }
    }
}

#[derive(Default)]
struct Table {
    sessions: HashMap<Flow, Session>,
    stats: UdpStats,
}

/// What the tasks share.
struct Shared {
    to: SocketAddr,
    max: usize,
    /// Idle timeout of an unanswered session.
    idle: Duration,
    table: Mutex<Table>,
}

impl Shared {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The UDP half of the relay.
pub struct UdpRelay {
    /// Stack sockets: one bound to every address and port, or one per listed port; and
    /// whether it is bound to every address (replies then name their source).
    sockets: Vec<(Arc<UdpSocket>, bool)>,
    shared: Arc<Shared>,
    readers: Mutex<Vec<JoinHandle<()>>>,
}

impl UdpRelay {
    /// Bind the stack's UDP sockets: every address and port (`any`), or `ports` on the
    /// stack's address.
    pub fn new(
        rt: &Runtime,
        any: bool,
        ports: &[u16],
        to: SocketAddr,
        max: usize,
        idle: Duration,
    ) -> Result<UdpRelay, String> {
        let sockets = if any {
            vec![(Arc::new(UdpSocket::bind_any(rt).map_err(|e| format!("udp any: {e}"))?), true)]
        } else {
            ports
                .iter()
                .map(|&p| {
                    UdpSocket::bind(rt, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, p))
                        .map(|s| (Arc::new(s), false))
                        .map_err(|e| format!("udp {p}: {e}"))
                })
                .collect::<Result<_, _>>()?
        };
        let shared = Arc::new(Shared { to, max: max.max(1), idle, table: Mutex::default() });
        Ok(UdpRelay { sockets, shared, readers: Mutex::default() })
    }

    /// Start reading the stack's sockets (on the current tokio runtime).
    pub fn start(&self) {
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        for (socket, any) in &self.sockets {
            readers.push(tokio::spawn(upstream(socket.clone(), *any, self.shared.clone())));
        }
    }

    /// Stop every task; the sessions still open are counted as open at exit.
    pub fn stop(&self) {
        for r in self.readers.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            r.abort();
        }
        for s in self.shared.table().sessions.values() {
            s.task.abort();
        }
    }

    /// What was counted, and the sessions open.
    pub fn stats(&self) -> (UdpStats, usize) {
        let t = self.shared.table();
        (t.stats, t.sessions.len())
    }
}

/// The clients' datagrams on one stack socket: each to its session's host socket.
async fn upstream(socket: Arc<UdpSocket>, any: bool, shared: Arc<Shared>) {
    let mut buf = vec![0u8; 65536];
    loop {
        let Ok((n, client, dest)) = socket.recv_from_to(&mut buf).await else { return };
        let now = Instant::now();
        let host = {
            let mut t = shared.table();
            let host = match t.sessions.get_mut(&(client, dest)) {
                Some(s) => {
                    s.last = now;
                    Some(s.host.clone())
                }
                None => open(&shared, &mut t, &socket, any, (client, dest), now),
            };
            let Some(host) = host else {
                t.stats.dropped += 1;
                continue;
            };
            host
        };
        // Outside the table's lock, which the sessions' tasks take for every reply. Never
        // waits: a full host socket drops the datagram.
        let sent = host.send(&buf[..n]);
        let mut t = shared.table();
        match sent {
            Ok(_) => {
                t.stats.up += 1;
                t.stats.up_bytes += n as u64;
            }
            // Full, or the host refused (ICMP from the host side): dropped.
            Err(_) => t.stats.dropped += 1,
        }
    }
}

/// A new session for `flow` (taking an unreplied session's place if the table is full), its
/// host socket connected to `--to`; `None` if there is no room or no socket.
fn open(
    shared: &Arc<Shared>,
    t: &mut Table,
    socket: &Arc<UdpSocket>,
    any: bool,
    flow: Flow,
    now: Instant,
) -> Option<Arc<std::net::UdpSocket>> {
    if t.sessions.len() >= shared.max {
        let victim = t.sessions.iter().filter(|(_, s)| !s.replied).min_by_key(|(_, s)| s.last).map(|(f, _)| *f)?;
        if let Some(s) = t.sessions.remove(&victim) {
            s.task.abort();
        }
        t.stats.evicted += 1;
    }
    let (send, recv) = connect(shared.to).ok()?;
    let host = Arc::new(send);
    let task = tokio::spawn(downstream(shared.clone(), socket.clone(), any, flow, recv));
    t.sessions.insert(flow, Session { host: host.clone(), last: now, replied: false, task });
    t.stats.sessions += 1;
    Some(host)
}

/// The host's replies for one session, back to the client from the address it sent to;
/// the session ends when idle past its timeout.
async fn downstream(shared: Arc<Shared>, socket: Arc<UdpSocket>, any: bool, flow: Flow, host: tokio::net::UdpSocket) {
    let (client, dest) = flow;
    let mut buf = vec![0u8; 65536];
    loop {
        let deadline = {
            let mut t = shared.table();
            let Some(s) = t.sessions.get(&flow) else { return };
            let deadline = s.deadline(shared.idle);
            if deadline <= Instant::now() {
                t.sessions.remove(&flow);
                t.stats.expired += 1;
                return;
            }
            deadline
        };
        let n = tokio::select! {
            r = host.recv(&mut buf) => match r {
                Ok(n) => n,
                // An ICMP error from the host side (ConnectionRefused): nothing to relay.
                Err(_) => continue,
            },
            _ = tokio::time::sleep_until(deadline.into()) => continue,
        };
        if let Some(s) = shared.table().sessions.get_mut(&flow) {
            s.last = Instant::now();
            s.replied = true;
        }
        let sent =
            if any { socket.send_from(&buf[..n], dest, client).await } else { socket.send_to(&buf[..n], client).await };
        let mut t = shared.table();
        match sent {
            Ok(_) => {
                t.stats.down += 1;
                t.stats.down_bytes += n as u64;
            }
            // Larger than the link's MTU (no fragmentation), or the runtime stopped.
            Err(_) => t.stats.dropped += 1,
        }
    }
}

/// A non-blocking host UDP socket connected to `to`: for sending, and the same socket
/// (a duplicated descriptor) for the session's task to read.
fn connect(to: SocketAddr) -> io::Result<(std::net::UdpSocket, tokio::net::UdpSocket)> {
    let bind: SocketAddr = if to.is_ipv4() { "0.0.0.0:0".parse().unwrap() } else { "[::]:0".parse().unwrap() };
    let s = std::net::UdpSocket::bind(bind)?;
    s.connect(to)?;
    s.set_nonblocking(true)?;
    let recv = tokio::net::UdpSocket::from_std(s.try_clone()?)?;
    Ok((s, recv))
}
