//! Two TCP/IP stacks in one process, each driven by its own runtime, joined by an in-memory
//! "cable" (the pipe). A server thread and a client thread use them exactly as they would
//! use `std::net`: connect, accept, read, write. No root, no network.
//!
//! ```sh
//! cargo run --release -p ackclock --example pipe_threads          # 1 GB
//! cargo run --release -p ackclock --example pipe_threads -- 256   # 256 MB
//! ```
//!
//! Two threads are busy: the application threads. Each makes the one copy of its direction
//! (into or out of packet buffers) and, over the pipe, also runs its runtime's protocol
//! rounds (frames in, TCP, frames out) while the protocol threads sleep; the protocol
//! thread of a runtime runs rounds only when no application thread of that runtime is inside
//! a call (timers, or a frame that arrives while its thread sleeps).

use ackclock::iface::InterfaceConfig;
use ackclock::phy::{pipe, Capabilities, PipeConfig};
use ackclock::runtime::{Runtime, TcpListener, TcpStream};
use ackclock::time::Instant;
use ackclock::{Stack, StackConfig};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};

fn main() -> std::io::Result<()> {
    let megabytes: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1024);
    let total = megabytes << 20;

    // The cable, and a stack at each end of it: 10.0.0.1 and 10.0.0.2.
    let (end_a, end_b) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let stack = |addr: Ipv4Addr| {
        let config = StackConfig::new(InterfaceConfig::new(addr, 24));
        Stack::new(config, Capabilities::ethernet(1500), Instant::ZERO).expect("stack")
    };
    let client_side = Runtime::new(stack(Ipv4Addr::new(10, 0, 0, 1)), end_a)?;
    let server_side = Runtime::new(stack(Ipv4Addr::new(10, 0, 0, 2)), end_b)?;

    let addr = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 5001);
    let listener = TcpListener::bind(&server_side, addr)?;

    // The server: accept one connection and count what arrives until the client closes.
    let server = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut conn, peer) = listener.accept()?;
        println!("server: connection from {peer}");
        let mut buf = vec![0u8; 256 * 1024];
        let mut received = 0;
        loop {
            match conn.read(&mut buf)? {
                0 => return Ok(received),
                n => received += n as u64,
            }
        }
    });

    // The client: connect and send `total` bytes.
    let start = std::time::Instant::now();
    let mut conn = TcpStream::connect(&client_side, addr)?;
    let chunk = vec![0xa5u8; 256 * 1024];
    let mut sent = 0;
    while sent < total {
        let n = (chunk.len() as u64).min(total - sent) as usize;
        conn.write_all(&chunk[..n])?;
        sent += n as u64;
    }
    drop(conn); // close: FIN after the queued data

    let received = server.join().expect("server thread")?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{received} bytes in {secs:.2} s: {:.2} Gbit/s ({} protocol rounds and {} window-update requests on the receiver)",
        received as f64 * 8.0 / secs / 1e9,
        server_side.stats().rounds,
        server_side.stats().window_update_requests,
    );
    assert_eq!(received, total);
    Ok(())
}
