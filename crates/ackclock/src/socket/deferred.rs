//! Socket calls for a stack driven by another thread ([`crate::runtime`]).
//!
//! With the window-update decision deferred, `tcp_recv` only copies (and verifies the
//! deferred checksums during the copy); the protocol thread decides afterwards, for each
//! connection whose reader posted a request, whether the freed space is worth a window
//! update ([`Stack::window_update_now`]). That is DragonFly BSD's asynchronous `pru_rcvd`
//! (commit 96c6eb29): the reader never runs output itself.

use super::{Error, TcpHandle};
use crate::stack::Stack;
use crate::tcp::Io;

impl Stack {
    /// Leave the window-update decision after a read to [`window_update_now`](Self::window_update_now)
    /// (on) or make it in `tcp_recv` itself (off, the default).
    pub(crate) fn defer_window_updates(&mut self, on: bool) {
        self.tcp.defer_window_update = on;
    }

    /// The slot index of a live handle: what per-connection state outside the stack is
    /// indexed by. Always below `max_connections`.
    pub(crate) fn tcp_slot(&self, h: TcpHandle) -> Result<u32, Error> {
        self.conn(h)
    }

    /// After a read of `h`: does the protocol thread have something to do for it? True when
    /// the freed space may be worth a window update, or the read verified data that an ACK
    /// is now owed for (the core marked the connection for output). A hint for whether to
    /// post a request; the decision itself is [`window_update_now`](Self::window_update_now)'s.
    pub(crate) fn tcp_read_wants_output(&self, h: TcpHandle) -> bool {
        let Ok(idx) = self.conn(h) else { return false };
        self.tcp.read_wants_output(idx)
    }

    /// The window-update decision for the connection in slot `idx`, made by the protocol
    /// thread: if the space the application freed is worth advertising (receiver SWS
    /// avoidance, RFC 9293 §3.8.6.2.2), an ACK is owed now and the connection is marked for
    /// output. Returns whether it was. A slot that is free or closed is ignored.
    pub(crate) fn window_update_now(&mut self, idx: u32) -> bool {
        self.tcp.window_update_now(idx)
    }

    /// Reset every connection and close every listener, as a process exiting does: the
    /// RSTs go into the transmit ring for the caller to send.
    pub(crate) fn reset_all(&mut self) {
        let io = Io { pool: &self.pool, iface: &mut self.iface, tx: &mut self.tx };
        self.tcp.reset_all(self.now, io);
    }
}
