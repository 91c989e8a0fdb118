//! UDP on a TAP against the Linux kernel: a runtime `UdpSocket` echoes datagrams for a
//! Python client in a network namespace the test creates and removes, and a datagram to a
//! closed port comes back to the kernel as ICMP port unreachable, which Linux reports to a
//! connected UDP socket as ConnectionRefused. Both TAP modes. And the other way: the
//! kernel's ICMP errors for the stack's packets reach the runtime's sockets.
//!
//! Needs root, /dev/net/tun, python3 and nft: without them each test prints why and passes as
//! skipped. Every wait is bounded.
#![cfg(target_os = "linux")]

mod common;

use ackclock::buf::Pool;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Device, Tap, TapConfig, TapMode};
use ackclock::runtime::{Runtime, UdpSocket};
use ackclock::time::Instant;
use ackclock::{Stack, StackConfig};
use common::netns::{skip, NetNs};
use std::net::{Ipv4Addr, SocketAddrV4};

const STACK_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const HOST_CIDR: &str = "10.77.0.1/24";

/// 2,000 datagrams of sizes 1..1472 echoed and checked one by one, then a datagram to a
/// closed port, which must raise ConnectionRefused on the client's next receive.
const CLIENT: &str = r#"
import socket, sys
addr = (sys.argv[1], int(sys.argv[2]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
ok = 0
for i in range(2000):
    d = bytes(((i * 7 + k) % 256 for k in range(i * 37 % 1472 + 1)))
    s.sendto(d, addr)
    r, frm = s.recvfrom(2048)
    ok += (r == d and frm == addr)
print("echoed", ok)
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.settimeout(5)
c.connect((sys.argv[1], 9))
c.send(b"anyone?")
try:
    c.recv(16)
    print("closed port: answered")
except ConnectionRefusedError:
    print("closed port: refused")
except socket.timeout:
    print("closed port: timeout")
"#;

fn udp_echo(mode: TapMode) {
    if skip(&["python3"]) {
        return;
    }
    let mut ns = NetNs::new();
    let config = TapConfig { mode, mtu: 1500 };
    let pool = Pool::new(Tap::pool_config(&config, 1024)).unwrap();
    let tap_name = ns.tap_name().to_string();
    ns.adopt(&tap_name);
    let tap = Tap::open(&tap_name, config, pool).expect("open TAP");
    ns.take_link(&tap_name, HOST_CIDR);
    let stack =
        Stack::new(StackConfig::new(InterfaceConfig::new(STACK_ADDR, 24)), tap.capabilities(), Instant::ZERO).unwrap();
    let mut rt = Runtime::new(stack, tap).expect("runtime");
    let socket = UdpSocket::bind(&rt, SocketAddrV4::new(STACK_ADDR, 7)).expect("bind");
    let server = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut echoed = 0;
        // Ends when the runtime shuts down (the receive then fails).
        while let Ok((n, from, _)) = socket.recv_from_to(&mut buf) {
            if socket.send_to(&buf[..n], from).is_ok() {
                echoed += 1;
            }
        }
        echoed
    });
    let out =
        ns.command(90, "python3").args(["-c", CLIENT, &STACK_ADDR.to_string(), "7"]).output().expect("run python3");
    let counters = rt.with_stack(|s| *s.counters());
    rt.shutdown();
    let echoed = server.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "client: {text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("echoed 2000"), "{text}");
    assert!(text.contains("closed port: refused"), "{text}");
    assert_eq!(echoed, 2000);
    assert_eq!(counters.icmp_unreachable_sent, 1, "{counters:?}");
    assert_eq!(counters.udp_delivered, 2000);
}

#[test]
fn udp_echo_and_port_unreachable_plain() {
    udp_echo(TapMode::Plain)
}

#[test]
fn udp_echo_and_port_unreachable_offload() {
    udp_echo(TapMode::Offload)
}

/// ICMP errors from the Linux kernel for the stack's own packets, through the runtime (RFC
/// 1122 §4.1.3.3, §4.2.3.9): a connected `UdpSocket`'s datagram to a closed port draws
/// Linux's port unreachable, and its next receive fails with ConnectionRefused; a
/// `TcpStream::connect` whose SYN an nftables rule rejects with host unreachable fails at
/// once with HostUnreachable, not after its SYN retries.
#[test]
fn kernel_icmp_errors_reach_runtime_sockets() {
    use ackclock::runtime::TcpStream;
    use std::io::ErrorKind;
    use std::time::{Duration, Instant as StdInstant};
    if skip(&["nft"]) {
        return;
    }
    let mut ns = NetNs::new();
    let config = TapConfig { mode: TapMode::Plain, mtu: 1500 };
    let pool = Pool::new(Tap::pool_config(&config, 256)).unwrap();
    let tap_name = ns.tap_name().to_string();
    ns.adopt(&tap_name);
    let tap = Tap::open(&tap_name, config, pool).expect("open TAP");
    ns.take_link(&tap_name, HOST_CIDR);
    for r in [
        &["add", "table", "inet", "icmp_test"][..],
        &["add", "chain", "inet", "icmp_test", "in", "{ type filter hook input priority 0; }"],
        &[
            "add",
            "rule",
            "inet",
            "icmp_test",
            "in",
            "tcp",
            "dport",
            "9",
            "reject",
            "with",
            "icmp",
            "type",
            "host-unreachable",
        ],
    ] {
        let o = ns.command(10, "nft").args(r).output().expect("run nft");
        assert!(o.status.success(), "nft {}: {}", r.join(" "), String::from_utf8_lossy(&o.stderr));
    }
    let stack =
        Stack::new(StackConfig::new(InterfaceConfig::new(STACK_ADDR, 24)), tap.capabilities(), Instant::ZERO).unwrap();
    let mut rt = Runtime::new(stack, tap).expect("runtime");
    let host = Ipv4Addr::new(10, 77, 0, 1);

    let socket = UdpSocket::bind(&rt, SocketAddrV4::new(STACK_ADDR, 0)).expect("bind");
    socket.connect(SocketAddrV4::new(host, 9)).expect("connect");
    socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    socket.send(b"anyone?").expect("send");
    let mut buf = [0u8; 16];
    let e = socket.recv(&mut buf).expect_err("a port unreachable");
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");

    let start = StdInstant::now();
    let e = TcpStream::connect_timeout(&rt, SocketAddrV4::new(host, 9), Duration::from_secs(10)).expect_err("rejected");
    assert_eq!(e.kind(), ErrorKind::HostUnreachable, "{e}");
    assert!(start.elapsed() < Duration::from_secs(5), "not after SYN retries: {:?}", start.elapsed());
    let counters = rt.with_stack(|s| *s.counters());
    assert_eq!((counters.icmp_udp_errors, counters.icmp_connect_aborts), (1, 1), "{counters:?}");
    rt.shutdown();
}
