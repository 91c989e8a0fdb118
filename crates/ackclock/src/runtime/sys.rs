//! The few system calls the protocol thread sleeps with: an eventfd other threads signal,
//! and ppoll(2) on it and the device's descriptor.

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

/// Sleep until one of `fds` is readable (or, for `want_out`, the second is writable), or
/// `timeout` passes (`None`: no timeout). EINTR counts as a wake-up.
pub(crate) fn wait(fds: &[RawFd], want_out: bool, timeout: Option<Duration>) -> io::Result<()> {
    let mut pfds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; 2];
    for (p, &fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd;
        p.events = libc::POLLIN;
    }
    if want_out && fds.len() > 1 {
        pfds[1].events |= libc::POLLOUT;
    }
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds.len()` (at most 2) valid pollfds, a valid or null timespec, no mask.
    let r = unsafe { libc::ppoll(pfds.as_mut_ptr(), fds.len().min(2) as libc::nfds_t, ts_ptr, core::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
