//! Async sockets for tokio on a [`Runtime`] (the `tokio` feature).
//!
//! ```no_run
//! # async fn f(rt: &ackclock::runtime::Runtime) -> std::io::Result<()> {
//! use ackclock::runtime::tokio::{TcpListener, TcpStream};
//! let listener = TcpListener::bind(rt, "10.0.0.1:7".parse().unwrap())?;
//! let (mut stream, _peer) = listener.accept().await?;
//! let (mut r, mut w) = stream.split(); // or `into_split` for two tasks
//! tokio::io::copy(&mut r, &mut w).await?; // echo
//! # Ok(()) }
//! ```
//!
//! The runtime's protocol thread does the protocol work, as for the blocking sockets; these
//! types only make the socket calls from tasks. A call that would block stores the task's
//! waker with the readiness it saw, under the stack's lock, and the protocol thread wakes it
//! after the round in which that readiness changed, and only then: a task waiting on an
//! idle connection costs nothing per round beyond the readiness check every waiter costs.
//! No tokio reactor is needed for that, so these sockets work on any tokio runtime
//! (current-thread or multi-thread).
//!
//! # Watching the device from a task
//!
//! Over a TAP or TUN, spawn [`watch_device`] on the runtime whose tasks use the sockets
//! (its I/O driver enabled). The device's descriptor then wakes a task on a tokio worker,
//! which runs the round there, lets the tasks that round woke copy their data, and sends the
//! ACKs and window updates after those copies; the protocol thread keeps only the timers.
//! Without it, every frame goes through the protocol thread and a waker to the task's
//! worker, and each read's window update back. `ackclock serve` measured 0.52-1.25x of a
//! single-thread loop without a watcher and 0.81-1.02x with one, its tasks on a
//! current-thread tokio runtime (on a multi-thread one, a woken task often runs on another
//! worker than the watcher, which costs a hand-off again).
//!
//! Reads and writes are the core's single copy, made by the polling task: `poll_read`
//! copies from the packet buffers straight into the caller's `ReadBuf`, verifying the
//! deferred checksum in that copy, and `poll_write` copies into packet buffers with the
//! checksum computed in the copy. [`AsyncWrite::poll_shutdown`] queues the FIN behind the
//! data already written (RFC 9293 §3.10.4: CLOSE in ESTABLISHED), so
//! `tokio::io::copy_bidirectional` half-closes correctly in either order.
//!
//! # Splicing to a host socket: give the copy 64 KiB
//!
//! `tokio::io::copy_bidirectional` moves each direction through an 8 KiB buffer, so a
//! tun2socks-style splice makes a system call on the host socket per 8 KiB, and its reads
//! here free the receive window 8 KiB at a time. Through a TUN with offloads (64 KiB frames)
//! that costs far more than the stack: in two pairs of `scripts/bench-tun` runs the same
//! minimal relay moved 8.0-10.9 Gbit/s with 8 KiB and 11.2-13.5 with 64 KiB
//! (`copy_bidirectional_with_sizes(a, b, 65536, 65536)`), at 0.72-0.87 CPU seconds per GB
//! instead of 0.98-1.23. On a plain TUN (MTU-sized frames) the two sizes were within the run's
//! noise. So splice with 64 KiB buffers:
//!
//! ```no_run
//! # async fn f(inside: ackclock::runtime::tokio::TcpStream) -> std::io::Result<()> {
//! let mut outside = tokio::net::TcpStream::connect("127.0.0.1:8000").await?;
//! let mut inside = inside;
//! tokio::io::copy_bidirectional_with_sizes(&mut inside, &mut outside, 64 * 1024, 64 * 1024).await?;
//! # Ok(()) }
//! ```
//!
//! A splice can also skip its own copy towards the host: [`TcpStream::read_bufs`] hands over
//! the received segments themselves (their checksums verified), to be written with one
//! vectored write and dropped, which gives their buffers back to the pool. `ackclock relay`
//! does this for its uploads (BENCHMARKS.md, "The upload without the relay's copy"). A
//! program that writes to sockets with `writev(2)` must leave SIGPIPE ignored (Rust's
//! default): a vectored write takes no `MSG_NOSIGNAL`.

mod split;
pub use split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, WriteHalf};

use super::listener;
use super::net::{self, Attempt};
use super::Runtime;
use ::tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use std::future::poll_fn;
use std::io;
use std::net::{Shutdown, SocketAddr, SocketAddrV4};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A TCP connection for tokio tasks: `AsyncRead` and `AsyncWrite`. Dropping it closes the
/// connection as `close(2)` does (a FIN after queued data).
#[derive(Debug)]
pub struct TcpStream {
    inner: net::TcpStream,
}

impl TcpStream {
    /// Connect to `addr` from the stack's address and an ephemeral port, waiting for the
    /// handshake (ConnectionRefused, TimedOut when it fails).
    pub async fn connect(rt: &Runtime, addr: SocketAddrV4) -> io::Result<TcpStream> {
        let inner = net::TcpStream::start_connect(rt, addr)?;
        poll_fn(|cx| match inner.connected(inner.shared().lock()) {
            Attempt::Done(r) => Poll::Ready(r.map(|_| ())),
            Attempt::Blocked(mut g) => {
                inner.register_waker(&mut g, true, cx.waker());
                Poll::Pending
            }
        })
        .await?;
        Ok(TcpStream { inner })
    }

    /// A blocking stream made async (the same connection).
    pub fn from_std(stream: net::TcpStream) -> TcpStream {
        TcpStream { inner: stream }
    }

    /// The blocking stream behind it (the same connection).
    pub fn into_std(self) -> net::TcpStream {
        self.inner
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// The local address (for a stream of [`TcpListener::bind_any`], where the peer was
    /// going).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Nagle's algorithm off (`true`) or on.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.inner.set_nodelay(nodelay)
    }

    /// Whether Nagle's algorithm is off.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.nodelay()
    }

    /// Keep-alive probes ([`net::TcpStream::set_keepalive`]); `None` turns them off.
    pub fn set_keepalive(&self, keepalive: Option<crate::tcp::KeepAlive>) -> io::Result<()> {
        self.inner.set_keepalive(keepalive)
    }

    /// The keep-alive settings (`None`: off).
    pub fn keepalive(&self) -> io::Result<Option<crate::tcp::KeepAlive>> {
        self.inner.keepalive()
    }

    /// RFC 5482's user timeout ([`net::TcpStream::set_user_timeout`]).
    pub fn set_user_timeout(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        self.inner.set_user_timeout(timeout)
    }

    /// The user timeout (`None`: only the retransmission count ends a connection).
    pub fn user_timeout(&self) -> io::Result<Option<std::time::Duration>> {
        self.inner.user_timeout()
    }

    /// Make dropping this stream reset the connection instead of closing it
    /// ([`net::TcpStream::set_zero_linger`]).
    pub fn set_zero_linger(&self) -> io::Result<()> {
        self.inner.set_zero_linger()
    }

    /// A `tcp_info`-like snapshot of the connection.
    pub fn tcp_info(&self) -> io::Result<crate::tcp::TcpInfo> {
        self.inner.tcp_info()
    }

    /// Wait until a read would not block: data, end of stream or an error is there
    /// (tokio's `TcpStream::readable`). With [`try_read`](Self::try_read), a splice can wait
    /// for data without holding a buffer, and read and write one stream from two tasks
    /// through `&self`.
    pub async fn readable(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_read_ready(cx)).await
    }

    /// [`readable`](Self::readable) as a poll: `Pending` registers the task's waker, which
    /// the protocol thread wakes when the connection's readiness changes.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_ready(cx, false)
    }

    /// Read what is there now, without waiting: `WouldBlock` if nothing is. The copy is the
    /// one `poll_read` makes (the deferred checksum verified in it).
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let inner = &self.inner;
        match inner.try_read(inner.shared().lock(), buf, false, &mut false) {
            Attempt::Done(r) => r,
            Attempt::Blocked(_) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Receive into `buf` without removing the bytes from the stream, waiting until some
    /// are there (tokio's `TcpStream::peek`): the next read returns them again.
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut buf = ReadBuf::new(buf);
        poll_fn(|cx| self.poll_peek(cx, &mut buf)).await
    }

    /// [`peek`](Self::peek) as a poll (tokio's `TcpStream::poll_peek`): the bytes go into
    /// `buf`'s unfilled part, which advances; `Pending` registers the task's waker.
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<usize>> {
        let inner = &self.inner;
        let dst = buf.initialize_unfilled();
        if dst.is_empty() {
            return Poll::Ready(Ok(0));
        }
        match inner.try_recv(inner.shared().lock(), false, &mut false, |stack, h| stack.tcp_peek(h, dst)) {
            Attempt::Done(Ok(n)) => {
                buf.advance(n);
                Poll::Ready(Ok(n))
            }
            Attempt::Done(Err(e)) => Poll::Ready(Err(e)),
            Attempt::Blocked(mut g) => {
                inner.register_waker(&mut g, false, cx.waker());
                Poll::Pending
            }
        }
    }

    /// Move received segments to `out`, their buffers with them, waiting until there are
    /// some: the zero-copy read of [`Stack::tcp_recv_bufs`](crate::Stack::tcp_recv_bufs),
    /// for a splice that writes them on with a vectored write (`writev(2)`) and drops them
    /// after. Whole segments, at least one, then as many as keep the bytes moved within
    /// `max`. Returns the bytes moved; `Ok(0)` is the end of the stream.
    pub async fn read_bufs(&self, max: usize, out: &mut Vec<crate::buf::PBuf>) -> io::Result<usize> {
        poll_fn(|cx| self.poll_read_bufs(cx, max, out)).await
    }

    /// [`read_bufs`](Self::read_bufs) as a poll: `Pending` registers the task's waker.
    pub fn poll_read_bufs(
        &self,
        cx: &mut Context<'_>,
        max: usize,
        out: &mut Vec<crate::buf::PBuf>,
    ) -> Poll<io::Result<usize>> {
        let inner = &self.inner;
        match inner.try_recv(inner.shared().lock(), false, &mut false, |stack, h| stack.tcp_recv_bufs(h, max, out)) {
            Attempt::Done(r) => Poll::Ready(r),
            Attempt::Blocked(mut g) => {
                inner.register_waker(&mut g, false, cx.waker());
                Poll::Pending
            }
        }
    }

    /// Wait until a write would not block: send space and a packet buffer are free, or the
    /// connection is over (tokio's `TcpStream::writable`).
    pub async fn writable(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_write_ready(cx)).await
    }

    /// [`writable`](Self::writable) as a poll.
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_ready(cx, true)
    }

    /// Queue what fits now, without waiting: `WouldBlock` if nothing does.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        let inner = &self.inner;
        match inner.try_write(inner.shared().lock(), buf, false) {
            Attempt::Done(r) => r,
            Attempt::Blocked(_) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Queue bytes that `fill` writes straight into the send queue's packet buffers,
    /// without waiting: the zero-copy write of
    /// [`Stack::tcp_send_with`](crate::Stack::tcp_send_with), for a splice that reads a
    /// host socket straight into them (wait with [`writable`](Self::writable) first).
    /// `fill` gets free space in a buffer and returns how many bytes it wrote there; it is
    /// called again while it fills all it was given and there is room. Returns the bytes
    /// queued (0 if `fill` wrote none), or `WouldBlock` if there is no room. The lock on
    /// the stack is held while `fill` runs: keep it to one non-blocking read.
    pub fn try_write_with(&self, mut fill: impl FnMut(&mut [u8]) -> usize) -> io::Result<usize> {
        let inner = &self.inner;
        match inner.try_send(inner.shared().lock(), false, |stack, h| stack.tcp_send_with(h, &mut fill)) {
            Attempt::Done(r) => r,
            Attempt::Blocked(_) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn poll_ready(&self, cx: &mut Context<'_>, write: bool) -> Poll<io::Result<()>> {
        let inner = &self.inner;
        match inner.ready(inner.shared().lock(), write) {
            Attempt::Done(r) => Poll::Ready(r.map(|_| ())),
            Attempt::Blocked(mut g) => {
                inner.register_waker(&mut g, write, cx.waker());
                Poll::Pending
            }
        }
    }
}

/// Reading through a shared reference, as `std::io::Read for &std::net::TcpStream`: one task
/// may read while another writes.
impl AsyncRead for &TcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let inner = &self.inner;
        // Zeroes the unfilled part once; ReadBuf remembers it is initialised after that.
        let dst = buf.initialize_unfilled();
        // Never the synchronous window-update reply: a task must not block its thread.
        match inner.try_read(inner.shared().lock(), dst, false, &mut false) {
            Attempt::Done(Ok(n)) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Attempt::Done(Err(e)) => Poll::Ready(Err(e)),
            Attempt::Blocked(mut g) => {
                inner.register_waker(&mut g, false, cx.waker());
                Poll::Pending
            }
        }
    }
}

/// Writing through a shared reference (see `AsyncRead for &TcpStream`).
impl AsyncWrite for &TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let inner = &self.inner;
        match inner.try_write(inner.shared().lock(), buf, false) {
            Attempt::Done(r) => Poll::Ready(r),
            Attempt::Blocked(mut g) => {
                inner.register_waker(&mut g, true, cx.waker());
                Poll::Pending
            }
        }
    }

    /// Bytes written are queued for sending at once: there is nothing to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Half-close: the FIN follows the data already written; reading goes on.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.inner.shutdown(Shutdown::Write))
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self).poll_read(cx, buf)
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut &*self).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self).poll_shutdown(cx)
    }
}

/// A listening socket for tokio tasks. Dropping it resets the connections it had not
/// handed out.
#[derive(Debug)]
pub struct TcpListener {
    inner: listener::TcpListener,
}

impl TcpListener {
    /// Listen on `addr` (see [`listener::TcpListener::bind`]).
    pub fn bind(rt: &Runtime, addr: SocketAddrV4) -> io::Result<TcpListener> {
        Ok(TcpListener { inner: listener::TcpListener::bind(rt, addr)? })
    }

    /// Listen on `addr` with room for `backlog` connections not yet accepted (see
    /// [`listener::TcpListener::bind_with_backlog`]).
    pub fn bind_with_backlog(rt: &Runtime, addr: SocketAddrV4, backlog: usize) -> io::Result<TcpListener> {
        Ok(TcpListener { inner: listener::TcpListener::bind_with_backlog(rt, addr, backlog)? })
    }

    /// Listen on every address and port no other listener takes (a transparent proxy's
    /// listener, see [`listener::TcpListener::bind_any`]).
    pub fn bind_any(rt: &Runtime) -> io::Result<TcpListener> {
        Ok(TcpListener { inner: listener::TcpListener::bind_any(rt)? })
    }

    /// The next established connection and its peer's address.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Poll for a connection. Only the waker of the latest poll is woken, as with tokio's
    /// own listener.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let mut g = self.inner.shared().lock();
        match self.inner.try_accept(&mut g) {
            Ok(Some((s, peer))) => Poll::Ready(Ok((TcpStream { inner: s }, peer))),
            Ok(None) => {
                self.inner.register_accept_waker(&mut g, cx.waker());
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// The address it was bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// A UDP socket for tokio tasks.
#[derive(Debug)]
pub struct UdpSocket {
    inner: super::udp::UdpSocket,
}

impl UdpSocket {
    /// Bind to `addr` (see [`super::UdpSocket::bind`]).
    pub fn bind(rt: &Runtime, addr: SocketAddrV4) -> io::Result<UdpSocket> {
        Ok(UdpSocket { inner: super::udp::UdpSocket::bind(rt, addr)? })
    }

    /// Bind to every address and port no other socket takes (a transparent proxy's
    /// socket, see [`super::UdpSocket::bind_any`]).
    pub fn bind_any(rt: &Runtime) -> io::Result<UdpSocket> {
        Ok(UdpSocket { inner: super::udp::UdpSocket::bind_any(rt)? })
    }

    /// Poll for the next datagram: its length, source and (original) destination.
    pub fn poll_recv_from_to(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddrV4, SocketAddrV4)>> {
        use super::udp::UdpAttempt;
        match self.inner.try_recv(self.inner.shared().lock(), buf) {
            UdpAttempt::Done(r) => Poll::Ready(r.map(|r| (r.len, r.from, r.to))),
            UdpAttempt::Blocked(mut g) => {
                self.inner.register(&mut g, false, Some(cx.waker()));
                Poll::Pending
            }
        }
    }

    /// The next datagram with its source and its destination.
    pub async fn recv_from_to(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddrV4, SocketAddrV4)> {
        poll_fn(|cx| self.poll_recv_from_to(cx, buf)).await
    }

    /// The next datagram and its source.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_from_to(buf).await.map(|(n, from, _)| (n, SocketAddr::V4(from)))
    }

    /// Connect to `peer`, as tokio's `connect` (see [`super::UdpSocket::connect`]): only
    /// `peer`'s datagrams are received from now on, and [`send`](Self::send) sends to it.
    /// Datagrams queued before stay queued, as on Linux. Async for tokio's signature; it
    /// never waits.
    pub async fn connect(&self, peer: SocketAddrV4) -> io::Result<()> {
        self.inner.connect(peer)
    }

    /// The peer it is connected to; `NotConnected` if none, as tokio's.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// Poll for the next datagram, as tokio's `poll_recv`: it is put in `buf`'s unfilled
    /// part (cut to fit, the rest discarded). On a connected socket, from its peer; an
    /// unconnected one receives from anyone, as on Linux.
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let dst = buf.initialize_unfilled();
        match self.poll_recv_from_to(cx, dst) {
            Poll::Ready(Ok((n, _, _))) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The next datagram, as tokio's `recv` (see [`poll_recv`](Self::poll_recv)).
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv_from_to(buf).await.map(|(n, _, _)| n)
    }

    /// Poll to send one datagram to the connected peer, as tokio's `poll_send`;
    /// `NotConnected` if there is none. Pending only while the stack has no packet buffer.
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_send_datagram(cx, buf, None, None)
    }

    /// Send one datagram to the connected peer, as tokio's `send`; `NotConnected` if there
    /// is none.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_send(cx, buf)).await
    }

    fn poll_send_datagram(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        from: Option<SocketAddrV4>,
        to: Option<SocketAddrV4>,
    ) -> Poll<io::Result<usize>> {
        use super::udp::UdpAttempt;
        match self.inner.try_send(self.inner.shared().lock(), buf, from, to) {
            UdpAttempt::Done(r) => Poll::Ready(r),
            UdpAttempt::Blocked(mut g) => {
                self.inner.register(&mut g, true, Some(cx.waker()));
                Poll::Pending
            }
        }
    }

    /// Send one datagram to `to` (pending only while the stack has no packet buffer).
    pub async fn send_to(&self, buf: &[u8], to: SocketAddrV4) -> io::Result<usize> {
        poll_fn(|cx| self.poll_send_datagram(cx, buf, None, Some(to))).await
    }

    /// Send one datagram from `from` (any source for a socket of
    /// [`bind_any`](Self::bind_any)).
    pub async fn send_from(&self, buf: &[u8], from: SocketAddrV4, to: SocketAddrV4) -> io::Result<usize> {
        poll_fn(|cx| self.poll_send_datagram(cx, buf, Some(from), Some(to))).await
    }

    /// The bound address (the stack's, once a socket bound to 0.0.0.0 is connected).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// A task that watches the device for the runtime (see [`watch_device`]).
struct DeviceWatch {
    shared: std::sync::Arc<super::Shared>,
    id: u64,
}

impl Drop for DeviceWatch {
    /// The task ends (the runtime stopped, or the tokio runtime dropped the task): its
    /// waker is forgotten, and the device goes back to the protocol thread, as when a
    /// blocked watcher's call ends.
    fn drop(&mut self) {
        self.shared.lock().device_watchers.retain(|(id, _)| *id != self.id);
        if self.shared.task_watch.gone(self.id) {
            self.shared.bell.ring();
        }
        if self.shared.watch.release(self.id) {
            self.shared.maybe_hand_off();
        }
    }
}

/// Watch the runtime's device from a tokio task, so that the frames of connections served
/// by tasks are processed on a tokio worker, as a blocked application thread does for
/// blocking sockets ([`TapRounds::Watch`](super::TapRounds)): spawn the returned future on
/// the runtime whose tasks use the sockets (it needs tokio's I/O driver, `enable_io`).
///
/// Without it, every round runs on the protocol thread, and each frame's data reaches its
/// task through a waker on another thread, whose read then asks the protocol thread for the
/// window update. With it, the protocol thread keeps the timers and sleeps without the
/// device's descriptor, as while a thread watches; the watching task is woken by tokio's
/// reactor when frames arrive and runs the round's input half on its worker, yields so
/// that the tasks the round woke copy their data (checking the checksums in the copy,
/// Jacobson 1993), then runs the output half: the ACKs cover verified data and carry the
/// windows those copies opened. If the task stops being polled, frames wait for it, as
/// any tokio socket's would; when it is dropped, the protocol thread watches again.
///
/// The output that tasks on the watcher's thread owe outside its rounds (a write, a read's
/// window update) is sent by the watcher too, when it is next polled after they yield: one
/// output half for all of them, on their thread, instead of a round on the protocol thread
/// per call. If nothing polls the watcher, the protocol thread sends it within 10 ms.
///
/// `None` over a device without a descriptor (the in-memory pipe), or when
/// [`RuntimeConfig::tap_rounds`](super::RuntimeConfig::tap_rounds) is not `Watch`. The
/// future ends when the runtime stops. It holds a duplicate of the device's descriptor
/// until it ends or is dropped (a TAP or TUN that goes away with its last descriptor stays
/// until then).
///
/// Run the tasks that use the sockets on the same worker: on a multi-thread runtime a task
/// the watcher's round wakes may run on another worker, a cross-thread hand-off again (for
/// `ackclock serve` a current-thread runtime moved 1.07-1.18x as much with offloads).
pub fn watch_device(rt: &Runtime) -> Option<impl std::future::Future<Output = io::Result<()>> + Send + 'static> {
    use std::os::fd::BorrowedFd;
    let shared = rt.shared().clone();
    let fd = shared.watch_fd?;
    // SAFETY: the runtime owns the device, whose descriptor is open while the runtime is;
    // it is duplicated at once, and the watch holds its own descriptor from then on.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned();
    Some(async move {
        let readable = ::tokio::io::Interest::READABLE;
        // SAFETY: the `OwnedFd` owns its descriptor, which stays open until the `AsyncFd` is
        // dropped (it is never replaced or closed before).
        let afd = unsafe { ::tokio::io::unix::AsyncFd::register_with_interest(fd?, readable)? };
        let watch = DeviceWatch { id: super::watch::next_id(), shared };
        let shared = &*watch.shared;
        // The thread and waker this watcher published for the tasks' calls (`TaskWatch`).
        let mut seen = None;
        loop {
            // The role again, each time: a blocked thread of the same runtime may have
            // taken it meanwhile (and given it back, handing off to the protocol thread).
            shared.watch.take(watch.id);
            // Frames, output owed by the tasks of this thread (`TaskWatch`), or the runtime
            // stopping (`Runtime::shutdown` wakes the watchers).
            let ready = poll_fn(|cx| {
                let mut g = shared.lock();
                if g.closed {
                    return Poll::Ready(None);
                }
                // One entry per watch, its waker kept current.
                match g.device_watchers.iter_mut().find(|(id, _)| *id == watch.id) {
                    Some((_, w)) if w.will_wake(cx.waker()) => {}
                    Some((_, w)) => *w = cx.waker().clone(),
                    None => g.device_watchers.push((watch.id, cx.waker().clone())),
                }
                drop(g);
                shared.task_watch.polled(watch.id, cx.waker(), &mut seen);
                if let Poll::Ready(r) = afd.poll_read_ready(cx) {
                    return Poll::Ready(Some(r.map(Some)));
                }
                if shared.task_watch.take_owed() {
                    return Poll::Ready(Some(Ok(None)));
                }
                Poll::Pending
            })
            .await;
            let Some(ready) = ready else { return Ok(()) };
            let Some(mut ready) = ready? else {
                // Only output owed: no frames to read.
                shared.push_output();
                continue;
            };
            shared.watch_rounds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // Present while its round's two halves run: rings (a woken task's write, or
            // its read's window update) are answered by this task's output half instead
            // of signalling the protocol thread.
            let presence = shared.arrive();
            let owed = shared.watch_round();
            // The frames are read: new ones make the descriptor ready again (tokio keeps a
            // readiness that came after this one).
            ready.clear_ready();
            if owed {
                ::tokio::task::yield_now().await;
                // What the woken tasks' calls owed goes with this output half.
                shared.task_watch.take_owed();
                shared.push_output();
            }
            drop(presence);
        }
    })
}
