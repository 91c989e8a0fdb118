//! The stack as the TCP client against Linux (`ackclock fetch` downloading from
//! `python3 -m http.server` inside a private namespace), and transfers both ways under loss,
//! delay and reordering: injected by `phy::Impaired` around the TAP (`--impair`), or by
//! nftables `numgen random` drops on the Linux side inside the namespace.
//!
//! Needs root, /dev/net/tun, curl, python3, nft and tshark (each test checks what it uses):
//! without them the tests print SKIP and pass. Every child is bounded in time and stopped
//! on drop; namespaces go with their `NetNs` (nftables tables with them), files with their
//! `TempDir`.
#![cfg(target_os = "linux")]

#[macro_use]
mod common;

use common::interop::{
    cli, file_sha256, finish_curl, handshake_fields, json_u64, pattern_sha256, random_file, serve, skip, Mode, Proc,
    TempDir, HOST_CIDR, STACK_ADDR, STACK_CIDR,
};
use common::netns::NetNs;
use std::path::Path;
use std::process::{Command, Stdio};

const HOST_ADDR: &str = "10.77.0.1";
/// 2% loss, 20 ms delay, 5% of frames 10 ms later still: each way.
const IMPAIR: &str = "loss=2%,delay=20ms,reorder=5%:10ms";

/// `python3 -m http.server 8000` inside the namespace (its own port space), serving `dir`.
fn ns_http_server(ns: &NetNs, dir: &Path) -> Proc {
    let mut cmd = ns.command(600, "python3");
    cmd.args(["-u", "-m", "http.server", "8000", "--directory"]).arg(dir);
    Proc::start("http.server", cmd, "Serving HTTP").0
}

/// What `ackclock fetch` did: its exit status, the JSON it printed, its stderr.
struct Fetched {
    ok: bool,
    json: String,
    log: String,
}

/// `ackclock fetch` of `url` (`-o out`) over a TAP moved into `ns`, with `extra` options.
fn fetch(ns: &mut NetNs, mode: Mode, url: &str, out: &Path, extra: &[&str], timeout_secs: u64) -> Fetched {
    let tap = ns.tap_name().to_string();
    ns.adopt(&tap);
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", &timeout_secs.to_string()]).arg(cli());
    cmd.args(["fetch", url, "--tap", &tap, "--addr", STACK_CIDR, "--host-addr", HOST_CIDR, "--netns", ns.name()]);
    cmd.args(["--json", "--timeout", &timeout_secs.saturating_sub(5).to_string(), "-o"]).arg(out).args(extra);
    if mode == Mode::Plain {
        cmd.arg("--plain");
    }
    let o = cmd.output().expect("run ackclock fetch");
    Fetched {
        ok: o.status.success(),
        json: String::from_utf8_lossy(&o.stdout).trim().to_string(),
        log: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// curl `/bytes/n` from serve inside the namespace; checks length and content.
fn curl_pattern(ns: &NetNs, n: u64, timeout_secs: u64) {
    let child = ns
        .command(timeout_secs, "curl")
        .args(["-sS", "--fail", "-o", "-", &format!("http://{STACK_ADDR}/bytes/{n}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn curl");
    let (total, sum, status, err) = finish_curl(child);
    assert!(status.success(), "curl: {status} {err}");
    assert_eq!(total, n, "body length");
    assert!(sum == pattern_sha256(n), "body SHA-256 differs from the pattern's");
}

/// 2% random drops by nftables on the namespace's side of the TAP, both ways, counted.
fn nft_loss(ns: &NetNs) {
    let tap = ns.tap_name();
    let rules: [&[&str]; 5] = [
        &["add", "table", "inet", "lossy"],
        &["add", "chain", "inet", "lossy", "out", "{ type filter hook output priority 0; }"],
        &["add", "chain", "inet", "lossy", "in", "{ type filter hook input priority 0; }"],
        &[
            "add", "rule", "inet", "lossy", "out", "oifname", tap, "numgen", "random", "mod", "100", "<", "2",
            "counter", "drop",
        ],
        &[
            "add", "rule", "inet", "lossy", "in", "iifname", tap, "numgen", "random", "mod", "100", "<", "2",
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

// ---------------------------------------------------------------------------------------
// The stack as the client.

/// Download a 10 MB file from Linux (`http.server` in the namespace) with `extra` options;
/// the bytes must be the file's. Returns what fetch said. `lossy`: with nftables drops; a
/// run in which they dropped nothing (offload mode moves 10 MB in ~200 GSO packets, so that
/// happens a few times in a hundred) proves nothing and is repeated, up to 3 runs.
fn download(mode: Mode, extra: &[&str], lossy: bool) -> Fetched {
    let dir = TempDir::new();
    let n = 10 * 1024 * 1024;
    let want = random_file(&dir.0, "f.bin", n, 0xfe7c);
    for attempt in 1.. {
        let mut ns = NetNs::new();
        if lossy {
            nft_loss(&ns);
        }
        let _server = ns_http_server(&ns, &dir.0);
        let out = dir.0.join("got");
        let f = fetch(&mut ns, mode, &format!("http://{HOST_ADDR}:8000/f.bin"), &out, extra, 180);
        assert!(f.ok, "fetch failed: {}\n{}", f.json, f.log);
        assert_eq!(json_u64(&f.json, "status"), Some(200), "{}", f.json);
        assert_eq!(json_u64(&f.json, "bytes"), Some(n as u64), "{}", f.json);
        assert_eq!(std::fs::metadata(&out).map(|m| m.len()).ok(), Some(n as u64), "file length");
        assert!(file_sha256(&out) == want, "downloaded bytes differ from the file's");
        if !lossy {
            return f;
        }
        let (out, inp) = nft_dropped(&ns);
        eprintln!("attempt {attempt}: nftables dropped {out} packets out, {inp} in; {}", f.log);
        if out + inp > 0 {
            return f;
        }
        assert!(attempt < 3, "nftables dropped nothing in 3 runs: {}", f.log);
    }
    unreachable!()
}

both_modes!(fetch_10mb, |mode| {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let f = download(mode, &[], false);
    assert!(f.json.contains("\"complete\":true"), "{}", f.json);
    // The GET is blocking code on the library's runtime: its counters are in the report,
    // and the blocked reader watched the device (`TapRounds::Watch`).
    assert!(f.json.contains("\"runtime\":{"), "{}", f.json);
    assert!(json_u64(&f.json, "watches").is_some_and(|w| w > 0), "the reader watched the device: {}", f.json);
});

both_modes!(fetch_10mb_impaired, |mode| {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let spec = format!("{IMPAIR},seed=11");
    let f = download(mode, &["--impair", &spec], false);
    // "impairment: tx ... N lost ...; rx ... M lost": frames were lost both ways.
    let lost: Vec<u64> =
        f.log.split(" lost").filter_map(|s| s.rsplit(' ').next().and_then(|n| n.parse().ok())).collect();
    assert!(lost.len() == 2 && lost.iter().all(|&l| l > 0), "no loss injected? {}", f.log);
});

both_modes!(fetch_10mb_nft_loss, |mode| {
    if skip(&["python3", "timeout", "nft"]) {
        return;
    }
    download(mode, &[], true);
});

/// Routing through a default gateway (`--gateway`): the file is served from 10.88.0.1, an
/// address on the namespace's loopback and off the TAP's 10.77.0.0/24, so the stack must send
/// to the gateway's MAC (Linux's side of the TAP, 10.77.0.1), which delivers it locally and
/// answers back through its route to 10.77.0.0/24. Without `--gateway` fetch refuses the URL.
#[test]
fn fetch_through_the_default_gateway() {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let dir = TempDir::new();
    let n = 1024 * 1024;
    let want = random_file(&dir.0, "f.bin", n, 0x6a7e);
    let mut ns = NetNs::new();
    ns.ip(&["addr", "add", "10.88.0.1/32", "dev", "lo"]);
    let _server = ns_http_server(&ns, &dir.0);
    let out = dir.0.join("got");
    let url = "http://10.88.0.1:8000/f.bin";
    let refused = fetch(&mut NetNs::new(), Mode::Offload, url, &out, &[], 30);
    assert!(!refused.ok && refused.log.contains("--gateway"), "{}", refused.log);
    let f = fetch(&mut ns, Mode::Offload, url, &out, &["--gateway", HOST_ADDR], 60);
    assert!(f.ok, "fetch failed: {}\n{}", f.json, f.log);
    assert_eq!(json_u64(&f.json, "bytes"), Some(n as u64), "{}", f.json);
    assert!(file_sha256(&out) == want, "downloaded bytes differ from the file's");
}

/// The handshake's options, from fetch's own capture (`--pcap`): the stack's SYN and
/// Linux's SYN-ACK both carry MSS, window scale, SACK-permitted and timestamps.
#[test]
fn handshake_options_in_pcap() {
    if skip(&["python3", "timeout", "tshark"]) {
        return;
    }
    let dir = TempDir::new();
    random_file(&dir.0, "small", 1000, 3);
    let mut ns = NetNs::new();
    let _server = ns_http_server(&ns, &dir.0);
    let pcap = dir.0.join("fetch.pcap");
    let out = dir.0.join("got");
    let f = fetch(
        &mut ns,
        Mode::Offload,
        &format!("http://{HOST_ADDR}:8000/small"),
        &out,
        &["--pcap", pcap.to_str().unwrap()],
        60,
    );
    assert!(f.ok && json_u64(&f.json, "bytes") == Some(1000), "fetch: {}\n{}", f.json, f.log);
    let text = handshake_fields(&pcap);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
    let syn = rows.iter().find(|r| r[0] == STACK_ADDR && r[1] == "0").unwrap_or_else(|| panic!("no SYN:\n{text}"));
    let synack =
        rows.iter().find(|r| r[0] == HOST_ADDR && r[1] == "1").unwrap_or_else(|| panic!("no SYN-ACK:\n{text}"));
    for (what, r) in [("ackclock SYN", syn), ("Linux SYN-ACK", synack)] {
        assert!(r.len() == 6 && r[2..].iter().all(|f| !f.is_empty()), "{what} lacks an option: {r:?}\n{text}");
        assert_eq!(r[2], "1460", "{what} MSS");
    }
    // Both scale shifts made it into the connection (fetch reports them from tcp_info).
    let shift = |r: &Vec<&str>| r[3].parse::<u64>().unwrap();
    assert_eq!(json_u64(&f.json, "rcv_wscale"), Some(shift(syn)), "{}", f.json);
    assert_eq!(json_u64(&f.json, "snd_wscale"), Some(shift(synack)), "{}", f.json);
}

// ---------------------------------------------------------------------------------------
// The stack as the server, under loss: serve's 1 MB download to curl.

both_modes!(serve_curl_1mb_impaired, |mode| {
    if skip(&["curl"]) {
        return;
    }
    let mut ns = NetNs::new();
    let spec = format!("{IMPAIR},seed=5");
    let mut serve = serve(&mut ns, mode, &["--impair", &spec]);
    curl_pattern(&ns, 1_000_000, 120);
    let (_, log) = serve.stop();
    assert!(log.contains("impairment: tx") && !log.contains("tx 0 passed, 0 lost"), "{log}");
    let tx_lost = log
        .split("impairment: tx ")
        .nth(1)
        .and_then(|s| s.split(" lost").next())
        .and_then(|s| s.rsplit(' ').next().and_then(|n| n.parse::<u64>().ok()));
    assert!(tx_lost.is_some_and(|l| l > 0), "serve lost none of what it sent: {log}");
});

both_modes!(serve_curl_1mb_nft_loss, |mode| {
    if skip(&["curl", "nft"]) {
        return;
    }
    let mut ns = NetNs::new();
    nft_loss(&ns);
    let mut serve = serve(&mut ns, mode, &[]);
    // Until nftables has dropped something (see `download`), at most 3 downloads.
    for attempt in 1.. {
        curl_pattern(&ns, 1_000_000, 120);
        let (out, inp) = nft_dropped(&ns);
        eprintln!("attempt {attempt}: nftables dropped {out} packets out, {inp} in");
        if out + inp > 0 {
            break;
        }
        assert!(attempt < 3, "nftables dropped nothing in 3 runs");
    }
    // curl returns once it has the body; the close handshake may still be repairing a
    // dropped FIN or ACK (an RTO of 200 ms or more, perhaps twice). Let it finish first.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (_, log) = serve.stop();
    assert!(log.contains("(0 reset at exit)"), "{log}");
});
