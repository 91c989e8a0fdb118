//! A real HTTP library over the runtime: hyper (HTTP/1.1, tokio) serves from ackclock's
//! async streams on a TAP, and curl in a network namespace downloads from it, byte-exact
//! (SHA-256 of what curl wrote against the expected body), in both TAP modes: one large
//! download, two on one kept-alive connection, and 16 in parallel.
//!
//! Needs root, /dev/net/tun, curl and sha256sum: without them the tests print why and pass as
//! skipped. Every wait is bounded.
#![cfg(target_os = "linux")]

mod common;
#[path = "../examples/hyper_tap.rs"]
mod hyper_tap;

use ackclock::buf::{Pool, DEFAULT_HEADROOM};
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Device, Tap, TapConfig, TapMode};
use ackclock::runtime::tokio::TcpListener;
use ackclock::runtime::Runtime;
use ackclock::time::Instant;
use ackclock::{Stack, StackConfig};
use common::netns::{skip, NetNs};
use sha2::{Digest, Sha256};
use std::net::{Ipv4Addr, SocketAddrV4};

const STACK_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const HOST_CIDR: &str = "10.77.0.1/24";

/// SHA-256, in hex, of the concatenated bodies of `/bytes/N` for each N.
fn expected_sha(lens: &[u64]) -> String {
    let mut h = Sha256::new();
    let mut chunk = vec![0u8; 1 << 16];
    for &len in lens {
        let mut i = 0u64;
        while i < len {
            let n = (len - i).min(chunk.len() as u64) as usize;
            for (k, b) in chunk[..n].iter_mut().enumerate() {
                *b = hyper_tap::body_byte(i + k as u64);
            }
            h.update(&chunk[..n]);
            i += n as u64;
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn hyper_over_tap(mode: TapMode) {
    if skip(&["curl", "sha256sum", "sh"]) {
        return;
    }
    let mut ns = NetNs::new();
    let config = TapConfig { mode, mtu: 1500 };
    let pool = Pool::new(Tap::pool_config(&config, 1024)).unwrap();
    let tap_name = ns.tap_name().to_string();
    ns.adopt(&tap_name);
    let tap = Tap::open(&tap_name, config, pool).expect("open TAP");
    ns.take_link(&tap_name, HOST_CIDR);
    let mut sc = StackConfig::new(InterfaceConfig::new(STACK_ADDR, 24));
    sc.pool.buffers = 8 * 1024;
    if mode == TapMode::Offload {
        sc.pool.buffer_size = 64 * 1024 + DEFAULT_HEADROOM;
    }
    let stack = Stack::new(sc, tap.capabilities(), Instant::ZERO).unwrap();
    let mut rt = Runtime::new(stack, tap).expect("runtime");
    let listener = TcpListener::bind(&rt, SocketAddrV4::new(STACK_ADDR, 80)).expect("bind");
    let tokio_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = tokio_rt.spawn(hyper_tap::serve(listener));

    let url = |n: u64| format!("http://{STACK_ADDR}/bytes/{n}");
    let run = |script: String| {
        let out = ns.command(120, "sh").args(["-c", &script]).output().expect("run sh");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{script}: {text}{}", String::from_utf8_lossy(&out.stderr));
        text
    };
    // One large download.
    let big = 100_000_000;
    let sha = run(format!("curl -sS --fail {} | sha256sum", url(big)));
    assert_eq!(sha.split_whitespace().next(), Some(expected_sha(&[big]).as_str()), "one download");
    // Two on one connection (HTTP/1.1 keep-alive; curl reuses the connection).
    let sha = run(format!("curl -sS --fail {} {} | sha256sum", url(1_000_000), url(3_000_001)));
    assert_eq!(sha.split_whitespace().next(), Some(expected_sha(&[1_000_000, 3_000_001]).as_str()), "keep-alive");
    // 16 in parallel, each checked.
    let n = 5_000_000;
    let want = expected_sha(&[n]);
    let text = run(format!("for i in $(seq 16); do (curl -sS --fail {} | sha256sum) & done; wait", url(n)));
    let sums: Vec<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(sums.len(), 16, "{text}");
    assert!(sums.iter().all(|s| *s == want), "{text}");
    // Not found.
    let code = run(format!("curl -s -o /dev/null -w '%{{http_code}}' http://{STACK_ADDR}/nothing"));
    assert_eq!(code.trim(), "404");

    rt.shutdown();
    let ended = tokio_rt.block_on(server).unwrap();
    assert!(ended.is_err(), "serve ends when the runtime shuts down");
}

#[test]
fn hyper_serves_curl_plain() {
    hyper_over_tap(TapMode::Plain)
}

#[test]
fn hyper_serves_curl_offload() {
    hyper_over_tap(TapMode::Offload)
}
