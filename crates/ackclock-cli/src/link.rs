//! What `relay`, `fetch` and `serve` share: the device under the stack (a TAP or a TUN,
//! `--tap NAME` or `--tun NAME`), its impairment and capture wrappers ([`LinkArgs`],
//! [`Link`]), the `--impair` syntax ([`ImpairSpec`]), addresses and signals.
//!
//! A TAP carries Ethernet frames and the stack answers ARP on it; a TUN carries IP packets,
//! with no link header and no ARP (what VPN and proxy data planes are handed). Either is
//! opened in offload mode (virtio-net headers: checksum offload, TSO, coalesced receives)
//! unless `--plain`, created if it does not exist, and optionally moved into a network
//! namespace and given a host address.

use ackclock::buf::{Pool, PoolConfig, PoolConfigError, DEFAULT_HEADROOM};
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{
    Batch, Capabilities, Capture, Device, DeviceStats, ImpairStats, Impaired, Impairment, PcapWriter, Resolution, Tap,
    TapConfig, TapCounters, TapMode, Tun, TunConfig,
};
use ackclock::runtime::{RuntimeDevice, RuntimeStats};
use ackclock::sim::{Loss, Reorder};
use ackclock::tcp::Aggregation;
use ackclock::time::{Duration, Instant};
use ackclock::{Stack, StackConfig};
use clap::Args;
use core::net::Ipv4Addr;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::process::Command;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
static REPORT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGUSR1 {
        REPORT.store(true, Ordering::Relaxed);
    } else {
        STOP.store(true, Ordering::Relaxed);
    }
}

/// SIGINT and SIGTERM set [`stopping`]; SIGUSR1 asks for a report ([`report_requested`]).
pub(crate) fn install_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
}

pub(crate) fn stopping() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Whether SIGUSR1 arrived since the last call (as `dd` reports on SIGUSR1).
pub(crate) fn report_requested() -> bool {
    REPORT.swap(false, Ordering::Relaxed)
}

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

/// `--impair SPEC`: comma-separated `key=value`, applied to both directions of the device.
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

/// Wrap `dev` in the impairment of `spec` (a clean pass-through without one). `rx_buffers`
/// is the size of the device's receive pool: held received frames keep its buffers, so at
/// most half of them wait unless `queue=` says otherwise.
pub(crate) fn impaired(dev: HostDev, spec: Option<&ImpairSpec>, rx_buffers: usize) -> Impaired<HostDev> {
    let imp = spec.map_or(Impairment::default(), |s| s.impairment);
    let seed = spec.and_then(|s| s.seed).unwrap_or_else(random_seed);
    let queue = spec.and_then(|s| s.queue).unwrap_or(rx_buffers / 2);
    let dev = Impaired::new(dev, imp, imp, seed, queue);
    // Impair wire segments, not 64 KB offload frames (both ways, queue-deep each).
    if spec.is_some() {
        dev.cut_offload(2 * queue + 1024)
    } else {
        dev
    }
}

/// The kernel device under the stack: a TAP (Ethernet frames) or a TUN (IP packets). The
/// two share everything but the link header, so the commands treat them alike.
pub(crate) enum HostDev {
    Tap(Tap),
    Tun(Tun),
}

impl HostDev {
    /// Open the TAP or TUN `name` in `mode`, receiving into a pool of `rx_buffers` buffers.
    fn open(kind: Kind, name: &str, mode: TapMode, rx_buffers: usize) -> Result<HostDev, String> {
        let pool = |e: PoolConfigError| format!("receive pool: {e}");
        let fail = |e: io::Error| format!("{} {name}: {e}", kind.noun());
        Ok(match kind {
            Kind::Tap => {
                let config = TapConfig { mode, mtu: 1500 };
                HostDev::Tap(
                    Tap::open(name, config, Tap::receive_pool(&config, rx_buffers).map_err(pool)?).map_err(fail)?,
                )
            }
            Kind::Tun => {
                let config = TunConfig { mode, mtu: 1500 };
                HostDev::Tun(
                    Tun::open(name, config, Tun::receive_pool(&config, rx_buffers).map_err(pool)?).map_err(fail)?,
                )
            }
        })
    }

    pub fn name(&self) -> &str {
        match self {
            HostDev::Tap(d) => d.name(),
            HostDev::Tun(d) => d.name(),
        }
    }

    pub fn mode(&self) -> TapMode {
        match self {
            HostDev::Tap(d) => d.config().mode,
            HostDev::Tun(d) => d.config().mode,
        }
    }

    pub fn counters(&self) -> &TapCounters {
        match self {
            HostDev::Tap(d) => d.counters(),
            HostDev::Tun(d) => d.counters(),
        }
    }

    fn take_error(&mut self) -> Option<io::Error> {
        match self {
            HostDev::Tap(d) => d.take_error(),
            HostDev::Tun(d) => d.take_error(),
        }
    }

    /// "tap" or "tun", as the commands print it.
    pub fn kind(&self) -> &'static str {
        match self {
            HostDev::Tap(_) => "tap",
            HostDev::Tun(_) => "tun",
        }
    }

    /// The pool the device receives into.
    pub fn pool(&self) -> &Pool {
        match self {
            HostDev::Tap(d) => d.pool(),
            HostDev::Tun(d) => d.pool(),
        }
    }
}

impl AsRawFd for HostDev {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            HostDev::Tap(d) => d.as_raw_fd(),
            HostDev::Tun(d) => d.as_raw_fd(),
        }
    }
}

impl Device for HostDev {
    fn capabilities(&self) -> Capabilities {
        match self {
            HostDev::Tap(d) => d.capabilities(),
            HostDev::Tun(d) => d.capabilities(),
        }
    }
    fn receive(&mut self, now: Instant, rx: &mut Batch) -> usize {
        match self {
            HostDev::Tap(d) => d.receive(now, rx),
            HostDev::Tun(d) => d.receive(now, rx),
        }
    }
    fn transmit(&mut self, now: Instant, tx: &mut Batch) -> usize {
        match self {
            HostDev::Tap(d) => d.transmit(now, tx),
            HostDev::Tun(d) => d.transmit(now, tx),
        }
    }
    fn stats(&self) -> DeviceStats {
        match self {
            HostDev::Tap(d) => d.stats(),
            HostDev::Tun(d) => d.stats(),
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Tap,
    Tun,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Tap => "TAP",
            Kind::Tun => "TUN",
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

/// The device options relay, fetch and serve share: a TAP or a TUN, its addresses and
/// wrappers.
#[derive(Args)]
pub(crate) struct LinkArgs {
    /// TAP interface to open (Ethernet frames, ARP), created if it does not exist.
    #[arg(long, value_name = "NAME", required_unless_present = "tun", conflicts_with = "tun")]
    pub tap: Option<String>,
    /// TUN interface to open instead (IP packets, no link header, no ARP), created if it does
    /// not exist.
    #[arg(long, value_name = "NAME")]
    pub tun: Option<String>,
    /// The stack's address and prefix length, e.g. 10.0.0.2/24.
    #[arg(long)]
    pub addr: Cidr,
    /// Give the kernel side of the device this address (e.g. 10.0.0.1/24) and bring it up.
    #[arg(long)]
    pub host_addr: Option<Cidr>,
    /// Move the device into this network namespace first (its kernel side then lives there).
    #[arg(long)]
    pub netns: Option<String>,
    /// Plain device: no virtio-net header, no checksum or segmentation offload.
    #[arg(long)]
    pub plain: bool,
    /// Impair the device both ways: e.g. loss=2%,delay=20ms,reorder=5%:10ms,dup=1%,seed=7.
    #[arg(long, value_name = "SPEC")]
    pub impair: Option<ImpairSpec>,
    /// Record the frames the stack sends and receives in this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// The stack's default gateway: the next hop for addresses outside --addr's prefix (a TAP
    /// only: on a TUN every address is through the link).
    #[arg(long, value_name = "ADDR")]
    pub gateway: Option<Ipv4Addr>,
    /// Turn the stack's receive aggregation off (in-order data and pure ACKs of a received
    /// batch are processed once per connection, Gallatin 2008; on by default).
    #[arg(long)]
    pub no_lro: bool,
}

/// `--max-connections`: a count of at least 1.
pub(crate) fn parse_max_connections(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// The device under the stack: the TAP or TUN, impaired, and perhaps recorded.
pub(crate) enum LinkDev {
    Bare(Impaired<HostDev>),
    Recorded(Capture<Impaired<HostDev>, BufWriter<File>>),
}

/// The stack's pool for a TAP or TUN link. The send buffers of many connections live in it (256 KiB
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
    /// The TAP's or TUN's descriptor, readable when frames wait.
    pub fn host_fd(&self) -> RawFd {
        self.impaired().inner().as_raw_fd()
    }

    fn impaired(&self) -> &Impaired<HostDev> {
        match self {
            LinkDev::Bare(d) => d,
            LinkDev::Recorded(c) => c.get_ref(),
        }
    }

    fn impaired_mut(&mut self) -> &mut Impaired<HostDev> {
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

/// Give what the heap holds free back to the system: connections' buffers freed at close
/// stay in glibc's heap (its mmap threshold grows with use) until trimmed.
fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free heap memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Trims the heap each time the runtime has given its pools' idle pages back
/// (`RuntimeStats::idle_memory_releases` moved): the connections' buffers freed at close go
/// back too. For the commands' main tasks, which look every few tens of milliseconds.
#[derive(Default)]
pub(crate) struct HeapTrim {
    releases: u64,
}

impl HeapTrim {
    pub fn after_release(&mut self, rt: &ackclock::runtime::Runtime) {
        let r = rt.stats().idle_memory_releases;
        if r != self.releases {
            self.releases = r;
            trim_heap();
        }
    }
}

/// The next connection `l` accepts, or `None` once the runtime has stopped or `stop` says
/// the command stops: the accept loop of relay's and serve's listeners.
pub(crate) async fn accept_or_stop(
    l: &ackclock::runtime::tokio::TcpListener,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<ackclock::runtime::tokio::TcpStream> {
    tokio::select! {
        r = l.accept() => r.ok().map(|(s, _)| s),
        _ = stop.wait_for(|s| *s) => None,
    }
}

/// An open TAP or TUN, set up as [`LinkArgs`] asks, with the clock the stack runs on.
pub(crate) struct Link {
    pub dev: LinkDev,
    pub name: String,
    clock: Clock,
    impair: bool,
    gateway: Option<Ipv4Addr>,
    no_lro: bool,
}

impl Link {
    pub fn open(args: &LinkArgs) -> Result<Link, String> {
        let mode = if args.plain { TapMode::Plain } else { TapMode::Offload };
        // Offload mode: 64 KiB buffers, touched only when used.
        let rx_buffers = if args.plain { 4096 } else { 1024 };
        let (kind, name) = match (&args.tap, &args.tun) {
            (Some(tap), None) => (Kind::Tap, tap),
            (None, Some(tun)) => (Kind::Tun, tun),
            _ => return Err("give one of --tap NAME and --tun NAME".into()),
        };
        let dev = HostDev::open(kind, name, mode, rx_buffers)?;
        let ethernet = dev.capabilities().ethernet;
        let name = dev.name().to_string();
        let netns = args.netns.as_deref();
        if let Some(ns) = netns {
            ip(None, &["link", "set", &name, "netns", ns])?;
        }
        if let Some(host) = args.host_addr {
            ip(netns, &["addr", "replace", &host.to_string(), "dev", &name])?;
            ip(netns, &["link", "set", &name, "up"])?;
        }
        let dev = impaired(dev, args.impair.as_ref(), rx_buffers);
        let dev = match &args.pcap {
            None => LinkDev::Bare(dev),
            Some(path) => {
                let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
                let pcap = PcapWriter::for_link(BufWriter::new(file), Resolution::Micros, ethernet)
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
            no_lro: args.no_lro,
        })
    }

    /// The stack's clock: its epoch is one second before the link opened, so no timestamp
    /// is zero.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// A stack on this link; with `any_destination`, one that takes connections to any
    /// address (see [`InterfaceConfig::any_destination`]).
    pub fn stack(&self, addr: Cidr, any_destination: bool, max_connections: Option<usize>) -> Result<Stack, String> {
        self.stack_with(addr, any_destination, max_connections, |_| {})
    }

    /// [`stack`](Self::stack), with its configuration changed by `tune` last.
    pub fn stack_with(
        &self,
        addr: Cidr,
        any_destination: bool,
        max_connections: Option<usize>,
        tune: impl FnOnce(&mut StackConfig),
    ) -> Result<Stack, String> {
        let mut config = StackConfig::new(InterfaceConfig::new(addr.addr, addr.prefix));
        config.iface.any_destination = any_destination;
        if let Some(n) = max_connections {
            config.tcp.max_connections = n;
        }
        config.iface.gateway = self.gateway;
        if self.no_lro {
            config.aggregation = Aggregation::OFF;
        }
        let caps = self.dev.capabilities();
        config.pool = stack_pool(&caps);
        tune(&mut config);
        Stack::new(config, caps, self.now()).map_err(|e| format!("stack: {e}"))
    }

    /// The TAP or TUN under the wrappers.
    pub fn device(&self) -> &HostDev {
        self.dev.impaired().inner()
    }

    /// Counters of the impairment (tx, rx); all pass-through without --impair.
    pub fn impair_stats(&self) -> (ImpairStats, ImpairStats) {
        self.dev.impaired().impair_stats()
    }

    /// "tap" or "tun".
    pub fn kind(&self) -> &'static str {
        self.device().kind()
    }

    pub fn mode(&self) -> &'static str {
        match self.device().mode() {
            TapMode::Plain => "plain",
            TapMode::Offload => "offload",
        }
    }

    /// Report (once) the last I/O error of the device or of the capture.
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

    /// Counters of the device (and of the impairment, if any).
    pub fn summary(&self) -> String {
        let d = self.dev.stats();
        let c = self.device().counters();
        let mut s = format!(
            "rx {} frames {} bytes ({} GSO, {} in MTU buffers, {} partial csum), tx {} frames {} bytes, {} dropped",
            d.rx_frames,
            d.rx_bytes,
            c.rx_gso,
            c.rx_small,
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

/// The device under the library's threaded runtime (relay, fetch and serve all run on it):
/// the protocol thread and the watching threads sleep on its descriptor.
impl RuntimeDevice for LinkDev {
    fn attach(&mut self, _wakeup: Arc<dyn ackclock::phy::Wakeup>) -> Option<RawFd> {
        Some(self.host_fd())
    }

    fn receive_pool(&self) -> Option<Pool> {
        Some(self.impaired().inner().pool().clone())
    }
}

/// The runtime's counters, for the exit reports of `fetch` and `serve`.
pub(crate) fn runtime_json(s: &RuntimeStats) -> serde_json::Value {
    serde_json::json!({
        "rounds": s.rounds, "app_rounds": s.app_rounds, "app_pushes": s.app_pushes, "sleeps": s.sleeps, "wakeups": s.wakeups,
        "app_waits": s.app_waits, "parks": s.parks, "watches": s.watches, "watch_rounds": s.watch_rounds,
        "handoffs": s.handoffs, "lock_contended": s.lock_contended, "polls": s.polls,
        "window_update_requests": s.window_update_requests, "window_updates_sent": s.window_updates_sent,
    })
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
}
