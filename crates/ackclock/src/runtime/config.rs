//! How a runtime runs ([`RuntimeConfig`], [`TapRounds`]) and what it counted
//! ([`RuntimeStats`]).

use core::time::Duration;

/// How a runtime runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuntimeConfig {
    /// For benchmarks only: a reader that freed receive space posts a window-update request
    /// and waits for the protocol thread's reply, one message per read, as before DragonFly
    /// BSD's commit 96c6eb29. Off (the default): the request is posted and coalesced.
    pub sync_window_updates: bool,
    /// Who runs the protocol rounds over a TAP or TUN (over the in-memory pipe application
    /// threads always run them too). See the module documentation.
    pub tap_rounds: TapRounds,
    /// Keep the packet pools' free buffers resident while the device is quiet. Off (the
    /// default): once no frame has moved for [`IDLE_MEMORY_AFTER`], the protocol thread gives
    /// the pages of free buffers back to the operating system (the stack's pool and the
    /// device's receive pool, [`RuntimeDevice::receive_pool`](super::RuntimeDevice::receive_pool)), leaving
    /// [`IDLE_MEMORY_KEPT`] bytes of free buffers per pool alone; so the process's memory follows its
    /// load down after a burst, as well as up. A buffer given back reads as zeros and costs
    /// a page fault per page when next used.
    pub keep_idle_memory: bool,
}

/// How long the device must be quiet before the runtime gives idle packet memory back
/// ([`RuntimeConfig::keep_idle_memory`]).
pub const IDLE_MEMORY_AFTER: Duration = Duration::from_secs(1);

/// Bytes of free buffers each pool leaves alone when idle memory is given back: the buffers
/// never used (which cost nothing until used) count first, then those at the bottom of its
/// free list. So after a burst that used less of a pool than all but this much, every buffer
/// it used is given back.
pub const IDLE_MEMORY_KEPT: usize = 1 << 20;

/// Who runs the protocol rounds over a TAP or TUN ([`RuntimeConfig::tap_rounds`]); the
/// module documentation has the design and `scripts/bench-rt-tap` the measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TapRounds {
    /// Only the protocol thread: it watches the device, runs every round, and wakes
    /// application threads on their sockets' condition variables.
    ProtocolThread,
    /// Application threads run rounds too, as over the in-memory pipe (a writer sends what
    /// it queued, a reader its window update, reading the device in the same round); the
    /// protocol thread watches the device and *parks* while they do. Blocked threads wait
    /// on condition variables.
    AppThreads,
    /// The default: as `AppThreads`, and an application thread that blocks watches the
    /// device itself (ppoll on its descriptor) and runs the rounds its frames need, instead
    /// of waiting for the protocol thread to run them; at most one thread watches at a
    /// time, and the protocol thread keeps the timers (module documentation, "Over a TAP or
    /// TUN"). Measured the closest to a single-thread loop.
    #[default]
    Watch,
}

/// What a runtime counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuntimeStats {
    /// Window-update requests the protocol thread handled (messages from readers).
    pub window_update_requests: u64,
    /// Of those, the ones that found an update due and sent it.
    pub window_updates_sent: u64,
    /// Protocol-thread rounds.
    pub rounds: u64,
    /// Times the protocol thread went to sleep.
    pub sleeps: u64,
    /// Signals of the protocol thread's eventfd (a system call each): from application
    /// threads, and from the in-memory pipe's other end when frames reach an empty queue.
    pub wakeups: u64,
    /// Times an application thread blocked on a socket's condition variable (a futex wait
    /// and a wake-up each).
    pub app_waits: u64,
    /// Acquisitions of the stack's lock that found it held and had to wait.
    pub lock_contended: u64,
    /// Of the rounds, those an application thread ran (over the in-memory pipe: after
    /// queueing data or a window-update request, and while polling before it blocks).
    pub app_rounds: u64,
    /// Times an application thread had work for the stack (data it queued, a window-update
    /// request) and took the round on itself instead of signalling the protocol thread: it
    /// ran the round (counted in `app_rounds`), or found another thread running rounds, whose
    /// next round covers it. Over the pipe, and over a TAP or TUN unless
    /// [`TapRounds::ProtocolThread`]; which of the two happens depends on timing, this count
    /// does not.
    pub app_pushes: u64,
    /// Times an application thread polled before blocking (over the pipe).
    pub polls: u64,
    /// Of those, the polls that saw no round before their time was up (the thread then
    /// sleeps on its condition variable).
    pub poll_timeouts: u64,
    /// Times the protocol thread, woken by a TAP's or TUN's descriptor, found an
    /// application thread running rounds and left the device to it (a sleep each, counted
    /// in `sleeps` too).
    pub parks: u64,
    /// Times an application thread slept watching the device
    /// ([`TapRounds::Watch`]).
    pub watches: u64,
    /// Of the watching application threads' wake-ups, those for frames on the device (the
    /// thread ran a round).
    pub watch_rounds: u64,
    /// Times the last application thread to stop watching the device or leave its call
    /// lowered the protocol thread's deadline, so that the device is watched again soon if
    /// no thread comes back (a timerfd system call each).
    pub handoffs: u64,
    /// TCP segments taken in by split rounds: rounds whose output (the ACK of a reader's
    /// connection) waits for the reader's copy, a watcher's input half over a TAP or TUN
    /// or a blocking reader's held round over the pipe ("The reader's ACK after its copy").
    /// The output halves count too (they take no frames in): a reader's after its copy, and
    /// the protocol thread's first round while a tokio task watches the device.
    pub split_round_segments: u64,
    /// Received segments whose checksum split rounds, and the output halves that pay them
    /// after the copy, checked in a pass of their own because an ACK was about to cover
    /// them (the stack's `csum_verified_for_ack`, counted in those rounds only). Near zero
    /// when the reader's buffer holds its receive buffer: the copy checked them first.
    pub split_round_acks_early: u64,
    /// Times the protocol thread gave idle packet memory back
    /// ([`RuntimeConfig::keep_idle_memory`]).
    pub idle_memory_releases: u64,
    /// The bytes it gave back, over those times.
    pub idle_memory_released: u64,
}
