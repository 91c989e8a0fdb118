//! The sans-IO socket API: listeners with a backlog, streams, readiness, typed errors.
//!
//! Handles are small copyable values checked against a generation number, so a handle
//! kept after `close` is detected ([`Error::InvalidHandle`]), never aliased to a new
//! connection. Data moves between the caller's slice and pbufs in one copy, with the
//! checksum fused into it; there is no intermediate byte ring.

use crate::stack::Stack;
use crate::tcp::{ConnError, Io, State, TcpInfo};
use core::fmt;
use core::net::Ipv4Addr;

pub use crate::tcp::SocketOptions;

mod deferred;

/// What a socket call can fail with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The peer answered the SYN with RST.
    Refused,
    /// The peer reset the connection.
    Reset,
    /// Retransmissions, keep-alive or the user timeout gave up.
    TimedOut,
    /// The address and port are taken (or no ephemeral port is free).
    AddrInUse,
    /// The connection is not (or no longer) open for this.
    NotConnected,
    /// The call does not fit the connection's state (e.g. send after shutdown).
    InvalidState,
    /// No buffer, or no connection slot, is free.
    NoBufferSpace,
    /// Nothing to do now; try after the next poll.
    WouldBlock,
    /// The handle is stale or was never valid.
    InvalidHandle,
    /// A bad address, port or size.
    InvalidArgument,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Refused => "connection refused",
            Error::Reset => "connection reset by peer",
            Error::TimedOut => "connection timed out",
            Error::AddrInUse => "address in use",
            Error::NotConnected => "not connected",
            Error::InvalidState => "invalid state for this operation",
            Error::NoBufferSpace => "no buffer space",
            Error::WouldBlock => "operation would block",
            Error::InvalidHandle => "invalid socket handle",
            Error::InvalidArgument => "invalid argument",
        })
    }
}

impl std::error::Error for Error {}

impl From<ConnError> for Error {
    fn from(e: ConnError) -> Error {
        match e {
            ConnError::Refused => Error::Refused,
            ConnError::Reset => Error::Reset,
            ConnError::TimedOut => Error::TimedOut,
        }
    }
}

/// A TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpHandle {
    index: u32,
    gen: u32,
}

/// A listening socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerHandle {
    index: u32,
    gen: u32,
}

/// Which directions to shut down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    Read,
    Write,
    Both,
}

/// What a connection is ready for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// `recv` will return data, end of stream (0), or an error.
    pub readable: bool,
    /// `send` will accept bytes.
    pub writable: bool,
    /// The peer has finished sending (its FIN was read past) or the connection is gone.
    pub read_closed: bool,
    /// The connection is over: CLOSED or TIME-WAIT.
    pub closed: bool,
    /// Why it ended, if abnormally.
    pub error: Option<Error>,
    pub state: State,
}

impl Stack {
    fn conn(&self, h: TcpHandle) -> Result<u32, Error> {
        let slot = self.tcp.slots.get(h.index as usize).ok_or(Error::InvalidHandle)?;
        match &slot.tcb {
            Some(t) if slot.gen == h.gen && !t.orphan => Ok(h.index),
            _ => Err(Error::InvalidHandle),
        }
    }

    fn handle(&self, index: u32) -> TcpHandle {
        TcpHandle { index, gen: self.tcp.slots[index as usize].gen }
    }

    fn listener_idx(&self, h: ListenerHandle) -> Result<u32, Error> {
        match self.tcp.listener(h.index) {
            Some(l) if l.gen == h.gen => Ok(h.index),
            _ => Err(Error::InvalidHandle),
        }
    }

    /// Listen on `port` of `addr` (`0.0.0.0` for any address; a listener on the stack's own
    /// address takes precedence over one on the wildcard) with a backlog bounding both the
    /// SYN queue and the accept queue. `AddrInUse` if `addr` and `port` already listen.
    ///
    /// When either queue is full, new SYNs are dropped (as Linux without SYN cookies), so
    /// clients retry with backoff. While the accept queue is full, the handshake's final ACK
    /// is dropped too (as Linux with `tcp_abort_on_overflow` off): the connection stays
    /// SYN-RECEIVED and retransmits its SYN-ACK, and the peer's next ACK completes it once
    /// the application has accepted. A peer that already considers itself connected may
    /// send data meanwhile; it is retransmitted like any unacknowledged data. A connection
    /// reset or timed out before it is accepted leaves the queue and is never handed out.
    pub fn tcp_listen(&mut self, addr: Ipv4Addr, port: u16, backlog: usize) -> Result<ListenerHandle, Error> {
        let opts = SocketOptions::from_config(self.tcp.config());
        self.tcp_listen_with(addr, port, backlog, opts)
    }

    /// [`tcp_listen`](Self::tcp_listen) with options for the accepted connections.
    pub fn tcp_listen_with(
        &mut self,
        addr: Ipv4Addr,
        port: u16,
        backlog: usize,
        opts: SocketOptions,
    ) -> Result<ListenerHandle, Error> {
        if port == 0 {
            return Err(Error::InvalidArgument);
        }
        let (index, gen) = self.tcp.listen((addr, port), backlog, opts).ok_or(Error::AddrInUse)?;
        Ok(ListenerHandle { index, gen })
    }

    /// A listener for connections to every address and port that no other listener takes:
    /// with [`InterfaceConfig::any_destination`](crate::iface::InterfaceConfig::any_destination)
    /// the stack then accepts whatever TCP connection the host routes to it, as a
    /// tun2socks-style proxy does; [`tcp_tuple`](Self::tcp_tuple) tells where each was going.
    pub fn tcp_listen_any(&mut self, backlog: usize, opts: SocketOptions) -> Result<ListenerHandle, Error> {
        let any = Ipv4Addr::UNSPECIFIED;
        let (index, gen) = self.tcp.listen((any, 0), backlog, opts).ok_or(Error::AddrInUse)?;
        Ok(ListenerHandle { index, gen })
    }

    /// An established connection from the listener's accept queue.
    pub fn tcp_accept(&mut self, l: ListenerHandle) -> Result<TcpHandle, Error> {
        let li = self.listener_idx(l)?;
        let idx = self.tcp.accept(li).ok_or(Error::WouldBlock)?;
        Ok(self.handle(idx))
    }

    /// Connections waiting in the accept queue.
    pub fn tcp_acceptable(&self, l: ListenerHandle) -> Result<usize, Error> {
        let li = self.listener_idx(l)?;
        Ok(self.tcp.listener(li).map_or(0, |l| l.ready))
    }

    /// Stop listening; connections not yet accepted are reset.
    pub fn tcp_unlisten(&mut self, l: ListenerHandle) -> Result<(), Error> {
        let li = self.listener_idx(l)?;
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        self.tcp.unlisten(self.now, li, io);
        Ok(())
    }

    /// Active open from this interface's address and an ephemeral port.
    pub fn tcp_connect(&mut self, remote: Ipv4Addr, port: u16) -> Result<TcpHandle, Error> {
        let opts = SocketOptions::from_config(self.tcp.config());
        self.tcp_connect_with(remote, port, None, opts)
    }

    /// Active open with a chosen local port and options.
    pub fn tcp_connect_with(
        &mut self,
        remote: Ipv4Addr,
        port: u16,
        local_port: Option<u16>,
        opts: SocketOptions,
    ) -> Result<TcpHandle, Error> {
        let addr = self.iface.addr();
        let mtu = self.iface.capabilities().mtu;
        let idx = self.tcp.connect(self.now, addr, local_port, (remote, port), opts, mtu)?;
        Ok(self.handle(idx))
    }

    /// Queue bytes; returns how many were taken (up to the free send buffer).
    pub fn tcp_send(&mut self, h: TcpHandle, data: &[u8]) -> Result<usize, Error> {
        let idx = self.conn(h)?;
        self.tcp.send(idx, data, &self.pool)
    }

    /// Queue bytes that `fill` writes straight into the send queue's packet buffers, for a
    /// caller whose bytes come from elsewhere (a `read(2)` from a socket or a file): that
    /// read is then the only copy, with no buffer of the caller's in between. `fill` gets
    /// free space in a buffer and returns how many bytes it wrote there (at most its
    /// length); it is called again while it fills what it was given and the send buffer has
    /// room. Returns the bytes queued, which may be 0 (`WouldBlock` when the send buffer is
    /// full, as for [`tcp_send`](Self::tcp_send)). The checksum of bytes queued this way
    /// is computed when they are sent (or left to the device with segmentation offload).
    pub fn tcp_send_with(&mut self, h: TcpHandle, mut fill: impl FnMut(&mut [u8]) -> usize) -> Result<usize, Error> {
        let idx = self.conn(h)?;
        self.tcp.send_with(idx, &self.pool, |buf, room| {
            let old = buf.len();
            let Ok(space) = buf.append(room) else { return 0 };
            let n = fill(space).min(room);
            // Cannot fail: shrinking within the view.
            let _ = buf.truncate(old + n);
            n
        })
    }

    /// Read bytes; `Ok(0)` is the end of the stream (the peer's FIN).
    pub fn tcp_recv(&mut self, h: TcpHandle, buf: &mut [u8]) -> Result<usize, Error> {
        let idx = self.conn(h)?;
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        self.tcp.recv(self.now, idx, buf, io)
    }

    /// Hand received bytes to `drain` in place, in order, a segment's bytes at a time, for a
    /// caller that passes them on (a `write(2)` to a socket): no copy into a buffer of the
    /// caller's. `drain` returns how many bytes it consumed; it is called again while it
    /// consumes all it was given. A segment whose checksum was deferred is verified (a sum
    /// pass) before `drain` sees it. Returns the bytes consumed; `Ok(0)` is the end of the
    /// stream, as for [`tcp_recv`](Self::tcp_recv).
    pub fn tcp_recv_with(&mut self, h: TcpHandle, drain: impl FnMut(&[u8]) -> usize) -> Result<usize, Error> {
        let idx = self.conn(h)?;
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        self.tcp.recv_in_place(self.now, idx, io, drain)
    }

    /// Half-close (`Write`: FIN after the queued data, keep reading), stop reading, or both.
    pub fn tcp_shutdown(&mut self, h: TcpHandle, how: Shutdown) -> Result<(), Error> {
        let idx = self.conn(h)?;
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            self.tcp.shutdown_read(idx)?;
        }
        if matches!(how, Shutdown::Write | Shutdown::Both) {
            self.tcp.shutdown_write(idx)?;
        }
        Ok(())
    }

    /// Close: the handle is released; the connection finishes its close on its own (or is
    /// reset if received data was left unread).
    pub fn tcp_close(&mut self, h: TcpHandle) -> Result<(), Error> {
        let idx = self.conn(h)?;
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        self.tcp.close(self.now, idx, io)
    }

    /// Abort: RST and forget.
    pub fn tcp_abort(&mut self, h: TcpHandle) -> Result<(), Error> {
        let idx = self.conn(h)?;
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        self.tcp.abort(self.now, idx, io)
    }

    /// What the connection is ready for.
    pub fn tcp_readiness(&self, h: TcpHandle) -> Result<Readiness, Error> {
        let idx = self.conn(h)?;
        let t = self.tcp.tcb(idx).ok_or(Error::InvalidHandle)?;
        let fin_read = matches!(t.state, State::CloseWait | State::LastAck | State::Closing | State::TimeWait)
            || t.state == State::Closed;
        let read_closed = fin_read && t.rcvq.is_empty();
        let error = t.error.map(Error::from);
        Ok(Readiness {
            readable: !t.rcvq.is_empty() || read_closed || error.is_some(),
            writable: t.state.can_send() && !t.fin_queued && t.snd_queued.max(t.sndq.len() * 256) < t.opts.send_buffer,
            read_closed,
            closed: matches!(t.state, State::Closed | State::TimeWait),
            error,
            state: t.state,
        })
    }

    /// The options in force on a connection.
    pub fn tcp_options(&self, h: TcpHandle) -> Result<SocketOptions, Error> {
        let idx = self.conn(h)?;
        Ok(self.tcp.tcb(idx).ok_or(Error::InvalidHandle)?.opts)
    }

    /// Change a connection's options. Nagle, keep-alive, the user timeout and the send
    /// buffer apply at once. The receive buffer may change too, but the window it offers
    /// is capped by the scale negotiated in the handshake (RFC 7323 §2.3), and an already
    /// advertised window is never withdrawn. The congestion-control algorithm is fixed once
    /// the connection exists (`InvalidArgument` if it differs).
    pub fn tcp_set_options(&mut self, h: TcpHandle, opts: SocketOptions) -> Result<(), Error> {
        let idx = self.conn(h)?;
        let t = self.tcp.tcb_mut(idx).ok_or(Error::InvalidHandle)?;
        if opts.congestion != t.opts.congestion {
            return Err(Error::InvalidArgument);
        }
        if opts.recv_buffer == 0 || opts.send_buffer == 0 {
            return Err(Error::InvalidArgument);
        }
        let max_rcv = (u16::MAX as usize) << t.rcv_wscale;
        t.opts = SocketOptions { recv_buffer: opts.recv_buffer.min(max_rcv), ..opts };
        if opts.keepalive.is_none() && t.state != State::FinWait2 {
            t.timers.keepalive = None;
        } else if let Some(ka) = opts.keepalive {
            if t.state.is_synchronized() && t.timers.keepalive.is_none() {
                t.timers.keepalive = Some(self.now + ka.idle);
            }
        }
        self.tcp.changed(idx);
        Ok(())
    }

    /// A `tcp_info`-like snapshot.
    pub fn tcp_info(&self, h: TcpHandle) -> Result<TcpInfo, Error> {
        let idx = self.conn(h)?;
        self.tcp.info(idx).ok_or(Error::InvalidHandle)
    }

    /// Local and remote address of a connection.
    pub fn tcp_tuple(&self, h: TcpHandle) -> Result<crate::tcp::FourTuple, Error> {
        let idx = self.conn(h)?;
        Ok(self.tcp.tcb(idx).ok_or(Error::InvalidHandle)?.tuple)
    }
}
