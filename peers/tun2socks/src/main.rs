//! tun2socks in its minimal form, on a peer stack: accept every TCP flow arriving on a TUN
//! device and splice it to one host address with `tokio::io::copy_bidirectional`. The same
//! shape as `ackclock relay --tun --listen any --to ADDR`, so `scripts/bench-tun` can put
//! them side by side. `ackclock-tokio` is that shape on ackclock's own tokio adapter (its
//! threaded runtime over a plain TUN, as the peers use; `ackclock-tokio-offload` over a TUN with
//! virtio-net offloads, as `relay --tun` uses by default): what an embedder writing tun2socks
//! with ackclock and tokio gets, beside the relay's own single-threaded loop.
//!
//! ```text
//! tun2socks-peers ipstack|netstack-smoltcp|ackclock-tokio|ackclock-tokio-offload TUN_NAME HOST:PORT
//! ```
//!
//! `TUN2SOCKS_COPY_BUFFER=N` gives each direction's copy an `N`-byte buffer (tokio's
//! `copy_bidirectional_with_sizes`) instead of `copy_bidirectional`'s 8 KiB.
//!
//! It creates the TUN (no address, down), prints "ready", and serves until killed; the
//! script moves the TUN into a namespace and configures it there (ackclock-tokio's stack
//! takes 10.99.0.2/24, the address the script gives the relay).

use futures::{SinkExt, StreamExt};
use std::net::SocketAddr;
use tokio::net::TcpStream;

const MTU: u16 = 1500;

fn tun_device(name: &str) -> std::io::Result<tun::AsyncDevice> {
    let mut config = tun::Configuration::default();
    config.tun_name(name).mtu(MTU);
    tun::create_as_async(&config).map_err(std::io::Error::other)
}

/// The size of each direction's copy buffer: `TUN2SOCKS_COPY_BUFFER` bytes if set, else
/// `copy_bidirectional`'s own (8 KiB). The same for every stack.
fn copy_buffer() -> Option<usize> {
    static SIZE: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| std::env::var("TUN2SOCKS_COPY_BUFFER").ok().and_then(|s| s.parse().ok()).filter(|&n| n > 0))
}

async fn splice<S>(mut inside: S, to: SocketAddr)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(mut outside) = TcpStream::connect(to).await else { return };
    let _ = outside.set_nodelay(true);
    let _ = match copy_buffer() {
        Some(n) => tokio::io::copy_bidirectional_with_sizes(&mut inside, &mut outside, n, n).await,
        None => tokio::io::copy_bidirectional(&mut inside, &mut outside).await,
    };
}

async fn ipstack_main(name: &str, to: SocketAddr) -> std::io::Result<()> {
    let mut config = ipstack::IpStackConfig::default();
    config.mtu(MTU).map_err(std::io::Error::other)?;
    let mut stack = ipstack::IpStack::new(config, tun_device(name)?);
    println!("ready");
    loop {
        match stack.accept().await.map_err(std::io::Error::other)? {
            ipstack::IpStackStream::Tcp(tcp) => {
                tokio::spawn(splice(tcp, to));
            }
            _ => continue,
        }
    }
}

async fn netstack_smoltcp_main(name: &str, to: SocketAddr) -> std::io::Result<()> {
    let (stack, runner, _udp, listener) =
        netstack_smoltcp::StackBuilder::default().enable_tcp(true).enable_udp(false).mtu(MTU as usize).build()?;
    let mut listener = listener.expect("tcp enabled");
    if let Some(runner) = runner {
        tokio::spawn(runner);
    }
    let (mut stack_sink, mut stack_stream) = stack.split();
    let (mut tun_sink, mut tun_stream) = tun_device(name)?.into_framed().split();
    tokio::spawn(async move {
        while let Some(Ok(pkt)) = stack_stream.next().await {
            if tun_sink.send(pkt).await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        while let Some(Ok(pkt)) = tun_stream.next().await {
            if stack_sink.send(pkt).await.is_err() {
                break;
            }
        }
    });
    println!("ready");
    while let Some((stream, _local, _remote)) = listener.next().await {
        tokio::spawn(splice(stream, to));
    }
    Ok(())
}

fn ackclock_tokio_main(name: &str, to: SocketAddr, mode: ackclock::phy::TapMode) -> std::io::Result<()> {
    use ackclock::buf::PoolConfig;
    use ackclock::iface::InterfaceConfig;
    use ackclock::phy::{Device, TapMode, Tun, TunConfig};
    use ackclock::runtime::tokio::TcpListener;
    use ackclock::runtime::Runtime;
    use ackclock::{Stack, StackConfig};

    let tun_config = TunConfig { mode, mtu: MTU as usize };
    let tun = Tun::open(name, tun_config, Tun::receive_pool(&tun_config, 1024).map_err(std::io::Error::other)?)?;
    let mut config = StackConfig::new(InterfaceConfig::new(std::net::Ipv4Addr::new(10, 99, 0, 2), 24));
    config.iface.any_destination = true;
    // The pools `ackclock relay` uses: MTU-sized buffers, or 64 KiB ones for TSO.
    config.pool = match mode {
        TapMode::Plain => PoolConfig { buffers: 32 * 1024, ..PoolConfig::default() },
        TapMode::Offload => PoolConfig {
            buffers: 8 * 1024,
            buffer_size: 64 * 1024 + ackclock::buf::DEFAULT_HEADROOM,
            ..PoolConfig::default()
        },
    };
    let stack = Stack::new(config, tun.capabilities(), ackclock::time::Instant::ZERO).map_err(std::io::Error::other)?;
    let rt = Runtime::new(stack, tun)?;
    let listener = TcpListener::bind_any(&rt)?;
    println!("ready");
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async move {
        loop {
            let (stream, _peer) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(splice(stream, to));
        }
    })
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mode = match args.get(1).map(String::as_str) {
        Some("ackclock-tokio") => Some(ackclock::phy::TapMode::Plain),
        Some("ackclock-tokio-offload") => Some(ackclock::phy::TapMode::Offload),
        _ => None,
    };
    if let (Some(mode), 4) = (mode, args.len()) {
        let to: SocketAddr = args[3].parse().map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        return ackclock_tokio_main(&args[2], to, mode);
    }
    tokio_main()
}

#[tokio::main]
async fn tokio_main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "usage: tun2socks-peers ipstack|netstack-smoltcp|ackclock-tokio[-offload] TUN HOST:PORT",
        )
    };
    if args.len() != 4 {
        return Err(usage());
    }
    let to: SocketAddr = args[3].parse().map_err(|_| usage())?;
    match args[1].as_str() {
        "ipstack" => ipstack_main(&args[2], to).await,
        "netstack-smoltcp" => netstack_smoltcp_main(&args[2], to).await,
        _ => Err(usage()),
    }
}
