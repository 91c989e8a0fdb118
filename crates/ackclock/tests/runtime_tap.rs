//! The runtime on a TAP and on a TUN, with Linux as the client: an echo server written as
//! with `std::net` (a thread per connection, blocking `read` and `write`) serves Python
//! clients in a network namespace the test creates and removes, in both modes of each device
//! (plain, and virtio-net offloads).
//!
//! Needs root, /dev/net/tun and python3: without them each test prints why and passes as
//! skipped. Every wait is bounded.
#![cfg(target_os = "linux")]

mod common;

use ackclock::buf::Pool;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Device, Tap, TapConfig, TapMode, Tun, TunConfig};
use ackclock::runtime::{Runtime, RuntimeConfig, RuntimeStats, TcpListener, TcpStream};
use ackclock::time::Instant;
use ackclock::{Stack, StackConfig};
use common::clients::ECHO_CLIENT;
use common::netns::{skip, NetNs};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};

const STACK_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const HOST_CIDR: &str = "10.77.0.1/24";

fn echo(mut conn: TcpStream) -> usize {
    let mut buf = [0u8; 16 * 1024];
    let mut echoed = 0;
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if conn.write_all(&buf[..n]).is_err() {
                    break;
                }
                echoed += n;
            }
        }
    }
    echoed
}

fn echo_server(mode: TapMode, tun: bool) {
    echo_server_with(mode, tun, RuntimeConfig::default());
}

/// The echo server under `config`; returns the runtime's counters.
fn echo_server_with(mode: TapMode, tun: bool, rt_config: RuntimeConfig) -> Option<RuntimeStats> {
    if skip(&["python3"]) {
        return None;
    }
    let mut ns = NetNs::new();
    let name = ns.tap_name().to_string();
    ns.adopt(&name);
    let mut sc = StackConfig::new(InterfaceConfig::new(STACK_ADDR, 24));
    sc.pool.buffers = 8 * 1024;
    let mut rt = if tun {
        let config = TunConfig { mode, mtu: 1500 };
        let tun = Tun::open(&name, config, Pool::new(Tun::pool_config(&config, 1024)).unwrap()).expect("open TUN");
        ns.take_link(&name, HOST_CIDR);
        let stack = Stack::new(sc, tun.capabilities(), Instant::ZERO).unwrap();
        Runtime::with_config(stack, tun, rt_config).expect("runtime")
    } else {
        let config = TapConfig { mode, mtu: 1500 };
        let tap = Tap::open(&name, config, Pool::new(Tap::pool_config(&config, 1024)).unwrap()).expect("open TAP");
        ns.take_link(&name, HOST_CIDR);
        let stack = Stack::new(sc, tap.capabilities(), Instant::ZERO).unwrap();
        Runtime::with_config(stack, tap, rt_config).expect("runtime")
    };
    let listener = TcpListener::bind(&rt, SocketAddrV4::new(STACK_ADDR, 7)).expect("bind");
    // The accept loop ends when the runtime shuts down (accept then fails).
    let server = std::thread::spawn(move || {
        let mut conns = Vec::new();
        while let Ok((conn, _peer)) = listener.accept() {
            conns.push(std::thread::spawn(move || echo(conn)));
        }
        conns.into_iter().map(|c| c.join().unwrap()).sum::<usize>()
    });
    let n = 1 << 20;
    let clients = 8;
    let out = ns
        .command(90, "python3")
        .args(["-c", ECHO_CLIENT, &STACK_ADDR.to_string(), "7", &n.to_string(), &clients.to_string()])
        .output()
        .expect("run python3");
    rt.shutdown();
    let echoed = server.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "clients: {text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.lines().filter(|l| *l == format!("{n} True")).count(), clients, "{text}");
    assert_eq!(echoed, n * clients, "every byte echoed once: {text}");
    Some(rt.stats())
}

#[test]
fn echo_server_plain() {
    echo_server(TapMode::Plain, false)
}

#[test]
fn echo_server_offload() {
    echo_server(TapMode::Offload, false)
}

/// The same server over a TUN: IP packets without a link header, no ARP.
#[test]
fn echo_server_tun_plain() {
    echo_server(TapMode::Plain, true)
}

#[test]
fn echo_server_tun_offload() {
    echo_server(TapMode::Offload, true)
}

/// With `app_rounds_on_tap`, the connection threads run protocol rounds themselves over a
/// TAP (a writer sends what it queued, a reader its window update, reading the device in
/// the same round), as over the in-memory pipe, and every byte is still echoed once.
#[test]
fn application_threads_run_rounds_over_a_tap() {
    let config = RuntimeConfig { app_rounds_on_tap: true, ..Default::default() };
    let Some(stats) = echo_server_with(TapMode::Offload, false, config) else { return };
    assert!(stats.app_rounds > 0, "{stats:?}");
}

/// The same over a TUN in plain mode.
#[test]
fn application_threads_run_rounds_over_a_tun() {
    let config = RuntimeConfig { app_rounds_on_tap: true, ..Default::default() };
    let Some(stats) = echo_server_with(TapMode::Plain, true, config) else { return };
    assert!(stats.app_rounds > 0, "{stats:?}");
}

/// By default only the protocol thread runs rounds over a TAP, and it never parks.
#[test]
fn only_the_protocol_thread_runs_rounds_over_a_tap_by_default() {
    let Some(stats) = echo_server_with(TapMode::Offload, false, RuntimeConfig::default()) else { return };
    assert_eq!((stats.app_rounds, stats.parks), (0, 0), "{stats:?}");
    assert!(stats.rounds > 0, "{stats:?}");
}
