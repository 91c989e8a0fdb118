//! UDP socket calls on a [`Stack`]: bind, connect, send_to, send, recv_from, and a socket
//! bound to every address and port for transparent proxies.

use super::Error;
use crate::stack::Stack;
use crate::udp::{Received, UdpError, UdpHandle};
use core::net::SocketAddrV4;

impl From<UdpError> for Error {
    fn from(e: UdpError) -> Error {
        match e {
            UdpError::AddrInUse => Error::AddrInUse,
            UdpError::NoBufferSpace => Error::NoBufferSpace,
            UdpError::InvalidHandle => Error::InvalidHandle,
            UdpError::InvalidArgument => Error::InvalidArgument,
            UdpError::MessageTooLong => Error::MessageTooLong,
            UdpError::Unreachable => Error::Unreachable,
            UdpError::WouldBlock => Error::WouldBlock,
            UdpError::NotConnected => Error::NotConnected,
            UdpError::Refused => Error::Refused,
            UdpError::HostUnreachable => Error::HostUnreachable,
        }
    }
}

impl Stack {
    /// A UDP socket bound to `local` (address 0.0.0.0: any of the stack's; port 0: an
    /// ephemeral one). `AddrInUse` if taken.
    pub fn udp_bind(&mut self, local: SocketAddrV4) -> Result<UdpHandle, Error> {
        Ok(self.udp.bind(local)?)
    }

    /// A UDP socket for every address and port no other socket takes (with
    /// [`InterfaceConfig::any_destination`](crate::iface::InterfaceConfig::any_destination),
    /// a transparent proxy's). Each datagram's [`Received::to`] is its original destination;
    /// replies go out with [`udp_send_from`](Self::udp_send_from).
    pub fn udp_bind_any(&mut self) -> Result<UdpHandle, Error> {
        Ok(self.udp.bind_any()?)
    }

    /// Connect the socket to `peer`, as `connect(2)` on a Linux UDP socket: it then takes
    /// only `peer`'s datagrams (anyone else's go to the [`udp_bind_any`](Self::udp_bind_any)
    /// socket if there is one, else draw ICMP port unreachable, as for a closed port), and
    /// [`udp_send`](Self::udp_send) sends to it. Datagrams queued before stay queued, as
    /// on Linux. A socket bound to 0.0.0.0 becomes bound to the interface's address.
    /// `InvalidArgument` for port 0, 0.0.0.0, the broadcast address, or a socket of
    /// `udp_bind_any`; `Unreachable` without a route. See [`Udp::connect`](crate::udp::Udp::connect).
    pub fn udp_connect(&mut self, h: UdpHandle, peer: SocketAddrV4) -> Result<(), Error> {
        Ok(self.udp.connect(h, peer, &self.iface)?)
    }

    /// The peer the socket is connected to; `NotConnected` if none (`ENOTCONN`).
    pub fn udp_peer_addr(&self, h: UdpHandle) -> Result<SocketAddrV4, Error> {
        Ok(self.udp.peer_addr(h)?)
    }

    /// Send one datagram from the socket's address to `to`. The payload is copied once,
    /// its checksum computed in the copy; the frame leaves with the next `transmit`. A
    /// connected socket may send elsewhere too, as on Linux.
    pub fn udp_send_to(&mut self, h: UdpHandle, data: &[u8], to: SocketAddrV4) -> Result<usize, Error> {
        self.udp_output(h, data, None, to)
    }

    /// Send one datagram to the peer the socket is connected to
    /// ([`udp_connect`](Self::udp_connect)); `NotConnected` if it is not (where Linux gives
    /// `EDESTADDRREQ`).
    pub fn udp_send(&mut self, h: UdpHandle, data: &[u8]) -> Result<usize, Error> {
        let to = self.udp.peer_addr(h)?;
        self.udp_output(h, data, None, to)
    }

    /// Send one datagram from `from`: any address and port for a socket of
    /// [`udp_bind_any`](Self::udp_bind_any), else only its own.
    pub fn udp_send_from(
        &mut self,
        h: UdpHandle,
        data: &[u8],
        from: SocketAddrV4,
        to: SocketAddrV4,
    ) -> Result<usize, Error> {
        self.udp_output(h, data, Some(from), to)
    }

    fn udp_output(
        &mut self,
        h: UdpHandle,
        data: &[u8],
        from: Option<SocketAddrV4>,
        to: SocketAddrV4,
    ) -> Result<usize, Error> {
        let now = self.now;
        Ok(self.udp.send(now, h, data, from, to, &mut self.iface, &self.pool, &mut self.tx, &mut self.tcp.counters)?)
    }

    /// The next datagram, copied into `buf` (a longer one is cut, as `recv` without
    /// `MSG_TRUNC` does; [`Received::datagram_len`] tells), its checksum verified during
    /// the copy. `WouldBlock` when none is queued. A connected socket gets only its peer's
    /// datagrams, and those queued before it was connected.
    pub fn udp_recv_from(&mut self, h: UdpHandle, buf: &mut [u8]) -> Result<Received, Error> {
        Ok(self.udp.recv(h, buf, &mut self.tcp.counters)?)
    }

    /// Whether datagrams are queued (one may still fail its checksum when read), or an ICMP
    /// error waits for the next call (which it fails).
    pub fn udp_readable(&self, h: UdpHandle) -> Result<bool, Error> {
        Ok(self.udp.queued(h)? > 0 || self.udp.error_pending(h)?)
    }

    /// The address the socket is bound to.
    pub fn udp_local_addr(&self, h: UdpHandle) -> Result<SocketAddrV4, Error> {
        Ok(self.udp.local_addr(h)?)
    }

    /// Close the socket; queued datagrams are dropped.
    pub fn udp_close(&mut self, h: UdpHandle) -> Result<(), Error> {
        Ok(self.udp.close(h)?)
    }
}
