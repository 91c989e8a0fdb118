//! hyper (HTTP/1.1 on tokio) serving over ackclock's async streams on a TAP device: a real
//! HTTP library on the user-space stack, unchanged. Needs root (to open /dev/net/tun) and
//! the `tokio` feature.
//!
//! ```sh
//! sudo cargo run --release -p ackclock --features tokio --example hyper_tap -- tap0 10.77.0.2/24
//! # in another shell: give the host its end of the link, then download
//! sudo ip addr add 10.77.0.1/24 dev tap0 && sudo ip link set tap0 up
//! curl -s http://10.77.0.2/bytes/100000000 | sha256sum
//! ```
//!
//! `GET /bytes/N` answers N bytes in which byte `i` is `i % 251`, streamed in 64 KiB chunks
//! that all share one buffer; anything else is 404. Each connection is a tokio task; the
//! runtime's protocol thread wakes it when its socket becomes readable or writable.

use ackclock::runtime::tokio::TcpListener;
use bytes::Bytes;
use core::convert::Infallible;
use core::pin::Pin;
use core::task::{Context, Poll};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::{Method, Request, Response, StatusCode};

/// Body byte `i` is `(i % PERIOD) as u8`.
pub const PERIOD: usize = 251;

/// Byte `i` of a `/bytes/N` body.
pub fn body_byte(i: u64) -> u8 {
    (i % PERIOD as u64) as u8
}

/// A body of `left` pattern bytes, handed out as slices of one shared chunk whose length is
/// a multiple of the period, so that every chunk starts at phase 0.
pub struct PatternBody {
    left: u64,
    chunk: Bytes,
}

impl PatternBody {
    fn new(len: u64) -> PatternBody {
        let chunk: Vec<u8> = (0..(64 * 1024 / PERIOD) * PERIOD).map(|i| body_byte(i as u64)).collect();
        PatternBody { left: len, chunk: Bytes::from(chunk) }
    }
}

impl Body for PatternBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(self.chunk.len() as u64);
        self.left -= n;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n as usize)))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    /// Exact, so hyper sends a Content-Length.
    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

async fn handle(req: Request<Incoming>) -> Result<Response<PatternBody>, Infallible> {
    let len = req.uri().path().strip_prefix("/bytes/").and_then(|n| n.parse::<u64>().ok());
    Ok(match (req.method(), len) {
        (&Method::GET, Some(n)) => Response::new(PatternBody::new(n)),
        _ => {
            let mut r = Response::new(PatternBody::new(0));
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    })
}

/// Serve HTTP/1.1 on `listener`, a task per connection, until accepting fails (the runtime
/// shut down).
pub async fn serve(listener: TcpListener) -> std::io::Result<()> {
    loop {
        let (stream, _peer) = listener.accept().await?;
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            // A client that goes away mid-response is that connection's business only.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, hyper::service::service_fn(handle))
                .await;
        });
    }
}

#[allow(dead_code)] // the test that includes this file uses `serve` only
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use ackclock::iface::InterfaceConfig;
    use ackclock::phy::{Device, Tap, TapConfig, TapMode};
    use ackclock::runtime::Runtime;
    use ackclock::{Stack, StackConfig};
    use std::net::{Ipv4Addr, SocketAddrV4};

    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "tap0".into());
    let cidr = args.next().unwrap_or_else(|| "10.77.0.2/24".into());
    let (addr, prefix) = cidr.split_once('/').ok_or("address as A.B.C.D/N")?;
    let (addr, prefix): (Ipv4Addr, u8) = (addr.parse()?, prefix.parse()?);

    // Offload mode: checksums and 64 KiB segments handed to the kernel.
    let tap_config = TapConfig { mode: TapMode::Offload, mtu: 1500 };
    let rx_pool = Tap::receive_pool(&tap_config, 1024)?;
    let tap = Tap::open(&name, tap_config, rx_pool)?;
    let mut config = StackConfig::new(InterfaceConfig::new(addr, prefix));
    config.pool.buffers = 16 * 1024;
    config.pool.buffer_size = 64 * 1024 + ackclock::buf::DEFAULT_HEADROOM;
    let stack = Stack::new(config, tap.capabilities(), ackclock::time::Instant::ZERO)?;
    let rt = Runtime::new(stack, tap)?;
    let listener = TcpListener::bind(&rt, SocketAddrV4::new(addr, 80))?;
    println!("HTTP on {addr}:80 ({name}); GET /bytes/N; Ctrl-C to stop");
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(listener))?;
    Ok(())
}
