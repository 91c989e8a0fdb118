//! The tun2socks example (`examples/tun2socks.rs`) on a TUN with offloads, against Linux: a
//! Python client in a network namespace the test creates and removes talks to addresses
//! that exist nowhere (10.99.0.77, 10.99.0.88) and its flows reach an upstream on 127.0.0.1,
//! byte-exact, in the test's own threads.
//!
//! - TCP, 8 parallel echoes of 4 MB and one of 16 MB, each half-closed by the client first
//!   (the upstream's last bytes and its FIN follow the client's FIN);
//! - TCP, the upstream half-closes first (the client then still sends, and the upstream
//!   reads it);
//! - TCP, an upstream reset reaches the client as ConnectionResetError; so does an upstream
//!   that refuses, once the test has closed its listener;
//! - UDP, 1,000 request/response datagrams of sizes 1..1472 on one flow and 100 on a second,
//!   each answered from the address the client sent to: two sessions.
//!
//! Needs root, /dev/net/tun and python3: without them each test prints why and passes as
//! skipped. Every wait is bounded.
#![cfg(all(target_os = "linux", feature = "tokio"))]

mod common;
#[path = "../examples/tun2socks.rs"]
mod tun2socks;

use ackclock::buf::{Pool, DEFAULT_HEADROOM};
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Device, TapMode, Tun, TunConfig};
use ackclock::runtime::tokio::{TcpListener, UdpSocket};
use ackclock::runtime::Runtime;
use ackclock::time::Instant;
use ackclock::{Stack, StackConfig};
use common::netns::{skip, NetNs};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;

const STACK_ADDR: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
const HOST_CIDR: &str = "10.99.0.1/24";

/// The upstream, by the client's first byte: `E` echoes until the client's FIN, then says
/// "bye" and closes; `S` sends the 8-byte big-endian count of bytes that follows (256-byte
/// ramps), half-closes, then reads until the client's FIN and reports what it read; `R`
/// resets the connection.
fn upstream(listener: std::net::TcpListener, heard: mpsc::Sender<Vec<u8>>) {
    for conn in listener.incoming() {
        let Ok(mut s) = conn else { return };
        let heard = heard.clone();
        std::thread::spawn(move || {
            let mut kind = [0u8; 1];
            if s.read_exact(&mut kind).is_err() {
                return;
            }
            match kind[0] {
                b'E' => {
                    let mut buf = vec![0u8; 65536];
                    while let Ok(n @ 1..) = s.read(&mut buf) {
                        if s.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                    let _ = s.write_all(b"bye");
                }
                b'S' => {
                    let mut count = [0u8; 8];
                    if s.read_exact(&mut count).is_err() {
                        return;
                    }
                    let ramp: Vec<u8> = (0..=255).collect();
                    let mut left = u64::from_be_bytes(count) as usize;
                    while left > 0 {
                        let n = left.min(256);
                        if s.write_all(&ramp[..n]).is_err() {
                            return;
                        }
                        left -= n;
                    }
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    let mut rest = Vec::new();
                    let _ = s.read_to_end(&mut rest);
                    let _ = heard.send(rest);
                }
                b'R' => {
                    // SO_LINGER 0: close(2) sends an RST.
                    let l = libc::linger { l_onoff: 1, l_linger: 0 };
                    // SAFETY: SO_LINGER reads a `struct linger` of the given size.
                    unsafe {
                        libc::setsockopt(
                            s.as_raw_fd(),
                            libc::SOL_SOCKET,
                            libc::SO_LINGER,
                            (&l as *const libc::linger).cast(),
                            std::mem::size_of::<libc::linger>() as libc::socklen_t,
                        );
                    }
                }
                _ => {}
            }
        });
    }
}

const CLIENT: &str = r#"
import hashlib, os, socket, sys, threading
port = int(sys.argv[1])

def drain(s):
    got = bytearray()
    while True:
        b = s.recv(1 << 16)
        if not b:
            return bytes(got)
        got += b

def echo(dst, n, out, i):
    data = os.urandom(n)
    s = socket.create_connection((dst, port), timeout=60)
    def send():
        s.sendall(b"E" + data)
        s.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=send)
    t.start()
    got = drain(s)
    t.join()
    out[i] = got == data + b"bye"

out = [False] * 9
ts = [threading.Thread(target=echo, args=("10.99.0.77", 4 << 20, out, i)) for i in range(8)]
ts.append(threading.Thread(target=echo, args=("10.99.0.88", 16 << 20, out, 8)))
for t in ts: t.start()
for t in ts: t.join()
print("echo", sum(out))

n = 3 << 20
s = socket.create_connection(("10.99.0.77", port), timeout=60)
s.sendall(b"S" + n.to_bytes(8, "big"))
got = drain(s)
want = (bytes(range(256)) * (n // 256 + 1))[:n]
s.sendall(b"after the upstream's FIN")
s.shutdown(socket.SHUT_WR)
s.close()
print("upstream-first", got == want)

s = socket.create_connection(("10.99.0.77", port), timeout=60)
s.sendall(b"R")
try:
    r = s.recv(16)
    print("reset", "no", r)
except ConnectionResetError:
    print("reset", "yes")

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(5)
ok = 0
for i in range(1000):
    d = bytes(((i * 7 + k) % 256 for k in range(i * 37 % 1472 + 1)))
    u.sendto(d, ("10.99.0.77", 5353))
    r, frm = u.recvfrom(2048)
    ok += (r == d and frm == ("10.99.0.77", 5353))
v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
v.settimeout(5)
for i in range(100):
    d = b"second flow %d" % i
    v.sendto(d, ("10.99.0.88", 53))
    r, frm = v.recvfrom(2048)
    ok += (r == d and frm == ("10.99.0.88", 53))
print("udp", ok)
"#;

/// The reset may come before `connect` returns (the stack's SYN-ACK and its RST handled by
/// the kernel before the connecting thread runs again) or after: either is the reset.
const REFUSED: &str = r#"
import socket, sys
try:
    s = socket.create_connection(("10.99.0.77", int(sys.argv[1])), timeout=30)
    r = s.recv(16)
    print("refused", "no", r)
except ConnectionResetError:
    print("refused", "yes")
"#;

#[test]
fn tun2socks_relays_tcp_and_udp_from_a_namespace() {
    if skip(&["python3"]) {
        return;
    }
    // The upstream: TCP and UDP on one port of 127.0.0.1.
    let (tcp, udp_host) = (0..20)
        .find_map(|_| {
            let tcp = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
            let udp = std::net::UdpSocket::bind(tcp.local_addr().ok()?).ok()?;
            Some((tcp, udp))
        })
        .expect("a port free for TCP and UDP on 127.0.0.1");
    let to: SocketAddr = tcp.local_addr().unwrap();
    let tcp_fd = tcp.as_raw_fd();
    let (heard_tx, heard) = mpsc::channel();
    std::thread::spawn(move || upstream(tcp, heard_tx));
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = udp_host.recv_from(&mut buf) {
            let _ = udp_host.send_to(&buf[..n], from);
        }
    });

    let mut ns = NetNs::new();
    let config = TunConfig { mode: TapMode::Offload, mtu: 1500 };
    let pool = Pool::new(Tun::pool_config(&config, 1024)).unwrap();
    let name = ns.tap_name().to_string();
    ns.adopt(&name);
    let tun = Tun::open(&name, config, pool).expect("open TUN");
    ns.take_link(&name, HOST_CIDR);
    let mut sc = StackConfig::new(InterfaceConfig::new(STACK_ADDR, 24));
    sc.iface.any_destination = true;
    sc.pool.buffers = 8 * 1024;
    sc.pool.buffer_size = 64 * 1024 + DEFAULT_HEADROOM;
    let stack = Stack::new(sc, tun.capabilities(), Instant::ZERO).unwrap();
    let mut rt = Runtime::new(stack, tun).expect("runtime");
    let listener = TcpListener::bind_any(&rt).expect("bind any TCP");
    let socket = Arc::new(UdpSocket::bind_any(&rt).expect("bind any UDP"));
    let stats = Arc::new(tun2socks::UdpStats::default());
    let tokio_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let tcp_task = tokio_rt.spawn(tun2socks::serve_tcp(listener, to));
    let udp_task = tokio_rt.spawn(tun2socks::serve_udp(socket, to, stats.clone()));

    let port = to.port().to_string();
    let out = ns.command(120, "python3").args(["-c", CLIENT, &port]).output().expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines, ["echo 9", "upstream-first True", "reset yes", "udp 1100"], "{text}");
    // What the client sent after the upstream's FIN arrived.
    let after = heard.recv_timeout(std::time::Duration::from_secs(10)).expect("the upstream heard the client");
    assert_eq!(after, b"after the upstream's FIN");
    assert_eq!(stats.sessions.load(Ordering::Relaxed), 2, "one UDP session per flow");
    assert_eq!((stats.up.load(Ordering::Relaxed), stats.down.load(Ordering::Relaxed)), (1100, 1100));
    assert_eq!(stats.dropped.load(Ordering::Relaxed), 0);

    // An upstream that refuses: its listener closed (shut down, so the accepting thread's
    // descriptor stops listening), the client's connection is reset.
    // SAFETY: `tcp_fd` is the upstream listener's open descriptor; shutdown only stops it.
    unsafe { libc::shutdown(tcp_fd, libc::SHUT_RDWR) };
    let out = ns.command(60, "python3").args(["-c", REFUSED, &port]).output().expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), "refused yes");

    rt.shutdown();
    assert!(tokio_rt.block_on(tcp_task).unwrap().is_err(), "serve_tcp ends when the runtime shuts down");
    assert!(tokio_rt.block_on(udp_task).unwrap().is_err(), "serve_udp ends when the runtime shuts down");
}
