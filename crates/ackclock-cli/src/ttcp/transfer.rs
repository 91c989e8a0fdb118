//! One chargen-to-discard transfer between two stacks on a simulated link.
//!
//! Host A (10.0.0.1, the sender) connects to host B (10.0.0.2, the receiver) on the discard
//! port, writes `bytes` bytes of the RFC 864 character-generator pattern as fast as its send
//! buffer takes them, then shuts down its side. B reads everything as soon as it arrives
//! (the application runs in every simulator step, between receive and transmit), checks it
//! against the pattern, and closes once it has read the end of the stream. The run goes on
//! until both sides have closed, so a capture ends with the FIN exchange.

use crate::chargen::Chargen;
use ackclock::buf::PoolConfig;
use ackclock::phy::Resolution;
use ackclock::sim::{host_config, LinkConfig, LinkStats, Rng, Side, World};
use ackclock::tcp::cc::Algorithm;
use ackclock::tcp::{ConnStats, Counters};
use ackclock::time::{Duration, Instant};
use ackclock::{Error, Shutdown, TcpHandle};
use core::net::Ipv4Addr;
use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddrV4;
use std::path::PathBuf;

pub const SENDER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The discard port (RFC 863).
pub const DISCARD_PORT: u16 = 9;

/// Bytes the applications move per socket call.
const CHUNK: usize = 64 * 1024;
/// How long the close may take after the last byte was read (simulated).
const CLOSE_GRACE: Duration = Duration::from_secs(120);

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    pub link: LinkConfig,
    pub bytes: u64,
    /// Sender's send buffer and receiver's receive buffer, bytes.
    pub sndbuf: usize,
    pub rcvbuf: usize,
    /// MSS both stacks advertise; `None` derives it from the MTU.
    pub mss: Option<u16>,
    pub cc: Algorithm,
    pub sack: bool,
    pub timestamps: bool,
    pub seed: u64,
    /// Give up when the last byte has not been read by this simulated time.
    pub time_limit: Duration,
    /// Capture the sender's frames here.
    pub pcap: Option<PathBuf>,
}

/// What happened.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Every byte was read, in order and intact, and the end of the stream seen.
    pub completed: bool,
    /// Why not, if not.
    pub error: Option<String>,
    /// Bytes the receiver read (and checked).
    pub received: u64,
    /// First stream offset whose byte differed from the pattern.
    pub first_bad: Option<u64>,
    /// From `connect` to the last byte read (the transfer time), simulated.
    pub elapsed: Duration,
    /// When the run ended (both sides closed, or gave up), simulated.
    pub end: Duration,
    /// Medium time held by each direction's frames up to the last byte read.
    pub busy_data: Duration,
    pub busy_acks: Duration,
    /// Sender's MSS and the payload of its full-sized segments, as negotiated.
    pub smss: u16,
    pub eff_mss: u16,
    pub timestamps: bool,
    pub sack: bool,
    /// The sender's connection counters (retransmissions, fast retransmits, RTOs).
    pub sender: ConnStats,
    /// Stack-wide counters of each host, at the end of the run.
    pub sender_stack: Counters,
    pub receiver_stack: Counters,
    /// Link counters of each direction, at the end of the run.
    pub data_link: LinkStats,
    pub ack_link: LinkStats,
    /// Frames written to the capture, if any.
    pub pcap_frames: u64,
    pub steps: u64,
    pub stalls: u64,
}

/// The payload of a full-sized segment for these settings: the MSS (an override capped at
/// MTU - 40, as the stack does) less 12 bytes of timestamp option when timestamps are on.
pub fn payload(link: &LinkConfig, mss: Option<u16>, timestamps: bool) -> usize {
    let mtu_mss = link.mtu.saturating_sub(40);
    let mss = mss.map_or(mtu_mss, |m| usize::from(m).min(mtu_mss));
    mss - if timestamps { 12 } else { 0 }
}

struct App {
    conn: TcpHandle,
    accepted: Option<TcpHandle>,
    sent: u64,
    shut: bool,
    received: u64,
    first_bad: Option<u64>,
    last_byte: Option<Instant>,
    eof: bool,
    closed_receiver: bool,
    error: Option<String>,
    buf: Vec<u8>,
    busy_at_last: (Duration, Duration),
}

/// Run one transfer. `progress` is called now and then with the bytes read so far.
pub fn run(p: &Params, progress: &mut dyn FnMut(u64)) -> Outcome {
    let mut world = World::new(p.seed);
    let seg = payload(&p.link, p.mss, p.timestamps).max(1);
    let stack = |addr, stream| {
        let mut c = host_config(addr, 24, Rng::derive(p.seed, stream).next_u64());
        c.tcp.mss = p.mss;
        c.tcp.sack = p.sack;
        c.tcp.timestamps = p.timestamps;
        c.tcp.congestion = p.cc;
        // Room for both buffers in full-sized segments, and the stack's usual slack.
        let need = (p.sndbuf + p.rcvbuf) / seg * 2 + 512;
        c.pool = PoolConfig { buffers: need.max(PoolConfig::default().buffers), ..PoolConfig::default() };
        c
    };
    let mut a_cfg = stack(SENDER, 1);
    a_cfg.tcp.send_buffer = p.sndbuf;
    let mut b_cfg = stack(RECEIVER, 2);
    b_cfg.tcp.recv_buffer = p.rcvbuf;
    let a = world.add_stack(a_cfg);
    let b = world.add_stack(b_cfg);
    let link = world.connect(a, b, p.link);

    let mut out = Outcome::default();
    if let Some(path) = &p.pcap {
        let file = match File::create(path) {
            Ok(f) => f,
            Err(e) => {
                out.error = Some(format!("cannot create {}: {e}", path.display()));
                return out;
            }
        };
        if let Err(e) = world.capture(a, BufWriter::new(file), Resolution::Nanos) {
            out.error = Some(format!("cannot write {}: {e}", path.display()));
            return out;
        }
    }

    let listener =
        world.stack_mut(b).tcp_listen(SocketAddrV4::new(RECEIVER, DISCARD_PORT), 1).expect("listen on a fresh stack");
    let conn =
        world.stack_mut(a).tcp_connect(SocketAddrV4::new(RECEIVER, DISCARD_PORT)).expect("connect on a fresh stack");
    let chargen = Chargen::new(CHUNK);
    let mut app = App {
        conn,
        accepted: None,
        sent: 0,
        shut: false,
        received: 0,
        first_bad: None,
        last_byte: None,
        eof: false,
        closed_receiver: false,
        error: None,
        buf: vec![0; CHUNK],
        busy_at_last: (Duration::ZERO, Duration::ZERO),
    };
    let mut steps = 0u64;
    let bytes = p.bytes;
    world.run_while(|w| {
        steps += 1;
        if steps % 1024 == 0 {
            progress(app.received);
        }
        // chargen: write while the send buffer takes it.
        let s = w.stack_mut(a);
        while app.sent < bytes && app.error.is_none() {
            let data = chargen.at(app.sent, (bytes - app.sent).min(CHUNK as u64) as usize);
            match s.tcp_send(app.conn, data) {
                Ok(0) | Err(Error::WouldBlock) | Err(Error::NoBufferSpace) => break,
                Ok(n) => app.sent += n as u64,
                Err(e) => app.error = Some(format!("sender: send after {} bytes: {e}", app.sent)),
            }
        }
        if app.sent == bytes && !app.shut && app.error.is_none() {
            match s.tcp_shutdown(app.conn, Shutdown::Write) {
                Ok(()) => app.shut = true,
                Err(Error::WouldBlock) => {}
                Err(e) => app.error = Some(format!("sender: shutdown: {e}")),
            }
        }
        // discard: read everything that is there, check it, and close after the end.
        let r = w.stack_mut(b);
        if app.accepted.is_none() {
            app.accepted = r.tcp_accept(listener).ok();
        }
        if let (Some(c), false) = (app.accepted, app.eof) {
            loop {
                match r.tcp_recv(c, &mut app.buf) {
                    Ok(0) => {
                        app.eof = true;
                        break;
                    }
                    Ok(n) => {
                        let want = chargen.at(app.received, n);
                        if app.first_bad.is_none() && app.buf[..n] != *want {
                            let d = app.buf.iter().zip(want).position(|(x, y)| x != y).unwrap_or(0);
                            app.first_bad = Some(app.received + d as u64);
                        }
                        app.received += n as u64;
                    }
                    Err(Error::WouldBlock) => break,
                    Err(e) => {
                        app.error = Some(format!("receiver: recv after {} bytes: {e}", app.received));
                        break;
                    }
                }
            }
        }
        if app.last_byte.is_none() && app.received >= bytes {
            app.last_byte = Some(w.now());
            app.busy_at_last = (w.link_stats(link, Side::A).busy, w.link_stats(link, Side::B).busy);
        }
        if app.eof && !app.closed_receiver {
            if let Some(c) = app.accepted {
                let _ = w.stack_mut(b).tcp_close(c);
            }
            app.closed_receiver = true;
        }
        if app.error.is_some() {
            return false;
        }
        match app.last_byte {
            // Until the sender's side is closed too (TIME-WAIT), within a grace period.
            Some(t) => {
                let done = w.stack(a).tcp_readiness(app.conn).map_or(true, |r| r.closed);
                !(app.closed_receiver && done) && w.now() < t + CLOSE_GRACE
            }
            None => {
                let dead = match w.stack(a).tcp_readiness(app.conn) {
                    Ok(r) => r.error,
                    Err(e) => Some(e),
                };
                if let Some(e) = dead {
                    app.error = Some(format!("sender: connection failed: {e}"));
                    return false;
                }
                w.now() < Instant::ZERO + p.time_limit
            }
        }
    });
    progress(app.received);
    if app.last_byte.is_none() && app.error.is_none() {
        // The connection may have failed in the very last step (its timers run after the
        // application), leaving nothing more to happen.
        match world.stack(a).tcp_readiness(app.conn) {
            Ok(r) if r.error.is_some() => app.error = r.error.map(|e| format!("sender: connection failed: {e}")),
            Err(e) => app.error = Some(format!("sender: connection failed: {e}")),
            Ok(_) => {}
        }
    }

    match world.end_capture(a) {
        Some(Ok(pcap)) => out.pcap_frames = pcap.records(),
        Some(Err(e)) => {
            app.error.get_or_insert(format!("capture: {e}"));
        }
        None => {}
    }
    out.error = app.error.clone();
    out.received = app.received;
    out.first_bad = app.first_bad;
    let end = world.now();
    out.end = end - Instant::ZERO;
    match app.last_byte {
        Some(t) => {
            out.elapsed = t - Instant::ZERO;
            (out.busy_data, out.busy_acks) = app.busy_at_last;
        }
        None => {
            out.elapsed = out.end;
            out.busy_data = world.link_stats(link, Side::A).busy;
            out.busy_acks = world.link_stats(link, Side::B).busy;
            if out.error.is_none() {
                out.error = Some(format!(
                    "gave up after {:.3} s simulated with {} of {} bytes read",
                    out.end.as_secs_f64(),
                    app.received,
                    bytes
                ));
            }
        }
    }
    if let Some(off) = app.first_bad {
        out.error.get_or_insert(format!("byte {off} differs from the chargen pattern"));
    }
    out.completed = out.error.is_none() && app.eof && app.received == bytes;
    if let Ok(info) = world.stack(a).tcp_info(app.conn) {
        out.smss = info.smss;
        out.eff_mss = info.eff_mss;
        out.timestamps = info.timestamps;
        out.sack = info.sack;
        out.sender = info.stats;
    }
    out.sender_stack = *world.stack(a).counters();
    out.receiver_stack = *world.stack(b).counters();
    out.data_link = *world.link_stats(link, Side::A);
    out.ack_link = *world.link_stats(link, Side::B);
    out.steps = world.steps();
    out.stalls = world.stalls();
    out
}
