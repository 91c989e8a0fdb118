//! The sans-IO socket API: listeners with a backlog, streams, readiness, typed errors.
//!
//! Handles are small copyable values checked against a generation number, so a handle
//! kept after `close` is detected ([`Error::InvalidHandle`]), never aliased to a new
//! connection. Data moves between the caller's slice and pbufs in one copy, with the
//! checksum fused into it; there is no intermediate byte ring.

use crate::buf::PBuf;
use crate::stack::Stack;
use crate::tcp::{ConnError, Io, RequestError, State, TcpInfo};
use core::fmt;
use core::net::{Ipv4Addr, SocketAddrV4};

pub use crate::tcp::SocketOptions;

mod deferred;
mod udp;

pub use crate::udp::{Received, UdpHandle};

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
    /// A datagram larger than the link MTU allows (there is no fragmentation).
    MessageTooLong,
    /// No route to the destination: off the link, with no gateway; or a router said the
    /// network cannot be reached (ICMP).
    Unreachable,
    /// A router said the host cannot be reached, or that the path is administratively
    /// closed (ICMP Destination Unreachable).
    HostUnreachable,
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
            Error::MessageTooLong => "message too long",
            Error::Unreachable => "network unreachable",
            Error::HostUnreachable => "no route to host",
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
            ConnError::NetUnreachable => Error::Unreachable,
            ConnError::HostUnreachable => Error::HostUnreachable,
        }
    }
}

impl From<RequestError> for Error {
    fn from(e: RequestError) -> Error {
        match e {
            RequestError::Conn(c) => c.into(),
            RequestError::AddrInUse => Error::AddrInUse,
            RequestError::NotConnected => Error::NotConnected,
            RequestError::InvalidState => Error::InvalidState,
            RequestError::NoBufferSpace => Error::NoBufferSpace,
            RequestError::WouldBlock => Error::WouldBlock,
            RequestError::NoConnection => Error::InvalidHandle,
            RequestError::InvalidArgument => Error::InvalidArgument,
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

/// Something an application may want to act on, from [`Stack::poll_event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// The connection's readiness may have changed: data or its end arrived, send space
    /// was freed, the state changed, or it failed. Check [`Stack::tcp_readiness`].
    Tcp(TcpHandle),
    /// The listener gained connections to accept (accept until `WouldBlock`: one event may
    /// stand for several).
    Accept(ListenerHandle),
}

/// Which directions to shut down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Stop reading: queued data is discarded, and data arriving later resets the connection.
    Read,
    /// Stop writing: a FIN follows the queued data, and reading goes on (a half-close).
    Write,
    /// Both `Read` and `Write`.
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
    /// The connection's TCP state (RFC 9293 §3.3.2).
    pub state: State,
    /// Urgent data (RFC 9293 §3.8.5): the peer pointed to urgent data the application has
    /// not read yet; this many bytes, from the next byte `recv` returns, up to and including
    /// the last urgent one. The data stays in line, in the stream (RFC 6093 §4); the
    /// connection's event is raised when the urgent pointer first arrives or advances.
    pub urgent: Option<usize>,
}

impl Stack {
    fn conn(&self, h: TcpHandle) -> Result<u32, Error> {
        match self.tcp.owned_generation(h.index) {
            Some(gen) if gen == h.gen => Ok(h.index),
            _ => Err(Error::InvalidHandle),
        }
    }

    fn handle(&self, index: u32) -> TcpHandle {
        TcpHandle { index, gen: self.tcp.generation(index) }
    }

    fn listener_idx(&self, h: ListenerHandle) -> Result<u32, Error> {
        match self.tcp.listener(h.index) {
            Some(l) if l.gen == h.gen => Ok(h.index),
            _ => Err(Error::InvalidHandle),
        }
    }

    /// The next event since the last call, or `None` when there is none: which connections
    /// and listeners need a look, so that an embedder with many connections does not poll
    /// every handle after each [`receive`](Stack::receive) or
    /// [`transmit`](Stack::transmit). A connection is reported once however many segments
    /// or timers touched it, and only if the application holds its handle (connected or
    /// accepted, not closed); an event may be spurious (readiness unchanged), never missing.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(index) = self.tcp.take_listener_event() {
            let gen = self.tcp.listener(index).map_or(0, |l| l.gen);
            return Some(Event::Accept(ListenerHandle { index, gen }));
        }
        let index = self.tcp.take_event()?;
        Some(Event::Tcp(self.handle(index)))
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
    pub fn tcp_listen(&mut self, local: SocketAddrV4, backlog: usize) -> Result<ListenerHandle, Error> {
        let opts = SocketOptions::from_config(self.tcp.config());
        self.tcp_listen_with(local, backlog, opts)
    }

    /// [`tcp_listen`](Self::tcp_listen) with options for the accepted connections.
    pub fn tcp_listen_with(
        &mut self,
        local: SocketAddrV4,
        backlog: usize,
        opts: SocketOptions,
    ) -> Result<ListenerHandle, Error> {
        if local.port() == 0 {
            return Err(Error::InvalidArgument);
        }
        let (index, gen) = self.tcp.listen((*local.ip(), local.port()), backlog, opts).ok_or(Error::AddrInUse)?;
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
    pub fn tcp_connect(&mut self, remote: SocketAddrV4) -> Result<TcpHandle, Error> {
        let opts = SocketOptions::from_config(self.tcp.config());
        self.tcp_connect_with(remote, None, opts)
    }

    /// Active open with a chosen local port and options.
    pub fn tcp_connect_with(
        &mut self,
        remote: SocketAddrV4,
        local_port: Option<u16>,
        opts: SocketOptions,
    ) -> Result<TcpHandle, Error> {
        // RFC 1122 §4.2.3.10: an OPEN to an address that names no single host (multicast,
        // class E, loopback, network 0, this subnet's broadcast) is an error.
        if self.iface.martian_source(*remote.ip()) {
            return Err(Error::InvalidArgument);
        }
        let addr = self.iface.addr();
        let mtu = self.iface.capabilities().mtu;
        let idx = self.tcp.connect(self.now, addr, local_port, (*remote.ip(), remote.port()), opts, mtu)?;
        Ok(self.handle(idx))
    }

    /// Queue bytes; returns how many were taken (up to the free send buffer). No bytes
    /// return `Ok(0)` at once, even with the send buffer full, once the connection may send
    /// (as `send(2)` of no bytes); before, or after an error, the same error as any send.
    pub fn tcp_send(&mut self, h: TcpHandle, data: &[u8]) -> Result<usize, Error> {
        let idx = self.conn(h)?;
        let sum = !self.iface.capabilities().tx_checksum;
        Ok(self.tcp.send(idx, data, &self.pool, &self.iface, sum)?)
    }

    /// [`tcp_send`](Self::tcp_send) for urgent data (RFC 9293 §3.8.5, the SEND call's
    /// URGENT flag; `send(2)` with `MSG_OOB`): the bytes taken join the stream in line, and
    /// the urgent pointer, carried with URG by every segment below it until the peer
    /// acknowledges them, marks the octet after the last of them. RFC 6093 advises new
    /// protocols against urgent data; it is here for those that still use it (Telnet's
    /// and FTP's interrupts).
    pub fn tcp_send_urgent(&mut self, h: TcpHandle, data: &[u8]) -> Result<usize, Error> {
        let idx = self.conn(h)?;
        let sum = !self.iface.capabilities().tx_checksum;
        Ok(self.tcp.send_urgent(idx, data, &self.pool, &self.iface, sum)?)
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
        let queued = self.tcp.send_with(idx, &self.pool, &self.iface, usize::MAX, |buf, room| {
            let old = buf.len();
            let Ok(space) = buf.append(room) else { return 0 };
            let n = fill(space).min(room);
            // Cannot fail: shrinking within the view.
            let _ = buf.truncate(old + n);
            n
        })?;
        Ok(queued)
    }

    /// Read bytes; `Ok(0)` is the end of the stream (the peer's FIN). Like `read(2)`, it may
    /// return fewer bytes than `buf` holds while more are queued: a read ends before a
    /// segment whose checksum is still to be checked during the copy if `buf` cannot take
    /// half of it, so that the next read checks and copies it in one pass. An empty `buf`
    /// reads nothing: `Ok(0)` while bytes are queued, as Linux's `recv(2)` of no bytes,
    /// else what any read would return (an error, the end of the stream, `WouldBlock`).
    pub fn tcp_recv(&mut self, h: TcpHandle, buf: &mut [u8]) -> Result<usize, Error> {
        let idx = self.conn(h)?;
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        Ok(self.tcp.recv(self.now, idx, buf, io)?)
    }

    /// Copy queued bytes into `buf` without consuming them, as `recv(2)` with `MSG_PEEK`:
    /// the next [`tcp_recv`](Self::tcp_recv) returns them again. For a proxy that looks at a
    /// connection's first bytes (a request line, a TLS ClientHello) before it decides where
    /// to send them. Returns what is queued, up to `buf`'s length (it does not wait for
    /// more); no bytes queued answers as `tcp_recv` does (`WouldBlock`, `Ok(0)` at the end
    /// of the stream, or the connection's error).
    pub fn tcp_peek(&mut self, h: TcpHandle, buf: &mut [u8]) -> Result<usize, Error> {
        let idx = self.conn(h)?;
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        Ok(self.tcp.peek(self.now, idx, buf, io)?)
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
        Ok(self.tcp.recv_in_place(self.now, idx, io, drain)?)
    }

    /// Move received segments to `out`, their buffers with them, for a caller that passes
    /// them on (a `writev(2)` to a socket) and lets them go after: no copy at all. Whole
    /// segments, at least one, then as many as keep the bytes moved within `max`; a segment
    /// whose checksum was deferred is verified (a sum pass) first. The bytes count as read
    /// (the window opens for them); the buffers return to the pool when `out` drops them.
    /// Returns the bytes moved; `Ok(0)` is the end of the stream, as for
    /// [`tcp_recv`](Self::tcp_recv).
    pub fn tcp_recv_bufs(&mut self, h: TcpHandle, max: usize, out: &mut Vec<PBuf>) -> Result<usize, Error> {
        let idx = self.conn(h)?;
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        Ok(self.tcp.recv_bufs(self.now, idx, io, max, out)?)
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
        Ok(self.tcp.close(self.now, idx, io)?)
    }

    /// Abort: RST and forget.
    pub fn tcp_abort(&mut self, h: TcpHandle) -> Result<(), Error> {
        let idx = self.conn(h)?;
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        Ok(self.tcp.abort(self.now, idx, io)?)
    }

    /// What the connection is ready for.
    pub fn tcp_readiness(&self, h: TcpHandle) -> Result<Readiness, Error> {
        let idx = self.conn(h)?;
        let s = self.tcp.status(idx).ok_or(Error::InvalidHandle)?;
        Ok(Readiness {
            readable: s.readable,
            writable: s.writable,
            read_closed: s.read_closed,
            closed: s.closed,
            error: s.error.map(Error::from),
            state: s.state,
            urgent: s.urgent,
        })
    }

    /// The options in force on a connection.
    pub fn tcp_options(&self, h: TcpHandle) -> Result<SocketOptions, Error> {
        let idx = self.conn(h)?;
        self.tcp.options(idx).ok_or(Error::InvalidHandle)
    }

    /// Change a connection's options. Nagle, keep-alive, the user timeout and the send
    /// buffer apply at once. The receive buffer may change too, but the window it offers
    /// is capped by the scale negotiated in the handshake (RFC 7323 §2.3), and an already
    /// advertised window is never withdrawn. The congestion-control algorithm is fixed once
    /// the connection exists (`InvalidArgument` if it differs).
    pub fn tcp_set_options(&mut self, h: TcpHandle, opts: SocketOptions) -> Result<(), Error> {
        let idx = self.conn(h)?;
        Ok(self.tcp.set_options(self.now, idx, opts)?)
    }

    /// A `tcp_info`-like snapshot.
    pub fn tcp_info(&self, h: TcpHandle) -> Result<TcpInfo, Error> {
        let idx = self.conn(h)?;
        self.tcp.info(idx).ok_or(Error::InvalidHandle)
    }

    /// Our address and port on a connection (for a connection taken by
    /// [`tcp_listen_any`](Self::tcp_listen_any), the one the peer dialled).
    pub fn tcp_local_addr(&self, h: TcpHandle) -> Result<SocketAddrV4, Error> {
        Ok(self.tcp_tuple(h)?.local())
    }

    /// The peer's address and port on a connection.
    pub fn tcp_peer_addr(&self, h: TcpHandle) -> Result<SocketAddrV4, Error> {
        Ok(self.tcp_tuple(h)?.remote())
    }

    /// Local and remote address of a connection.
    pub fn tcp_tuple(&self, h: TcpHandle) -> Result<crate::tcp::FourTuple, Error> {
        let idx = self.conn(h)?;
        self.tcp.tuple(idx).ok_or(Error::InvalidHandle)
    }
}
