//! An echo server (RFC 862, port 7) on a TAP device, written as you would write it with
//! `std::net`: one thread per connection. Needs root (to open /dev/net/tun).
//!
//! ```sh
//! sudo cargo run --release -p ackclock --example echo_tap -- tap0 10.77.0.2/24
//! # in another shell: give the host its end of the link, then talk to the stack
//! sudo ip addr add 10.77.0.1/24 dev tap0 && sudo ip link set tap0 up
//! echo hello | nc -q1 10.77.0.2 7
//! ```
//!
//! The runtime's protocol thread sleeps in ppoll(2) on the TAP's descriptor; each
//! connection's thread blocks in `read` until data arrives, then writes it back.

use ackclock::iface::InterfaceConfig;
use ackclock::phy::{Device, Tap, TapConfig};
use ackclock::runtime::{Runtime, TcpListener, TcpStream};
use ackclock::time::Instant;
use ackclock::{Stack, StackConfig};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "tap0".into());
    let cidr = args.next().unwrap_or_else(|| "10.77.0.2/24".into());
    let (addr, prefix) = cidr.split_once('/').ok_or("address as A.B.C.D/N")?;
    let (addr, prefix): (Ipv4Addr, u8) = (addr.parse()?, prefix.parse()?);

    // The TAP, receiving into buffers of its own pool, and a stack for it. Plain mode: no
    // offloads, every frame MTU-sized.
    let tap_config = TapConfig { mode: ackclock::phy::TapMode::Plain, mtu: 1500 };
    let rx_pool = Tap::receive_pool(&tap_config, 4096)?;
    let tap = Tap::open(&name, tap_config, rx_pool)?;
    let mut config = StackConfig::new(InterfaceConfig::new(addr, prefix));
    config.pool.buffers = 16 * 1024;
    let stack = Stack::new(config, tap.capabilities(), Instant::ZERO)?;

    // From here on the runtime's protocol thread owns the TAP.
    let rt = Runtime::new(stack, tap)?;
    let listener = TcpListener::bind(&rt, SocketAddrV4::new(addr, 7))?;
    println!("echo server on {addr}:7 ({name}); Ctrl-C to stop");

    for conn in listener.incoming() {
        let conn = conn?;
        std::thread::spawn(move || echo(conn));
    }
    Ok(())
}

/// Write back whatever arrives until the client closes its side, then close ours.
fn echo(mut conn: TcpStream) {
    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let mut buf = [0u8; 16 * 1024];
    let mut echoed = 0;
    loop {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if conn.write_all(&buf[..n]).is_err() {
                    break;
                }
                echoed += n;
            }
            Err(_) => break,
        }
    }
    println!("{peer}: echoed {echoed} bytes");
    // Dropping `conn` closes it: a FIN after whatever is still queued.
}
