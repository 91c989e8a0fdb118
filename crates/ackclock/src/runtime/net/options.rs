//! A stream's TCP options: Nagle, keep-alive and the user timeout, read and changed on the
//! connection under the runtime's lock.

use super::{aborted, io_error, TcpStream};
use crate::tcp::{KeepAlive, SocketOptions};
use core::time::Duration;
use std::io::{self, ErrorKind};

impl TcpStream {
    /// Nagle's algorithm off (`true`) or on.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.set_options(|o| o.nodelay = nodelay)
    }

    /// Whether Nagle's algorithm is off.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.option(|o| o.nodelay)
    }

    /// Keep-alive probes after `idle` without a segment from the peer, `interval` apart,
    /// the connection given up with `TimedOut` after `count` unanswered (RFC 1122
    /// §4.2.3.6; `SO_KEEPALIVE` with `TCP_KEEPIDLE`, `TCP_KEEPINTVL` and `TCP_KEEPCNT`, as
    /// socket2's `set_tcp_keepalive` sets them); `None` turns them off. A proxy uses it to
    /// find peers that vanished from an idle connection.
    pub fn set_keepalive(&self, keepalive: Option<KeepAlive>) -> io::Result<()> {
        if keepalive.is_some_and(|k| k.idle.is_zero() || k.interval.is_zero() || k.count == 0) {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                "keep-alive idle, interval and count must be positive",
            ));
        }
        self.set_options(|o| o.keepalive = keepalive)
    }

    /// The keep-alive settings (`None`: off).
    pub fn keepalive(&self) -> io::Result<Option<KeepAlive>> {
        self.option(|o| o.keepalive)
    }

    /// Give the connection up with `TimedOut` when data it sent stays unacknowledged this
    /// long (RFC 5482's user timeout; Linux `TCP_USER_TIMEOUT`), instead of after the
    /// stack's retransmission count; `None` leaves only the count. Zero is `InvalidInput`.
    pub fn set_user_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        if timeout.is_some_and(|t| t.is_zero()) {
            return Err(io::Error::new(ErrorKind::InvalidInput, "a zero user timeout"));
        }
        self.set_options(|o| o.user_timeout = timeout)
    }

    /// The user timeout (`None`: only the retransmission count ends a connection).
    pub fn user_timeout(&self) -> io::Result<Option<Duration>> {
        self.option(|o| o.user_timeout)
    }

    /// Change the connection's options with `f`, and let the protocol thread see the
    /// timers they arm.
    fn set_options(&self, f: impl FnOnce(&mut SocketOptions)) -> io::Result<()> {
        let mut g = self.shared.lock();
        if g.closed {
            return Err(aborted());
        }
        let mut opts = g.stack.tcp_options(self.h).map_err(io_error)?;
        f(&mut opts);
        g.stack.tcp_set_options(self.h, opts).map_err(io_error)?;
        drop(g);
        self.shared.kick();
        Ok(())
    }

    /// One of the connection's options.
    fn option<T>(&self, f: impl FnOnce(&SocketOptions) -> T) -> io::Result<T> {
        let g = self.shared.lock();
        g.stack.tcp_options(self.h).map(|o| f(&o)).map_err(io_error)
    }
}
