//! A runtime on a TAP or TUN whose kernel side is in a private namespace, for the runtime's
//! interop tests.

use super::netns::NetNs;
use ackclock::buf::Pool;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Device, Tap, TapConfig, TapMode, Tun, TunConfig};
use ackclock::runtime::{Runtime, RuntimeConfig};
use ackclock::time::Instant;
use ackclock::{Stack, StackConfig};
use std::net::Ipv4Addr;

/// The stack's address on the link.
pub const STACK_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// The kernel side's address and prefix, in the namespace.
pub const HOST_CIDR: &str = "10.77.0.1/24";

/// A runtime at [`STACK_ADDR`] on a TAP (or a TUN, `tun`) in `mode`, the device's kernel
/// side moved into `ns` at [`HOST_CIDR`]. The stack has 8,192 buffers unless `tune` says
/// otherwise.
pub fn link_runtime(
    ns: &mut NetNs,
    mode: TapMode,
    tun: bool,
    tune: impl FnOnce(&mut StackConfig),
    rt_config: RuntimeConfig,
) -> Runtime {
    let name = ns.tap_name().to_string();
    ns.adopt(&name);
    let mut sc = StackConfig::new(InterfaceConfig::new(STACK_ADDR, 24));
    sc.pool.buffers = 8 * 1024;
    tune(&mut sc);
    if tun {
        let config = TunConfig { mode, mtu: 1500 };
        let tun = Tun::open(&name, config, Pool::new(Tun::pool_config(&config, 1024)).unwrap()).expect("open TUN");
        ns.take_link(&name, HOST_CIDR);
        let stack = Stack::new(sc, tun.capabilities(), Instant::ZERO).expect("stack");
        Runtime::with_config(stack, tun, rt_config).expect("runtime")
    } else {
        let config = TapConfig { mode, mtu: 1500 };
        let tap = Tap::open(&name, config, Pool::new(Tap::pool_config(&config, 1024)).unwrap()).expect("open TAP");
        ns.take_link(&name, HOST_CIDR);
        let stack = Stack::new(sc, tap.capabilities(), Instant::ZERO).expect("stack");
        Runtime::with_config(stack, tap, rt_config).expect("runtime")
    }
}
