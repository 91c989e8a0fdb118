//! UDP through `ackclock relay` against Linux, on a TUN and on a TAP: a Python client in a
//! private namespace sends DNS-style requests to addresses the stack does not own
//! (`--listen any`), the relay carries each flow to a Python responder on 127.0.0.1 of the
//! root namespace and the answers back from the address the client asked; 10,000 datagrams
//! counted with none lost; a closed port answered with ICMP port unreachable
//! (ConnectionRefused in Python); sessions expiring when idle; malformed datagrams dropped
//! and counted.
//!
//! Needs root, /dev/net/tun, python3 and timeout: without them each test prints SKIP and
//! passes. Every wait is bounded.
#![cfg(target_os = "linux")]

#[macro_use]
mod common;

use common::interop::{cli, json_u64, skip, Mode, Proc, HOST_CIDR, STACK_ADDR, STACK_CIDR};
use common::netns::NetNs;
use std::process::Command;

/// Answers each datagram with b"re:" + the datagram, from 127.0.0.1:PORT; prints the port.
const RESPONDER: &str = r#"
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print("port", s.getsockname()[1], flush=True)
while True:
    d, a = s.recvfrom(65535)
    s.sendto(b"re:" + d, a)
"#;

/// argv: destination address, port, count, window. Sends `count` numbered requests with at
/// most `window` unanswered, checks every answer (content and source address), and prints
/// "answers N".
const CLIENT: &str = r#"
import socket, sys
dst = (sys.argv[1], int(sys.argv[2])); count = int(sys.argv[3]); window = int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
sent = got = 0
req = lambda i: b"q%06d" % i + bytes(i % 200)
while got < count:
    while sent < count and sent - got < window:
        s.sendto(req(sent), dst); sent += 1
    d, a = s.recvfrom(65535)
    assert a == dst, (a, dst)
    assert d[:3] == b"re:" and d[3:] in [req(i) for i in range(max(0, got - window), sent)], d[:16]
    got += 1
print("answers", got)
"#;

fn responder() -> (Proc, u16) {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "300", "python3", "-u", "-c", RESPONDER]);
    let (p, line) = Proc::start("responder", cmd, "port");
    let port = line.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("responder port");
    (p, port)
}

fn relay(ns: &mut NetNs, dev: &str, mode: Mode, port: u16, extra: &[&str]) -> Proc {
    let name = ns.tap_name().to_string();
    ns.adopt(&name);
    let mut cmd = Command::new(cli());
    cmd.args(["relay", dev, &name, "--addr", STACK_CIDR, "--host-addr", HOST_CIDR, "--netns", ns.name()]);
    cmd.args(["--to", &format!("127.0.0.1:{port}"), "--json"]).args(extra);
    if mode == Mode::Plain {
        cmd.arg("--plain");
    }
    Proc::start("relay", cmd, "ready").0
}

#[track_caller]
fn run_client(ns: &NetNs, dst: &str, port: &str, count: u32, window: u32) {
    let out = ns
        .command(120, "python3")
        .args(["-c", CLIENT, dst, port, &count.to_string(), &window.to_string()])
        .output()
        .expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "client: {text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), format!("answers {count}"));
}

// DNS-style request and response through `--listen any`, to an address in the device's
// subnet the stack does not own and to one routed in (on a TUN: 198.18.0.0/15 via the
// device; on a TAP the stack answers ARP only for itself, so the routed case is the TUN's).
// Then 10,000 datagrams, 16 in flight, none lost.
fn dns_style(dev: &str, mode: Mode) {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let (_resp, port) = responder();
    let mut ns = NetNs::new();
    let mut relay = relay(&mut ns, dev, mode, port, &["--listen", "any"]);
    run_client(&ns, STACK_ADDR, "53", 1, 1);
    let mut want_sessions = 2;
    if dev == "--tun" {
        let tun = ns.tap_name().to_string();
        ns.ip(&["route", "add", "198.18.0.0/15", "dev", &tun]);
        run_client(&ns, "198.18.0.53", "53", 1, 1);
        want_sessions += 1;
    }
    run_client(&ns, STACK_ADDR, "5353", 10_000, 16);
    let (out, err) = relay.stop_ok();
    let json = out.lines().last().unwrap_or("");
    let udp = &json[json.find("\"udp\"").expect("udp in the JSON")..];
    let total = 10_000 + want_sessions - 1;
    assert_eq!(json_u64(udp, "up"), Some(total), "{json}\n{err}");
    assert_eq!(json_u64(udp, "down"), Some(total), "{json}\n{err}");
    assert_eq!(json_u64(udp, "dropped"), Some(0), "{json}");
    assert_eq!(json_u64(udp, "sessions"), Some(want_sessions), "{json}");
}

both_modes!(dns_style_tun, |mode| dns_style("--tun", mode));
both_modes!(dns_style_tap, |mode| dns_style("--tap", mode));

// RFC 1122 §4.1.3.1: without `--listen any` the stack answers a datagram to a port it does
// not relay with ICMP port unreachable, which Linux reports to a connected socket.
both_modes!(closed_port_is_refused, |mode| {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let (_resp, port) = responder();
    let mut ns = NetNs::new();
    let mut relay = relay(&mut ns, "--tun", mode, port, &["--listen", "53"]);
    run_client(&ns, STACK_ADDR, "53", 3, 1);
    let script = format!(
        "import socket\nc = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nc.settimeout(5)\n\
         c.connect(('{STACK_ADDR}', 9))\nc.send(b'x')\ntry:\n    c.recv(8)\n    print('answered')\n\
         except ConnectionRefusedError:\n    print('refused')\n"
    );
    let out = ns.command(30, "python3").args(["-c", &script]).output().expect("run python3");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "refused");
    relay.stop_ok();
});

// Sessions end when idle (here after 1 s unanswered, 4 s answered), and malformed datagrams
// (a bad checksum; a length field past the packet) are dropped and counted, never relayed.
both_modes!(sessions_expire_and_malformed_datagrams_drop, |mode| {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let (_resp, port) = responder();
    let mut ns = NetNs::new();
    let mut relay = relay(&mut ns, "--tun", mode, port, &["--listen", "any", "--udp-timeout", "1"]);
    run_client(&ns, STACK_ADDR, "53", 1, 1);
    // Raw datagrams with a broken UDP header, through a raw IP socket.
    let script = format!(
        "import socket, struct\nr = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)\n\
         r.sendto(struct.pack('!HHHH', 4000, 53, 12, 0x1234) + b'abcd', ('{STACK_ADDR}', 0))\n\
         r.sendto(struct.pack('!HHHH', 4000, 53, 200, 0) + b'abcd', ('{STACK_ADDR}', 0))\nprint('sent')\n"
    );
    let out = ns.command(30, "python3").args(["-c", &script]).output().expect("run python3");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "sent", "{}", String::from_utf8_lossy(&out.stderr));
    std::thread::sleep(std::time::Duration::from_secs(6));
    let (out, err) = relay.stop_ok();
    let json = out.lines().last().unwrap_or("");
    let udp = &json[json.find("\"udp\"").expect("udp in the JSON")..];
    assert_eq!(json_u64(udp, "expired"), Some(1), "{json}\n{err}");
    assert_eq!(json_u64(udp, "open_at_exit"), Some(0), "{json}");
    assert_eq!(json_u64(udp, "up"), Some(1), "malformed datagrams are not relayed: {json}");
    assert_eq!(json_u64(json, "drops_bad_checksum"), Some(1), "{json}");
    assert_eq!(json_u64(json, "drops_malformed"), Some(1), "{json}");
});
