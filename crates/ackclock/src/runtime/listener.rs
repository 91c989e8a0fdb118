//! The runtime's listening socket (`TcpListener`), for application threads; the async one in
//! `tokio` wraps it.

use super::net::{aborted, io_error, v4, TcpStream, DEFAULT_BACKLOG};
use super::{Inner, Runtime, Shared};
use crate::socket::{Error, ListenerHandle};
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard};
use std::task::Waker;

/// A listening socket on a [`Runtime`]. Dropping it resets the connections it had not
/// handed out.
#[derive(Debug)]
pub struct TcpListener {
    shared: Arc<Shared>,
    l: ListenerHandle,
    local: SocketAddrV4,
    nonblocking: AtomicBool,
}

impl TcpListener {
    /// Listen on `addr` (`0.0.0.0` for any of the stack's addresses). `AddrInUse` if it
    /// already listens there; `InvalidInput` for port 0.
    pub fn bind(rt: &Runtime, addr: SocketAddrV4) -> io::Result<TcpListener> {
        TcpListener::bind_with_backlog(rt, addr, DEFAULT_BACKLOG)
    }

    /// [`bind`](Self::bind) with an accept-queue length.
    pub fn bind_with_backlog(rt: &Runtime, addr: SocketAddrV4, backlog: usize) -> io::Result<TcpListener> {
        let shared = rt.shared().clone();
        let mut g = shared.lock();
        if g.closed {
            return Err(aborted());
        }
        let l = g.stack.tcp_listen(addr, backlog).map_err(io_error)?;
        drop(g);
        Ok(TcpListener { shared, l, local: addr, nonblocking: AtomicBool::new(false) })
    }

    /// Listen on every address and port no other listener takes: with
    /// [`InterfaceConfig::any_destination`](crate::iface::InterfaceConfig::any_destination),
    /// a transparent proxy's listener. Each accepted stream's
    /// [`local_addr`](TcpStream::local_addr) is where the peer was going.
    pub fn bind_any(rt: &Runtime) -> io::Result<TcpListener> {
        let shared = rt.shared().clone();
        let mut g = shared.lock();
        if g.closed {
            return Err(aborted());
        }
        let opts = crate::tcp::SocketOptions::from_config(g.stack.tcp().config());
        let l = g.stack.tcp_listen_any(DEFAULT_BACKLOG, opts).map_err(io_error)?;
        drop(g);
        let local = SocketAddrV4::new(core::net::Ipv4Addr::UNSPECIFIED, 0);
        Ok(TcpListener { shared, l, local, nonblocking: AtomicBool::new(false) })
    }

    /// The next established connection and its peer's address, waiting for one.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let shared = &*self.shared;
        let mut g = shared.lock();
        loop {
            match self.try_accept(&mut g)? {
                Some(accepted) => return Ok(accepted),
                None if self.nonblocking.load(Ordering::Relaxed) => return Err(io_error(Error::WouldBlock)),
                None => {
                    g.register_accept(self.l, None);
                    g = shared.accept_cv.wait(g).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }

    /// One accept attempt under the lock: `None` when no connection is ready (the caller
    /// registers as a waiter under the same lock).
    pub(super) fn try_accept(&self, g: &mut MutexGuard<'_, Inner>) -> io::Result<Option<(TcpStream, SocketAddr)>> {
        if g.closed {
            return Err(aborted());
        }
        match g.stack.tcp_accept(self.l) {
            Ok(h) => {
                let t = g.stack.tcp_tuple(h).map_err(io_error)?;
                let slot = g.stack.tcp_slot(h).map_err(io_error)?;
                // Its waiter entry now, not at its first wait on the data path.
                g.waits.slot(slot);
                Ok(Some((TcpStream::new(self.shared.clone(), h, slot), v4(t.remote_addr, t.remote_port))))
            }
            Err(Error::WouldBlock) => Ok(None),
            Err(e) => Err(io_error(e)),
        }
    }

    /// Register a task to be woken when `try_accept` may find a connection.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // for the async sockets
    pub(super) fn register_accept_waker(&self, g: &mut MutexGuard<'_, Inner>, waker: &Waker) {
        g.register_accept(self.l, Some(waker));
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // for the async sockets
    pub(super) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The address it was bound to (`0.0.0.0:0` for [`bind_any`](Self::bind_any)).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(SocketAddr::V4(self.local))
    }

    /// `accept` fails with `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.nonblocking.store(nonblocking, Ordering::Relaxed);
        Ok(())
    }

    /// Accepted connections, forever (ends only with an error).
    pub fn incoming(&self) -> impl Iterator<Item = io::Result<TcpStream>> + '_ {
        std::iter::from_fn(move || Some(self.accept().map(|(s, _)| s)))
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        if g.closed {
            return;
        }
        let _ = g.stack.tcp_unlisten(self.l);
        drop(g);
        self.shared.kick();
    }
}
