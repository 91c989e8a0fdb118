//! The few system calls the protocol thread sleeps with: an eventfd other threads signal,
//! a timerfd application threads arm, and ppoll(2) on those and the device's descriptor.

use crate::phy::Wakeup;
use core::time::Duration;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A non-blocking eventfd: [`wake`](Wakeup::wake) makes it readable until [`drain`](Self::drain).
#[derive(Debug)]
pub(crate) struct EventFd {
    fd: OwnedFd,
    /// Set by every wake, cleared by drain: what a thread about to sleep can spin on
    /// without a system call. The descriptor is written as well, always, so a sleeper in
    /// ppoll never misses a wake; the flag only lets it skip the sleep.
    rung: AtomicBool,
    /// Writes to the descriptor (statistics).
    signals: AtomicU64,
}

impl EventFd {
    pub(crate) fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd(2) with valid flags; the result is checked before use.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        Ok(EventFd {
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
            rung: AtomicBool::new(false),
            signals: AtomicU64::new(0),
        })
    }

    /// How many times the descriptor was written.
    pub(crate) fn signals(&self) -> u64 {
        self.signals.load(Ordering::Relaxed)
    }

    /// Whether a wake came since the last drain.
    pub(crate) fn rung(&self) -> bool {
        self.rung.load(Ordering::Acquire)
    }

    /// Reset the counter (readable again only after the next wake).
    pub(crate) fn drain(&self) {
        self.rung.store(false, Ordering::Release);
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a u64 on the stack. EAGAIN (nothing signalled) is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }
}

impl Wakeup for EventFd {
    fn wake(&self) {
        self.rung.store(true, Ordering::Release);
        self.signals.fetch_add(1, Ordering::Relaxed);
        let v = 1u64;
        // SAFETY: writes 8 bytes from a u64 on the stack. It fails only when the counter
        // would overflow, and then it is readable anyway.
        unsafe { libc::write(self.fd.as_raw_fd(), &v as *const u64 as *const libc::c_void, 8) };
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A non-blocking timerfd on the monotonic clock: how an application thread that ran a
/// round and armed a timer earlier than the protocol thread's sleep makes that sleep end in
/// time, with one system call and no wake-up now.
#[derive(Debug)]
pub(crate) struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    pub(crate) fn new() -> io::Result<TimerFd> {
        // SAFETY: timerfd_create(2) with valid flags; the result is checked before use.
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        Ok(TimerFd { fd: unsafe { OwnedFd::from_raw_fd(raw) } })
    }

    /// Become readable in `after` (at least a nanosecond: zero would disarm it).
    pub(crate) fn arm(&self, after: Duration) {
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: after.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid descriptor and itimerspec; the old value is not asked for.
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, core::ptr::null_mut()) };
    }

    /// Consume an expiry, if there was one (readable again only after the next).
    pub(crate) fn drain(&self) {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a u64 on the stack. EAGAIN (not expired) is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Sleep until one of `fds` (at most three) is readable (or, for `want_out`, the last is
/// writable), or `timeout` passes (`None`: no timeout). EINTR counts as a wake-up. Returns
/// which were ready: bit `i` for `fds[i]`.
pub(crate) fn wait(fds: &[RawFd], want_out: bool, timeout: Option<Duration>) -> io::Result<u8> {
    let mut pfds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; 3];
    let n = fds.len().min(3);
    for (p, &fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd;
        p.events = libc::POLLIN;
    }
    if want_out && n > 0 {
        pfds[n - 1].events |= libc::POLLOUT;
    }
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `n` (at most 3) valid pollfds, a valid or null timespec, no mask.
    let r = unsafe { libc::ppoll(pfds.as_mut_ptr(), n as libc::nfds_t, ts_ptr, core::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        return Ok(0);
    }
    Ok(pfds[..n].iter().enumerate().fold(0, |m, (i, p)| if p.revents != 0 { m | 1 << i } else { m }))
}
