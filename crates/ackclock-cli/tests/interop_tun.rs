//! The stack on a TUN (IP packets, no link header, no ARP) against Linux: `ackclock serve`,
//! `relay` and `fetch` with `--tun`, the TUN moved into a private network namespace made
//! (and removed) by each test, Linux tools inside it as peers: ping, curl, python3, nft.
//!
//! Needs root, /dev/net/tun and the tools each test names: without them the test prints
//! SKIP and passes. Every test runs in both modes, plain and offload (virtio-net header with
//! checksum and segmentation offload, and coalesced receives). Every wait is bounded.
#![cfg(target_os = "linux")]

#[macro_use]
mod common;

use common::clients::ECHO_CLIENT;
use common::interop::{
    cli, file_sha256, finish_curl, json_u64, pattern_sha256, random_file, serve_on, skip, Mode, Proc, TempDir,
    HOST_CIDR, STACK_ADDR, STACK_CIDR,
};
use common::netns::NetNs;
use std::path::Path;
use std::process::{Child, Command, Stdio};

fn serve(ns: &mut NetNs, mode: Mode, extra: &[&str]) -> Proc {
    serve_on(ns, "--tun", mode, extra)
}

/// Start `curl` inside the namespace for `url`, body to stdout.
fn spawn_curl(ns: &NetNs, url: &str, timeout_secs: u64) -> Child {
    ns.command(timeout_secs, "curl")
        .args(["-sS", "--fail", "-o", "-", url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn curl")
}

/// curl downloads `/bytes/n` from serve; the body's length and SHA-256 are the pattern's.
#[track_caller]
fn curl_pattern(ns: &NetNs, n: u64, timeout_secs: u64) {
    let (len, sum, status, err) = finish_curl(spawn_curl(ns, &format!("http://{STACK_ADDR}/bytes/{n}"), timeout_secs));
    assert!(status.success(), "curl failed: {status} {err}");
    assert_eq!(len, n, "body length");
    assert!(sum == pattern_sha256(n), "body SHA-256 differs from the pattern's");
}

/// Python sends `n` bytes to echo (7) while reading, half-closes, and reads to EOF.
#[track_caller]
fn echo_half_close(ns: &NetNs, n: usize) {
    let out = ns
        .command(300, "python3")
        .args(["-c", ECHO_CLIENT, STACK_ADDR, "7", &n.to_string()])
        .output()
        .expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "echo client: {text} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), format!("{n} True"), "every byte back, then EOF");
}

// ---------------------------------------------------------------------------------------
// serve --tun

// RFC 1122 §3.2.2.6: the stack answers echo requests; over a TUN no ARP comes first.
both_modes!(ping, |mode| {
    if skip(&["ping"]) {
        return;
    }
    let mut ns = NetNs::new();
    let mut serve = serve(&mut ns, mode, &[]);
    let out = ns.command(30, "ping").args(["-c", "3", "-i", "0.2", "-W", "2", STACK_ADDR]).output().expect("run ping");
    let text = String::from_utf8_lossy(&out.stdout);
    let log = serve.stop().1;
    assert!(out.status.success(), "ping: {text}\nserve: {log}");
    assert!(text.contains("3 packets transmitted, 3 received"), "{text}");
});

// A 20 MB download, byte-exact; in offload mode the stack's TSO frames are cut by the
// kernel's side of the TUN.
both_modes!(curl_20mb, |mode| {
    if skip(&["curl"]) {
        return;
    }
    let mut ns = NetNs::new();
    let mut serve = serve(&mut ns, mode, &[]);
    curl_pattern(&ns, 20_000_000, 120);
    let log = serve.stop().1;
    if mode == Mode::Offload {
        assert!(!log.contains("(0 TSO)"), "no TSO frame sent: {log}");
    }
});

// 50 concurrent downloads of 1 MB each, all byte-exact.
both_modes!(curl_parallel_50, |mode| {
    if skip(&["curl"]) {
        return;
    }
    let mut ns = NetNs::new();
    let _serve = serve(&mut ns, mode, &[]);
    let n = 1_000_000;
    let want = pattern_sha256(n);
    let url = format!("http://{STACK_ADDR}/bytes/{n}");
    let children: Vec<Child> = (0..50).map(|_| spawn_curl(&ns, &url, 240)).collect();
    let readers: Vec<_> = children.into_iter().map(|c| std::thread::spawn(move || finish_curl(c))).collect();
    for (i, r) in readers.into_iter().enumerate() {
        let (len, sum, status, err) = r.join().unwrap();
        assert!(status.success(), "curl #{i} failed: {status} {err}");
        assert_eq!(len, n, "curl #{i} body length");
        assert!(sum == want, "curl #{i} body differs from the pattern");
    }
});

// A half-closed echo of 10 MB (RFC 9293 §3.6: data still flows toward the side that sent
// its FIN); in offload mode Linux's bytes arrive as coalesced GSO packets with partial
// checksums.
both_modes!(echo_10mb_half_close, |mode| {
    if skip(&["python3"]) {
        return;
    }
    let mut ns = NetNs::new();
    let mut serve = serve(&mut ns, mode, &[]);
    echo_half_close(&ns, 10 * 1024 * 1024);
    let log = serve.stop().1;
    if mode == Mode::Offload {
        assert!(!log.contains("(0 GSO") && !log.contains(" 0 partial csum"), "no offload seen: {log}");
    }
});

/// 2% random drops by nftables on the namespace's side of the TUN, both ways, counted.
fn nft_loss(ns: &NetNs) {
    let tun = ns.tap_name();
    let rules: [&[&str]; 5] = [
        &["add", "table", "inet", "lossy"],
        &["add", "chain", "inet", "lossy", "out", "{ type filter hook output priority 0; }"],
        &["add", "chain", "inet", "lossy", "in", "{ type filter hook input priority 0; }"],
        &[
            "add", "rule", "inet", "lossy", "out", "oifname", tun, "numgen", "random", "mod", "100", "<", "2",
            "counter", "drop",
        ],
        &[
            "add", "rule", "inet", "lossy", "in", "iifname", tun, "numgen", "random", "mod", "100", "<", "2",
            "counter", "drop",
        ],
    ];
    for r in rules {
        let o = ns.command(10, "nft").args(r).output().expect("run nft");
        assert!(o.status.success(), "nft {}: {}", r.join(" "), String::from_utf8_lossy(&o.stderr));
    }
}

/// Packets the `lossy` table dropped (out, in).
fn nft_dropped(ns: &NetNs) -> (u64, u64) {
    let o = ns.command(10, "nft").args(["list", "table", "inet", "lossy"]).output().expect("run nft");
    let text = String::from_utf8_lossy(&o.stdout);
    let counts: Vec<u64> = text
        .split("counter packets ")
        .skip(1)
        .filter_map(|s| s.split_whitespace().next().and_then(|n| n.parse().ok()))
        .collect();
    assert_eq!(counts.len(), 2, "nft ruleset:\n{text}");
    (counts[0], counts[1])
}

// Under 2% loss each way (nftables `numgen random`): a 10 MB download and a 4 MB
// half-closed echo, byte-exact. A run in which nftables dropped nothing in one of the
// directions (offload mode moves few, large packets) proves little and is repeated, up to
// 3 runs.
both_modes!(nft_loss_2pct, |mode| {
    if skip(&["curl", "python3", "nft"]) {
        return;
    }
    for attempt in 1.. {
        let mut ns = NetNs::new();
        let mut serve = serve(&mut ns, mode, &[]);
        nft_loss(&ns);
        curl_pattern(&ns, 10_000_000, 180);
        echo_half_close(&ns, 4 * 1024 * 1024);
        let (out, inp) = nft_dropped(&ns);
        let log = serve.stop().1;
        eprintln!("attempt {attempt}: nftables dropped {out} packets out, {inp} in; {log}");
        if out > 0 && inp > 0 {
            break;
        }
        assert!(attempt < 3, "nftables dropped nothing one way in 3 runs");
    }
});

// ---------------------------------------------------------------------------------------
// relay --tun and fetch --tun

/// `python3 -m http.server` on 127.0.0.1 of the root namespace, serving `dir`; its port.
fn host_http_server(dir: &Path) -> (Proc, u16) {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "600", "python3", "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory"]);
    cmd.arg(dir);
    let (p, line) = Proc::start("http.server", cmd, "Serving HTTP");
    let port = line.split_whitespace().skip_while(|w| *w != "port").nth(1).and_then(|p| p.parse().ok());
    (p, port.unwrap_or_else(|| panic!("no port in {line:?}")))
}

// tun2socks-style over a TUN: `relay --tun --listen any`, the namespace routing
// 198.18.0.0/15 into the TUN (no next hop: the link is point to point); curl fetches a
// 10 MB file from two addresses the stack does not own, relayed to one host server.
both_modes!(relay_listen_any, |mode| {
    if skip(&["curl", "python3", "timeout"]) {
        return;
    }
    let dir = TempDir::new();
    let n = 10 * 1024 * 1024;
    let want = random_file(&dir.0, "f.bin", n, 0x7e11);
    let (_server, port) = host_http_server(&dir.0);
    let mut ns = NetNs::new();
    let tun = ns.tap_name().to_string();
    ns.adopt(&tun);
    let mut cmd = Command::new(cli());
    cmd.args(["relay", "--tun", &tun, "--addr", STACK_CIDR, "--host-addr", HOST_CIDR, "--netns", ns.name()]);
    cmd.args(["--to", &format!("127.0.0.1:{port}"), "--listen", "any", "--json"]);
    if mode == Mode::Plain {
        cmd.arg("--plain");
    }
    let mut relay = Proc::start("relay", cmd, "ready").0;
    ns.ip(&["route", "add", "198.18.0.0/15", "dev", &tun]);
    for url in ["http://198.18.0.7/f.bin", "http://198.19.4.5:8443/f.bin"] {
        let (len, sum, status, err) = finish_curl(spawn_curl(&ns, url, 120));
        assert!(status.success(), "curl {url}: {status} {err}");
        assert_eq!(len, n as u64, "{url}: body length");
        assert!(sum == want, "{url}: body differs from the file's");
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (out, err) = relay.stop_ok();
    let json = out.lines().last().unwrap_or("");
    assert!(json.contains("\"dest\":\"198.18.0.7:80\"") && json.contains("\"dest\":\"198.19.4.5:8443\""), "{json}");
    assert!(err.contains("ackclock relay: 2 connections"), "{err}");
});

// `fetch --tun`: the stack as the client downloads a 10 MB file from `http.server` in the
// namespace, byte-exact.
both_modes!(fetch_10mb, |mode| {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let dir = TempDir::new();
    let n = 10 * 1024 * 1024;
    let want = random_file(&dir.0, "f.bin", n, 0xf37c);
    let mut ns = NetNs::new();
    let mut server = ns.command(600, "python3");
    server.args(["-u", "-m", "http.server", "8000", "--directory"]).arg(&dir.0);
    let _server = Proc::start("http.server", server, "Serving HTTP").0;
    let tun = ns.tap_name().to_string();
    ns.adopt(&tun);
    let got = dir.0.join("got");
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "180"]).arg(cli());
    cmd.args(["fetch", "http://10.77.0.1:8000/f.bin", "--tun", &tun, "--addr", STACK_CIDR]);
    cmd.args(["--host-addr", HOST_CIDR, "--netns", ns.name(), "--json", "--timeout", "175", "-o"]).arg(&got);
    if mode == Mode::Plain {
        cmd.arg("--plain");
    }
    let out = cmd.output().expect("run ackclock fetch");
    let (json, log) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "fetch: {json}\n{log}");
    assert_eq!(json_u64(&json, "bytes"), Some(n as u64), "{json}");
    assert!(file_sha256(&got) == want, "downloaded bytes differ from the file's");
});

// `serve --tun --pcap`: the capture's records are IP packets (LINKTYPE_RAW), and tshark reads
// the handshake from them: the stack's SYN-ACK with MSS 1460 (a 1500-byte MTU with no link
// header taken from it, RFC 9293 §3.7.1).
both_modes!(pcap_of_a_tun_is_raw_ip, |mode| {
    if skip(&["curl"]) || !common::have_tshark() {
        return;
    }
    let dir = TempDir::new();
    let pcap = dir.0.join("tun.pcap");
    let mut ns = NetNs::new();
    let mut serve = serve(&mut ns, mode, &["--pcap", pcap.to_str().unwrap()]);
    curl_pattern(&ns, 100_000, 60);
    serve.stop_ok();
    let header = std::fs::read(&pcap).expect("read the capture");
    assert_eq!(u32::from_le_bytes(header[20..24].try_into().unwrap()), 101, "LINKTYPE_RAW");
    let fields = common::interop::handshake_fields(&pcap);
    let synack = fields.lines().find(|l| l.starts_with(&format!("{STACK_ADDR}|"))).unwrap_or("");
    assert!(synack.starts_with(&format!("{STACK_ADDR}|1|1460|")), "the stack's SYN-ACK: {fields}");
});
