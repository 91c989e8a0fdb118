//! Interop with the Linux kernel's TCP as the peer, through a TAP device whose kernel side
//! lives in a private network namespace made (and removed) by each test.
//!
//! Needs root and /dev/net/tun: without them every test prints why and passes as skipped.
//! The ping test drives a stack on a `phy::Tap` in-process; the others run `ackclock serve`
//! (built from this workspace on first use) and Linux tools inside the namespace: curl,
//! python3. Every test runs in both TAP modes, plain and offload (virtio-net header with
//! checksum and segmentation offload). Every wait is bounded.
#![cfg(target_os = "linux")]

mod common;

use ackclock::buf::Pool;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Device, Tap, TapConfig, TapMode};
use ackclock::time::Instant;
use ackclock::{Stack, StackConfig};
use common::netns::{self, NetNs};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

const STACK_ADDR: &str = "10.77.0.2";
const STACK_CIDR: &str = "10.77.0.2/24";
const HOST_CIDR: &str = "10.77.0.1/24";

/// Skip (print the reason, pass) when namespaces or the needed tools are not available.
fn skip(tools: &[&str]) -> bool {
    let why = netns::unavailable()
        .or_else(|| tools.iter().find(|t| !netns::have(t)).map(|t| format!("`{t}` is not installed")));
    if let Some(why) = why {
        eprintln!("SKIP: {why}");
        return true;
    }
    false
}

// ---------------------------------------------------------------------------------------
// The `ackclock` binary, and `ackclock serve` as a child process.

/// `target/<profile>/ackclock`, built now: `cargo test` builds only this package's targets,
/// so the CLI is built (a no-op when fresh) with the profile this test was built with.
fn cli() -> &'static PathBuf {
    static CLI: OnceLock<PathBuf> = OnceLock::new();
    CLI.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap().to_path_buf();
        let target_dir = profile_dir.parent().unwrap();
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev".to_string(),
            Some(p) => p.to_string(),
            None => panic!("unexpected test executable path {exe:?}"),
        };
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
        let status = Command::new(cargo)
            .args(["build", "--quiet", "-p", "ackclock-cli", "--bin", "ackclock", "--profile", &profile])
            .arg("--manifest-path")
            .arg(manifest)
            .arg("--target-dir")
            .arg(target_dir)
            .status()
            .expect("run cargo to build the ackclock CLI");
        assert!(status.success(), "building the ackclock CLI failed");
        profile_dir.join("ackclock")
    })
}

/// A running `ackclock serve`; SIGTERM and reaped on drop.
struct Serve {
    child: Child,
    stderr: Option<JoinHandle<String>>,
}

impl Serve {
    fn start(ns: &mut NetNs, mode: TapMode) -> Serve {
        Serve::start_with(ns, mode, &[])
    }

    /// With `extra` options (e.g. `--impair SPEC`).
    fn start_with(ns: &mut NetNs, mode: TapMode, extra: &[&str]) -> Serve {
        let tap = ns.tap_name().to_string();
        ns.adopt(&tap);
        let mut cmd = Command::new(cli());
        cmd.args(["serve", "--tap", &tap, "--addr", STACK_CIDR, "--host-addr", HOST_CIDR, "--netns", ns.name()]);
        cmd.args(extra);
        if mode == TapMode::Plain {
            cmd.arg("--plain");
        }
        let mut child = netns::die_with_parent(&mut cmd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ackclock serve");
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut serve = Serve { child, stderr: Some(stderr) };
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.contains("ready") => serve,
            other => {
                let log = serve.stop();
                panic!("serve did not start ({other:?}); stderr:\n{log}")
            }
        }
    }

    /// SIGTERM, wait (at most 10 s, then SIGKILL), and return what serve printed on stderr.
    fn stop(&mut self) -> String {
        // SAFETY: signalling our own child, which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
        self.stderr.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.stderr.is_some() {
            let log = self.stop();
            eprintln!("serve stderr:\n{log}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// The body pattern of `GET /bytes/N`: byte i is (i % 251) as u8.

fn pattern_sha256(n: u64) -> [u8; 32] {
    let block: Vec<u8> = (0..251 * 4096).map(|i| (i % 251) as u8).collect();
    let mut h = Sha256::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(block.len() as u64) as usize;
        h.update(&block[..k]);
        left -= k as u64;
    }
    h.finalize().into()
}

/// Start `curl` inside the namespace for `/bytes/n`, body to stdout.
fn spawn_curl(ns: &NetNs, n: u64, timeout_secs: u64) -> Child {
    ns.command(timeout_secs, "curl")
        .args(["-sS", "--fail", "-o", "-", &format!("http://{STACK_ADDR}/bytes/{n}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn curl")
}

/// Hash a curl child's body; returns (bytes, sha256, exit status, stderr).
fn finish_curl(mut child: Child) -> (u64, [u8; 32], std::process::ExitStatus, String) {
    let mut out = child.stdout.take().unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => {
                h.update(&buf[..k]);
                total += k as u64;
            }
        }
    }
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    let status = child.wait().unwrap();
    (total, h.finalize().into(), status, err)
}

fn curl_bytes(mode: TapMode, n: u64, timeout_secs: u64) {
    if skip(&["curl"]) {
        return;
    }
    let mut ns = NetNs::new();
    let mut serve = Serve::start(&mut ns, mode);
    let (len, sum, status, err) = finish_curl(spawn_curl(&ns, n, timeout_secs));
    let log = serve.stop();
    assert!(status.success(), "curl failed: {status} {err}\nserve: {log}");
    assert_eq!(len, n, "body length");
    assert!(sum == pattern_sha256(n), "body SHA-256 differs from the pattern's");
    if mode == TapMode::Offload && n > 100_000 {
        // The body leaves as segments of many MSS that the kernel cuts (TSO).
        assert!(!log.contains("(0 TSO)"), "no TSO frame sent: {log}");
    }
}

// ---------------------------------------------------------------------------------------
// The tests; each runs in both TAP modes.

macro_rules! both_modes {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn plain() {
                ($body)(TapMode::Plain)
            }
            #[test]
            fn offload() {
                ($body)(TapMode::Offload)
            }
        }
    };
}

/// Stops and joins the stack thread on drop, so a failed assertion does not leave it (and
/// its TAP) running.
struct StackThread {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(ackclock::phy::DeviceStats, ackclock::phy::TapCounters)>>,
}

impl StackThread {
    fn join(&mut self) -> (ackclock::phy::DeviceStats, ackclock::phy::TapCounters) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for StackThread {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.join();
        }
    }
}

/// Linux pings the stack (ICMP echo, ARP first) on a TAP driven in-process.
fn ping(mode: TapMode) {
    if skip(&["ping"]) {
        return;
    }
    let mut ns = NetNs::new();
    let config = TapConfig { mode, mtu: 1500 };
    let pool = Pool::new(Tap::pool_config(&config, 64)).unwrap();
    let tap_name = ns.tap_name().to_string();
    ns.adopt(&tap_name);
    let mut tap = Tap::open(&tap_name, config, pool).expect("open TAP");
    assert!(tap.created());
    ns.take_link(&tap_name, HOST_CIDR);
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            let clock = || Instant::from_secs(1) + t0.elapsed();
            let iface = InterfaceConfig::new(STACK_ADDR.parse().unwrap(), 24);
            let mut stack = Stack::new(StackConfig::new(iface), tap.capabilities(), clock()).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let now = clock();
                stack.receive(now, &mut tap);
                stack.transmit(now, &mut tap);
                let wait = stack.poll_at().map_or(Duration::from_millis(50), |t| t - clock());
                tap.wait(Some(wait.min(Duration::from_millis(50)))).expect("TAP wait");
            }
            (tap.stats(), *tap.counters())
        })
    };
    let mut stack = StackThread { stop, thread: Some(thread) };
    let out = ns
        .command(30, "ping")
        .args(["-c", "5", "-i", "0.2", "-W", "2", "-s", "1000", STACK_ADDR])
        .output()
        .expect("run ping");
    let text = String::from_utf8_lossy(&out.stdout);
    let (stats, _) = stack.join();
    assert!(
        out.status.success() && text.contains(" 5 received"),
        "ping: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stats.rx_frames >= 6 && stats.tx_frames >= 6, "{stats:?}");
}
both_modes!(ping, ping);

both_modes!(curl_1mb, |mode| curl_bytes(mode, 1_000_000, 60));
both_modes!(curl_200mb, |mode| curl_bytes(mode, 200_000_000, 300));

/// 50 concurrent keep-alive-less downloads of 1 MB each, all byte-exact.
fn curl_parallel(mode: TapMode) {
    curl_parallel_with(mode, 1_000_000, &[]);
}

/// 50 concurrent downloads of `n` bytes from serve started with `extra`, all byte-exact;
/// returns serve's exit report.
fn curl_parallel_with(mode: TapMode, n: u64, extra: &[&str]) -> String {
    if skip(&["curl"]) {
        return String::new();
    }
    let mut ns = NetNs::new();
    let mut serve = Serve::start_with(&mut ns, mode, extra);
    let want = pattern_sha256(n);
    let children: Vec<Child> = (0..50).map(|_| spawn_curl(&ns, n, 240)).collect();
    let readers: Vec<_> = children.into_iter().map(|c| std::thread::spawn(move || finish_curl(c))).collect();
    for (i, r) in readers.into_iter().enumerate() {
        let (len, sum, status, err) = r.join().unwrap();
        assert!(status.success(), "curl #{i} failed: {status} {err}");
        assert_eq!(len, n, "curl #{i} body length");
        assert!(sum == want, "curl #{i} body differs from the pattern");
    }
    serve.stop()
}
both_modes!(curl_parallel_50, curl_parallel);

/// Python sends 10 MB to echo (7) while reading, half-closes, and reads to EOF: the bytes
/// that come back are the bytes sent.
const ECHO_CLIENT: &str = r#"
import hashlib, random, socket, sys, threading
host, n = sys.argv[1], int(sys.argv[2])
data = random.Random(7).randbytes(n)
s = socket.create_connection((host, 7), timeout=60)
def send():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send)
t.start()
got = bytearray()
while True:
    b = s.recv(1 << 20)
    if not b:
        break
    got += b
t.join()
s.close()
print(len(got), hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest())
sys.exit(0 if bytes(got) == data else 1)
"#;

fn echo_half_close(mode: TapMode) {
    echo_half_close_with(mode, &[]);
}

fn echo_half_close_with(mode: TapMode, extra: &[&str]) -> String {
    if skip(&["python3"]) {
        return String::new();
    }
    let mut ns = NetNs::new();
    let mut serve = Serve::start_with(&mut ns, mode, extra);
    let n = 10 * 1024 * 1024;
    let out =
        ns.command(300, "python3").args(["-c", ECHO_CLIENT, STACK_ADDR, &n.to_string()]).output().expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    let log = serve.stop();
    assert!(out.status.success(), "echo client: {text} {}\nserve: {log}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), format!("{n} True"));
    if mode == TapMode::Offload {
        // Linux's 10 MB arrive as coalesced GSO frames with partial checksums.
        assert!(!log.contains("(0 GSO") && !log.contains(" 0 partial csum"), "no offload seen: {log}");
    }
    log
}
both_modes!(echo_10mb_half_close, echo_half_close);

/// Loss, delay and reordering as the other interop runs use them (2%, 20 ms each way, 5%
/// reordered by 10 ms), injected by `serve --impair` per wire segment (offload frames are
/// cut first): returns whether the exit report shows frames lost both ways.
const IMPAIR: &str = "loss=2%,delay=20ms,reorder=5%:10ms,seed=3";

fn lost_both_ways(log: &str) -> bool {
    // "impairment: tx N passed, M lost, ...; rx N passed, M lost, ..."
    let lost: Vec<u64> = log.split(" lost").filter_map(|s| s.rsplit(' ').next().and_then(|n| n.parse().ok())).collect();
    lost.len() >= 2 && lost.iter().take(2).all(|&l| l > 0)
}

both_modes!(echo_10mb_half_close_impaired, |mode| {
    let log = echo_half_close_with(mode, &["--impair", IMPAIR]);
    assert!(log.is_empty() || lost_both_ways(&log), "no loss injected? {log}");
});

// 50 parallel downloads (256 KB each) through the same impairment, all byte-exact.
both_modes!(curl_parallel_50_impaired, |mode| {
    let log = curl_parallel_with(mode, 256_000, &["--impair", IMPAIR]);
    assert!(log.is_empty() || lost_both_ways(&log), "no loss injected? {log}");
});

/// A SYN to a port nobody listens on is answered with RST: curl says "connection refused"
/// (exit code 7), at once rather than after a timeout.
fn closed_port(mode: TapMode) {
    if skip(&["curl"]) {
        return;
    }
    let mut ns = NetNs::new();
    let _serve = Serve::start(&mut ns, mode);
    let out = ns
        .command(30, "curl")
        .args(["-sSv", "--max-time", "10", &format!("http://{STACK_ADDR}:81/")])
        .output()
        .expect("run curl");
    assert_eq!(out.status.code(), Some(7), "curl: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Connection refused"));
}
both_modes!(closed_port_refused, closed_port);

/// SIGTERM: open connections are reset, serve exits 0, and the TAP it created is gone.
fn sigterm(mode: TapMode) {
    if skip(&["python3"]) {
        return;
    }
    let mut ns = NetNs::new();
    let mut serve = Serve::start(&mut ns, mode);
    // A client that idles on discard until the server ends the connection.
    let client = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], 9), timeout=30)
s.sendall(b"x" * 1000)
print("connected", flush=True)
try:
    print("eof" if s.recv(1) == b"" else "data")
except ConnectionResetError:
    print("reset")
"#;
    let mut child =
        ns.command(60, "python3").args(["-c", client, STACK_ADDR]).stdout(Stdio::piped()).spawn().expect("run python3");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("connected"));
    std::thread::sleep(Duration::from_millis(200));
    let log = serve.stop();
    let status = serve.child.wait().unwrap();
    assert!(status.success(), "serve exit: {status}\n{log}");
    assert!(log.contains("1 reset at exit"), "{log}");
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("reset"));
    let _ = child.wait();
    let gone = Command::new("ip").args(["-n", ns.name(), "link", "show", ns.tap_name()]).output().unwrap();
    assert!(!gone.status.success(), "the TAP outlived serve");
}
both_modes!(sigterm_resets_and_removes_tap, sigterm);

/// One curl, several requests: all on one kept-alive connection, a 404 among them.
fn keep_alive(mode: TapMode) {
    if skip(&["curl"]) {
        return;
    }
    let mut ns = NetNs::new();
    let _serve = Serve::start(&mut ns, mode);
    let paths = ["/bytes/0", "/bytes/1", "/nope", "/bytes/100000", "/bytes/3000000", "/bytes/251"];
    let mut cmd = ns.command(60, "curl");
    cmd.args(["-sS", "-w", "%{http_code} %{size_download} %{num_connects}\\n"]);
    for p in paths {
        cmd.args(["-o", "/dev/null", &format!("http://{STACK_ADDR}{p}")]);
    }
    let out = cmd.output().expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<&str> = text.lines().collect();
    let want = ["200 0 1", "200 1 0", "404 10 0", "200 100000 0", "200 3000000 0", "200 251 0"];
    assert_eq!(got, want, "status, body length, new connections per request");
}
both_modes!(http_keep_alive, keep_alive);
