//! `ackclock relay`: TCP connections that arrive on a TAP, relayed to a host-kernel socket
//! (tun2socks-style).
//!
//! With `--listen any` the stack takes TCP connections to any address and port that the
//! host routes into the TAP (`InterfaceConfig::any_destination` and `tcp_listen_any`) and
//! answers from the address each was dialled on, as tun2socks does; the report names each
//! connection's original destination. Otherwise it listens on its own address, on the
//! listed ports.
//!
//! Every connection the stack accepts gets a non-blocking
//! `std::net::TcpStream` to `--to HOST:PORT`, and bytes move both ways through two bounded
//! buffers (`--buffer`, per direction): a side is read only while the buffer towards the
//! other side has room, so a slow reader stalls its writer (the stack's receive window
//! closes, or the host socket's buffer fills) instead of growing memory. Half-close travels
//! both ways: the peer's FIN becomes `shutdown(Write)` on the host socket once its buffered
//! bytes are written, and the host's EOF becomes the stack's FIN. A reset on either side
//! resets the other (RST from the stack; `SO_LINGER` 0 on the host socket).
//!
//! One thread, one loop: `stack.receive`, accept, move bytes, `stack.transmit`, then
//! `ppoll` on the TAP and every host socket that has something to do, until the stack's
//! (and the impairment's) next timer. SIGINT/SIGTERM end it: open connections are reset
//! both ways, and byte counts, per connection and in total, are printed (`--json`: one JSON
//! object as the last line of stdout).
//!
//! This module also holds what `fetch` and `serve` share with it: the TAP link with its
//! impairment and capture wrappers ([`LinkArgs`], [`Link`]) and the `--impair` syntax
//! ([`ImpairSpec`]).

use ackclock::buf::{Pool, PoolConfig, DEFAULT_HEADROOM};
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{
    Batch, Capabilities, Capture, Device, DeviceStats, ImpairStats, Impaired, Impairment, PcapWriter, Resolution, Tap,
    TapConfig, TapMode,
};
use ackclock::sim::{Loss, Reorder};
use ackclock::time::{Duration, Instant};
use ackclock::{Error, ListenerHandle, Shutdown, Stack, StackConfig, TcpHandle};
use clap::Args;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

// ---------------------------------------------------------------------------------------
// What relay, fetch and serve share: addresses, signals, the TAP link.

/// An IPv4 address with a prefix length.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cidr {
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

impl FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Cidr, String> {
        let (a, p) = s.split_once('/').ok_or_else(|| format!("{s}: expected ADDRESS/PREFIX"))?;
        let addr = a.parse().map_err(|e| format!("{a}: {e}"))?;
        let prefix = p.parse().ok().filter(|&p: &u8| p <= 32).ok_or_else(|| format!("{p}: bad prefix length"))?;
        Ok(Cidr { addr, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// SIGINT and SIGTERM set [`stopping`].
pub(crate) fn install_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
}

pub(crate) fn stopping() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Longest sleep, so a signal that lands just before `ppoll` is seen soon anyway.
const MAX_WAIT: Duration = Duration::from_millis(200);

fn ip(netns: Option<&str>, args: &[&str]) -> Result<(), String> {
    let mut cmd = Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    let out = cmd.args(args).output().map_err(|e| format!("ip: {e}"))?;
    if !out.status.success() {
        return Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(())
}

fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: writes at most 8 bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    }
}

/// `--impair SPEC`: comma-separated `key=value`, applied to both directions of the TAP.
/// `loss=P` (Bernoulli), `delay=D`, `reorder=P:D` (that share of frames delayed `D` more),
/// `dup=P`, `seed=N`, `queue=N` (frames held per direction). `P` is a fraction or a
/// percentage (`0.02`, `2%`); `D` ends in `s`, `ms` or `us`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ImpairSpec {
    pub impairment: Impairment,
    pub seed: Option<u64>,
    pub queue: Option<usize>,
}

fn parse_probability(s: &str) -> Result<f64, String> {
    let p = match s.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map(|v| v / 100.0),
        None => s.parse::<f64>(),
    }
    .map_err(|_| format!("{s}: expected a probability (0.02 or 2%)"))?;
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{s}: probability out of range"))
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s}: expected a duration (20ms, 500us, 1s)");
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit() && c != '.').map_or((s, ""), |i| s.split_at(i));
    let v: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => v,
        "ms" => v / 1e3,
        "us" => v / 1e6,
        _ => return Err(bad()),
    };
    if !(0.0..=3600.0).contains(&secs) {
        return Err(bad());
    }
    Ok(Duration::from_nanos((secs * 1e9).round() as u64))
}

impl FromStr for ImpairSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<ImpairSpec, String> {
        let mut spec = ImpairSpec { impairment: Impairment::default(), seed: None, queue: None };
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| format!("{item}: expected KEY=VALUE"))?;
            let imp = &mut spec.impairment;
            match k.trim() {
                "loss" => imp.loss = Loss::Bernoulli(parse_probability(v)?),
                "delay" => imp.delay = parse_duration(v)?,
                "dup" | "duplicate" => imp.duplicate = parse_probability(v)?,
                "reorder" => {
                    let (p, d) = v.split_once(':').ok_or_else(|| format!("{v}: expected reorder=P:DELAY"))?;
                    imp.reorder = Some(Reorder { probability: parse_probability(p)?, extra_delay: parse_duration(d)? });
                }
                "seed" => spec.seed = Some(v.parse().map_err(|_| format!("{v}: bad seed"))?),
                "queue" => spec.queue = Some(v.parse().map_err(|_| format!("{v}: bad queue length"))?),
                other => return Err(format!("{other}: unknown impairment (loss, delay, reorder, dup, seed, queue)")),
            }
        }
        Ok(spec)
    }
}

/// Wrap `tap` in the impairment of `spec` (a clean pass-through without one). `rx_buffers`
/// is the size of the TAP's receive pool: held received frames keep its buffers, so at most
/// half of them wait unless `queue=` says otherwise.
pub(crate) fn impaired(tap: Tap, spec: Option<&ImpairSpec>, rx_buffers: usize) -> Impaired<Tap> {
    let imp = spec.map_or(Impairment::default(), |s| s.impairment);
    let seed = spec.and_then(|s| s.seed).unwrap_or_else(random_seed);
    let queue = spec.and_then(|s| s.queue).unwrap_or(rx_buffers / 2);
    let dev = Impaired::new(tap, imp, imp, seed, queue);
    // Impair wire segments, not 64 KB offload frames (both ways, queue-deep each).
    if spec.is_some() {
        dev.cut_offload(2 * queue + 1024)
    } else {
        dev
    }
}

/// Let the last frames out at exit (the resets of open connections), including those an
/// impairment still holds back for its delay; at most a second.
fn flush_at_exit(stack: &mut Stack, dev: &mut impl Device, now: impl Fn() -> Instant) {
    let end = now() + Duration::from_secs(1);
    loop {
        stack.transmit(now(), dev);
        match dev.poll_at() {
            Some(t) if now() < end => std::thread::sleep(t.saturating_duration_since(now()).min(MAX_WAIT)),
            _ => break,
        }
    }
}

/// `tx ... rx ...` counters of an impairment, for the exit report.
pub(crate) fn impair_report(tx: ImpairStats, rx: ImpairStats) -> String {
    let one = |s: ImpairStats| {
        format!(
            "{} passed, {} lost, {} reordered, {} duplicated, {} overflow",
            s.passed, s.lost, s.reordered, s.duplicated, s.overflow
        )
    };
    format!("impairment: tx {}; rx {}", one(tx), one(rx))
}

/// The TAP options relay, fetch and serve share.
#[derive(Args)]
pub(crate) struct LinkArgs {
    /// TAP interface to open, created if it does not exist.
    #[arg(long)]
    pub tap: String,
    /// The stack's address and prefix length, e.g. 10.0.0.2/24.
    #[arg(long)]
    pub addr: Cidr,
    /// Give the kernel side of the TAP this address (e.g. 10.0.0.1/24) and bring it up.
    #[arg(long)]
    pub host_addr: Option<Cidr>,
    /// Move the TAP into this network namespace first (its kernel side then lives there).
    #[arg(long)]
    pub netns: Option<String>,
    /// Plain TAP: no virtio-net header, no checksum or segmentation offload.
    #[arg(long)]
    pub plain: bool,
    /// Impair the TAP both ways: e.g. loss=2%,delay=20ms,reorder=5%:10ms,dup=1%,seed=7.
    #[arg(long, value_name = "SPEC")]
    pub impair: Option<ImpairSpec>,
    /// Record the frames the stack sends and receives in this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// The stack's default gateway: the next hop for addresses outside --addr's prefix.
    #[arg(long, value_name = "ADDR")]
    pub gateway: Option<Ipv4Addr>,
}

/// `--max-connections N`: a connection count of at least 1.
pub(crate) fn parse_max_connections(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// The device under the stack: the TAP, impaired, and perhaps recorded.
pub(crate) enum LinkDev {
    Bare(Impaired<Tap>),
    Recorded(Capture<Impaired<Tap>, BufWriter<File>>),
}

/// The stack's pool for a TAP link. The send buffers of many connections live in it (256 KiB
/// each by default). With segmentation offload its buffers hold a 64 KiB unit each, so the
/// kernel gets one frame for up to 45 segments; untouched buffers cost address space only
/// (the pool is one zeroed mapping, and its free list hands out the most recently freed).
pub fn stack_pool(caps: &Capabilities) -> PoolConfig {
    if caps.tso_max > 0 {
        PoolConfig { buffers: 8 * 1024, buffer_size: 64 * 1024 + DEFAULT_HEADROOM, ..PoolConfig::default() }
    } else {
        PoolConfig { buffers: 32 * 1024, ..PoolConfig::default() }
    }
}

impl LinkDev {
    fn impaired(&self) -> &Impaired<Tap> {
        match self {
            LinkDev::Bare(d) => d,
            LinkDev::Recorded(c) => c.get_ref(),
        }
    }

    fn impaired_mut(&mut self) -> &mut Impaired<Tap> {
        match self {
            LinkDev::Bare(d) => d,
            LinkDev::Recorded(c) => c.get_mut(),
        }
    }
}

impl Device for LinkDev {
    fn capabilities(&self) -> Capabilities {
        self.impaired().capabilities()
    }
    fn receive(&mut self, now: Instant, rx: &mut Batch) -> usize {
        match self {
            LinkDev::Bare(d) => d.receive(now, rx),
            LinkDev::Recorded(c) => c.receive(now, rx),
        }
    }
    fn transmit(&mut self, now: Instant, tx: &mut Batch) -> usize {
        match self {
            LinkDev::Bare(d) => d.transmit(now, tx),
            LinkDev::Recorded(c) => c.transmit(now, tx),
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        self.impaired().poll_at()
    }
    fn stats(&self) -> DeviceStats {
        self.impaired().stats()
    }
}

/// The clock a stack runs on: its epoch is one second before `start`, so no timestamp is
/// zero. `Copy`, so it can be read while the link's device is borrowed.
#[derive(Clone, Copy)]
struct Clock {
    start: std::time::Instant,
}

impl Clock {
    fn now(self) -> Instant {
        Instant::from_secs(1) + self.start.elapsed()
    }
}

/// An open TAP, set up as [`LinkArgs`] asks, with the clock the stack runs on.
pub(crate) struct Link {
    pub dev: LinkDev,
    pub name: String,
    clock: Clock,
    impair: bool,
    gateway: Option<Ipv4Addr>,
}

impl Link {
    pub fn open(args: &LinkArgs) -> Result<Link, String> {
        let mode = if args.plain { TapMode::Plain } else { TapMode::Offload };
        let tap_config = TapConfig { mode, mtu: 1500 };
        // Offload mode: 64 KiB buffers, touched only when used.
        let rx_buffers = if args.plain { 4096 } else { 1024 };
        let rx_pool = Pool::new(Tap::pool_config(&tap_config, rx_buffers)).map_err(|e| format!("receive pool: {e}"))?;
        let tap = Tap::open(&args.tap, tap_config, rx_pool).map_err(|e| format!("TAP {}: {e}", args.tap))?;
        let name = tap.name().to_string();
        let netns = args.netns.as_deref();
        if let Some(ns) = netns {
            ip(None, &["link", "set", &name, "netns", ns])?;
        }
        if let Some(host) = args.host_addr {
            ip(netns, &["addr", "replace", &host.to_string(), "dev", &name])?;
            ip(netns, &["link", "set", &name, "up"])?;
        }
        let dev = impaired(tap, args.impair.as_ref(), rx_buffers);
        let dev = match &args.pcap {
            None => LinkDev::Bare(dev),
            Some(path) => {
                let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
                let pcap = PcapWriter::new(BufWriter::new(file), Resolution::Micros)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                LinkDev::Recorded(Capture::new(dev, pcap))
            }
        };
        Ok(Link {
            dev,
            name,
            clock: Clock { start: std::time::Instant::now() },
            impair: args.impair.is_some(),
            gateway: args.gateway,
        })
    }

    /// The stack's clock: its epoch is one second before the link opened, so no timestamp
    /// is zero.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Let the last frames out at exit (the resets of open connections), including those an
    /// impairment still holds back for its delay; at most a second.
    pub fn flush_at_exit(&mut self, stack: &mut Stack) {
        let clock = self.clock;
        flush_at_exit(stack, &mut self.dev, move || clock.now());
    }

    /// A stack on this link; with `any_destination`, one that takes connections to any
    /// address (see [`InterfaceConfig::any_destination`]); `max_connections` overrides the
    /// library's default.
    pub fn stack(&self, addr: Cidr, any_destination: bool, max_connections: Option<usize>) -> Result<Stack, String> {
        let mut config = StackConfig::new(InterfaceConfig::new(addr.addr, addr.prefix));
        config.iface.any_destination = any_destination;
        if let Some(n) = max_connections {
            config.tcp.max_connections = n;
        }
        config.iface.gateway = self.gateway;
        let caps = self.dev.capabilities();
        config.pool = stack_pool(&caps);
        Stack::new(config, caps, self.now()).map_err(|e| format!("stack: {e}"))
    }

    pub fn tap(&self) -> &Tap {
        self.dev.impaired().inner()
    }

    /// Counters of the impairment (tx, rx); all pass-through without --impair.
    pub fn impair_stats(&self) -> (ImpairStats, ImpairStats) {
        self.dev.impaired().impair_stats()
    }

    pub fn mode(&self) -> &'static str {
        match self.tap().config().mode {
            TapMode::Plain => "plain",
            TapMode::Offload => "offload",
        }
    }

    /// How long to sleep at most: until the stack's or the impairment's next deadline.
    pub fn timeout(&self, stack: &Stack) -> Duration {
        let next = [stack.poll_at(), self.dev.poll_at()].into_iter().flatten().min();
        next.map_or(MAX_WAIT, |t| t.saturating_duration_since(self.now()).min(MAX_WAIT))
    }

    /// Report (once) the last I/O error of the TAP or of the capture.
    pub fn report_errors(&mut self, who: &str) {
        if let Some(e) = self.dev.impaired_mut().inner_mut().take_error() {
            eprintln!("{who}: {}: {e}", self.name);
        }
        if let LinkDev::Recorded(c) = &mut self.dev {
            if let Some(e) = c.take_error() {
                eprintln!("{who}: pcap: {e}");
            }
        }
    }

    /// Counters of the TAP (and of the impairment, if any).
    pub fn summary(&self) -> String {
        let d = self.dev.stats();
        let c = self.tap().counters();
        let mut s = format!(
            "rx {} frames {} bytes ({} GSO, {} partial csum), tx {} frames {} bytes, {} dropped",
            d.rx_frames,
            d.rx_bytes,
            c.rx_gso,
            c.rx_csum_partial,
            d.tx_frames,
            d.tx_bytes,
            d.tx_dropped + d.rx_dropped
        );
        if self.impair {
            let (tx, rx) = self.impair_stats();
            s += "; ";
            s += &impair_report(tx, rx);
        }
        s
    }

    /// Flush the capture, if any.
    pub fn finish(self) -> Result<(), String> {
        if let LinkDev::Recorded(c) = self.dev {
            let (_, pcap) = c.into_parts();
            pcap.into_inner().flush().map_err(|e| format!("pcap: {e}"))?;
        }
        Ok(())
    }
}

/// `ppoll` on `fds` for at most `timeout`; a signal ends it early.
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<()> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` is a valid slice of pollfds, `ts` a valid timespec, no signal mask.
    let r = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, core::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The relay.

/// Relay TCP connections arriving on a TAP to a host socket (tun2socks-style).
#[derive(Args)]
pub struct RelayArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Where to relay to (a host-kernel TCP connection), e.g. 127.0.0.1:8000.
    #[arg(long, value_name = "HOST:PORT")]
    to: String,
    /// Ports to accept connections on (the stack's address), e.g. 80,443,8000-8010; or `any`:
    /// every connection routed to the TAP, whatever its destination address and port.
    #[arg(long, value_name = "PORTS|any", default_value = "80")]
    listen: PortList,
    /// Buffer per direction and connection, KiB.
    #[arg(long, value_name = "KIB", default_value_t = 256)]
    buffer: usize,
    /// Connections the stack holds at most (default 4096).
    #[arg(long, value_name = "N", value_parser = parse_max_connections)]
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

/// A byte ring: filled from one side, drained to the other.
struct Ring {
    buf: Box<[u8]>,
    head: usize,
    len: usize,
    /// Bytes that went through.
    total: u64,
}

impl Ring {
    fn new(size: usize) -> Ring {
        Ring { buf: vec![0; size].into_boxed_slice(), head: 0, len: 0, total: 0 }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn is_full(&self) -> bool {
        self.len == self.buf.len()
    }

    /// The oldest contiguous bytes.
    fn data(&self) -> &[u8] {
        let end = (self.head + self.len).min(self.buf.len());
        &self.buf[self.head..end]
    }

    fn consume(&mut self, n: usize) {
        self.len -= n;
        self.total += n as u64;
        self.head = if self.len == 0 { 0 } else { (self.head + n) % self.buf.len() };
    }

    /// Free contiguous room after the data.
    fn space(&mut self) -> &mut [u8] {
        let cap = self.buf.len();
        if self.len == cap {
            return &mut [];
        }
        let tail = (self.head + self.len) % cap;
        let end = if tail >= self.head { cap } else { self.head };
        &mut self.buf[tail..end]
    }

    fn commit(&mut self, n: usize) {
        self.len += n;
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
    /// Peer (TAP) to host.
    up: Ring,
    /// Host to peer (TAP).
    down: Ring,
    /// The peer's FIN was read; once `up` is empty the host socket is shut for writing.
    peer_eof: bool,
    host_shut: bool,
    /// The host's EOF was read; once `down` is empty the stack sends its FIN.
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
fn stack_failed(e: Error) -> Option<End> {
    match e {
        Error::WouldBlock | Error::NoBufferSpace => None,
        e => Some(End::Peer(e)),
    }
}

impl Conn {
    fn new(id: u64, handle: TcpHandle, stack: &Stack, host: TcpStream, buffer: usize) -> Conn {
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
            up: Ring::new(buffer),
            down: Ring::new(buffer),
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
    fn step(&mut self, stack: &mut Stack) -> Option<End> {
        if self.connecting {
            match self.check_connected() {
                Ok(_) => {}
                Err(end) => return Some(end),
            }
        }
        let h = self.handle;
        loop {
            let mut progress = false;
            // Peer -> up.
            if !self.peer_eof && !self.up.is_full() {
                match stack.tcp_recv(h, self.up.space()) {
                    Ok(0) => {
                        self.peer_eof = true;
                        progress = true;
                    }
                    Ok(n) => {
                        self.up.commit(n);
                        progress = true;
                    }
                    Err(e) => {
                        if let Some(end) = stack_failed(e) {
                            return Some(end);
                        }
                    }
                }
            }
            if !self.connecting {
                // up -> host.
                if !self.up.is_empty() {
                    match self.host.write(self.up.data()) {
                        Ok(n) => {
                            self.up.consume(n);
                            progress |= n > 0;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Some(End::Host(e)),
                    }
                }
                if self.peer_eof && self.up.is_empty() && !self.host_shut {
                    if let Err(e) = self.host.shutdown(std::net::Shutdown::Write) {
                        return Some(End::Host(e));
                    }
                    self.host_shut = true;
                    progress = true;
                }
                // Host -> down.
                if !self.host_eof && !self.down.is_full() {
                    match self.host.read(self.down.space()) {
                        Ok(0) => {
                            self.host_eof = true;
                            progress = true;
                        }
                        Ok(n) => {
                            self.down.commit(n);
                            progress = true;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Some(End::Host(e)),
                    }
                }
            }
            // down -> peer.
            if !self.down.is_empty() {
                match stack.tcp_send(h, self.down.data()) {
                    Ok(n) => {
                        self.down.consume(n);
                        progress |= n > 0;
                    }
                    Err(e) => {
                        if let Some(end) = stack_failed(e) {
                            return Some(end);
                        }
                    }
                }
            }
            if self.host_eof && self.down.is_empty() && !self.peer_shut {
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
            if !self.host_eof && !self.down.is_full() {
                events |= libc::POLLIN;
            }
            if !self.up.is_empty() {
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
            up: self.up.total,
            down: self.down.total,
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
    let listeners: Vec<ListenerHandle> = if any {
        let opts = ackclock::tcp::SocketOptions::from_config(stack.tcp().config());
        vec![stack.tcp_listen_any(1024, opts).map_err(|e| format!("listen any: {e}"))?]
    } else {
        args.listen
            .0
            .iter()
            .map(|&port| {
                stack
                    .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port), 128)
                    .map_err(|e| format!("listen {port}: {e}"))
            })
            .collect::<Result<_, _>>()?
    };
    let ports = args.listen.0.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
    let ports = match () {
        _ if any => "any address and port".to_string(),
        _ if ports.len() > 60 => format!("{} ports", args.listen.0.len()),
        _ => ports,
    };
    println!(
        "ackclock relay: tap {} ({}), stack {}{}{}; ports {ports} -> {to}; ready",
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
    let mut result = Ok(());
    while !stopping() {
        let now = link.now();
        stack.receive(now, &mut link.dev);
        for &l in &listeners {
            while let Ok(h) = stack.tcp_accept(l) {
                total_conns += 1;
                match connect_nonblocking(to) {
                    Ok(host) => conns.push(Conn::new(total_conns, h, &stack, host, buffer)),
                    Err(e) => {
                        eprintln!("ackclock relay: connect {to}: {e}");
                        let _ = stack.tcp_abort(h);
                    }
                }
            }
        }
        let mut i = 0;
        while i < conns.len() {
            match conns[i].step(&mut stack) {
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
        fds.clear();
        fds.push(libc::pollfd { fd: link.tap().as_raw_fd(), events: libc::POLLIN, revents: 0 });
        fds.extend(conns.iter().map(Conn::pollfd));
        if let Err(e) = poll(&mut fds, link.timeout(&stack)) {
            result = Err(format!("ppoll: {e}"));
            break;
        }
        if fds[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            result = Err(format!("TAP {} is gone", link.name));
            break;
        }
    }

    // Shut down: reset what is open (both ways), stop listening, let the resets out.
    let open = conns.len();
    for c in conns.drain(..) {
        keep(c.finish(&mut stack, End::Exit), &mut records);
    }
    for l in listeners {
        let _ = stack.tcp_unlisten(l);
    }
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
    if args.json {
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
    fn cidr_parses() {
        let c: Cidr = "10.1.2.3/24".parse().unwrap();
        assert_eq!((c.addr, c.prefix), (Ipv4Addr::new(10, 1, 2, 3), 24));
        assert!("10.1.2.3".parse::<Cidr>().is_err());
        assert!("10.1.2.3/33".parse::<Cidr>().is_err());
    }

    #[test]
    fn impair_specs_parse() {
        let s: ImpairSpec = "loss=2%,delay=20ms,reorder=5%:10ms,dup=0.01,seed=7,queue=100".parse().unwrap();
        assert_eq!(s.impairment.loss, Loss::Bernoulli(0.02));
        assert_eq!(s.impairment.delay, Duration::from_millis(20));
        assert_eq!(s.impairment.reorder, Some(Reorder { probability: 0.05, extra_delay: Duration::from_millis(10) }));
        assert_eq!(s.impairment.duplicate, 0.01);
        assert_eq!((s.seed, s.queue), (Some(7), Some(100)));
        assert_eq!("delay=500us".parse::<ImpairSpec>().unwrap().impairment.delay, Duration::from_micros(500));
        assert_eq!("delay=1.5s".parse::<ImpairSpec>().unwrap().impairment.delay, Duration::from_millis(1500));
        assert!("loss=150%".parse::<ImpairSpec>().is_err());
        assert!("delay=20".parse::<ImpairSpec>().is_err());
        assert!("jitter=1ms".parse::<ImpairSpec>().is_err());
        assert!("reorder=5%".parse::<ImpairSpec>().is_err());
    }

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

    #[test]
    fn ring_wraps() {
        let mut r = Ring::new(8);
        r.space()[..6].copy_from_slice(b"abcdef");
        r.commit(6);
        assert_eq!(r.data(), b"abcdef");
        r.consume(4);
        assert_eq!(r.space().len(), 2, "room to the end first");
        r.space().copy_from_slice(b"gh");
        r.commit(2);
        assert_eq!(r.space().len(), 4, "then room before the data");
        r.space().copy_from_slice(b"ijkl");
        r.commit(4);
        assert!(r.is_full() && r.space().is_empty());
        assert_eq!(r.data(), b"efgh");
        r.consume(4);
        assert_eq!(r.data(), b"ijkl");
        r.consume(4);
        assert!(r.is_empty());
        assert_eq!(r.total, 12);
    }
}
