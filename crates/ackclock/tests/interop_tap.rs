//! Interop with the Linux kernel as the peer, through a TAP device whose kernel side lives
//! in a private network namespace made (and removed) by each test: Linux pings a stack
//! driven in-process on a `phy::Tap`, in both TAP modes, plain and offload (virtio-net
//! header with checksum and segmentation offload). The tests of the `ackclock` tool over a
//! TAP are the CLI crate's.
//!
//! Needs root, /dev/net/tun and ping: without them every test prints why and passes as
//! skipped. Every wait is bounded.
#![cfg(target_os = "linux")]

mod common;

use ackclock::buf::Pool;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Device, Tap, TapConfig, TapMode};
use ackclock::time::Instant;
use ackclock::{Stack, StackConfig};
use common::netns::{skip, NetNs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const STACK_ADDR: &str = "10.77.0.2";
const HOST_CIDR: &str = "10.77.0.1/24";

// ---------------------------------------------------------------------------------------
// The tests; each runs in both TAP modes.

macro_rules! both_modes {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn plain() {
                ($body)(TapMode::Plain)
            }
            #[test]
            fn offload() {
                ($body)(TapMode::Offload)
            }
        }
    };
}

/// Stops and joins the stack thread on drop, so a failed assertion does not leave it (and
/// its TAP) running.
struct StackThread {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(ackclock::phy::DeviceStats, ackclock::phy::TapCounters)>>,
}

impl StackThread {
    fn join(&mut self) -> (ackclock::phy::DeviceStats, ackclock::phy::TapCounters) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for StackThread {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.join();
        }
    }
}

/// Linux pings the stack (ICMP echo, ARP first) on a TAP driven in-process.
fn ping(mode: TapMode) {
    if skip(&["ping"]) {
        return;
    }
    let mut ns = NetNs::new();
    let config = TapConfig { mode, mtu: 1500 };
    let pool = Pool::new(Tap::pool_config(&config, 64)).unwrap();
    let tap_name = ns.tap_name().to_string();
    ns.adopt(&tap_name);
    let mut tap = Tap::open(&tap_name, config, pool).expect("open TAP");
    assert!(tap.created());
    ns.take_link(&tap_name, HOST_CIDR);
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            let clock = || Instant::from_secs(1) + t0.elapsed();
            let iface = InterfaceConfig::new(STACK_ADDR.parse().unwrap(), 24);
            let mut stack = Stack::new(StackConfig::new(iface), tap.capabilities(), clock()).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let now = clock();
                stack.receive(now, &mut tap);
                stack.transmit(now, &mut tap);
                let wait = stack.poll_at().map_or(Duration::from_millis(50), |t| t - clock());
                tap.wait(Some(wait.min(Duration::from_millis(50)))).expect("TAP wait");
            }
            (tap.stats(), *tap.counters())
        })
    };
    let mut stack = StackThread { stop, thread: Some(thread) };
    let out = ns
        .command(30, "ping")
        .args(["-c", "5", "-i", "0.2", "-W", "2", "-s", "1000", STACK_ADDR])
        .output()
        .expect("run ping");
    let text = String::from_utf8_lossy(&out.stdout);
    let (stats, _) = stack.join();
    assert!(
        out.status.success() && text.contains(" 5 received"),
        "ping: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stats.rx_frames >= 6 && stats.tx_frames >= 6, "{stats:?}");
}
both_modes!(ping, ping);
