//! Blocking sockets on a [`Runtime`], shaped like `std::net`'s.

use super::watch::Watcher;
use super::{sys, Inner, Runtime, Shared};
use crate::socket::{Error, Shutdown as CoreShutdown, TcpHandle};
use core::time::Duration;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};
use std::task::Waker;
use std::time::Instant as StdInstant;

mod options;

/// Accept-queue length of [`TcpListener::bind`] (Linux's `somaxconn` was 4096 since 5.4;
/// a thousand is plenty for a user-space stack and bounds the SYN queue too).
pub const DEFAULT_BACKLOG: usize = 1024;

pub(super) fn aborted() -> io::Error {
    io::Error::new(ErrorKind::ConnectionAborted, "the runtime was shut down")
}

/// The `std::io::Error` a socket call fails with, by the kind a std socket gives.
pub(super) fn io_error(e: Error) -> io::Error {
    let kind = match e {
        Error::Refused => ErrorKind::ConnectionRefused,
        Error::Reset => ErrorKind::ConnectionReset,
        Error::TimedOut => ErrorKind::TimedOut,
        Error::AddrInUse => ErrorKind::AddrInUse,
        Error::NotConnected | Error::InvalidHandle => ErrorKind::NotConnected,
        Error::InvalidState => ErrorKind::BrokenPipe,
        Error::NoBufferSpace => ErrorKind::OutOfMemory,
        Error::WouldBlock => ErrorKind::WouldBlock,
        Error::InvalidArgument => ErrorKind::InvalidInput,
        // EMSGSIZE has no kind of its own in std.
        Error::MessageTooLong => ErrorKind::InvalidInput,
        Error::Unreachable => ErrorKind::NetworkUnreachable,
        Error::HostUnreachable => ErrorKind::HostUnreachable,
    };
    io::Error::new(kind, e)
}

pub(super) fn v4(addr: core::net::Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(addr, port))
}

/// A timeout as stored: nanoseconds, 0 for none (std refuses a zero timeout).
pub(super) fn timeout_nanos(t: Option<Duration>) -> io::Result<u64> {
    match t {
        Some(d) if d.is_zero() => Err(io::Error::new(ErrorKind::InvalidInput, "cannot set a 0 duration timeout")),
        Some(d) => Ok(d.as_nanos().clamp(1, u64::MAX as u128) as u64),
        None => Ok(0),
    }
}

pub(super) fn timeout_of(nanos: u64) -> Option<Duration> {
    (nanos != 0).then(|| Duration::from_nanos(nanos))
}

/// Wait until a round sees the connection's readiness change, the call's deadline, or
/// shutdown: on the connection's condition variable (readers' or writers'), or, over a TAP
/// or TUN with [`TapRounds::Watch`](super::TapRounds), on the thread's eventfd and maybe the
/// device ([`wait_watching`]). `Err(WouldBlock)` when the deadline passed, as a std socket's
/// timeout does on Linux.
///
/// Over the in-memory pipe the first wait of a call polls instead (`Shared::poll`, bounded)
/// and returns for the caller to try again: the frames it waits for usually arrive within
/// microseconds, and a sleep and wake-up on the condition variable cost more than that.
fn wait<'a>(
    g: MutexGuard<'a, Inner>,
    h: TcpHandle,
    slot: u32,
    write: bool,
    call: &mut Call<'a>,
) -> io::Result<MutexGuard<'a, Inner>> {
    if let Some(dev) = call.shared.watch_fd {
        return Watcher::with(|me| match me {
            Some(me) => wait_watching(g, h, slot, write, call, dev, me),
            None => wait_cv(g, h, slot, write, call),
        });
    }
    wait_cv(g, h, slot, write, call)
}

/// How long until `deadline`; `Err(WouldBlock)` when it passed.
fn time_left(deadline: Option<StdInstant>) -> io::Result<Option<Duration>> {
    match deadline {
        None => Ok(None),
        Some(d) => {
            let left = d.saturating_duration_since(StdInstant::now());
            if left.is_zero() {
                return Err(io::Error::new(ErrorKind::WouldBlock, "timed out"));
            }
            Ok(Some(left))
        }
    }
}

/// [`wait`] on the socket slot's condition variable.
fn wait_cv<'a>(
    mut g: MutexGuard<'a, Inner>,
    h: TcpHandle,
    slot: u32,
    write: bool,
    call: &mut Call<'a>,
) -> io::Result<MutexGuard<'a, Inner>> {
    let shared = call.shared;
    if owes(shared) {
        // No thread sleeps while it owes a round's output (the ACK of what it copied): send
        // it, and try the call again.
        drop(g);
        let _ = match call.hold {
            Some(slot) => pay_held(shared, slot),
            None => pay(shared),
        };
        let g = shared.lock();
        if g.closed {
            return Err(aborted());
        }
        return Ok(g);
    }
    if !call.polled && shared.polls() {
        call.polled = true;
        drop(g);
        if shared.poll(call.hold) {
            OWED.set(shared as *const Shared as usize);
        }
        let g = shared.lock();
        if g.closed {
            return Err(aborted());
        }
        return Ok(g);
    }
    g.register(h, slot, write, None);
    shared.app_waits.fetch_add(1, Ordering::Relaxed);
    let cvs = &shared.cvs[slot as usize];
    let cv = if write { &cvs.write } else { &cvs.read };
    let left = time_left(call.deadline)?;
    // A sleeping thread answers no rings: hand them to the protocol thread meanwhile.
    if call.present {
        shared.leave(false);
    }
    g = match left {
        None => cv.wait(g).unwrap_or_else(|e| e.into_inner()),
        Some(left) => cv.wait_timeout(g, left).unwrap_or_else(|e| e.into_inner()).0,
    };
    if call.present {
        // Present again; the call leaves when it ends (`Call::drop`).
        std::mem::forget(shared.arrive());
    }
    if g.closed {
        return Err(aborted());
    }
    Ok(g)
}

/// [`wait`] over a TAP or TUN whose device application threads watch
/// ([`TapRounds::Watch`](super::TapRounds)): sleep on the
/// thread's eventfd, woken by the waker registered for the socket, and on the device's
/// descriptor while this thread is the watcher (see `watch`). Woken by the device, the
/// watcher runs a round itself; either way the caller tries its call again.
fn wait_watching<'a>(
    mut g: MutexGuard<'a, Inner>,
    h: TcpHandle,
    slot: u32,
    write: bool,
    call: &mut Call<'a>,
    device: std::os::fd::RawFd,
    me: &Watcher,
) -> io::Result<MutexGuard<'a, Inner>> {
    let shared = call.shared;
    let left = time_left(call.deadline)?;
    // A call's first wait takes the device from whoever watches it; later ones only if free.
    let watcher = if call.watch == 0 {
        shared.watch.take(me.id);
        true
    } else {
        shared.watch.take_if_free(me.id)
    };
    if watcher {
        call.watch = me.id;
    }
    // A wake-up from a round this thread runs from here on is marked, not signalled.
    super::watch::take_self_woken();
    g.register(h, slot, write, Some(&me.waker));
    drop(g);
    // A sleeping thread answers no rings: answer one that came, then hand them to the
    // protocol thread while asleep.
    if call.present {
        shared.leave(true);
    }
    shared.watches.fetch_add(1, Ordering::Relaxed);
    let fds = [me.fd(), device];
    let fds = if watcher { &fds[..] } else { &fds[..1] };
    // A socket's window update, or the output of this thread's last round, waited for
    // this thread (`watch`, "Window updates"): no thread sleeps on it. Send it, and try the
    // call again (if another thread runs rounds, its next one sends it: sleep as usual).
    let owed = (owes(shared) || shared.requests.is_pending(slot)) && pay(shared);
    // A round this thread ran since it registered (answering a ring, or paying its output)
    // may have changed the readiness it waits for: then it does not sleep, and looks again.
    let woken = super::watch::take_self_woken();
    let ready = match if owed || woken { Ok(0) } else { sys::wait(fds, false, left) } {
        Ok(ready) => ready,
        Err(_) => {
            // ppoll failed on valid descriptors: do not spin on it.
            std::thread::sleep(Duration::from_millis(1));
            0
        }
    };
    me.drain();
    if call.present {
        // Present again; the call leaves when it ends (`Call::drop`).
        std::mem::forget(shared.arrive());
    }
    if ready & 2 != 0 && shared.watch.owns(me.id) {
        shared.watch_rounds.fetch_add(1, Ordering::Relaxed);
        if shared.watch_round() {
            OWED.set(shared as *const Shared as usize);
        }
    }
    let g = shared.lock();
    if g.closed {
        return Err(aborted());
    }
    Ok(g)
}

/// How a blocking call waits: on which runtime, until when (`None`: no timeout), whether it
/// polled already, whether the calling thread is counted as present (`Shared::arrive`), and
/// whether it watched the device (`watch`: the role is given back when the call ends).
pub(super) struct Call<'a> {
    shared: &'a Shared,
    deadline: Option<StdInstant>,
    polled: bool,
    present: bool,
    /// The thread's watcher id if this call took the device (`watch`), else 0.
    watch: u64,
    /// The caller's socket still has data to read: an output this thread owes waits for
    /// its next call (see [`OWED`]).
    more: bool,
    /// A blocking read over the in-memory pipe, of the connection in this slot: the rounds
    /// the call runs hold that connection's output, which waits for the copy (see
    /// [`OWED`]).
    hold: Option<u32>,
}

std::thread_local! {
    /// The runtime (its `Shared`'s address; 0: none) whose round's output this thread owes:
    /// it ran a round's input (`Shared::watch_round`, or over the pipe a blocking reader's
    /// rounds) and runs the output after its copy (`watch`, "Window updates"): before it
    /// sleeps, or when a call ends with nothing left to read; a call that ends with more to
    /// read hands off instead (the protocol thread runs a round within `watch::HANDOFF`
    /// unless this thread comes back first).
    static OWED: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

fn owes(shared: &Shared) -> bool {
    OWED.get() == shared as *const Shared as usize
}

/// Run the output this thread owes `shared` (`false`: another thread runs rounds, and its
/// next one does it).
fn pay(shared: &Shared) -> bool {
    OWED.set(0);
    shared.push_output()
}

/// [`pay`] for a blocking reader over the pipe of the connection in `slot`: the rounds after
/// the output (for frames that arrived meanwhile) hold that connection's output again, and
/// the thread owes it in turn.
fn pay_held(shared: &Shared, slot: u32) -> bool {
    OWED.set(0);
    let Some(owed) = shared.push_output_held(slot) else { return false };
    if owed {
        OWED.set(shared as *const Shared as usize);
    }
    true
}

impl<'a> Call<'a> {
    /// A call; with `present`, the thread is present until the call ends (`rounds::Bell`:
    /// rings do not signal the protocol thread meanwhile, and the call answers them).
    pub(super) fn new(shared: &'a Shared, deadline: Option<StdInstant>, polled: bool, present: bool) -> Call<'a> {
        if present {
            std::mem::forget(shared.arrive());
        }
        Call { shared, deadline, polled, present, watch: 0, more: false, hold: None }
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        // After the caller's copy: the ACKs of the data it read (verified in that copy)
        // and its window update, in one segment (`watch`, "Window updates").
        if owes(self.shared) {
            if self.more {
                self.shared.hand_off();
            } else if let Some(slot) = self.hold {
                if pay_held(self.shared, slot) && owes(self.shared) {
                    self.shared.hand_off();
                }
            } else {
                let _ = pay(self.shared);
            }
        }
        if self.watch != 0 && self.shared.watch.release(self.watch) {
            self.shared.maybe_hand_off();
        }
        if let (Some(slot), true) = (self.hold, self.present) {
            // A reader over the pipe leaves after its output, which read no frames: frames
            // that came during its copy are taken in here, and their ACK waits for the copy
            // of its next call, as for a reader that left data unread.
            self.present = false;
            if self.shared.leave_held(slot) {
                OWED.set(self.shared as *const Shared as usize);
                self.shared.hand_off();
            }
        }
        if self.present {
            self.shared.leave(true);
        }
    }
}

/// The outcome of one attempt at a socket call, for the blocking and the async callers.
pub(super) enum Attempt<'a> {
    /// Finished, with this result; the lock is released.
    Done(io::Result<usize>),
    /// It would block; the lock is still held.
    Blocked(MutexGuard<'a, Inner>),
}

/// A TCP connection on a [`Runtime`], used as `std::net::TcpStream` is: `Read` and `Write`
/// (also on `&TcpStream`, so that one thread reads while another writes), timeouts,
/// non-blocking mode, half-close. Dropping it closes the connection as `close(2)` does:
/// a FIN after the queued data (a reset if received data was left unread).
#[derive(Debug)]
pub struct TcpStream {
    shared: Arc<Shared>,
    h: TcpHandle,
    slot: u32,
    nonblocking: AtomicBool,
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
    /// The connection's error (reset, timeout) was reported once: later writes fail with
    /// BrokenPipe and reads return end of stream, as on Linux.
    error_reported: AtomicBool,
    read_shut: AtomicBool,
    write_shut: AtomicBool,
    /// Dropping resets the connection instead of closing it ([`TcpStream::set_zero_linger`]).
    zero_linger: AtomicBool,
}

impl TcpStream {
    pub(super) fn new(shared: Arc<Shared>, h: TcpHandle, slot: u32) -> TcpStream {
        TcpStream {
            shared,
            h,
            slot,
            nonblocking: AtomicBool::new(false),
            read_timeout: AtomicU64::new(0),
            write_timeout: AtomicU64::new(0),
            error_reported: AtomicBool::new(false),
            read_shut: AtomicBool::new(false),
            write_shut: AtomicBool::new(false),
            zero_linger: AtomicBool::new(false),
        }
    }

    /// Open a connection to `addr` from the stack's address and an ephemeral port, and
    /// wait until it is established (or refused, or the SYN retransmissions give up).
    pub fn connect(rt: &Runtime, addr: SocketAddrV4) -> io::Result<TcpStream> {
        TcpStream::connect_until(rt, addr, None)
    }

    /// [`connect`](Self::connect), giving up after `timeout` with `TimedOut`, as
    /// `std::net::TcpStream::connect_timeout` does (the attempt is closed). A zero timeout
    /// is `InvalidInput`.
    pub fn connect_timeout(rt: &Runtime, addr: SocketAddrV4, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(io::Error::new(ErrorKind::InvalidInput, "cannot set a 0 duration timeout"));
        }
        TcpStream::connect_until(rt, addr, Some(StdInstant::now() + timeout))
    }

    fn connect_until(rt: &Runtime, addr: SocketAddrV4, deadline: Option<StdInstant>) -> io::Result<TcpStream> {
        let stream = TcpStream::start_connect(rt, addr)?;
        let shared = stream.shared.clone();
        let result = {
            let mut g = shared.lock();
            // A handshake takes a round trip through both protocol threads: no polling.
            let mut call = Call::new(&shared, deadline, true, false);
            loop {
                match stream.connected(g) {
                    Attempt::Done(r) => break r,
                    Attempt::Blocked(held) => match wait(held, stream.h, stream.slot, true, &mut call) {
                        Ok(held) => g = held,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            break Err(io::Error::new(ErrorKind::TimedOut, "connection timed out"))
                        }
                        Err(e) => break Err(e),
                    },
                }
            }
        };
        // Dropping the stream on an error closes the attempt.
        result.map(|_| stream)
    }

    /// Send the SYN; the stream is not usable until [`connected`](Self::connected) says so.
    /// Dropping it meanwhile closes the attempt.
    pub(super) fn start_connect(rt: &Runtime, addr: SocketAddrV4) -> io::Result<TcpStream> {
        let shared = rt.shared().clone();
        let mut g = shared.lock();
        if g.closed {
            return Err(aborted());
        }
        let h = g.stack.tcp_connect(addr).map_err(io_error)?;
        let slot = g.stack.tcp_slot(h).map_err(io_error)?;
        // Its waiter entry now, not at its first wait on the data path.
        g.waits.slot(slot);
        drop(g);
        shared.kick();
        Ok(TcpStream::new(shared, h, slot))
    }

    /// Whether the handshake is over: `Done(Ok)` established, `Done(Err)` refused or timed
    /// out, `Blocked` still in progress (the lock held, for registering as a waiter).
    pub(super) fn connected<'a>(&'a self, g: MutexGuard<'a, Inner>) -> Attempt<'a> {
        if g.closed {
            return Attempt::Done(Err(aborted()));
        }
        let r = match g.stack.tcp_readiness(self.h) {
            Ok(r) => r,
            Err(e) => return Attempt::Done(Err(io_error(e))),
        };
        if let Some(e) = r.error {
            self.error_reported.store(true, Ordering::Release);
            return Attempt::Done(Err(io_error(e)));
        }
        if r.state.is_synchronized() {
            return Attempt::Done(Ok(0));
        }
        if r.closed {
            return Attempt::Done(Err(io_error(Error::Refused)));
        }
        Attempt::Blocked(g)
    }

    fn deadline(&self, timeout: &AtomicU64) -> Option<StdInstant> {
        timeout_of(timeout.load(Ordering::Relaxed)).map(|d| StdInstant::now() + d)
    }

    /// The connection's error, the first time; afterwards what Linux gives once the error
    /// was consumed: end of stream for reads, BrokenPipe for writes.
    fn conn_error(&self, e: Error, write: bool) -> io::Result<usize> {
        if !self.error_reported.swap(true, Ordering::AcqRel) {
            return Err(io_error(e));
        }
        if write {
            Err(io::Error::new(ErrorKind::BrokenPipe, e))
        } else {
            Ok(0)
        }
    }

    /// One read attempt under the lock: `Done` with the result (the lock released, the
    /// window-update request posted), or `Blocked` with the lock still held, so that the
    /// caller registers as a waiter before any round can change the readiness it saw.
    #[cfg(feature = "tokio")]
    pub(super) fn try_read<'a>(
        &'a self,
        g: MutexGuard<'a, Inner>,
        buf: &mut [u8],
        wait_reply: bool,
        more: &mut bool,
    ) -> Attempt<'a> {
        if buf.is_empty() {
            return if g.closed { Attempt::Done(Err(aborted())) } else { Attempt::Done(Ok(0)) };
        }
        self.try_recv(g, wait_reply, more, |stack, h| stack.tcp_recv(h, buf))
    }

    /// [`try_read`](Self::try_read) with the stack's receive call given: a copy into a
    /// buffer, or the segments themselves (`Stack::tcp_recv_bufs`).
    pub(super) fn try_recv<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
        wait_reply: bool,
        more: &mut bool,
        recv: impl FnOnce(&mut crate::Stack, TcpHandle) -> Result<usize, Error>,
    ) -> Attempt<'a> {
        let shared = &*self.shared;
        if g.closed {
            return Attempt::Done(Err(aborted()));
        }
        if self.read_shut.load(Ordering::Acquire) {
            return Attempt::Done(Ok(0));
        }
        Attempt::Done(match recv(&mut g.stack, self.h) {
            Ok(n) => {
                *more = n > 0 && super::tcp_bits(&g.stack, self.h) & super::waiters::READABLE != 0;
                if n > 0 && g.stack.tcp_read_wants_output(self.h) {
                    if shared.sync_window_updates && wait_reply {
                        let asked = g.waits.slot(self.slot).map_or(0, |w| w.replies);
                        drop(g);
                        shared.window_update_and_wait(self.slot, asked);
                    } else if wait_reply && shared.polls() {
                        // A blocking reader over the pipe: the request goes with the output
                        // its call owes, after its copy (`Call::drop`).
                        drop(g);
                        shared.requests.post(self.slot);
                        OWED.set(shared as *const Shared as usize);
                    } else {
                        drop(g);
                        shared.post_window_update(self.slot, wait_reply);
                    }
                }
                Ok(n)
            }
            Err(Error::WouldBlock) => return Attempt::Blocked(g),
            Err(
                e @ (Error::Refused | Error::Reset | Error::TimedOut | Error::Unreachable | Error::HostUnreachable),
            ) => self.conn_error(e, false),
            Err(e) => Err(io_error(e)),
        })
    }

    fn read_impl(&self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return if self.shared.lock().closed { Err(aborted()) } else { Ok(0) };
        }
        self.recv_impl(|stack, h| stack.tcp_recv(h, buf))
    }

    /// Receive into `buf` without removing the bytes from the stream, waiting as `read`
    /// does until some are there (std's `TcpStream::peek`, `recv(2)` with `MSG_PEEK`): the
    /// next read returns them again. Returns what is queued, up to `buf`'s length.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return if self.shared.lock().closed { Err(aborted()) } else { Ok(0) };
        }
        self.recv_impl(|stack, h| stack.tcp_peek(h, buf))
    }

    /// Move received segments to `out`, their buffers with them, waiting as `read` does
    /// (the read timeout, non-blocking mode): the zero-copy read of
    /// [`Stack::tcp_recv_bufs`](crate::Stack::tcp_recv_bufs), for a splice that writes
    /// them on with `writev(2)`. Whole segments, at least one, then as many as keep the
    /// bytes moved within `max`. Returns the bytes moved; `Ok(0)` is the end of the stream.
    pub fn read_bufs(&self, max: usize, out: &mut Vec<crate::buf::PBuf>) -> io::Result<usize> {
        self.recv_impl(|stack, h| stack.tcp_recv_bufs(h, max, out))
    }

    fn recv_impl(
        &self,
        mut recv: impl FnMut(&mut crate::Stack, TcpHandle) -> Result<usize, Error>,
    ) -> io::Result<usize> {
        let shared = &*self.shared;
        let mut call = Call::new(shared, self.deadline(&self.read_timeout), false, shared.app_run);
        if shared.polls() {
            call.hold = Some(self.slot);
        }
        let mut g = shared.lock();
        loop {
            match self.try_recv(g, true, &mut call.more, &mut recv) {
                Attempt::Done(r) => {
                    // A window update left for the next round goes out within `HANDOFF`
                    // even if this thread calls no more (`watch`, "Window updates"); an
                    // output this thread owes takes it when the call ends (`Call::drop`).
                    if shared.watch_fd.is_some() && !owes(shared) && shared.requests.is_pending(self.slot) {
                        shared.hand_off();
                    }
                    return r;
                }
                Attempt::Blocked(held) => {
                    if self.nonblocking.load(Ordering::Relaxed) {
                        return Err(io_error(Error::WouldBlock));
                    }
                    g = wait(held, self.h, self.slot, false, &mut call)?;
                }
            }
        }
    }

    /// One write attempt under the lock, as [`try_read`](Self::try_read).
    #[cfg(feature = "tokio")]
    pub(super) fn try_write<'a>(&'a self, g: MutexGuard<'a, Inner>, buf: &[u8], blocking: bool) -> Attempt<'a> {
        self.try_send(g, blocking, |stack, h| stack.tcp_send(h, buf))
    }

    /// [`try_write`](Self::try_write) with the stack's send call given: a copy from a
    /// buffer, or bytes a `fill` writes into the send queue (`Stack::tcp_send_with`).
    pub(super) fn try_send<'a>(
        &'a self,
        g: MutexGuard<'a, Inner>,
        blocking: bool,
        send: impl FnOnce(&mut crate::Stack, TcpHandle) -> Result<usize, Error>,
    ) -> Attempt<'a> {
        let mut g = g;
        if g.closed {
            return Attempt::Done(Err(aborted()));
        }
        if self.write_shut.load(Ordering::Acquire) {
            return Attempt::Done(Err(io::Error::new(ErrorKind::BrokenPipe, "write after shutdown")));
        }
        Attempt::Done(match send(&mut g.stack, self.h) {
            Ok(n) => {
                drop(g);
                // A blocking writer over the pipe sends what it queued itself (`push`).
                match (n, blocking) {
                    (0, _) => {}
                    (_, true) => self.shared.push(),
                    (_, false) => self.shared.kick_from_task(),
                }
                Ok(n)
            }
            Err(Error::WouldBlock | Error::NoBufferSpace) => return Attempt::Blocked(g),
            Err(
                e @ (Error::Refused | Error::Reset | Error::TimedOut | Error::Unreachable | Error::HostUnreachable),
            ) => self.conn_error(e, true),
            // Our FIN is queued, or the connection is over.
            Err(Error::InvalidState | Error::NotConnected) => {
                Err(io::Error::new(ErrorKind::BrokenPipe, "connection closed for writing"))
            }
            Err(e) => Err(io_error(e)),
        })
    }

    fn write_impl(&self, buf: &[u8]) -> io::Result<usize> {
        self.send_impl(|stack, h| stack.tcp_send(h, buf))
    }

    /// Queue bytes that `fill` writes straight into the send queue's packet buffers,
    /// waiting for send space as `write` does (the write timeout, non-blocking mode): the
    /// zero-copy write of [`Stack::tcp_send_with`](crate::Stack::tcp_send_with), for a
    /// splice that reads another socket or a file straight into them. `fill` gets free space
    /// in a buffer and returns how many bytes it wrote there; it is called again while it
    /// fills all it was given and there is room. Returns the bytes queued (0 if `fill`
    /// wrote none). The lock on the stack is held while `fill` runs, so `fill` must not
    /// block: a read that waits stalls every socket of the runtime, and one that waits for
    /// bytes through this runtime never ends.
    pub fn write_with(&self, mut fill: impl FnMut(&mut [u8]) -> usize) -> io::Result<usize> {
        self.send_impl(|stack, h| stack.tcp_send_with(h, &mut fill))
    }

    fn send_impl(
        &self,
        mut send: impl FnMut(&mut crate::Stack, TcpHandle) -> Result<usize, Error>,
    ) -> io::Result<usize> {
        let shared = &*self.shared;
        let mut call = Call::new(shared, self.deadline(&self.write_timeout), false, shared.app_run);
        let mut g = shared.lock();
        loop {
            match self.try_send(g, true, &mut send) {
                Attempt::Done(r) => return r,
                Attempt::Blocked(held) => {
                    if self.nonblocking.load(Ordering::Relaxed) {
                        return Err(io_error(Error::WouldBlock));
                    }
                    g = wait(held, self.h, self.slot, true, &mut call)?;
                }
            }
        }
    }

    /// Whether a read (`write`: a write) would not block now, under the lock: `Done(Ok(0))`
    /// if so (it would return data, end of stream or an error), or `Blocked` with the lock
    /// still held, for the caller to register as a waiter. A write is ready only with a
    /// packet buffer free as well, as `try_write` needs one.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // for the async sockets
    pub(super) fn ready<'a>(&'a self, g: MutexGuard<'a, Inner>, write: bool) -> Attempt<'a> {
        use super::waiters::{BUFFERS, CLOSED, ERROR, GONE, READ_MASK, WRITABLE};
        if g.closed {
            return Attempt::Done(Err(aborted()));
        }
        let bits = super::tcp_bits(&g.stack, self.h);
        let ready = match write {
            false => self.read_shut.load(Ordering::Acquire) || bits & READ_MASK != 0,
            true => {
                self.write_shut.load(Ordering::Acquire)
                    || bits & (CLOSED | ERROR | GONE) != 0
                    || bits & (WRITABLE | BUFFERS) == WRITABLE | BUFFERS
            }
        };
        if ready {
            Attempt::Done(Ok(0))
        } else {
            Attempt::Blocked(g)
        }
    }

    /// Register a task to be woken when reading (`write == false`) or writing may proceed.
    /// Called with the guard an attempt returned `Blocked` with.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // for the async sockets
    pub(super) fn register_waker(&self, g: &mut MutexGuard<'_, Inner>, write: bool, waker: &Waker) {
        g.register(self.h, self.slot, write, Some(waker));
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // for the async sockets
    pub(super) fn shared(&self) -> &Shared {
        &self.shared
    }

    fn tuple(&self) -> io::Result<crate::tcp::FourTuple> {
        let g = self.shared.lock();
        if g.closed {
            return Err(aborted());
        }
        g.stack.tcp_tuple(self.h).map_err(io_error)
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        let t = self.tuple()?;
        Ok(v4(t.remote_addr, t.remote_port))
    }

    /// The local address. For a connection accepted by
    /// [`TcpListener::bind_any`](super::TcpListener::bind_any), the address and port the peer
    /// dialled (its original destination).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let t = self.tuple()?;
        Ok(v4(t.local_addr, t.local_port))
    }

    /// Half-close (`Write`: FIN after the queued data; reading goes on), stop reading
    /// (`Read`: reads return 0; the peer may still send, and writing goes on, as on Linux),
    /// or both (data that still arrives then resets the connection).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let core = match how {
            Shutdown::Read => CoreShutdown::Read,
            Shutdown::Write => CoreShutdown::Write,
            Shutdown::Both => CoreShutdown::Both,
        };
        let mut g = self.shared.lock();
        if g.closed {
            return Err(aborted());
        }
        g.stack.tcp_shutdown(self.h, core).map_err(io_error)?;
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            self.read_shut.store(true, Ordering::Release);
        }
        if matches!(how, Shutdown::Write | Shutdown::Both) {
            self.write_shut.store(true, Ordering::Release);
        }
        // A thread blocked on this stream in another call sees the change (no core event
        // reports what this thread did).
        g.waits.wake_slot(self.slot, &self.shared.cvs);
        drop(g);
        self.shared.kick();
        Ok(())
    }

    /// Make dropping this stream reset the connection (an RST; what is queued to send or
    /// left unread is discarded) instead of closing it behind the queued data (a FIN):
    /// `SO_LINGER` with a zero timeout, as tokio's `set_zero_linger`. A relay uses it to pass
    /// on a reset from the other side. It cannot be undone.
    pub fn set_zero_linger(&self) -> io::Result<()> {
        let g = self.shared.lock();
        if g.closed {
            return Err(aborted());
        }
        // The handle must still name a connection (InvalidInput otherwise, as the other calls).
        g.stack.tcp_options(self.h).map_err(io_error)?;
        self.zero_linger.store(true, Ordering::Release);
        Ok(())
    }

    /// How long a read blocks before failing with `WouldBlock` (`None`: forever). A zero
    /// duration is `InvalidInput`, as in std.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.read_timeout.store(timeout_nanos(t)?, Ordering::Relaxed);
        Ok(())
    }

    /// How long a write blocks before failing with `WouldBlock` (`None`: forever).
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.write_timeout.store(timeout_nanos(t)?, Ordering::Relaxed);
        Ok(())
    }

    /// The read timeout (`None`: reads block until data, end of stream or an error).
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(timeout_of(self.read_timeout.load(Ordering::Relaxed)))
    }

    /// The write timeout (`None`: writes block until there is room or an error).
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(timeout_of(self.write_timeout.load(Ordering::Relaxed)))
    }

    /// Reads and writes fail with `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.nonblocking.store(nonblocking, Ordering::Relaxed);
        Ok(())
    }

    /// A `tcp_info`-like snapshot of the connection.
    pub fn tcp_info(&self) -> io::Result<crate::tcp::TcpInfo> {
        let g = self.shared.lock();
        if g.closed {
            return Err(aborted());
        }
        g.stack.tcp_info(self.h).map_err(io_error)
    }
}

impl Shared {
    /// The synchronous window update (benchmark mode): post the request and wait for the
    /// protocol thread's reply, as a reader did before DragonFly BSD's commit 96c6eb29.
    /// The caller is a blocking reader, counted as present over the pipe: it stops
    /// answering rings while it waits, so the protocol thread answers the request.
    fn window_update_and_wait(&self, slot: u32, asked: u64) {
        if self.app_run {
            self.leave(true);
        }
        self.requests.post(slot);
        self.kick();
        let mut g = self.lock();
        while !g.closed && g.waits.slot(slot).is_some_and(|w| w.replies == asked) {
            self.app_waits.fetch_add(1, Ordering::Relaxed);
            g = self.cvs[slot as usize].read.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        drop(g);
        if self.app_run {
            // Present again; the call leaves when it ends (`Call::drop`).
            std::mem::forget(self.arrive());
        }
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_impl(buf)
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_impl(buf)
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_impl(buf)
    }
    /// Bytes written are queued for sending at once; there is nothing to flush.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_impl(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        if g.closed {
            return;
        }
        let _ = match self.zero_linger.load(Ordering::Acquire) {
            true => g.stack.tcp_abort(self.h),
            false => g.stack.tcp_close(self.h),
        };
        drop(g);
        self.shared.kick();
    }
}
