//! A blocking UDP socket on a [`Runtime`], shaped like `std::net::UdpSocket`.

use super::net::{aborted, io_error, timeout_nanos, timeout_of};
use super::{Inner, Runtime, Shared};
use crate::socket::{Error, Received, UdpHandle};
use core::time::Duration;
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};
use std::task::Waker;
use std::time::Instant as StdInstant;

/// The outcome of one attempt at a UDP call.
pub(super) enum UdpAttempt<'a, T> {
    /// Finished, with this result; the lock is released.
    Done(io::Result<T>),
    /// It would block; the lock is still held, for registering as a waiter.
    Blocked(MutexGuard<'a, Inner>),
}

/// A UDP socket on a [`Runtime`]. Datagrams are copied once each way, their checksum
/// computed or verified in that copy. Dropping it closes the socket.
#[derive(Debug)]
pub struct UdpSocket {
    shared: Arc<Shared>,
    h: UdpHandle,
    nonblocking: AtomicBool,
    read_timeout: AtomicU64,
}

impl UdpSocket {
    /// Bind to `addr` (address 0.0.0.0: any of the stack's; port 0: an ephemeral one).
    pub fn bind(rt: &Runtime, addr: SocketAddrV4) -> io::Result<UdpSocket> {
        UdpSocket::open(rt, |g| g.stack.udp_bind(addr))
    }

    /// Bind to every address and port no other socket takes (with
    /// [`InterfaceConfig::any_destination`](crate::iface::InterfaceConfig::any_destination),
    /// a transparent proxy's socket): [`recv_from_to`](Self::recv_from_to) tells each
    /// datagram's original destination, and [`send_from`](Self::send_from) replies as it.
    pub fn bind_any(rt: &Runtime) -> io::Result<UdpSocket> {
        UdpSocket::open(rt, |g| g.stack.udp_bind_any())
    }

    fn open(rt: &Runtime, bind: impl FnOnce(&mut Inner) -> Result<UdpHandle, Error>) -> io::Result<UdpSocket> {
        let shared = rt.shared().clone();
        let mut g = shared.lock();
        if g.closed {
            return Err(aborted());
        }
        let h = bind(&mut g).map_err(io_error)?;
        // Its waiter entry now, not at its first wait on the data path.
        g.udp_waits.slot(h.idx);
        drop(g);
        Ok(UdpSocket { shared, h, nonblocking: AtomicBool::new(false), read_timeout: AtomicU64::new(0) })
    }

    /// One receive attempt under the lock.
    pub(super) fn try_recv<'a>(&'a self, mut g: MutexGuard<'a, Inner>, buf: &mut [u8]) -> UdpAttempt<'a, Received> {
        if g.closed {
            return UdpAttempt::Done(Err(aborted()));
        }
        match g.stack.udp_recv_from(self.h, buf) {
            Ok(r) => UdpAttempt::Done(Ok(r)),
            Err(Error::WouldBlock) => UdpAttempt::Blocked(g),
            Err(e) => UdpAttempt::Done(Err(io_error(e))),
        }
    }

    /// One send attempt under the lock (blocked only when the pool has no buffer). `to`
    /// `None`: the connected peer.
    pub(super) fn try_send<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
        buf: &[u8],
        from: Option<SocketAddrV4>,
        to: Option<SocketAddrV4>,
    ) -> UdpAttempt<'a, usize> {
        if g.closed {
            return UdpAttempt::Done(Err(aborted()));
        }
        let r = match (from, to) {
            (Some(f), Some(to)) => g.stack.udp_send_from(self.h, buf, f, to),
            (None, Some(to)) => g.stack.udp_send_to(self.h, buf, to),
            (_, None) => g.stack.udp_send(self.h, buf),
        };
        match r {
            Ok(n) => {
                drop(g);
                self.shared.kick();
                UdpAttempt::Done(Ok(n))
            }
            Err(Error::NoBufferSpace) => UdpAttempt::Blocked(g),
            Err(e) => UdpAttempt::Done(Err(io_error(e))),
        }
    }

    /// Register a task (or, with `None`, the calling thread) to be woken when receiving
    /// (`write == false`) or sending may proceed.
    pub(super) fn register(&self, g: &mut MutexGuard<'_, Inner>, write: bool, waker: Option<&Waker>) {
        g.register_udp(self.h, write, waker);
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // for the async socket
    pub(super) fn shared(&self) -> &Shared {
        &self.shared
    }

    fn wait<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
        write: bool,
        deadline: Option<StdInstant>,
    ) -> io::Result<MutexGuard<'a, Inner>> {
        if self.nonblocking.load(Ordering::Relaxed) {
            return Err(io_error(Error::WouldBlock));
        }
        self.register(&mut g, write, None);
        let cvs = &self.shared.udp_cvs[self.h.idx as usize];
        let cv = if write { &cvs.write } else { &cvs.read };
        g = match deadline {
            None => cv.wait(g).unwrap_or_else(|e| e.into_inner()),
            Some(d) => {
                let left = d.saturating_duration_since(StdInstant::now());
                if left.is_zero() {
                    return Err(io::Error::new(ErrorKind::WouldBlock, "timed out"));
                }
                cv.wait_timeout(g, left).unwrap_or_else(|e| e.into_inner()).0
            }
        };
        if g.closed {
            return Err(aborted());
        }
        Ok(g)
    }

    /// The next datagram with its source and its destination (the original one, for a
    /// socket of [`bind_any`](Self::bind_any)). A datagram longer than `buf` is cut; the
    /// rest is discarded, as with std.
    pub fn recv_from_to(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddrV4, SocketAddrV4)> {
        let deadline = timeout_of(self.read_timeout.load(Ordering::Relaxed)).map(|d| StdInstant::now() + d);
        let mut g = self.shared.lock();
        loop {
            match self.try_recv(g, buf) {
                UdpAttempt::Done(r) => return r.map(|r| (r.len, r.from, r.to)),
                UdpAttempt::Blocked(held) => g = self.wait(held, false, deadline)?,
            }
        }
    }

    /// The next datagram and its source.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_from_to(buf).map(|(n, from, _)| (n, SocketAddr::V4(from)))
    }

    /// The next datagram, as std's `recv`: on a connected socket, from its peer (or one
    /// queued before [`connect`](Self::connect)). As on Linux, an unconnected socket
    /// receives too, from anyone: `recv(2)` asks no connection of a UDP socket.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv_from_to(buf).map(|(n, _, _)| n)
    }

    /// Connect to `peer`, as std's `connect` on Linux: only `peer`'s datagrams are
    /// received from now on (anyone else's are answered as a closed port's, with ICMP
    /// port unreachable, unless a socket of [`bind_any`](Self::bind_any) takes them),
    /// [`send`](Self::send) sends to it, and a socket bound to 0.0.0.0 becomes bound to
    /// the stack's address. Datagrams queued before stay queued, as on Linux. It may be
    /// connected again, to another peer. `InvalidInput` for port 0, 0.0.0.0, the broadcast
    /// address, or a socket of `bind_any`; `NetworkUnreachable` without a route. See
    /// [`Udp::connect`](crate::udp::Udp::connect).
    pub fn connect(&self, peer: SocketAddrV4) -> io::Result<()> {
        let mut g = self.shared.lock();
        if g.closed {
            return Err(aborted());
        }
        g.stack.udp_connect(self.h, peer).map_err(io_error)
    }

    /// The peer it is connected to; `NotConnected` if none, as std's.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        let g = self.shared.lock();
        g.stack.udp_peer_addr(self.h).map(SocketAddr::V4).map_err(io_error)
    }

    /// Send one datagram to the connected peer. `NotConnected` if there is none (std on
    /// Linux reports `EDESTADDRREQ`, which has no kind of its own). It waits only while
    /// the stack has no packet buffer.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.send_datagram(buf, None, None)
    }

    fn send_datagram(&self, buf: &[u8], from: Option<SocketAddrV4>, to: Option<SocketAddrV4>) -> io::Result<usize> {
        let mut g = self.shared.lock();
        loop {
            match self.try_send(g, buf, from, to) {
                UdpAttempt::Done(r) => return r,
                UdpAttempt::Blocked(held) => g = self.wait(held, true, None)?,
            }
        }
    }

    /// Send one datagram to `to`. It waits only while the stack has no packet buffer.
    pub fn send_to(&self, buf: &[u8], to: SocketAddrV4) -> io::Result<usize> {
        self.send_datagram(buf, None, Some(to))
    }

    /// Send one datagram from `from` (a socket of [`bind_any`](Self::bind_any) may name any
    /// source: a transparent proxy's reply).
    pub fn send_from(&self, buf: &[u8], from: SocketAddrV4, to: SocketAddrV4) -> io::Result<usize> {
        self.send_datagram(buf, Some(from), Some(to))
    }

    /// The bound address (0.0.0.0:0 for [`bind_any`](Self::bind_any); the stack's address
    /// once a socket bound to 0.0.0.0 is connected).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let g = self.shared.lock();
        g.stack.udp_local_addr(self.h).map(SocketAddr::V4).map_err(io_error)
    }

    /// How long a receive blocks before failing with `WouldBlock` (`None`: forever).
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.read_timeout.store(timeout_nanos(t)?, Ordering::Relaxed);
        Ok(())
    }

    /// The receive timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(timeout_of(self.read_timeout.load(Ordering::Relaxed)))
    }

    /// Calls fail with `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.nonblocking.store(nonblocking, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        if !g.closed {
            let _ = g.stack.udp_close(self.h);
        }
    }
}
