//! Memory that follows the load: the relay (`ackclock-relay --tun`, the relay as a binary of
//! its own, as a data plane ships it) carries `iperf3 -P 16` for 30 s in
//! each direction, its resident memory sampled every 200 ms. It must stay under a fixed
//! bound while loaded and come back near idle afterwards (its packet pools are touched only
//! when used and their free pages are given back after a quiet second). The curve is printed
//! (`--nocapture`) for BENCHMARKS.md.
//!
//! Needs root, /dev/net/tun, iperf3 and timeout: without them the test prints SKIP and
//! passes. Every wait is bounded.
#![cfg(target_os = "linux")]

#[macro_use]
mod common;

use common::interop::{skip, Mode, Proc, HOST_CIDR, STACK_ADDR, STACK_CIDR};
use common::netns::NetNs;
use std::process::Command;
use std::time::{Duration, Instant};

/// Resident memory of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Loaded, the relay stays under this. Measured peaks with 16 streams: 16-25 MiB on a
/// plain TUN and 16-19 MiB with offloads in the runs of 2026-11-27 (39 MiB with offloads in
/// an earlier build of the same day): 16 connections' 256 KiB buffers each way, the device
/// rings, the binary. The bound leaves room for the spread from run to run (how the kernel
/// batches, how far each stream's window opens) and still catches a leak or a queue that
/// grows past its buffer: the pools' reserve is far larger (1 GiB of address space with
/// offloads).
const LOADED_BOUND_KIB: u64 = 80 * 1024;

both_modes!(rss_stays_bounded_and_returns_near_idle, |mode| {
    if skip(&["iperf3", "timeout"]) {
        return;
    }
    let port = 20000 + (std::process::id() % 10000) as u16 * 2 + (mode == Mode::Plain) as u16;
    let mut server = Command::new("timeout");
    server.args(["-k", "5", "200", "iperf3", "-s", "--forceflush", "-B", "127.0.0.1", "-p", &port.to_string()]);
    let _server = Proc::start("iperf3 -s", server, "Server listening").0;
    let mut ns = NetNs::new();
    let tun = ns.tap_name().to_string();
    ns.adopt(&tun);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ackclock-relay"));
    cmd.args(["--tun", &tun, "--addr", STACK_CIDR, "--host-addr", HOST_CIDR, "--netns", ns.name()]);
    cmd.args(["--to", &format!("127.0.0.1:{port}"), "--listen", &port.to_string()]);
    if mode == Mode::Plain {
        cmd.arg("--plain");
    }
    let mut relay = Proc::start("relay", cmd, "ready").0;
    let pid = relay.child.id();
    std::thread::sleep(Duration::from_millis(500));
    let idle = rss_kib(pid);
    let start = Instant::now();
    let mut curve = vec![(0.0, idle)];
    for reverse in [false, true] {
        let mut c = ns.command(90, "iperf3");
        c.args(["-c", STACK_ADDR, "-p", &port.to_string(), "-P", "16", "-t", "30"]);
        if reverse {
            c.arg("-R");
        }
        let mut child = c.stdout(std::process::Stdio::null()).spawn().expect("run iperf3");
        loop {
            curve.push((start.elapsed().as_secs_f64(), rss_kib(pid)));
            if child.try_wait().expect("iperf3").is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(child.wait().unwrap().success(), "iperf3 (reverse: {reverse})");
    }
    // Quiet: within a few seconds the free buffers' pages go back.
    let mut after = rss_kib(pid);
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(200));
        after = rss_kib(pid);
        curve.push((start.elapsed().as_secs_f64(), after));
        if after <= 2 * idle {
            break;
        }
    }
    relay.stop_ok();
    let peak = curve.iter().map(|&(_, r)| r).max().unwrap_or(0);
    let line: Vec<String> = curve.iter().map(|(t, r)| format!("{t:.1}s:{}", r / 1024)).collect();
    eprintln!("relay RSS MiB over time ({mode:?}): {}", line.join(" "));
    eprintln!("idle {idle} KiB, peak {peak} KiB, after {after} KiB");
    assert!(peak <= LOADED_BOUND_KIB, "peak {peak} KiB over {LOADED_BOUND_KIB}");
    assert!(after <= 2 * idle, "after the load {after} KiB, idle {idle} KiB");
});
