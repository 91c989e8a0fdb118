//! The fused copy over a watched device: a reader on the runtime over a plain TAP (checksums
//! in software, Jacobson 1993's checksum in the copy), with Linux as the sender in a network
//! namespace the test creates and removes. Its own test binary, so that no other test's
//! threads compete with it for the two cores while it counts.
//!
//! Needs root, /dev/net/tun and python3: without them it prints why and passes as skipped.
#![cfg(target_os = "linux")]

mod common;

use ackclock::phy::TapMode;
use ackclock::runtime::{RuntimeConfig, RuntimeStats, TapRounds, TcpListener};
use common::link_runtime::{link_runtime, STACK_ADDR};
use common::netns::{skip, NetNs};
use std::io::Read;
use std::net::SocketAddrV4;

/// What a 4 MB transfer counted.
struct Counted {
    /// Segments whose checksum was checked in a pass of its own (`csum_verified_early`).
    early: u64,
    /// Segments received.
    segs: u64,
    rt: RuntimeStats,
}

/// Linux sends 4 MB to a reader on a plain TAP (checksums in software). The reader's buffer
/// (1 MiB) holds its whole receive buffer, so each copy takes all that has arrived.
fn receive_4mb(rt_config: RuntimeConfig) -> Option<Counted> {
    if skip(&["python3"]) {
        return None;
    }
    let mut ns = NetNs::new();
    let mut rt = link_runtime(&mut ns, TapMode::Plain, false, |_| {}, rt_config);
    let listener = TcpListener::bind(&rt, SocketAddrV4::new(STACK_ADDR, 9)).expect("bind");
    let n = 4 << 20;
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 1 << 20];
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
    let stats = rt.stats();
    rt.shutdown();
    Some(Counted { early: k.csum_verified_early, segs: k.segs_in, rt: stats })
}

/// Over a watched device the reader's round runs its input only, and the output (the ACK)
/// after the reader's copy, which checked the checksums (Jacobson 1993): no second pass
/// over the payload of what the reader's rounds took in. When only the protocol thread runs
/// rounds, it must check each segment before its ACK, ahead of the reader's copy.
///
/// How many segments the reader's rounds take in, rather than the protocol thread's, depends
/// on scheduling (the protocol thread watches the device when the reader has been away from
/// its calls for `HANDOFF`, and its rounds send the ACK at once): the test asserts what the
/// reader's rounds did with theirs, and prints the whole.
#[test]
fn a_watching_reader_checks_checksums_in_its_copy() {
    assert_eq!(RuntimeConfig::default().tap_rounds, TapRounds::Watch);
    let Some(w) = receive_4mb(RuntimeConfig::default()) else { return };
    let Some(p) = receive_4mb(RuntimeConfig { tap_rounds: TapRounds::ProtocolThread, ..Default::default() }) else {
        return;
    };
    let (split, split_early) = (w.rt.split_round_segments, w.rt.split_round_acks_early);
    eprintln!(
        "watch: {} of {} early, the reader's rounds took {split} and checked {split_early} early for an ACK; protocol thread: {} of {}",
        w.early, w.segs, p.early, p.segs
    );
    assert!(split > 0, "the reader's rounds took no segment in");
    assert!(split_early * 50 < split, "the reader's rounds checked {split_early} of {split} early");
    assert_eq!(p.rt.split_round_segments, 0, "only the protocol thread runs rounds");
    assert!(p.early * 10 > p.segs * 9, "protocol thread: {} of {}", p.early, p.segs);
}
