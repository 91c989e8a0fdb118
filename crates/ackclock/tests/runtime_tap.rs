//! The runtime on a TAP and on a TUN, with Linux as the client: an echo server written as
//! with `std::net` (a thread per connection, blocking `read` and `write`) serves Python
//! clients in a network namespace the test creates and removes, in both modes of each device
//! (plain, and virtio-net offloads).
//!
//! Needs root, /dev/net/tun and python3: without them each test prints why and passes as
//! skipped. Every wait is bounded.
#![cfg(target_os = "linux")]

mod common;

use ackclock::phy::TapMode;
use ackclock::runtime::{Runtime, RuntimeConfig, RuntimeStats, TapRounds, TcpListener, TcpStream};
use common::clients::ECHO_CLIENT;
use common::link_runtime::{link_runtime, STACK_ADDR};
use common::netns::{skip, NetNs};
use std::io::{Read, Write};
use std::net::SocketAddrV4;

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

/// A runtime on a TAP or TUN moved into `ns`.
fn runtime(ns: &mut NetNs, mode: TapMode, tun: bool, rt_config: RuntimeConfig) -> Runtime {
    link_runtime(ns, mode, tun, |_| {}, rt_config)
}

/// The echo server under `config`; returns the runtime's counters.
fn echo_server_with(mode: TapMode, tun: bool, rt_config: RuntimeConfig) -> Option<RuntimeStats> {
    if skip(&["python3"]) {
        return None;
    }
    let mut ns = NetNs::new();
    let mut rt = runtime(&mut ns, mode, tun, rt_config);
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

/// With `TapRounds::AppThreads`, the connection threads run protocol rounds themselves over
/// a TAP (a writer sends what it queued, a reader its window update, reading the device in
/// the same round), as over the in-memory pipe, and wait on condition variables; every
/// byte is still echoed once.
#[test]
fn application_threads_run_rounds_over_a_tap() {
    let config = RuntimeConfig { tap_rounds: TapRounds::AppThreads, ..Default::default() };
    let Some(stats) = echo_server_with(TapMode::Offload, false, config) else { return };
    // (Whether the round runs in the writer's thread or in a protocol-thread round already
    // running depends on timing: `app_pushes` counts either.)
    assert!(stats.app_pushes > 0 && stats.watches == 0, "{stats:?}");
}

/// The same over a TUN in plain mode.
#[test]
fn application_threads_run_rounds_over_a_tun() {
    let config = RuntimeConfig { tap_rounds: TapRounds::AppThreads, ..Default::default() };
    let Some(stats) = echo_server_with(TapMode::Plain, true, config) else { return };
    // (Whether the round runs in the writer's thread or in a protocol-thread round already
    // running depends on timing: `app_pushes` counts either.)
    assert!(stats.app_pushes > 0 && stats.watches == 0, "{stats:?}");
}

/// With `TapRounds::ProtocolThread` only the protocol thread runs rounds over a TAP, it
/// never parks, and no application thread watches the device.
#[test]
fn only_the_protocol_thread_runs_rounds_over_a_tap_when_asked() {
    let config = RuntimeConfig { tap_rounds: TapRounds::ProtocolThread, ..Default::default() };
    let Some(stats) = echo_server_with(TapMode::Offload, false, config) else { return };
    assert_eq!((stats.app_rounds, stats.app_pushes, stats.parks, stats.watches), (0, 0, 0, 0), "{stats:?}");
    assert!(stats.rounds > 0, "{stats:?}");
}

/// Application threads watch the device: the default.
fn watch() -> RuntimeConfig {
    assert_eq!(RuntimeConfig::default().tap_rounds, TapRounds::Watch);
    RuntimeConfig::default()
}

/// By default (`TapRounds::Watch`) a blocked connection thread watches the TAP itself and
/// runs the rounds its frames need: no thread sleeps on a condition variable, and every
/// byte is still echoed once.
#[test]
fn application_threads_watch_the_device_over_a_tap() {
    let Some(stats) = echo_server_with(TapMode::Offload, false, watch()) else { return };
    assert!(stats.watches > 0 && stats.watch_rounds > 0, "{stats:?}");
    assert_eq!(stats.app_waits, 0, "{stats:?}");
}

/// The same over a TUN in plain mode.
#[test]
fn application_threads_watch_the_device_over_a_tun() {
    let Some(stats) = echo_server_with(TapMode::Plain, true, watch()) else { return };
    assert!(stats.watches > 0 && stats.watch_rounds > 0, "{stats:?}");
    assert_eq!(stats.app_waits, 0, "{stats:?}");
}

/// A runtime in the default mode on an offload TAP, listening on port 7, and a Python
/// client running `script` (after `import socket, sys`; the stack's address is
/// `sys.argv[1]`) with its stdin and stdout piped.
fn runtime_and_client(ns: &mut NetNs, script: &str) -> (Runtime, TcpListener, std::process::Child) {
    let rt = runtime(ns, TapMode::Offload, false, watch());
    let listener = TcpListener::bind(&rt, SocketAddrV4::new(STACK_ADDR, 7)).expect("bind");
    let client = ns
        .command(60, "python3")
        .args(["-c", &format!("import socket, sys\n{script}"), &STACK_ADDR.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run python3");
    (rt, listener, client)
}

/// Wait (bounded) until `cond` holds on the runtime's counters.
fn until_stats(rt: &Runtime, what: &str, cond: impl Fn(&RuntimeStats) -> bool) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond(&rt.stats()) {
        assert!(std::time::Instant::now() < end, "never: {what}: {:?}", rt.stats());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A watcher whose call ends, and which then stays away (busy elsewhere, not in a call),
/// gives the device back: another connection's data still arrives while it is away. The
/// protocol thread sleeps without the device's descriptor meanwhile, so without the
/// hand-off (`watch::HANDOFF`) only its own next timer would make it look at the device.
#[test]
fn a_watcher_that_leaves_hands_the_device_back() {
    if skip(&["python3"]) {
        return;
    }
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let mut ns = NetNs::new();
    let (mut rt, listener, client) = runtime_and_client(
        &mut ns,
        "a = socket.create_connection((sys.argv[1], 7), timeout=30)\n\
         b = socket.create_connection((sys.argv[1], 7), timeout=30)\n\
         sys.stdin.readline()\n\
         a.sendall(b'x')\n\
         sys.stdin.readline()\n\
         b.sendall(b'y'); assert b.recv(1) == b'y'\n\
         print('ok')",
    );
    let (mut a, _) = listener.accept().expect("accept a");
    let (mut b, _) = listener.accept().expect("accept b");
    let away = Arc::new(AtomicBool::new(false));
    let b_done = Arc::new(AtomicBool::new(false));
    // B blocks first; A's read, the later first wait, takes the device from it.
    let (away_b, done_b) = (away.clone(), b_done.clone());
    let tb = std::thread::spawn(move || {
        let mut c = [0u8; 1];
        b.read_exact(&mut c).expect("b reads");
        b.write_all(&c).expect("b echoes");
        let while_away = away_b.load(Ordering::SeqCst);
        done_b.store(true, Ordering::SeqCst);
        while_away
    });
    until_stats(&rt, "b sleeps", |s| s.watches >= 1);
    let watches = rt.stats().watches;
    let (away_a, done_a) = (away.clone(), b_done.clone());
    let ta = std::thread::spawn(move || {
        let mut c = [0u8; 1];
        a.read_exact(&mut c).expect("a reads");
        // Away: not in any call of the runtime, until B has its byte (bounded).
        away_a.store(true, Ordering::SeqCst);
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !done_a.load(Ordering::SeqCst) && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        a
    });
    until_stats(&rt, "a sleeps", |s| s.watches > watches);
    // Make the protocol thread wake and go to sleep again, now without the device's
    // descriptor (A watches it): from here only A wakes for the frame that carries x.
    let sleeps = rt.stats().sleeps;
    rt.with_stack(|_| ());
    until_stats(&rt, "the protocol thread sleeps again", |s| s.sleeps > sleeps);
    let mut client = client;
    let mut stdin = client.stdin.take().unwrap();
    stdin.write_all(b"x\n").unwrap();
    stdin.flush().unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !away.load(Ordering::SeqCst) {
        assert!(std::time::Instant::now() < end, "a never read its byte: {:?}", rt.stats());
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    stdin.write_all(b"y\n").unwrap();
    drop(stdin);
    let out = client.wait_with_output().expect("python3");
    let a = ta.join().unwrap();
    let b_while_a_away = tb.join().unwrap();
    drop(a);
    rt.shutdown();
    let stats = rt.stats();
    assert!(out.status.success(), "client: {}", String::from_utf8_lossy(&out.stdout));
    assert!(b_while_a_away, "b's byte arrived while a was away: {stats:?}");
    // A's read ended while the protocol thread slept without the device: it lowered that
    // sleep to the hand-off's deadline. (Its own timers would have woken it later: the
    // stack's next timer was about a second away when this was written.)
    assert!(stats.handoffs >= 1, "{stats:?}");
}

/// In this mode too, a read timeout gives `WouldBlock`, and a shutdown wakes a thread
/// blocked in `read` (watching the device) with `ConnectionAborted`, never a hang.
#[test]
fn a_watching_reader_times_out_and_is_woken_by_shutdown() {
    if skip(&["python3"]) {
        return;
    }
    let mut ns = NetNs::new();
    let (mut rt, listener, client) = runtime_and_client(
        &mut ns,
        "a = socket.create_connection((sys.argv[1], 7), timeout=30)\n\
         try:\n    a.recv(1)\nexcept OSError:\n    pass",
    );
    let (mut a, _) = listener.accept().expect("accept");
    a.set_read_timeout(Some(std::time::Duration::from_millis(50))).unwrap();
    let mut c = [0u8; 1];
    let e = a.read(&mut c).expect_err("nothing to read");
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
    a.set_read_timeout(None).unwrap();
    let watches = rt.stats().watches;
    let reader = std::thread::spawn(move || a.read(&mut c).map_err(|e| e.kind()));
    until_stats(&rt, "the reader sleeps", |s| s.watches > watches);
    rt.shutdown();
    assert_eq!(reader.join().unwrap(), Err(std::io::ErrorKind::ConnectionAborted));
    let mut client = client;
    let _ = client.wait();
}
