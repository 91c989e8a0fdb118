//! A threaded runtime: blocking, std-like sockets for application threads, and one protocol
//! thread per stack that owns the device.
//!
//! ```no_run
//! use ackclock::runtime::{Runtime, TcpListener, TcpStream};
//! # fn stack_and_device() -> (ackclock::Stack, ackclock::phy::PipeEnd) { unimplemented!() }
//! let (stack, device) = stack_and_device();
//! let rt = Runtime::new(stack, device)?;
//! let listener = TcpListener::bind(&rt, "10.0.0.1:7".parse().unwrap())?;
//! let (mut stream, peer) = listener.accept()?;
//! std::io::copy(&mut &stream, &mut &stream)?; // echo, as with std::net
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # How it is built, and why
//!
//! **One protocol thread, the stack behind one lock.** [`Runtime::new`] moves the
//! [`Stack`] into a `Mutex` shared by every thread of the runtime, and starts a protocol
//! thread. The protocol runs in rounds: take received frames from the device into a batch
//! *without* the stack's lock, then take the lock and process them ([`Stack::process`]),
//! handle the window-update requests, run timers and output ([`Stack::dispatch`]), swap the
//! stack's transmit ring for an empty one, wake the sockets whose readiness changed, release
//! the lock, and only then hand the frames to the device. Device I/O, the only system calls
//! on the packet path, never happens under the stack's lock. The device and a round's
//! batches sit in an engine behind a second lock, held by whoever runs a round (`rounds`).
//!
//! **Who runs a round.** The protocol thread, and, over the in-memory pipe (and over a TAP
//! or TUN unless [`TapRounds::ProtocolThread`]), also an application thread that has
//! work for the stack and finds no round running, as Linux runs the protocol in the calling
//! process: a blocking writer sends what it queued itself (`tcp_push` from `sendmsg`), a
//! reader sends its window update itself (`tcp_cleanup_rbuf` from `recvmsg`), and frames
//! that arrive while a thread is inside a blocking call are processed by that thread when
//! the call ends (the socket backlog `release_sock` processes). Such a round reads the
//! device too. Who must run the next round is agreed on one atomic word (`rounds::Bell`:
//! wanted, running, present threads, parked); a ring signals the protocol thread's eventfd
//! only when nobody runs a round or is present, and a thread that leaves looks at the word
//! once more, so no arrival waits for a thread that is gone. Why: one stream between two
//! runtimes over the in-memory pipe on two cores had four threads handing every write,
//! window update and arrival to each other. Counted per MB, each side made 18-23 eventfd
//! signals and ~9 condition-variable sleeps and wake-ups, and the protocol threads' spin
//! took a core from the application thread it waited for; the transfer ran at 0.14-0.40x of
//! the one-thread transfer. With the application threads running the rounds, both protocol
//! threads sleep through a bulk transfer (0 signals, 0 sleeps per MB) and it runs at 0.77x
//! (BENCHMARKS.md has the figures). The protocol thread still runs timers when no
//! application thread is active: a round in an application thread that arms a timer earlier
//! than the one the protocol thread sleeps until sets a timerfd that thread also sleeps on
//! (one system call, no wake-up now).
//!
//! **Over a TAP or TUN there are three ways ([`TapRounds`]), chosen by measurement.** There
//! a frame makes a descriptor readable, and whoever sleeps on it wakes.
//!
//! - *The protocol thread only* ([`TapRounds::ProtocolThread`]): it watches the device,
//!   runs every round and wakes blocked threads on their condition variables. Every read
//!   and every write that blocks is a hand-off between two threads (5-12 condition-variable
//!   sleeps and as many protocol-thread sleeps per MB).
//! - *Application threads run rounds too* ([`TapRounds::AppThreads`]), as over the pipe.
//!   The protocol thread, which alone watched the descriptor, woke for every frame their
//!   next round was about to read (80-370 sleeps per MB), so it *parks*: woken by the
//!   descriptor while another thread runs rounds, in one step on the word it asks for one
//!   more round (which reads the device) and marks itself parked, then sleeps on its eventfd
//!   and timerfd only; the runner that stops with the mark set clears it and signals the
//!   eventfd, and the protocol thread watches the device again. A loom model checks that
//!   the frame that woke it is always processed and that it always watches the device
//!   again, and that a runner ignoring the mark leaves it deaf. Blocked threads still wait
//!   on condition variables, for rounds the protocol thread runs.
//! - **The default: the blocked application thread watches the device**
//!   ([`TapRounds::Watch`]; `watch` has the protocol). At most one thread at a time, the
//!   one that blocked last, sleeps in ppoll on the device's descriptor and an eventfd of
//!   its own, and runs the round its frames need itself; other blocked threads sleep on
//!   their own eventfds, signalled by a waker registered for their socket. The protocol
//!   thread keeps the timers and the rings, and sleeps without the descriptor while a
//!   thread watches or is inside a call; the last thread out lowers its deadline to 1 ms
//!   from now (a timerfd, no wake-up), so frames wait at most that long for a thread that
//!   left to do other work. A loom model checks that hand-off, and that the other order
//!   loses the device. One busy connection then runs as a single-thread loop does, with no
//!   hand-off between threads: `scripts/bench-rt-tap` (serve's services on the runtime
//!   against serve's own single-thread loop, medians of three) measured 0.94-1.59x of the
//!   loop with offloads and 0.67-1.19x on plain devices, against 0.56-1.02x with the
//!   protocol thread only in the same run, with 0.5-3.6 protocol-thread sleeps and no
//!   condition-variable wait per MB (BENCHMARKS.md has the figures).
//!
//! **The one copy happens in the application thread, under the lock.** `read` is the core's
//! receive copy (`tcp_recv`): bytes go straight from the packet buffers in the receive queue
//! into the caller's buffer, with the deferred checksum verified during that copy (the
//! single copy of Dalton et al. 1993, with the checksum fused into it as in Jacobson 1993).
//! `write` is `tcp_send`: the caller's bytes are copied into packet buffers with the
//! checksum computed during the copy. So there is no byte ring between the threads and
//! no second pass, buffers never leave the stack, and the core's invariants hold unchanged
//! because it is the core that does the copy: no ACK covers data whose checksum was not
//! verified, and a segment that fails its checksum is dropped without changing any
//! connection state or losing good data behind it.
//!
//! **The reader's ACK after its copy.** An ACK must not cover data whose checksum is
//! unchecked, so a round that acknowledges frames before the reader has copied them checks
//! each in a pass of its own, and the copy is then a plain one: the payload is read twice.
//! So the reader's own connection sends its ACK after the copy. Over a TAP or TUN the
//! watcher's round runs in two halves (`watch`): the input, then after the copy the output.
//! Over the in-memory pipe every round a blocking reader runs (polling, or answering a
//! ring as it leaves its call) is whole except for its own connection, whose output stays
//! pending (`Part::Hold`); the thread *owes* it, and after its copy a round's output part
//! sends the ACK and the window update in one segment. Other connections' output is not
//! held: with eight streams, a reader that held every connection's output until its own
//! copy ended cost their writers about a sixth of their throughput. Nor is anything held
//! while other application threads are inside calls of the same runtime: the reader may then
//! wait for a core between its round and its copy, and its writer with it. The output round is
//! followed by one that reads the device (holding again), because the output round took the
//! ring's flag without reading the device and the pipe rings only when its queue goes from
//! empty to not empty (a loom model in `rounds` shows the frame lost otherwise). Frames
//! that arrive during the copy are taken in when the call ends, and their ACK waits for the
//! next copy. A call that ends owing output it cannot pay yet (data left unread) hands off:
//! the protocol thread runs a round within `watch::HANDOFF` unless the thread comes back
//! first; no thread sleeps owing. An ACK after the copy holds the writer's buffers until the
//! reader has copied, so it pays only if the writer can queue the next window meanwhile:
//! hence a default send buffer of two windows
//! ([`TcpConfig::send_buffer`](crate::tcp::TcpConfig)). A reader that is away from its calls
//! when frames arrive leaves them to the protocol thread, whose rounds are whole. BENCHMARKS.md
//! ("The reader's ACK after its copy") has the figures.
//!
//! The alternative was a lock-free handoff of buffer handles into per-socket queues that
//! readers drain without the stack's lock. We did not take it because of the deferred
//! receive checksum: by the time a reader verifies a segment and finds it bad, the protocol
//! thread has moved `rcv_nxt` past it (and may have acknowledged what follows it), so the
//! reader would have to send a rollback message back across threads, and every invariant
//! above would depend on that message. Under the lock the reader simply calls the core. What
//! to measure before changing this: lock hold and wait times per read and per protocol
//! round under many parallel streams (the lock is held for a copy of at most the caller's
//! buffer), and the share of a one-stream transfer spent waiting for the lock rather than
//! copying; a per-socket handoff only pays if that wait dominates.
//!
//! **Window updates are coalesced messages** (DragonFly BSD commit 96c6eb29, "tcp:
//! Implement asynchronized pru_rcvd"). A read that frees receive space does not decide or
//! send the window update: with the decision deferred in the core, `tcp_recv` only copies.
//! After releasing the lock the reader posts the connection's embedded request, which is
//! queued only if it was not already pending (see `wnd_update`), and makes sure a round
//! runs (over the pipe it runs one itself when none is running); every round marks each
//! request it takes done *before* it computes the window, whichever thread runs it, so a
//! read that lands meanwhile posts a fresh one and no update is lost. A read posts only
//! when it may matter: when the read verified data an ACK is now owed for, or when the
//! freed space is worth a segment of its own. That test is stricter than the one an ACK
//! applies to the window it carries (BSD's, RFC 9293 §3.8.6.2.2: the edge moves by two
//! segments or half the buffer): the peer must be down to half the window or less, and the
//! new window at least twice what it has left (Linux's `tcp_cleanup_rbuf`). While the peer
//! has more than that to send into, the space rides on the ACK its next segments draw.
//! Over a device application threads watch
//! ([`TapRounds::Watch`]) the reader runs no round for it: the output it owes after its
//! copy takes the request, and sends the window in the same segment as the ACK of what it
//! read (`watch`, "Window updates"). [`RuntimeConfig::sync_window_updates`] (for benchmarks
//! only) makes the reader hand the request to the protocol thread and wait for its reply,
//! as before the commit.
//!
//! **Writes need no per-socket message.** `tcp_send` already puts the connection on the
//! core's list of connections with output pending, which the next round drains under the
//! same lock; the writer only has to make sure a round runs. The runtime's one word
//! coalesces those requests: a writer sets `wanted`, and signals the eventfd only if the
//! word was clear; whoever runs rounds clears `wanted` (first) at the start of each round
//! and looks at it again before it stops. A per-socket request would cost the same atomic
//! operation and a queue besides, for nothing the list does not already hold.
//!
//! **Sleeping.** Between rounds the protocol thread sleeps in ppoll(2) on the device's
//! descriptor (a TAP), an eventfd that application threads and the in-memory pipe's other
//! end signal, and a timerfd, with the timeout of the stack's next timer
//! ([`Stack::poll_at`]); parked, on the eventfd and the timerfd only. Time is the
//! monotonic clock, converted to the stack's [`Instant`] at the stack's own epoch. No
//! polling loop. Over the in-memory pipe, whose frames ring
//! the same eventfd, the thread first spins for up to 50 µs on a flag every signal sets (as
//! Linux's `busy_poll`), unless application threads ran rounds since it last slept (they
//! poll themselves, and its spin would take a core from them). Over a TAP or TUN it does not
//! spin, since a frame on the descriptor would wait out the spin.
//!
//! **Blocking.** Over the in-memory pipe, a blocking call that would wait first polls for
//! up to 50 µs, once per call (as Linux's `busy_poll`): it runs a round whenever a ring
//! comes and tries again as soon as any round ran, yielding the core between looks at the
//! clock so that a thread it waits for on the same core can run. Then, or at once over a
//! TAP, the thread registers on its socket and waits on the socket's condition variable
//! with the stack's lock (one for readers and one for writers per connection slot, made
//! with the runtime), or over a TAP or TUN by default on its own eventfd and, if it is
//! the watcher, the device (above); while it sleeps it is not present, so rings go to the
//! protocol thread. Over a TAP or TUN a thread does not poll. After each round the protocol
//! thread wakes the sockets whose readiness changed (`Inner::wake_changed`). Async tasks
//! (`runtime::tokio`, behind the `tokio` feature) wait the same way with a waker in
//! place of the condition variable: the protocol thread wakes a stored waker only when that
//! socket's readiness changed, never on every round.
//!
//! **Memory after a burst.** A pool's free list hands out the buffer freed last, so the
//! buffers a burst used stay resident after it, and a process's memory would follow its load
//! up but not down. Once no frame has moved for [`IDLE_MEMORY_AFTER`], the protocol thread
//! gives the pages of the free buffers a burst used back to the operating system, leaving
//! [`IDLE_MEMORY_KEPT`] bytes of each pool's free buffers alone, the never-used ones first
//! (`Pool::release_free`, in the stack's pool and the device's receive pool), once per
//! quiet spell. When it sleeps on the device it wakes for that if nothing else wakes it
//! first; while an application thread watches the device, it does it at its next wake-up
//! (a timer, a message). [`RuntimeConfig::keep_idle_memory`] turns it off. The heap is the
//! embedder's: the runtime does not trim it (`ackclock relay` and `ackclock serve` trim it
//! after each release, seen in [`RuntimeStats::idle_memory_releases`]).
//!
//! **Stopping.** [`Runtime::shutdown`] (or drop) resets every connection still open and
//! closes every listener, as a process that exits does, sends those RSTs, wakes every
//! blocked thread with `ConnectionAborted`, and joins the protocol thread. Sockets used
//! after that return the same error. [`Runtime::shutdown_linger`] first gives the
//! connections whose streams were dropped time to finish closing (their FINs sent and
//! acknowledged), as `SO_LINGER` does for one socket; [`Runtime::take_device`] then gives
//! the device back, for its counters or a capture to flush. The stack stays readable
//! through [`Runtime::with_stack`].

mod config;
#[cfg(all(test, loom))]
mod deadline_model;
mod idle;
mod listener;
mod net;
#[cfg(any(feature = "tokio", all(test, loom)))]
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
mod owed;
mod protocol;
mod rounds;
mod stop;
pub(crate) mod sync;
mod sys;
#[cfg(feature = "tokio")]
pub mod tokio;
mod udp;
mod waiters;
mod watch;
pub(crate) mod wnd_update;

pub use config::{RuntimeConfig, RuntimeStats, TapRounds, IDLE_MEMORY_AFTER, IDLE_MEMORY_KEPT};
use idle::IdleMemory;
pub use listener::TcpListener;
pub use net::TcpStream;
pub use udp::UdpSocket;

use crate::buf::Pool;
use crate::phy::{Batch, Device, PipeEnd, Wakeup};
use crate::socket::{Event, ListenerHandle, TcpHandle, UdpHandle};
use crate::stack::Stack;
use crate::time::Instant;
use core::time::Duration;
use rounds::{Bell, Engine, Rounds, AWAKE};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::thread::JoinHandle;
use waiters::{SlotCv, Waiters, BUFFERS, CLOSED, ERROR, GONE, READABLE, READ_CLOSED, SYNCHRONIZED, WRITABLE};
use watch::Watch;
use wnd_update::Requests;

/// A device a runtime can drive: it must tell the protocol thread when frames arrive.
pub trait RuntimeDevice: Device + Send + 'static {
    /// Make frames arriving wake the protocol thread: either return a descriptor that
    /// becomes readable then (the thread polls it), or call `wakeup` then and return `None`.
    fn attach(&mut self, wakeup: Arc<dyn Wakeup>) -> Option<RawFd>;

    /// The device's own pool of receive buffers, if it has one: the runtime gives its idle
    /// memory back with the stack's ([`RuntimeConfig::keep_idle_memory`]).
    fn receive_pool(&self) -> Option<Pool> {
        None
    }
}

impl RuntimeDevice for PipeEnd {
    fn attach(&mut self, wakeup: Arc<dyn Wakeup>) -> Option<RawFd> {
        self.set_wakeup(wakeup);
        None
    }
}

impl RuntimeDevice for crate::phy::Tap {
    fn attach(&mut self, _wakeup: Arc<dyn Wakeup>) -> Option<RawFd> {
        Some(self.as_raw_fd())
    }

    fn receive_pool(&self) -> Option<Pool> {
        Some(self.pool().clone())
    }
}

impl RuntimeDevice for crate::phy::Tun {
    fn attach(&mut self, _wakeup: Arc<dyn Wakeup>) -> Option<RawFd> {
        Some(self.as_raw_fd())
    }

    fn receive_pool(&self) -> Option<Pool> {
        Some(self.pool().clone())
    }
}

/// A stack and the protocol thread that drives it. See the [module documentation](self).
#[derive(Debug)]
pub struct Runtime {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// What every thread of a runtime shares.
#[derive(Debug)]
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    cvs: Box<[SlotCv]>,
    udp_cvs: Box<[SlotCv]>,
    accept_cv: Condvar,
    requests: Requests,
    /// Who runs the next round, and the protocol thread's eventfd (`rounds`).
    bell: Arc<Bell>,
    /// The device and a round's buffers: whoever runs a round holds this lock (and takes the
    /// stack's inside it). `None` once the protocol thread has stopped.
    engine: Mutex<Option<Box<dyn Rounds>>>,
    /// The device, once the protocol thread has stopped, for [`Runtime::take_device`].
    stopped_device: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// [`Runtime::shutdown_linger`] waits for the connections to finish closing: rounds
    /// notify `drained` when none is left but TIME-WAIT entries.
    lingering: AtomicBool,
    drained: Condvar,
    /// Application threads poll before blocking (a device without a descriptor: the
    /// in-memory pipe).
    direct: bool,
    /// Application threads run rounds: a writer sends what it queued, a reader its window
    /// update, and a thread inside a blocking call is present (`rounds::Bell`). Over the
    /// pipe always; over a TAP or TUN unless [`TapRounds::ProtocolThread`].
    app_run: bool,
    /// When the protocol thread wakes by itself (`rounds::deadline_code`, or `AWAKE`).
    /// Published under the engine's lock; others only lower it (`watch::lower`).
    sleep_until: sync::AtomicU64,
    /// Application threads watch the device while they block (a TAP or TUN with
    /// [`TapRounds::Watch`]): its descriptor.
    watch_fd: Option<RawFd>,
    /// Which thread watches the device (`watch`).
    watch: Watch,
    /// The task watching the device, for the calls of tasks on its thread.
    #[cfg(feature = "tokio")]
    task_watch: owed::TaskWatch,
    /// The monotonic clock at the stack's epoch: every round's and every sleep's time.
    clock: Clock,
    /// Armed by an application thread's round that set a timer earlier than `sleep_until`.
    timer: sys::TimerFd,
    /// `shutdown` was called: the protocol thread runs its last round and stops.
    stopping: AtomicBool,
    sync_window_updates: bool,
    window_update_requests: AtomicU64,
    window_updates_sent: AtomicU64,
    rounds: AtomicU64,
    sleeps: AtomicU64,
    app_waits: AtomicU64,
    lock_contended: AtomicU64,
    app_rounds: AtomicU64,
    app_pushes: AtomicU64,
    polls: AtomicU64,
    poll_timeouts: AtomicU64,
    parks: AtomicU64,
    watches: AtomicU64,
    watch_rounds: AtomicU64,
    handoffs: AtomicU64,
    split_round_segments: AtomicU64,
    split_round_acks_early: AtomicU64,
    /// Frames the stack has received and sent, as of the last round (the protocol thread
    /// sees from it whether the device was quiet).
    frames_moved: AtomicU64,
    idle_memory_releases: AtomicU64,
    idle_memory_released: AtomicU64,
}

impl std::fmt::Debug for dyn Rounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rounds")
    }
}

/// What the stack's lock protects.
#[derive(Debug)]
pub(crate) struct Inner {
    stack: Stack,
    /// The runtime was shut down: every call fails.
    closed: bool,
    /// Who waits on which connection slot.
    waits: Waiters<TcpHandle>,
    /// Who waits on which UDP socket slot.
    udp_waits: Waiters<UdpHandle>,
    /// Listeners someone waits to accept from: a blocked thread (no waker) or a task.
    accepting: Vec<(ListenerHandle, Option<Waker>)>,
    /// Tasks that watch the device (`tokio::watch_device`), by watcher id, woken when the
    /// runtime stops; a watch takes its entry out when it ends.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    device_watchers: Vec<(u64, Waker)>,
}

/// A connection's readiness as bits (what its waiters compare).
fn tcp_bits(stack: &Stack, h: TcpHandle) -> u8 {
    let Ok(r) = stack.tcp_readiness(h) else { return GONE };
    let b = |c: bool, bit: u8| if c { bit } else { 0 };
    b(r.readable, READABLE)
        | b(r.read_closed, READ_CLOSED)
        | b(r.closed, CLOSED)
        | b(r.error.is_some(), ERROR)
        | b(r.writable, WRITABLE)
        | b(r.state.is_synchronized(), SYNCHRONIZED)
        | b(stack.pool().available() > 0, BUFFERS)
}

/// A UDP socket's readiness as bits: datagrams queued, buffers to send from.
fn udp_bits(stack: &Stack, h: UdpHandle) -> u8 {
    match stack.udp_readable(h) {
        Ok(readable) => {
            (if readable { READABLE } else { 0 }) | (if stack.pool().available() > 0 { BUFFERS } else { 0 })
        }
        Err(_) => GONE,
    }
}

impl Inner {
    /// Register the calling thread (`waker == None`) or task as waiting to read
    /// (`write == false`) or write on connection `h`, until its readiness changes.
    fn register(&mut self, h: TcpHandle, slot: u32, write: bool, waker: Option<&Waker>) {
        let bits = tcp_bits(&self.stack, h);
        self.waits.register(h, slot, bits, write, waker);
    }

    /// As [`register`](Self::register), on a UDP socket.
    fn register_udp(&mut self, h: UdpHandle, write: bool, waker: Option<&Waker>) {
        let bits = udp_bits(&self.stack, h);
        self.udp_waits.register(h, h.idx, bits, write, waker);
    }

    /// After a round: wake the threads and tasks waiting on sockets whose readiness changed.
    ///
    /// The core lists the connections and listeners a round touched ([`Stack::poll_event`]):
    /// only those are looked at, so 1,000 blocked readers on idle connections cost nothing
    /// per round. Two changes have no per-socket event and are looked for apart: buffers
    /// coming back to an exhausted pool (for writers that waited for one: all waiting
    /// connections are looked at then), and UDP sockets (few, looked at every round).
    fn wake_changed(&mut self, cvs: &[SlotCv], udp_cvs: &[SlotCv], accept_cv: &Condvar) {
        if self.waits.starved && self.stack.pool().available() > 0 {
            let stack = &self.stack;
            self.waits.wake_changed(cvs, |h| tcp_bits(stack, h));
        }
        let mut accept = false;
        while let Some(event) = self.stack.poll_event() {
            match event {
                Event::Tcp(h) => {
                    if let Ok(slot) = self.stack.tcp_slot(h) {
                        let stack = &self.stack;
                        self.waits.changed(slot, cvs, |h| tcp_bits(stack, h));
                    }
                }
                Event::Accept(_) => accept = true,
            }
        }
        let stack = &self.stack;
        self.udp_waits.wake_changed(udp_cvs, |h| udp_bits(stack, h));
        if accept && !self.accepting.is_empty() {
            let stack = &self.stack;
            let mut woke = false;
            self.accepting.retain_mut(|(l, waker)| {
                if stack.tcp_acceptable(*l).is_ok_and(|n| n == 0) {
                    return true;
                }
                woke = true;
                if let Some(waker) = waker.take() {
                    waker.wake();
                }
                false
            });
            if woke {
                accept_cv.notify_all();
            }
        }
    }

    /// Wait to accept from `l`: a blocked thread (`None`) or a task.
    fn register_accept(&mut self, l: ListenerHandle, waker: Option<&Waker>) {
        // One entry for the blocked threads, one per waiting task: a task's waker is never
        // replaced by another task's (tokio's `accept` may be awaited by several at once).
        let known = self.accepting.iter().any(|(x, w)| {
            *x == l
                && match (w, waker) {
                    (None, None) => true,
                    (Some(stored), Some(waker)) => stored.will_wake(waker),
                    _ => false,
                }
        });
        if !known {
            self.accepting.push((l, waker.cloned()));
        }
    }

    /// Shutdown: wake every task that waits (blocked threads are woken by the caller).
    fn wake_all_tasks(&mut self) {
        self.waits.wake_all_tasks();
        self.udp_waits.wake_all_tasks();
        for (_, waker) in self.accepting.drain(..) {
            if let Some(waker) = waker {
                waker.wake();
            }
        }
        self.device_watchers.drain(..).for_each(|(_, w)| w.wake());
    }
}

/// The monotonic clock at the stack's epoch.
#[derive(Debug, Clone, Copy)]
struct Clock {
    start: std::time::Instant,
    base: Instant,
}

impl Clock {
    fn now(&self) -> Instant {
        self.base + self.start.elapsed()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                self.lock_contended.fetch_add(1, Ordering::Relaxed);
                lock(&self.inner)
            }
        }
    }

    /// Make sure a round runs soon (output is pending): the protocol thread's, unless a
    /// thread runs or polls rounds already.
    fn kick(&self) {
        self.bell.ring();
    }

    /// How the protocol thread's rounds begin: with the output only while a task watches the
    /// device (`owed::TaskWatch`), else whole. The owed output is taken first: this round,
    /// or the one running now (which ends with an output), sends it, and a call after this
    /// owes anew and sets the backstop again.
    fn protocol_first_part(&self) -> rounds::Part {
        #[cfg(feature = "tokio")]
        if self.task_watch.watching() {
            self.task_watch.take_owed();
            return rounds::Part::Output;
        }
        rounds::Part::Whole
    }

    /// The longest the protocol thread may sleep now for output owed to the device's
    /// watching task (`owed::TaskWatch`), asked after it published its deadline.
    fn owed_backstop(&self) -> Option<Duration> {
        #[cfg(feature = "tokio")]
        if self.task_watch.owed_now() {
            return Some(owed::OWED_BACKSTOP);
        }
        None
    }

    /// [`kick`](Self::kick) for a task's non-blocking call: the device's watching task
    /// sends the output if it runs on this thread (`owed::TaskWatch`).
    fn kick_from_task(&self) {
        #[cfg(feature = "tokio")]
        match self.task_watch.owe() {
            owed::Owed::First => {
                // The backstop, should nothing poll the watcher (`owed::TaskWatch`).
                let now = self.clock.now();
                self.lower_deadline(now.plus_nanos(owed::OWED_BACKSTOP.as_nanos() as u64), now);
                return;
            }
            owed::Owed::Again => return,
            owed::Owed::No => {}
        }
        self.kick();
    }

    /// A reader's window-update request for `slot`: a blocking reader (`blocking`) runs the
    /// round here when application threads run rounds, or leaves it to the output it owes
    /// over a watched device; a task's non-blocking read leaves it to the device's watcher
    /// on its thread, or rings for one (`kick_from_task`).
    fn post_window_update(&self, slot: u32, blocking: bool) {
        let direct = blocking && self.app_run;
        // Over a watched device the request waits for the output the reader owes, or the
        // next round (`watch`, "Window updates").
        if self.requests.post(slot) && !(direct && self.watch_fd.is_some()) {
            match (direct, blocking) {
                (true, _) => self.push(),
                (false, false) => self.kick_from_task(),
                (false, true) => self.kick(),
            }
        }
    }
}

impl Runtime {
    /// Start a protocol thread for `stack` on `device`.
    pub fn new<D: RuntimeDevice>(stack: Stack, device: D) -> io::Result<Runtime> {
        Runtime::with_config(stack, device, RuntimeConfig::default())
    }

    /// [`new`](Self::new) with a configuration.
    pub fn with_config<D: RuntimeDevice>(
        mut stack: Stack,
        mut device: D,
        config: RuntimeConfig,
    ) -> io::Result<Runtime> {
        let slots = stack.tcp().config().max_connections.max(1);
        let udp_slots = stack.udp().config().max_sockets;
        stack.defer_window_updates(true);
        let clock = Clock { start: std::time::Instant::now(), base: stack.now };
        let bell = Arc::new(Bell::new()?);
        let device_fd = device.attach(bell.clone());
        let (stack_pool, device_pool) = (stack.pool().clone(), device.receive_pool());
        let ring = stack.tx_ring().capacity();
        let engine: Box<dyn Rounds> = Box::new(Engine {
            dev: device,
            rx: Batch::with_capacity(ring),
            tx: Batch::with_capacity(ring),
            taken: Vec::with_capacity(slots),
            last: Default::default(),
        });
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                stack,
                closed: false,
                waits: Waiters::new(slots),
                udp_waits: Waiters::new(udp_slots),
                accepting: Vec::new(),
                device_watchers: Vec::new(),
            }),
            cvs: (0..slots).map(|_| SlotCv::default()).collect(),
            udp_cvs: (0..udp_slots).map(|_| SlotCv::default()).collect(),
            accept_cv: Condvar::new(),
            requests: Requests::new(slots),
            bell,
            engine: Mutex::new(Some(engine)),
            stopped_device: Mutex::new(None),
            lingering: AtomicBool::new(false),
            drained: Condvar::new(),
            direct: device_fd.is_none(),
            app_run: device_fd.is_none() || config.tap_rounds != TapRounds::ProtocolThread,
            sleep_until: sync::AtomicU64::new(AWAKE),
            watch_fd: device_fd.filter(|_| config.tap_rounds == TapRounds::Watch),
            watch: Watch::new(),
            #[cfg(feature = "tokio")]
            task_watch: Default::default(),
            clock,
            timer: sys::TimerFd::new()?,
            stopping: AtomicBool::new(false),
            sync_window_updates: config.sync_window_updates,
            window_update_requests: AtomicU64::new(0),
            window_updates_sent: AtomicU64::new(0),
            rounds: AtomicU64::new(0),
            sleeps: AtomicU64::new(0),
            app_waits: AtomicU64::new(0),
            lock_contended: AtomicU64::new(0),
            app_rounds: AtomicU64::new(0),
            app_pushes: AtomicU64::new(0),
            polls: AtomicU64::new(0),
            poll_timeouts: AtomicU64::new(0),
            parks: AtomicU64::new(0),
            watches: AtomicU64::new(0),
            watch_rounds: AtomicU64::new(0),
            handoffs: AtomicU64::new(0),
            split_round_segments: AtomicU64::new(0),
            split_round_acks_early: AtomicU64::new(0),
            frames_moved: AtomicU64::new(0),
            idle_memory_releases: AtomicU64::new(0),
            idle_memory_released: AtomicU64::new(0),
        });
        let s = shared.clone();
        let idle = (!config.keep_idle_memory)
            .then(|| IdleMemory::new([Some(stack_pool), device_pool].into_iter().flatten().collect()));
        let thread = std::thread::Builder::new()
            .name("ackclock-protocol".into())
            .spawn(move || protocol::protocol_thread(s, device_fd, idle))?;
        Ok(Runtime { shared, thread: Some(thread) })
    }

    /// Run `f` on the stack, under its lock (counters, `tcp_info`, configuration). Keep it
    /// short: the protocol thread waits meanwhile.
    pub fn with_stack<R>(&self, f: impl FnOnce(&mut Stack) -> R) -> R {
        let r = f(&mut self.shared.lock().stack);
        self.shared.kick();
        r
    }

    /// The device's frame counters while the runtime runs (`None` once it has stopped:
    /// [`take_device`](Self::take_device) gives the device back). Taken between rounds,
    /// under the lock a round holds.
    pub fn device_stats(&self) -> Option<crate::phy::DeviceStats> {
        lock(&self.shared.engine).as_ref().map(|e| e.device_stats())
    }

    /// Counters of the runtime itself.
    pub fn stats(&self) -> RuntimeStats {
        let s = &self.shared;
        RuntimeStats {
            window_update_requests: s.window_update_requests.load(Ordering::Relaxed),
            window_updates_sent: s.window_updates_sent.load(Ordering::Relaxed),
            rounds: s.rounds.load(Ordering::Relaxed),
            sleeps: s.sleeps.load(Ordering::Relaxed),
            wakeups: s.bell.eventfd.signals(),
            app_waits: s.app_waits.load(Ordering::Relaxed),
            lock_contended: s.lock_contended.load(Ordering::Relaxed),
            app_rounds: s.app_rounds.load(Ordering::Relaxed),
            app_pushes: s.app_pushes.load(Ordering::Relaxed),
            polls: s.polls.load(Ordering::Relaxed),
            poll_timeouts: s.poll_timeouts.load(Ordering::Relaxed),
            parks: s.parks.load(Ordering::Relaxed),
            watches: s.watches.load(Ordering::Relaxed),
            watch_rounds: s.watch_rounds.load(Ordering::Relaxed),
            handoffs: s.handoffs.load(Ordering::Relaxed),
            split_round_segments: s.split_round_segments.load(Ordering::Relaxed),
            split_round_acks_early: s.split_round_acks_early.load(Ordering::Relaxed),
            idle_memory_releases: s.idle_memory_releases.load(Ordering::Relaxed),
            idle_memory_released: s.idle_memory_released.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Shared {
    /// Make the protocol thread wake by `at` if it sleeps until later: lower the deadline it
    /// published and set the timerfd it sleeps on (a system call, no wake-up now). Threads
    /// that lower it at once may arm the timerfd in any order, so whoever armed it looks
    /// again and re-arms while the deadline is earlier than what it armed. `false`: it
    /// wakes by then anyway (or is awake).
    fn lower_deadline(&self, at: Instant, now: Instant) -> bool {
        let mut code = rounds::deadline_code(Some(at));
        if !watch::lower(&self.sleep_until, code) {
            return false;
        }
        loop {
            let at = Instant::from_nanos(code - 1);
            self.timer.arm(at.saturating_duration_since(now));
            let cur = self.sleep_until.load(Ordering::SeqCst);
            if cur == AWAKE || cur >= code {
                return true;
            }
            code = cur;
        }
    }

    /// The last thread stopped watching the device or left its call (`watch`): if no thread
    /// watches it by [`watch::HANDOFF`] from now, the protocol thread must.
    pub(super) fn hand_off(&self) {
        let now = self.clock.now();
        if self.lower_deadline(now.plus_nanos(watch::HANDOFF.as_nanos() as u64), now) {
            self.handoffs.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Shutdown: wake every thread blocked on a condition variable (`inner` is the locked
    /// stack: a thread registers and blocks under that lock). Only the slots a thread
    /// registered on are notified: each notification is a futex system call even with
    /// nobody waiting, and a runtime has a slot per possible connection. A reader waiting
    /// for a synchronous window-update reply does not register, so in that (benchmark)
    /// mode every slot's readers are notified.
    fn wake_all(&self, inner: &mut Inner) {
        inner.waits.each_thread(|slot, read, write| notify(&self.cvs[slot], read, write));
        inner.udp_waits.each_thread(|slot, read, write| notify(&self.udp_cvs[slot], read, write));
        if self.sync_window_updates {
            self.cvs.iter().for_each(|cv| cv.read.notify_all());
        }
        self.accept_cv.notify_all();
    }
}

fn notify(cv: &SlotCv, read: bool, write: bool) {
    if read {
        cv.read.notify_all();
    }
    if write {
        cv.write.notify_all();
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// How long an application thread over the in-memory pipe polls before it blocks.
const POLL: std::time::Duration = std::time::Duration::from_micros(50);
