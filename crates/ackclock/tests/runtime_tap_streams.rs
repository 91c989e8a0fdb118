//! Parallel streams into a runtime over a watched TAP: Linux, in a network namespace the test
//! creates and removes, sends on 8 connections at once to readers on the runtime (a thread
//! per connection, blocking `read`), and every stream must end, byte-counted.
//!
//! The stall this guards against: a reader registered its waker, then ran a round on its own
//! thread (answering a ring) in which its socket became readable; a thread never signals its
//! own eventfd, and it slept without looking again. Its window closed, and the Linux sender
//! probed a zero window with backoff for as long as the test let it. Before the fix, 8
//! parallel 2 s streams left a connection stuck in about half the runs.
//!
//! Needs root, /dev/net/tun and python3: without them it prints why and passes as skipped.
#![cfg(target_os = "linux")]

mod common;

use ackclock::phy::{Tap, TapConfig, TapMode};
use ackclock::runtime::{RuntimeConfig, TcpListener};
use ackclock::StackConfig;
use common::link_runtime::{link_runtime, STACK_ADDR};
use common::netns::{skip, NetNs};
use std::io::Read;
use std::net::SocketAddrV4;

const STREAMS: usize = 8;

/// `STREAMS` Linux senders, each sending for `secs` seconds, to readers on the runtime;
/// every reader must see its stream end, and count what its sender sent.
fn parallel_streams(rt_config: RuntimeConfig, secs: f64) {
    if skip(&["python3"]) {
        return;
    }
    let mut ns = NetNs::new();
    // 64 KiB buffers for the offload TAP's segmentation, as `relay` and `serve` use.
    let tune =
        |sc: &mut StackConfig| sc.pool = Tap::pool_config(&TapConfig { mode: TapMode::Offload, mtu: 1500 }, 2 * 1024);
    let mut rt = link_runtime(&mut ns, TapMode::Offload, false, tune, rt_config);
    let listener = TcpListener::bind(&rt, SocketAddrV4::new(STACK_ADDR, 9)).expect("bind");
    let acceptor = std::thread::spawn(move || {
        let readers: Vec<_> = (0..STREAMS)
            .map(|_| {
                let (mut conn, _) = listener.accept().expect("accept");
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut got = 0u64;
                    while let Ok(k @ 1..) = conn.read(&mut buf) {
                        got += k as u64;
                    }
                    got
                })
            })
            .collect();
        let mut got: Vec<u64> = readers.into_iter().map(|r| r.join().unwrap()).collect();
        got.sort_unstable();
        got
    });
    // Each sender stops after `secs`, half-closes, and waits for the reader's close: a
    // stalled stream shows as a sender that never finishes (the script's own timeout).
    let script = format!(
        r#"
import socket, sys, threading, time
n, secs = {STREAMS}, {secs}
socks = [socket.create_connection(("{STACK_ADDR}", 9)) for _ in range(n)]
sent = [0] * n
end = time.time() + secs
def send(i):
    s, buf = socks[i], bytes(1 << 20)
    while time.time() < end:
        s.sendall(buf)
        sent[i] += len(buf)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(20)
    s.recv(1)
ts = [threading.Thread(target=send, args=(i,)) for i in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print(" ".join(map(str, sorted(sent))))
"#
    );
    let out = ns.command(60, "python3").args(["-c", &script]).output().expect("run python3");
    assert!(out.status.success(), "a sender did not finish: {}", String::from_utf8_lossy(&out.stderr));
    let sent: Vec<u64> =
        String::from_utf8_lossy(&out.stdout).split_whitespace().map(|w| w.parse().expect("a count")).collect();
    assert_eq!(acceptor.join().unwrap(), sent, "bytes read per stream, against bytes sent");
    rt.shutdown();
}

#[test]
fn parallel_streams_all_end_over_a_watched_tap() {
    for _ in 0..5 {
        parallel_streams(RuntimeConfig::default(), 2.0);
    }
}

/// The same with synchronous window updates (the benchmark-only mode): the reader waits for
/// the protocol thread's reply to each request.
#[test]
fn parallel_streams_with_synchronous_window_updates() {
    parallel_streams(RuntimeConfig { sync_window_updates: true, ..Default::default() }, 1.0);
}
