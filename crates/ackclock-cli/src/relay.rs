//! `ackclock relay`: TCP connections that arrive on a TAP or a TUN, relayed to a host-kernel
//! socket (tun2socks-style).
//!
//! With `--listen any` the stack takes TCP connections to any address and port that the
//! host routes into the device (`InterfaceConfig::any_destination` and `tcp_listen_any`) and
//! answers from the address each was dialled on, as tun2socks does; the report names each
//! connection's original destination. Otherwise it listens on its own address, on the
//! listed ports.
//!
//! Every connection the stack accepts gets a non-blocking `std::net::TcpStream` to
//! `--to HOST:PORT`. The host's bytes are `read(2)` straight into the send queue's packet
//! buffers (`Stack::tcp_send_with`): the kernel's copy is the only one. The peer's bytes take
//! the stack's one copy, which verifies the checksum as it goes (`Stack::tcp_recv`), into a
//! scratch buffer all connections share, and leave in one `write(2)` of many segments; handing
//! the host socket a segment at a time from the packet buffers (`tcp_recv_with`) would save
//! that copy but cost a system call per 1,448 bytes on a plain device. Bytes the host socket
//! does not take wait with their connection, and no more are read until they are written.
//! The stack's socket buffers (`--buffer`, per direction) are the bound: the receive window
//! closes while the host is slow, and the host socket is read only while the send queue has
//! room, so a slow reader stalls its writer instead of growing memory. Half-close travels
//! both ways: the peer's FIN becomes `shutdown(Write)` on the host socket once the bytes
//! before it are written, and the host's EOF becomes the stack's FIN after the queued bytes.
//! A reset on either side resets the other (RST from the stack; `SO_LINGER` 0 on the host
//! socket).
//!
//! One thread, one loop: `stack.receive`, accept, move bytes, `stack.transmit`, then
//! `ppoll` on the device and every host socket that has something to do, until the stack's
//! (and the impairment's) next timer. SIGINT/SIGTERM end it: open connections are reset
//! both ways, and byte counts, per connection and in total, are printed (`--json`: one JSON
//! object as the last line of stdout).
//!
//! UDP is relayed too (`udp`): each flow gets a host UDP socket connected to `--to`, from
//! a bounded session table with conntrack's idle timeouts.
//!
//! The device (`--tap` or `--tun`) and what goes with it are in [`crate::link`], shared
//! with `fetch` and `serve`.

mod udp;

use crate::link::{install_signals, poll, stopping, Link, LinkArgs};
use ackclock::{Error, ListenerHandle, Shutdown, Stack, TcpHandle};
use clap::Args;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd};
use std::process::ExitCode;
use std::str::FromStr;

// ---------------------------------------------------------------------------------------
// The relay.

/// Relay TCP connections arriving on a TAP or TUN to a host socket (tun2socks-style).
#[derive(Args)]
pub struct RelayArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Where to relay to (a host-kernel TCP connection), e.g. 127.0.0.1:8000.
    #[arg(long, value_name = "HOST:PORT")]
    to: String,
    /// Ports to accept connections on (the stack's address), e.g. 80,443,8000-8010; or `any`:
    /// every connection routed to the device, whatever its destination address and port.
    #[arg(long, value_name = "PORTS|any", default_value = "80")]
    listen: PortList,
    /// The stack's receive and send buffers of each relayed connection, KiB: how much of
    /// each direction waits in the relay at most.
    #[arg(long, value_name = "KIB", default_value_t = 256)]
    buffer: usize,
    /// UDP flows relayed at once at most (each holds a host UDP socket).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    udp_sessions: usize,
    /// Idle timeout of a UDP session the host never answered, seconds; once answered, four
    /// times as long (Linux conntrack: 30 and 120).
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    udp_timeout: u64,
    /// Connections the stack holds at most (default 4096).
    #[arg(long, value_name = "N", value_parser = crate::link::parse_max_connections)]
    pub(crate) max_connections: Option<usize>,
    /// Print the byte counts on exit as one JSON object (the last line of stdout).
    #[arg(long)]
    json: bool,
}

/// Most ports a relay listens on (each is a listener in the stack).
const MAX_PORTS: usize = 4096;

/// `80,443,8000-8010`, or `any` (an empty list).
#[derive(Clone, Debug, PartialEq)]
struct PortList(Vec<u16>);

impl PortList {
    fn any(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromStr for PortList {
    type Err = String;
    fn from_str(s: &str) -> Result<PortList, String> {
        if s.trim() == "any" {
            return Ok(PortList(Vec::new()));
        }
        let port = |p: &str| p.trim().parse::<u16>().ok().filter(|&p| p != 0).ok_or_else(|| format!("{p}: bad port"));
        let mut ports = Vec::new();
        for item in s.split(',').filter(|i| !i.trim().is_empty()) {
            let (a, b) = match item.split_once('-') {
                Some((a, b)) => (port(a)?, port(b)?),
                None => (port(item)?, port(item)?),
            };
            if a > b {
                return Err(format!("{item}: empty range"));
            }
            ports.extend(a..=b);
            if ports.len() > MAX_PORTS {
                return Err(format!("more than {MAX_PORTS} ports: the stack has one listener per port"));
            }
        }
        ports.sort_unstable();
        ports.dedup();
        if ports.is_empty() {
            return Err("no ports".into());
        }
        Ok(PortList(ports))
    }
}

pub fn run(args: RelayArgs) -> ExitCode {
    match relay(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ackclock relay: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why a relayed connection ended.
#[derive(Debug)]
enum End {
    /// Both directions finished with a FIN.
    Closed,
    /// The stack's connection failed (reset, timed out).
    Peer(Error),
    /// The host socket failed.
    Host(io::Error),
    /// The host connection could not be made.
    Connect(io::Error),
    /// The relay is exiting.
    Exit,
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Closed => f.write_str("closed"),
            End::Peer(e) => write!(f, "peer: {e}"),
            End::Host(e) => write!(f, "host: {e}"),
            End::Connect(e) => write!(f, "connect: {e}"),
            End::Exit => f.write_str("reset at exit"),
        }
    }
}

/// One relayed connection.
struct Conn {
    id: u64,
    handle: TcpHandle,
    peer: SocketAddrV4,
    /// Where the peer connected to (the stack's address, or with `--listen any` any other).
    dest: SocketAddrV4,
    host: TcpStream,
    connecting: bool,
    /// Bytes relayed peer (TAP or TUN) to host, and host to peer.
    up: u64,
    down: u64,
    /// Bytes taken from the stack that the host socket has not taken yet (empty, with no
    /// storage, unless the host is slower than the peer).
    pending: Vec<u8>,
    /// `pending` is not empty: wait until the host socket is writable.
    host_full: bool,
    /// The send queue was full: the host socket is not read until the stack has room.
    stack_full: bool,
    /// The peer's FIN was read (every byte before it written to the host, which is then shut
    /// for writing).
    peer_eof: bool,
    host_shut: bool,
    /// The host's EOF was read (every byte before it queued, and the stack's FIN follows).
    host_eof: bool,
    peer_shut: bool,
    started: std::time::Instant,
}

/// A TCP socket to `to`, connecting in the background.
fn connect_nonblocking(to: SocketAddr) -> io::Result<TcpStream> {
    let family = if to.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain arguments.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a socket we just made and own.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    // SAFETY: sockaddr_storage is plain data; all zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
    let len = match to {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than, and aligned for, sockaddr_in.
            unsafe { core::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            core::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than, and aligned for, sockaddr_in6.
            unsafe { core::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            core::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: `ss` holds a socket address of `len` bytes.
    let r = unsafe { libc::connect(fd, (&ss as *const libc::sockaddr_storage).cast(), len as libc::socklen_t) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
    }
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// Close `s` with a reset (SO_LINGER 0) rather than a FIN.
fn reset_on_close(s: &TcpStream) {
    let l = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: SO_LINGER reads a `struct linger` of the given size.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            core::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// What a stack call's error means for the relay: `None` when it is only "not now".
/// A host-socket error that only means "not now".
fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)
}

fn stack_failed(e: Error) -> Option<End> {
    match e {
        Error::WouldBlock | Error::NoBufferSpace => None,
        e => Some(End::Peer(e)),
    }
}

impl Conn {
    fn new(id: u64, handle: TcpHandle, stack: &Stack, host: TcpStream) -> Conn {
        let none = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
        let tuple = stack.tcp_tuple(handle).ok();
        let peer = tuple.map_or(none, |t| SocketAddrV4::new(t.remote_addr, t.remote_port));
        let dest = tuple.map_or(none, |t| SocketAddrV4::new(t.local_addr, t.local_port));
        Conn {
            id,
            handle,
            peer,
            dest,
            host,
            connecting: true,
            up: 0,
            down: 0,
            pending: Vec::new(),
            host_full: false,
            stack_full: false,
            peer_eof: false,
            host_shut: false,
            host_eof: false,
            peer_shut: false,
            started: std::time::Instant::now(),
        }
    }

    /// Whether the host connection is up yet; an error if it failed.
    fn check_connected(&mut self) -> Result<bool, End> {
        match self.host.take_error() {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) => return Err(End::Connect(e)),
        }
        match self.host.peer_addr() {
            Ok(_) => {
                self.connecting = false;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(End::Connect(e)),
        }
    }

    /// Move what can be moved, both ways. `Some`: the connection is over.
    fn step(&mut self, stack: &mut Stack, scratch: &mut [u8]) -> Option<End> {
        if self.connecting {
            match self.check_connected() {
                Ok(true) => {}
                // The peer's bytes wait in the stack's receive queue meanwhile.
                Ok(false) => return None,
                Err(end) => return Some(end),
            }
        }
        let h = self.handle;
        loop {
            let mut progress = false;
            // Peer -> host: the stack's one copy (checksum verified as it copies) into the
            // shared scratch buffer, then one write(2) of as many segments as it holds.
            // What the host socket does not take waits in `pending`, and nothing more is
            // read from the stack until it is written: under back-pressure the receive
            // window closes.
            if !self.pending.is_empty() {
                match self.host.write(&self.pending) {
                    Ok(n) => {
                        self.pending.drain(..n);
                        self.up += n as u64;
                        progress |= n > 0;
                    }
                    Err(e) if would_block(&e) => {}
                    Err(e) => return Some(End::Host(e)),
                }
                if self.pending.is_empty() {
                    self.pending = Vec::new();
                }
            }
            if self.pending.is_empty() && !self.peer_eof {
                match stack.tcp_recv(h, scratch) {
                    Ok(0) => {
                        self.peer_eof = true;
                        progress = true;
                    }
                    Ok(n) => {
                        let written = match self.host.write(&scratch[..n]) {
                            Ok(m) => m,
                            Err(e) if would_block(&e) => 0,
                            Err(e) => return Some(End::Host(e)),
                        };
                        self.up += written as u64;
                        self.pending.extend_from_slice(&scratch[written..n]);
                        progress = true;
                    }
                    Err(e) => {
                        if let Some(end) = stack_failed(e) {
                            return Some(end);
                        }
                    }
                }
            }
            self.host_full = !self.pending.is_empty();
            if self.peer_eof && self.pending.is_empty() && !self.host_shut {
                if let Err(e) = self.host.shutdown(std::net::Shutdown::Write) {
                    return Some(End::Host(e));
                }
                self.host_shut = true;
                progress = true;
            }
            // Host -> peer: read(2) into the send queue's packet buffers.
            if !self.host_eof {
                let (host, mut eof, mut failed) = (&mut self.host, false, None);
                let r = stack.tcp_send_with(h, |space| match host.read(space) {
                    Ok(0) => {
                        eof = true;
                        0
                    }
                    Ok(n) => n,
                    Err(e) if would_block(&e) => 0,
                    Err(e) => {
                        failed = Some(e);
                        0
                    }
                });
                if let Some(e) = failed {
                    return Some(End::Host(e));
                }
                self.stack_full = false;
                match r {
                    Ok(n) => {
                        self.down += n as u64;
                        progress |= n > 0;
                    }
                    Err(Error::WouldBlock) => self.stack_full = !eof,
                    Err(e) => {
                        if let Some(end) = stack_failed(e) {
                            return Some(end);
                        }
                    }
                }
                if eof {
                    self.host_eof = true;
                    progress = true;
                }
            }
            if self.host_eof && !self.peer_shut {
                if let Err(e) = stack.tcp_shutdown(h, Shutdown::Write) {
                    return Some(End::Peer(e));
                }
                self.peer_shut = true;
                progress = true;
            }
            if self.host_shut && self.peer_shut {
                return Some(End::Closed);
            }
            if !progress {
                return None;
            }
        }
    }

    /// What to wait for on the host socket (`None`: nothing now).
    fn pollfd(&self) -> libc::pollfd {
        let mut events = 0;
        if self.connecting {
            events |= libc::POLLOUT;
        } else {
            if !self.host_eof && !self.stack_full {
                events |= libc::POLLIN;
            }
            if self.host_full {
                events |= libc::POLLOUT;
            }
        }
        // A descriptor with nothing to wait for is left out (fd -1), so that a socket in
        // error does not wake the loop while the other side is the one that must move.
        let fd = if events == 0 { -1 } else { self.host.as_raw_fd() };
        libc::pollfd { fd, events, revents: 0 }
    }

    /// Release both sides as `end` says.
    fn finish(self, stack: &mut Stack, end: End) -> Record {
        match &end {
            End::Closed => {
                let _ = stack.tcp_close(self.handle);
            }
            End::Peer(_) => {
                reset_on_close(&self.host);
                let _ = stack.tcp_close(self.handle);
            }
            End::Host(_) | End::Connect(_) => {
                let _ = stack.tcp_abort(self.handle);
            }
            End::Exit => {
                reset_on_close(&self.host);
                let _ = stack.tcp_abort(self.handle);
            }
        }
        Record {
            id: self.id,
            peer: self.peer,
            dest: self.dest,
            up: self.up,
            down: self.down,
            secs: self.started.elapsed().as_secs_f64(),
            end: end.to_string(),
        }
    }
}

/// A finished connection, for the exit report.
struct Record {
    id: u64,
    peer: SocketAddrV4,
    dest: SocketAddrV4,
    up: u64,
    down: u64,
    secs: f64,
    end: String,
}

/// The shared buffer peer-to-host bytes pass through: one write(2) carries up to this much.
const SCRATCH: usize = 256 * 1024;

/// Per-connection records kept for the report; beyond this only the totals grow.
const MAX_RECORDS: usize = 100_000;

fn relay(args: RelayArgs) -> Result<(), String> {
    install_signals();
    let to = args
        .to
        .to_socket_addrs()
        .map_err(|e| format!("--to {}: {e}", args.to))?
        .next()
        .ok_or_else(|| format!("--to {}: no address", args.to))?;
    if args.buffer == 0 {
        return Err("--buffer must be at least 1 KiB".into());
    }
    let buffer = args.buffer * 1024;
    let mut link = Link::open(&args.link)?;
    let any = args.listen.any();
    let mut stack = link.stack(args.link.addr, any, args.max_connections)?;
    let mut opts = ackclock::tcp::SocketOptions::from_config(stack.tcp().config());
    (opts.recv_buffer, opts.send_buffer) = (buffer, buffer);
    let listeners: Vec<ListenerHandle> = if any {
        vec![stack.tcp_listen_any(1024, opts).map_err(|e| format!("listen any: {e}"))?]
    } else {
        args.listen
            .0
            .iter()
            .map(|&port| {
                stack
                    .tcp_listen_with(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port), 128, opts)
                    .map_err(|e| format!("listen {port}: {e}"))
            })
            .collect::<Result<_, _>>()?
    };
    if args.udp_timeout == 0 {
        return Err("--udp-timeout must be at least 1 s".into());
    }
    let udp_idle = std::time::Duration::from_secs(args.udp_timeout);
    let mut udp = udp::UdpRelay::new(&mut stack, any, &args.listen.0, to, args.udp_sessions, udp_idle)?;
    let ports = args.listen.0.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
    let ports = match () {
        _ if any => "any address and port".to_string(),
        _ if ports.len() > 60 => format!("{} ports", args.listen.0.len()),
        _ => ports,
    };
    println!(
        "ackclock relay: {} {} ({}), stack {}{}{}; TCP and UDP ports {ports} -> {to}; ready",
        link.kind(),
        link.name,
        link.mode(),
        args.link.addr,
        args.link.host_addr.map_or(String::new(), |h| format!(", host {h}")),
        args.link.netns.as_deref().map_or(String::new(), |n| format!(", netns {n}")),
    );
    let _ = io::stdout().flush();

    let mut conns: Vec<Conn> = Vec::new();
    let mut records: Vec<Record> = Vec::new();
    let (mut total_up, mut total_down, mut total_conns, mut dropped_records) = (0u64, 0u64, 0u64, 0u64);
    let mut keep = |r: Record, records: &mut Vec<Record>| {
        total_up += r.up;
        total_down += r.down;
        if records.len() < MAX_RECORDS {
            records.push(r);
        } else {
            dropped_records += 1;
        }
    };
    let mut fds: Vec<libc::pollfd> = Vec::new();
    // What every connection's peer-to-host bytes pass through, one connection at a time.
    let mut scratch = vec![0u8; SCRATCH];
    let mut result = Ok(());
    while !stopping() {
        let now = link.now();
        let wall = std::time::Instant::now();
        stack.receive(now, &mut link.dev);
        udp.upstream(&mut stack, wall);
        udp.expire(wall);
        for &l in &listeners {
            while let Ok(h) = stack.tcp_accept(l) {
                total_conns += 1;
                match connect_nonblocking(to) {
                    Ok(host) => conns.push(Conn::new(total_conns, h, &stack, host)),
                    Err(e) => {
                        eprintln!("ackclock relay: connect {to}: {e}");
                        let _ = stack.tcp_abort(h);
                    }
                }
            }
        }
        let mut i = 0;
        while i < conns.len() {
            match conns[i].step(&mut stack, &mut scratch) {
                None => i += 1,
                Some(end) => {
                    let c = conns.swap_remove(i);
                    if !matches!(end, End::Closed) {
                        eprintln!("ackclock relay: connection {} from {}: {end}", c.id, c.peer);
                    }
                    keep(c.finish(&mut stack, end), &mut records);
                }
            }
        }
        stack.transmit(now, &mut link.dev);
        link.report_errors("ackclock relay");
        link.trim_memory(&stack);
        fds.clear();
        fds.push(libc::pollfd { fd: link.device().as_raw_fd(), events: libc::POLLIN, revents: 0 });
        fds.extend(conns.iter().map(Conn::pollfd));
        let udp_fds = fds.len();
        udp.pollfds(&mut fds);
        let timeout = match udp.timeout(wall) {
            Some(t) => link.timeout(&stack).min(t),
            None => link.timeout(&stack),
        };
        if let Err(e) = poll(&mut fds, timeout) {
            result = Err(format!("ppoll: {e}"));
            break;
        }
        if fds[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            result = Err(format!("{} {} is gone", link.kind().to_uppercase(), link.name));
            break;
        }
        udp.downstream(&mut stack, &fds[udp_fds..], std::time::Instant::now());
    }

    // Shut down: reset what is open (both ways), stop listening, let the resets out.
    let open = conns.len();
    for c in conns.drain(..) {
        keep(c.finish(&mut stack, End::Exit), &mut records);
    }
    for l in listeners {
        let _ = stack.tcp_unlisten(l);
    }
    let (u, udp_open) = (udp.stats, udp.open());
    udp.close(&mut stack);
    link.flush_at_exit(&mut stack);
    records.sort_by_key(|r| r.id);
    for r in &records {
        eprintln!(
            "ackclock relay: #{} {} -> {}: {} bytes up, {} bytes down, {:.3} s, {}",
            r.id, r.peer, r.dest, r.up, r.down, r.secs, r.end
        );
    }
    eprintln!(
        "ackclock relay: {total_conns} connections ({open} reset at exit), {total_up} bytes up, {total_down} bytes down; {}",
        link.summary()
    );
    eprintln!(
        "ackclock relay: UDP {} sessions ({udp_open} open at exit, {} expired, {} evicted), {} datagrams ({} bytes) up, {} datagrams ({} bytes) down, {} dropped",
        u.sessions, u.expired, u.evicted, u.up, u.up_bytes, u.down, u.down_bytes, u.dropped
    );
    if args.json {
        // Every drop reason the stack counted, by its counter's name.
        let stack_drops: serde_json::Map<String, serde_json::Value> = stack
            .counters()
            .named()
            .filter(|&(name, n)| name.starts_with("drops_") && n > 0)
            .map(|(name, n)| (name.to_string(), n.into()))
            .collect();
        let conns: Vec<serde_json::Value> = records
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.id, "peer": r.peer.to_string(), "dest": r.dest.to_string(), "port": r.dest.port(),
                    "up": r.up, "down": r.down, "secs": r.secs, "end": r.end,
                })
            })
            .collect();
        let out = serde_json::json!({
            "to": to.to_string(),
            "connections": conns,
            "omitted": dropped_records,
            "total": { "connections": total_conns, "reset_at_exit": open, "up": total_up, "down": total_down },
            "stack_drops": stack_drops,
            "udp": {
                "sessions": u.sessions, "open_at_exit": udp_open, "expired": u.expired, "evicted": u.evicted,
                "up": u.up, "up_bytes": u.up_bytes, "down": u.down, "down_bytes": u.down_bytes, "dropped": u.dropped,
            },
        });
        println!("{out}");
    }
    let flushed = link.finish();
    result.and(flushed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_lists_parse() {
        assert_eq!("80".parse::<PortList>().unwrap().0, vec![80]);
        assert_eq!("8002-8004,80,8003".parse::<PortList>().unwrap().0, vec![80, 8002, 8003, 8004]);
        assert!("0".parse::<PortList>().is_err());
        assert!("9-8".parse::<PortList>().is_err());
        assert!("1-65535".parse::<PortList>().is_err());
        assert!("".parse::<PortList>().is_err());
        assert!("any".parse::<PortList>().unwrap().any());
        assert!(!"80".parse::<PortList>().unwrap().any());
    }
}
