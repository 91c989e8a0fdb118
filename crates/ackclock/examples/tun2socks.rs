//! tun2socks on ackclock and tokio: every TCP connection and UDP flow that the host routes
//! into a TUN device ends in the user-space stack, whatever its destination, and is spliced
//! to one upstream address on the host, as `ackclock relay --tun --listen any --to` does. A
//! VPN or proxy data plane would dial a SOCKS proxy, or the flow's original destination
//! (`local_addr`), where this dials `UPSTREAM`. Needs root (to open /dev/net/tun) and the
//! `tokio` feature.
//!
//! ```sh
//! sudo cargo run --release -p ackclock --features tokio --example tun2socks -- tun0 10.99.0.2/24 127.0.0.1:8000
//! # in another shell: give the host its end of the link; then any address behind it will do
//! sudo ip addr add 10.99.0.1/24 dev tun0 && sudo ip link set tun0 up
//! curl http://10.99.0.77:8080/     # answered by whatever listens on 127.0.0.1:8000
//! ```
//!
//! - **TCP**: a task per connection, `tokio::io::copy_bidirectional_with_sizes` with 64 KiB
//!   each way (8 KiB, tokio's default, costs a host system call per 8 KiB: see
//!   `ackclock::runtime::tokio`). Half-close passes both ways (a FIN after the bytes before
//!   it). A reset on either side, or an upstream that refuses, resets the other side.
//! - **UDP**: a session per (source, original destination) with a host UDP socket connected to
//!   `UPSTREAM`; replies go back from the original destination. A session ends after 30 s
//!   without traffic, or 120 s once the upstream has answered (Linux conntrack's UDP
//!   timeouts); at most [`MAX_SESSIONS`] at once, and datagrams of new flows beyond that are
//!   dropped and counted.
//!
//! The TUN has the virtio-net offloads (checksums, 64 KiB segments both ways); the stack's
//! buffers are 64 KiB for them. Backpressure is end to end: a slow upstream stops the copy,
//! the stack's receive window closes, and the sender inside waits.

use ackclock::runtime::tokio::{TcpListener, TcpStream, UdpSocket};
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Each direction's copy buffer.
pub const COPY_BUFFER: usize = 64 * 1024;
/// UDP sessions at once at most.
pub const MAX_SESSIONS: usize = 1024;
/// A UDP session the upstream never answered ends after this long idle...
pub const UDP_IDLE: Duration = Duration::from_secs(30);
/// ...and one it answered after this long.
pub const UDP_IDLE_REPLIED: Duration = Duration::from_secs(120);

/// Splice every connection `listener` accepts to `upstream`, until accepting fails (the
/// runtime shut down).
pub async fn serve_tcp(listener: TcpListener, upstream: SocketAddr) -> io::Result<()> {
    loop {
        let (inside, _peer) = listener.accept().await?;
        tokio::spawn(splice(inside, upstream));
    }
}

/// One connection: bytes both ways until both sides have closed, or a reset.
async fn splice(mut inside: TcpStream, upstream: SocketAddr) {
    let _ = inside.set_nodelay(true);
    let mut outside = match tokio::net::TcpStream::connect(upstream).await {
        Ok(s) => s,
        Err(_) => {
            // As a kernel would answer a port nobody listens on: a reset.
            let _ = inside.set_zero_linger();
            return;
        }
    };
    let _ = outside.set_nodelay(true);
    if tokio::io::copy_bidirectional_with_sizes(&mut inside, &mut outside, COPY_BUFFER, COPY_BUFFER).await.is_err() {
        // One side failed (reset, or gone): reset the other as they both drop.
        let _ = inside.set_zero_linger();
        let _ = outside.set_zero_linger();
    }
}

/// Counters of the UDP relay.
#[derive(Debug, Default)]
pub struct UdpStats {
    /// Sessions opened.
    pub sessions: AtomicU64,
    /// Datagrams relayed to the upstream, and back.
    pub up: AtomicU64,
    pub down: AtomicU64,
    /// Datagrams of new flows while [`MAX_SESSIONS`] were open.
    pub dropped: AtomicU64,
}

/// A UDP flow: its host socket and when it last carried a datagram.
struct Session {
    host: tokio::net::UdpSocket,
    last: Mutex<Instant>,
    replied: AtomicBool,
}

type Sessions = Mutex<HashMap<(SocketAddrV4, SocketAddrV4), Arc<Session>>>;

/// Relay every datagram `socket` (bound to every address and port) receives to `upstream`,
/// a session per flow, until receiving fails (the runtime shut down).
pub async fn serve_udp(socket: Arc<UdpSocket>, upstream: SocketAddr, stats: Arc<UdpStats>) -> io::Result<()> {
    let sessions: Arc<Sessions> = Arc::default();
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, from, to) = socket.recv_from_to(&mut buf).await?;
        // Found and touched under the table's lock, so that an expiry (which looks at the
        // time under it too) never removes a session this datagram is about to use.
        let known =
            sessions.lock().unwrap().get(&(from, to)).inspect(|s| *s.last.lock().unwrap() = Instant::now()).cloned();
        let session = match known {
            Some(s) => s,
            None if sessions.lock().unwrap().len() >= MAX_SESSIONS => {
                stats.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            None => {
                let host = tokio::net::UdpSocket::bind(if upstream.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).await?;
                host.connect(upstream).await?;
                let s = Arc::new(Session { host, last: Mutex::new(Instant::now()), replied: AtomicBool::new(false) });
                sessions.lock().unwrap().insert((from, to), s.clone());
                stats.sessions.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(replies(s.clone(), socket.clone(), from, to, sessions.clone(), stats.clone()));
                s
            }
        };
        if session.host.send(&buf[..n]).await.is_ok() {
            stats.up.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The upstream's replies of one session, sent back to `client` from `dest` (the address
/// the client sent to), until the session is idle too long or its socket fails.
async fn replies(
    s: Arc<Session>,
    socket: Arc<UdpSocket>,
    client: SocketAddrV4,
    dest: SocketAddrV4,
    sessions: Arc<Sessions>,
    stats: Arc<UdpStats>,
) {
    let mut buf = vec![0u8; 65536];
    loop {
        let idle = if s.replied.load(Ordering::Relaxed) { UDP_IDLE_REPLIED } else { UDP_IDLE };
        let left = {
            let mut table = sessions.lock().unwrap();
            let left = idle.saturating_sub(s.last.lock().unwrap().elapsed());
            if left.is_zero() {
                table.remove(&(client, dest));
                return;
            }
            left
        };
        match tokio::time::timeout(left, s.host.recv(&mut buf)).await {
            Ok(Ok(n)) => {
                s.replied.store(true, Ordering::Relaxed);
                *s.last.lock().unwrap() = Instant::now();
                if socket.send_from(&buf[..n], dest, client).await.is_ok() {
                    stats.down.fetch_add(1, Ordering::Relaxed);
                }
            }
            // The upstream refused (ICMP port unreachable) or the socket failed: done.
            Ok(Err(_)) => {
                sessions.lock().unwrap().remove(&(client, dest));
                return;
            }
            // Idle for the time left: look again (the client may have sent meanwhile).
            Err(_) => {}
        }
    }
}

#[allow(dead_code)] // the test that includes this file uses the functions above only
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use ackclock::iface::InterfaceConfig;
    use ackclock::phy::{Device, TapMode, Tun, TunConfig};
    use ackclock::runtime::Runtime;
    use ackclock::{Stack, StackConfig};
    use std::net::{Ipv4Addr, ToSocketAddrs};

    let mut args = std::env::args().skip(1);
    let usage = "usage: tun2socks TUN A.B.C.D/N HOST:PORT";
    let name = args.next().ok_or(usage)?;
    let cidr = args.next().ok_or(usage)?;
    let upstream = args.next().ok_or(usage)?.to_socket_addrs()?.next().ok_or("UPSTREAM: no address")?;
    let (addr, prefix) = cidr.split_once('/').ok_or("the stack's address as A.B.C.D/N")?;
    let (addr, prefix): (Ipv4Addr, u8) = (addr.parse()?, prefix.parse()?);

    let tun_config = TunConfig { mode: TapMode::Offload, mtu: 1500 };
    let tun = Tun::open(&name, tun_config, Tun::receive_pool(&tun_config, 1024)?)?;
    let mut config = StackConfig::new(InterfaceConfig::new(addr, prefix));
    // Every destination the host routes into the TUN is ours (transparent proxying).
    config.iface.any_destination = true;
    config.pool.buffers = 8 * 1024;
    config.pool.buffer_size = 64 * 1024 + ackclock::buf::DEFAULT_HEADROOM;
    let stack = Stack::new(config, tun.capabilities(), ackclock::time::Instant::ZERO)?;
    let rt = Runtime::new(stack, tun)?;
    let listener = TcpListener::bind_any(&rt)?;
    let udp = Arc::new(UdpSocket::bind_any(&rt)?);
    println!("tun2socks on {name} ({addr}/{prefix}): TCP and UDP to any address -> {upstream}; ready (Ctrl-C to stop)");
    let stats = Arc::new(UdpStats::default());
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async { tokio::try_join!(serve_tcp(listener, upstream), serve_udp(udp, upstream, stats)) })?;
    Ok(())
}
