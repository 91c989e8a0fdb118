//! `ackclock serve` against the Linux kernel's TCP as the peer, through a TAP device whose
//! kernel side lives in a private network namespace made (and removed) by each test, with
//! Linux tools inside the namespace as clients: curl, python3.
//!
//! Needs root and /dev/net/tun: without them every test prints why and passes as skipped.
//! Every test runs in both TAP modes, plain and offload (virtio-net header with checksum
//! and segmentation offload). Every wait is bounded.
#![cfg(target_os = "linux")]

#[macro_use]
mod common;

use common::clients::ECHO_CLIENT;
use common::interop::{finish_curl, pattern_sha256, serve, skip, waiting_client, Mode, STACK_ADDR};
use common::netns::NetNs;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Start `curl` inside the namespace for `/bytes/n`, body to stdout.
fn spawn_curl(ns: &NetNs, n: u64, timeout_secs: u64) -> Child {
    ns.command(timeout_secs, "curl")
        .args(["-sS", "--fail", "-o", "-", &format!("http://{STACK_ADDR}/bytes/{n}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn curl")
}

fn curl_bytes(mode: Mode, n: u64, timeout_secs: u64) {
    if skip(&["curl"]) {
        return;
    }
    let mut ns = NetNs::new();
    let mut serve = serve(&mut ns, mode, &[]);
    let (len, sum, status, err) = finish_curl(spawn_curl(&ns, n, timeout_secs));
    let log = serve.stop().1;
    assert!(status.success(), "curl failed: {status} {err}\nserve: {log}");
    assert_eq!(len, n, "body length");
    assert!(sum == pattern_sha256(n), "body SHA-256 differs from the pattern's");
    if mode == Mode::Offload && n > 100_000 {
        // The body leaves as segments of many MSS that the kernel cuts (TSO).
        assert!(!log.contains("(0 TSO)"), "no TSO frame sent: {log}");
    }
}

// ---------------------------------------------------------------------------------------
// The tests; each runs in both TAP modes.

both_modes!(curl_1mb, |mode| curl_bytes(mode, 1_000_000, 60));
both_modes!(curl_200mb, |mode| curl_bytes(mode, 200_000_000, 300));

/// 50 concurrent keep-alive-less downloads of 1 MB each, all byte-exact.
fn curl_parallel(mode: Mode) {
    curl_parallel_with(mode, 1_000_000, &[]);
}

/// 50 concurrent downloads of `n` bytes from serve started with `extra`, all byte-exact;
/// returns serve's exit report.
fn curl_parallel_with(mode: Mode, n: u64, extra: &[&str]) -> String {
    if skip(&["curl"]) {
        return String::new();
    }
    let mut ns = NetNs::new();
    let mut serve = serve(&mut ns, mode, extra);
    let want = pattern_sha256(n);
    let children: Vec<Child> = (0..50).map(|_| spawn_curl(&ns, n, 240)).collect();
    let readers: Vec<_> = children.into_iter().map(|c| std::thread::spawn(move || finish_curl(c))).collect();
    for (i, r) in readers.into_iter().enumerate() {
        let (len, sum, status, err) = r.join().unwrap();
        assert!(status.success(), "curl #{i} failed: {status} {err}");
        assert_eq!(len, n, "curl #{i} body length");
        assert!(sum == want, "curl #{i} body differs from the pattern");
    }
    serve.stop().1
}
both_modes!(curl_parallel_50, curl_parallel);

/// Python sends 10 MB to echo (7) while reading, half-closes, and reads to EOF: the bytes
/// that come back are the bytes sent.
fn echo_half_close(mode: Mode) {
    echo_half_close_with(mode, &[], 60);
}

/// The echo through serve started with `extra`; `client_timeout` (seconds) bounds the
/// client's whole `sendall`. Returns serve's exit report.
fn echo_half_close_with(mode: Mode, extra: &[&str], client_timeout: u32) -> String {
    if skip(&["python3"]) {
        return String::new();
    }
    let mut ns = NetNs::new();
    let mut serve = serve(&mut ns, mode, extra);
    let n = 10 * 1024 * 1024;
    let out = ns
        .command(300, "python3")
        .args(["-c", ECHO_CLIENT, STACK_ADDR, "7", &n.to_string(), "1", &client_timeout.to_string()])
        .output()
        .expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    let log = serve.stop().1;
    assert!(out.status.success(), "echo client: {text} {}\nserve: {log}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), format!("{n} True"));
    if mode == Mode::Offload {
        // Linux's 10 MB arrive as coalesced GSO frames with partial checksums, read into the
        // 64 KiB buffers; its ACKs and other frames that fit an MTU are read into the
        // MTU-sized class beside them. The echo coming back byte for byte checks both.
        assert!(!log.contains("(0 GSO") && !log.contains(" 0 partial csum"), "no offload seen: {log}");
        assert!(!log.contains(" 0 in MTU buffers"), "no frame read into the MTU-sized class: {log}");
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

// The path moves about 150 KB/s each way (2% loss and the reordering, on a 40 ms round
// trip), so 10 MB take 60-75 s to send: the client gets 240 s (the command itself 300).
both_modes!(echo_10mb_half_close_impaired, |mode| {
    let log = echo_half_close_with(mode, &["--impair", IMPAIR], 240);
    assert!(log.is_empty() || lost_both_ways(&log), "no loss injected? {log}");
});

// 50 parallel downloads (256 KB each) through the same impairment, all byte-exact.
both_modes!(curl_parallel_50_impaired, |mode| {
    let log = curl_parallel_with(mode, 256_000, &["--impair", IMPAIR]);
    assert!(log.is_empty() || lost_both_ways(&log), "no loss injected? {log}");
});

/// A SYN to a port nobody listens on is answered with RST: curl says "connection refused"
/// (exit code 7), at once rather than after a timeout.
fn closed_port(mode: Mode) {
    if skip(&["curl"]) {
        return;
    }
    let mut ns = NetNs::new();
    let _serve = serve(&mut ns, mode, &[]);
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
fn sigterm(mode: Mode) {
    if skip(&["python3"]) {
        return;
    }
    let mut ns = NetNs::new();
    let mut serve = serve(&mut ns, mode, &[]);
    // A client that idles on discard until the server ends the connection.
    let (mut child, mut lines) = waiting_client(&ns, 9, false);
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("connected"));
    std::thread::sleep(Duration::from_millis(200));
    let log = serve.stop().1;
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
fn keep_alive(mode: Mode) {
    if skip(&["curl"]) {
        return;
    }
    let mut ns = NetNs::new();
    let _serve = serve(&mut ns, mode, &[]);
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

/// Opens N connections to HOST PORT, sends one byte on each and reads its echo, prints
/// "held N", and holds them all open until stdin closes.
const IDLE_CLIENT: &str = r#"
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
socks = []
for _ in range(n):
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(b"x")
    assert s.recv(1) == b"x", "no echo"
    socks.append(s)
print("held", len(socks), flush=True)
sys.stdin.read()
"#;

/// serve's resident memory, KiB.
fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read serve's status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS line");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS value")
}

/// 1,000 idle echo connections (one byte echoed on each, then held open) cost serve at most
/// 4 KB of resident memory each: the library's state for an idle connection (about 1.6 KB)
/// and serve's own, an echo connection holding no buffer while it has nothing to send.
fn idle_echo_memory(mode: Mode) {
    if skip(&["python3"]) {
        return;
    }
    const N: u64 = 1000;
    let mut ns = NetNs::new();
    let mut serve = serve(&mut ns, mode, &["--max-connections", "2000"]);
    let pid = serve.child.id();
    std::thread::sleep(Duration::from_secs(1));
    let before = vm_rss_kib(pid);
    let mut client = ns
        .command(120, "python3")
        .args(["-c", IDLE_CLIENT, STACK_ADDR, "7", &N.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    let held = lines.next().and_then(|l| l.ok()).unwrap_or_default();
    std::thread::sleep(Duration::from_secs(1));
    let after = vm_rss_kib(pid);
    drop(client.stdin.take());
    let _ = client.wait();
    let log = serve.stop().1;
    assert_eq!(held, format!("held {N}"), "the client did not open its connections\nserve: {log}");
    let per_conn = after.saturating_sub(before) * 1024 / N;
    eprintln!("serve VmRSS {before} KiB idle, {after} KiB with {N} idle echo connections: {per_conn} B each");
    assert!(per_conn <= 4096, "{per_conn} bytes of RSS per idle echo connection, over 4096\nserve: {log}");
}
both_modes!(idle_echo_1000_memory, idle_echo_memory);
