//! `ackclock relay`: TCP connections that arrive on a TAP or a TUN, relayed to a host-kernel
//! socket (tun2socks-style).
//!
//! With `--listen any` the stack takes TCP connections to any address and port that the
//! host routes into the device (`InterfaceConfig::any_destination` and `tcp_listen_any`) and
//! answers from the address each was dialled on, as tun2socks does; the report names each
//! connection's original destination. Otherwise it listens on its own address, on the
//! listed ports.
//!
//! The relay is built on the library's runtime and its tokio sockets
//! (`ackclock::runtime::tokio`), as an embedder would build it: tokio tasks accept and splice,
//! on one thread by default (`--workers`), which also receives the device's frames
//! (`watch_device`), so that a frame is processed, copied or written to the host on the core
//! that read it; the runtime's protocol thread keeps the timers. With `--workers N` above one,
//! the tasks run on N threads and the protocol thread receives the frames.
//!
//! Every connection the stack accepts gets a task and a tokio `TcpStream` to `--to HOST:PORT`.
//! Towards the host, on an offload device, the stack's received segments themselves go to the
//! host socket, at most 64 KiB at a time, in one `writev(2)` (`read_bufs`: no copy in the
//! relay); on a plain device they are 1448-byte segments with deferred checksums, and the
//! stack's copy into a 64 KiB buffer, checksum verified in it, then one `write(2)` costs less
//! than a sum pass and a vectored write of some 45 pieces. Towards the peer, on an offload
//! device with one worker, each non-blocking `read(2)` of the host socket goes straight into
//! the stack's send queue (`try_write_with`; the device computes the checksum); otherwise one
//! `read(2)` into a 64 KiB buffer, then the stack's copy into packet buffers with the checksum
//! computed in it (without offload a send unit is one MSS, a read per segment; with more
//! workers the read would hold the lock on the stack the protocol thread needs). The stack's
//! socket buffers (`--buffer`, per direction) and those 64 KiB are the bound: the receive
//! window closes while the host is slow, and the host socket is not read while the send queue
//! is full, so a slow reader stalls its writer instead of growing memory.
//!
//! Half-close travels both ways: the peer's FIN becomes `shutdown(Write)` on the host socket
//! once the bytes before it are written, and the host's EOF becomes the stack's FIN after the
//! queued bytes. A reset on either side resets the other (RST from the stack,
//! `set_zero_linger`; `SO_LINGER` 0 on the host socket), and so does a host that refuses.
//!
//! On the two-core machine this was measured on, one thread spends about half the CPU per GB of
//! the tasks on their own core beside the protocol thread with offloads at one stream, and a
//! third less on a plain TAP's upload, where the segments written to the host were read from
//! the device on the other core; throughput is level or higher, and on a plain TAP at least the
//! single-thread loop the relay had before (BENCHMARKS.md, "The relay's tasks and frames on one
//! thread").
//!
//! SIGINT/SIGTERM end it: open connections are reset both ways, and byte counts, per
//! connection and in total, are printed (`--json`: one JSON object as the last line of
//! stdout). After a burst the runtime gives the packet pools' idle pages back, and the relay
//! trims the heap with them, so memory follows the load down.
//!
//! UDP is relayed too (`udp`): each flow gets a host UDP socket connected to `--to`, from
//! a bounded session table with conntrack's idle timeouts.
//!
//! The device (`--tap` or `--tun`) and what goes with it are in [`crate::link`], shared
//! with `fetch` and `serve`.

mod udp;

use crate::link::{accept_or_stop, install_signals, stopping, HeapTrim, Link, LinkArgs};
use ackclock::runtime::tokio::{TcpListener, TcpStream};
use ackclock::runtime::Runtime;
use clap::Args;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::io::{self, Write};
use std::net::ToSocketAddrs;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

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
    /// tokio worker threads for the relay's tasks. With 1 (the default) they and the
    /// device's frames share one thread, and the rest of the machine's cores are left to
    /// the applications; with more, the runtime's protocol thread receives the frames and
    /// the tasks run on N threads.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: u16,
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
    Peer(io::Error),
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

/// Per-connection records kept for the report; beyond this only the totals grow.
const MAX_RECORDS: usize = 100_000;

/// Each direction's copy buffer: one host system call moves up to this much (tokio's 8 KiB
/// default costs a call per 8 KiB; see `ackclock::runtime::tokio`).
const COPY: usize = 64 * 1024;

/// What the connections report, as they end.
#[derive(Default)]
struct Report {
    records: Vec<Record>,
    omitted: u64,
    connections: u64,
    up: u64,
    down: u64,
    /// Connections still open (their tasks have not reported).
    open: u64,
    reset_at_exit: u64,
}

impl Report {
    fn keep(&mut self, r: Record, exit: bool) {
        self.up += r.up;
        self.down += r.down;
        self.open -= 1;
        self.reset_at_exit += exit as u64;
        if self.records.len() < MAX_RECORDS {
            self.records.push(r);
        } else {
            self.omitted += 1;
        }
    }
}

/// What every task of the relay shares.
struct Relay {
    to: SocketAddr,
    /// The peer's bytes go to the host as the stack's segments themselves (`pump_segments`)
    /// where they are large (receive offload); otherwise through a 64 KiB copy, which
    /// costs less than a vectored write of 1448-byte segments and a sum pass over them.
    segments_to_host: bool,
    /// The host's bytes are read straight into the stack's send queue (`pump_into`), where
    /// a send unit is large (segmentation offload) and the lock on the stack, held during
    /// the read, is contended only by the protocol thread's timers and output rounds (one
    /// worker thread); otherwise through a 64 KiB copy.
    read_into_stack: bool,
    report: Mutex<Report>,
    /// Set once to stop: every connection is reset both ways and reports.
    stop: tokio::sync::watch::Receiver<bool>,
}

/// An address as the report writes it: IPv4, or 0.0.0.0:0 when there is none.
fn v4(a: io::Result<SocketAddr>) -> SocketAddrV4 {
    match a {
        Ok(SocketAddr::V4(a)) => a,
        _ => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
    }
}

/// Accept on `listener` until it fails (the runtime stopped) or the relay stops; a task per
/// connection.
async fn accept_loop(listener: TcpListener, relay: Arc<Relay>) {
    let mut stop = relay.stop.clone();
    while let Some(inside) = accept_or_stop(&listener, &mut stop).await {
        let id = {
            let mut r = relay.report.lock().unwrap_or_else(|e| e.into_inner());
            r.connections += 1;
            r.open += 1;
            r.connections
        };
        tokio::spawn(connection(id, inside, relay.clone()));
    }
}

/// One relayed connection, from its host connection to both ends, then its record.
async fn connection(id: u64, mut inside: TcpStream, relay: Arc<Relay>) {
    let started = std::time::Instant::now();
    let (peer, dest) = (v4(inside.peer_addr()), v4(inside.local_addr()));
    let _ = inside.set_nodelay(true);
    let (mut up, mut down) = (0u64, 0u64);
    let mut host = None;
    let mut stop = relay.stop.clone();
    let end = tokio::select! {
        e = splice(&mut inside, &relay, &mut host, &mut up, &mut down) => e,
        _ = stop.wait_for(|s| *s) => End::Exit,
    };
    // Release both sides as `end` says: a reset where the other side failed or at exit
    // (SO_LINGER 0 on the host socket, an RST from the stack), a close otherwise.
    let reset_host = matches!(end, End::Peer(_) | End::Exit);
    let reset_peer = matches!(end, End::Host(_) | End::Connect(_) | End::Exit);
    if let (true, Some(h)) = (reset_host, &host) {
        let _ = h.set_zero_linger();
    }
    if reset_peer {
        let _ = inside.set_zero_linger();
    }
    drop(host);
    drop(inside);
    if !matches!(end, End::Closed) {
        eprintln!("ackclock relay: connection {id} from {peer}: {end}");
    }
    let exit = matches!(end, End::Exit);
    let record = Record { id, peer, dest, up, down, secs: started.elapsed().as_secs_f64(), end: end.to_string() };
    relay.report.lock().unwrap_or_else(|e| e.into_inner()).keep(record, exit);
}

/// Connect to `to` and move bytes both ways until both sides have closed (`Closed`) or one
/// fails. The host socket is left in `host`, for the caller to close or reset.
async fn splice(
    inside: &mut TcpStream,
    relay: &Relay,
    host: &mut Option<tokio::net::TcpStream>,
    up: &mut u64,
    down: &mut u64,
) -> End {
    let h = match tokio::net::TcpStream::connect(relay.to).await {
        Ok(h) => host.insert(h),
        Err(e) => return End::Connect(e),
    };
    let _ = h.set_nodelay(true);
    let (mut from_host, mut to_host) = h.split();
    // One task reads the stream while the other writes it, through shared references.
    let inside: &TcpStream = inside;
    let (mut to_peer, mut from_peer) = (inside, inside);
    let peer_to_host = async {
        match relay.segments_to_host {
            true => pump_segments(inside, &mut to_host, up).await,
            false => pump(&mut from_peer, &mut to_host, up, End::Peer, End::Host).await,
        }
    };
    let host_to_peer = async {
        match relay.read_into_stack {
            true => pump_into(from_host.as_ref(), inside, down).await,
            false => pump(&mut from_host, &mut to_peer, down, End::Host, End::Peer).await,
        }
    };
    match tokio::try_join!(peer_to_host, host_to_peer) {
        Ok(_) => End::Closed,
        Err(end) => end,
    }
}

/// The host's bytes to the peer without a copy of the relay's own: each non-blocking read
/// of the host socket goes straight into the stack's send queue (`try_write_with`), so the
/// kernel's copy out of the socket is the only one. At the host's end of stream, the
/// stack's FIN after the queued bytes. An error names its side.
async fn pump_into(from: &tokio::net::TcpStream, to: &TcpStream, moved: &mut u64) -> Result<(), End> {
    use tokio::io::AsyncWriteExt;
    loop {
        from.readable().await.map_err(End::Host)?;
        to.writable().await.map_err(End::Peer)?;
        // What the last read said, besides bytes: end of stream, or an error.
        let mut end = None;
        let queued = to.try_write_with(|space| match from.try_read(space) {
            Ok(0) => {
                end = Some(Ok(()));
                0
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                end = Some(Err(e));
                0
            }
        });
        match queued {
            Ok(n) => *moved += n as u64,
            // The room went between `writable` and the write (a packet buffer): wait again.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(End::Peer(e)),
        }
        match end {
            None => {}
            Some(Ok(())) => return (&mut &*to).shutdown().await.map_err(End::Peer),
            Some(Err(e)) => return Err(End::Host(e)),
        }
    }
}

/// The peer's bytes to the host without a copy of the relay's own: the stack's received
/// segments themselves (`read_bufs`, their checksums verified), at most [`COPY`] bytes at a
/// time, written on with vectored writes and let go (back to the packet pool) once written.
/// At the peer's end of stream, a FIN on the host socket. An error names its side.
async fn pump_segments(from: &TcpStream, to: &mut tokio::net::tcp::WriteHalf<'_>, moved: &mut u64) -> Result<(), End> {
    use tokio::io::AsyncWriteExt;
    // A 64 KiB read is at most 45 full segments at MTU 1500 (fewer, larger ones with
    // receive offload), so one vectored write nearly always takes the whole read.
    const IOV: usize = 64;
    let mut segs = Vec::with_capacity(IOV);
    loop {
        let n = from.read_bufs(COPY, &mut segs).await.map_err(End::Peer)?;
        if n == 0 {
            return to.shutdown().await.map_err(End::Host);
        }
        for part in segs.chunks(IOV) {
            let mut iov = [io::IoSlice::new(&[]); IOV];
            for (v, s) in iov.iter_mut().zip(part) {
                *v = io::IoSlice::new(s.data());
            }
            // What a short write left: `advance_slices` drops the slices written.
            let mut left = &mut iov[..part.len()];
            while !left.is_empty() {
                let w = to.write_vectored(left).await.map_err(End::Host)?;
                if w == 0 {
                    return Err(End::Host(io::ErrorKind::WriteZero.into()));
                }
                io::IoSlice::advance_slices(&mut left, w);
            }
        }
        segs.clear();
        *moved += n as u64;
    }
}

/// One direction to its end of stream, then a FIN on the other side (half-close travels
/// through). An error names the side it came from.
async fn pump<R, W>(
    from: &mut R,
    to: &mut W,
    moved: &mut u64,
    read_side: fn(io::Error) -> End,
    write_side: fn(io::Error) -> End,
) -> Result<(), End>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; COPY];
    loop {
        let n = from.read(&mut buf).await.map_err(read_side)?;
        if n == 0 {
            return to.shutdown().await.map_err(write_side);
        }
        to.write_all(&buf[..n]).await.map_err(write_side)?;
        *moved += n as u64;
    }
}

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
    if args.udp_timeout == 0 {
        return Err("--udp-timeout must be at least 1 s".into());
    }
    let buffer = args.buffer * 1024;
    let mut link = Link::open(&args.link)?;
    let any = args.listen.any();
    let stack = link.stack_with(args.link.addr, any, args.max_connections, |c| {
        (c.tcp.recv_buffer, c.tcp.send_buffer) = (buffer, buffer);
    })?;
    let (kind, mode) = (link.kind(), link.mode());
    let rt = Runtime::new(stack, link.dev).map_err(|e| format!("runtime: {e}"))?;
    let listeners: Vec<TcpListener> = if any {
        vec![TcpListener::bind_any(&rt).map_err(|e| format!("listen any: {e}"))?]
    } else {
        args.listen
            .0
            .iter()
            .map(|&port| {
                TcpListener::bind(&rt, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
                    .map_err(|e| format!("listen {port}: {e}"))
            })
            .collect::<Result<_, _>>()?
    };
    let udp_idle = std::time::Duration::from_secs(args.udp_timeout);
    let udp = Arc::new(udp::UdpRelay::new(&rt, any, &args.listen.0, to, args.udp_sessions, udp_idle)?);
    let ports = args.listen.0.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
    let ports = match () {
        _ if any => "any address and port".to_string(),
        _ if ports.len() > 60 => format!("{} ports", args.listen.0.len()),
        _ => ports,
    };
    println!(
        "ackclock relay: {kind} {} ({mode}), stack {}{}{}; TCP and UDP ports {ports} -> {to}; ready",
        link.name,
        args.link.addr,
        args.link.host_addr.map_or(String::new(), |h| format!(", host {h}")),
        args.link.netns.as_deref().map_or(String::new(), |n| format!(", netns {n}")),
    );
    let _ = io::stdout().flush();

    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let segments_to_host = mode == "offload";
    let read_into_stack = segments_to_host && args.workers == 1;
    let report = Mutex::new(Report::default());
    let relay = Arc::new(Relay { to, segments_to_host, read_into_stack, report, stop });
    let tasks = match args.workers {
        1 => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        n => tokio::runtime::Builder::new_multi_thread().worker_threads(n.into()).enable_all().build(),
    }
    .map_err(|e| format!("tokio: {e}"))?;
    tasks.block_on(async {
        for l in listeners {
            tokio::spawn(accept_loop(l, relay.clone()));
        }
        // One worker: the device's frames are processed on it, beside the tasks that read
        // them (`watch_device`). With more, the protocol thread receives them.
        if args.workers == 1 {
            if let Some(w) = ackclock::runtime::tokio::watch_device(&rt) {
                tokio::spawn(w);
            }
        }
        udp.start();
        let mut heap = HeapTrim::default();
        while !stopping() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            // The runtime gave the packet pools' idle pages back: the heap's too (the
            // connections' copy buffers were freed at close).
            heap.after_release(&rt);
        }
        // Stop: every connection resets both ways and reports (bounded: a task that does
        // not report within two seconds is counted as open).
        let _ = stop_tx.send(true);
        for _ in 0..200 {
            if relay.report.lock().unwrap_or_else(|e| e.into_inner()).open == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        udp.stop();
    });
    // The tasks go first: on one worker, the device's watch is one of them, and only its
    // drop hands the device back to the protocol thread for the linger below (the tasks
    // of a current-thread runtime do not run outside `block_on`).
    drop(tasks);
    let (u, udp_open) = udp.stats();
    drop(udp);
    // Every socket is closed or reset: the last round sends what is left, then the device
    // comes back for its counters and the capture.
    let stack_drops: serde_json::Map<String, serde_json::Value> = rt.with_stack(|s| {
        s.counters()
            .named()
            .filter(|&(name, n)| name.starts_with("drops_") && n > 0)
            .map(|(name, n)| (name.to_string(), n.into()))
            .collect()
    });
    let mut rt = rt;
    rt.shutdown_linger(std::time::Duration::from_millis(500));
    link.dev = rt.take_device().ok_or("the runtime did not give the device back")?;
    link.report_errors("ackclock relay");
    let mut report = std::mem::take(&mut *relay.report.lock().unwrap_or_else(|e| e.into_inner()));
    let (total_conns, total_up, total_down, open) =
        (report.connections, report.up, report.down, report.reset_at_exit + report.open);
    report.records.sort_by_key(|r| r.id);
    for r in &report.records {
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
        let conns: Vec<serde_json::Value> = report
            .records
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
            "omitted": report.omitted,
            "total": { "connections": total_conns, "reset_at_exit": open, "up": total_up, "down": total_down },
            "stack_drops": stack_drops,
            "udp": {
                "sessions": u.sessions, "open_at_exit": udp_open, "expired": u.expired, "evicted": u.evicted,
                "up": u.up, "up_bytes": u.up_bytes, "down": u.down, "down_bytes": u.down_bytes, "dropped": u.dropped,
            },
        });
        println!("{out}");
    }
    link.finish()
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
