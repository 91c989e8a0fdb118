//! The peer benchmark: a bulk transfer between two ackclock stacks against the same transfer
//! between two smoltcp stacks, in one process and one thread, with the same driving loop.
//!
//! `cargo bench -p ackclock --bench peers` (`-- --help` for the options). For each stack, two
//! endpoints (a sender and a receiver) are joined by two in-memory frame queues, one per
//! direction, which never drop. One round of the loop polls the sender, then the receiver;
//! each poll is
//!
//! 1. ingress: at most the endpoint's frames per poll taken from its incoming queue and
//!    processed;
//! 2. the application: the sender writes all the stack takes, the receiver reads all it has
//!    and checks it;
//! 3. egress: at most the endpoint's frames per poll sent into its outgoing queue.
//!
//! The receiver's frames per poll set the ACK clock: at 2, it acknowledges (at most) every
//! second segment, as on a wire where segments arrive one by one; with `all` it drains its
//! queue and acknowledges once per batch. The sender's frames per poll bound its burst.
//!
//! Time is virtual: it advances 1 µs per round, and when no frame is in flight it jumps to the
//! earliest timer of either endpoint. Such a jump is a stall (a transfer waiting on a timer);
//! stalls are counted and reported, since the measured time does not show them. Throughput
//! is bytes per CPU time of the thread (the machine is shared: time spent descheduled counts
//! for neither stack) from the first write to the last byte checked, with the ratio per
//! wall-clock time printed beside it; connection setup is not timed.
//!
//! The sender writes a pseudo-random pattern (xorshift64* by position, with a prime period
//! of about 1 MiB, so that no segment or buffer size lines it up with itself), and the
//! receiver compares every byte it reads with the pattern at that position: a stack that
//! loses, duplicates, reorders or corrupts a byte fails the run loudly.
//!
//! Settings for both stacks: 256 KiB send and receive buffers, Nagle off, NewReno
//! (smoltcp's `Reno`), checksums computed and verified or both left to a (pretend) device,
//! no segmentation offload. Everything else is each stack's default.
//!
//! `--callgrind ackclock|smoltcp` runs one transfer of one cell and nothing else (no
//! baseline, no iperf3), for `scripts/callgrind-peers`, which divides the whole process's
//! instructions by the data segments (bytes / MSS).
//!
//! Linux over loopback (two iperf3 processes on 127.0.0.1, the kernel's stack, with the same
//! congestion control, Nagle and buffer settings) is measured in the same run as a reference
//! when iperf3 is on the PATH, per CPU time of both processes and per wall-clock time.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::net::SocketAddrV4;
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::Instant as WallClock;

// ---------------------------------------------------------------------------------------
// The cells, the options.

/// Frames an endpoint handles per poll, in and out; `None` is all there are.
type Fpp = Option<usize>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cell {
    mtu: usize,
    /// The receiver's frames per poll.
    rx_fpp: Fpp,
    /// The sender's frames per poll.
    tx_fpp: Fpp,
    /// Checksums computed and verified by the stacks (true) or left to the device (false).
    checksum: bool,
}

/// The matrix: MTU, receiver's / sender's frames per poll.
const MATRIX: [(usize, Fpp, Fpp); 5] = [
    (1500, Some(2), Some(2)),
    (1500, Some(2), Some(64)),
    (1500, None, None),
    (9000, Some(2), Some(2)),
    (65535, None, None),
];

fn fpp_str(f: Fpp) -> String {
    f.map_or_else(|| "all".to_string(), |n| n.to_string())
}

impl Cell {
    fn label(&self) -> String {
        format!(
            "MTU {} {}/{} csum {}",
            self.mtu,
            fpp_str(self.rx_fpp),
            fpp_str(self.tx_fpp),
            if self.checksum { "on" } else { "off" }
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Ackclock,
    Smoltcp,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Ackclock => "ackclock",
            Which::Smoltcp => "smoltcp",
        }
    }
}

struct Opts {
    bytes: u64,
    runs: usize,
    json: bool,
    iperf3: bool,
    /// Cells chosen with `--cell`; the matrix when empty.
    cells: Vec<(usize, Fpp, Fpp)>,
    checksums: Vec<bool>,
    callgrind: Option<Which>,
}

const HELP: &str = "\
peers: ackclock against smoltcp, a byte-checked bulk transfer over in-memory frame queues

usage: cargo bench -p ackclock --bench peers -- [options]

  --bytes N          bytes per transfer; suffixes K, M, G (powers of 1024) [256M; 64M with --callgrind]
  --runs N           runs per cell, interleaved between the stacks; the median is printed [5]
  --cell MTU:R/S     only this cell (repeatable): MTU, receiver's / sender's frames per poll,
                     each a number or `all`, e.g. 1500:2/64 [the matrix]
  --checksum on|off|both   checksums computed and verified by the stacks, or left to the device [both]
  --json             print the results as JSON instead of a table
  --iperf3           Linux over loopback (iperf3 on 127.0.0.1) as a reference, when iperf3
                     is on the PATH (the default); --no-iperf3 leaves it out
  --callgrind STACK  one transfer with STACK (ackclock or smoltcp) of one cell and nothing
                     else [cell 1500:2/64, checksums on, 64M], for scripts/callgrind-peers
  --help             this text

The matrix: MTU 1500 at 2/2, 2/64 and all/all, MTU 9000 at 2/2, MTU 65535 at all/all.
";

fn parse_bytes(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("bad byte count {s:?}"))?;
    n.checked_mul(mult).filter(|&n| n > 0).ok_or_else(|| format!("bad byte count {s:?}"))
}

fn parse_fpp(s: &str) -> Result<Fpp, String> {
    if s == "all" {
        return Ok(None);
    }
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err(format!("bad frames per poll {s:?} (a positive number or `all`)")),
    }
}

fn parse_cell(s: &str) -> Result<(usize, Fpp, Fpp), String> {
    let bad = || format!("bad cell {s:?} (MTU:R/S, e.g. 1500:2/64)");
    let (mtu, fpp) = s.split_once(':').ok_or_else(bad)?;
    let (r, t) = fpp.split_once('/').ok_or_else(bad)?;
    let mtu: usize = mtu.parse().map_err(|_| bad())?;
    if !(576..=65535).contains(&mtu) {
        return Err(format!("MTU {mtu} out of range (576 to 65535)"));
    }
    Ok((mtu, parse_fpp(r)?, parse_fpp(t)?))
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        bytes: 0,
        runs: 5,
        json: false,
        iperf3: true,
        cells: Vec::new(),
        checksums: vec![true, false],
        callgrind: None,
    };
    let mut checksum_set = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            // What cargo bench passes to every bench binary.
            "--bench" => {}
            "--help" | "-h" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            "--bytes" => o.bytes = parse_bytes(&val("--bytes")?)?,
            "--runs" => {
                o.runs = val("--runs")?.parse().ok().filter(|&n| n > 0).ok_or("--runs needs a positive number")?
            }
            "--cell" => o.cells.push(parse_cell(&val("--cell")?)?),
            "--checksum" => {
                checksum_set = true;
                o.checksums = match val("--checksum")?.as_str() {
                    "on" => vec![true],
                    "off" => vec![false],
                    "both" => vec![true, false],
                    v => return Err(format!("--checksum on|off|both, not {v:?}")),
                }
            }
            "--json" => o.json = true,
            "--iperf3" => o.iperf3 = true,
            "--no-iperf3" => o.iperf3 = false,
            "--callgrind" => {
                o.callgrind = Some(match val("--callgrind")?.as_str() {
                    "ackclock" => Which::Ackclock,
                    "smoltcp" => Which::Smoltcp,
                    v => return Err(format!("--callgrind ackclock|smoltcp, not {v:?}")),
                })
            }
            _ => return Err(format!("unknown argument {a:?} (try --help)")),
        }
    }
    if o.callgrind.is_some() {
        if o.cells.is_empty() {
            o.cells.push((1500, Some(2), Some(64)));
        }
        if !checksum_set {
            o.checksums = vec![true];
        }
        if o.bytes == 0 {
            o.bytes = 64 << 20;
        }
    }
    if o.bytes == 0 {
        o.bytes = 256 << 20;
    }
    if o.cells.is_empty() {
        o.cells = MATRIX.to_vec();
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------------
// The pattern.

/// The pattern's period: a prime, so that no MSS or buffer size divides it.
const PERIOD: usize = 1_048_573;
/// Largest write or read of the application.
const CHUNK: usize = 64 * 1024;

/// The byte stream both applications agree on: byte `i` is a function of `i % PERIOD`.
struct Pattern {
    /// `PERIOD + CHUNK` bytes, so that any `CHUNK` bytes from any position are contiguous.
    table: Vec<u8>,
}

impl Pattern {
    fn new() -> Pattern {
        let mut table = vec![0u8; PERIOD + CHUNK];
        for (w, word) in table[..PERIOD].chunks_mut(8).enumerate() {
            // xorshift64* of the 8-byte word's index.
            let mut x = w as u64 ^ 0x9e37_79b9_7f4a_7c15;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let bytes = x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
            word.copy_from_slice(&bytes[..word.len()]);
        }
        table.copy_within(..CHUNK, PERIOD);
        Pattern { table }
    }

    /// The `n` (at most `CHUNK`) bytes of the stream from position `pos`.
    #[inline]
    fn at(&self, pos: u64, n: usize) -> &[u8] {
        let start = (pos % PERIOD as u64) as usize;
        &self.table[start..start + n]
    }

    /// Check `got`, read at stream position `pos`; panics at the first wrong byte.
    #[inline]
    fn check(&self, stack: &str, pos: u64, got: &[u8]) {
        let want = self.at(pos, got.len());
        if want != got {
            let i = want.iter().zip(got).position(|(a, b)| a != b).unwrap_or(0);
            panic!(
                "{stack}: byte {} of the stream is {:#04x}, the pattern has {:#04x}: the transfer is corrupt",
                pos + i as u64,
                got[i],
                want[i]
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// The driving loop, the same for both stacks.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Sender,
    Receiver,
}

/// Two endpoints of one stack and the queues between them.
trait Peers {
    /// Take at most the endpoint's frames per poll from its queue and process them.
    fn ingress(&mut self, end: End, now_us: u64);
    /// The sender's application writes; returns the bytes taken (0 when it would block).
    fn send(&mut self, data: &[u8]) -> usize;
    /// The receiver's application reads; returns the bytes read (0 when there are none).
    fn recv(&mut self, buf: &mut [u8]) -> usize;
    /// Send at most the endpoint's frames per poll.
    fn egress(&mut self, end: End, now_us: u64);
    /// Frames in the queues between the endpoints.
    fn in_flight(&self) -> usize;
    /// When either endpoint next needs polling, in µs of virtual time.
    fn poll_at(&mut self, now_us: u64) -> Option<u64>;
    /// Frames sent by the sender and by the receiver so far.
    fn frames(&self) -> (u64, u64);
    /// The payload of a full-sized data segment.
    fn mss(&mut self) -> usize;
    /// A line of the stacks' own counters, for the record.
    fn describe(&self) -> String;
}

/// CPU time this thread has used, in seconds: on a machine shared with other work, the
/// time the transfer was descheduled does not count against either stack.
#[cfg(target_os = "linux")]
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Elsewhere, wall-clock time stands in for it.
#[cfg(not(target_os = "linux"))]
fn thread_cpu_secs() -> f64 {
    use std::sync::OnceLock;
    static T0: OnceLock<WallClock> = OnceLock::new();
    T0.get_or_init(WallClock::now).elapsed().as_secs_f64()
}

/// What one transfer gave.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    /// The thread's CPU time and the wall-clock time of the data phase.
    secs: f64,
    wall_secs: f64,
    /// Data frames (sender to receiver) and ACK frames (receiver to sender) during the data
    /// phase.
    data_frames: u64,
    ack_frames: u64,
    /// Rounds of the loop, and the times virtual time had to jump to a timer.
    rounds: u64,
    stalls: u64,
    virtual_us: u64,
    /// The payload of a full-sized data segment.
    mss: usize,
}

impl Outcome {
    /// Throughput per CPU time of the thread.
    fn gbps(&self, bytes: u64) -> f64 {
        bytes as f64 * 8.0 / self.secs / 1e9
    }

    /// Throughput per wall-clock time.
    fn wall_gbps(&self, bytes: u64) -> f64 {
        bytes as f64 * 8.0 / self.wall_secs / 1e9
    }
}

/// Virtual time at which the connection is set up.
const START_US: u64 = 1_000_000;
/// A transfer that needs more virtual time than this is stuck.
const LIMIT_US: u64 = 3_600_000_000;

/// Rounds until `done`, each a poll of the sender then the receiver, without application
/// (connection setup). Panics if it takes more than 10 s of virtual time.
fn settle<P: Peers>(p: &mut P, now: &mut u64, mut done: impl FnMut(&mut P) -> bool) {
    let end = *now + 10_000_000;
    while !done(p) {
        assert!(*now < end, "connection setup did not finish");
        for e in [End::Sender, End::Receiver] {
            p.ingress(e, *now);
            p.egress(e, *now);
        }
        advance(p, now, &mut 0);
    }
}

#[inline]
fn advance<P: Peers>(p: &mut P, now: &mut u64, stalls: &mut u64) {
    let next = *now + 1;
    if p.in_flight() == 0 {
        if let Some(t) = p.poll_at(*now) {
            if t > next {
                *now = t;
                *stalls += 1;
                return;
            }
        }
    }
    *now = next;
}

/// Move `bytes` of the pattern from the sender's application to the receiver's, checking
/// every byte; returns the times taken and counts. Not inlined, so that callgrind can
/// count it apart (`--toggle-collect`).
#[inline(never)]
fn transfer<P: Peers>(p: &mut P, stack: &str, pat: &Pattern, bytes: u64, now: &mut u64) -> Outcome {
    let mut buf = vec![0u8; CHUNK];
    let (mut sent, mut received) = (0u64, 0u64);
    let (mut rounds, mut stalls) = (0u64, 0u64);
    let (frames_a, frames_b) = p.frames();
    let start_us = *now;
    let t0 = WallClock::now();
    let c0 = thread_cpu_secs();
    loop {
        rounds += 1;
        // The sender.
        p.ingress(End::Sender, *now);
        while sent < bytes {
            let n = (bytes - sent).min(CHUNK as u64) as usize;
            let k = p.send(pat.at(sent, n));
            if k == 0 {
                break;
            }
            sent += k as u64;
        }
        p.egress(End::Sender, *now);
        // The receiver.
        p.ingress(End::Receiver, *now);
        loop {
            let k = p.recv(&mut buf);
            if k == 0 {
                break;
            }
            assert!(received + k as u64 <= bytes, "{stack}: more bytes arrived than were sent");
            pat.check(stack, received, &buf[..k]);
            received += k as u64;
        }
        if received == bytes {
            break;
        }
        p.egress(End::Receiver, *now);
        advance(p, now, &mut stalls);
        assert!(*now - start_us < LIMIT_US, "{stack}: transfer stuck at {received} of {bytes} bytes");
    }
    let secs = thread_cpu_secs() - c0;
    let wall_secs = t0.elapsed().as_secs_f64();
    let (a, b) = p.frames();
    Outcome {
        secs,
        wall_secs,
        data_frames: a - frames_a,
        ack_frames: b - frames_b,
        rounds,
        stalls,
        virtual_us: *now - start_us,
        mss: p.mss(),
    }
}

// ---------------------------------------------------------------------------------------
// ackclock.

mod ack {
    use super::*;
    use ackclock::buf::{PBuf, PoolConfig, DEFAULT_HEADROOM};
    use ackclock::iface::InterfaceConfig;
    use ackclock::phy::{Batch, Capabilities, Device, DeviceStats};
    use ackclock::tcp::cc::Algorithm;
    use ackclock::time::Instant;
    use ackclock::{Error, Stack, StackConfig, TcpHandle};
    use core::net::Ipv4Addr;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// An endpoint's device for one poll's ingress: frames in from `rx`, at most `left` of
    /// them (egress takes the frames from the stack's transmit ring itself).
    struct Port<'a> {
        rx: &'a mut VecDeque<PBuf>,
        left: usize,
        caps: Capabilities,
    }

    impl Device for Port<'_> {
        fn capabilities(&self) -> Capabilities {
            self.caps
        }

        fn receive(&mut self, _now: Instant, rx: &mut Batch) -> usize {
            let mut n = 0;
            while self.left > 0 && !rx.is_full() {
                let Some(f) = self.rx.pop_front() else { break };
                let _ = rx.push(f);
                self.left -= 1;
                n += 1;
            }
            n
        }

        fn transmit(&mut self, _now: Instant, _tx: &mut Batch) -> usize {
            unreachable!("egress moves frames from the transmit ring itself")
        }

        fn stats(&self) -> DeviceStats {
            DeviceStats::default()
        }
    }

    pub struct Ack {
        a: Stack,
        b: Stack,
        client: TcpHandle,
        server: TcpHandle,
        /// Frames from a to b, and from b to a.
        ab: VecDeque<PBuf>,
        ba: VecDeque<PBuf>,
        frames: (u64, u64),
        caps: Capabilities,
        fpp: (Fpp, Fpp),
    }

    fn config(addr: Ipv4Addr, seed: u64, mtu: usize, fpp: Fpp) -> StackConfig {
        let mut c = StackConfig::new(InterfaceConfig::new(addr, 24));
        c.seed = seed;
        c.tcp.recv_buffer = 256 * 1024;
        c.tcp.send_buffer = 256 * 1024;
        c.tcp.nodelay = true;
        c.tcp.congestion = Algorithm::NewReno;
        // A frame per buffer, behind the headroom; enough buffers for both 256 KiB buffers
        // in segments, and the frames in flight (which hold the sender's buffers).
        let buffer_size = mtu + 18 + DEFAULT_HEADROOM;
        let segments = 256 * 1024 / (mtu - 52) + 1;
        c.pool = PoolConfig { buffers: 4 * segments + 256, buffer_size, headroom: DEFAULT_HEADROOM };
        // The rings hold one poll's frames (with `all`, 64 at a time, again while full).
        c.batch = fpp.unwrap_or(64);
        c
    }

    impl Ack {
        /// Two stacks, connected (the handshake is not timed).
        pub fn new(cell: &Cell, now: &mut u64) -> Ack {
            let caps = Capabilities {
                rx_checksum: !cell.checksum,
                tx_checksum: !cell.checksum,
                ..Capabilities::ethernet(cell.mtu)
            };
            let t = Instant::from_micros(*now);
            let mut a = Stack::new(config(A, 1, cell.mtu, cell.tx_fpp), caps, t).expect("stack a");
            let mut b = Stack::new(config(B, 2, cell.mtu, cell.rx_fpp), caps, t).expect("stack b");
            let l = b.tcp_listen(SocketAddrV4::new(B, 80), 16).expect("listen");
            let client = a.tcp_connect(SocketAddrV4::new(B, 80)).expect("connect");
            let mut p = Ack {
                a,
                b,
                client,
                server: client,
                ab: VecDeque::new(),
                ba: VecDeque::new(),
                frames: (0, 0),
                caps,
                fpp: (cell.tx_fpp, cell.rx_fpp),
            };
            let mut server = None;
            settle(&mut p, now, |p| {
                server = server.or_else(|| p.b.tcp_accept(l).ok());
                server.is_some() && p.a.tcp_readiness(client).is_ok_and(|r| r.writable)
            });
            p.server = server.unwrap();
            p
        }
    }

    impl Peers for Ack {
        #[inline]
        fn ingress(&mut self, end: End, now: u64) {
            let (stack, rx, fpp) = match end {
                End::Sender => (&mut self.a, &mut self.ba, self.fpp.0),
                End::Receiver => (&mut self.b, &mut self.ab, self.fpp.1),
            };
            let mut port = Port { rx, left: fpp.unwrap_or(usize::MAX), caps: self.caps };
            while stack.receive(Instant::from_micros(now), &mut port) > 0 {}
        }

        #[inline]
        fn send(&mut self, data: &[u8]) -> usize {
            match self.a.tcp_send(self.client, data) {
                Ok(n) => n,
                Err(Error::WouldBlock | Error::NoBufferSpace) => 0,
                Err(e) => panic!("ackclock send: {e}"),
            }
        }

        #[inline]
        fn recv(&mut self, buf: &mut [u8]) -> usize {
            match self.b.tcp_recv(self.server, buf) {
                Ok(n) => n,
                Err(Error::WouldBlock) => 0,
                Err(e) => panic!("ackclock recv: {e}"),
            }
        }

        /// What `Stack::transmit` does, with a device that takes every frame: run timers and
        /// output into the transmit ring (which holds the endpoint's frames per poll) and
        /// move them to the queue; with `all`, again while output filled the ring.
        #[inline]
        fn egress(&mut self, end: End, now: u64) {
            let (stack, tx, fpp, count) = match end {
                End::Sender => (&mut self.a, &mut self.ab, self.fpp.0, &mut self.frames.0),
                End::Receiver => (&mut self.b, &mut self.ba, self.fpp.1, &mut self.frames.1),
            };
            loop {
                stack.dispatch(Instant::from_micros(now));
                let ring = stack.tx_ring();
                let full = ring.is_full();
                while let Some(f) = ring.pop() {
                    tx.push_back(f);
                    *count += 1;
                }
                if fpp.is_some() || !full {
                    break;
                }
            }
        }

        fn in_flight(&self) -> usize {
            self.ab.len() + self.ba.len()
        }

        fn poll_at(&mut self, _now: u64) -> Option<u64> {
            let a = self.a.poll_at().map(|t| t.total_micros());
            let b = self.b.poll_at().map(|t| t.total_micros());
            a.into_iter().chain(b).min()
        }

        fn frames(&self) -> (u64, u64) {
            self.frames
        }

        fn mss(&mut self) -> usize {
            self.a.tcp_info(self.client).map_or(0, |i| i.eff_mss as usize)
        }

        fn describe(&self) -> String {
            let (ca, cb) = (self.a.counters(), self.b.counters());
            let info = self.a.tcp_info(self.client).ok();
            format!(
                "sender: retransmitted {} tx_dropped {} eff_mss {:?} timestamps {:?}; receiver: fast-path data {} slow path {} tx_dropped {} aggregates {} run frames {}",
                ca.retransmitted,
                ca.tx_dropped,
                info.map(|i| i.eff_mss),
                info.map(|i| i.timestamps),
                cb.fast_path_data,
                cb.slow_path,
                cb.tx_dropped,
                cb.lro_aggregates,
                cb.lro_run_frames
            )
        }
    }

    impl Ack {
        /// Frames a stack could not put in its transmit ring (the ring holds one poll's
        /// frames, so a stack that sends more from ingress alone would lose some).
        pub fn dropped(&self) -> u64 {
            self.a.counters().tx_dropped + self.b.counters().tx_dropped
        }
    }
}

// ---------------------------------------------------------------------------------------
// smoltcp.

mod smol {
    use super::*;
    use smoltcp::iface::{Config, Interface, PollIngressSingleResult, PollResult, SocketHandle, SocketSet};
    use smoltcp::phy::{self, ChecksumCapabilities, Device, DeviceCapabilities, Medium};
    use smoltcp::socket::tcp;
    use smoltcp::time::Instant;
    use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

    /// A frame: a buffer of the largest frame size and the length used.
    type Frame = (Vec<u8>, usize);

    /// The queues between the two endpoints, and the free buffers (allocated as needed,
    /// then reused, as a driver's ring).
    struct Wire {
        /// `q[0]`: from the sender to the receiver; `q[1]`: back.
        q: [VecDeque<Frame>; 2],
        free: Vec<Vec<u8>>,
        frame_size: usize,
        frames: [u64; 2],
    }

    /// One endpoint's device: sends into `q[side]`, receives from `q[1 - side]`, at most
    /// `rx_left` / `tx_left` frames in this poll.
    struct Dev {
        wire: Rc<RefCell<Wire>>,
        side: usize,
        rx_left: usize,
        tx_left: usize,
        caps: DeviceCapabilities,
    }

    struct Rx<'a> {
        frame: Frame,
        wire: &'a RefCell<Wire>,
    }

    struct Tx<'a> {
        wire: &'a RefCell<Wire>,
        side: usize,
    }

    impl phy::RxToken for Rx<'_> {
        fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
            let (buf, len) = self.frame;
            let r = f(&buf[..len]);
            self.wire.borrow_mut().free.push(buf);
            r
        }
    }

    impl phy::TxToken for Tx<'_> {
        fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
            let mut buf = {
                let mut w = self.wire.borrow_mut();
                let size = w.frame_size;
                w.free.pop().unwrap_or_else(|| vec![0; size])
            };
            let r = f(&mut buf[..len]);
            let mut w = self.wire.borrow_mut();
            w.q[self.side].push_back((buf, len));
            w.frames[self.side] += 1;
            r
        }
    }

    impl Device for Dev {
        type RxToken<'a> = Rx<'a>;
        type TxToken<'a> = Tx<'a>;

        fn receive(&mut self, _t: Instant) -> Option<(Rx<'_>, Tx<'_>)> {
            if self.rx_left == 0 {
                return None;
            }
            let frame = self.wire.borrow_mut().q[1 - self.side].pop_front()?;
            self.rx_left -= 1;
            // A reply sent while processing the frame does not count against the budget.
            Some((Rx { frame, wire: &self.wire }, Tx { wire: &self.wire, side: self.side }))
        }

        fn transmit(&mut self, _t: Instant) -> Option<Tx<'_>> {
            if self.tx_left == 0 {
                return None;
            }
            self.tx_left -= 1;
            Some(Tx { wire: &self.wire, side: self.side })
        }

        fn capabilities(&self) -> DeviceCapabilities {
            self.caps.clone()
        }
    }

    struct Endpoint {
        iface: Interface,
        sockets: SocketSet<'static>,
        sock: SocketHandle,
        dev: Dev,
        fpp: Fpp,
    }

    impl Endpoint {
        fn new(wire: &Rc<RefCell<Wire>>, side: usize, cell: &Cell, fpp: Fpp, now: u64) -> Endpoint {
            let mut caps = DeviceCapabilities::default();
            caps.medium = Medium::Ethernet;
            caps.max_transmission_unit = cell.mtu + 14;
            caps.checksum =
                if cell.checksum { ChecksumCapabilities::default() } else { ChecksumCapabilities::ignored() };
            let mut dev = Dev { wire: wire.clone(), side, rx_left: 0, tx_left: 0, caps };
            let mac = EthernetAddress([0x02, 0, 0, 0, 0, side as u8 + 1]);
            let mut config = Config::new(HardwareAddress::Ethernet(mac));
            config.random_seed = side as u64 + 1;
            let mut iface = Interface::new(config, &mut dev, Instant::from_micros(now as i64));
            iface.update_ip_addrs(|a| {
                a.push(IpCidr::new(IpAddress::v4(10, 0, 0, side as u8 + 1), 24)).unwrap();
            });
            let rx = tcp::SocketBuffer::new(vec![0u8; 256 * 1024]);
            let tx = tcp::SocketBuffer::new(vec![0u8; 256 * 1024]);
            let mut s = tcp::Socket::new(rx, tx);
            s.set_nagle_enabled(false);
            s.set_congestion_control(tcp::CongestionControl::Reno);
            let mut sockets = SocketSet::new(Vec::new());
            let sock = sockets.add(s);
            Endpoint { iface, sockets, sock, dev, fpp }
        }

        fn socket(&mut self) -> &mut tcp::Socket<'static> {
            self.sockets.get_mut::<tcp::Socket>(self.sock)
        }

        #[inline]
        fn ingress(&mut self, now: u64) {
            self.dev.rx_left = self.fpp.unwrap_or(usize::MAX);
            let t = Instant::from_micros(now as i64);
            while self.iface.poll_ingress_single(t, &mut self.dev, &mut self.sockets) != PollIngressSingleResult::None {
            }
        }

        #[inline]
        fn egress(&mut self, now: u64) {
            self.dev.tx_left = self.fpp.unwrap_or(usize::MAX);
            let t = Instant::from_micros(now as i64);
            while self.iface.poll_egress(t, &mut self.dev, &mut self.sockets) == PollResult::SocketStateChanged {}
        }

        fn poll_at(&mut self, now: u64) -> Option<u64> {
            self.iface.poll_at(Instant::from_micros(now as i64), &self.sockets).map(|t| t.total_micros() as u64)
        }
    }

    pub struct Smol {
        a: Endpoint,
        b: Endpoint,
        wire: Rc<RefCell<Wire>>,
    }

    impl Smol {
        /// Two stacks, connected (the handshake is not timed).
        pub fn new(cell: &Cell, now: &mut u64) -> Smol {
            let wire = Rc::new(RefCell::new(Wire {
                q: [VecDeque::new(), VecDeque::new()],
                free: Vec::new(),
                frame_size: cell.mtu + 14,
                frames: [0; 2],
            }));
            let a = Endpoint::new(&wire, 0, cell, cell.tx_fpp, *now);
            let b = Endpoint::new(&wire, 1, cell, cell.rx_fpp, *now);
            let mut p = Smol { a, b, wire };
            p.b.socket().listen(80).expect("listen");
            let cx = p.a.iface.context();
            p.a.sockets
                .get_mut::<tcp::Socket>(p.a.sock)
                .connect(cx, (IpAddress::v4(10, 0, 0, 2), 80), 49152)
                .expect("connect");
            settle(&mut p, now, |p| p.a.socket().may_send() && p.b.socket().may_recv());
            p
        }
    }

    impl Peers for Smol {
        #[inline]
        fn ingress(&mut self, end: End, now: u64) {
            match end {
                End::Sender => self.a.ingress(now),
                End::Receiver => self.b.ingress(now),
            }
        }

        #[inline]
        fn send(&mut self, data: &[u8]) -> usize {
            self.a.socket().send_slice(data).expect("smoltcp send")
        }

        #[inline]
        fn recv(&mut self, buf: &mut [u8]) -> usize {
            self.b.socket().recv_slice(buf).expect("smoltcp recv")
        }

        #[inline]
        fn egress(&mut self, end: End, now: u64) {
            match end {
                End::Sender => self.a.egress(now),
                End::Receiver => self.b.egress(now),
            }
        }

        fn in_flight(&self) -> usize {
            let w = self.wire.borrow();
            w.q[0].len() + w.q[1].len()
        }

        fn poll_at(&mut self, now: u64) -> Option<u64> {
            let a = self.a.poll_at(now);
            let b = self.b.poll_at(now);
            a.into_iter().chain(b).min()
        }

        fn frames(&self) -> (u64, u64) {
            let w = self.wire.borrow();
            (w.frames[0], w.frames[1])
        }

        /// IP MTU - 40: smoltcp sends no TCP options on data segments unless timestamps
        /// are on, and it has no accessor for its send MSS.
        fn mss(&mut self) -> usize {
            let ts = if self.a.socket().timestamp_enabled() { 12 } else { 0 };
            self.a.dev.caps.max_transmission_unit - 14 - 40 - ts
        }

        fn describe(&self) -> String {
            "smoltcp keeps no counters".to_string()
        }
    }
}

// ---------------------------------------------------------------------------------------
// Runs.

fn run_one(which: Which, cell: &Cell, pat: &Pattern, bytes: u64) -> Outcome {
    let mut now = START_US;
    match which {
        Which::Ackclock => {
            let mut p = ack::Ack::new(cell, &mut now);
            let o = transfer(&mut p, "ackclock", pat, bytes, &mut now);
            assert_eq!(p.dropped(), 0, "ackclock dropped frames at a full transmit ring: {}", p.describe());
            o
        }
        Which::Smoltcp => {
            let mut p = smol::Smol::new(cell, &mut now);
            transfer(&mut p, "smoltcp", pat, bytes, &mut now)
        }
    }
}

/// Linux over loopback: `iperf3 -c 127.0.0.1 -n bytes` against a one-off server, with the
/// bench's settings (NewReno, Nagle off, 256 KiB socket buffers). Gbit/s received per
/// wall-clock time and per CPU time (both iperf3 processes' user and system time as iperf3
/// reports them; the kernel's work for loopback is mostly done in their system time).
fn iperf3(bytes: u64) -> Result<(f64, f64), String> {
    let port = (40_000 + std::process::id() % 20_000).to_string();
    let mut server = Command::new("iperf3")
        .args(["-s", "-1", "-B", "127.0.0.1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3 -s: {e}"))?;
    let mut last = String::new();
    let mut result = Err(String::new());
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let out = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "-n", &bytes.to_string(), "-C", "reno", "-N", "-w", "256K", "-J"])
            .output()
            .map_err(|e| format!("iperf3 -c: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            let bps = json_number_after(&text, "\"sum_received\"", "\"bits_per_second\"");
            let host = json_number_after(&text, "\"cpu_utilization_percent\"", "\"host_total\"");
            let remote = json_number_after(&text, "\"cpu_utilization_percent\"", "\"remote_total\"");
            result = match (bps, host, remote) {
                (Some(b), Some(h), Some(r)) if h + r > 0.0 => Ok((b / 1e9, b / 1e9 / ((h + r) / 100.0))),
                _ => Err("no sum_received or cpu_utilization_percent in iperf3's output".to_string()),
            };
            break;
        }
        last = text;
    }
    let _ = server.kill();
    let _ = server.wait();
    result.map_err(|e| if e.is_empty() { format!("iperf3 -c failed: {}", last.trim()) } else { e })
}

/// The number after `key`, after the first `section` in a JSON text.
fn json_number_after(text: &str, section: &str, key: &str) -> Option<f64> {
    let s = &text[text.find(section)?..];
    let s = &s[s.find(key)? + key.len()..];
    let s = s.trim_start().strip_prefix(':')?.trim_start();
    let end = s.find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))).unwrap_or(s.len());
    s[..end].parse().ok()
}

fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

struct CellResult {
    cell: Cell,
    ack: Vec<Outcome>,
    smol: Vec<Outcome>,
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("peers: {e}");
            std::process::exit(2);
        }
    };
    let pat = Pattern::new();
    let cells: Vec<Cell> = o
        .cells
        .iter()
        .flat_map(|&(mtu, rx_fpp, tx_fpp)| {
            o.checksums.iter().map(move |&checksum| Cell { mtu, rx_fpp, tx_fpp, checksum })
        })
        .collect();

    if let Some(which) = o.callgrind {
        let cell = cells[0];
        let r = run_one(which, &cell, &pat, o.bytes);
        // One line for scripts/callgrind-peers.
        println!(
            "stack={} cell=\"{}\" bytes={} data_segments={} acks={} mss={} rounds={} stalls={} virtual_us={} secs={:.3}",
            which.name(),
            cell.label(),
            o.bytes,
            r.data_frames,
            r.ack_frames,
            r.mss,
            r.rounds,
            r.stalls,
            r.virtual_us,
            r.secs
        );
        return;
    }

    let iperf = o.iperf3 && on_path("iperf3");
    if !o.json {
        println!(
            "peers: {} MiB per transfer, median of {} runs interleaved between the stacks, one thread",
            o.bytes >> 20,
            o.runs
        );
    }
    let mut results: Vec<CellResult> =
        cells.iter().map(|&cell| CellResult { cell, ack: Vec::new(), smol: Vec::new() }).collect();
    let mut loopback: Vec<f64> = Vec::new();
    let mut loopback_wall: Vec<f64> = Vec::new();
    let mut loopback_err = None;
    for run in 0..o.runs {
        for r in results.iter_mut() {
            // Alternate which stack goes first, so neither always runs on a warm cache.
            let order =
                if run % 2 == 0 { [Which::Ackclock, Which::Smoltcp] } else { [Which::Smoltcp, Which::Ackclock] };
            for which in order {
                let out = run_one(which, &r.cell, &pat, o.bytes);
                if !o.json {
                    eprintln!(
                        "  run {} {:<8} {:<28} {:7.2} Gbit/s ({:6.2} wall)  {} data frames, {} ACKs, {} rounds, {} stalls",
                        run + 1,
                        which.name(),
                        r.cell.label(),
                        out.gbps(o.bytes),
                        out.wall_gbps(o.bytes),
                        out.data_frames,
                        out.ack_frames,
                        out.rounds,
                        out.stalls
                    );
                }
                match which {
                    Which::Ackclock => r.ack.push(out),
                    Which::Smoltcp => r.smol.push(out),
                }
            }
        }
        if iperf {
            match iperf3(o.bytes) {
                Ok((wall, cpu)) => {
                    if !o.json {
                        eprintln!("  run {} Linux loopback iperf3 {cpu:7.2} Gbit/s ({wall:6.2} wall)", run + 1);
                    }
                    loopback.push(cpu);
                    loopback_wall.push(wall);
                }
                Err(e) => loopback_err = Some(e),
            }
        }
    }

    let bytes = o.bytes;
    let gbps = |v: &[Outcome]| v.iter().map(|x| x.gbps(bytes)).collect::<Vec<_>>();
    let wall = |v: &[Outcome]| v.iter().map(|x| x.wall_gbps(bytes)).collect::<Vec<_>>();
    let loopback_note = if !o.iperf3 {
        "not run (--no-iperf3)".to_string()
    } else if !iperf {
        "skipped (iperf3 not on PATH)".to_string()
    } else if loopback.is_empty() {
        format!("failed: {}", loopback_err.unwrap_or_default())
    } else {
        format!(
            "{:.1} Gbit/s per CPU time of both processes, {:.1} Gbit/s per wall-clock time (medians of {})",
            median(&loopback),
            median(&loopback_wall),
            loopback.len()
        )
    };

    if o.json {
        let mut s = String::new();
        let list = |v: &[f64]| v.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(", ");
        let _ =
            write!(
            s,
            "{{\n  \"bytes\": {bytes},\n  \"runs\": {},\n  \"smoltcp\": \"0.14\",\n  \"gbps\": \"bytes per CPU time of the thread; wall_gbps per wall-clock time\",\n  \"cells\": [",
            o.runs
        );
        for (i, r) in results.iter().enumerate() {
            let (a, m) = (gbps(&r.ack), gbps(&r.smol));
            let (aw, mw) = (wall(&r.ack), wall(&r.smol));
            let stalls = |v: &[Outcome]| v.iter().map(|x| x.stalls).sum::<u64>();
            let segs = |v: &[Outcome]| v.first().map_or(0, |x| x.data_frames);
            let acks = |v: &[Outcome]| v.first().map_or(0, |x| x.ack_frames);
            let _ = write!(
                s,
                "{}\n    {{\"mtu\": {}, \"receiver_fpp\": \"{}\", \"sender_fpp\": \"{}\", \"checksum\": {}, \
                 \"ackclock_gbps\": [{}], \"smoltcp_gbps\": [{}], \"ackclock_median\": {:.3}, \"smoltcp_median\": {:.3}, \
                 \"ratio\": {:.3}, \"ackclock_wall_gbps\": [{}], \"smoltcp_wall_gbps\": [{}], \"wall_ratio\": {:.3}, \
                 \"ackclock_mss\": {}, \"smoltcp_mss\": {}, \"ackclock_data_frames\": {}, \"ackclock_ack_frames\": {}, \"smoltcp_data_frames\": {}, \
                 \"smoltcp_ack_frames\": {}, \"ackclock_stalls\": {}, \"smoltcp_stalls\": {}}}",
                if i == 0 { "" } else { "," },
                r.cell.mtu,
                fpp_str(r.cell.rx_fpp),
                fpp_str(r.cell.tx_fpp),
                r.cell.checksum,
                list(&a),
                list(&m),
                median(&a),
                median(&m),
                median(&a) / median(&m),
                list(&aw),
                list(&mw),
                median(&aw) / median(&mw),
                r.ack.first().map_or(0, |x| x.mss),
                r.smol.first().map_or(0, |x| x.mss),
                segs(&r.ack),
                acks(&r.ack),
                segs(&r.smol),
                acks(&r.smol),
                stalls(&r.ack),
                stalls(&r.smol)
            );
        }
        let lb = if loopback.is_empty() { "null".to_string() } else { format!("[{}]", list(&loopback)) };
        let lbw = if loopback.is_empty() { "null".to_string() } else { format!("[{}]", list(&loopback_wall)) };
        let _ = write!(
            s,
            "\n  ],\n  \"linux_loopback_iperf3_gbps\": {lb},\n  \"linux_loopback_iperf3_wall_gbps\": {lbw},\n  \"linux_loopback_iperf3\": \"{loopback_note}\"\n}}"
        );
        println!("{s}");
        return;
    }

    println!();
    println!("Gbit/s per CPU time of the thread (the ratio per wall-clock time beside it):");
    println!();
    println!("| MTU | receiver's / sender's frames per poll | checksums | smoltcp 0.14 Gbit/s | ackclock Gbit/s | ratio | ratio, wall clock | ACKs per 100 data segments (smoltcp / ackclock) |");
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    let mut stalled = Vec::new();
    for r in &results {
        let (a, m) = (median(&gbps(&r.ack)), median(&gbps(&r.smol)));
        let (aw, mw) = (median(&wall(&r.ack)), median(&wall(&r.smol)));
        let acks = |v: &[Outcome]| {
            let (d, k) = v.iter().fold((0, 0), |(d, k), x| (d + x.data_frames, k + x.ack_frames));
            100.0 * k as f64 / d as f64
        };
        println!(
            "| {} | {} / {} | {} | {:.1} | {:.1} | {:.2}x | {:.2}x | {:.0} / {:.0} |",
            r.cell.mtu,
            fpp_str(r.cell.rx_fpp),
            fpp_str(r.cell.tx_fpp),
            if r.cell.checksum { "on" } else { "off" },
            m,
            a,
            a / m,
            aw / mw,
            acks(&r.smol),
            acks(&r.ack)
        );
        for (name, v) in [("ackclock", &r.ack), ("smoltcp", &r.smol)] {
            let n: u64 = v.iter().map(|x| x.stalls).sum();
            if n > 0 {
                stalled.push(format!("{name} at {}: {n} timer waits over {} runs", r.cell.label(), v.len()));
            }
        }
    }
    println!();
    println!("Linux loopback iperf3 (kernel stack, two processes, 127.0.0.1, MTU 65536): {loopback_note}");
    if stalled.is_empty() {
        println!("No transfer waited on a timer (no stalls).");
    } else {
        println!("Stalls (virtual time jumped to a timer; neither CPU nor wall-clock time shows the wait):");
        for s in stalled {
            println!("  {s}");
        }
    }
}
