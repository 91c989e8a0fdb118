//! The fused copy over a watched device: a reader on the runtime over a plain TAP (checksums
//! in software, Jacobson 1993's checksum in the copy), with Linux as the sender in a network
//! namespace the test creates and removes. Its own test binary, so that no other test's
//! threads compete with it for the two cores while it counts.
//!
//! Needs root, /dev/net/tun and python3: without them it prints why and passes as skipped.
#![cfg(target_os = "linux")]

mod common;

use ackclock::phy::TapMode;
use ackclock::runtime::{RuntimeConfig, TapRounds, TcpListener};
use common::link_runtime::{link_runtime, STACK_ADDR};
use common::netns::{skip, NetNs};
use std::io::Read;
use std::net::SocketAddrV4;

/// Linux sends 4 MB to a reader on a plain TAP (checksums in software); returns the
/// segments whose checksum was checked in a pass of its own (`csum_verified_early`) and
/// the data segments received.
fn receive_4mb(rt_config: RuntimeConfig) -> Option<(u64, u64)> {
    if skip(&["python3"]) {
        return None;
    }
    let mut ns = NetNs::new();
    let mut rt = link_runtime(&mut ns, TapMode::Plain, false, |_| {}, rt_config);
    let listener = TcpListener::bind(&rt, SocketAddrV4::new(STACK_ADDR, 9)).expect("bind");
    let n = 4 << 20;
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 256 * 1024];
        let mut got = 0;
        while let Ok(k @ 1..) = conn.read(&mut buf) {
            got += k;
        }
        got
    });
    let send = format!(
        "import socket; s = socket.create_connection(('{STACK_ADDR}', 9)); s.sendall(bytes({n})); s.shutdown(socket.SHUT_WR); s.recv(1)"
    );
    let out = ns.command(90, "python3").args(["-c", &send]).output().expect("run python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(server.join().unwrap(), n);
    let k = rt.with_stack(|s| *s.tcp().counters());
    rt.shutdown();
    Some((k.csum_verified_early, k.fast_path_data + k.slow_path))
}

/// Over a watched device the reader's round runs its input only, and the output (the ACK)
/// after the reader's copy, which checked the checksums (Jacobson 1993): no second pass
/// over most of the payload. When only the protocol thread runs rounds, it must check each
/// segment before its ACK, ahead of the reader's copy.
#[test]
fn a_watching_reader_checks_checksums_in_its_copy() {
    assert_eq!(RuntimeConfig::default().tap_rounds, TapRounds::Watch);
    let Some((early, segs)) = receive_4mb(RuntimeConfig::default()) else { return };
    let Some((early_p, segs_p)) =
        receive_4mb(RuntimeConfig { tap_rounds: TapRounds::ProtocolThread, ..Default::default() })
    else {
        return;
    };
    eprintln!("watch: {early} of {segs} early; protocol thread: {early_p} of {segs_p}");
    // Some are checked early in the watch mode too: a round of the protocol thread (the
    // hand-off's, when a call ends with more to read) finds them before the reader's copy.
    assert!(early * 2 < segs, "watch: {early} of {segs} segments checked ahead of the copy");
    assert!(early_p * 10 > segs_p * 9, "protocol thread: {early_p} of {segs_p}");
}
