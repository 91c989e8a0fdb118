//! `ackclock relay` against Linux: curl and Python clients inside a private network
//! namespace, the relay (in the root namespace) with its TAP moved into it, and servers on
//! 127.0.0.1 of the root namespace that the relay's host sockets reach.
//!
//! Needs root, /dev/net/tun, curl, python3 (and tshark for the options test): without them
//! every test prints SKIP and passes. Every child process is bounded in time and stopped on
//! drop; namespaces go with their `NetNs`, temporary files with their `TempDir`.
#![cfg(target_os = "linux")]

#[macro_use]
mod common;

use common::clients::ECHO_CLIENT;
use common::interop::{
    cli, finish_curl, handshake_fields, random_file, skip, waiting_client, Mode, Proc, TempDir, HOST_CIDR, STACK_ADDR,
    STACK_CIDR,
};
use common::netns::NetNs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `python3 -m http.server` on 127.0.0.1 of the root namespace, serving `dir`; its port.
fn host_http_server(dir: &Path) -> (Proc, u16) {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "600", "python3", "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory"]);
    cmd.arg(dir);
    let (p, line) = Proc::start("http.server", cmd, "Serving HTTP");
    // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
    let port = line.split_whitespace().skip_while(|w| *w != "port").nth(1).and_then(|p| p.parse().ok());
    (p, port.unwrap_or_else(|| panic!("no port in {line:?}")))
}

/// `ackclock relay` on a TAP moved into `ns`, to 127.0.0.1:`port`, with `extra` options.
fn relay(ns: &mut NetNs, mode: Mode, to: u16, extra: &[&str]) -> Proc {
    let tap = ns.tap_name().to_string();
    ns.adopt(&tap);
    let mut cmd = Command::new(cli());
    cmd.args(["relay", "--tap", &tap, "--addr", STACK_CIDR, "--host-addr", HOST_CIDR, "--netns", ns.name()]);
    cmd.args(["--to", &format!("127.0.0.1:{to}")]).args(extra);
    if mode == Mode::Plain {
        cmd.arg("--plain");
    }
    Proc::start("relay", cmd, "ready").0
}

/// Run curl inside the namespace, body to stdout; (bytes, SHA-256, exit code, stderr).
fn curl(ns: &NetNs, url: &str, timeout_secs: u64) -> (u64, [u8; 32], Option<i32>, String) {
    let child = ns
        .command(timeout_secs, "curl")
        .args(["-sS", "--fail", "-o", "-", url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn curl");
    let (total, sum, status, err) = finish_curl(child);
    (total, sum, status.code(), err)
}

/// Fetch `url` with curl inside `ns` and check it got the `len`-byte file whose SHA-256 is
/// `want`.
#[track_caller]
fn curl_file(ns: &NetNs, url: &str, timeout_secs: u64, len: usize, want: &[u8; 32]) {
    let (got, sum, code, err) = curl(ns, url, timeout_secs);
    assert_eq!(code, Some(0), "curl {url}: {err}");
    assert_eq!(got, len as u64, "{url}: body length");
    assert!(sum == *want, "{url}: body SHA-256 differs from the file's");
}

/// The number after `"key":` in a JSON text (the first occurrence after `after`).
fn json_u64(text: &str, after: &str, key: &str) -> Option<u64> {
    common::interop::json_u64(&text[text.find(after)?..], key)
}

// ---------------------------------------------------------------------------------------
// The tests.

/// curl in the namespace -> relay -> http.server on host loopback: a 10 MB file, hashed,
/// on two listening ports; the relay's JSON report counts the bytes.
fn curl_10mb(mode: Mode) {
    curl_10mb_with(mode, &[]);
}
both_modes!(curl_10mb_via_host_loopback, curl_10mb);

/// The same with the relay's tasks on two tokio workers, where the protocol thread receives
/// the frames (with one, the default, the tasks' thread does).
fn curl_10mb_two_workers(mode: Mode) {
    curl_10mb_with(mode, &["--workers", "2"]);
}
both_modes!(curl_10mb_on_two_workers, curl_10mb_two_workers);

fn curl_10mb_with(mode: Mode, extra: &[&str]) {
    if skip(&["curl", "python3", "timeout"]) {
        return;
    }
    let dir = TempDir::new();
    let n = 10 * 1024 * 1024;
    let want = random_file(&dir.0, "f.bin", n, 0x5eed);
    let (_server, port) = host_http_server(&dir.0);
    let mut ns = NetNs::new();
    let args = [&["--listen", "80,8080", "--json"], extra].concat();
    let mut relay = relay(&mut ns, mode, port, &args);
    for url in [format!("http://{STACK_ADDR}/f.bin"), format!("http://{STACK_ADDR}:8080/f.bin")] {
        curl_file(&ns, &url, 120, n, &want);
    }
    // curl exits once it has Content-Length bytes; its FIN may still be on its way through
    // the relay, which would then count the connection as reset at exit.
    std::thread::sleep(Duration::from_millis(500));
    let (out, err) = relay.stop_ok();
    let json = out.lines().last().unwrap_or("");
    assert_eq!(json_u64(json, "\"total\"", "connections"), Some(2), "{json}\n{err}");
    assert_eq!(json_u64(json, "\"total\"", "reset_at_exit"), Some(0), "{json}");
    let down = json_u64(json, "\"total\"", "down").unwrap();
    assert!(down > 2 * n as u64 && down < 2 * n as u64 + 4096, "down {down}: body and two heads\n{json}");
    assert!(json.matches("\"end\":\"closed\"").count() == 2, "{json}");
    assert!(err.contains("-> 10.77.0.2:80:") && err.contains("-> 10.77.0.2:8080:"), "per-connection lines:\n{err}");
}

/// tun2socks-style: with `--listen any` the relay takes connections to any address and
/// port routed into the TAP. The namespace routes 198.18.0.0/15 (the benchmarking range,
/// RFC 2544) via the stack; curl fetches from two addresses and ports the stack does not
/// own, both relayed to the one host server; the report names each original destination,
/// and the JSON carries it.
fn curl_any_destination(mode: Mode) {
    if skip(&["curl", "python3", "timeout"]) {
        return;
    }
    let dir = TempDir::new();
    let n = 1024 * 1024;
    let want = random_file(&dir.0, "f.bin", n, 0xa11);
    let (_server, port) = host_http_server(&dir.0);
    let mut ns = NetNs::new();
    let mut relay = relay(&mut ns, mode, port, &["--listen", "any", "--json"]);
    ns.ip(&["route", "add", "198.18.0.0/15", "via", STACK_ADDR]);
    for url in ["http://198.18.3.4:8080/f.bin", "http://198.19.200.1/f.bin"] {
        curl_file(&ns, url, 60, n, &want);
    }
    std::thread::sleep(Duration::from_millis(500));
    let (out, err) = relay.stop_ok();
    let json = out.lines().last().unwrap_or("");
    assert_eq!(json_u64(json, "\"total\"", "connections"), Some(2), "{json}\n{err}");
    assert!(err.contains("-> 198.18.3.4:8080:") && err.contains("-> 198.19.200.1:80:"), "per-connection lines:\n{err}");
    assert!(json.contains("\"dest\":\"198.18.3.4:8080\""), "{json}");
}
both_modes!(curl_any_destination_address_and_port, curl_any_destination);

/// A host-loopback TCP server for the half-close tests. `echo`: echo until EOF, then
/// close. `first`: send N bytes, half-close, then read to EOF. `reset`: read N bytes, then
/// reset the connection (SO_LINGER 0). It prints `port P` when
/// listening, and what it did at the end.
const HOST_SERVER: &str = r#"
import hashlib, random, socket, struct, sys
mode, n = sys.argv[1], int(sys.argv[2])
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(4)
print("port", ls.getsockname()[1], "ready", flush=True)
c, _ = ls.accept()
c.settimeout(120)
if mode == "echo":
    total = 0
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        c.sendall(b)
        total += len(b)
    c.close()
    print("echoed", total, flush=True)
elif mode == "reset":
    total = 0
    while total < n:
        b = c.recv(1 << 16)
        if not b:
            break
        total += len(b)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    print("reset after", total, flush=True)
else:
    c.sendall(random.Random(9).randbytes(n))
    c.shutdown(socket.SHUT_WR)
    h, total = hashlib.sha256(), 0
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        h.update(b)
        total += len(b)
    c.close()
    print("received", total, h.hexdigest() == hashlib.sha256(random.Random(7).randbytes(n)).hexdigest(), flush=True)
"#;

fn host_server(mode: &str, n: usize) -> (Proc, u16) {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "300", "python3", "-u", "-c", HOST_SERVER, mode, &n.to_string()]);
    let (p, line) = Proc::start("host server", cmd, "ready");
    let port = line.split_whitespace().nth(1).and_then(|p| p.parse().ok());
    (p, port.unwrap_or_else(|| panic!("no port in {line:?}")))
}

/// Wait (bounded) for the host server's last line.
fn server_result(p: &mut Proc) -> String {
    p.lines.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|e| format!("no result: {e}"))
}

/// The peer (ECHO_CLIENT) sends 10 MB while reading, then half-closes; its FIN reaches
/// the host server as EOF (shutdown(Write) on the host socket), whose close comes back as
/// the stack's FIN.
fn echo_half_close(mode: Mode) {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let n = 10 * 1024 * 1024;
    let (mut server, port) = host_server("echo", 0);
    let mut ns = NetNs::new();
    let mut relay = relay(&mut ns, mode, port, &["--listen", "7"]);
    let out = ns
        .command(180, "python3")
        .args(["-c", ECHO_CLIENT, STACK_ADDR, "7", &n.to_string()])
        .output()
        .expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    let said = server_result(&mut server);
    let (_, log) = relay.stop_ok();
    assert!(out.status.success(), "echo client: {text} {}\nrelay: {log}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), format!("{n} True"), "relay: {log}");
    assert_eq!(said, format!("echoed {n}"));
    assert!(log.contains(&format!("{n} bytes up, {n} bytes down")) && log.contains("closed"), "{log}");
}
both_modes!(echo_10mb_half_close, echo_half_close);

/// The other way round: the host server sends 1 MB and half-closes first; the peer reads
/// to that EOF (the stack's FIN) while its own direction stays open, then sends 1 MB and
/// closes, and the host server gets all of it.
const FIRST_CLIENT: &str = r#"
import random, socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection((host, port), timeout=60)
got = bytearray()
while True:
    b = s.recv(1 << 20)
    if not b:
        break
    got += b
ok = bytes(got) == random.Random(9).randbytes(n)
s.sendall(random.Random(7).randbytes(n))
s.close()
print(len(got), ok)
"#;

fn host_half_closes_first(mode: Mode) {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let n = 1024 * 1024;
    let (mut server, port) = host_server("first", n);
    let mut ns = NetNs::new();
    let mut relay = relay(&mut ns, mode, port, &["--listen", "9000"]);
    let out = ns
        .command(120, "python3")
        .args(["-c", FIRST_CLIENT, STACK_ADDR, "9000", &n.to_string()])
        .output()
        .expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    let said = server_result(&mut server);
    let (_, log) = relay.stop_ok();
    assert!(out.status.success(), "client: {text} {}\nrelay: {log}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), format!("{n} True"), "relay: {log}");
    assert_eq!(said, format!("received {n} True"), "relay: {log}");
}
both_modes!(host_half_closes_first, host_half_closes_first);

/// The peer uploads without pause and the host server resets its connection after 1 MB:
/// the relay's vectored write of the peer's segments fails, and that ends this connection
/// with a reset of the peer (its `sendall` fails), not the relay, which still runs and
/// exits 0 when stopped. (The relay keeps SIGPIPE ignored for this: `relay_memory`'s
/// iperf3 runs end with host resets that a SIGPIPE would turn into the relay's death.)
fn host_resets_during_upload(mode: Mode) {
    if skip(&["python3", "timeout"]) {
        return;
    }
    const UPLOAD: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
chunk, sent = bytes(1 << 16), 0
try:
    while sent < 200 << 20:
        s.sendall(chunk)
        sent += len(chunk)
    print("sent all", sent)
except OSError as e:
    print("reset", type(e).__name__)
"#;
    let n = 1 << 20;
    let (mut server, port) = host_server("reset", n);
    let mut ns = NetNs::new();
    let mut relay = relay(&mut ns, mode, port, &["--listen", "9001"]);
    let out = ns.command(60, "python3").args(["-c", UPLOAD, STACK_ADDR, "9001"]).output().expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    let said = server_result(&mut server);
    let read: usize = said.strip_prefix("reset after ").and_then(|t| t.parse().ok()).unwrap_or(0);
    assert!(read >= n, "the host server: {said}");
    assert!(text.starts_with("reset"), "the upload was not reset: {text}");
    // Still running, and it exits 0 (a death by SIGPIPE fails here).
    let (_, log) = relay.stop_ok();
    assert!(log.contains("host: Connection reset by peer") || log.contains("host: Broken pipe"), "{log}");
}
both_modes!(host_reset_during_upload_ends_one_connection, host_resets_during_upload);

/// Nothing listens at `--to`: the accepted connection is reset, and curl says so at once.
fn host_refuses(mode: Mode) {
    if skip(&["curl"]) {
        return;
    }
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut ns = NetNs::new();
    let mut relay = relay(&mut ns, mode, port, &[]);
    let t0 = std::time::Instant::now();
    let out = ns
        .command(30, "curl")
        .args(["-sS", "--max-time", "10", &format!("http://{STACK_ADDR}/")])
        .output()
        .expect("run curl");
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    let (_, log) = relay.stop_ok();
    // The RST may land before curl has seen its connect complete (7: couldn't connect) or
    // after it sent the request (56: receive failure; 55: send failure; 52: empty reply);
    // never a timeout (28).
    let code = out.status.code();
    assert!(matches!(code, Some(7 | 52 | 55 | 56)), "curl {code:?}: {err}\nrelay: {log}");
    assert!(took < Duration::from_secs(5), "curl took {took:?}");
    assert!(log.contains("connect: Connection refused"), "{log}");
}
both_modes!(host_refused_resets_peer, host_refuses);

/// SIGTERM with a connection open: both sides are reset, the relay exits 0 and reports it.
#[test]
fn sigterm_resets_both_sides() {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let (server, port) = host_server("echo", 0);
    let mut ns = NetNs::new();
    let mut relay = relay(&mut ns, Mode::Offload, port, &["--listen", "7", "--json"]);
    let (mut child, mut lines) = waiting_client(&ns, 7, true);
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("connected"));
    let (out, log) = relay.stop_ok();
    assert!(log.contains("1 reset at exit") && log.contains("1000 bytes up, 1000 bytes down"), "{log}");
    assert_eq!(json_u64(&out, "\"total\"", "reset_at_exit"), Some(1), "{out}");
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("reset"));
    let _ = child.wait();
    // The host side was reset too: the echo server's recv fails, so it prints nothing.
    assert!(server.lines.recv_timeout(Duration::from_secs(5)).is_err(), "host server saw a clean EOF");
}

/// The handshake's options, from the relay's own capture (`--pcap`): Linux's SYN and the
/// stack's SYN-ACK both carry MSS, window scale, SACK-permitted and timestamps.
#[test]
fn handshake_options_in_pcap() {
    if skip(&["curl", "python3", "tshark", "timeout"]) {
        return;
    }
    let dir = TempDir::new();
    random_file(&dir.0, "small", 1000, 1);
    let (_server, port) = host_http_server(&dir.0);
    let mut ns = NetNs::new();
    let pcap = dir.0.join("relay.pcap");
    let mut relay = relay(&mut ns, Mode::Offload, port, &["--pcap", pcap.to_str().unwrap()]);
    let (len, _, code, err) = curl(&ns, &format!("http://{STACK_ADDR}/small"), 30);
    assert_eq!((code, len), (Some(0), 1000), "curl: {err}");
    relay.stop_ok();
    let text = handshake_fields(&pcap);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
    let syn = rows.iter().find(|r| r[0] == "10.77.0.1" && r[1] == "0").unwrap_or_else(|| panic!("no SYN:\n{text}"));
    let synack =
        rows.iter().find(|r| r[0] == STACK_ADDR && r[1] == "1").unwrap_or_else(|| panic!("no SYN-ACK:\n{text}"));
    for (what, r) in [("Linux SYN", syn), ("ackclock SYN-ACK", synack)] {
        assert!(r.len() == 6 && r[2..].iter().all(|f| !f.is_empty()), "{what} lacks an option: {r:?}\n{text}");
        assert_eq!(r[2], "1460", "{what} MSS");
    }
}
