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

#[cfg(test)]
mod tests {
    use crate::tcp::output::{window_update_due, window_update_urgent};
    use crate::tcp::seq::SeqNumber;
    use crate::tcp::tcb::{FourTuple, State, Tcb};
    use crate::tcp::{SocketOptions, Tcp, TcpConfig};
    use crate::time::Instant;
    use core::net::Ipv4Addr;

    /// An established connection with a 256 KiB receive buffer and a window scale of 3, that
    /// has advertised `left` bytes beyond RCV.NXT and holds `queued` bytes unread.
    fn receiver(left: u32, queued: usize) -> Tcb {
        let now = Instant::from_secs(1);
        let config = TcpConfig { recv_buffer: 256 * 1024, ..TcpConfig::default() };
        let tcp = Tcp::new(config.clone(), 7, now);
        let tuple = FourTuple {
            local_addr: Ipv4Addr::new(10, 0, 0, 1),
            local_port: 80,
            remote_addr: Ipv4Addr::new(10, 0, 0, 2),
            remote_port: 4000,
        };
        let mut tcb = tcp.new_tcb(now, tuple, SocketOptions::from_config(&config), 1500, State::Established);
        tcb.rcv_wscale = 3;
        tcb.ts_enabled = false;
        tcb.rcv_nxt = SeqNumber(1_000_000);
        tcb.rcv_adv = tcb.rcv_nxt + left;
        tcb.rcv_queued = queued;
        tcb
    }

    /// A window update of its own after a read on another thread (Linux's
    /// `tcp_cleanup_rbuf`), beside BSD's rule (RFC 9293 §3.8.6.2.2) that an ACK uses.
    #[test]
    fn window_update_urgent_only_when_the_peer_is_short_of_window() {
        const K: u32 = 1024;
        // The peer may still send 200 KiB of 256: the read freed space worth advertising
        // (due), but not worth a segment and a wake-up of its own.
        let t = receiver(200 * K, 0);
        assert!(window_update_due(&t));
        assert!(!window_update_urgent(&t));
        // 100 KiB left, the whole buffer free: at least twice what is left.
        let t = receiver(100 * K, 0);
        assert!(window_update_urgent(&t));
        // 100 KiB left, 150 KiB free: the edge may move (due) but the window has not doubled.
        let t = receiver(100 * K, 106 * K as usize);
        assert!(window_update_due(&t));
        assert!(!window_update_urgent(&t));
        // A closed window that a read opened by two segments (2,920 bytes): urgent.
        let t = receiver(0, 256 * 1024 - 2920);
        assert!(window_update_urgent(&t));
        // ...by less than two segments: neither (receiver SWS avoidance).
        let t = receiver(0, 256 * 1024 - 2000);
        assert!(!window_update_due(&t));
        assert!(!window_update_urgent(&t));
    }
}
